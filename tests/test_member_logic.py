"""Pure tests of the member's decisions, control parsing, totals and text rendering."""

from __future__ import annotations

import io
import json
import math
import signal
import threading
import time
from typing import Any

import pytest

from kgctl.adapters.clients import join_retry
from kgctl.errors import ExitStatus, FencedError, NotAuthorizedError, UsageError
from kgctl.member.control import ControlQueue, parse_command
from kgctl.member.emitter import Emitter
from kgctl.member.reasons import fatal_error
from kgctl.member.runner import Member, MemberConfig
from kgctl.member.stats import ConsumeStats
from kgctl.model.events import EVENT_TYPES, Event
from kgctl.model.reasons import RejoinReason, partitions_changed, rejoin_reason
from kgctl.recordings import event_of_line
from kgctl.render.chaos_view import event_line
from kgctl.render.group_view import describe_event
from kgctl.render.member_lines import MemberHeader, describe, render_line, summary_lines
from kgctl.render.proxy_lines import describe_wire
from kgctl.settings import ClientSettings


def reason(**kw: object) -> RejoinReason:
    base = dict(
        joined_before=True, metadata_changed=False, subscription_changed=False, pending=None
    )
    base.update(kw)
    return rejoin_reason(**base)  # type: ignore[arg-type]


def test_first_join_wins_over_everything_else() -> None:
    assert (
        reason(joined_before=False, subscription_changed=True, pending="generation_reset")
        is RejoinReason.FIRST_JOIN
    )


def test_reasons_follow_java_rejoin_needed_or_pending_order() -> None:
    assert reason(metadata_changed=True, subscription_changed=True) is RejoinReason.METADATA_CHANGED
    assert reason(subscription_changed=True, pending="explicit_request") is (
        RejoinReason.SUBSCRIPTION_CHANGED
    )
    assert reason(pending="rebalance_in_progress") is RejoinReason.REBALANCE_IN_PROGRESS
    assert reason(pending="poll_interval_exceeded") is RejoinReason.POLL_INTERVAL_EXCEEDED
    assert reason() is RejoinReason.REQUESTED


def test_a_new_subscriptions_topic_is_not_a_partition_change() -> None:
    # Departure (z): the metadata of a newly subscribed topic arrived before the
    # rejoin check; only counts that changed outside the resubscribed topics count.
    assert not partitions_changed({"t1": 2}, {"t1": 2, "t2": 3}, {"t2"})
    assert not partitions_changed({"t1": 2, "t2": 3}, {"t1": 2}, {"t2"})  # unsubscribed
    assert partitions_changed({"t1": 2}, {"t1": 4, "t2": 3}, {"t2"})  # and t1 grew
    assert partitions_changed({"t1": 2}, {"t1": 2, "t2": 3})  # another member's topic
    assert not partitions_changed({"t1": 2}, {"t1": 2})


def test_join_retry_matches_join_group_if_needed() -> None:
    for name in ("UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"):
        assert join_retry(name, retriable=False) == "immediate"
    assert join_retry("MEMBER_ID_REQUIRED", retriable=False) == "immediate"
    assert join_retry("COORDINATOR_NOT_AVAILABLE", retriable=True) == "backoff"
    assert join_retry("FENCED_INSTANCE_ID", retriable=True) == "fatal"
    assert join_retry("SOMETHING_ELSE", retriable=False) == "fatal"


def test_fatal_errors_carry_their_exit_status() -> None:
    fenced = fatal_error("FENCED_INSTANCE_ID", "g1")
    assert isinstance(fenced, FencedError) and fenced.status is ExitStatus.FENCED
    assert "same --instance-id" in str(fenced) and "\n" not in str(fenced)
    denied = fatal_error("GROUP_AUTHORIZATION_FAILED", "g1")
    assert isinstance(denied, NotAuthorizedError)
    assert fatal_error("INVALID_SESSION_TIMEOUT", "g1").status is ExitStatus.MEMBER_FAILED


