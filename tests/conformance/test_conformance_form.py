"""The conformance suite's pure half, without a broker: how a member's requests and
listener calls become steps, how Java's revoked-or-lost call is named, how two traces
are compared, and how the allow-list is read from docs/member.md (the real one too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance_form import (
    DELAY_TOLERANCE_MS,
    NO_HEARTBEAT_WHILE_SYNCING,
    AllowListError,
    Callback,
    Mark,
    Request,
    Trace,
    commit_failure,
    compare,
    delays_differ,
    matches,
    normalise,
    normalise_reason,
    read_allow_list,
    settle_lost,
    steady_interval,
    unexplained,
)
from conformance_situations import AUDIT_ROWS_NOT_PROVOKED, SITUATIONS

MEMBER_DOC = Path(__file__).resolve().parents[2] / "docs" / "member.md"
M1 = "java-1-0c6b3c2e-1a2b-4c3d-9e8f-0123456789ab"
M2 = "java-1-7d00aa11-1a2b-4c3d-9e8f-0123456789ab"


def req(api: str, at: float, error: str = "NONE", **kw: object) -> Request:
    took = float(kw.pop("took", 1.0))  # type: ignore[arg-type]
    return Request(api=api, sent_ms=at, answered_ms=at + took, error=error, **kw)  # type: ignore[arg-type]


def joined(at: float, member: str = M1, gen: int = 1, sent_member: str = M1) -> Request:
    return req(
        "JoinGroup", at, member_id=sent_member, answer_member_id=member, answer_generation=gen
    )


def stable_then(*later: Request) -> list[Request]:
    """A member that joined generation 1 as M1 (before the situation, at 100 ms)."""
    return [joined(100, sent_member=""), req("SyncGroup", 110, generation=1), *later]


# -- lost or revoked -----------------------------------------------------------------------


def test_a_revoke_after_a_reset_answer_is_lost_and_after_a_new_generation_revoked() -> None:
    requests = stable_then(
        req("Heartbeat", 1000, "UNKNOWN_MEMBER_ID", generation=1),
        joined(1100, member=M2, gen=2, sent_member=""),
    )
    calls = [
        Callback(1005, "revoked_or_lost", "[0, 1]"),  # after the reset: lost
        Callback(2000, "revoked_or_lost", "[0, 1]"),  # generation 2 since: revoked
        Callback(2100, "assigned", "[0]"),  # told apart already: kept
    ]
    named = settle_lost(requests, calls)
    assert [c.kind for c in named] == ["lost", "revoked", "assigned"]


@pytest.mark.parametrize("error", ["ILLEGAL_GENERATION", "FENCED_INSTANCE_ID"])
def test_every_generation_resetting_answer_makes_the_next_revoke_lost(error: str) -> None:
    requests = stable_then(req("OffsetCommit", 1000, error, generation=1))
    assert settle_lost(requests, [Callback(1500, "revoked_or_lost", "[0]")])[0].kind == "lost"


def test_a_rebalance_in_progress_answer_resets_nothing() -> None:
    requests = stable_then(req("Heartbeat", 1000, "REBALANCE_IN_PROGRESS", generation=1))
    assert settle_lost(requests, [Callback(1005, "revoked_or_lost", "[0]")])[0].kind == "revoked"


# -- steps -------------------------------------------------------------------------------------


def test_steps_name_member_ids_and_generations_relative_to_the_coordinator_s() -> None:
    requests = stable_then(
        req("Heartbeat", 900, generation=1),  # answered: timing, not a step
        req("Heartbeat", 1000, "UNKNOWN_MEMBER_ID", generation=1, injected=True),
        req("JoinGroup", 1100, "MEMBER_ID_REQUIRED", member_id="", answer_member_id=M2),
        joined(1110, member=M2, gen=2, sent_member=M2),
        req("SyncGroup", 1120, generation=2),
        req("OffsetCommit", 1130, generation=1),  # answered: left out
        req("OffsetCommit", 1140, "ILLEGAL_GENERATION", generation=1),
    )
    calls = [Callback(1050, "lost", "[0, 1]"), Callback(1125, "assigned", "[0, 1]")]
    trace = normalise(requests, calls, [Mark(1200, "stop")], since_ms=1000)
    assert trace.steps == [
        "Heartbeat(gen=current) -> UNKNOWN_MEMBER_ID",
        "lost [0, 1]",
        "JoinGroup(member=none) -> MEMBER_ID_REQUIRED",
        "JoinGroup(member=current) -> NONE",
        "SyncGroup(gen=current) -> NONE",
        "assigned [0, 1]",
        "OffsetCommit(gen=stale) -> ILLEGAL_GENERATION",
        "<stop>",
    ]
    assert trace.delays == [("after Heartbeat UNKNOWN_MEMBER_ID", 99.0)]


def test_a_callback_stamped_in_the_same_millisecond_as_the_join_goes_before_it() -> None:
    requests = stable_then(req("JoinGroup", 1000.4, member_id=M1, took=3))
    calls = [Callback(1001, "revoked", "[0]")]  # stamped after the call, a clock tick later
    assert normalise(requests, calls, [], since_ms=900).steps == [
        "revoked [0]",
        "JoinGroup(member=current) -> NONE",
    ]


def test_a_revoke_stamped_while_its_join_group_is_in_flight_goes_before_it() -> None:
    # CI: kgctl's prepare revoke stamped over 2 ms after the proxy read the JoinGroup, before
    # its (reset) answer; no client revokes with a JoinGroup in flight.
    requests = stable_then(req("JoinGroup", 1000, "UNKNOWN_MEMBER_ID", member_id=M1, took=12))
    calls = [Callback(1008, "revoked", "[0]")]
    assert normalise(requests, calls, [], since_ms=900).steps == [
        "revoked [0]",
        "JoinGroup(member=current) -> UNKNOWN_MEMBER_ID",
    ]
    # Stamped after the answer, it stays after it.
    late = [Callback(1013, "revoked", "[0]")]
    steps = normalise(requests, late, [], since_ms=900).steps
    assert steps[0] == "JoinGroup(member=current) -> UNKNOWN_MEMBER_ID", steps


def test_a_refused_heartbeat_of_the_generation_being_left_is_not_a_step() -> None:
    requests = stable_then(
        req("Heartbeat", 1000, "REBALANCE_IN_PROGRESS", generation=1),
        joined(1010, gen=2),
        req("Heartbeat", 1012, "REBALANCE_IN_PROGRESS", generation=1),  # in flight across it
        req("SyncGroup", 1020, generation=2),
    )
    assert normalise(requests, [], [], since_ms=900).steps == [
        "Heartbeat(gen=current) -> REBALANCE_IN_PROGRESS",
        "JoinGroup(member=current) -> NONE",
        "SyncGroup(gen=current) -> NONE",
    ]


def test_owned_partitions_show_only_when_claimed_and_a_dropped_answer_says_so() -> None:
    requests = stable_then(
        req("JoinGroup", 1000, member_id=M1, owned=("1", "0"), dropped=True),
        req("JoinGroup", 1200, member_id=M1, owned=()),
    )
    assert normalise(requests, [], [], since_ms=900).steps == [
        "JoinGroup(member=current, owned=[0, 1]) -> NONE, connection closed",
        "JoinGroup(member=current) -> NONE",
    ]


def test_a_commit_retrying_a_failed_one_is_a_step_until_the_next_join() -> None:
    requests = stable_then(
        req("OffsetCommit", 1000, "COORDINATOR_LOAD_IN_PROGRESS", generation=1),
        req("OffsetCommit", 1100, generation=1),
        req("JoinGroup", 1200, member_id=M1),
        req("OffsetCommit", 1300, generation=1),
    )
    assert normalise(requests, [], [], since_ms=900).steps == [
        "OffsetCommit(gen=current) -> COORDINATOR_LOAD_IN_PROGRESS",
        "OffsetCommit(gen=current) -> NONE",
        "JoinGroup(member=current) -> NONE",
    ]


def test_an_injected_answer_stamped_just_before_the_window_is_in_it() -> None:
    # The proxy's whole-millisecond stamp put a faulted commit 0.6 ms before the window.
    requests = stable_then(
        req("OffsetCommit", 999.4, "UNKNOWN_MEMBER_ID", generation=1, injected=True),
        req("OffsetCommit", 999.5, generation=1),  # answered by the broker: not the situation's
        req("JoinGroup", 1200, member_id=""),
    )
    trace = normalise(requests, [], [], since_ms=1000)
    assert trace.steps == [
        "OffsetCommit(gen=current) -> UNKNOWN_MEMBER_ID",
        "JoinGroup(member=none) -> NONE",
    ]
    assert trace.delays == [("after OffsetCommit UNKNOWN_MEMBER_ID", 199.6)]


def test_only_a_long_sync_group_wait_without_heartbeats_is_a_step() -> None:
    long_wait = [joined(100, sent_member=""), req("SyncGroup", 102, generation=1, took=3000)]
    heartbeats = [
        req("Heartbeat", 600, generation=1, took=2600),
        req("Heartbeat", 1100, generation=1, took=2100),
    ]
    silent = normalise(long_wait, [], [], since_ms=0).steps
    assert silent[-2:] == [NO_HEARTBEAT_WHILE_SYNCING, "SyncGroup(gen=current) -> NONE"]
    beating = normalise(long_wait + heartbeats, [], [], since_ms=0).steps
    assert NO_HEARTBEAT_WHILE_SYNCING not in beating
    # Stop 37's CI: one client's wait passed one interval, the other's did not. A wait
    # under two intervals says nothing either way, with or without a heartbeat in it.
    for took in (400, 700, 990):
        short = [joined(100, sent_member=""), req("SyncGroup", 102, generation=1, took=took)]
        assert NO_HEARTBEAT_WHILE_SYNCING not in normalise(short, [], [], since_ms=0).steps
    # The wait counts from the SyncGroup when the leader sent it late.
    late = [joined(100, sent_member=""), req("SyncGroup", 900, generation=1, took=900)]
    assert NO_HEARTBEAT_WHILE_SYNCING not in normalise(late, [], [], since_ms=0).steps


def test_repeats_in_a_row_count_once_and_marks_keep_their_place() -> None:
    requests = stable_then(*(req("FindCoordinator", 1000 + i) for i in range(3)))
    trace = normalise(requests, [], [Mark(2000, "exited")], since_ms=900)
    assert trace.steps == ["FindCoordinator -> NONE", "exited"]


def test_reasons_lose_member_ids_and_numbers() -> None:
    assert normalise_reason(f"need to re-join with the given member-id: {M1}") == (
        "need to re-join with the given member-id: <member-id>"
    )
    assert normalise_reason("cached metadata has changed from 2 to 3") == (
        "cached metadata has changed from N to N"
    )
    assert normalise_reason(None) == "<none>"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Offset commit cannot be completed since the consumer group is executing a "
         "rebalance at the moment.", "RebalanceInProgress"),
        ("REBALANCE_IN_PROGRESS", "RebalanceInProgress"),
        ("Offset commit cannot be completed since the consumer is not part of an active "
         "group for auto partition assignment", "CommitFailed"),
        ("CommitFailedError", "CommitFailed"),
        ("TimeoutException: took too long", "TimeoutException"),
    ],
)  # fmt: skip
def test_a_failed_commit_is_named_by_what_it_means(text: str, name: str) -> None:
    assert commit_failure(text) == name


# -- comparing ---------------------------------------------------------------------------------


def test_compare_names_each_side_s_extra_steps_reasons_and_delays() -> None:
    java = Trace(
        steps=[
            "JoinGroup(member=current) -> REBALANCE_IN_PROGRESS",
            "JoinGroup(member=current) -> NONE",
        ],
        reasons=["subscription has changed", "rebalance failed due to X"],
        delays=[("after JoinGroup REBALANCE_IN_PROGRESS", 5.0)],
    )
    kgctl = Trace(
        steps=["JoinGroup(member=current) -> REBALANCE_IN_PROGRESS", "<stop>"],
        reasons=["subscription has changed", "kgctl: retry"],
        delays=[("after JoinGroup REBALANCE_IN_PROGRESS", 40000.0)],
    )
    assert compare(java, kgctl) == [
        "java only: JoinGroup(member=current) -> NONE",
        "kgctl only: <stop>",
        "reason #2: java 'rebalance failed due to X' kgctl 'kgctl: retry'",
        "delay after JoinGroup REBALANCE_IN_PROGRESS: java 5 ms, kgctl 40000 ms",
    ]
    assert compare(java, java) == []


def test_delays_differ_beyond_the_absolute_and_the_relative_tolerance() -> None:
    assert not delays_differ(10, 10 + DELAY_TOLERANCE_MS)
    assert delays_differ(10, 20 + DELAY_TOLERANCE_MS)
    assert not delays_differ(6000, 7200)  # both waited a session: within a quarter
    assert delays_differ(6000, 9000)


# -- the allow-list ------------------------------------------------------------------------------

HEAD = "## Where kgctl and librdkafka differ from Java (the conformance allow-list)"
TABLE = """
| situations | client | difference | why | what a user sees |
|---|---|---|---|---|
| `a5-*, close-*` | kgctl | `kgctl only: commit failed *` | it commits at stop | a commit |
| `x` | librdkafka | `reason #*: java * librdkafka '<none>'` | no KIP-800 \\| v7 | no reason |
"""


def test_the_allow_list_is_read_from_its_section_and_matches_by_pattern() -> None:
    rows = read_allow_list(f"# doc\n\n{HEAD}\n{TABLE}\nafter\n\n## Next\n| a | b |\n")
    assert [(r.situations, r.client) for r in rows] == [
        ("a5-*, close-*", "kgctl"),
        ("x", "librdkafka"),
    ]
    assert rows[1].why == "no KIP-800 | v7"
    diffs = ["kgctl only: commit failed RebalanceInProgress", "kgctl only: revoked [0]"]
    assert unexplained(diffs, rows, "close-held", "kgctl") == ["kgctl only: revoked [0]"]
    assert unexplained(diffs, rows, "a1", "kgctl") == diffs
    assert unexplained(diffs[:1], rows, "a5-x", "librdkafka") == diffs[:1]


COLUMNS = "| situations | client | difference | why | what a user sees |\n|---|---|---|---|---|\n"


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("# nothing here\n", "no section"),
        (f"{HEAD}\n\nno table\n", "no table"),
        (f"{HEAD}\n| situations | client | difference |\n|---|---|---|\n", "columns"),
        (
            f"{HEAD}\n{COLUMNS}| `x` | kgctl | `kgctl only: *` |  | nothing |\n",
            "empty or missing cell",
        ),
        (
            f"{HEAD}\n{COLUMNS}| `x` | python | `*` | a | b |\n",
            "kgctl or librdkafka",
        ),
    ],
)
def test_a_malformed_allow_list_is_refused(doc: str, says: str) -> None:
    with pytest.raises(AllowListError, match=says):
        read_allow_list(doc)


def test_docs_member_md_has_a_readable_allow_list_naming_known_situations() -> None:
    rows = read_allow_list(MEMBER_DOC.read_text(encoding="utf-8"))
    ids = [s.id for s in SITUATIONS]
    for row in rows:
        patterns = [p.strip() for p in row.situations.split(",")]
        assert all(any(fnmatch_id(p, i) for i in ids) for p in patterns), (
            f"allow-list row names no situation of the suite: {row.situations}"
        )


def fnmatch_id(pattern: str, situation: str) -> bool:
    return matches(pattern, situation)


def test_patterns_take_brackets_literally() -> None:
    assert matches("java only: lost [0, 1]", "java only: lost [0, 1]")
    assert not matches("java only: lost [0, 1]", "java only: lost 0")
    assert matches("reason #*: java * kgctl '<none>'", "reason #2: java 'x' kgctl '<none>'")


# -- the table of situations ----------------------------------------------------------------------


def test_every_audit_row_has_a_situation_or_a_reason_it_cannot_be_provoked() -> None:
    covered = {c for s in SITUATIONS for c in s.covers}
    for row in range(1, 11):
        name = f"audit {row}"
        assert name in covered or name in AUDIT_ROWS_NOT_PROVOKED, name


def test_situation_ids_are_unique_and_every_rule_parses() -> None:
    from kgctl.proxy.faults import parse_rule

    ids = [s.id for s in SITUATIONS]
    assert len(ids) == len(set(ids))
    for s in SITUATIONS:
        for rule in [r for stage in s.stages for r in stage] + list(s.peer_rules):
            parse_rule(f"{rule}:client=x")


def test_a_revoke_at_close_in_the_middle_of_a_join_is_lost_as_java_s_on_leave_prepare() -> None:
    requests = stable_then(req("JoinGroup", 1000, member_id=M1, took=3000))
    calls = [Callback(1500, "revoked_or_lost", "[0, 1]")]
    stopped = normalise(requests, calls, [Mark(1400, "stop")], since_ms=900).steps
    assert stopped[:3] == ["JoinGroup(member=current) -> NONE", "<stop>", "lost [0, 1]"]
    # The same call before the stop (a cooperative revoke while joining) is a revoke.
    assert settle_lost(requests, calls)[0].kind == "revoked"
    # Once the join's SyncGroup is answered, a close revokes.
    done = [*requests, req("SyncGroup", 4001, generation=1)]
    assert settle_lost(done, [Callback(5000, "revoked_or_lost", "[0]")], 4900)[0].kind == "revoked"


def test_leave_reasons_are_compared_on_their_own() -> None:
    java = normalise(
        stable_then(req("LeaveGroup", 1000, reason="the consumer is being closed")), [], [], 900
    )
    kgctl = normalise(stable_then(req("LeaveGroup", 1000, reason="kgctl: stopping")), [], [], 900)
    assert compare(java, kgctl) == [
        "leave reason: java 'the consumer is being closed' kgctl 'kgctl: stopping'"
    ]


def test_a_join_sent_in_the_millisecond_of_the_listener_call_comes_after_it() -> None:
    requests = stable_then(req("JoinGroup", 1000.1, "NOT_COORDINATOR", member_id=M1, took=0.2))
    calls = [Callback(1000.3, "revoked", "[0]")]
    steps = normalise(requests, calls, [], since_ms=900).steps
    assert steps == ["revoked [0]", "JoinGroup(member=current) -> NOT_COORDINATOR"]


def test_a_callback_stamped_late_by_a_pipe_goes_before_the_join_it_preceded() -> None:
    requests = stable_then(req("JoinGroup", 1000, "REBALANCE_IN_PROGRESS", member_id=M1, took=2))
    late = [Callback(1003, "revoked", "[0]", stamp_lag_ms=10)]
    assert normalise(requests, late, [], 900).steps[0] == "revoked [0]"
    prompt = [Callback(1003, "revoked", "[0]")]
    assert normalise(requests, prompt, [], 900).steps[-1] == "revoked [0]"


def test_a_join_sent_before_the_pre_rebalance_commit_was_answered_says_so() -> None:
    commit = req("OffsetCommit", 1000, generation=1, took=1500)
    early = normalise(stable_then(commit, req("JoinGroup", 1600, member_id=M1)), [], [], 900)
    assert early.steps == [
        "JoinGroup sent with an OffsetCommit in flight",
        "JoinGroup(member=current) -> NONE",
    ]
    awaited = normalise(stable_then(commit, req("JoinGroup", 2600, member_id=M1)), [], [], 900)
    assert awaited.steps == ["JoinGroup(member=current) -> NONE"]


def test_heartbeats_refused_alike_before_the_next_join_count_once() -> None:
    rip = "REBALANCE_IN_PROGRESS"
    requests = stable_then(
        req("Heartbeat", 1000, rip, generation=1),
        req("OffsetCommit", 1100, "ILLEGAL_GENERATION", generation=1),
        req("Heartbeat", 1500, rip, generation=1),
        joined(1600, gen=2),
        req("Heartbeat", 2000, rip, generation=2),
    )
    assert normalise(requests, [], [], 900).steps == [
        "Heartbeat(gen=current) -> REBALANCE_IN_PROGRESS",
        "OffsetCommit(gen=current) -> ILLEGAL_GENERATION",
        "JoinGroup(member=current) -> NONE",
        "Heartbeat(gen=current) -> REBALANCE_IN_PROGRESS",
    ]


# -- the consumer protocol (ConsumerGroupHeartbeat) ----------------------------------------

CGH = "ConsumerGroupHeartbeat"
JOIN_FIELDS = ("rebalance_timeout", "topics", "owned")


def beat(at: float, epoch: int, error: str = "NONE", **kw: object) -> Request:
    """A ConsumerGroupHeartbeat sent with `epoch`; `gave`: the answer's epoch."""
    gave = int(kw.pop("gave", epoch if epoch > 0 else -1))  # type: ignore[call-overload]
    return req(CGH, at, error, generation=epoch, answer_generation=gave, **kw)


