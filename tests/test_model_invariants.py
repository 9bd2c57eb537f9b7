"""Pure tests of the invariant checks chaos relies on."""

from __future__ import annotations

from helpers import FOLD_GROUP as G
from helpers import mev, two_member_eager_history

from kgctl.model.fold import fold_all
from kgctl.model.invariants import (
    check_complete_ownership,
    check_exclusive_ownership,
    check_single_generation,
    check_stable_group,
)
from kgctl.model.state import GroupState


def test_a_clean_rebalance_breaks_nothing() -> None:
    s = fold_all(GroupState(G), two_member_eager_history(), now_ms=6000)
    assert check_stable_group(s, 6000) == []


def test_a_zombie_owning_a_reassigned_partition_is_named() -> None:
    events = two_member_eager_history()
    # m1 never revokes partition 3 (a zombie) while m2 is given it.
    events[7] = mev("PartitionsRevoked", 5200, "m1", 1, partitions={"t": [0, 1, 2]})
    s = fold_all(GroupState(G), events, now_ms=6000)
    violations = check_exclusive_ownership(s)
    assert len(violations) == 1
    v = violations[0]
    assert (v.rule, v.topic, v.partition, v.at_ms) == ("exclusive-ownership", "t", 3, 5450)
    assert v.members == ("m1", "m2")
    # Times as a person reads them (UTC), not epoch milliseconds.
    assert v.message == (
        "t-3 owned by both m1 (since 00:00:01.160 UTC) and m2 (since 00:00:05.450 UTC)"
    )


def test_an_unowned_partition_in_a_stable_group_is_named() -> None:
    s = fold_all(GroupState(G), two_member_eager_history(), now_ms=6000)
    violations = check_complete_ownership(s, 6000, expected=[("t", 0), ("t", 9)])
    assert [(v.topic, v.partition, v.members) for v in violations] == [("t", 9, ())]
    assert violations[0].at_ms == 6000


def test_a_member_left_behind_on_an_old_generation_is_named() -> None:
    events = two_member_eager_history()[:-2]  # m2 never completes generation 2...
    events.append(mev("HeartbeatSucceeded", 5500, "m2", 1))  # ...and claims generation 1
    s = fold_all(GroupState(G), events, now_ms=6000)
    violations = check_single_generation(s, 6000)
    assert [(v.members, v.rule) for v in violations] == [(("m2",), "single-generation")]
    assert "generation 1 while the group is on 2" in violations[0].message


def test_an_overlap_with_an_excused_owner_is_not_a_violation() -> None:
    # Chaos froze m1 (SIGSTOP) from 5000: the broker gave partition 3 to m2 while m1
    # still believed it owned it. m1 could not consume, so this is not a double owner.
    events = two_member_eager_history()
    events[7] = mev("PartitionsRevoked", 5200, "m1", 1, partitions={"t": [0, 1, 2]})
    s = fold_all(GroupState(G), events, now_ms=6000)
    frozen = {"m1": (5000, 7000)}

    def excused(member: str, at_ms: int) -> bool:
        start, end = frozen.get(member, (0, -1))
        return start <= at_ms <= end

    assert check_exclusive_ownership(s, excused) == []
    assert len(check_exclusive_ownership(s, lambda _m, _t: False)) == 1


def test_a_handover_in_the_same_millisecond_is_not_an_overlap() -> None:
    events = two_member_eager_history()
    # m1 revokes t-3 at 5450, the very millisecond m2 is given it.
    events[7] = mev("PartitionsRevoked", 5200, "m1", 1, partitions={"t": [0, 1, 2]})
    events.insert(12, mev("PartitionsRevoked", 5450, "m1", 2, partitions={"t": [3]}))
    s = fold_all(GroupState(G), events, now_ms=6000)
    assert [sp.end_ms for sp in s.ownership[("t", 3)] if sp.member == "m1"] == [5450]
    assert check_exclusive_ownership(s) == []


def test_an_excused_overlap_does_not_hide_a_later_one() -> None:
    events = two_member_eager_history()
    events[7] = mev("PartitionsRevoked", 5200, "m1", 1, partitions={"t": [0, 1, 2]})
    # m3 is given t-3 too, at 5500, when m1 was no longer frozen.
    events += [
        mev("PartitionsAssigned", 5500, "m3", 2, partitions={"t": [3]}),
        mev("JoinCompleted", 5500, "m3", 2),
    ]
    s = fold_all(GroupState(G), events, now_ms=6000)
    frozen_until_5460 = lambda member, at_ms: member == "m1" and at_ms <= 5460  # noqa: E731
    found = [(v.members, v.at_ms) for v in check_exclusive_ownership(s, frozen_until_5460)]
    assert (("m1", "m3"), 5500) in found and (("m1", "m2"), 5450) not in found


def test_a_violation_reads_as_a_record() -> None:
    s = fold_all(GroupState(G), two_member_eager_history(), now_ms=6000)
    [v] = check_complete_ownership(s, 6000, expected=[("t", 9)])
    assert v.to_dict() == {
        "rule": "complete-ownership",
        "message": "t-9 has no live owner in a stable group",
        "at_ms": 6000,
        "members": [],
        "topic": "t",
        "partition": 9,
    }


def test_two_live_owners_of_one_partition_are_named() -> None:
    events = two_member_eager_history()
    # m1 never revokes t-3 and m2 is given it: both own it now.
    events[7] = mev("PartitionsRevoked", 5200, "m1", 1, partitions={"t": [0, 1, 2]})
    s = fold_all(GroupState(G), events, now_ms=6000)
    [v] = check_complete_ownership(s, 6000)
    assert (v.topic, v.partition, v.members) == ("t", 3, ("m1", "m2"))
    assert v.message == "t-3 has 2 owners in a stable group: m1, m2"


def test_a_member_on_generation_0_counts_and_the_time_is_the_check_time() -> None:
    events = [
        mev("JoinCompleted", 1000, "m1", 0, assignment={"t": [0]}),
        mev("JoinCompleted", 1100, "m2", 1, assignment={"t": [1]}),
    ]
    s = fold_all(GroupState(G), events, now_ms=2000)
    [v] = check_single_generation(s, 2000)
    assert (v.members, v.at_ms) == (("m1",), 2000)


def test_the_stable_group_check_runs_all_three_at_the_time_given() -> None:
    s = fold_all(GroupState(G), two_member_eager_history(), now_ms=6000)
    [v] = check_stable_group(s, 7000, expected=[("t", 0), ("t", 9)])
    assert (v.rule, v.partition, v.at_ms) == ("complete-ownership", 9, 7000)
    events = two_member_eager_history()[:-2] + [mev("HeartbeatSucceeded", 5500, "m2", 1)]
    s = fold_all(GroupState(G), events, now_ms=6000)
    found = check_stable_group(s, 7000)
    assert "single-generation" in [v.rule for v in found]
    assert {v.at_ms for v in found} == {7000}