@pytest.mark.parametrize(
    ("line", "op", "error"),
    [
        ('{"op":"subscribe","topics":["a","b"]}', "subscribe", None),
        ('{"op":"subscribe","pattern":"a.*"}', "subscribe", None),
        ('{"op":"subscribe","topics":["a"],"pattern":"a"}', "subscribe", "exactly one"),
        ('{"op":"processing_ms","value":500}', "processing_ms", None),
        ('{"op":"processing_ms","value":-1}', "processing_ms", "value"),
        ('{"op":"jump"}', "jump", "unknown op"),
        ("not json", "invalid", "not JSON"),
        ("[1]", "invalid", "JSON object"),
    ],
)
def test_parse_command(line: str, op: str, error: str | None) -> None:
    command = parse_command(line, "stdin")
    assert command is not None and command.op == op
    if error is None:
        assert command.error is None
    else:
        assert command.error is not None and error in command.error


def test_blank_lines_are_ignored_and_eof_only_ends_the_reader() -> None:
    control = ControlQueue()
    thread = control.read_stream(io.StringIO('\n{"op":"pause"}\n\n{"op":"resume"}\n'))
    thread.join(timeout=2)
    assert [c.op for c in control.drain()] == ["pause", "resume"]
    assert not thread.is_alive()


def test_stats_count_duplicates_and_committed_offsets() -> None:
    stats = ConsumeStats()
    first = stats.add_batch("t", 0, [0, 1, 2])
    assert first == {
        "topic": "t",
        "partition": 0,
        "first": 0,
        "last": 2,
        "count": 3,
        "duplicates": 0,
    }
    again = stats.add_batch("t", 0, [1, 2, 3])  # redelivered after a rebalance
    assert again["duplicates"] == 2
    stats.add_commit({("t", 0): 4})
    totals = stats.totals()
    assert totals["records"] == 6 and totals["duplicates"] == 2
    assert totals["committed"] == {"t": {"0": 4}}
    assert totals["consumed_up_to"] == {"t": {"0": 4}}


def test_emitter_stamps_identity_and_sequence() -> None:
    emitter = Emitter("g", "m1", "c1", "i1", wall=lambda: 1000.0, mono=time.monotonic)
    emitter.identity = lambda: ("member-1", 7)
    emitter.emit("RejoinRequested", reason="first_join")
    emitter.emit("JoinCompleted", generation=7)
    events = emitter.drain()
    assert [e.seq for e in events] == [1, 2]
    assert events[0].member_id == "member-1" and events[0].generation == 7
    assert events[0].ts_ms == 1_000_000 and events[0].instance_id == "i1"
    assert Event.from_json(events[1].to_json()) == events[1]
    with pytest.raises(ValueError):
        emitter.emit("NoSuchEvent")


def test_an_event_read_back_is_the_one_written_whatever_else_its_line_holds() -> None:
    # from_dict sets the fields without the dataclass's __init__ (a watch parses every
    # line of a trace topic): the defaults, a line from a newer kgctl with fields this one
    # does not know, and one missing a required field all read as __init__ would.
    short = {"type": "MemberStarted", "ts_ms": 5, "mono_ms": 1.5, "seq": 2, "group": "g"}
    read = Event.from_dict(short)
    assert read == Event("MemberStarted", 5, 1.5, 2, "g")
    assert read.data == {} and read.data is not Event.from_dict(short).data
    newer = Event.from_dict({**short, "member": "m", "shard": 3, "data": {"k": 1}})
    assert newer == Event("MemberStarted", 5, 1.5, 2, "g", member="m", data={"k": 1})
    assert Event.from_json(newer.to_json()) == newer
    with pytest.raises(TypeError, match="group"):
        Event.from_dict({k: v for k, v in short.items() if k != "group"})


