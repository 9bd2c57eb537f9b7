"""`kgctl join` against a real broker: members are real subprocesses, judged by events.

Run with KGCTL_TEST_BOOTSTRAP=127.0.0.1:19092 (or the session broker fixture).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import HEARTBEAT_MS, SESSION_MS, MemberProc, wait_converged

from kgctl.errors import ExitStatus

with warnings.catch_warnings():
    # kafka-python 3.0.12 builds its protocol classes with a deprecated importlib call.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewPartitions, NewTopic


@pytest.fixture
def group() -> str:
    return f"kgctl-test-group-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def spawn(bootstrap: str, topic: Any) -> Iterator[Callable[..., MemberProc]]:
    # Requests `topic` so that its members are killed before their topics are deleted.
    members: list[MemberProc] = []

    def start(group: str, *args: str, name: str) -> MemberProc:
        member = MemberProc(bootstrap, group, *args, name=name)
        members.append(member)
        return member

    yield start
    for member in members:
        member.kill()


pytestmark = [
    pytest.mark.kafka,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]


def test_two_members_converge_without_revoking_nothing_on_first_join(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t = topic(4)
    a = spawn(group, t, name="a")
    a.wait_event("JoinCompleted")
    b = spawn(group, t, name="b")
    generation = wait_converged([a, b], t, 4)
    assert generation >= 2
    for member in (a, b):
        first_done = member.of("JoinCompleted")[0]["seq"]
        revoked = member.of("PartitionsRevoked")
        # Java's onJoinPrepare calls no listener on a join without a generation.
        assert all(e["seq"] > first_done for e in revoked), member.name
        assert all(e["data"]["partitions"] for e in revoked), member.name
        assert member.of("RejoinRequested")[0]["data"]["reason"] == "first_join"
    # The leader saw both members and its plan is what each member received.
    leader = a if a.last_completed()["data"]["is_leader"] else b  # type: ignore[index]
    plan = leader.of("AssignmentComputed")[-1]["data"]["plan"]
    assert len(plan) == 2
    for member in (a, b):
        last = member.last_completed()
        assert last is not None
        assert plan[last["member_id"]] == last["data"]["assignment"]
    # The other member rejoined because the heartbeat said so.
    assert any(e["data"]["reason"] == "rebalance_in_progress" for e in a.of("RejoinRequested"))
    received = [e for e in a.of("JoinGroupReceived") if e["data"]["error"] == "NONE"]
    assert received[-1]["data"]["generation"] == generation
    # The rebalance reason went to the broker: JoinGroup v8+ (KIP-800).
    assert received[-1]["data"]["api_version"] >= 8
    # ... in the Java client's words (the event keeps kgctl's own reason).
    followed = [e for e in a.of("JoinGroupSent") if e["data"]["reason"] == "rebalance_in_progress"]
    assert followed, a.of("JoinGroupSent")
    assert {e["data"]["wire_reason"] for e in followed} == {"group is already rebalancing"}


def test_three_members_then_sigkill_rebalances_after_session_timeout(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t = topic(6)
    members = [spawn(group, t, name=n) for n in ("a", "b", "c")]
    generation = wait_converged(members, t, 6)
    killed_at = time.monotonic()
    members[2].proc.send_signal(signal.SIGKILL)
    members[2].proc.wait(timeout=5)
    survivors = members[:2]
    new_generation = wait_converged(survivors, t, 6, timeout=SESSION_MS / 1000 + 20)
    took = time.monotonic() - killed_at
    assert new_generation > generation
    # No LeaveGroup from a killed process: the broker waited for the session timeout.
    assert took >= SESSION_MS / 1000 * 0.8, took


def test_sigterm_leaves_with_reason_and_the_group_rebalances_quickly(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t = topic(4)
    a = spawn(group, t, "--commit", "sync", name="a")
    b = spawn(group, t, name="b")
    generation = wait_converged([a, b], t, 4)
    assert b.stop(signal.SIGTERM) == 0
    leave = b.of("LeaveGroupSent")
    assert leave and "SIGTERM" in leave[-1]["data"]["reason"]
    stopped = b.of("MemberStopped")
    assert stopped and stopped[-1]["data"]["reason"] == "SIGTERM"
    assert wait_converged([a], t, 4, timeout=SESSION_MS / 1000 + 20) > generation
    # Quickly means because of the LeaveGroup, not b's session expiring: a was told to
    # rejoin (by its next heartbeat) before b's session could have expired, which is at
    # the earliest one session timeout after b's last heartbeat. Judged on the members'
    # own timestamps, not on how fast this machine ran the test.
    rejoin = next(
        e for e in a.of("RejoinRequested") if e["data"]["reason"] == "rebalance_in_progress"
        and e["ts_ms"] >= leave[-1]["ts_ms"]
    )  # fmt: skip
    assert rejoin["ts_ms"] - leave[-1]["ts_ms"] < SESSION_MS - HEARTBEAT_MS, rejoin


@pytest.mark.parametrize(
    ("sig", "status"),
    [
        (signal.SIGINT, ExitStatus.INTERRUPTED),
        # The terminal a member ran in was closed: it still leaves, like SIGTERM.
        (signal.SIGHUP, ExitStatus.OK),
    ],
)
def test_sigint_and_sighup_leave_the_group_with_their_reason(
    spawn: Callable[..., MemberProc],
    topic: Callable[[int], str],
    group: str,
    sig: signal.Signals,
    status: ExitStatus,
) -> None:
    t = topic(1)
    a = spawn(group, t, name="a")
    a.wait_event("JoinCompleted")
    assert a.stop(sig) == int(status)
    leave = a.of("LeaveGroupSent")
    assert leave and sig.name in leave[-1]["data"]["reason"]
    assert a.of("MemberStopped")[-1]["data"]["reason"] == sig.name


def test_subscription_change_from_stdin_rejoins_with_its_reason(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t1, t2 = topic(2), topic(3)
    a = spawn(group, t1, name="a")
    first = a.wait_event("JoinCompleted")
    a.send({"op": "subscribe", "topics": [t1, t2]})
    a.wait_event("ControlReceived", op="subscribe", applied=True)
    rejoin = a.wait_event("RejoinRequested", reason="subscription_changed")
    assert rejoin["data"]["subscription"] == sorted([t1, t2])
    done = a.wait(
        lambda: [e for e in a.of("JoinCompleted") if e["seq"] > rejoin["seq"]], what="rejoin"
    )[0]
    assert done["data"]["generation"] > first["data"]["generation"]
    assert done["data"]["assignment"] == {t1: [0, 1], t2: [0, 1, 2]}
    sent = [e for e in a.of("JoinGroupSent") if e["seq"] > rejoin["seq"]]
    assert sent[0]["data"]["reason"] == "subscription_changed"


def converged_on(members: list[MemberProc], partitions: dict[str, int]) -> int | None:
    """Like `converged`, over several topics: the generation whose assignments split
    every partition of `partitions` between `members`, with no rebalance started since."""
    lasts = [m.last_completed() for m in members]
    if any(last is None for last in lasts):
        return None
    generations = {last["data"]["generation"] for last in lasts if last}
    if len(generations) != 1:
        return None
    owned: dict[str, list[int]] = {t: [] for t in partitions}
    for member, last in zip(members, lasts, strict=True):
        assert last is not None
        if any(e["seq"] > last["seq"] for e in member.of("RejoinRequested")):
            return None
        for t, ps in last["data"]["assignment"].items():
            owned.setdefault(t, []).extend(ps)
    if {t: sorted(ps) for t, ps in owned.items()} != {
        t: list(range(n)) for t, n in partitions.items()
    }:
        return None
    return generations.pop()


def test_live_switch_to_a_pattern_then_a_new_matching_topic_joins_the_assignment(
    spawn: Callable[..., MemberProc], group: str, admin: Any, topic: Any
) -> None:
    # Regression: members switched to a pattern through stdin used to stall (a join
    # that outlived one poll was never completed) or advertise an empty subscription.
    base = f"kgctl-test-pat-{uuid.uuid4().hex[:8]}"
    orders, audit, events = (topic.adopt(f"{base}.{n}") for n in ("orders", "audit", "events"))
    admin.create_topics([NewTopic(orders, 4, 1), NewTopic(audit, 2, 1)])
    members = [spawn(group, orders, name=n) for n in ("a", "b", "c")]
    first = members[0].wait(lambda: converged_on(members, {orders: 4}), 30, "converge")
    pattern = f"^{base}\\.(orders|audit|events)$"
    for m in members:
        m.send({"op": "subscribe", "pattern": pattern})
    for m in members:
        m.wait_event("ControlReceived", op="subscribe", applied=True)
    switched = members[0].wait(
        lambda: converged_on(members, {orders: 4, audit: 2}), 30, "converge on the pattern"
    )
    assert switched > first
    for m in members:
        # No member was left behind in REBALANCING (the stall) ...
        assert m.proc.poll() is None and not m.of("MemberFailed"), m.name
        # ... and every JoinGroup after the switch advertised the matched topics.
        for received in m.of("JoinGroupReceived"):
            for member in received["data"].get("members", []):
                assert member["topics"], (m.name, received)
    marks = {m.name: len(m.events) for m in members}
    admin.create_topics([NewTopic(events, 2, 1)])
    grown = members[0].wait(
        lambda: converged_on(members, {orders: 4, audit: 2, events: 2}),
        30,
        "converge on the new topic",
    )
    assert grown > switched
    # Each member's metadata listener matched the new topic: its subscription changed.
    # The leader watches the whole group's topics, so its assignment snapshot (the
    # metadata the last assignment used) changing is checked first, as in Java's
    # rejoinNeededOrPending. A member whose heartbeat told it first says so.
    reasons = {
        m.name: [e["data"] for e in m.events[marks[m.name] :] if e["type"] == "RejoinRequested"]
        for m in members
    }
    seen = [r for rs in reasons.values() for r in rs]
    assert seen and {r["reason"] for r in seen} <= {
        "metadata_changed", "subscription_changed", "rebalance_in_progress"
    }, reasons  # fmt: skip
    assert any(
        events in r.get("subscription", []) or events in r.get("partition_counts", {}) for r in seen
    ), reasons


def test_partition_growth_rejoins_with_metadata_changed(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str, admin: Any
) -> None:
    t = topic(2)
    a = spawn(group, t, name="a")
    b = spawn(group, t, name="b")
    generation = wait_converged([a, b], t, 2)
    admin.create_partitions({t: NewPartitions(total_count=4)})
    assert wait_converged([a, b], t, 4, timeout=30) > generation
    reasons = [e["data"]["reason"] for m in (a, b) for e in m.of("RejoinRequested")]
    assert "metadata_changed" in reasons
    changed = next(
        e for m in (a, b) for e in m.of("RejoinRequested")
        if e["data"]["reason"] == "metadata_changed"
    )  # fmt: skip
    assert changed["data"]["partition_counts"] == {t: 4}
    assert changed["data"]["assigned_with"] == {t: 2}


def test_rolling_upgrade_from_eager_to_cooperative_sticky_keeps_the_group_whole(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t = topic(6)
    mixed = ("--assignor", "cooperative-sticky", "--assignor", "range")
    coop = ("--assignor", "cooperative-sticky")

    def protocols(m: MemberProc) -> tuple[str, str]:
        prepared = m.of("JoinPrepared")[-1]["data"]["protocol"]
        return prepared, m.last_completed()["data"]["protocol"]  # type: ignore[index]

    # Step 1: both list [cooperative-sticky, range]: the group runs eager, like Java.
    a, b = spawn(group, t, *mixed, name="a1"), spawn(group, t, *mixed, name="b1")
    wait_converged([a, b], t, 6)
    assert protocols(a) == protocols(b) == ("eager", "cooperative-sticky")
    # Step 2: roll a to cooperative-sticky alone; b is still eager.
    assert a.stop() == 0
    a = spawn(group, t, *coop, name="a2")
    wait_converged([a, b], t, 6)
    assert protocols(a)[0] == "cooperative" and protocols(b)[0] == "eager"
    # Step 3: roll b too; then a third member joins cooperatively: the others keep
    # what they own (no revocation of everything), and the group ends whole.
    assert b.stop() == 0
    b = spawn(group, t, *coop, name="b2")
    wait_converged([a, b], t, 6)
    owned_before = {m.name: m.last_completed()["data"]["assignment"][t] for m in (a, b)}  # type: ignore[index]
    c = spawn(group, t, *coop, name="c")
    wait_converged([a, b, c], t, 6, timeout=45)
    for m in (a, b):
        assert protocols(m)[0] == "cooperative"
        kept = m.last_completed()["data"]["assignment"].get(t, [])  # type: ignore[index]
        assert set(kept) <= set(owned_before[m.name]) and kept, (m.name, owned_before, kept)
        assert not m.of("PartitionsLost")


def test_static_member_restart_within_session_timeout_keeps_the_generation(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t = topic(4)
    instance = f"static-{uuid.uuid4().hex[:6]}"
    leader = spawn(group, t, name="leader")
    leader.wait_event("JoinCompleted")
    static = spawn(group, t, "--instance-id", instance, name="static")
    generation = wait_converged([leader, static], t, 4)
    before = static.last_completed()
    assert before is not None
    assert static.stop(signal.SIGTERM) == 0
    assert not static.of("LeaveGroupSent")  # a static member does not leave on close
    again = spawn(group, t, "--instance-id", instance, name="static2")
    done = again.wait_event("JoinCompleted")
    assert done["data"]["generation"] == generation
    assert done["data"]["assignment"] == before["data"]["assignment"]
    # A rebalance would reach the leader through its next heartbeat: two heartbeats
    # answered without one is the window in which it would have shown.
    since = len(leader.events)
    leader.wait(
        lambda: [e for e in leader.events[since:] if e["type"] == "HeartbeatSucceeded"][1:],
        what="two heartbeats after the static member came back",
    )
    assert not [
        e for e in leader.of("RejoinRequested") if e["seq"] > leader.last_completed()["seq"]
    ]  # type: ignore[index]
    assert leader.last_completed()["data"]["generation"] == generation  # type: ignore[index]


def test_duplicate_instance_id_fences_the_older_member(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str
) -> None:
    t = topic(2)
    instance = f"dup-{uuid.uuid4().hex[:6]}"
    # --commit none: no offset commit can reveal the fencing, only the heartbeat can
    # (kafka-python alone would keep this member running as a zombie).
    old = spawn(group, t, "--instance-id", instance, "--commit", "none", name="old")
    old.wait_event("JoinCompleted")
    new = spawn(group, t, "--instance-id", instance, name="new")
    new.wait_event("JoinCompleted")
    code = old.proc.wait(timeout=5)
    old._reader.join(timeout=5)
    assert code == int(ExitStatus.FENCED)
    failed = old.of("MemberFailed")
    assert failed and failed[-1]["data"]["error"] == "FENCED_INSTANCE_ID"
    assert old.of("HeartbeatFailed")[-1]["data"]["error"] == "FENCED_INSTANCE_ID"
    err = old.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kgctl: error:") and "FENCED_INSTANCE_ID" in err[0]
    assert new.proc.poll() is None  # the newer member goes on


def test_records_consumed_committed_and_reported_at_exit(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str, bootstrap: str
) -> None:
    t = topic(2)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(30):
        producer.send(t, value=b"x", partition=i % 2)
    producer.flush()
    producer.close()
    a = spawn(group, t, "--commit", "sync", "--max-records", "30", name="a")
    assert a.proc.wait(timeout=30) == 0
    a._reader.join(timeout=5)
    consumed = a.of("RecordsConsumed")
    assert sum(e["data"]["count"] for e in consumed) == 30
    stopped = a.of("MemberStopped")[-1]["data"]
    assert stopped["reason"] == "max_records" and stopped["records"] == 30
    assert stopped["duplicates"] == 0
    assert stopped["committed"] == {t: {"0": 15, "1": 15}}
    assert not a.stdout_noise


def test_trace_topic_carries_every_event_the_member_printed(
    spawn: Callable[..., MemberProc],
    topic: Callable[[int], str],
    group: str,
    bootstrap: str,
    admin: Any,
) -> None:
    # The trace topic does not exist yet (the local broker creates no topic on first use):
    # the member creates it, with one partition.
    t, trace = topic(2), topic.adopt(f"kgctl-test-trace-{uuid.uuid4().hex[:10]}")
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(400):
        producer.send(t, value=b"x", partition=i % 2)
    producer.flush()
    producer.close()
    a = spawn(group, t, "--trace-topic", trace, "--max-records", "400", name="traced")
    assert a.proc.wait(timeout=60) == 0, a.stderr
    a._reader.join(timeout=5)
    printed = list(a.events)
    [described] = admin.describe_topics([trace])
    assert len(described["partitions"]) == 1
    assert printed[-1]["type"] == "MemberStopped"

    reader = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    part = TopicPartition(trace, 0)
    reader.assign([part])
    reader.seek_to_beginning(part)
    records: list[Any] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and reader.position(part) < reader.end_offsets([part])[part]:
        for batch in reader.poll(timeout_ms=500).values():
            records += batch
    reader.close()
    published = [json.loads(line) for r in records for line in r.value.splitlines()]
    # Every event, in order, as printed on stdout; keyed by group for a watch anywhere.
    assert published == printed
    assert {r.key for r in records} == {group.encode()}
    # Routine events are batched: fewer records than events.
    assert len(records) < len(published)


def test_unknown_topic_with_fail_on_missing_exits_not_found(
    spawn: Callable[..., MemberProc], group: str
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    a = spawn(group, missing, "--fail-on-missing", name="a")
    assert a.proc.wait(timeout=30) == int(ExitStatus.NOT_FOUND)
    assert missing in a.stderr and "does not exist" in a.stderr
    assert a.of("MemberFailed") and not a.of("JoinGroupSent")


@pytest.mark.parametrize(
    "args",
    [
        ["join", "-g", "g"],
        ["join", "-g", "g", "t", "--pattern", "t.*"],
        ["join", "t"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == int(ExitStatus.USAGE)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", ["unreachable"])
def test_unreachable_bootstrap_is_one_line_within_timeout(kind: str) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "join", "-b", "127.0.0.1:1", "-g", "g", "t",
         "--timeout", "3", "--output", "json"],
        capture_output=True, text=True, timeout=30, env={**os.environ},
    )  # fmt: skip
    assert done.returncode == int(ExitStatus.CANNOT_CONNECT)
    assert time.monotonic() - started < 3 + 8  # its --timeout, plus interpreter start-up
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach Kafka" in lines[0]
    for line in done.stdout.splitlines():  # json mode: only events on stdout
        assert json.loads(line)["type"] in ("MemberStarted", "MemberFailed", "MemberStopped")


def test_slow_processing_exceeds_max_poll_interval_loses_partitions_and_redelivers(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], group: str, bootstrap: str
) -> None:
    t = topic(1)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for _ in range(5):
        producer.send(t, value=b"x")
    producer.flush()
    producer.close()
    a = spawn(
        group, t, "--commit", "sync", "--max-poll-interval", "2000", "--processing-ms", "2600",
        name="slow",
    )  # fmt: skip
    a.wait_event("PollIntervalExceeded", timeout=20)
    leave = a.wait_event("LeaveGroupSent")
    assert leave["data"]["reason"] == "consumer poll timeout has expired."
    assert a.wait_event("GenerationReset")["data"]["cause"] == "poll_interval_exceeded"
    a.send({"op": "processing_ms", "value": 0})
    rejoin = a.wait_event("RejoinRequested", reason="poll_interval_exceeded")
    lost = a.wait_event("PartitionsLost")
    assert lost["data"]["partitions"] == {t: [0]} and lost["seq"] > rejoin["seq"]
    assert not [e for e in a.of("PartitionsRevoked") if e["seq"] > rejoin["seq"]]
    # The first batch's commit failed (the member had left), so it comes back.
    again = a.wait(
        lambda: [e for e in a.of("RecordsConsumed") if e["data"]["duplicates"] > 0],
        what="redelivered records",
    )
    assert again[0]["data"]["duplicates"] == 5
    assert a.stop() == 0
    assert a.of("MemberStopped")[-1]["data"]["duplicates"] == 5


def test_broker_learns_why_members_join_and_leave(
    spawn: Callable[..., MemberProc],
    topic: Callable[[int], str],
    group: str,
    broker_logs: list[Any],
    admin: Any,
) -> None:
    # kafka-python caps JoinGroup at v7 and sends no reason; the Java client (KIP-800)
    # tells the coordinator why it rejoins, and the broker logs it. So does kgctl, in the
    # Java client's words: a first join gives none (the broker asks for a member id, and
    # the second JoinGroup says why it comes), partition growth "cached metadata has
    # changed".
    t = topic(2)
    a = spawn(group, t, name="a")
    a.wait_event("JoinCompleted")
    admin.create_partitions({t: NewPartitions(4)})
    a.wait_event("RejoinRequested", reason="metadata_changed", timeout=30)
    a.wait(
        lambda: any(len(e["data"]["assignment"].get(t, [])) == 4 for e in a.of("JoinCompleted")),
        30,
        "a JoinCompleted with all 4 partitions",
    )
    assert a.stop(signal.SIGTERM) == 0

    def said() -> list[str]:
        text = "".join(log.read_text(errors="replace") for log in broker_logs)
        return [
            line
            for line in text.splitlines()
            if f"group {group}" in line or f"[Group {group}]" in line
        ]

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any("SIGTERM" in ln for ln in said()):
        time.sleep(0.2)
    lines = said()
    assert any("client reason: need to re-join with the given member-id: " in ln for ln in lines)
    assert any("client reason: cached metadata has changed" in ln for ln in lines), lines
    assert any(
        "LeaveGroup" in ln and "client reason: kgctl: member stopping (SIGTERM)" in ln
        for ln in lines
    ), lines
