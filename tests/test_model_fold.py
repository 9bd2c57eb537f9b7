"""Pure tests of fold: members' own events and the observer's inferred events."""

from __future__ import annotations

from typing import Any

from helpers import FOLD_GROUP, mev, oev, two_member_eager_history

from kgctl.model.events import Event
from kgctl.model.fold import fold, fold_all
from kgctl.model.state import GroupState

G = FOLD_GROUP


def test_member_events_build_members_generations_and_phases() -> None:
    s = fold_all(GroupState(G), two_member_eager_history(), now_ms=6000)

    assert set(s.members) == {"m1", "m2"}
    m1, m2 = s.members["m1"], s.members["m2"]
    assert dict(m1.partitions) == {"t": (0, 1)}
    assert dict(m2.partitions) == {"t": (2, 3)}
    assert m1.phase == m2.phase == "Stable"
    assert m1.generation == m2.generation == 2
    assert m1.client_id == "m1-client" and m1.host == "10.0.0.1"
    assert s.leader == "m1" and s.protocol == "range"

    assert [g.generation for g in s.generations] == [1, 2]
    g1, g2 = s.generations
    assert g1.start_ms == 1010 and g1.sync_ms == 1100 and g1.stable_ms == 1160
    # Generation 1 ends when the rebalance that produced generation 2 began (m2's join).
    assert g1.end_ms == 5010
    assert g2.start_ms == 5010 and g2.sync_ms == 5300 and g2.stable_ms == 5450
    assert g2.rebalance_ms() == 440
    assert [p[0] for p in g2.phase_spans(6000)] == ["JoinGroup", "SyncGroup", "Stable"]
    assert s.stable and not s.rebalancing
    # Each member lives from its first event on (time without partitions is counted in
    # test_model_timeline.py).
    assert m1.lives == ((1000, None),) and m2.lives == ((5000, None),)


def test_ownership_history_per_partition() -> None:
    s = fold_all(GroupState(G), two_member_eager_history(), now_ms=6000)
    spans = s.ownership[("t", 2)]
    assert [(sp.member, sp.start_ms, sp.end_ms) for sp in spans] == [
        ("m1", 1160, 5200),
        ("m2", 5450, None),
    ]
    assert s.owners() == {
        ("t", 0): ("m1",),
        ("t", 1): ("m1",),
        ("t", 2): ("m2",),
        ("t", 3): ("m2",),
    }
    assert s.owners(at_ms=5300)[("t", 2)] == ()


def test_fold_does_not_change_the_state_it_is_given() -> None:
    s0 = fold_all(GroupState(G), two_member_eager_history()[:5], now_ms=2000)
    before = (dict(s0.members), s0.generations, dict(s0.ownership), s0.recent)
    fold(s0, mev("PartitionsRevoked", 3000, "m1", 1, partitions={"t": [0]}), now_ms=3000)
    assert (dict(s0.members), s0.generations, dict(s0.ownership), s0.recent) == before


def test_unknown_fields_types_and_missing_data_are_tolerated() -> None:
    events = [
        mev("JoinGroupSent", 10, "m1", surprise={"nested": [1, 2]}),
        mev("JoinGroupReceived", 20, "m1", 3),  # no leader, no protocol
        mev("PartitionsAssigned", 30, "m1", 3),  # no partitions at all
        mev("PartitionsAssigned", 31, "m1", 3, partitions={"t": ["x", 1, True]}),
        mev("PartitionsRevoked", 32, "m1", 3, partitions="garbage"),
        Event(type="SomethingNew", ts_ms=40, mono_ms=0, seq=1, group=G, data={"a": 1}),
        oev("GroupObserved", 50, members="not a list", lag=[1, 2]),
        oev("RebalanceAttributed", 60),
        mev("MemberFailed", 70, "m1", 3),
    ]
    s = fold_all(GroupState(G), events, now_ms=100)
    m1 = s.members["m1"]
    assert m1.phase == "failed" and not m1.alive and m1.left_reason == "failed"
    assert s.generation == 3
    assert s.recent[-1].type == "MemberFailed"
    assert any(e.type == "SomethingNew" for e in s.recent)


def test_event_log_is_bounded() -> None:
    s = GroupState(G, log_limit=5)
    for i in range(20):
        s = fold(s, mev("HeartbeatSucceeded", 100 + i, "m1", 1), now_ms=200)
    assert len(s.recent) == 5
    assert s.recent[-1].ts_ms == 119
    assert s.members["m1"].last_seen_ms == 119
    assert s.events_folded == 20


def snapshot(ts: int, state: str, members: list[dict[str, Any]], **extra: Any) -> Event:
    data: dict[str, Any] = {
        "state": state,
        "protocol_type": "consumer",
        "protocol": "range" if state == "Stable" else "",
        "coordinator": "1 127.0.0.1:9092",
        "members": members,
    }
    data.update(extra)
    return oev("GroupObserved", ts, **data)