def test_a_line_reads_as_the_standard_json_reader_reads_it() -> None:
    # Event lines are parsed with orjson (kgctl/recordings.py), and what it refuses goes
    # to `json`: a recording with NaN or a huge number in its data reads as it always
    # did, and a broken line fails with json's own error.
    ev = Event("RecordsConsumed", 5, 1.5, 2, "g", member="m", data={"ratio": 0.5})
    line = ev.to_json()
    assert event_of_line(line) == event_of_line(line.encode()) == Event.from_json(line) == ev

    def ratio(written: str) -> Any:
        return event_of_line(line.replace("0.5", written)).data["ratio"]

    assert math.isnan(ratio("NaN"))
    assert ratio("-Infinity") == -math.inf
    assert ratio("18446744073709551616") == 2**64
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        event_of_line(line[:-3])
    with pytest.raises(TypeError, match="group"):
        event_of_line('{"type": "MemberStarted", "ts_ms": 5, "mono_ms": 1, "seq": 1}')


class _PollThatWaits:
    """A consumer whose poll lasts until the test lets it return (a long fetch wait)."""

    def __init__(self) -> None:
        self.polling = threading.Event()
        self.release = threading.Event()

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        self.polling.set()
        self.release.wait(30)
        return {}

    def assignment(self) -> set[Any]:
        return set()

    def pause(self, *partitions: Any) -> None:
        pass

    def close(self, **kwargs: Any) -> None:
        pass


def test_an_event_from_the_io_thread_is_written_while_the_loop_is_in_a_poll() -> None:
    # kafka-python completes a join on its I/O thread while the member's loop waits in
    # poll (up to 200 ms, more with a fetch wait): a reader of the member's lines must not
    # learn of the join only when that poll returns.
    consumer = _PollThatWaits()

    class StubbedMember(Member):
        def _start(self) -> None:
            self._consumer = consumer

    written = threading.Event()

    def sink(event: Event) -> None:
        if event.type == "JoinCompleted":
            written.set()

    config = MemberConfig(group="g", topics=["t"], read_stdin=False)
    member = StubbedMember(config, ClientSettings(bootstrap="127.0.0.1:9092"), [sink])
    loop = threading.Thread(target=member.run, daemon=True)
    loop.start()
    try:
        assert consumer.polling.wait(10)
        member.emitter.emit("JoinCompleted", generation=1)  # as the I/O thread does
        assert written.wait(10), "the event was written only after the poll returned"
        assert not consumer.release.is_set()
    finally:
        member.request_stop("test")
        consumer.release.set()
        loop.join(10)
    assert not loop.is_alive()


def test_member_config_rejects_topics_and_pattern_together() -> None:
    with pytest.raises(UsageError):
        MemberConfig(group="g", topics=["a"], pattern="a.*").validate()
    with pytest.raises(UsageError):
        MemberConfig(group="g").validate()
    # Java's upgrade path: cooperative-sticky listed with an eager assignor runs eager.
    MemberConfig(group="g", topics=["a"], assignors=["cooperative-sticky", "range"]).validate()


def event(type_: str, generation: int = 3, mono: float = 10.0, **data: object) -> Event:
    return Event(
        type_, 1_700_000_000_123, mono, 1, "g", member="m1", generation=generation, data=data
    )


P = {"t": [0, 1]}

