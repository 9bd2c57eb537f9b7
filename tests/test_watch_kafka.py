"""`kgctl watch` against a real broker, with plain kafka-python consumers as the group."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from helpers import PlainConsumer, WatchProcess, event_is

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(topic: Any) -> str:
    """One 4-partition topic per test, from conftest's factory (which deletes it)."""
    return str(topic(4, prefix="watch"))


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
        snap = watch.wait_for("a Stable snapshot", event_is("GroupObserved", state="Stable"))
        assert [m["client_id"] for m in snap["data"]["members"]] == [first.client_id]
        assert snap["data"]["members"][0]["partitions"] == {topic: [0, 1, 2, 3]}

        second.start()
        joined = watch.wait_for(
            "second's MemberJoinedGroup", event_is("MemberJoinedGroup", client_id=second.client_id)
        )
        assert joined["member_id"].startswith(second.client_id)
        assert joined["host"]
        gen = watch.wait_for("a GenerationChanged", event_is("GenerationChanged", generation=1))
        assert gen["data"]["inferred"] is True
        cause = watch.wait_for("the join's cause", event_is("RebalanceAttributed", generation=1))
        assert cause["data"]["cause"] == "member_joined"
        assert cause["data"]["guess"] is False
        assert second.client_id in cause["data"]["evidence"]
        moved = watch.wait_for("PartitionsMoved", event_is("PartitionsMoved", generation=1))
        assert {m["to_client"] for m in moved["data"]["moves"]} == {second.client_id}

        first.stop()
        left = watch.wait_for(
            "first's MemberLeftGroup", event_is("MemberLeftGroup", client_id=first.client_id)
        )
        assert left["data"]["reason"]
        watch.wait_for("a second GenerationChanged", event_is("GenerationChanged", generation=2))
        cause = watch.wait_for("the leave's cause", event_is("RebalanceAttributed", generation=2))
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
        watch.wait_for("a missing snapshot", event_is("GroupObserved", missing=True))
        consumer.start()
        watch.wait_for(
            "the member joining", event_is("MemberJoinedGroup", client_id=consumer.client_id)
        )
        # The group's first rebalance, whatever the broker numbered it: a loaded CI run
        # (stop 37's rehearsal) waited for generation 1 and saw only another one (a join
        # the client retried; the broker stores a generation once its SyncGroup is done).
        cause = watch.wait_for("the cause", event_is("RebalanceAttributed"))
        assert cause["data"]["cause"] == "member_joined", cause
        with watch.lock:
            stored = [e["generation"] for e in watch.events if e["type"] == "GenerationChanged"]
        assert stored and stored[0] == cause["generation"] >= 1, (stored, cause)
    finally:
        consumer.stop()
        watch.kill()
    assert watch.proc.stderr is not None
