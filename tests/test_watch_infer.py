"""Pure tests of the observer's inference: snapshots in, events and causes out."""

from __future__ import annotations

from helpers import WATCH_GROUP, causes, infer, member, snap, types

from kgctl.errors import ConnectError
from kgctl.model.fold import fold_all
from kgctl.model.snapshot import GroupSnapshot
from kgctl.model.state import GroupState
from kgctl.observe.infer import Inferrer
from kgctl.observe.watch import GroupObserver

G = WATCH_GROUP


def test_a_member_joining_through_a_rebalance() -> None:
    events = infer(
        snap("Stable", member("a-1", "a", [0, 1])),
        snap("PreparingRebalance", member("a-1", "a", None), member("b-1", "b", None)),
        snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])),
    )
    assert types(events) == [
        "GroupStateChanged",
        "MemberJoinedGroup",
        "GroupStateChanged",
        "GenerationChanged",
        "PartitionsMoved",
        "RebalanceAttributed",
    ]
    assert causes(events) == [(1, "member_joined", False)]
    joined = next(e for e in events if e.type == "MemberJoinedGroup")
    assert (joined.member_id, joined.client_id, joined.host) == ("b-1", "b", "/10.1.1.1")
    moved = next(e for e in events if e.type == "PartitionsMoved")
    assert moved.data["moves"] == [
        {
            "topic": "t",
            "partition": 1,
            "from": "a-1",
            "to": "b-1",
            "from_client": "a",
            "to_client": "b",
        }
    ]
    gen = next(e for e in events if e.type == "GenerationChanged")
    assert gen.data["inferred"] is True and gen.data["rebalance_started_ms"] == 2000


def test_a_rebalance_between_two_polls_is_still_seen() -> None:
    events = infer(
        snap("Stable", member("a-1", "a", [0, 1])),
        snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])),
    )
    assert causes(events) == [(1, "member_joined", False)]


def test_a_member_dropped_during_a_rebalance_timed_out() -> None:
    events = infer(
        snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])),
        snap("PreparingRebalance", member("a-1", "a", None), member("b-1", "b", None)),
        snap("Stable", member("a-1", "a", [0, 1])),
    )
    assert causes(events) == [(1, "timed_out", True)]
    left = next(e for e in events if e.type == "MemberLeftGroup")
    assert "did not rejoin in time" in left.data["reason"]


def test_the_same_process_rejoining_with_a_new_member_id_is_a_timeout_guess() -> None:
    events = infer(
        snap("Stable", member("a-1", "a", [0, 1])),
        snap("Stable", member("a-2", "a", [0, 1])),
    )
    assert causes(events) == [(1, "timed_out", True)]
    evidence = next(e for e in events if e.type == "RebalanceAttributed").data["evidence"]
    assert "left and rejoined as a-2" in evidence


def test_a_static_members_instance_id_under_a_new_member_id_is_a_replacement() -> None:
    from dataclasses import replace

    old = replace(member("i-1", "a", [0, 1]), instance_id="i")
    new = replace(member("i-2", "a-next", [0, 1]), host="/10.1.1.2", instance_id="i")
    events = infer(
        snap("Stable", old, member("b-1", "b", [2])),
        snap("PreparingRebalance", new, member("b-1", "b", None)),
        snap("Stable", new, member("b-1", "b", [2])),
    )
    assert causes(events) == [(1, "static_member_replaced", False)]
    evidence = next(e for e in events if e.type == "RebalanceAttributed").data["evidence"]
    assert "static member i replaced: member id i-1 → i-2" in evidence


def test_leaving_subscription_and_partition_changes() -> None:
    left = infer(
        snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])),
        snap("Stable", member("a-1", "a", [0, 1])),
    )
    assert causes(left) == [(1, "member_left", False)]
    resub = infer(
        snap("Stable", member("a-1", "a", [0])),
        snap("PreparingRebalance", member("a-1", "a", None, sub=("t", "u"))),
        snap("Stable", member("a-1", "a", [0], sub=("t", "u"))),
    )
    assert causes(resub) == [(1, "subscription_changed", False)]
    grown = infer(
        snap("Stable", member("a-1", "a", [0])),
        snap("Stable", member("a-1", "a", [0, 1, 2])),
    )
    assert causes(grown) == [(1, "partitions_changed", True)]


