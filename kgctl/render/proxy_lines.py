"""One human line per proxy event (`kgctl proxy` text output, the watch's event log)."""

from __future__ import annotations

import time
from typing import Any

from kgctl.model.events import Event

WIRE_TRACED = (
    "FindCoordinatorTraced",
    "JoinGroupTraced",
    "SyncGroupTraced",
    "HeartbeatTraced",
    "LeaveGroupTraced",
    "OffsetCommitTraced",
    "ConsumerGroupHeartbeatTraced",
    "MetadataTraced",
)


def _clock(ts_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000)) + f".{ts_ms % 1000:03d}"


def _short(member_id: str) -> str:
    return member_id if len(member_id) <= 24 else member_id[:10] + "…" + member_id[-8:]


def describe_wire(ev: Event) -> str:
    """What one wire event says, without the time (the watch log adds its own)."""
    if ev.type in WIRE_TRACED:
        return _describe_traced(ev)
    return _describe_proxy(ev)


def _request_parts(ev: Event, api: str, req: dict[str, Any]) -> list[str]:
    parts = [f"{ev.client_id or '?'} {api} v{ev.data.get('api_version')}"]
    if ev.group:
        parts.append(f"group={ev.group}")
    if ev.member_id:
        parts.append(f"member={_short(ev.member_id)}")
    if req.get("instance_id"):
        parts.append(f"instance={req['instance_id']}")
    if api == "JoinGroup":
        parts.append(f"protocols={','.join(req.get('protocols') or [])}")
        if req.get("reason"):
            parts.append(f"reason={req['reason']!r}")
    if api == "LeaveGroup":
        reasons = [m.get("reason") for m in req.get("members") or [] if m.get("reason")]
        if reasons:
            parts.append(f"reason={reasons[0]!r}")
    if api == "ConsumerGroupHeartbeat":
        parts.append(f"epoch={req.get('member_epoch')}")
    if api == "Metadata":
        topics = req.get("topics")
        parts.append("topics=" + ("all" if topics is None else ",".join(topics)))
    return parts


def _answer_text(api: str, answer: str, req: dict[str, Any], resp: dict[str, Any]) -> str:
    if answer != "NONE":
        return answer
    if api == "JoinGroup":
        return (
            answer + f" gen {resp.get('generation')}" + (" leader" if resp.get("is_leader") else "")
        )
    if api == "SyncGroup":
        return answer + f" gen {req.get('generation')} assignment={resp.get('assignment')}"
    if api == "ConsumerGroupHeartbeat":
        return answer + f" epoch {resp.get('member_epoch')}"
    if api == "FindCoordinator":
        return answer + f" node {resp.get('coordinator')}"
    if api == "Metadata":
        counts = ", ".join(f"{t}={n}" for t, n in sorted((resp.get("partitions") or {}).items()))
        return answer + f" partitions {counts or 'none'}"
    return answer


def _describe_traced(ev: Event) -> str:
    d = ev.data
    api = ev.type.removesuffix("Traced")
    req = d.get("request") or {}
    parts = _request_parts(ev, api, req)
    answer = _answer_text(api, str(d.get("error", "?")), req, d.get("response") or {})
    flags = [k for k in ("injected", "dropped", "withheld") if d.get(k)]
    tail = f" [{', '.join(flags)} by {d.get('fault')}]" if flags else ""
    return f"{' '.join(parts)} → {answer} ({d.get('latency_ms')} ms, {d.get('connection')}){tail}"


def _describe_proxy(ev: Event) -> str:
    d = ev.data
    who = ev.client_id or "?"
    if ev.type == "FaultInjected":
        extra = d.get("error") or (f"{d.get('delay_ms')} ms" if d.get("effect") == "delay" else "")
        return (
            f"FAULT {d.get('rule')} {d.get('api')} {d.get('effect')} {extra} → {who} "
            f"({d.get('connection')}, #{d.get('applied')})"
        ).replace("  ", " ")
    if ev.type == "FaultRuleAdded":
        return f"rule {d.get('id')} in force: {d.get('rule')}"
    if ev.type == "FaultRuleRemoved":
        return (
            f"rule {d.get('id')} {d.get('why')} after {d.get('applied')} applied: {d.get('rule')}"
        )
    if ev.type == "ProxyStarted":
        return (
            f"proxy for {d.get('upstream')} listening: give clients "
            f"bootstrap.servers={d.get('bootstrap')}"
        )
    if ev.type == "ListenerOpened":
        return f"broker {d.get('node')} ({d.get('upstream')}) is at {d.get('address')}"
    if ev.type == "ApiVersionsLowered":
        low = ", ".join(
            f"{name} {v.get('broker_max')}→"
            + (str(v.get("advertised")) if v.get("advertised", -1) >= 0 else "hidden")
            for name, v in sorted((d.get("lowered") or {}).items())
        )
        return f"advertising lower API versions than {d.get('upstream')}: {low}"
    if ev.type == "ProxyConnectionAborted":
        return (
            f"connection {d.get('connection')} from {d.get('peer')} closed "
            f"({d.get('side')}): {d.get('error')}"
        )
    if ev.type == "ControlRejected":
        return f"control line rejected: {d.get('error')}"
    if ev.type == "FetchTraced":
        ranges = [
            f"{t}-{p}@{b[0][0]}..{b[-1][1]}"
            for t, parts in sorted((d.get("partitions") or {}).items())
            for p, entry in sorted(parts.items())
            if (b := entry.get("batches"))
        ]
        return f"{ev.client_id or '?'} Fetch v{d.get('api_version')} gave {' '.join(ranges)}"
    if ev.type == "ProxyStopped":
        return (
            f"proxy stopped ({d.get('why')}): {d.get('connections')} connections, "
            f"{d.get('requests')} requests"
        )
    return ev.type


def routine_heartbeat(ev: Event) -> bool:
    """A heartbeat that changed nothing: a classic Heartbeat answered NONE, or a
    ConsumerGroupHeartbeat answered NONE at the member epoch it was sent with and with no
    new assignment. A join (epoch 0), a leave (-1), a new epoch or an assignment is a
    step of the group, not a heartbeat, and is shown."""
    if ev.data.get("error") != "NONE":
        return False
    if ev.type == "HeartbeatTraced":
        return True
    if ev.type != "ConsumerGroupHeartbeatTraced":
        return False
    req = ev.data.get("request") or {}
    resp = ev.data.get("response") or {}
    sent = req.get("member_epoch")
    return (
        isinstance(sent, int)
        and sent > 0
        and resp.get("member_epoch") == sent
        and resp.get("assignment") is None
    )


def successful_commit(ev: Event) -> bool:
    """An OffsetCommit answered NONE: one a second per member, news only when failed."""
    return ev.type == "OffsetCommitTraced" and ev.data.get("error") == "NONE"


def shown(ev: Event, heartbeats: bool = False, commits: bool = True) -> bool:
    """Whether a text view shows the event: heartbeats that changed nothing only with
    `heartbeats`, successful commits unless `commits` is off."""
    if not heartbeats and routine_heartbeat(ev):
        return False
    return commits or not successful_commit(ev)


def render_line(ev: Event, heartbeats: bool = False, commits: bool = True) -> str | None:
    """The `kgctl proxy` text line for an event; None for one not shown (see `shown`)."""
    if not shown(ev, heartbeats, commits):
        return None
    return f"{_clock(ev.ts_ms)} {describe_wire(ev)}"
