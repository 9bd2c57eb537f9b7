"""The growth benchmark's reading of a proxy trace (bench/growth_phases.py), on a
hand-made trace shaped like the ones `--through-proxy` records."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# bench/ is the repository's benchmark package, not installed: import it from the tree.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.growth_phases import leader_before, phases, timeline  # noqa: E402

T0 = 1_000_000


def ev(
    type_: str, client: str, answered: float, latency: float = 1.0, **data: Any
) -> dict[str, Any]:
    group = "" if type_ == "MetadataTraced" else "g"
    return {
        "type": type_,
        "ts_ms": T0 + answered,
        "client_id": client,
        "group": group,
        "data": {"latency_ms": latency, **data},
    }


def meta(client: str, answered: float, count: int, latency: float = 1.0) -> dict[str, Any]:
    return ev("MetadataTraced", client, answered, latency, response={"partitions": {"t": count}})


def hb(client: str, answered: float, error: str = "NONE") -> dict[str, Any]:
    return ev("HeartbeatTraced", client, answered, error=error)


TRACE = [
    ev("JoinGroupTraced", "a", -2000, response={"is_leader": True}),
    ev("JoinGroupTraced", "b", -2000, response={"is_leader": False}),
    ev("JoinGroupTraced", "c", -2000, response={"is_leader": False}),
    meta("a", -49, 12),  # asked just before the followers' heartbeats: old count
    hb("b", -20),
    hb("c", -18),
    meta("b", 300, 18),  # a follower seeing it changes nothing
    meta("a", 952, 18),  # the leader's next refresh shows the growth
    ev("JoinGroupTraced", "a", 2100, latency=1090, response={"is_leader": True}),  # sent 1010
    hb("b", 980),  # answered just before the leader's JoinGroup: too early
    hb("c", 982),
    hb("b", 1981, "REBALANCE_IN_PROGRESS"),
    hb("c", 1985, "REBALANCE_IN_PROGRESS"),
]


def test_a_growth_seen_just_after_the_followers_heartbeats_costs_a_whole_interval() -> None:
    got = phases(TRACE, T0, T0 + 2110, "t", 18)
    assert (got["leader"], got["followers"]) == ("a", ["b", "c"])
    assert (got["detect"], got["leader_join"], got["last_notice"]) == (952.0, 1010.0, 1985.0)
    assert got["notice"] == {"b": 1981.0, "c": 1985.0}
    assert got["phases"] == {
        "detection": 952.0,
        "leader_reaction": 58.0,
        "follower_notice": 975.0,
        "rebalance": 125.0,
    }
    # Where the timers stood at t0: the leader's metadata went 30 ms before the heartbeats.
    assert got["before_t0"] == {
        "leader_metadata": 50.0,
        "follower_heartbeats": {"b": 21.0, "c": 19.0},
    }


def test_steps_the_trace_does_not_show_are_none() -> None:
    no_notice = [e for e in TRACE if e["data"].get("error") != "REBALANCE_IN_PROGRESS"]
    got = phases(no_notice, T0, T0 + 2110, "t", 18)
    assert got["last_notice"] is None
    assert got["phases"]["follower_notice"] is None and got["phases"]["rebalance"] is None
    assert phases(TRACE, T0, T0 + 2110, "t", 24)["detect"] is None  # never that many
    assert leader_before(TRACE, T0 - 3000) is None


def test_the_timeline_keeps_the_group_steps_and_metadata_in_the_window() -> None:
    rows = timeline(TRACE, T0, -100, 1500)
    assert [r[2:4] for r in rows] == [
        ["a", "Metadata"],
        ["b", "Heartbeat"],
        ["c", "Heartbeat"],
        ["b", "Metadata"],
        ["a", "Metadata"],
        ["b", "Heartbeat"],
        ["c", "Heartbeat"],
        ["a", "JoinGroup"],
    ]
    assert rows[0] == [-50.0, 1.0, "a", "Metadata", None, {"t": 12}]