def member_at_epoch_3(*later: Request) -> list[Request]:
    """A consumer-protocol member that joined (epoch 3, partitions 0 and 1) and
    acknowledged, before the situation (at 100 ms)."""
    return [
        beat(100, 0, gave=3, fields=JOIN_FIELDS, owned=(), assignment=("0", "1")),
        beat(110, 3, fields=("owned",), owned=("0", "1")),
        *later,
    ]


def test_heartbeat_steps_name_the_epoch_the_fields_and_owned_against_the_target() -> None:
    requests = member_at_epoch_3(
        beat(1000, 3),  # steady: timing, not a step
        beat(1500, 3, "FENCED_MEMBER_EPOCH", injected=True, gave=3),
        beat(1600, 0, gave=5, fields=JOIN_FIELDS, owned=(), assignment=("0",)),
        beat(1700, 5, fields=("owned",), owned=("0",)),
        beat(1800, 3, gave=5),  # an epoch it no longer has
        beat(1900, 5, "NONE", fields=("owned",), owned=("1",)),
        beat(2000, -1, fields=("topics=[]", "owned"), owned=()),
    )
    calls = [Callback(1550, "revoked_or_lost", "[0, 1]"), Callback(1650, "assigned", "[0]")]
    trace = normalise(requests, calls, [Mark(1950, "stop")], since_ms=1000)
    assert trace.steps == [
        f"{CGH}(epoch=current) -> FENCED_MEMBER_EPOCH",
        "lost [0, 1]",
        f"{CGH}(epoch=join, rebalance_timeout, topics, owned=[]) -> NONE",
        "assigned [0]",
        f"{CGH}(epoch=current, owned=target) -> NONE",
        f"{CGH}(epoch=stale) -> NONE",
        f"{CGH}(epoch=current, owned=[1]) -> NONE",
        "<stop>",
        f"{CGH}(epoch=leave, topics=[], owned=[]) -> NONE",
    ]
    assert trace.delays == [(f"after {CGH} FENCED_MEMBER_EPOCH", 99.0)]


