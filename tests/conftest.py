"""Test fixtures: one real Apache Kafka per test session, started through kgctl.broker.

Set KGCTL_TEST_BOOTSTRAP=host:port to run the suite against an existing cluster.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """The bootstrap address of a real broker for this test session."""
    existing = os.environ.get("KGCTL_TEST_BOOTSTRAP")
    if existing:
        return existing
    pytest.fail("no broker: the session broker fixture is not built yet")
