"""Pure tests of the timeline queries chaos, report and watch share (kgctl/model/timeline.py)
and of the cause vocabulary (kgctl/model/reasons.py)."""

from __future__ import annotations

import pytest
from helpers import FOLD_GROUP as G
from helpers import KEPT_RECORDINGS, group_streams, mev, two_member_eager_history

from kgctl.model.events import Event
from kgctl.model.fold import fold_all, fold_many
from kgctl.model.reasons import CAUSE_ORDER, Cause, cause_of_reason, cause_text
from kgctl.model.state import GroupState, OwnershipSpan
from kgctl.model.timeline import (
    Move,
    counted_errors,
    diff_owners,
    generations_since,
    moves,
    owners_at,
    rebalance_moves,
    rebalance_unassigned,
    unassigned_by_member,
    unassigned_ms,
)


def state_of(events: list) -> GroupState:  # type: ignore[type-arg]
    return fold_all(GroupState(G), events, now_ms=events[-1].ts_ms)


def test_time_without_partitions_of_a_rebalance_is_from_its_start_to_stable() -> None:
    s = state_of(two_member_eager_history())
    g1, g2 = s.generations
    # m1 owned nothing from its revocation (5200) to its assignment (5400); m2 from the
    # rebalance that admitted it (5010) until its assignment (5450): the 10 ms it lived
    # before that rebalance are outside the window.
    assert rebalance_unassigned(s, g2, 6000) == {"m1": 200, "m2": 440}
    # Generation 1: m1 alone, from the rebalance start (1010) until its share (1160).
    assert rebalance_unassigned(s, g1, 6000) == {"m1": 150}


def test_time_without_partitions_counts_only_while_the_member_lives() -> None:
    events = [
        *two_member_eager_history(),
        # m2 is killed at 7000 and restarted at 9000: down for 2 s, owning nothing.
        mev("MemberFailed", 7000, "m2", 2, error="SIGKILL"),
        mev("MemberStarted", 9000, "m2"),
        mev("JoinGroupSent", 9010, "m2"),
        mev("JoinGroupReceived", 9100, "m2", 3, leader="m1-id"),
        mev("JoinCompleted", 9300, "m2", 3, partitions={"t": [2, 3]}),
    ]
    s = state_of(events)
    assert s.members["m2"].lives == ((5000, 7000), (9000, None))
    # Alive 6000-7000 owning t[2,3], then dead, then 9000-9300 owning nothing.
    assert unassigned_ms(s, "m2", 6000, 10_000) == 300
    assert unassigned_by_member(s, 6000, 10_000) == {"m2": 300}
    assert unassigned_by_member(s, 6000, 10_000, with_zero=True) == {"m1": 0, "m2": 300}
    # A member that was not alive in the window is not in it at all.
    assert "m2" not in unassigned_by_member(s, 7500, 8500, with_zero=True)


def test_moves_keep_partitions_that_end_with_no_owner_and_those_that_had_none() -> None:
    before = {("t", 0): ("a",), ("t", 1): ("a",), ("t", 2): ("b",)}
    after = {("t", 0): ("a",), ("t", 1): ("b",), ("t", 2): (), ("u", 0): ("a",)}
    assert diff_owners(before, after) == (
        Move("t", 1, ("a",), ("b",)),
        Move("t", 2, ("b",), ()),  # released: its topic left every subscription
        Move("u", 0, (), ("a",)),  # a new partition
    )


def test_moves_of_a_rebalance_compare_before_its_start_with_stable() -> None:
    s = state_of(two_member_eager_history())
    g2 = s.generations[1]
    # t-2 and t-3 went from m1 to m2; t-0 and t-1 were revoked and given back to m1.
    assert [m.to_dict() for m in rebalance_moves(s, g2, 6000)] == [
        {"topic": "t", "partition": 2, "from": ["m1"], "to": ["m2"]},
        {"topic": "t", "partition": 3, "from": ["m1"], "to": ["m2"]},
    ]
    # In the middle of the rebalance (after m1's eager revocation) everything had no owner.
    assert [m.after for m in moves(s, 5000, 5300)] == [()] * 4


