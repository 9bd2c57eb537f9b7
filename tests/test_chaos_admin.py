"""ChaosAdmin's reading of the cluster, on a fake admin client (no broker)."""

from __future__ import annotations

from typing import Any

from kgctl.adapters.chaos import ChaosAdmin
from kgctl.settings import ClientSettings


class _Admin:
    def __init__(self, brokers: list[dict[str, Any]]) -> None:
        self.brokers = brokers
        self.describes = 0

    def describe_cluster(self) -> dict[str, Any]:
        self.describes += 1
        return {"brokers": self.brokers}

    def describe_configs(self, *_a: Any, **_k: Any) -> dict[str, Any]:
        return {"broker": {"1": {"group.min.session.timeout.ms": {"value": "6000"}}}}


def _chaos_admin(fake: _Admin) -> ChaosAdmin:
    admin = ChaosAdmin.__new__(ChaosAdmin)
    admin.settings = ClientSettings(bootstrap="127.0.0.1:1")
    admin._admin = fake
    admin._brokers = None
    return admin


def test_a_cluster_that_describes_no_broker_gets_assumed_bounds_not_a_crash() -> None:
    bounds = _chaos_admin(_Admin([])).group_bounds()
    assert bounds.source == "kafka-defaults" and "no broker" in bounds.note


def test_the_cluster_is_described_once_for_the_broker_count_and_the_bounds() -> None:
    fake = _Admin([{"broker_id": 1}])
    admin = _chaos_admin(fake)
    assert admin.broker_count() == 1
    assert admin.group_bounds().min_session_ms == 6000
    assert fake.describes == 1
