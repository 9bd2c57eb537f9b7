"""A real local Apache Kafka (KRaft) for users without a cluster, the demo and the tests.

`provision` finds or fetches Kafka's jars; `local` formats storage, starts, checks and
stops the nodes and keeps their state in a file other shells can read.
"""

from kgctl.broker.local import BrokerState, LocalBroker
from kgctl.broker.provision import KafkaDistribution, resolve_kafka

__all__ = ["BrokerState", "KafkaDistribution", "LocalBroker", "resolve_kafka"]