def test_generations_since_a_baseline() -> None:
    s = state_of(two_member_eager_history())
    assert generations_since(s, 1) == [2]
    assert generations_since(s, -1) == [1, 2]
    assert generations_since(s, 2) == []


def test_errors_skip_normal_answers_the_rebalance_signal_and_repeated_join_failures() -> None:
    events = [
        mev("JoinGroupReceived", 1, "m1", error="MEMBER_ID_REQUIRED"),
        mev("JoinFailed", 2, "m1", error="MEMBER_ID_REQUIRED", retry="immediate"),
        mev("SyncGroupReceived", 3, "m1", error="REBALANCE_IN_PROGRESS"),
        mev("JoinFailed", 4, "m1", error="REBALANCE_IN_PROGRESS", retry="immediate"),
        mev("JoinFailed", 5, "m1", error="RequestTimedOutError", retry="backoff"),
        mev("HeartbeatFailed", 6, "m2", error="REBALANCE_IN_PROGRESS"),
        mev("HeartbeatSucceeded", 7, "m2", error="NONE"),
    ]
    assert [(e.type, e.member, err) for e, err in counted_errors(events)] == [
        ("SyncGroupReceived", "m1", "REBALANCE_IN_PROGRESS"),
        ("JoinFailed", "m1", "RequestTimedOutError"),  # no response said it: a failure
    ]  # m2's heartbeat answered REBALANCE_IN_PROGRESS: how it learnt of the rebalance


def test_rejoin_reasons_name_causes_and_reactions_name_none() -> None:
    assert cause_of_reason("first_join") == Cause.MEMBER_JOINED.value
    assert cause_of_reason("metadata_changed") == "partitions_changed"
    assert cause_of_reason("poll_interval_exceeded") == "timed_out"
    assert cause_of_reason("rebalance_in_progress") is None  # someone else's rebalance
    assert cause_of_reason("from_a_newer_member") == "from_a_newer_member"
    assert CAUSE_ORDER[0] is Cause.MEMBER_FAILED and Cause.UNKNOWN not in CAUSE_ORDER
    assert cause_text("subscription_changed") == "subscription changed"


def test_a_dead_members_partitions_move_from_it_not_from_no_one() -> None:
    events = [
        *two_member_eager_history(),
        # m2 dies at 7000; the rebalance that hands its share to m1 only begins at 8000.
        mev("MemberFailed", 7000, "m2", 2, error="SIGKILL"),
        mev("JoinGroupSent", 8000, "m1", 2),
        mev("JoinGroupReceived", 8050, "m1", 3, leader="m1-id"),
        mev("PartitionsAssigned", 8100, "m1", 3, partitions={"t": [2, 3]}),
        mev("JoinCompleted", 8100, "m1", 3),
    ]
    s = state_of(events)
    g3 = s.generations[-1]
    assert [(m.name, m.before, m.after) for m in rebalance_moves(s, g3, 9000)] == [
        ("t-2", ("m2",), ("m1",)),
        ("t-3", ("m2",), ("m1",)),
    ]


def _recorded_streams() -> list[list[Event]]:
    """Each group of each kept recording, as the views order it."""
    return [stream for path in KEPT_RECORDINGS for stream in group_streams(path)]


def _recorded_states() -> list[GroupState]:
    return [
        fold_many(GroupState(ev[0].group), ((e, e.ts_ms) for e in ev)) for ev in _recorded_streams()
    ]


def test_owners_read_from_the_intervals_are_the_spans_owners_at_every_instant() -> None:
    """`owners_at` reads the spans grouped by member and interval: at every span's start
    and end, a millisecond either side, and now, it gives what `GroupState.owners` gives,
    for every group of every kept recording."""
    states = _recorded_states()
    assert sum(len(s.ownership) for s in states) > 100
    for s in states:
        instants = {None} | {
            t + d
            for spans in s.ownership.values()
            for sp in spans
            for t in (sp.start_ms, sp.end_ms)
            if t is not None
            for d in (-1, 0, 1)
        }
        for t in instants:
            assert owners_at(s, t) == s.owners(t), (s.group, t)