# Every event type with typical data and what a person reads for it: member events in
# `kgctl join`'s lines (exactly), observer events in the watch's log, chaos events in a
# run's plain lines, proxy events in `kgctl proxy`'s lines. A type added to the
# catalogue without a description fails here.
MEMBER_LINES: dict[str, tuple[dict[str, object], str]] = {
    "MemberStarted": (
        {"config": {"topics": ["t"], "assignors": ["range"], "instance_id": "pod-1"}},
        "group=g subscribe=t assignors=range instance=pod-1",
    ),
    "TopicMissing": ({"topics": ["t", "u"]}, "waiting for topic(s) t, u (they do not exist yet)"),
    "RejoinRequested": (
        {"reason": "metadata_changed", "assigned_with": {"t": 2}, "partition_counts": {"t": 4}},
        "reason=metadata_changed partitions {'t': 2} -> {'t': 4}",
    ),
    "CoordinatorLookupSent": ({"node": 2}, "FindCoordinator -> node 2"),
    "CoordinatorFound": ({"coordinator": 1, "host": "h", "port": 9092}, "coordinator 1 at h:9092"),
    "CoordinatorLost": (
        {"coordinator": 1, "error": "NOT_COORDINATOR"},
        "coordinator 1 marked dead: NOT_COORDINATOR",
    ),
    "JoinPrepared": (
        {"protocol": "eager", "owned": P, "lost": True},
        "eager prepare; owned t[0,1] (lost)",
    ),
    "PartitionsRevoked": ({"partitions": P}, "t[0,1]"),
    "JoinGroupSent": (
        {"reason": "first_join", "protocols": ["range"], "owned": {"t": [3]}},
        "reason=first_join protocols=range claims t[3]",
    ),
    "JoinGroupReceived": (
        {
            "error": "NONE",
            "generation": 3,
            "is_leader": True,
            "protocol": "range",
            "members": [{}, {}],
        },
        "generation=3 leader protocol=range members=2",
    ),  # fmt: skip
    "AssignmentComputed": (
        {"assignor": "range", "plan": {"m1-0123456789": P}},
        "range -> 23456789: t[0,1]",
    ),
    "SyncGroupSent": ({"is_leader": True}, "leader (with assignments)"),
    "SyncGroupReceived": ({"error": "NONE", "assignment": P}, "assignment t[0,1]"),
    "JoinCompleted": (
        {"generation": 3, "is_leader": False, "assignment": P, "rebalance_ms": 412.0},
        "generation=3 follower owns t[0,1] rebalance took 412ms",
    ),
    "PartitionsAssigned": ({"partitions": P}, "t[0,1]"),
    "PartitionsLost": ({"partitions": P}, "t[0,1]"),
    "JoinFailed": (
        {"error": "UNKNOWN_MEMBER_ID", "retry": True},
        "UNKNOWN_MEMBER_ID -> retry True",
    ),
    "HeartbeatSucceeded": ({"rtt_ms": 3}, "rtt 3ms"),
    "HeartbeatFailed": ({"error": "REBALANCE_IN_PROGRESS"}, "REBALANCE_IN_PROGRESS"),
    "GenerationReset": (
        {"previous_generation": 3, "member_id_kept": False, "cause": "poll_interval_exceeded"},
        "was generation 3, member id dropped (poll_interval_exceeded)",
    ),
    "PollIntervalExceeded": (
        {"max_poll_interval_ms": 2000},
        "no poll for 2000ms: leaving the group",
    ),
    "RecordsConsumed": (
        {
            "count": 5,
            "duplicates": 2,
            "batches": [{"topic": "t", "partition": 0, "first": 10, "last": 14}],
        },
        "5 records (2 duplicates) t-0:10..14",
    ),  # fmt: skip
    "OffsetsCommitted": ({"offsets": {"t": {"0": 15, "1": 7}}}, "t-0@15 t-1@7"),
    "OffsetCommitFailed": (
        {"error": "REBALANCE_IN_PROGRESS", "offsets": {"t": {"0": 15}}},
        "REBALANCE_IN_PROGRESS t-0@15",
    ),
    "ControlReceived": (
        {"op": "pause", "source": "topic", "applied": True},
        "pause from topic (applied)",
    ),
    "LeaveGroupSent": (
        {"reason": "kgctl: member stopping (SIGTERM)"},
        "reason='kgctl: member stopping (SIGTERM)'",
    ),
    "MemberFailed": (
        {"error": "FENCED_INSTANCE_ID", "message": "fenced by a newer pod-1"},
        "fenced by a newer pod-1",
    ),
    "MemberStopped": (
        {"reason": "max_records", "records": 30, "duplicates": 0},
        "max_records: 30 records, 0 duplicates",
    ),
    # -- the consumer protocol (KIP-848) --
    "MemberStateChanged": (
        {"previous": "FENCED", "state": "JOINING", "reason": "lost partitions handled"},
        "FENCED -> JOINING (lost partitions handled)",
    ),
    "GroupHeartbeatAnswered": (
        {"sent": {"member_epoch": -1}, "error": "NONE", "member_epoch": -1},
        "epoch -1 -> epoch -1",
    ),
    "TargetAssignmentReceived": (
        {"member_epoch": 4, "target": {"t": [1]}, "owned": {}, "pending": ["AAAA"]},
        "epoch 4 target t[1] owned - (1 topic id(s) not yet known: pending)",
    ),
    "ReconciliationStarted": (
        {"member_epoch": 4, "revoke": {}, "assign": {"t": [1]}},
        "epoch 4: revoke -, assign t[1]",
    ),
    "ReconciliationCompleted": (
        {"member_epoch": 4, "assignment": {"t": [0, 1]}, "pending": []},
        "epoch 4 owns t[0,1]",
    ),
    "ReconciliationAborted": ({"member_epoch": 4, "state": "FENCED"}, "epoch 4: member is FENCED"),
    "MemberFenced": (
        {"error": "FENCED_MEMBER_EPOCH", "lost": {"t": [0]}},
        "FENCED_MEMBER_EPOCH: lost t[0]",
    ),
}
WATCH_LOG: dict[str, tuple[dict[str, object], str]] = {
    "GroupObserved": ({"state": "Stable", "members": [{}, {}]}, "snapshot: Stable, 2 members"),
    "GroupStateChanged": (
        {"from": "Stable", "to": "PreparingRebalance"},
        "state Stable → PreparingRebalance",
    ),
    "GenerationChanged": ({"inferred": False}, "generation 4"),
    "GenerationSourceChanged": (
        {"source": "__consumer_offsets", "partition": 7, "found": True},
        "generation ids from the broker: __consumer_offsets[7]",
    ),
    "MemberJoinedGroup": ({}, "b@10.0.0.1 joined (b-1)"),
    "MemberLeftGroup": ({"reason": "gone at its session timeout"}, "b left: gone at its session"),
    "PartitionsMoved": (
        {"moves": [{"topic": "t", "partition": 1, "from_client": "a", "to_client": "b"}]},
        "1 partitions moved: t-1 a→b",
    ),
    "RebalanceAttributed": (
        {"cause": "member_joined", "guess": False, "evidence": "b joined"},
        "cause: member joined: b joined",
    ),
    "BrokerDisconnected": (
        {"error": "connection refused", "retry_in_s": 2},
        "broker unreachable, retrying: connection refused",
    ),
    "BrokerReconnected": ({"down_ms": 4000}, "broker reachable again after 4.0s"),
}
CHAOS_LINES: dict[str, tuple[dict[str, object], str]] = {
    "ScenarioStarted": (
        {"scenario": "member-kill", "run_id": "ab12"},
        "scenario member-kill run ab12 group g",
    ),
    "StepStarted": (
        {"index": 0, "step": "kill m2", "action": "member-kill"},
        "step 1: kill m2 (member-kill)",
    ),
    "ActionPerformed": ({"description": "SIGKILL m2 (pid 42)"}, "action: SIGKILL m2 (pid 42)"),
    "GroupSettled": ({"generation": 5, "settle_ms": 3400}, "settled at generation 5 after 3.4s"),
    "StepFinished": (
        {"status": "ok", "generations": [5], "moved": [{}, {}], "affected": ["m1", "m3"]},
        "ok: generations 5, 2 moved, affected m1, m3",
    ),
    "InvariantViolated": (
        {"rule": "at-least-once", "step": "end", "message": "3 record(s) never consumed"},
        "VIOLATED at-least-once [end]: 3 record(s) never consumed",
    ),
    "ScenarioFinished": ({"verdict": "passed", "exit_status": 0}, "verdict: passed (exit 0)"),
}

