"""Pure tests of the consumer protocol's (KIP-848) ownership rules: single owner at every
epoch, revoked before assigned, no member without partitions unless reconciling."""

from __future__ import annotations

from helpers import FOLD_GROUP as G
from helpers import mev

from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.invariants import (
    check_epoch_order,
    check_idle_members,
    check_revoked_before_assigned,
)
from kgctl.model.state import GroupState


def _reconciliation(b_epoch: int, b_assigned_at: int) -> list[Event]:
    """m1 owns t-0 and t-1 at epoch 3; m2 joins; the broker moves t-1 to m2: m1 revokes
    it at 2000, m2 takes it at `b_assigned_at`, at its epoch `b_epoch`."""
    return [
        mev("PartitionsAssigned", 1000, "m1", 3, partitions={"t": [0, 1]}),
        mev("PartitionsAssigned", 1500, "m2", 4, partitions={}),
        mev("PartitionsRevoked", 2000, "m1", 3, partitions={"t": [1]}),
        mev("PartitionsAssigned", b_assigned_at, "m2", b_epoch, partitions={"t": [1]}),
    ]


def test_a_clean_reconciliation_keeps_every_rule() -> None:
    s = fold_all(GroupState(G), _reconciliation(4, 2100), now_ms=3000)
    assert check_epoch_order(s) == []
    assert check_revoked_before_assigned(s) == []
    assert check_idle_members(s, ["m1", "m2"], partitions=2) == []


def test_a_partition_given_again_at_the_same_epoch_is_two_owners_at_one_epoch() -> None:
    s = fold_all(GroupState(G), _reconciliation(3, 2100), now_ms=3000)
    [v] = check_epoch_order(s)
    assert (v.rule, v.topic, v.partition, v.members) == (
        "single-owner-per-epoch",
        "t",
        1,
        ("m1", "m2"),
    )
    assert "t-1 went from m1 (epoch 3) to m2 at epoch 3" in v.message
    # A member that reports no epoch (a Java VerifiableConsumer) is not judged.
    assert check_epoch_order(s, unknown=["m2"]) == []


def test_a_partition_taken_before_its_owner_revoked_it_is_named() -> None:
    s = fold_all(GroupState(G), _reconciliation(4, 1800), now_ms=3000)
    [v] = check_revoked_before_assigned(s)
    assert (v.rule, v.members, v.at_ms) == ("revoked-before-assigned", ("m1", "m2"), 1800)
    assert v.message == "t-1 assigned to m2 while m1 gave it up 200 ms later"
    # An owner that could not act (frozen, cut off) is excused, as for exclusive ownership.
    assert check_revoked_before_assigned(s, lambda member, at: member == "m1") == []


def test_a_previous_owner_that_never_gave_the_partition_up_still_owns_it() -> None:
    events = _reconciliation(4, 2100)
    del events[2]  # m1 never revokes t-1
    s = fold_all(GroupState(G), events, now_ms=3000)
    [v] = check_revoked_before_assigned(s)
    assert v.message == "t-1 assigned to m2 while m1 still owned it"


def test_a_member_left_without_partitions_is_idle_unless_reconciling() -> None:
    events = _reconciliation(4, 2100)[:2]  # m2 joined; nothing moved to it yet
    s = fold_all(GroupState(G), events, now_ms=3000)
    [v] = check_idle_members(s, ["m1", "m2"], partitions=2)
    assert (v.rule, v.members) == ("no-idle-member", ("m2",))
    assert "m2 owns no partition in a stable group of 2 members over 2 partitions" in v.message
    assert check_idle_members(s, ["m1", "m2"], partitions=2, reconciling=["m2"]) == []
    # More members than partitions: somebody must be idle, nobody is blamed.
    assert check_idle_members(s, ["m1", "m2"], partitions=1) == []
