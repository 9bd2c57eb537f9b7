"""`kgctl watch` on a KIP-848 (`consumer` protocol) group of real Java consumers.

The members are Apache Kafka's own VerifiableConsumer with `--group-protocol consumer`
(kafka-tools jars, fetched once by `make test` / `resolve_kafka_tools`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import verifiable_consumer

from kgctl.broker.provision import resolve_kafka_tools
from kgctl.model.events import Event
from kgctl.model.snapshot import GroupSnapshot
from kgctl.settings import ClientSettings

pytestmark = pytest.mark.kafka

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kgctl.adapters.admin import GroupAdmin
    from kgctl.observe.watch import Watch


class JavaMember:
    """One VerifiableConsumer JVM in the group, on the consumer protocol."""

    def __init__(self, libs: Path, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.name = name
        self.proc, self.props = verifiable_consumer(
            libs, bootstrap, group, topic, protocol="consumer",
            properties={"client.id": name}, extra=("--close-timeout", "5000"),
        )  # fmt: skip

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: the JVM's shutdown hook closes the consumer, which leaves the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.props.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def kafka_tools() -> Path:
    return resolve_kafka_tools()


@pytest.fixture
def topic(topic: Any) -> str:
    """One 4-partition topic per test, from conftest's factory (which deletes it)."""
    return str(topic(4, prefix="kip848"))


class Fleet:
    """The Java members of one group; every JVM is killed when the test ends."""

    def __init__(self, libs: Path, bootstrap: str, topic: str) -> None:
        self.libs, self.bootstrap, self.topic = libs, bootstrap, topic
        self.group = f"kip848-{uuid.uuid4().hex[:8]}"
        self.members: dict[str, JavaMember] = {}

    def start(self, name: str) -> None:
        self.members[name] = JavaMember(self.libs, self.bootstrap, self.group, self.topic, name)

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        self.members[name].stop(sig)


@pytest.fixture
def fleet(kafka_tools: Path, bootstrap: str, topic: str) -> Iterator[Fleet]:
    f = Fleet(kafka_tools, bootstrap, topic)
    try:
        yield f
    finally:
        for name in f.members:
            f.stop(name, signal.SIGKILL)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    pytest.fail(f"no {what} within {timeout}s (last: {last!r})")


def settled(admin: GroupAdmin, group: str, count: int) -> GroupSnapshot | None:
    snap = admin.describe(group, with_lag=False)
    if snap.state != "Stable" or len(snap.members) != count:
        return None
    if any(m.reconciling or not m.partitions for m in snap.members):
        return None
    return snap


