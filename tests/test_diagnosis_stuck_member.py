"""A member alive but not rejoining (its rebalance callback blocks, or a batch runs past
max.poll.interval.ms), seen from the wire as an app fleet's members are: pure, no
broker. Recorded shape: examples/apps/java/broken-stall-in-revoke.yaml."""

from __future__ import annotations

from dataclasses import replace

from helpers import mev

from kgctl.model.diagnosis import diagnose
from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.state import GroupState


def wire(e: Event) -> Event:
    return replace(e, source="wire")


def history() -> list[Event]:
    """m1 and m2 in generation 1; m3 joins at 10,000; m2 is told at 10,400 but never
    rejoins; the coordinator goes on without it at 16,000 (its rebalance timeout)."""
    a = {"t": [0, 1]}
    b = {"t": [2, 3]}
    evs = [
        mev("JoinGroupSent", 1000, "m1", member_id="m1-id", rebalance_timeout_ms=6000),
        mev("JoinGroupSent", 1000, "m2", member_id="m2-id", rebalance_timeout_ms=6000),
        mev("JoinGroupReceived", 1100, "m1", 1, generation=1, leader="m1-id",
            members=[{"member_id": "m1-id"}, {"member_id": "m2-id"}]),
        mev("JoinGroupReceived", 1100, "m2", 1, generation=1, leader="m1-id", members=[]),
        mev("JoinCompleted", 1200, "m1", 1, generation=1, assignment=a),
        mev("JoinCompleted", 1200, "m2", 1, generation=1, assignment=b),
        mev("JoinGroupSent", 10_000, "m3", member_id="m3-id", rebalance_timeout_ms=6000),
        mev("HeartbeatFailed", 10_300, "m1", 1, error="REBALANCE_IN_PROGRESS"),
        mev("PartitionsRevoked", 10_310, "m1", 1, partitions=a),
        mev("JoinGroupSent", 10_310, "m1", 1, member_id="m1-id", rebalance_timeout_ms=6000),
        mev("HeartbeatFailed", 10_400, "m2", 1, error="REBALANCE_IN_PROGRESS"),
        mev("HeartbeatFailed", 10_900, "m2", 1, error="REBALANCE_IN_PROGRESS"),
        # A follower's answer lists no members; the leader's lists the generation.
        mev("JoinGroupReceived", 16_000, "m3", 2, generation=2, leader="m1-id", members=[]),
        mev("JoinGroupReceived", 16_000, "m1", 2, generation=2, leader="m1-id",
            members=[{"member_id": "m1-id"}, {"member_id": "m3-id"}]),
        mev("JoinCompleted", 16_050, "m1", 2, generation=2, assignment={"t": [0, 1]}),
        mev("JoinCompleted", 16_050, "m3", 2, generation=2, assignment={"t": [2, 3]}),
    ]  # fmt: skip
    return [wire(e) for e in evs]


def test_a_follower_s_answer_removes_no_one() -> None:
    evs = history()
    s = fold_all(GroupState(evs[0].group), evs[:13], 16_000)  # m3's answer, before m1's
    assert s.members["m1"].alive and s.members["m2"].alive
    s = fold_all(s, evs[13:], 16_050)  # the leader's answer lists m1 and m3
    assert s.members["m1"].alive and not s.members["m2"].alive


def test_a_member_told_but_never_rejoining_is_what_the_join_waited_for() -> None:
    evs = history()
    s = fold_all(GroupState(evs[0].group), evs, 17_000)
    [d] = [d for d in diagnose(s, evs, 17_000) if d.generation == 2]
    [w] = d.critical_path
    assert (w.member, w.why, w.phase, w.confidence) == ("m2", "processing", "join", "inferred")
    assert w.ms >= 5000 and "REBALANCE_IN_PROGRESS" in w.detail
    # m1, eager, was without partitions from its JoinGroup to its new assignment.
    assert {c.member: c.unassigned_ms for c in d.costs}["m1"] >= 5000
