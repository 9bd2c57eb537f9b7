"""A proxy's wire trace read as the steps of members that report nothing themselves.

`kgctl proxy` sees a Java or librdkafka application's JoinGroup, SyncGroup, LeaveGroup
and heartbeats (source `wire`, `*Traced`), but the fold knows members by their own
events (JoinGroupReceived, JoinCompleted, ...). `member_steps` turns the traced
exchanges of clients that have no member events of their own into those member events,
so a recording of a proxy alone gives `kgctl report` its members, generations and moved
partitions. A kgctl member traced by the proxy reports itself; its wire events are
left as they are (counted once).

Pure: events in, events out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from kgctl.model.events import Event

_TRACED = frozenset({"JoinGroupTraced", "SyncGroupTraced", "LeaveGroupTraced", "HeartbeatTraced"})


def member_steps(events: Iterable[Event]) -> list[Event]:
    """`events` with the traced group steps of self-silent clients added as member
    events (same envelope, `source` kept `wire`), each right after its trace."""
    events = list(events)
    speaking = {e.client_id for e in events if e.source == "member" and e.client_id}
    out: list[Event] = []
    for ev in events:
        out.append(ev)
        if ev.source == "wire" and ev.type in _TRACED and ev.client_id not in speaking:
            out.extend(_as_member(ev))
    return out


def _as_member(ev: Event) -> Iterator[Event]:
    d = ev.data
    req: dict[str, Any] = d.get("request") or {}
    resp: dict[str, Any] = d.get("response") or {}
    error = str(d.get("error", ""))
    latency = float(d.get("latency_ms") or 0.0)
    sent_ms = ev.ts_ms - int(latency)

    def step(type_: str, ts_ms: int, **data: Any) -> Event:
        return replace(ev, type=type_, ts_ms=ts_ms, data=data)

    if ev.type == "JoinGroupTraced":
        yield step(
            "JoinGroupSent",
            sent_ms,
            reason=req.get("reason") or "",
            wire_reason=req.get("reason") or "",
            protocols=req.get("protocols") or [],
            member_id=req.get("member_id") or "",
            session_timeout_ms=req.get("session_timeout_ms"),
            rebalance_timeout_ms=req.get("rebalance_timeout_ms"),
        )
        if resp:
            yield step(
                "JoinGroupReceived",
                ev.ts_ms,
                error=error,
                generation=resp.get("generation", -1),
                member_id=resp.get("member_id") or "",
                leader=resp.get("leader") or "",
                protocol=resp.get("protocol") or "",
                is_leader=bool(resp.get("is_leader")),
                members=[{"member_id": m} for m in resp.get("members") or []],
                duration_ms=latency,
            )
    elif ev.type == "SyncGroupTraced" and error == "NONE":
        assignment = resp.get("assignment")
        if assignment is not None:
            generation = int(req.get("generation", -1))
            yield replace(
                ev,
                type="JoinCompleted",
                generation=generation,
                data={
                    "generation": generation,
                    "member_id": ev.member_id,
                    "assignment": assignment,
                    "is_leader": bool(req.get("assignments")),
                },
            )
    elif ev.type == "LeaveGroupTraced":
        members = req.get("members") or [{}]
        said = members[0].get("reason") or ""
        yield step("LeaveGroupSent", sent_ms, reason=said or "left the group", wire_reason=said)
    elif ev.type == "HeartbeatTraced" and error not in ("NONE", ""):
        yield step("HeartbeatFailed", ev.ts_ms, error=error, rtt_ms=latency)