PROXY_LINES: dict[str, tuple[dict[str, object], str]] = {
    "ProxyStarted": (
        {"upstream": "127.0.0.1:9092", "bootstrap": "127.0.0.1:19092"},
        "proxy for 127.0.0.1:9092 listening: give clients bootstrap.servers=127.0.0.1:19092",
    ),
    "ListenerOpened": (
        {"node": 1, "upstream": "127.0.0.1:9092", "address": "127.0.0.1:19093"},
        "broker 1 (127.0.0.1:9092) is at 127.0.0.1:19093",
    ),
    "ApiVersionsLowered": (
        {"upstream": "h:9092", "lowered": {"JoinGroup": {"broker_max": 9, "advertised": 7}}},
        "advertising lower API versions than h:9092: JoinGroup 9→7",
    ),
    "ProxyConnectionAborted": (
        {"connection": 3, "peer": "127.0.0.1:5555", "side": "upstream", "error": "reset"},
        "connection 3 from 127.0.0.1:5555 closed (upstream): reset",
    ),
    "FaultRuleAdded": ({"id": "r1", "rule": "heartbeat error X"}, "rule r1 in force: heartbeat"),
    "FaultRuleRemoved": (
        {"id": "r1", "why": "ran out", "applied": 3, "rule": "heartbeat error X"},
        "rule r1 ran out after 3 applied",
    ),
    "FaultInjected": (
        {
            "rule": "r1",
            "api": "Heartbeat",
            "effect": "error",
            "error": "REBALANCE_IN_PROGRESS",
            "connection": 3,
            "applied": 1,
        },
        "FAULT r1 Heartbeat error REBALANCE_IN_PROGRESS → m1-client (3, #1)",
    ),  # fmt: skip
    "ControlRejected": ({"error": "no rule 'r9'"}, "control line rejected: no rule 'r9'"),
    "FindCoordinatorTraced": (
        {
            "api_version": 4,
            "error": "NONE",
            "response": {"coordinator": 1},
            "latency_ms": 2,
            "connection": 1,
        },
        "m1-client FindCoordinator v4 group=g member=m1-0123 → NONE node 1 (2 ms, 1)",
    ),  # fmt: skip
    "JoinGroupTraced": (
        {
            "api_version": 9,
            "error": "NONE",
            "request": {"protocols": ["range"]},
            "response": {"generation": 5, "is_leader": True},
            "latency_ms": 30,
            "connection": 1,
        },
        "JoinGroup v9 group=g member=m1-0123 protocols=range → NONE gen 5 leader (30 ms, 1)",
    ),  # fmt: skip
    "SyncGroupTraced": (
        {
            "api_version": 5,
            "error": "NONE",
            "request": {"generation": 5},
            "response": {"assignment": {"t": [0]}},
            "latency_ms": 3,
            "connection": 1,
        },
        "SyncGroup v5 group=g member=m1-0123 → NONE gen 5 assignment={'t': [0]}",
    ),  # fmt: skip
    "HeartbeatTraced": (
        {
            "api_version": 4,
            "error": "REBALANCE_IN_PROGRESS",
            "latency_ms": 1,
            "connection": 1,
            "injected": True,
            "fault": "r1",
        },
        "Heartbeat v4 group=g member=m1-0123 → REBALANCE_IN_PROGRESS (1 ms, 1) [injected by r1]",
    ),  # fmt: skip
    "LeaveGroupTraced": (
        {
            "api_version": 5,
            "error": "NONE",
            "latency_ms": 2,
            "connection": 1,
            "request": {"members": [{"reason": "kgctl: member stopping (SIGTERM)"}]},
        },
        "LeaveGroup v5 group=g member=m1-0123 reason='kgctl: member stopping (SIGTERM)' → NONE",
    ),  # fmt: skip
    "OffsetCommitTraced": (
        {"api_version": 8, "error": "NONE", "latency_ms": 2, "connection": 1},
        "m1-client OffsetCommit v8 group=g member=m1-0123 → NONE (2 ms, 1)",
    ),
    "ConsumerGroupHeartbeatTraced": (
        {
            "api_version": 0,
            "error": "NONE",
            "request": {"member_epoch": 3},
            "response": {"member_epoch": 4},
            "latency_ms": 2,
            "connection": 2,
        },
        "ConsumerGroupHeartbeat v0 group=g member=m1-0123 epoch=3 → NONE epoch 4",
    ),  # fmt: skip
    "MetadataTraced": (
        {
            "api_version": 12,
            "error": "NONE",
            "request": {"topics": ["t"]},
            "response": {"partitions": {"t": 6}},
            "latency_ms": 1,
            "connection": 3,
        },
        "m1-client Metadata v12 group=g member=m1-0123 topics=t → NONE partitions t=6 (1 ms, 3)",
    ),  # fmt: skip
    "FetchTraced": (
        {
            "api_version": 12,
            "error": "NONE",
            "partitions": {"t": {"0": {"hw": 50, "batches": [[10, 19], [20, 29]]}}},
        },
        "m1-client Fetch v12 gave t-0@10..29",
    ),  # fmt: skip
    "ProxyStopped": (
        {"why": "SIGTERM", "connections": 4, "requests": 120},
        "proxy stopped (SIGTERM): 4 connections, 120 requests",
    ),
}


