"""Cluster-level calls through kafka-python: is it up, which brokers answer."""

from __future__ import annotations

import logging
from typing import Any

from kgctl.adapters import clients
from kgctl.settings import ClientSettings


def describe_cluster(settings: ClientSettings) -> dict[str, Any]:
    """The cluster id, controller and live brokers, or raise a kgctl error."""
    # Asked again and again while a broker starts: kafka-python's retry logs would only
    # repeat what the caller reports itself.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    timeout_ms = min(settings.kafka_config()["request_timeout_ms"], 5000)
    admin = clients.admin(settings, "kgctl-cluster-check", request_timeout_ms=timeout_ms)
    try:
        return dict(admin.describe_cluster())
    finally:
        admin.close()