def test_nothing_changed_means_no_generation_and_empty_means_all_left() -> None:
    quiet = infer(snap("Stable", member("a-1", "a", [0])), snap("Stable", member("a-1", "a", [0])))
    assert types(quiet) == []
    assert [e.data["changed"] for e in quiet] == [True, False]
    emptied = infer(snap("Stable", member("a-1", "a", [0])), snap("Empty"))
    assert causes(emptied) == [(1, "member_left", False)]


def test_disconnects_are_reported_once_and_folded() -> None:
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0])), 1000)
    events += inf.disconnected("refused", 2000, retry_in_s=2)
    events += inf.disconnected("refused", 3000, retry_in_s=4)
    # One outage, one event: the second failed poll says nothing new.
    assert types(events)[-1:] == ["BrokerDisconnected"]
    assert [(e.ts_ms, e.data) for e in events if e.type == "BrokerDisconnected"] == [
        (2000, {"error": "refused", "retry_in_s": 2})
    ]
    state = fold_all(GroupState(G), events, now_ms=3000)
    assert not state.connected
    events = inf.observe(snap("Stable", member("a-1", "a", [0])), 5000)
    assert events[0].type == "BrokerReconnected" and events[0].data["down_ms"] == 3000
    assert fold_all(state, events, now_ms=5000).connected


def test_inferred_events_fold_into_a_state() -> None:
    events = infer(
        snap("Stable", member("a-1", "a", [0, 1])),
        snap("PreparingRebalance", member("a-1", "a", None), member("b-1", "b", None)),
        snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])),
    )
    s = fold_all(GroupState(G), events, now_ms=4000)
    assert s.generation == 1 and s.generation_inferred
    assert s.current is not None and s.current.cause == "member_joined"
    assert s.current.start_ms == 2000 and s.current.stable_ms == 3000
    assert {m.client_id for m in s.live_members} == {"a", "b"}
    assert s.owners()[("t", 1)] == ("b-1",)


class Unreachable:
    """A GroupAdmin whose broker is away for the first `down` describes."""

    def __init__(self, down: int) -> None:
        self.down, self.calls = down, 0

    def describe(self, group: str) -> GroupSnapshot:
        self.calls += 1
        if self.calls <= self.down:
            raise ConnectError("cannot reach Kafka (connection refused)")
        return snap("Stable", member("a-1", "a", [0]))


def test_the_watch_says_disconnected_once_per_outage_and_backs_off() -> None:
    observer = GroupObserver(Unreachable(down=4), G, interval_s=1.0)  # type: ignore[arg-type]
    clock = iter(range(1000, 100_000, 1000))
    polls = [observer.poll(lambda: next(clock)) for _ in range(6)]
    said = [[e.type for e in events if e.type != "GroupObserved"] for events in polls]
    assert said == [["BrokerDisconnected"], [], [], [], ["BrokerReconnected"], []]
    assert polls[4][0].data["down_ms"] == 4000
    # Each failed poll waits twice as long as the one before, then the interval again.
    assert polls[0][0].data["retry_in_s"] == 2.0
    assert observer.failures == 0 and observer.next_delay() == 1.0
    observer.failures = 10
    assert observer.next_delay() == 15.0  # capped


def test_the_attributed_causes_are_the_event_schemas_plain_words() -> None:
    """The inference types its causes, the event data is the JSON boundary: a `Cause`
    member left in the data would read `Cause.MEMBER_LEFT` wherever it is formatted."""
    events = infer(
        snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])),
        snap("PreparingRebalance", member("a-1", "a", None), member("c-1", "c", None)),
        snap("Stable", member("a-1", "a", [0]), member("c-1", "c", [1])),
    )
    said = [e.data for e in events if e.type in ("GenerationChanged", "RebalanceAttributed")]
    named = [d["cause"] for d in said] + [a["cause"] for d in said for a in d.get("also", [])]
    assert named == ["member_left", "member_left", "member_joined"]
    assert [f"{c}" for c in named] == named and {type(c) for c in named} == {str}