def test_every_event_type_has_a_description_a_person_can_read() -> None:
    described = set(MEMBER_LINES) | set(WATCH_LOG) | set(CHAOS_LINES) | set(PROXY_LINES)
    assert described == set(EVENT_TYPES), set(EVENT_TYPES) ^ described
    for type_, (data, text) in MEMBER_LINES.items():
        said = describe(Event(type_, 1, 1.0, 1, "g", member="m1", generation=3, data=data))
        assert said == text, type_
    for type_, (data, text) in WATCH_LOG.items():
        observed = Event(
            type_, 1, 1.0, 1, "g", client_id="b", member_id="b-1", host="/10.0.0.1",
            generation=4, source="observer", data=data,
        )  # fmt: skip
        assert text in describe_event(observed), type_
    for type_, (data, text) in CHAOS_LINES.items():
        line = event_line(Event(type_, 1, 1.0, 1, "g", source="chaos", data=data))
        assert line is not None and text in line, type_
    for type_, (data, text) in PROXY_LINES.items():
        wire = Event(
            type_, 1, 1.0, 1, "g", client_id="m1-client", member_id="m1-0123", source="proxy",
            data=data,
        )  # fmt: skip
        assert text in describe_wire(wire), type_


def test_render_line_shows_generation_step_and_duration() -> None:
    line = render_line(
        event(
            "JoinGroupReceived",
            error="NONE",
            generation=3,
            is_leader=True,
            protocol="range",
            duration_ms=12.4,
            members=[{}, {}],
        )
    )
    assert line is not None
    text = line.plain
    assert " g3 " in text and "JoinGroupReceived" in text
    assert "leader" in text and "members=2" in text and "12ms" in text