@pytest.mark.parametrize("error", ["FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID",
                                   "FENCED_INSTANCE_ID", "UNRELEASED_INSTANCE_ID"])  # fmt: skip
def test_a_revoke_after_a_fencing_or_fatal_heartbeat_answer_is_lost(error: str) -> None:
    requests = member_at_epoch_3(beat(1000, 3, error, gave=3))
    assert settle_lost(requests, [Callback(1005, "revoked_or_lost", "[0]")])[0].kind == "lost"


def test_a_revoke_once_a_heartbeat_was_answered_again_is_revoked() -> None:
    requests = member_at_epoch_3(
        beat(1000, 3, "UNKNOWN_MEMBER_ID", gave=3),
        beat(1100, 0, gave=4, fields=JOIN_FIELDS, owned=(), assignment=("0",)),
        beat(1200, 3, "NOT_COORDINATOR", gave=3),  # no fencing: nothing lost
    )
    calls = [Callback(1150, "revoked_or_lost", "[0]"), Callback(1250, "revoked_or_lost", "[0]")]
    assert [c.kind for c in settle_lost(requests, calls)] == ["revoked", "revoked"]


def test_a_static_members_instance_id_and_a_dropped_answer() -> None:
    # Java sends the instance id with every heartbeat: a steady one stays timing; an
    # answer lost with its connection is a step.
    requests = member_at_epoch_3(
        beat(1000, 3, fields=("instance_id",)),
        beat(1500, 3, fields=("instance_id",), dropped=True),
        beat(1600, 3, fields=("instance_id", *JOIN_FIELDS), owned=("0", "1")),
        beat(1700, -2, fields=("instance_id", "topics=[]", "owned"), owned=()),
    )
    assert normalise(requests, [], [], since_ms=900).steps == [
        f"{CGH}(epoch=current, instance_id) -> NONE, connection closed",
        f"{CGH}(epoch=current, instance_id, rebalance_timeout, topics, owned=target) -> NONE",
        f"{CGH}(epoch=leave-static, instance_id, topics=[], owned=[]) -> NONE",
    ]


