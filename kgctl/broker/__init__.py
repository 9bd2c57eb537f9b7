"""A real local Apache Kafka (KRaft) for users without a cluster, the demo and the tests.

`provision` finds or fetches Kafka's jars; `local` formats storage, starts, checks and
stops the nodes and keeps their state in a file other shells can read. Import them
from their modules: this package itself imports nothing, so `kgctl broker --help` (which
reads the default version from `provision`) does not load kafka-python through `local`.
"""
