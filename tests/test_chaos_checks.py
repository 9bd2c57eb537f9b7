"""Pure tests of what chaos judges beyond the model's invariants: at-least-once (records
produced and never consumed, records delivered twice), the killed member's handover and
commits. Each recording here has the fault the check is for, so a check that stopped
looking would fail. (Time without partitions and moves: test_model_timeline.py.)"""

from __future__ import annotations

from helpers import FOLD_GROUP as G
from helpers import mev, two_member_eager_history

from kgctl.chaos.checks import (
    commit_violations,
    consumed_coverage,
    duplicate_count,
    first_owner_after,
    missing_records,
)
from kgctl.model.fold import fold_all
from kgctl.model.invariants import excused_by
from kgctl.model.state import GroupState

# Offsets 0..9 of t-0 and 0..4 of t-1 were produced (acknowledged by the broker).
PRODUCED = [("t", 0, o) for o in range(10)] + [("t", 1, o) for o in range(5)]


def test_a_gap_in_what_was_consumed_is_named_record_by_record() -> None:
    # m1 consumed t-0 0..3, then m2 took over at the committed offset 6: 4 and 5 were
    # never consumed (a commit past what was processed). t-1 lost its last record.
    batches = [("t", 0, 0, 3), ("t", 0, 6, 9), ("t", 1, 0, 3)]
    coverage = consumed_coverage(batches)
    assert coverage == {("t", 0): [(0, 3), (6, 9)], ("t", 1): [(0, 3)]}
    assert missing_records(PRODUCED, coverage) == [("t", 0, 4), ("t", 0, 5), ("t", 1, 4)]


def test_nothing_is_missing_when_batches_cover_every_record_in_any_order() -> None:
    batches = [("t", 1, 2, 4), ("t", 0, 5, 9), ("t", 0, 0, 4), ("t", 1, 0, 1)]
    coverage = consumed_coverage(batches)
    # Adjacent ranges merge into one: 0..4 and 5..9 leave no hole.
    assert coverage == {("t", 0): [(0, 9)], ("t", 1): [(0, 4)]}
    assert missing_records(PRODUCED, coverage) == []


def test_a_partition_nobody_consumed_is_missing_whole() -> None:
    coverage = consumed_coverage([("t", 0, 0, 9)])
    assert missing_records(PRODUCED, coverage) == [("t", 1, o) for o in range(5)]
    # The same offsets on another topic do not count for this one.
    assert missing_records([("u", 0, 3)], coverage) == [("u", 0, 3)]


def test_each_extra_delivery_is_one_duplicate() -> None:
    # m1 consumed t-0 0..5 and died before committing past 2; m2 re-read 3..8: offsets
    # 3, 4, 5 came twice. Then a third member re-read 4 once more.
    assert duplicate_count([("t", 0, 0, 5), ("t", 0, 3, 8)]) == 3
    assert duplicate_count([("t", 0, 0, 5), ("t", 0, 3, 8), ("t", 0, 4, 4)]) == 4
    # A batch seen whole twice: every record once more.
    assert duplicate_count([("t", 1, 0, 4), ("t", 1, 0, 4)]) == 5


def test_disjoint_and_adjacent_batches_are_not_duplicates() -> None:
    assert duplicate_count([("t", 0, 0, 4), ("t", 0, 5, 9), ("t", 1, 0, 4)]) == 0
    # The same offsets on two partitions are two different records.
    assert duplicate_count([("t", 0, 0, 4), ("t", 1, 0, 4), ("u", 0, 0, 4)]) == 0


def test_an_overlap_spanning_two_earlier_batches_counts_each_record_once() -> None:
    # 0..2 and 6..8 were read, then 0..8: the repeat is 0..2 and 6..8 (6 records), not
    # the 3..5 that were new.
    assert duplicate_count([("t", 0, 0, 2), ("t", 0, 6, 8), ("t", 0, 0, 8)]) == 6
    # And once merged, a further re-read of 0..8 repeats all 9.
    assert duplicate_count([("t", 0, 0, 2), ("t", 0, 6, 8), ("t", 0, 0, 8), ("t", 0, 0, 8)]) == 15


def state_after_m1_killed() -> GroupState:
    """m1 and m2 split t 0-3 in generation 2; m1 is killed at 7000; m2 owns everything in
    generation 3 from 9000."""
    events = [
        *two_member_eager_history(),
        mev("PartitionsRevoked", 8800, "m2", 2, partitions={"t": [2, 3]}),
        mev("PartitionsAssigned", 9000, "m2", 3, partitions={"t": [0, 1, 2, 3]}),
        mev("JoinCompleted", 9000, "m2", 3),
    ]
    return fold_all(GroupState(G), events, now_ms=10_000)


