"""Cluster-level calls through kafka-python: is it up, which brokers answer."""

from __future__ import annotations

import logging
from typing import Any

from kgctl.settings import ClientSettings


def describe_cluster(settings: ClientSettings) -> dict[str, Any]:
    """The cluster id, controller and live brokers, or raise the client's error."""
    from kafka import KafkaAdminClient

    cfg = settings.kafka_config()
    cfg["request_timeout_ms"] = min(cfg["request_timeout_ms"], 5000)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    admin = KafkaAdminClient(**cfg)
    try:
        return dict(admin.describe_cluster())
    finally:
        admin.close()
