"""Text view of a member's events: one coloured line per protocol step, a compact live
header (state, generation, role, assignment, last heartbeat) and the exit summary.

Pure: events in, rich `Text` out. Heartbeats are collapsed into the header (shown as
lines only when asked), so a quiet group does not flood the terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text

from kgctl.model.events import Event

STYLES = {
    "MemberStarted": "bold",
    "TopicMissing": "yellow",
    "RejoinRequested": "bold magenta",
    "CoordinatorLookupSent": "blue",
    "CoordinatorFound": "blue",
    "CoordinatorLost": "bold red",
    "JoinPrepared": "cyan",
    "PartitionsRevoked": "yellow",
    "JoinGroupSent": "cyan",
    "JoinGroupReceived": "cyan",
    "AssignmentComputed": "bold cyan",
    "SyncGroupSent": "cyan",
    "SyncGroupReceived": "cyan",
    "JoinCompleted": "bold green",
    "PartitionsAssigned": "green",
    "PartitionsLost": "bold red",
    "JoinFailed": "red",
    "HeartbeatSucceeded": "dim",
    "HeartbeatFailed": "yellow",
    "GenerationReset": "bold yellow",
    "PollIntervalExceeded": "bold red",
    "RecordsConsumed": "white",
    "OffsetsCommitted": "dim green",
    "OffsetCommitFailed": "red",
    "ControlReceived": "magenta",
    "LeaveGroupSent": "bold yellow",
    "MemberFailed": "bold red",
    "MemberStopped": "bold",
    "MemberStateChanged": "bold cyan",
    "GroupHeartbeatAnswered": "cyan",
    "TargetAssignmentReceived": "bold cyan",
    "ReconciliationStarted": "cyan",
    "ReconciliationCompleted": "bold green",
    "ReconciliationAborted": "bold yellow",
    "MemberFenced": "bold red",
}


# The consumer protocol's own member events (KIP-848).
CONSUMER_MEMBER_EVENTS = frozenset(
    {
        "MemberStateChanged",
        "GroupHeartbeatAnswered",
        "TargetAssignmentReceived",
        "ReconciliationStarted",
        "ReconciliationCompleted",
        "ReconciliationAborted",
        "MemberFenced",
    }
)


def fmt_partitions(parts: dict[str, list[int]] | None) -> str:
    """{topic: [ids]} as `topic[0,1,2] other[3]`, or `-` when empty."""
    if not parts:
        return "-"
    return " ".join(f"{t}[{','.join(str(p) for p in ps)}]" for t, ps in sorted(parts.items()))


def fmt_offsets(offsets: dict[str, dict[str, int]] | None) -> str:
    if not offsets:
        return "-"
    return " ".join(
        f"{t}-{p}@{o}"
        for t, ps in sorted(offsets.items())
        for p, o in sorted(ps.items(), key=lambda kv: int(kv[0]))
    )


def _started(event: Event, d: dict[str, Any]) -> str:
    cfg = d.get("config", {})
    what = cfg.get("pattern") or ",".join(cfg.get("topics") or [])
    static = f" instance={cfg['instance_id']}" if cfg.get("instance_id") else ""
    if cfg.get("group_protocol") == "consumer":
        assignor = cfg.get("remote_assignor") or "broker default"
        if cfg.get("client_pattern"):
            what = f"{cfg['client_pattern']} (matched by the member)"
        rack = f" rack={cfg['client_rack']}" if cfg.get("client_rack") else ""
        return (
            f"group={event.group} protocol=consumer subscribe={what} "
            f"assignor={assignor}{static}{rack}"
        )
    assignors = ",".join(cfg.get("assignors") or [])
    return f"group={event.group} subscribe={what} assignors={assignors}{static}"


def _heartbeat_answered(d: dict[str, Any]) -> str:
    """A consumer-protocol heartbeat: what it carried beyond id and epoch, and the answer."""
    sent = d.get("sent") or {}
    carried = []
    if sent.get("rebalance_timeout_ms") is not None:
        carried.append("full")
    if sent.get("subscription") is not None:
        carried.append(f"topics={','.join(sent['subscription'])}")
    if sent.get("regex") is not None:
        carried.append(f"regex={sent['regex']!r}")
    if sent.get("server_assignor") is not None:
        carried.append(f"assignor={sent['server_assignor']}")
    if sent.get("rack_id") is not None:
        carried.append(f"rack={sent['rack_id']}")
    if sent.get("owned") is not None:
        carried.append(f"owned {fmt_partitions(sent['owned'])}")
    out = f"epoch {sent.get('member_epoch')}"
    if carried:
        out += f" [{' '.join(carried)}]"
    if d.get("error") not in (None, "NONE"):
        return f"{out} -> {d.get('error')}"
    out += f" -> epoch {d.get('member_epoch')}"
    if d.get("assignment") is not None:
        out += f" target {fmt_partitions(d['assignment'])}"
    return out


def _target(d: dict[str, Any]) -> str:
    pending = d.get("pending") or []
    wait = f" ({len(pending)} topic id(s) not yet known: pending)" if pending else ""
    resolved = f" resolved {','.join(d['resolved'])}" if d.get("resolved") else ""
    return (
        f"epoch {d.get('member_epoch')} target {fmt_partitions(d.get('target'))}"
        f" owned {fmt_partitions(d.get('owned'))}{wait}{resolved}"
    )


def _reconcile_started(d: dict[str, Any]) -> str:
    return (
        f"epoch {d.get('member_epoch')}: revoke {fmt_partitions(d.get('revoke'))}, "
        f"assign {fmt_partitions(d.get('assign'))}"
    )


def _reconcile_completed(d: dict[str, Any]) -> str:
    pending = f" ({len(d['pending'])} pending)" if d.get("pending") else ""
    return f"epoch {d.get('member_epoch')} owns {fmt_partitions(d.get('assignment'))}{pending}"


def _rejoin(d: dict[str, Any]) -> str:
    extra = ""
    if d.get("reason") == "subscription_changed":
        extra = f" {d.get('joined_subscription')} -> {d.get('subscription')}"
    elif d.get("reason") == "metadata_changed":
        extra = f" partitions {d.get('assigned_with')} -> {d.get('partition_counts')}"
    return f"reason={d.get('reason')}{extra}"


def _join_prepared(d: dict[str, Any]) -> str:
    lost = " (lost)" if d.get("lost") else ""
    return f"{d.get('protocol')} prepare; owned {fmt_partitions(d.get('owned'))}{lost}"


def _join_sent(d: dict[str, Any]) -> str:
    # A cooperative member's claim is what the leader keeps it from losing.
    claims = f" claims {fmt_partitions(d['owned'])}" if d.get("owned") else ""
    return f"reason={d.get('reason')} protocols={','.join(d.get('protocols', []))}{claims}"


def _join_received(d: dict[str, Any]) -> str:
    if d.get("error") != "NONE":
        return f"error={d.get('error')}"
    role = "leader" if d.get("is_leader") else "follower"
    members = f" members={len(d['members'])}" if "members" in d else ""
    return f"generation={d.get('generation')} {role} protocol={d.get('protocol')}{members}"


def _assignment(d: dict[str, Any]) -> str:
    plan = d.get("plan", {})
    parts = "; ".join(f"{mid[-8:]}: {fmt_partitions(p)}" for mid, p in plan.items())
    return f"{d.get('assignor')} -> {parts}"


def _sync_received(d: dict[str, Any]) -> str:
    if d.get("error") != "NONE":
        return f"error={d.get('error')}"
    return f"assignment {fmt_partitions(d.get('assignment'))}"


def _join_completed(d: dict[str, Any]) -> str:
    role = "leader" if d.get("is_leader") else "follower"
    took = f" rebalance took {d['rebalance_ms']:.0f}ms" if d.get("rebalance_ms") else ""
    owns = fmt_partitions(d.get("assignment"))
    return f"generation={d.get('generation')} {role} owns {owns}{took}"


def _generation_reset(d: dict[str, Any]) -> str:
    kept = "kept" if d.get("member_id_kept") else "dropped"
    return f"was generation {d.get('previous_generation')}, member id {kept} ({d.get('cause')})"


def _consumed(d: dict[str, Any]) -> str:
    dup = f" ({d['duplicates']} duplicates)" if d.get("duplicates") else ""
    parts = " ".join(
        f"{b['topic']}-{b['partition']}:{b['first']}..{b['last']}" for b in d.get("batches", [])
    )
    return f"{d.get('count')} records{dup} {parts}"


def _control(d: dict[str, Any]) -> str:
    status = "applied" if d.get("applied") else f"rejected: {d.get('error')}"
    return f"{d.get('op')} from {d.get('source')} ({status})"


# Event type -> its few words, from the event's data.
_DESCRIBE: dict[str, Callable[[dict[str, Any]], str]] = {
    "TopicMissing": lambda d: (
        f"waiting for topic(s) {', '.join(d.get('topics', []))} (they do not exist yet)"
    ),
    "RejoinRequested": _rejoin,
    "CoordinatorLookupSent": lambda d: f"FindCoordinator -> node {d.get('node')}",
    "CoordinatorFound": lambda d: (
        f"coordinator {d.get('coordinator')} at {d.get('host')}:{d.get('port')}"
    ),
    "CoordinatorLost": lambda d: (
        f"coordinator {d.get('coordinator')} marked dead: {d.get('error')}"
    ),
    "JoinPrepared": _join_prepared,
    "PartitionsRevoked": lambda d: fmt_partitions(d.get("partitions")),
    "PartitionsAssigned": lambda d: fmt_partitions(d.get("partitions")),
    "PartitionsLost": lambda d: fmt_partitions(d.get("partitions")),
    "JoinGroupSent": _join_sent,
    "JoinGroupReceived": _join_received,
    "AssignmentComputed": _assignment,
    "SyncGroupSent": lambda d: "leader (with assignments)" if d.get("is_leader") else "follower",
    "SyncGroupReceived": _sync_received,
    "JoinCompleted": _join_completed,
    "JoinFailed": lambda d: f"{d.get('error')} -> retry {d.get('retry')}",
    "HeartbeatSucceeded": lambda d: (
        f"rtt {d.get('rtt_ms')}ms" + (f" epoch {d['member_epoch']}" if "member_epoch" in d else "")
    ),
    "HeartbeatFailed": lambda d: f"{d.get('error')}",
    "GenerationReset": _generation_reset,
    "PollIntervalExceeded": lambda d: (
        f"no poll for {d.get('max_poll_interval_ms')}ms: leaving the group"
    ),
    "RecordsConsumed": _consumed,
    "OffsetsCommitted": lambda d: fmt_offsets(d.get("offsets")),
    "OffsetCommitFailed": lambda d: f"{d.get('error')} {fmt_offsets(d.get('offsets'))}",
    "ControlReceived": _control,
    "LeaveGroupSent": lambda d: (
        f"reason={d.get('reason')!r}"
        + (f" epoch {d['member_epoch']}" if "member_epoch" in d else "")
    ),
    "MemberStateChanged": lambda d: (
        f"{d.get('previous')} -> {d.get('state')}"
        + (f" ({d['reason']})" if d.get("reason") else "")
    ),
    "GroupHeartbeatAnswered": _heartbeat_answered,
    "TargetAssignmentReceived": _target,
    "ReconciliationStarted": _reconcile_started,
    "ReconciliationCompleted": _reconcile_completed,
    "ReconciliationAborted": lambda d: f"epoch {d.get('member_epoch')}: member is {d.get('state')}",
    "MemberFenced": lambda d: f"{d.get('error')}: lost {fmt_partitions(d.get('lost'))}",
    "MemberFailed": lambda d: str(d.get("message")),
    "MemberStopped": lambda d: (
        f"{d.get('reason')}: {d.get('records')} records, {d.get('duplicates')} duplicates"
    ),
}


def describe(event: Event) -> str:
    """What happened, in a few words (the type and timing are added by `render_line`)."""
    d: dict[str, Any] = event.data
    if event.type == "MemberStarted":
        return _started(event, d)
    words = _DESCRIBE.get(event.type)
    if words is not None:
        return words(d)
    return " ".join(f"{k}={v}" for k, v in sorted(d.items()))


def render_line(
    event: Event, previous: Event | None = None, heartbeats: bool = False
) -> Text | None:
    """One line for an event, or None when the event is collapsed into the header."""
    if event.type == "HeartbeatSucceeded" and not heartbeats:
        return None
    clock = time.strftime("%H:%M:%S", time.localtime(event.ts_ms / 1000))
    stamp = f"{clock}.{event.ts_ms % 1000:03d}"
    # For a consumer-protocol member the envelope's generation is its member epoch.
    gen = f"g{event.generation}" if event.generation >= 0 else "g-"
    duration = event.data.get("duration_ms")
    if duration is None and previous is not None:
        took = f"+{event.mono_ms - previous.mono_ms:.0f}ms"
    elif duration is not None:
        took = f"{duration:.0f}ms"
    else:
        took = ""
    line = Text()
    line.append(f"{stamp} ", style="dim")
    line.append(f"{gen:>4} ", style="bold")
    line.append(f"{event.member} ", style="dim")
    # The consumer protocol's longer names keep one space before their words.
    name = f"{event.type:<22}" if len(event.type) < 22 else f"{event.type} "
    line.append(name, style=STYLES.get(event.type, ""))
    line.append(describe(event))
    if took:
        line.append(f"  {took}", style="dim")
    return line


class MemberHeader:
    """The live header's state, folded from the member's own events."""

    def __init__(self) -> None:
        self.state = "starting"
        self.generation = -1
        self.role = "-"
        self.assignment: dict[str, list[int]] = {}
        self.last_heartbeat_ms: int | None = None
        self.heartbeats = 0
        self.records = 0
        self.member = ""
        self.group = ""
        self.protocol = "classic"
        self.target: dict[str, list[int]] | None = None

    def update(self, event: Event) -> None:
        self.member, self.group = event.member, event.group
        if event.generation >= 0:
            self.generation = event.generation
        t, d = event.type, event.data
        if t in ("RejoinRequested", "JoinGroupSent"):
            self.state = "rebalancing"
        elif t == "JoinGroupReceived" and d.get("error") == "NONE":
            self.role = "leader" if d.get("is_leader") else "follower"
        elif t == "JoinCompleted":
            self.state = "stable"
            self.assignment = d.get("assignment", {})
        elif t in ("PartitionsLost", "PartitionsRevoked") and self.state != "stable":
            self.assignment = {}
        elif t == "HeartbeatSucceeded":
            self.heartbeats += 1
            self.last_heartbeat_ms = event.ts_ms
        elif t == "RecordsConsumed":
            self.records = int(d.get("total", self.records))
        elif t in ("MemberFailed",):
            self.state = "failed"
        elif t == "MemberStopped":
            self.state = "stopped"
        elif t in ("LeaveGroupSent", "GenerationReset"):
            self.state = "unjoined"
        self._update_consumer(t, d)

    def _update_consumer(self, t: str, d: dict[str, Any]) -> None:
        """The consumer protocol's own events (KIP-848)."""
        if t == "MemberStarted" and (d.get("config") or {}).get("group_protocol") == "consumer":
            self.protocol = "consumer"
        elif t == "MemberStateChanged":
            # Java's MemberState, lower case: stable, reconciling, acknowledging, fenced...
            self.state = str(d.get("state", "")).lower() or self.state
        elif t == "TargetAssignmentReceived":
            self.target = d.get("target") or {}
        elif t == "ReconciliationCompleted":
            self.assignment = d.get("assignment") or {}
        elif t == "PartitionsLost" and self.protocol == "consumer":
            self.assignment, self.target = {}, None

    def render(self, now_ms: int | None = None) -> Text:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        hb = "-"
        if self.last_heartbeat_ms is not None:
            hb = f"{(now_ms - self.last_heartbeat_ms) / 1000:.1f}s ago (#{self.heartbeats})"
        style = {
            "stable": "bold green",
            "rebalancing": "bold magenta",
            "reconciling": "bold magenta",
            "failed": "bold red",
            "fenced": "bold red",
            "fatal": "bold red",
        }
        text = Text()
        text.append(f" {self.member} ", style="reverse")
        text.append(f" {self.group}  ")
        text.append(self.state, style=style.get(self.state, "bold yellow"))
        if self.protocol == "consumer":
            text.append(f"  consumer protocol, epoch {self.generation}  ")
        else:
            text.append(f"  generation {self.generation}  {self.role}  ")
        text.append(f"owns {fmt_partitions(self.assignment)}", style="green")
        gap = target_gap(self.assignment, self.target)
        if gap:
            text.append(f"  target {gap}", style="magenta")
        text.append(f"  heartbeat {hb}  records {self.records}", style="dim")
        return text


def target_gap(owned: Any, target: Any) -> str:
    """What a consumer-protocol member still has to do: `+t[1] -t[2]`, '' when none."""
    if target is None:
        return ""
    have = {(t, int(p)) for t, ps in (owned or {}).items() for p in ps}
    want = {(t, int(p)) for t, ps in (target or {}).items() for p in ps}
    add: dict[str, list[int]] = {}
    drop: dict[str, list[int]] = {}
    for t, p in sorted(want - have):
        add.setdefault(t, []).append(p)
    for t, p in sorted(have - want):
        drop.setdefault(t, []).append(p)
    words = []
    if add:
        words.append("+" + fmt_partitions(add))
    if drop:
        words.append("-" + fmt_partitions(drop))
    return " ".join(words)


def summary_lines(event: Event) -> list[str]:
    """The exit report of a MemberStopped event, for people."""
    d = event.data
    return [
        f"{event.member}: stopped ({d.get('reason')}), exit status {d.get('exit_status')}",
        f"  records consumed: {d.get('records')}  duplicates: {d.get('duplicates')}",
        f"  committed offsets: {fmt_offsets(d.get('committed'))}",
    ]