def test_the_handover_of_a_killed_members_partition_is_found() -> None:
    s = state_after_m1_killed()
    # t-0 was m1's until m2 got it at 9000; m1's own spans do not count.
    assert first_owner_after(s, ("t", 0), 7000, "m1") == ("m2", 9000)
    # t-2 was already m2's when m1 was killed: handed over at once.
    assert first_owner_after(s, ("t", 2), 7000, "m1") == ("m2", 7000)
    # A killed member never revokes: in the fold its t-0 span stays open, so asked about
    # anyone but m2, the answer is m1 at once (the check asks about the killed one).
    assert first_owner_after(s, ("t", 0), 9500, "m2") == ("m1", 9500)
    # A span that ended before the kill does not count: m2 owned t-2 until 8800 only
    # in generation 2, then again from 9000.
    assert first_owner_after(s, ("t", 2), 8900, "m1") == ("m2", 9000)
    assert first_owner_after(s, ("t", 9), 7000, "m1") is None


def test_an_excused_overlap_is_one_inside_a_frozen_interval() -> None:
    excused = excused_by({"m1": [(1000, 2000), (5000, None)]})
    assert excused("m1", 1000) and excused("m1", 2000) and excused("m1", 9_999_999)
    assert not excused("m1", 999) and not excused("m1", 2001) and not excused("m2", 1500)


def test_commits_that_go_back_or_run_ahead_of_the_committer_are_named() -> None:
    tp = ("t", 0)
    log = [
        (1000, "m1", tp, 5, 5),  # m1 consumed up to 5 and committed 5: fine
        (2000, "m2", tp, 3, 3),  # m2 committed behind the group's 5
        (3000, "m2", tp, 9, 6),  # m2 committed 9 having consumed up to 6 only
    ]
    rules = [(rule, ts, member) for rule, _msg, ts, member, _where in commit_violations(log)]
    assert rules == [("commits-monotonic", 2000, "m2"), ("commit-not-ahead", 3000, "m2")]
    # Arrival order does not matter: judged in the members' own time order.
    assert commit_violations(list(reversed(log[:1])) + [(1500, "m2", tp, 5, 0)]) == []


def test_a_one_offset_gap_is_not_merged_away() -> None:
    coverage = consumed_coverage([("t", 0, 0, 3), ("t", 0, 5, 9)])
    assert coverage == {("t", 0): [(0, 3), (5, 9)]}
    assert missing_records(PRODUCED[:10], coverage) == [("t", 0, 4)]


def test_a_span_ending_at_the_kill_is_not_a_handover() -> None:
    s = state_after_m1_killed()
    # m2's first t-2 span ended at 8800; asked from 8800 on, only its next one counts.
    assert first_owner_after(s, ("t", 2), 8800, "m1") == ("m2", 9000)


def test_commits_are_judged_in_the_members_time_order_lowest_offset_first() -> None:
    tp = ("t", 0)
    # In one millisecond, m1's commit of 5 (it consumed up to 9) and m2's of 7: 5 then
    # 7, nothing went back.
    assert commit_violations([(1000, "m2", tp, 7, 7), (1000, "m1", tp, 5, 9)]) == []
    # In one millisecond, a new owner re-committing the offset it started from (it has
    # consumed nothing) after the old owner's commit it relies on: no violation.
    log = [(1000, "a-new", tp, 5, 0), (1000, "b-old", tp, 5, 5)]
    assert commit_violations(log) == []


def test_commit_violations_name_the_partition_and_count_from_zero() -> None:
    tp = ("orders", 3)
    ahead = commit_violations([(1000, "m1", tp, 1, 0)])
    assert ahead == [
        ("commit-not-ahead", "m1 committed orders-3 at 1, ahead of its position 0", 1000,
         "m1", "orders-3"),
    ]  # fmt: skip
    back = commit_violations([(1000, "m1", tp, 4, 4), (2000, "m2", tp, 2, 2)])
    assert back == [
        ("commits-monotonic", "m2 committed orders-3 at 2, behind 4", 2000, "m2", "orders-3"),
    ]
    # Committing 0, twice, is neither behind nor ahead.
    assert commit_violations([(1000, "m1", tp, 0, 0), (2000, "m1", tp, 0, 0)]) == []