def test_a_partition_with_two_owners_at_once_has_them_in_their_spans_order() -> None:
    """Two members own one partition at the same time (a cooperative handover folded
    before the old owner's revocation): both are named, in the order they took it."""
    s = GroupState(
        G,
        ownership={
            ("t", 0): (OwnershipSpan("b", 1, 100, 300), OwnershipSpan("a", 2, 200)),
            ("t", 1): (OwnershipSpan("a", 1, 100, 300), OwnershipSpan("b", 2, 200)),
        },
    )
    assert owners_at(s, 250) == {("t", 0): ("b", "a"), ("t", 1): ("a", "b")} == s.owners(250)
    assert owners_at(s, None) == {("t", 0): ("a",), ("t", 1): ("b",)} == s.owners()


def test_owners_in_another_order_or_kind_of_sequence_are_no_move() -> None:
    before = {("t", 0): ("a", "b"), ("t", 1): ["a"]}
    after = {("t", 0): ("b", "a"), ("t", 1): ("a",)}
    assert diff_owners(before, after) == ()


def test_a_diagnosis_and_the_frames_reading_two_states_keep_both_memos() -> None:
    """The live view diagnoses one state on a worker while its frames read newer ones:
    what was worked out for each mapping stays while the other is read (with one memo
    for the last mapping, each reading threw the other's away)."""
    from kgctl.model.timeline import _memo_of

    older = state_of(two_member_eager_history())
    newer = GroupState(G, ownership={("t", 0): (OwnershipSpan("a", 1, 100),)})
    memo = _memo_of(older)
    memo["probe"] = 1
    for _ in range(3):
        _memo_of(newer)
        assert _memo_of(older) is memo
    fresh = [GroupState(G, ownership={("t", k): ()}) for k in range(5)]
    for s in fresh:
        _memo_of(s)
    assert "probe" not in _memo_of(older)  # the least recently read went first


def test_moves_are_those_of_every_partition_compared_sorted() -> None:
    """`diff_owners` compares only what differs as given: the same moves as sorting and
    comparing every partition's owners, on random pictures of who owns what."""
    import random

    rng = random.Random(27)

    def picture() -> dict[tuple[str, int], object]:
        out: dict[tuple[str, int], object] = {}
        for p in rng.sample(range(30), rng.randint(0, 30)):
            who = rng.sample("abc", rng.randint(0, 2))
            out[("t", p)] = rng.choice([tuple(who), list(who)])
        return out

    for _ in range(300):
        before, after = picture(), picture()
        expected = tuple(
            Move(tp[0], tp[1], a, b)
            for tp in sorted(set(before) | set(after))
            if (a := tuple(sorted(before.get(tp, ())))) != (b := tuple(sorted(after.get(tp, ()))))
        )
        assert diff_owners(before, after) == expected  # type: ignore[arg-type]


def test_intervals_worked_out_from_the_last_mappings_are_those_of_every_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a rebalance runs the intervals are worked out from the last mapping read,
    where partitions' spans changed: after every event of every kept recording (and of
    a generated rebalance of 50 members), they hold what a pass over every span finds."""
    import kgctl.model.timeline as timeline
    from kgctl.model.fold import fold

    changed = []
    real = timeline._intervals_changed

    def counted(ownership):  # type: ignore[no-untyped-def]
        found = real(ownership)
        changed.append(found is not None)
        return found

    monkeypatch.setattr(timeline, "_intervals_changed", counted)
    from bench.micro import _Stamp, rebalance_events

    stamp = _Stamp(G, 1_800_000_000_000)
    generated = [rebalance_events(stamp, 50, 500, g) for g in (1, 2, 3)]
    streams = [[e for gen in generated for e in gen], *(_recorded_streams())]
    for events in streams:
        s = GroupState(events[0].group)
        for ev in events:
            s = fold(s, ev, ev.ts_ms)
            found = timeline._intervals(s)
            every = timeline.intervals_of(s.ownership)
            assert {k: sorted(v) for k, v in found.items()} == {
                k: sorted(v) for k, v in every.items()
            }
    assert sum(changed) > 500 and not all(changed)