def test_a_cooperative_join_line_shows_what_the_member_claims() -> None:
    claimed = render_line(
        event("JoinGroupSent", reason="rebalance_in_progress", protocols=["cooperative-sticky"],
              owned={"t": [0, 2]})
    )  # fmt: skip
    eager = render_line(event("JoinGroupSent", reason="first_join", protocols=["range"], owned={}))
    assert claimed is not None and eager is not None
    assert "claims t[0,2]" in claimed.plain
    assert "claims" not in eager.plain


def test_render_line_time_since_previous_step_when_no_duration() -> None:
    line = render_line(
        event(
            "RejoinRequested",
            mono=250.0,
            reason="metadata_changed",
            assigned_with={"t": 3},
            partition_counts={"t": 6},
        ),
        previous=event("JoinCompleted", mono=50.0),
    )
    assert line is not None
    assert "reason=metadata_changed" in line.plain and "+200ms" in line.plain


def test_heartbeats_collapse_into_the_header() -> None:
    hb = event("HeartbeatSucceeded", rtt_ms=1.5)
    assert render_line(hb) is None
    assert render_line(hb, heartbeats=True) is not None
    header = MemberHeader()
    header.update(event("JoinGroupReceived", error="NONE", is_leader=False))
    header.update(event("JoinCompleted", assignment={"t": [0, 2]}))
    header.update(hb)
    text = header.render(now_ms=hb.ts_ms + 1500).plain
    assert "stable" in text and "generation 3" in text and "follower" in text
    assert "t[0,2]" in text and "1.5s ago" in text