def desc(mid: str, parts: dict[str, list[int]] | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "member_id": mid,
        "client_id": mid.split("-")[0],
        "host": "/10.0.0.9",
        "instance_id": None,
        "subscription": ["t"],
    }
    if parts is not None:
        raw["partitions"] = parts
    return raw


def test_observer_events_build_state_causes_and_lag() -> None:
    events = [
        snapshot(1000, "Stable", [desc("a-1", {"t": [0, 1]})], lag={"t": {"0": 3, "1": 4}}),
        oev("GroupStateChanged", 2000, **{"from": "Stable", "to": "PreparingRebalance"}),
        oev("MemberJoinedGroup", 2000, member_id="b-1", client_id="b", host="/10.0.0.9"),
        snapshot(2000, "PreparingRebalance", [desc("a-1"), desc("b-1")]),
        oev("GroupStateChanged", 3000, **{"from": "PreparingRebalance", "to": "Stable"}),
        oev("GenerationChanged", 3000, 1, inferred=True, previous=0),
        oev(
            "RebalanceAttributed",
            3000,
            1,
            cause="member_joined",
            guess=False,
            evidence="b joined",
        ),  # fmt: skip
        snapshot(
            3000,
            "Stable",
            [desc("a-1", {"t": [0]}), desc("b-1", {"t": [1]})],
            lag={"t": {"0": 1, "1": 2}},
        ),  # fmt: skip
    ]
    s = fold_all(GroupState(G), events, now_ms=3500)
    assert s.state == "Stable" and s.protocol == "range" and s.protocol_type == "consumer"
    assert s.coordinator == "1 127.0.0.1:9092"
    assert s.generation == 1 and s.generation_inferred
    rec = s.current
    assert rec is not None
    assert (rec.cause, rec.cause_guess, rec.evidence) == ("member_joined", False, "b joined")
    assert rec.start_ms == 2000 and rec.stable_ms == 3000
    assert s.members["a-1"].client_id == "a" and s.members["b-1"].host == "/10.0.0.9"
    assert dict(s.members["b-1"].partitions) == {"t": (1,)}
    assert s.total_lag == 3 and s.members["b-1"].lag == 2
    assert s.owners()[("t", 1)] == ("b-1",)


def test_observer_member_left_closes_ownership_and_disconnect_is_tracked() -> None:
    events = [
        snapshot(1000, "Stable", [desc("a-1", {"t": [0]}), desc("b-1", {"t": [1]})]),
        oev("MemberLeftGroup", 2000, member_id="b-1", reason="gone"),
        oev("BrokerDisconnected", 2500, error="connection refused"),
    ]
    s = fold_all(GroupState(G), events, now_ms=3000)
    assert not s.members["b-1"].alive and s.members["b-1"].left_ms == 2000
    assert s.ownership[("t", 1)][-1].end_ms == 2000
    assert not s.connected and s.disconnected_since_ms == 2500
    assert s.last_error == "connection refused"
    s = fold(s, oev("BrokerReconnected", 4000), now_ms=4000)
    assert s.connected and s.disconnected_since_ms is None


def test_traced_member_and_observed_member_are_one_member() -> None:
    events = [
        snapshot(1000, "Stable", [desc("m1-id", {"t": [0]})]),
        mev("HeartbeatSucceeded", 1100, "m1", 4),
    ]
    s = fold_all(GroupState(G), events, now_ms=1200)
    assert set(s.members) == {"m1"}
    assert s.members["m1"].sources == {"member", "observer"}
    assert s.owners()[("t", 0)] == ("m1",)


def test_missing_group_is_reported() -> None:
    s = fold(GroupState(G), snapshot(1000, "Dead", [], missing=True), now_ms=1000)
    assert s.missing and s.state == "Dead"


def test_kgctl_join_field_shapes_are_understood() -> None:
    """`kgctl join` puts the new generation in data (the envelope may lag) and the full
    assignment of JoinCompleted under `assignment`; a failed JoinGroup keeps JoinGroup."""
    events = [
        mev("JoinGroupSent", 100, "m1", 4),
        mev("JoinGroupReceived", 150, "m1", 4, error="REBALANCE_IN_PROGRESS", generation=-1),
        mev("JoinGroupReceived", 200, "m1", 4, error="NONE", generation=5, leader="m1-id"),
        mev("JoinCompleted", 300, "m1", 4, generation=5, assignment={"t": [0, 1]}, added={}),
    ]
    s = fold_all(GroupState(G), events[:2], now_ms=160)
    assert s.members["m1"].phase == "JoinGroup"
    s = fold_all(s, events[2:], now_ms=400)
    assert s.generation == 5 and s.members["m1"].generation == 5
    assert dict(s.members["m1"].partitions) == {"t": (0, 1)}
    assert s.current is not None and s.current.stable_ms == 300 and s.leader == "m1"