def test_watch_describes_a_consumer_protocol_group_and_its_epoch_changes(
    bootstrap: str, topic: str, fleet: Fleet
) -> None:
    group = fleet.group
    fleet.start("java-a")
    fleet.start("java-b")
    settings = ClientSettings(bootstrap=bootstrap)
    admin = GroupAdmin(settings)
    try:
        wait_for("2 reconciled members", lambda: settled(admin, group, 2), timeout=90)
        assert admin.kip848 is True
    finally:
        admin.close()

    # The CLI, one snapshot as JSON.
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "watch", group, "-b", bootstrap, "--once"]
        + ["--output", "json", "--events"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    observed = [json.loads(line) for line in done.stdout.splitlines()]
    snap = next(e["data"] for e in observed if e["type"] == "GroupObserved")
    assert snap["group_type"] == "consumer" and snap["protocol_type"] == "consumer"
    assert snap["state"] == "Stable" and snap["group_epoch"] >= 2
    assert snap["assignment_epoch"] == snap["group_epoch"]
    assert sorted(m["client_id"] for m in snap["members"]) == ["java-a", "java-b"]
    owned: list[tuple[str, int]] = []
    for m in snap["members"]:
        assert 0 < m["member_epoch"] <= snap["group_epoch"]
        assert m["partitions"] == m["target"] and m["reconciling"] is False
        assert m["member_type"] == "consumer"
        owned += [(t, p) for t, ps in m["partitions"].items() for p in ps]
    assert sorted(owned) == [(topic, p) for p in range(4)], "disjoint and complete"

    # The observer API while a third member joins, then one leaves.
    with Watch(settings, group, interval_s=0.3) as watch:
        watch.first_snapshot()
        watch.start()
        watch.drain()
        epoch0 = watch.state.group_epoch
        seen: list[Event] = []

        def new_epoch(cause: str) -> Event | None:
            seen.extend(watch.drain(wait_s=0.5))
            return next(
                (
                    e
                    for e in seen
                    if e.type == "GenerationChanged"
                    and e.data.get("cause") == cause
                    and e.generation > epoch0
                ),
                None,
            )

        fleet.start("java-c")
        joined = wait_for(
            "an epoch change caused by java-c joining", lambda: new_epoch("member_joined")
        )
        assert joined.data["inferred"] is False and joined.data["guess"] is False
        assert "java-c" in joined.data["evidence"]
        assert joined.data["previous"] == epoch0 and joined.generation == joined.data["group_epoch"]
        assert any(e.type == "MemberJoinedGroup" and e.client_id == "java-c" for e in seen)

        def three_reconciled() -> bool:
            seen.extend(watch.drain(wait_s=0.5))
            s = watch.state
            live = s.live_members
            return (
                s.state == "Stable"
                and len(live) == 3
                and all(m.epoch == s.group_epoch and not m.reconciling for m in live)
            )

        wait_for("3 reconciled members", three_reconciled)
        moved = [e for e in seen if e.type == "PartitionsMoved"]
        assert moved and all(mv["to_client"] == "java-c" for mv in moved[-1].data["moves"])
        rec = watch.state.current
        assert rec is not None and rec.generation >= joined.generation
        assert rec.stable_ms is not None

        epoch0 = watch.state.group_epoch
        leaving = next(m for m in watch.state.live_members if m.client_id == "java-a")
        fleet.stop("java-a")
        left = wait_for(
            "an epoch change caused by java-a leaving", lambda: new_epoch("member_left")
        )
        assert leaving.member_id in {e.member_id for e in seen if e.type == "MemberLeftGroup"}, (
            "the leaving member was reported by id"
        )
        assert left.data["previous"] == epoch0

        # What the view says of those epochs: the broker's epochs, named, no barrier.
        def two_reconciled() -> bool:
            seen.extend(watch.drain(wait_s=0.5))
            s = watch.state
            return (
                s.state == "Stable"
                and len(s.live_members) == 2
                and not any(m.reconciling for m in s.live_members)
            )

        wait_for("2 reconciled members", two_reconciled)
        found = watch.diagnoses(watch.clock())
        by_cause = {d.trigger.cause: d for d in found.values()}
        assert by_cause["member_joined"].trigger.who == "java-c"
        assert by_cause["member_left"].trigger.who == "java-a"
        for d in found.values():
            assert d.group_epoch and d.label == f"group epoch {d.generation}"
            assert not any(a.pattern == "kip-848" for a in d.advice)
            assert "unknown" not in json.dumps(d.to_dict()), d

    # explain, after the fact: the group now, in epochs.
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "explain", group, "-b", bootstrap, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["healthy"], doc["health"]
    assert doc["health"] == f"stable now, 2 members in group epoch {doc['state']['group_epoch']}"
    assert doc["state"]["group_type"] == "consumer"


def test_a_live_watch_dates_a_consumer_group_s_rebalance_by_its_epoch_record(
    bootstrap: str,
    topic: str,
    admin: Any,
) -> None:
    """At a 10 s interval the description that shows a new epoch comes up to 10 s after
    the rebalance began; the epoch's record in __consumer_offsets is written as it
    begins (between the joining member's ConsumerGroupHeartbeat and its answer). The
    live watch dates the rebalance by the record, as the monitor does."""
    from contextlib import suppress

    from helpers import MemberProc
    from kafka.errors import CoordinatorNotAvailableError

    group = f"kip848-{uuid.uuid4().hex[:8]}-rec"
    with suppress(CoordinatorNotAvailableError):  # __consumer_offsets exists from here on
        admin.list_group_offsets(f"{group}-probe")
    members: list[MemberProc] = []
    settings = ClientSettings(bootstrap=bootstrap)
    try:
        a = MemberProc(bootstrap, group, topic, name="a", protocol="consumer")
        members.append(a)
        a.wait(lambda: a.of("ReconciliationCompleted"), 60, "a's first assignment")
        with Watch(settings, group, interval_s=10) as watch:
            watch.first_snapshot()
            watch.start()
            assert watch.epochs_followed.wait(30), "the epoch records not followed"
            epoch0 = watch.drain() and watch.state.group_epoch
            b = MemberProc(bootstrap, group, topic, name="b", protocol="consumer")
            members.append(b)

            def joined() -> Any:
                watch.drain(wait_s=0.5)
                return next((g for g in watch.state.generations if g.generation > epoch0), None)

            gen = wait_for("the epoch of b's join", joined, timeout=40)
            sent = next(
                e for e in b.of("GroupHeartbeatAnswered")
                if e["data"]["sent"]["member_epoch"] == 0
            )  # fmt: skip
            written_from = sent["ts_ms"] - sent["data"]["rtt_ms"] - 5
            written_to = sent["ts_ms"] + 5
            assert written_from <= gen.start_ms <= written_to, (gen, sent)
    finally:
        for m in members:
            m.kill()
