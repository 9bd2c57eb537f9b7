"""Test fixtures: one real Apache Kafka per test session, started through kgctl.broker.

Set KGCTL_TEST_BOOTSTRAP=host:port to run the suite against an existing cluster instead.
A second broker on Kafka's default group settings (`stock_bootstrap`) runs the built-in
scenarios as a user's cluster would; it starts only when a test asks for it.
The session broker is tied to the pytest process: if pytest dies, so does the broker.
"""

from __future__ import annotations

import os
import signal
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgctl.adapters.sockets import close_abandoned_connects
from kgctl.broker.local import LocalBroker

# A suite started with SIGINT ignored (a background job of a shell without job control)
# passes that on to every process it starts, and the tests that press Ctrl-C on kgctl
# saw it ignored (exit 0, not 130). The default is put back: an exec'd child then has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# kafka-python leaves a socket open when a client is closed mid-connect (see
# kgctl/adapters/sockets.py). The fix goes to every client in this process, the tests'
# plain kafka-python ones included: it changes nothing a broker sees, and the collector
# would otherwise fail whichever test it happened to run in with a ResourceWarning.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    close_abandoned_connects()


@pytest.fixture(scope="session")
def session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker | None]:
    if os.environ.get("KGCTL_TEST_BOOTSTRAP"):
        yield None
        return
    home: Path = tmp_path_factory.mktemp("kgctl-session-broker")
    broker = LocalBroker(home / "broker.json")
    broker.up(tie_to_parent=True, timeout_s=180)
    try:
        yield broker
    finally:
        broker.down()


@pytest.fixture(scope="session")
def stock_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second broker keeping Kafka's own group settings, as most real clusters do
    (a 6 s minimum session timeout, a 3 s initial rebalance delay).

    Set KGCTL_TEST_STOCK_BOOTSTRAP=host:port to use an existing cluster instead; with only
    KGCTL_TEST_BOOTSTRAP set, that cluster is used for these tests too.
    """
    existing = os.environ.get("KGCTL_TEST_STOCK_BOOTSTRAP") or os.environ.get(
        "KGCTL_TEST_BOOTSTRAP"
    )
    if existing:
        yield existing
        return
    home: Path = tmp_path_factory.mktemp("kgctl-stock-broker")
    broker = LocalBroker(home / "broker.json")
    state = broker.up(kafka_defaults=True, tie_to_parent=True, timeout_s=180)
    try:
        yield state.bootstrap
    finally:
        broker.down()


@pytest.fixture(scope="session")
def bootstrap(session_broker: LocalBroker | None) -> str:
    """The bootstrap address of a real broker for this test session."""
    existing = os.environ.get("KGCTL_TEST_BOOTSTRAP")
    if existing:
        return existing
    assert session_broker is not None
    state = session_broker.load()
    assert state is not None
    return state.bootstrap


@pytest.fixture(scope="session")
def broker_logs(session_broker: LocalBroker | None) -> list[Path]:
    """The server logs of the session broker (what the broker itself says)."""
    if session_broker is None:
        pytest.skip("KGCTL_TEST_BOOTSTRAP points at a cluster whose logs kgctl cannot read")
    state = session_broker.load()
    assert state is not None
    return [Path(node.log) for node in state.nodes]


@pytest.fixture
def admin(bootstrap: str) -> Iterator[Any]:
    """A kafka-python admin client on the session broker."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    yield client
    client.close()


class TopicFactory:
    """`topic(partitions)` creates a fresh topic and returns its name; `topic.adopt(name)`
    takes on one that the test made exist another way (a member creating its trace topic).
    The fixture deletes them all when the test ends."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        self.created: list[str] = []

    def __call__(self, partitions: int = 4, prefix: str = "kgctl-test") -> str:
        from kafka.admin import NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.admin.create_topics([NewTopic(name, partitions, 1)])
        return self.adopt(name)

    def adopt(self, name: str) -> str:
        self.created.append(name)
        return name


@pytest.fixture
def topic(admin: Any) -> Iterator[TopicFactory]:
    """Fresh topics for one test, deleted when it ends (also on a shared cluster)."""
    factory = TopicFactory(admin)
    yield factory
    # A test may have deleted some itself (or shown that kgctl did): delete the rest.
    left = sorted(set(factory.created) & set(admin.list_topics()))
    if left:
        admin.delete_topics(left)
