"""Apache Kafka's VerifiableConsumer (artifact kafka-tools) for the Java members.

Fetched once with Maven and cached by `kgctl.broker.provision.resolve_kafka_tools`
(shared with the tests); jars are never committed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kgctl.broker.provision import resolve_kafka_tools

KAFKA_TOOLS_VERSION = "4.4.0"


def tools_libs(version: str = KAFKA_TOOLS_VERSION, say: Callable[[str], None] = print) -> Path:
    """The directory holding kafka-tools and its runtime jars (fetched on first use)."""
    return resolve_kafka_tools(version, say=say)