def test_a_commit_is_a_step_while_reconciling_and_not_once_acknowledged() -> None:
    requests = member_at_epoch_3(
        req("OffsetCommit", 900, generation=3),  # the program's own: left out
        beat(1000, 3, gave=4, assignment=("0",)),  # a new target: reconciling
        req("OffsetCommit", 1010, generation=4),
        beat(1020, 4, fields=("owned",), owned=("0",)),
        req("OffsetCommit", 1100, generation=4),
        beat(1200, 4, gave=4, fields=JOIN_FIELDS, owned=("0",), assignment=("0",)),
        req("OffsetCommit", 1300, generation=4),  # the same target again: not reconciling
    )
    assert normalise(requests, [], [], since_ms=1000).steps == [
        "OffsetCommit(gen=current) -> NONE (reconciling)",
        f"{CGH}(epoch=current, owned=target) -> NONE",
        f"{CGH}(epoch=current, rebalance_timeout, topics, owned=target) -> NONE",
    ]


def test_the_steady_interval_is_the_median_gap_and_needs_enough_heartbeats() -> None:
    def steady_run(gaps: list[float]) -> list[Request]:
        out, at = member_at_epoch_3(), 1000.0
        for gap in [0.0, *gaps]:
            at += gap
            out.append(beat(at, 3, interval_ms=2000, took=1))
            at += 1
        return out

    assert steady_interval(steady_run([2000, 2010, 4000]), 900) == [
        ("steady heartbeat interval (given 2000 ms)", 2010.0)
    ]
    assert steady_interval(steady_run([2000, 2000]), 900) == []  # two gaps: too few
    # A member that heartbeat every 500 ms when given 2 s differs from one that did not.
    fast = normalise(steady_run([500, 500, 500]), [], [], 900)
    slow = normalise(steady_run([2000, 2000, 2000]), [], [], 900)
    assert compare(slow, fast) == [
        "delay steady heartbeat interval (given 2000 ms): java 2000 ms, kgctl 500 ms"
    ]


def test_a_revoke_stamped_in_the_stops_millisecond_comes_after_the_stop() -> None:
    # kgctl's close revoked in the millisecond the test sent SIGTERM; truncated to whole
    # milliseconds, its stamp read 0.4 ms before the stop (k848-first-join-static).
    requests = member_at_epoch_3(beat(1757.2, -2, fields=("instance_id", "owned"), owned=()))
    calls = [Callback(1756, "revoked_or_lost", "[0, 1]")]
    steps = normalise(requests, calls, [Mark(1756.4, "stop")], since_ms=1000).steps
    assert steps == [
        "<stop>",
        "revoked [0, 1]",
        f"{CGH}(epoch=leave-static, instance_id, owned=[]) -> NONE",
    ]
    # One stamped in the millisecond before is still before it.
    calls = [Callback(1755, "assigned", "[0, 1]")]
    steps = normalise(requests, calls, [Mark(1756.4, "stop")], since_ms=1000).steps
    assert steps[:2] == ["assigned [0, 1]", "<stop>"]
