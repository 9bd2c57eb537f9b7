"""A partition growth read from a proxy's trace, split into its phases (pure).

The latency bench's growth case, run with `--through-proxy`, has every group request of
its members and their Metadata requests (`kgctl proxy --trace-metadata`) on the wire.
From those and the bench's own clock (t0: the topic grew; complete: the broker describes
the group complete again), `phases` says, in ms after t0:

- `detect`: the leader's first Metadata answer listing the new partition count (the
  proxy's time of the answer);
- `leader_join`: the leader's first JoinGroup after t0 (the proxy's time of the request);
- `notice`: each follower's first Heartbeat answered REBALANCE_IN_PROGRESS (time of the
  answer), and `last_notice`, the latest of them;
- `complete`.

and the phases: detection (t0 -> detect: where t0 fell in the leader's metadata
period), leader reaction (detect -> leader JoinGroup: the client's own step), follower
notice (leader JoinGroup -> last notice: where the followers' heartbeat period stood),
the rebalance proper (last notice -> complete). It also gives the phase of the timers at
t0: how long before t0 the leader last asked for metadata and each follower last sent a
heartbeat, so a run's 1 s or 2 s can be traced to where t0 and the two periods fell.
"""

from __future__ import annotations

from typing import Any

Ev = dict[str, Any]


def _sent(e: Ev) -> float:
    """When the request reached the proxy (the event is stamped at its answer)."""
    return float(e["ts_ms"]) - float(e["data"].get("latency_ms") or 0.0)


def _answered(e: Ev) -> float:
    return float(e["ts_ms"])


def leader_before(events: list[Ev], t0: int) -> str | None:
    """The client id of the member the last JoinGroup answer before t0 made leader."""
    leader = None
    for e in events:
        if e["type"] == "JoinGroupTraced" and _answered(e) <= t0:
            resp = e["data"].get("response") or {}
            if resp.get("is_leader"):
                leader = str(e["client_id"])
    return leader


def phases(events: list[Ev], t0: int, complete: int, topic: str, new_count: int) -> dict[str, Any]:
    """The growth's phases (ms after t0; None where the trace does not show a step).
    `events` are the case's wire events as dicts (`Event.to_dict()`), in any order."""
    events = sorted(events, key=lambda e: float(e["ts_ms"]))
    leader = leader_before(events, t0)
    members = {
        str(e["client_id"])
        for e in events
        if e["type"] in ("JoinGroupTraced", "HeartbeatTraced") and e["group"]
    }
    followers = sorted(members - {leader}) if leader else []
    out: dict[str, Any] = {"leader": leader, "followers": followers}

    def rel(ms: float | None) -> float | None:
        return None if ms is None else round(ms - t0, 1)

    def first(pred: Any, when: Any) -> float | None:
        return next((when(e) for e in events if pred(e) and when(e) >= t0), None)

    detect = first(
        lambda e: (
            e["type"] == "MetadataTraced"
            and e["client_id"] == leader
            and ((e["data"].get("response") or {}).get("partitions") or {}).get(topic) == new_count
        ),
        _answered,
    )
    leader_join = first(
        lambda e: e["type"] == "JoinGroupTraced" and e["client_id"] == leader, _sent
    )
    notice = {
        f: first(
            lambda e, f=f: (
                e["type"] == "HeartbeatTraced"
                and e["client_id"] == f
                and e["data"].get("error") == "REBALANCE_IN_PROGRESS"
            ),
            _answered,
        )
        for f in followers
    }
    heard = [v for v in notice.values() if v is not None]
    last_notice = max(heard) if len(heard) == len(followers) and heard else None
    out.update(
        detect=rel(detect),
        leader_join=rel(leader_join),
        notice={f: rel(v) for f, v in notice.items()},
        last_notice=rel(last_notice),
        complete=rel(complete),
    )

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 1)

    out["phases"] = {
        "detection": span(t0, detect),
        "leader_reaction": span(detect, leader_join),
        "follower_notice": span(leader_join, last_notice),
        "rebalance": span(last_notice, complete),
    }

    def last_before(pred: Any) -> float | None:
        times = [_sent(e) for e in events if pred(e) and _sent(e) < t0]
        return round(t0 - max(times), 1) if times else None

    out["before_t0"] = {
        "leader_metadata": last_before(
            lambda e: e["type"] == "MetadataTraced" and e["client_id"] == leader
        ),
        "follower_heartbeats": {
            f: last_before(lambda e, f=f: e["type"] == "HeartbeatTraced" and e["client_id"] == f)
            for f in followers
        },
    }
    return out


def timeline(events: list[Ev], t0: int, start_ms: float, end_ms: float) -> list[list[Any]]:
    """The case's trace, compact, for the results file: [ms after t0 (request sent),
    latency ms, client id, API, answer's error, detail] for Metadata, JoinGroup,
    SyncGroup and Heartbeat exchanges between start_ms and end_ms (relative to t0)."""
    rows: list[list[Any]] = []
    for e in sorted(events, key=_sent):
        api = str(e["type"]).removesuffix("Traced")
        if api not in ("Metadata", "JoinGroup", "SyncGroup", "Heartbeat"):
            continue
        at = _sent(e) - t0
        if not start_ms <= at <= end_ms:
            continue
        d = e["data"]
        resp = d.get("response") or {}
        detail: Any = None
        if api == "Metadata":
            detail = resp.get("partitions")
        elif api == "JoinGroup":
            detail = {"generation": resp.get("generation"), "leader": resp.get("is_leader")}
        rows.append(
            [round(at, 1), d.get("latency_ms"), e["client_id"], api, d.get("error"), detail]
        )
    return rows
