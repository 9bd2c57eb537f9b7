"""The compatibility tier: kgctl against the Kafka versions users run besides 4.4.

One broker per situation, started lazily when a test first asks for it and shared by
the whole session (tied to pytest: if pytest dies, so do they, ZooKeeper included):
Kafka 3.7.2 (KRaft; no KIP-848), 3.9.1 in ZooKeeper mode, and 3.9.1 KRaft with the
consumer protocol on (KIP-848 preview). Tests put their situations side by side on a
shared broker, each in its own group and topic. `make kafka` resolves the versions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_broker import Compat

from kgctl.broker.local import LocalBroker


def _start(factory: pytest.TempPathFactory, name: str, **options: object) -> Iterator[Compat]:
    home = factory.mktemp(f"compat-{name}")
    broker = LocalBroker(home / "broker.json")
    state = broker.up(tie_to_parent=True, timeout_s=240, **options)  # type: ignore[arg-type]
    try:
        yield Compat(name, state.bootstrap, home, Path(state.nodes[0].log))
    finally:
        broker.down()


@pytest.fixture(scope="session")
def k37(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compat]:
    """Kafka 3.7.2, KRaft, its defaults for groups: no consumer protocol."""
    yield from _start(tmp_path_factory, "3.7.2", version="3.7.2")


@pytest.fixture(scope="session")
def k39zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compat]:
    """Kafka 3.9.1 in ZooKeeper mode: advertises ConsumerGroupDescribe, answers 35."""
    yield from _start(tmp_path_factory, "3.9.1-zk", version="3.9.1", metadata="zookeeper")


@pytest.fixture(scope="session")
def k39kip848(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compat]:
    """Kafka 3.9.1, KRaft, the consumer protocol on (preview); migration left at its
    3.9 default (disabled)."""
    yield from _start(tmp_path_factory, "3.9.1-kip848", version="3.9.1", consumer_protocol=True)


@pytest.fixture(params=["k37", "k39zk", "k39kip848"])
def any_broker(request: pytest.FixtureRequest) -> Compat:
    """Each broker of the tier in turn."""
    broker: Compat = request.getfixturevalue(request.param)
    return broker
