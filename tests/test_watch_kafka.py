"""`kgctl watch` against a real broker, with plain kafka-python consumers as the group."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.kafka

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401


# kafka-python 3.0.12 can strand a member whose poll() returns while its SyncGroup is
# still in flight (root-caused in docs/benchmarks.md): the broker then drops it. These
# consumers are the group under watch, not the subject of the test, so they poll long
# enough for a join to finish inside one poll.
PLAIN_POLL_MS = 2000


class PlainConsumer(threading.Thread):
    """A plain kafka-python KafkaConsumer polling in a thread until stopped, noting the
    generation of every assignment it gets."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.group, self.client_id = bootstrap, topic, group, name
        self.stopping = threading.Event()
        self.assigned = threading.Event()  # set once it owns a partition
        self.generations: list[int] = []  # as the consumer's coordinator knew them
        self.error: BaseException | None = None

    @property
    def generation(self) -> int:
        return self.generations[-1] if self.generations else -1

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        consumer: Any = None
        owner = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, assigned: Any) -> None:
                owner.generations.append(consumer._coordinator._generation.generation_id)
                if assigned:
                    owner.assigned.set()

        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                client_id=self.client_id,
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
                metadata_max_age_ms=1000,  # notice a topic that grew within a second
            )
            consumer.subscribe([self.topic], listener=Listener())
            try:
                while not self.stopping.is_set():
                    consumer.poll(timeout_ms=PLAIN_POLL_MS)
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=20)


