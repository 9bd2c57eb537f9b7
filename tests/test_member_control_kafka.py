"""Live control of a `kgctl join` member against a real broker, as a person drives it:
pause, resume, commit and leave, sent on stdin or through `--control-topic`."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import MemberProc, wait_converged

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = pytest.mark.kafka


@pytest.fixture
def producer(bootstrap: str) -> Iterator[Any]:
    client = KafkaProducer(bootstrap_servers=bootstrap)
    yield client
    client.close()


def consumed_offsets(member: MemberProc, topic: str, partition: int) -> set[int]:
    return {
        offset
        for e in member.of("RecordsConsumed")
        for b in e["data"]["batches"]
        if b["topic"] == topic and b["partition"] == partition
        for offset in range(b["first"], b["last"] + 1)
    }


@pytest.mark.parametrize("via", ["stdin", "control-topic"])
def test_pause_resume_commit_and_leave(
    via: str, bootstrap: str, topic: Any, admin: Any, producer: Any
) -> None:
    t = topic(2)
    group = f"kgctl-test-control-{uuid.uuid4().hex[:8]}"
    extra: list[str] = []
    if via == "control-topic":
        control = topic(1, prefix="kgctl-test-control")
        extra = ["--control-topic", control]
    # --commit none: only the `commit` command commits anything.
    a = MemberProc(bootstrap, group, t, "--commit", "none", *extra, name="a")
    b = MemberProc(bootstrap, group, t, name="b")
    try:
        wait_converged([a, b], t, 2)
        [mine] = a.last_completed()["data"]["assignment"][t]  # type: ignore[index]
        source = "stdin" if via == "stdin" else "topic"

        def send(command: dict[str, Any]) -> dict[str, Any]:
            if via == "stdin":
                a.send(command)
            else:  # keyed by the member's --name: only `a` obeys it
                producer.send(control, key=b"a", value=json.dumps(command).encode()).get(30)
            return a.wait_event("ControlReceived", op=command["op"], source=source)

        def produce(n: int) -> None:
            for _ in range(n):
                producer.send(t, value=b"x", partition=mine)
            producer.flush()

        produce(10)
        a.wait(lambda: consumed_offsets(a, t, mine) == set(range(10)), what="10 records")

        # pause: fetching stops, the member stays in the group.
        assert send({"op": "pause"})["data"]["applied"] is True
        paused_at = len(a.events)
        produce(10)
        # Four heartbeats (500 ms apart) after the records were written: an unpaused
        # member would have fetched them within one poll. None came, and a stayed in.
        a.wait(
            lambda: (
                len([e for e in a.events[paused_at:] if e["type"] == "HeartbeatSucceeded"]) >= 4
            ),
            what="four heartbeats while paused",
        )
        assert consumed_offsets(a, t, mine) == set(range(10))
        assert not [e for e in a.events[paused_at:] if e["type"] == "RejoinRequested"]

        # resume: the ten written meanwhile arrive.
        assert send({"op": "resume"})["data"]["applied"] is True
        a.wait(lambda: consumed_offsets(a, t, mine) == set(range(20)), what="20 records")
        assert not a.of("OffsetsCommitted"), "--commit none committed"

        # commit: what was consumed is committed, on the broker too.
        assert send({"op": "commit"})["data"]["applied"] is True
        done = a.wait_event("OffsetsCommitted")
        assert done["data"]["offsets"] == {t: {str(mine): 20}}
        stored = admin.list_group_offsets(group)[group]
        assert {tp.partition: m.offset for tp, m in stored.items() if tp.topic == t}[mine] == 20

        # leave: like SIGTERM, with its reason; b gets both partitions.
        generation = b.last_completed()["data"]["generation"]  # type: ignore[index]
        assert send({"op": "leave"})["data"]["applied"] is True
        assert a.proc.wait(timeout=15) == 0, a.stderr
        a.wait(lambda: a.of("MemberStopped"), what="MemberStopped")
        assert a.of("MemberStopped")[-1]["data"]["reason"] == "control_leave"
        assert "control_leave" in a.of("LeaveGroupSent")[-1]["data"]["reason"]
        assert wait_converged([b], t, 2) > generation
    finally:
        a.kill()
        b.kill()


def test_a_control_line_for_another_member_or_not_understood_changes_nothing(
    bootstrap: str, topic: Any, producer: Any
) -> None:
    t, control = topic(1), topic(1, prefix="kgctl-test-control")
    group = f"kgctl-test-control-{uuid.uuid4().hex[:8]}"
    a = MemberProc(bootstrap, group, t, "--control-topic", control, name="a")
    try:
        a.wait_event("JoinCompleted")
        producer.send(control, key=b"someone-else", value=b'{"op": "leave"}').get(30)
        producer.send(control, key=b"a", value=b'{"op": "explode"}').get(30)
        rejected = a.wait_event("ControlReceived", source="topic")
        assert rejected["data"]["applied"] is False and "unknown op" in rejected["data"]["error"]
        # The leave for someone else was never received; the member is still in the group.
        assert [e["data"]["op"] for e in a.of("ControlReceived")] == ["explode"]
        assert a.proc.poll() is None
    finally:
        a.kill()