def test_a_member_missing_from_the_leaders_join_response_is_gone() -> None:
    # m2 was SIGKILLed: it never says so; the coordinator drops it after the session
    # timeout and the leader's JoinGroup response for generation 3 lists only m1.
    events = [
        *two_member_eager_history(),
        mev("JoinGroupSent", 9000, "m1", 2),
        mev("JoinGroupReceived", 9100, "m1", 3, leader="m1-id", members=[{"member_id": "m1-id"}]),
        mev("JoinCompleted", 9150, "m1", 3, assignment={"t": [0, 1, 2, 3]}),
    ]
    s = fold_all(GroupState(G), events, now_ms=9200)
    assert [m.key for m in s.live_members] == ["m1"]
    assert s.members["m2"].partitions == {}
    assert "timed out" in s.members["m2"].left_reason
    assert s.current is not None and s.current.generation == 3
    assert s.current.stable_ms == 9150, "the generation is stable once m1 completed it"


def test_stable_is_when_the_last_member_completed_by_its_own_clock() -> None:
    # Each member's events arrive in order, but members' streams interleave: here m1's
    # completion (made last, at 5460) is folded before m2's (made at 5450).
    events = [
        *two_member_eager_history()[:10],
        mev("JoinGroupReceived", 5300, "m1", 2, leader="m1-id"),
        mev("PartitionsAssigned", 5460, "m1", 2, partitions={"t": [0, 1]}),
        mev("JoinCompleted", 5460, "m1", 2, assignment={"t": [0, 1]}),
        mev("JoinGroupReceived", 5300, "m2", 2, leader="m1-id"),
        mev("PartitionsAssigned", 5450, "m2", 2, partitions={"t": [2, 3]}),
        mev("JoinCompleted", 5450, "m2", 2, assignment={"t": [2, 3]}),
    ]
    s = fold_all(GroupState(G), events, now_ms=6000)
    assert s.current is not None and s.current.generation == 2
    assert s.current.stable_ms == 5460
    owners = {
        tp: [sp.member for sp in spans if sp.covers(5460)] for tp, spans in s.ownership.items()
    }
    assert owners == {("t", 0): ["m1"], ("t", 1): ["m1"], ("t", 2): ["m2"], ("t", 3): ["m2"]}


def test_a_member_still_on_its_first_join_is_not_dropped_by_an_earlier_round() -> None:
    # m2 joins while the round for generation 1 closes without it: the leader's response
    # lists only m1. m2 is not gone: it simply joins generation 2.
    events = [
        mev("MemberStarted", 1000, "m1"),
        mev("MemberStarted", 1001, "m2"),
        mev("JoinGroupSent", 1010, "m1"),
        mev("JoinGroupSent", 1011, "m2"),
        mev("JoinGroupReceived", 1100, "m1", 1, leader="m1-id", members=[{"member_id": "m1-id"}]),
        mev("JoinGroupReceived", 1200, "m2", 2, leader="m1-id"),
        mev("JoinGroupReceived", 1200, "m1", 2, leader="m1-id",
            members=[{"member_id": "m1-id"}, {"member_id": "m2-id"}]),
        mev("JoinCompleted", 1250, "m1", 2, assignment={"t": [0, 1]}),
        mev("JoinCompleted", 1260, "m2", 2, assignment={"t": [2, 3]}),
    ]  # fmt: skip
    s = fold_all(GroupState(G), events, now_ms=2000)
    assert sorted(m.key for m in s.live_members) == ["m1", "m2"]
    assert s.current is not None and s.current.stable_ms == 1260


def test_the_last_member_to_leave_ends_the_rebalance_the_others_began() -> None:
    """m2 leaves (m1 must rebalance), then m1 stops too: the group is empty, not
    'rebalancing' (watch's header said so at the end of every recorded run)."""
    history = [
        *two_member_eager_history(),
        mev("LeaveGroupSent", 9000, "m2", 2, reason="stopping"),
        mev("MemberStopped", 9001, "m2", 2, reason="SIGTERM"),
    ]
    one_left = fold_all(GroupState(G), history, now_ms=9100)
    assert one_left.rebalancing  # m1 has to rejoin alone
    history += [
        mev("LeaveGroupSent", 9500, "m1", 2, reason="stopping"),
        mev("MemberStopped", 9501, "m1", 2, reason="SIGTERM"),
    ]
    empty = fold_all(GroupState(G), history, now_ms=9600)
    assert not empty.live_members and not empty.rebalancing