class WatchProcess:
    """`python -m kgctl watch ...` with its JSON lines collected as they arrive."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgctl", "watch", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def wait_for(
        self, what: str, match: Callable[[dict[str, Any]], bool], timeout: float = 45
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for ev in self.events:
                    if match(ev):
                        return ev
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.1)
        with self.lock:
            seen = [(e["type"], e.get("client_id"), e["data"].get("cause")) for e in self.events]
        pytest.fail(f"no {what} within {timeout}s; saw {seen}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def topic(bootstrap: str) -> Iterator[str]:
    from kafka.admin import KafkaAdminClient, NewTopic

    name = f"watch-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 4, 1)])
        yield name
        admin.delete_topics([name])
    finally:
        admin.close()


def _is(type_: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def match(ev: dict[str, Any]) -> bool:
        if ev["type"] != type_:
            return False
        for key, want in fields.items():
            have = ev.get(key, ev["data"].get(key))
            if have != want:
                return False
        return True

    return match


def test_watch_infers_join_leave_generations_and_causes(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = PlainConsumer(bootstrap, topic, group, f"first-{group}")
    second = PlainConsumer(bootstrap, topic, group, f"second-{group}")
    watch: WatchProcess | None = None
    try:
        first.start()
        assert first.assigned.wait(30), f"first consumer never got partitions: {first.error}"
        # DescribeGroups polling alone: the inference (stored generations: see
        # test_watch_generations_kafka.py).
        watch = WatchProcess(
            [group, "-b", bootstrap, "--output", "json", "--interval", "0.3", "--no-offsets-topic"]
        )
        snap = watch.wait_for("a Stable snapshot", _is("GroupObserved", state="Stable"))
        assert [m["client_id"] for m in snap["data"]["members"]] == [first.client_id]
        assert snap["data"]["members"][0]["partitions"] == {topic: [0, 1, 2, 3]}

        second.start()
        joined = watch.wait_for(
            "second's MemberJoinedGroup", _is("MemberJoinedGroup", client_id=second.client_id)
        )
        assert joined["member_id"].startswith(second.client_id)
        assert joined["host"]
        gen = watch.wait_for("a GenerationChanged", _is("GenerationChanged", generation=1))
        assert gen["data"]["inferred"] is True
        cause = watch.wait_for("the join's cause", _is("RebalanceAttributed", generation=1))
        assert cause["data"]["cause"] == "member_joined"
        assert cause["data"]["guess"] is False
        assert second.client_id in cause["data"]["evidence"]
        moved = watch.wait_for("PartitionsMoved", _is("PartitionsMoved", generation=1))
        assert {m["to_client"] for m in moved["data"]["moves"]} == {second.client_id}

        first.stop()
        left = watch.wait_for(
            "first's MemberLeftGroup", _is("MemberLeftGroup", client_id=first.client_id)
        )
        assert left["data"]["reason"]
        watch.wait_for("a second GenerationChanged", _is("GenerationChanged", generation=2))
        cause = watch.wait_for("the leave's cause", _is("RebalanceAttributed", generation=2))
        assert cause["data"]["cause"] == "member_left"
        assert first.client_id in cause["data"]["evidence"]
        final = watch.wait_for(
            "a snapshot with only the second consumer",
            lambda e: (
                e["type"] == "GroupObserved"
                and [m["client_id"] for m in e["data"]["members"]] == [second.client_id]
                and e["data"]["state"] == "Stable"
                and e["data"]["members"][0].get("partitions") == {topic: [0, 1, 2, 3]}
            ),
        )
        assert final["source"] == "observer"
    finally:
        first.stop()
        second.stop()
        if watch is not None:
            watch.kill()
    assert first.error is None and second.error is None


def test_watch_once_prints_one_snapshot(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = PlainConsumer(bootstrap, topic, group, f"once-{group}")
    try:
        consumer.start()
        assert consumer.assigned.wait(30)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kgctl",
                "watch",
                group,
                "-b",
                bootstrap,
                "--once",
                "-o",
                "json",
                "--events",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        types = [e["type"] for e in events]
        assert types == ["GroupObserved", "GenerationSourceChanged", "GenerationChanged"]
        # The generation is the broker's (stored in __consumer_offsets), the consumer's own.
        generation = events[2]
        assert generation["data"]["inferred"] is False
        assert generation["generation"] == consumer.generation > 0
        data = events[0]["data"]
        assert data["state"] == "Stable" and data["protocol_type"] == "consumer"
        assert data["protocol"] == "range"
        assert data["coordinator"].endswith(bootstrap.rsplit(":", 1)[1])
        assert [m["client_id"] for m in data["members"]] == [consumer.client_id]
        assert data["members"][0]["partitions"] == {topic: [0, 1, 2, 3]}
        assert data["total_lag"] == 0
        # Without --events: one document, the group now and its generation diagnosed.
        doc = json.loads(
            subprocess.run(
                [sys.executable, "-m", "kgctl", "watch", group, "-b", bootstrap, "--once"]
                + ["-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
        )
        assert doc["healthy"] and doc["state"]["state"] == "Stable"
        assert doc["state"]["generation"] == consumer.generation
        assert [m["client_id"] for m in doc["state"]["members"]] == [consumer.client_id]
        # Newest first: the consumer's generation, its trigger named from the broker's records.
        newest = doc["generations"][0]
        assert newest["generation"] == consumer.generation
        assert newest["trigger"]["cause"] != "unknown"
    finally:
        consumer.stop()


def test_watch_lists_groups_with_state_and_members(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = PlainConsumer(bootstrap, topic, group, f"list-{group}")
    try:
        consumer.start()
        assert consumer.assigned.wait(30)
        done = subprocess.run(
            [sys.executable, "-m", "kgctl", "watch", "-b", bootstrap, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        listed = {g["group"]: g for g in json.loads(done.stdout)}
        assert listed[group]["state"] == "Stable"
        assert listed[group]["members"] == 1
    finally:
        consumer.stop()


def test_missing_group_fails_with_not_found_when_asked(bootstrap: str) -> None:
    group = f"missing-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "watch", group, "-b", bootstrap, "--fail-if-missing"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4
    assert f"group {group!r} does not exist" in done.stderr
    assert done.stdout == ""


def test_missing_group_is_waited_for_until_it_appears(bootstrap: str, topic: str) -> None:
    group = f"later-{uuid.uuid4().hex[:8]}"
    watch = WatchProcess([group, "-b", bootstrap, "-o", "json", "--interval", "0.3"])
    consumer = PlainConsumer(bootstrap, topic, group, f"later-{group}")
    try:
        watch.wait_for("a missing snapshot", _is("GroupObserved", missing=True))
        consumer.start()
        watch.wait_for("the member joining", _is("MemberJoinedGroup", client_id=consumer.client_id))
        cause = watch.wait_for("the cause", _is("RebalanceAttributed", generation=1))
        assert cause["data"]["cause"] == "member_joined"
    finally:
        consumer.stop()
        watch.kill()
    assert watch.proc.stderr is not None