def test_summary_lists_totals_and_committed_offsets() -> None:
    lines = summary_lines(
        event(
            "MemberStopped",
            reason="SIGTERM",
            exit_status=0,
            records=12,
            duplicates=1,
            committed={"t": {"0": 7, "1": 5}},
        )
    )
    joined = "\n".join(lines)
    assert "records consumed: 12" in joined and "duplicates: 1" in joined
    assert "t-0@7 t-1@5" in joined
    json.dumps(lines)


def test_trace_records_hold_events_as_json_lines_and_stay_under_the_size_limit() -> None:
    from kgctl.adapters.trace import json_line_chunks

    lines = [json.dumps({"seq": i, "pad": "x" * 40}) for i in range(50)]
    chunks = list(json_line_chunks(lines, 500))
    assert all(len(c) <= 500 for c in chunks) and len(chunks) > 1
    assert [line.decode() for c in chunks for line in c.split(b"\n")] == lines
    # A line longer than the limit is sent alone rather than cut.
    long = "y" * 900
    assert list(json_line_chunks(["a", long, "b"], 500)) == [b"a", long.encode(), b"b"]


class _TopicsAnswering:
    """A consumer whose all-topics metadata request fails with `failures` first."""

    config = {"retry_backoff_ms": 1}

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.asked = 0

    def topics(self) -> set[str]:
        self.asked += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"t"}


def test_the_missing_topic_check_sends_a_timed_out_request_again() -> None:
    import kafka.errors as Errors

    from kgctl.adapters.consumer import existing_topics

    consumer = _TopicsAnswering(Errors.RequestTimedOutError(), Errors.KafkaConnectionError())
    assert existing_topics(consumer) == {"t"}  # type: ignore[arg-type]
    assert consumer.asked == 3
    # Stopping while it retries: no answer, and no error either.
    stopping = _TopicsAnswering(Errors.RequestTimedOutError())
    assert existing_topics(stopping, lambda: False) is None  # type: ignore[arg-type]
    # What another attempt cannot fix is raised, once.
    refused = _TopicsAnswering(Errors.TopicAuthorizationFailedError())
    with pytest.raises(Errors.TopicAuthorizationFailedError):
        existing_topics(refused)  # type: ignore[arg-type]
    assert refused.asked == 1


def test_a_signal_landing_inside_the_idle_wake_still_stops_the_member() -> None:
    # A handler runs on the main thread between two bytecodes, perhaps inside
    # `_idle_wake.set()` with the event's lock held (the CI hang: a SIGTERMed member asleep
    # for good). Holding that lock here, the handler must still return and mark the stop.
    config = MemberConfig(group="g", topics=["t"], read_stdin=False)
    member = Member(config, ClientSettings(bootstrap="127.0.0.1:9092"), [])
    returned = threading.Event()

    def handler() -> None:
        member._on_signal(signal.SIGTERM, None)
        returned.set()

    with member._idle_wake._cond:  # the lock set() takes
        thread = threading.Thread(target=handler, daemon=True)
        thread.start()
        took_no_lock = returned.wait(2)
    thread.join(5)
    assert took_no_lock, "the SIGTERM handler waited for the idle wake's lock"
    assert member._should_stop()
    assert member._exit == ExitStatus.OK
