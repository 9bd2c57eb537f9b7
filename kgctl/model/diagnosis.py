"""The diagnosis of a generation: what started its rebalance, what the rebalance waited
for, what that cost, and which setting would have avoided it.

Pure: a folded `GroupState`, the events it was folded from and what else is known
(`Context`: the cluster's group bounds, reasons read from the broker's log, and a way to
re-run the cooperative-sticky assignor, which lives in kgctl/adapters/assignors.py
because it is kafka-python's) in; frozen dataclasses out. No I/O, no clock.

Confidence is `exact` when the trigger is a member's or the wire's own words (a traced
member's rejoin reason, LeaveGroup reason or poll-interval breach; a JoinGroup or
LeaveGroup reason the proxy saw; a `Preparing to rebalance` line of the broker's log)
and `inferred` when it is read from snapshots or from a silence (a member that stopped
sending anything and is missing from the next generation). docs/explain.md.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kgctl.model.bounds import GroupBounds
from kgctl.model.event_index import EventIndex, index
from kgctl.model.events import Event
from kgctl.model.reasons import Cause, RejoinReason, cause_of_reason, cause_text
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
    TopicPartition,
    owned_from,
    owned_pairs,
)
from kgctl.model.timeline import Move, owners_at, plural, rebalance_moves, rebalance_unassigned
from kgctl.model.timeline import utc_clock as _clock

EXACT = "exact"
FENCED = "FENCED_INSTANCE_ID"
POLL_BREACH = "max.poll.interval.ms exceeded"  # a PollIntervalExceeded's reason
INFERRED = "inferred"

# A cause within this much after the rebalance's first sign still started it: members
# stamp their own events, and a member learns of a rebalance at its next heartbeat.
START_SLACK_MS = 500
# A join phase that ends this long after the last live member's JoinGroup waited for
# someone else (or for that member).
WAIT_SLACK_MS = 300
# A wait this close to a member's session timeout (as a share) was that timeout.
SESSION_MATCH = 0.8

# A member's main-thread steps: the first one after a batch ends its processing.
_MAIN_THREAD = frozenset({"RecordsConsumed", "RejoinRequested", "JoinGroupSent", "MemberStopped"})
# Events that say nothing about why a member acts (routine or a reaction).
_ROUTINE = frozenset({"HeartbeatSucceeded", "RecordsConsumed", "OffsetsCommitted"})


MEASURED_LAG = "lag"  # a Cost's records_missed: the lag growth the broker described
ESTIMATED_RATE = "rate"  # a Cost's records_missed: its measured rate x the time without
# heartbeat.interval.ms in the Java client and kafka-python, when nothing else says it.
DEFAULT_HEARTBEAT_MS = 3000
TRACED = "traced"  # a session timeout the member's own events gave
STORED = "__consumer_offsets"  # a session timeout stored with the member's generation

# Kinds of broker log lines.
PREPARING = "preparing"  # Preparing to rebalance group … (reason: …)
FAILED = "failed"  # Member … in group … has failed, removing it from the group


@dataclass(frozen=True)
class BrokerReason:
    """A line of the broker's log about a group: a rebalance prepared, with its reason,
    or a member removed when its session timed out."""

    ts_ms: int
    group: str
    reason: str
    generation: int = -1  # the old generation the line names, when it does
    kind: str = PREPARING

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts_ms": self.ts_ms,
            "group": self.group,
            "reason": self.reason,
            "generation": self.generation,
            "kind": self.kind,
        }


@dataclass(frozen=True)
class AssignmentInput:
    """What an assignor needs to re-run one generation: each member's subscription and
    what it owned before, and each topic's partition count."""

    subscriptions: Mapping[str, tuple[str, ...]]
    owned: Mapping[str, tuple[TopicPartition, ...]]
    partitions: Mapping[str, int]


# member -> the partitions it would get
Reassign = Callable[[AssignmentInput], Mapping[str, tuple[TopicPartition, ...]]]


@dataclass(frozen=True)
class Context:
    """What is known besides the events."""

    bounds: GroupBounds | None = None
    broker_reasons: tuple[BrokerReason, ...] = ()
    cooperative: Reassign | None = None  # kgctl.adapters.assignors.cooperative_sticky


@dataclass(frozen=True)
class Trigger:
    """Who or what started a rebalance, and how we know."""

    cause: str  # a `Cause` value
    who: str = ""
    reason: str = ""  # the member's or the wire's own words, when there are some
    confidence: str = INFERRED
    evidence: str = ""
    at_ms: int = 0

    def text(self) -> str:
        who = f"{self.who}: " if self.who else ""
        reason = f" ({self.reason})" if self.reason and self.reason != self.cause else ""
        return f"{who}{cause_text(self.cause)}{reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "who": self.who,
            "reason": self.reason,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "at_ms": self.at_ms,
        }


# Why a phase waited for a member.
WAIT_DEAD = "dead"  # no heartbeat since T; removed at its session timeout
WAIT_PROCESSING = "processing"  # still processing a batch; rejoined at its next poll
WAIT_RESTARTING = "restarting"  # a static member restarting within its session timeout
WAIT_SLOW_ASSIGNMENT = "slow_assignment"  # the leader took long to send the assignment
WAIT_LATE_JOIN = "late_join"  # rejoined late for another reason (reaction time)


@dataclass(frozen=True)
class Wait:
    """A phase of the rebalance that waited for one member."""

    phase: str  # join | sync
    member: str
    ms: int
    why: str  # one of WAIT_*
    detail: str
    confidence: str = INFERRED
    session_timeout_ms: int | None = None
    session_from: str = ""  # where the session timeout was read: traced, __consumer_offsets

    def text(self) -> str:
        return f"{self.phase} waited {self.ms / 1000:.1f}s for {self.member}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "member": self.member,
            "ms": self.ms,
            "why": self.why,
            "detail": self.detail,
            "confidence": self.confidence,
            "session_timeout_ms": self.session_timeout_ms,
            "session_from": self.session_from,
        }


@dataclass(frozen=True)
class Cost:
    """What one member lost during the rebalance."""

    member: str
    unassigned_ms: int
    records_missed: int | None = None
    # How records_missed is known: MEASURED_LAG (the lag on its partitions grew by that
    # much meanwhile, from the broker's descriptions) or ESTIMATED_RATE (its consumption
    # rate before, measured, times the time without partitions).
    records_basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "unassigned_ms": self.unassigned_ms,
            "records_missed": self.records_missed,
            "records_basis": self.records_basis,
        }


@dataclass(frozen=True)
class Advice:
    """A setting that would have avoided (or shortened) the rebalance, with its value."""

    pattern: str
    setting: str
    value: str
    text: str

    def shown(self) -> str:
        """The setting as people read it: `max.poll.records=17`; a value that is itself a
        setting or words is not written as one (`group.instance.id and
        session.timeout.ms=2000`, `group.instance.id (one per process)`)."""
        if not self.value:
            return self.setting
        if "=" in self.value:
            return f"{self.setting} and {self.value}"
        if " " in self.value:
            return f"{self.setting} ({self.value})"
        return f"{self.setting}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "setting": self.setting,
            "value": self.value,
            "text": self.text,
        }


@dataclass(frozen=True)
class Diagnosis:
    """One generation, explained."""

    generation: int
    inferred: bool
    start_ms: int
    sync_ms: int | None
    stable_ms: int | None
    trigger: Trigger
    also: tuple[Trigger, ...] = ()
    waits: tuple[Wait, ...] = ()
    costs: tuple[Cost, ...] = ()
    moved: int = 0
    revoked: int = 0  # partitions revoked from members that kept being members
    advice: tuple[Advice, ...] = ()
    notes: tuple[str, ...] = ()
    # False when only the broker's stored record dates the generation (no member traced,
    # no broker log): when its rebalance began is unknown.
    timed: bool = True
    epoch: bool = False  # a consumer-protocol (KIP-848) group: `generation` is its epoch
    # A mixed group that changed protocol at this generation, in words (one of `notes`
    # too): chaos's step report says it.
    protocol_change: str = ""

    @property
    def label(self) -> str:
        return f"group epoch {self.generation}" if self.epoch else f"generation {self.generation}"

    @property
    def duration_ms(self) -> int | None:
        if self.stable_ms is None or not self.timed:
            return None
        return self.stable_ms - self.start_ms

    @property
    def waited_for(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w.member for w in self.waits))

    def short(self, reasons: bool = False) -> str:
        """Trigger and critical path in a few words, for a table cell (with the trigger's
        own words when `reasons`)."""
        t = self.trigger
        text = (f"{t.who}: " if t.who else "") + cause_text(t.cause)
        if reasons and t.reason and t.reason != t.cause:
            text += f" ({t.reason})"
        if t.confidence == INFERRED:
            text += " (inferred)"
        for w in self.waits:
            text += f"; {w.phase} waited {w.ms / 1000:.1f}s for {w.member} ({w.why})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "group_epoch": self.epoch,
            "inferred": self.inferred,
            "start_ms": self.start_ms,
            "sync_ms": self.sync_ms,
            "stable_ms": self.stable_ms,
            "duration_ms": self.duration_ms,
            "timed": self.timed,
            "trigger": self.trigger.to_dict(),
            "also": [t.to_dict() for t in self.also],
            "critical_path": [w.to_dict() for w in self.waits],
            "cost": [c.to_dict() for c in self.costs],
            "partitions_moved": self.moved,
            "partitions_revoked": self.revoked,
            "advice": [a.to_dict() for a in self.advice],
            "notes": list(self.notes),
            "protocol_change": self.protocol_change,
        }


# -- what each member said about itself ---------------------------------------------------


@dataclass
class _Member:
    """A member's configuration and the moments that matter, from its own events."""

    key: str
    session_ms: int | None = None
    session_from: str = ""  # TRACED or STORED
    heartbeat_ms: int | None = None
    heartbeat_default: bool = False  # not set: the client's default
    max_poll_ms: int | None = None
    instance_id: str | None = None
    protocol: str = ""  # eager | cooperative, from JoinPrepared
    group_protocol: str = "classic"  # classic | consumer (KIP-848), from MemberStarted
    subscription: tuple[str, ...] = ()


def _members(events: EventIndex) -> dict[str, _Member]:
    out: dict[str, _Member] = {}
    ids: dict[str, str] = {}  # member id -> member
    # One pass over every event kept (at 1,000 members, some 200,000): the routine ones
    # only name their member, its id and its group.instance.id.
    for e in events:
        name = e.member
        if not name or e.source not in _TRACED_SOURCES:
            continue
        if e.member_id:
            ids[e.member_id] = name
        m = out.get(name)
        if m is None:
            m = _new_member(out, name)
        if e.type in _CONFIGURING:
            _configure(m, e)
        if e.instance_id:
            m.instance_id = e.instance_id
    for m in out.values():
        if m.session_ms:
            m.session_from = TRACED
    # A traced member whose configuration was not (its MemberStarted is older than what
    # was read): the session timeout the broker stored with its generation.
    for member_id, (session, rebalance) in _stored_timeouts(events).items():
        found = out.get(ids.get(member_id, ""))
        if found is not None and not found.session_ms and session > 0:
            found.session_ms, found.session_from = session, STORED
        if found is not None and not found.max_poll_ms and rebalance > 0:
            found.max_poll_ms = rebalance
    return out


_TRACED_SOURCES = frozenset({"member", "wire"})
# The steps that carry a member's configuration.
_CONFIGURING = frozenset({"MemberStarted", "JoinGroupSent", "JoinPrepared", "PollIntervalExceeded"})


def _configure(m: _Member, e: Event) -> None:
    """What one of the member's _CONFIGURING steps says of its configuration."""
    if e.type == "MemberStarted":
        cfg = e.data.get("config") or {}
        client = e.data.get("client") or {}
        m.session_ms = _opt_int(cfg.get("session_timeout_ms")) or m.session_ms
        # Its option, else its -X setting, else the client's default (a kgctl member's
        # configuration is all in its MemberStarted).
        set_hb = _opt_int(cfg.get("heartbeat_interval_ms")) or _opt_int(
            _number(client.get("heartbeat.interval.ms"))
        )
        m.heartbeat_ms = set_hb or DEFAULT_HEARTBEAT_MS
        m.heartbeat_default = set_hb is None
        m.max_poll_ms = _opt_int(cfg.get("max_poll_interval_ms")) or m.max_poll_ms
        m.instance_id = cfg.get("instance_id") or m.instance_id
        m.group_protocol = str(cfg.get("group_protocol") or m.group_protocol)
        topics = cfg.get("topics")
        if isinstance(topics, list):
            m.subscription = tuple(sorted(str(t) for t in topics))
    elif e.type == "JoinGroupSent":
        m.session_ms = _opt_int(e.data.get("session_timeout_ms")) or m.session_ms
        rebalance = _opt_int(e.data.get("rebalance_timeout_ms"))
        m.max_poll_ms = m.max_poll_ms or rebalance
    elif e.type == "JoinPrepared":
        m.protocol = str(e.data.get("protocol", "") or m.protocol)
    elif e.type == "PollIntervalExceeded":
        m.max_poll_ms = _opt_int(e.data.get("max_poll_interval_ms")) or m.max_poll_ms


def _new_member(out: dict[str, _Member], name: str) -> _Member:
    """A member seen for the first time (not `setdefault`: that made one per event)."""
    m = out[name] = _Member(name)
    return m


def _stored_timeouts(events: EventIndex) -> dict[str, tuple[int, int]]:
    """member id -> (session.timeout.ms, rebalance timeout) as the broker stored them with
    each generation in __consumer_offsets (GenerationChanged `stored_in`)."""
    out: dict[str, tuple[int, int]] = {}
    for e in events.of("GenerationChanged"):
        if not e.data.get("stored_in"):
            continue
        for raw in e.data.get("members") or []:
            if not isinstance(raw, Mapping) or not raw.get("member_id"):
                continue
            session = _opt_int(raw.get("session_timeout_ms")) or -1
            rebalance = _opt_int(raw.get("rebalance_timeout_ms")) or -1
            if session > 0 or rebalance > 0:
                out[str(raw["member_id"])] = (session, rebalance)
    return out


def _number(value: Any) -> Any:
    """A client setting's text as a number, when it is one."""
    return int(value) if isinstance(value, str) and value.isdigit() else value


def _opt_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


# -- triggers --------------------------------------------------------------------------


def _said_rejoin(e: Event, who: str, src: str) -> list[Trigger]:
    """A member's own rejoin reason (RejoinRequested; a wire JoinGroupSent)."""
    reason = str(e.data.get("reason", "") or "")
    cause = cause_of_reason(reason)
    if cause is None:
        return []
    if reason == RejoinReason.FIRST_JOIN.value and e.type == "RejoinRequested":
        evidence = f"{who}'s {src}: first join"
    else:
        evidence = f"{who}'s {src}: {e.type} reason {reason}"
        extra = _reason_detail(e)
        if extra:
            evidence += f" ({extra})"
    return [Trigger(cause, who, reason, EXACT, evidence, e.ts_ms)]


def _wire_join(e: Event, who: str, src: str) -> list[Trigger]:
    """kgctl proxy: a JoinGroup as the client sent it (its KIP-800 reason), read as a
    member step by kgctl/model/wire.py (`member_steps`)."""
    reason = str(e.data.get("wire_reason") or e.data.get("reason") or "")
    who = e.member or e.client_id or who
    if reason:
        cause = _wire_cause(reason)
        if cause is None:
            return []
        evidence = f"wire: {who}'s JoinGroup reason {reason!r}"
        return [Trigger(cause, who, reason, EXACT, evidence, e.ts_ms)]
    if e.data.get("member_id"):
        return []
    evidence = f"wire: {who}'s JoinGroup without a member id (a new member)"
    return [Trigger(Cause.MEMBER_JOINED.value, who, "", EXACT, evidence, e.ts_ms)]


def _said_poll(e: Event, who: str, src: str) -> list[Trigger]:
    ms = e.data.get("max_poll_interval_ms")
    evidence = f"{who}'s {src}: no poll within max.poll.interval.ms={ms}"
    return [Trigger(Cause.TIMED_OUT.value, who, POLL_BREACH, EXACT, evidence, e.ts_ms)]


def _said_leave(e: Event, who: str, src: str) -> list[Trigger]:
    reason = str(e.data.get("reason", "") or "")
    who = who or e.client_id
    evidence = f"{who}'s {src}: LeaveGroup reason {reason!r}"
    return [Trigger(Cause.MEMBER_LEFT.value, who, reason, EXACT, evidence, e.ts_ms)]


def _said_failed(e: Event, who: str, src: str) -> list[Trigger]:
    error = str(e.data.get("error", "") or "")
    if error == FENCED:
        iid = f" {e.instance_id}" if e.instance_id else ""
        evidence = (
            f"{who}'s trace: {FENCED}: another process joined with its group.instance.id{iid}"
            " and the broker handed it the identity"
        )
        return [Trigger(Cause.STATIC_MEMBER_REPLACED.value, who, error, EXACT, evidence, e.ts_ms)]
    evidence = f"{who}'s trace: failed with {error}"
    return [Trigger(Cause.MEMBER_FAILED.value, who, error, EXACT, evidence, e.ts_ms)]


def _said_fenced(e: Event, who: str, src: str) -> list[Trigger]:
    """A consumer-protocol member fenced by the broker (UNKNOWN_MEMBER_ID: it had been
    removed; FENCED_MEMBER_EPOCH: its epoch was stale): it gives up its partitions as lost
    and joins again with epoch 0, which bumps the group epoch like any new member."""
    error = str(e.data.get("error", "") or "")
    evidence = (
        f"{who}'s trace: fenced ({error}), its partitions lost; a fenced member joins "
        "again with member epoch 0"
    )
    reason = f"rejoined after {error}" if error else "rejoined after being fenced"
    return [Trigger(Cause.MEMBER_JOINED.value, who, reason, EXACT, evidence, e.ts_ms)]


def _seen_left(e: Event, who: str, src: str) -> list[Trigger]:
    evidence = f"snapshots: {who} missing from the broker's description"
    return [Trigger(Cause.MEMBER_LEFT.value, who, "", INFERRED, evidence, e.ts_ms)]


def _seen_joined(e: Event, who: str, src: str) -> list[Trigger]:
    evidence = f"snapshots: {who} new in the broker's description"
    return [Trigger(Cause.MEMBER_JOINED.value, who, "", INFERRED, evidence, e.ts_ms)]


# (event type, the source it must come from, or None: any but chaos) -> its triggers.
_READERS: dict[tuple[str, str | None], Callable[[Event, str, str], list[Trigger]]] = {
    ("RejoinRequested", None): _said_rejoin,
    ("JoinGroupSent", "wire"): _wire_join,
    ("PollIntervalExceeded", None): _said_poll,
    ("LeaveGroupSent", None): _said_leave,
    ("MemberFailed", None): _said_failed,
    ("MemberFenced", "member"): _said_fenced,
    ("MemberLeftGroup", "observer"): _seen_left,
    ("MemberJoinedGroup", "observer"): _seen_joined,
}


_READ_TYPES = tuple(sorted({t for t, _ in _READERS}))


def _read(e: Event) -> list[Trigger]:
    reader = _READERS.get((e.type, e.source)) or _READERS.get((e.type, None))
    if reader is None or e.source == "chaos":
        return []
    src = "wire" if e.source == "wire" else "trace"
    return reader(e, e.member or e.member_id, src)


def _wire_rejoins(
    events: EventIndex, since: int, until: int, prev: GenerationRecord | None
) -> list[Trigger]:
    """kgctl proxy: a member of the last generation that sent JoinGroup again without a
    reason (kafka-python and older clients send none) and without having been told of a
    rebalance (no REBALANCE_IN_PROGRESS answer before it): it started the rebalance
    itself. A leader does that when it sees new partitions or a subscription change."""
    out: list[Trigger] = []
    told: set[str] = set()
    for e in events.of(
        "HeartbeatFailed", "JoinGroupReceived", "JoinGroupSent", since=since, until=until
    ):
        if e.source != "wire":
            continue
        who = e.member or e.client_id
        if e.type in ("HeartbeatFailed", "JoinGroupReceived") and e.data.get("error") not in (
            None, "", "NONE",
        ):  # fmt: skip
            told.add(who)
        if (
            e.type == "JoinGroupSent"
            and e.data.get("member_id")
            and not (e.data.get("wire_reason") or e.data.get("reason"))
            and who not in told
        ):
            leader = prev is not None and prev.leader in (who, e.member_id)
            role = "the leader" if leader else "a member"
            reason = f"{role} rejoined on its own (the client gave no reason)"
            hint = ": a leader does so when it sees new partitions or a subscription change"
            evidence = f"wire: {who}'s JoinGroup with its member id, not told of a rebalance"
            out.append(
                Trigger(
                    Cause.REJOIN_REQUESTED.value, who, reason, EXACT,
                    evidence + (hint if leader else ""), e.ts_ms,
                )
            )  # fmt: skip
            told.add(who)
    return out


# A member that reports any of these traces its protocol steps: its own words say why.
_STEPS = frozenset({"RejoinRequested", "JoinGroupSent", "LeaveGroupSent", "GroupHeartbeatAnswered"})


# How long after its close's revocation a member's stop may be reported and still be
# dated from that revocation (a Java close: revoke, LeaveGroup, then shutdown_complete).
CLOSE_REPORT_MS = 3_000


def _stepless_comings_and_goings(events: EventIndex, since: int, until: int) -> list[Trigger]:
    """Members that report their start, stop and partitions but no protocol step (kgctl
    chaos's Java members: VerifiableConsumer prints no requests): their start is a join
    and their clean stop a leave, inferred from the timing since they do not say so."""
    stepless = events.memo("stepless", _stepless)
    out: list[Trigger] = []
    if not stepless:
        return out
    revoked_at: dict[str, int] = {}
    # Only these three types count below; the rest of the events never did.
    for e in events.of("PartitionsRevoked", "MemberStopped", "MemberStarted"):
        if e.member in stepless and e.type == "PartitionsRevoked":
            revoked_at[e.member] = e.ts_ms
        if e.member in stepless and e.type == "MemberStopped":
            # Its close revoked, then left; the stop is reported once the close is done.
            at = revoked_at.get(e.member, e.ts_ms)
            e = replace(e, ts_ms=at if e.ts_ms - at <= CLOSE_REPORT_MS else e.ts_ms)
        if e.member not in stepless or not since < e.ts_ms <= until:
            continue
        if e.type == "MemberStarted":
            evidence = f"{e.member} started then; it reports its partitions, not its requests"
            out.append(
                Trigger(Cause.MEMBER_JOINED.value, e.member, "", INFERRED, evidence, e.ts_ms)
            )
        elif e.type == "MemberStopped":
            reason = str(e.data.get("reason", "") or "")
            evidence = f"{e.member}'s own report: stopped ({reason}), closing its consumer"
            out.append(
                Trigger(Cause.MEMBER_LEFT.value, e.member, reason, INFERRED, evidence, e.ts_ms)
            )
    return out


def _stepless(events: EventIndex) -> frozenset[str]:
    """Members that report their start but no protocol step."""
    started = {e.member for e in events.of("MemberStarted") if e.member}
    return frozenset(started - {e.member for e in events.of(*_STEPS)})


def _instance_of(e: Event) -> str:
    return str(e.instance_id or e.data.get("instance_id") or "")


def _replacements(
    events: EventIndex, since: int, until: int, prev: GenerationRecord | None
) -> tuple[list[Trigger], set[str]]:
    """A JoinGroup without a member id under a group.instance.id that a member of the
    last generation held (a member's own JoinGroupSent, or one the proxy saw): the broker
    replaces the static member, and fences the old member id (FENCED_INSTANCE_ID). The
    triggers, and the members replaced."""
    replaced: set[str] = set()
    if prev is None:
        return [], replaced
    holder: dict[str, tuple[str, str]] = {}  # instance id -> (member, member id)
    out: list[Trigger] = []
    for e in events.memo("instanced", _instanced):
        iid = _instance_of(e)
        if e.ts_ms > until:
            break
        who = e.member or e.client_id
        member_id = str(e.member_id or e.data.get("member_id") or "")
        joining = e.type == "JoinGroupSent" and e.source in ("member", "wire") and not member_id
        if joining and since < e.ts_ms and iid in holder and holder[iid][0] in prev.members:
            old, old_id = holder[iid]
            src = "wire" if e.source == "wire" else "trace"
            by = f"{old} (member id {old_id})" if old != who else f"its previous process ({old_id})"
            replaced.add(old)
            out.append(
                Trigger(
                    Cause.STATIC_MEMBER_REPLACED.value, who, "", EXACT,
                    f"{who}'s {src}: JoinGroup with group.instance.id {iid} and no member id "
                    f"while {by} held it: the broker replaced it",
                    e.ts_ms,
                )
            )  # fmt: skip
        elif member_id and e.source in ("member", "wire", "observer"):
            holder[iid] = (e.member or who or member_id, member_id)
    return out, replaced


def _instanced(events: EventIndex) -> list[Event]:
    """The events that name a group.instance.id, in order (none in a group of dynamic
    members)."""
    return [e for e in events if _instance_of(e)]


def _chaos_act(events: EventIndex, member: str, until: int) -> Event | None:
    """kgctl chaos's own word that it killed, froze or cut off `member` (its
    ActionPerformed: a fault naming it `cut_off` holds or drops what it sends; or the
    MemberFailed it wrote when the process ended without a word), before `until`."""
    found = None
    for e in events.of("ActionPerformed", "MemberFailed", until=until):
        if e.source != "chaos":
            continue
        acted = e.type == "ActionPerformed" and e.data.get("action") in _SILENCING
        details = e.data.get("details")
        cut_off = isinstance(details, dict) and details.get("cut_off") == member
        if (acted and member in (e.data.get("members") or [])) or cut_off:
            found = e
        elif e.type == "MemberFailed" and e.member == member and found is None:
            found = e
    return found


# Chaos actions after which a member says nothing more: the broker finds out at its
# session timeout.
_SILENCING = ("member-kill", "member-pause")


def _chaos_words(e: Event) -> str:
    what = str(e.data.get("description") or e.data.get("error") or e.type)
    return f"kgctl chaos at {_clock(e.ts_ms)}: {what}"


def _from_broker_log(br: BrokerReason, state: GroupState) -> Trigger:
    member_id = _broker_who(br.reason)
    who = _member_name(state, member_id)
    client = br.reason.partition("client reason: ")[2]
    if not client or client == "not provided":
        # The client gave no reason (kafka-python, older clients): the broker's own
        # words, without the member id they repeat.
        words = br.reason.partition("; client reason")[0].split()
        client = " ".join(w for w in words if w.strip("()") != (member_id or None))
    if br.kind == FAILED:
        # The broker's words name the member by its id: its name is `who`.
        return Trigger(
            Cause.TIMED_OUT.value, who, "session timeout", EXACT,
            f"broker log {_clock(br.ts_ms)}: {br.reason}", br.ts_ms,
        )  # fmt: skip
    return Trigger(
        _broker_cause(br.reason), who, client or br.reason, EXACT,
        f"broker log {_clock(br.ts_ms)}: Preparing to rebalance (reason: {br.reason})",
        br.ts_ms,
    )  # fmt: skip


def _candidates(
    events: EventIndex,
    since: int,
    until: int,
    prev: GenerationRecord | None,
    rec: GenerationRecord,
    state: GroupState,
    members: Mapping[str, _Member],
    ctx: Context,
) -> list[Trigger]:
    """Everything in (since, until] that could have started the rebalance."""
    out = [
        _named(t, _member_name(state, e.member_id)) if e.source == "observer" else t
        for e in events.of(*_READ_TYPES, since=since, until=until)
        if _news(e, state, prev)
        for t in _read(e)
    ]
    replaced, gone = _replacements(events, since, until, prev)
    # The new process's first join is the replacement, not a new member.
    out = [
        t
        for t in out
        if t.cause != Cause.MEMBER_JOINED.value
        or not any(r.who == t.who and abs(r.at_ms - t.at_ms) <= START_SLACK_MS for r in replaced)
    ]
    out += replaced
    out += _wire_rejoins(events, since, until, prev)
    out += _stepless_comings_and_goings(events, since, until)
    # A replaced member is silent because it was fenced, not because it died.
    out += [
        t
        for t in _silent_departures(events, since, until, prev, rec, state, members)
        if t.who not in gone
    ]
    out += [
        _from_broker_log(br, state)
        for br in ctx.broker_reasons
        if since < br.ts_ms <= until and br.group == state.group
    ]
    # A static member replaced in a stable group does not rebalance it (the broker hands
    # the identity over): a replacement long before this rebalance began did not start it.
    return [
        t
        for t in out
        if t.cause != Cause.STATIC_MEMBER_REPLACED.value or t.at_ms >= rec.start_ms - START_SLACK_MS
    ]


def _named(t: Trigger, name: str) -> Trigger:
    """An observer's trigger with its member named as the views name it."""
    if not name or name == t.who:
        return t
    return replace(
        t, who=name, evidence=t.evidence.replace(t.who, name, 1) if t.who else t.evidence
    )


def _news(e: Event, state: GroupState, prev: GenerationRecord | None) -> bool:
    """Whether an observer's join or leave is news for this rebalance: a member seen new
    that was already in the last generation (the watch started after it joined), or seen
    gone that was not in it (dropped by an earlier rebalance, seen at the next poll),
    started nothing."""
    if e.source != "observer" or prev is None:
        return True
    found = state.find_member(e.member_id)
    key = found.key if found is not None else e.member_id
    if e.type == "MemberJoinedGroup":
        return key not in prev.members
    if e.type == "MemberLeftGroup":
        return key in prev.members
    return True


def _reason_detail(e: Event) -> str:
    counts, before = e.data.get("partition_counts"), e.data.get("assigned_with")
    if isinstance(counts, dict) and isinstance(before, dict):
        grown = [f"{t} {before.get(t, '?')} → {n}" for t, n in sorted(counts.items())]
        grown = [g for g, (t, n) in zip(grown, sorted(counts.items()), strict=True)
                 if before.get(t) != n]  # fmt: skip
        return ", ".join(grown)
    sub, joined = e.data.get("subscription"), e.data.get("joined_subscription")
    if isinstance(sub, list) and isinstance(joined, list):
        return f"{','.join(map(str, joined))} → {','.join(map(str, sub))}"
    return ""


# A client's own KIP-800 reason (kgctl's `kgctl: <reason>`, the Java client's words) and
# the cause it names; None: a reaction to a rebalance someone else started. Checked in
# order, on the lower-cased text.
_CLIENT_REASONS: tuple[tuple[str, str | None], ...] = (
    # Java's ConsumerCoordinator and AbstractCoordinator
    ("cached metadata has changed", Cause.PARTITIONS_CHANGED.value),
    ("subscription has changed", Cause.SUBSCRIPTION_CHANGED.value),
    ("does not match the current subscription", Cause.SUBSCRIPTION_CHANGED.value),
    ("need to revoke partitions", None),  # the cooperative follow-up round
    ("group is already rebalancing", None),
    ("need to re-join with the given member-id", None),  # the second half of a first join
    ("rebalanceinprogress", None),
    ("illegalgeneration", None),
    ("illegal_generation", None),
    ("memberidrequired", None),
    ("unknownmemberid", Cause.GENERATION_RESET.value),  # removed meanwhile: joins anew
    ("unknown_member_id", Cause.GENERATION_RESET.value),
    ("rebalance failed due to", None),  # another error: the rebalance was already running
    # a join that completed after a heartbeat answer or the poll timeout reset it
    ("generation/state was modified", Cause.GENERATION_RESET.value),
    ("consumer poll timeout has expired", Cause.TIMED_OUT.value),
    # the rejoin after leaving on its own, mostly for max.poll.interval.ms (an
    # unsubscribe says so too, but is rare among members that rejoin)
    ("pro-actively leaving the group", Cause.TIMED_OUT.value),
    ("the consumer is being closed", Cause.MEMBER_LEFT.value),
    ("unsubscribed from all topics", Cause.MEMBER_LEFT.value),
    ("rebalance enforced by user", Cause.REJOIN_REQUESTED.value),
    # kgctl's names (and older kgctl members' `kgctl: <reason>`)
    ("rebalance_in_progress", None),
    ("rebalance in progress", None),
    ("already rebalancing", None),
    ("retry after member_id_required", None),
    ("cooperative_followup", None),
)


def _client_cause(reason: str) -> str | None:
    """The cause a client's own reason names; None for a reaction; "" when kgctl does not
    know the words."""
    low = reason.lower().strip()
    name = low.removeprefix("kgctl:").strip()  # kgctl's own names: `kgctl: metadata_changed`
    if name in {r.value for r in RejoinReason}:
        return cause_of_reason(name)
    for words, cause in _CLIENT_REASONS:
        if words in low:
            return cause
    if "poll" in low and ("timeout" in low or "interval" in low):
        return Cause.TIMED_OUT.value
    return ""


def _wire_cause(reason: str) -> str | None:
    """The cause a JoinGroup's KIP-800 reason names; None for a reaction."""
    cause = _client_cause(reason)
    return cause if cause != "" else _broker_cause(reason)


# The broker's own words before `; client reason:` (Kafka's group coordinator) and the
# cause they name; "" when the client's reason says why (a member rejoined).
_BROKER_REASONS: tuple[tuple[str, str], ...] = (
    ("static member", Cause.STATIC_MEMBER_REPLACED.value),
    ("heartbeat expiration", Cause.TIMED_OUT.value),
    ("session", Cause.TIMED_OUT.value),
    ("pending sync request expiration", Cause.TIMED_OUT.value),
    ("poll timeout", Cause.TIMED_OUT.value),
    ("max.poll", Cause.TIMED_OUT.value),
    ("on leavegroup", Cause.MEMBER_LEFT.value),
    ("leave", Cause.MEMBER_LEFT.value),
    ("removing member", Cause.MEMBER_LEFT.value),
    ("adding new member", Cause.MEMBER_JOINED.value),
    ("new member", Cause.MEMBER_JOINED.value),
    ("re-joining group", ""),
    ("updating metadata for member", ""),
    ("storing group assignment", Cause.ASSIGNMENT_FAILED.value),
)


def _broker_cause(reason: str) -> str:
    """The cause a broker log reason names: the broker's words when they name one, else
    the client's (KIP-800 reasons are free text)."""
    broker, _, client = reason.partition("; client reason: ")
    low = broker.lower()
    rejoined = False  # the broker says only that a member rejoined: its client says why
    for words, cause in _BROKER_REASONS:
        if words in low:
            if cause:
                return cause
            rejoined = True
            break
    said = client.strip()
    if said and said != "not provided":
        found = _client_cause(said)
        if found:
            return found
    elif not client:
        found = _client_cause(broker)
        if found:
            return found
    if rejoined:
        return Cause.REJOIN_REQUESTED.value
    if "metadata" in low or "partition" in low:
        return Cause.PARTITIONS_CHANGED.value
    if "subscription" in low:
        return Cause.SUBSCRIPTION_CHANGED.value
    return Cause.REJOIN_REQUESTED.value


def _broker_who(reason: str) -> str:
    """The member id a broker reason names (`removing member X on …`), if any."""
    words = reason.replace("(", " ").replace(")", " ").split()
    for i, w in enumerate(words[:-1]):
        if w.lower() in ("member", "leader", "for") and "-" in words[i + 1]:
            return words[i + 1].rstrip(".,;")
    return ""


def _member_name(state: GroupState, member_id: str) -> str:
    """A member id as its member's name; an unknown dynamic id (client.id, a dash and a
    UUID) as its client id."""
    found = state.find_member(member_id)
    if found is not None:
        return found.name
    if len(member_id) > 37 and member_id[-37] == "-" and member_id[-28] == "-":
        return member_id[:-37]
    return member_id


def _last_seen(events: EventIndex, member: str, until: int) -> int | None:
    return events.last_ts_by(member, until)


def _silent_departures(
    events: EventIndex,
    since: int,
    until: int,
    prev: GenerationRecord | None,
    rec: GenerationRecord,
    state: GroupState,
    members: Mapping[str, _Member],
) -> list[Trigger]:
    """Members of the previous generation gone without a word: removed by the coordinator
    when their session timed out (estimated from when they were last heard of)."""
    if prev is None:
        return []
    said = {
        e.member
        for e in events.excluding(_ROUTINE, since=since, until=until)
        if e.source == "member"
    }
    out = []
    for key in prev.members:
        m = state.members.get(key)
        info = members.get(key)
        if m is None or info is None:
            continue
        # Still running, yet removed by the broker while a heartbeat of it was held or
        # lost across the rebalance's start, as it heard when that one was answered
        # (fenced). The fold still counts it a member, and what it did meanwhile (its
        # own reconciling) never reached the broker.
        fenced = _fenced_in_flight(events, key, rec.start_ms)
        if fenced is None and (
            key in said
            or key in rec.members
            or (m.alive and (m.left_ms is None or m.left_ms > until))
        ):
            continue
        last = _last_seen(events, key, until)
        if last is None:
            continue
        session = info.session_ms
        at = last + session if session else (m.left_ms or until)
        what = f"session.timeout.ms={session}" if session else "its session timeout"
        chaos = _chaos_act(events, key, until)
        if fenced is not None:
            sent, answered, error = fenced
            at = min(at, rec.start_ms)
            said_so = (
                f"{key}'s heartbeat sent at {_clock(sent)} was answered {error} only at "
                f"{_clock(answered)} (fenced): the broker had removed it at {what}"
            )
            evidence = f"{_chaos_words(chaos)}; {said_so}" if chaos else said_so
            confidence = EXACT if chaos else INFERRED
        elif chaos is not None:
            # kgctl chaos says itself that it silenced the member: no guess about why.
            evidence = (
                f"{_chaos_words(chaos)}; {key} silent since {_clock(last)} and missing "
                f"from generation {rec.generation}: removed at {what}"
            )
            confidence = EXACT
        else:
            evidence = (
                f"{key} silent since {_clock(last)} and missing from generation "
                f"{rec.generation}: removed at {what} (killed or frozen)"
            )
            confidence = INFERRED
        out.append(
            Trigger(
                Cause.TIMED_OUT.value, key, "session timeout", confidence, evidence,
                min(at, until),
            )
        )  # fmt: skip
    return out


# The answers that tell a consumer-protocol member it is no longer in the group.
_FENCING_ERRORS = ("UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH")


def _fencings(events: EventIndex) -> dict[str, list[Event]]:
    """Each member's HeartbeatFailed with a fencing error, in time order."""
    out: dict[str, list[Event]] = {}
    for e in events.of("HeartbeatFailed"):
        if e.member and e.data.get("error") in _FENCING_ERRORS:
            out.setdefault(e.member, []).append(e)
    return out


def _fenced_in_flight(events: EventIndex, member: str, t: int) -> tuple[int, int, str] | None:
    """When `member` sent a heartbeat before `t` that the broker answered after it by
    fencing it (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH): (sent, answered, the error).
    The member's own words: its HeartbeatFailed, with the round trip it measured."""
    mine = events.memo("fencings", _fencings).get(member, [])
    i = bisect_left(mine, t, key=lambda e: e.ts_ms)
    if i == len(mine):
        return None
    e = mine[i]  # the first fencing answer after t: of a heartbeat sent before t?
    rtt = e.data.get("rtt_ms")
    if isinstance(rtt, (int, float)) and e.ts_ms - rtt <= t:
        return int(e.ts_ms - rtt), e.ts_ms, str(e.data["error"])
    return None


def _pick(cands: list[Trigger], start_ms: int) -> tuple[Trigger | None, tuple[Trigger, ...]]:
    """The trigger is the earliest candidate at the rebalance's start (exact ones first
    when two are as early); later ones joined a rebalance already running."""
    if not cands:
        return None, ()
    early = [c for c in cands if c.at_ms <= start_ms + START_SLACK_MS]
    pool = early or cands
    chosen = min(pool, key=lambda c: (c.at_ms, c.confidence != EXACT))
    # The broker log and a member's trace often say the same thing: keep the member's
    # words as the trigger and the log line as evidence.
    also = tuple(c for c in sorted(cands, key=lambda c: c.at_ms) if c is not chosen)
    return chosen, _dedupe(also, chosen)


def _dedupe(items: tuple[Trigger, ...], chosen: Trigger) -> tuple[Trigger, ...]:
    seen = {(chosen.cause, chosen.who)}
    out = []
    for t in items:
        if (t.cause, t.who) in seen:
            continue
        seen.add((t.cause, t.who))
        out.append(t)
    return tuple(out)


# -- critical path ----------------------------------------------------------------------


def _waits(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    state: GroupState,
    members: Mapping[str, _Member],
    trigger: Trigger,
    broker: Sequence[BrokerReason] = (),
) -> list[Wait]:
    """What the join phase, the detection of a dead member and the sync phase waited for."""
    if rec.sync_ms is None:
        return []
    out = _join_waits(events, rec, prev, members)
    if not any(k in members for k in rec.members):
        out += _logged_waits(events, rec, state, broker)
    detect = _detect_wait(events, rec.start_ms, members, trigger)
    return detect + out + _sync_waits(events, rec, members)


def _join_waits(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, _Member],
) -> list[Wait]:
    """The join phase held for a dead member (until its session timed out), or for the
    last live member to send its JoinGroup."""
    start, sync = rec.start_ms, rec.sync_ms or rec.start_ms
    # Each member's last JoinGroupSent in the window, in one pass over the events (a pass
    # per member made a generation of N members cost N × events).
    last_sent: dict[str, Event] = {}
    for e in events.of("JoinGroupSent", since=start - 2, until=sync):  # start - 1 <= ts
        last_sent[e.member] = e
    sent_at = {}
    for k in rec.members:
        sent = last_sent.get(k) if k in members else None
        if sent is not None:
            sent_at[k] = sent.ts_ms
    last_live = max(sent_at.values(), default=start)
    # Members of the previous generation that were not in this one and said nothing (a
    # static member replaced was fenced, not waited for).
    _, swapped = _replacements(events, -1, sync, prev)
    gone = [
        k
        for k in (prev.members if prev else ())
        if k not in rec.members
        and k in members
        and k not in swapped
        and not _spoke(events, k, start, sync)
    ]
    if sync - last_live > WAIT_SLACK_MS and gone:
        return [_dead_wait(events, k, start, sync, last_live, members) for k in gone]
    if not sent_at:
        return []
    k = max(sent_at, key=lambda name: sent_at[name])
    waited = sent_at[k] - min(sent_at.values())
    if waited <= WAIT_SLACK_MS:
        return []
    why, detail, conf = _why_late(events, k, start, sent_at[k], members)
    return [
        Wait("join", k, waited, why, detail, conf, members[k].session_ms, members[k].session_from)
    ]


def _dead_wait(
    events: EventIndex,
    k: str,
    start: int,
    sync: int,
    last_live: int,
    members: Mapping[str, _Member],
) -> Wait:
    last = _last_seen(events, k, sync)
    session, source = members[k].session_ms, members[k].session_from
    since_last = None if last is None else sync - last
    detail = f"no heartbeat since {_clock(last)}" if last is not None else "silent"
    chaos = _chaos_act(events, k, sync)
    if chaos is not None:
        detail = f"{_chaos_words(chaos)}; {detail}"
    if session and since_last is not None and since_last >= SESSION_MATCH * session:
        stored = ", stored in __consumer_offsets" if source == STORED else ""
        detail += (
            f": dead, the broker removed it at its session timeout "
            f"(session.timeout.ms={session}{stored}, {since_last / 1000:.1f}s after it was "
            f"last heard of); the live members had all joined by {_clock(last_live)}"
        )
    confidence = EXACT if chaos is not None else INFERRED
    return Wait("join", k, sync - start, WAIT_DEAD, detail, confidence, session, source)


def _logged_waits(
    events: EventIndex,
    rec: GenerationRecord,
    state: GroupState,
    broker: Sequence[BrokerReason],
) -> list[Wait]:
    """Untraced: the broker's log says when it removed a member whose session timed out
    while the join phase waited for it."""
    start, sync = rec.start_ms, rec.sync_ms or rec.start_ms
    stored = _stored_timeouts(events)
    out = []
    for br in broker:
        if br.kind != FAILED or not start + WAIT_SLACK_MS < br.ts_ms <= sync + WAIT_SLACK_MS:
            continue
        member_id = _broker_who(br.reason)
        session = stored.get(member_id, (-1, -1))[0]
        known = f" (session.timeout.ms={session}, stored in __consumer_offsets)"
        out.append(
            Wait(
                "join",
                _member_name(state, member_id),
                br.ts_ms - start,
                WAIT_DEAD,
                f"the broker removed it at {_clock(br.ts_ms)} when its session timed out"
                f"{known if session > 0 else ''} (broker log): the join phase waited for it "
                "until then",
                EXACT,
                session if session > 0 else None,
                STORED if session > 0 else "",
            )
        )
    return out


def _session_setting(m: _Member) -> str:
    """The session timeout that removed `m`, as far as it is known."""
    if m.session_ms:
        return f"session.timeout.ms={m.session_ms}"
    if m.group_protocol == "consumer":
        # KIP-848: the member sends no session timeout; the group's own config sets it.
        return "the group's consumer.session.timeout.ms, set on the broker, not traced"
    return "session.timeout.ms, not traced or stored"


def _assigned_late(
    events: EventIndex, prev: GenerationRecord | None, members: Mapping[str, _Member]
) -> list[str]:
    """Classic members that first joined `prev` with nothing assigned, in a group where a
    member speaks KIP-848: the broker answers their JoinGroup at once and assigns them at
    its next target assignment, which is a new generation nobody else asked for."""
    if prev is None or not any(
        k in members and members[k].group_protocol == "consumer" for k in prev.members
    ):
        return []
    first = {
        e.member
        for e in events.of("RejoinRequested")
        if e.data.get("reason") == "first_join" and e.member
    }
    return sorted(
        {
            e.member
            for e in events.of("JoinCompleted")
            if e.generation == prev.generation
            and e.member in first
            and not e.data.get("assignment")
        }
    )


def _speaks_consumer(events: EventIndex, g: GenerationRecord) -> list[str]:
    """The generation's members that spoke the consumer protocol (group.protocol=consumer)
    in it, by their latest MemberStarted (a member restarted under its name may speak the
    other)."""

    def started(index: EventIndex) -> list[tuple[int, str, str]]:
        return [
            (
                e.ts_ms,
                e.member,
                str((e.data.get("config") or {}).get("group_protocol") or "classic"),
            )
            for e in index.of("MemberStarted")
            if e.source in ("member", "wire") and e.member
        ]

    # A member restarted within the rebalance is in the generation too, speaking what it
    # restarted with: the cut is when the generation was stable (or ended), not began.
    cut = g.stable_ms if g.stable_ms is not None else g.end_ms
    said: dict[str, str] = {}
    for ts, member, protocol in events.memo("member protocols", started):
        if cut is None or ts <= cut:
            said[member] = protocol
    return sorted(k for k in g.members if said.get(k) == "consumer")


def _protocol_change(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
) -> str:
    """A mixed group that changed protocol between two generations, in words ("" when it
    did not), from the members' own words: which protocol each spoke then (its latest
    MemberStarted before the generation began: a member restarted under its name may
    speak the other) and whether the group had a classic leader (a leader's
    AssignmentComputed, or a classic member's JoinGroup answer naming a leader: a
    consumer-protocol group's names none, its broker assigns)."""
    if prev is None:
        return ""

    answers = events.of("JoinGroupReceived")
    # The traced classic members' own ids, to name a leader that is one of them.
    ids = {str(e.data.get("member_id") or e.member_id): e.member for e in answers if e.member}

    def classic_leader(generation: int) -> str:
        """How the generation is known to have had a classic leader, or ""."""
        for e in events.of("AssignmentComputed"):
            if e.generation == generation and e.member:
                return (
                    f"{e.member} computed this generation's assignment as its classic leader "
                    f"({e.data.get('assignor', '?')})"
                )
        for e in answers:
            leader = str(e.data.get("leader") or "")
            if e.data.get("generation") == generation and leader:
                return (
                    f"{e.member}'s JoinGroup answer named {ids.get(leader, leader)} its leader, "
                    "as only a classic group's does"
                )
        return ""

    before, after = _speaks_consumer(events, prev), _speaks_consumer(events, rec)
    leader = classic_leader(rec.generation)
    if before and not after and leader and not classic_leader(prev.generation):
        return (
            f"the group went back to the classic protocol: {', '.join(before)} "
            f"{'was its last member' if len(before) == 1 else 'were its last members'} "
            "with group.protocol=consumer, and with none left the broker converts the group "
            "to classic (group.consumer.migration.policy): a classic leader assigns again, "
            f"where the broker assigned before ({leader})"
        )
    # (not "members new to this generation": a member restarted onto the consumer
    # protocol within one rebalance is in both)
    if after and not before and classic_leader(prev.generation):
        return (
            f"the group became a consumer-protocol group: {', '.join(after)} joined with "
            "group.protocol=consumer, so the broker converted it (group.consumer.migration."
            "policy) and now assigns every member's partitions, classic members' included"
        )
    return ""


def _detect_wait(
    events: EventIndex, start: int, members: Mapping[str, _Member], trigger: Trigger
) -> list[Wait]:
    """Nothing held the join, but the rebalance began only when a silent member's
    session timed out: the time went to noticing it was gone."""
    if trigger.reason != "session timeout" or trigger.who not in members:
        return []
    last = _last_seen(events, trigger.who, start)
    if last is None or start - last <= WAIT_SLACK_MS:
        return []
    session = members[trigger.who].session_ms
    chaos = _chaos_act(events, trigger.who, start)
    said = f"{_chaos_words(chaos)}; " if chaos is not None else ""
    return [
        Wait(
            "detect",
            trigger.who,
            start - last,
            WAIT_DEAD,
            f"{said}no heartbeat since {_clock(last)}: the rebalance began only when its "
            f"session timed out ({_session_setting(members[trigger.who])}); its partitions "
            "were not consumed meanwhile",
            EXACT if chaos is not None else INFERRED,
            session,
            members[trigger.who].session_from,
        )
    ]


def _sync_waits(
    events: EventIndex, rec: GenerationRecord, members: Mapping[str, _Member]
) -> list[Wait]:
    """The sync phase: followers wait for the leader's SyncGroup (its assignment)."""
    sync, leader = rec.sync_ms or rec.start_ms, rec.leader
    if rec.stable_ms is None or leader not in members:
        return []
    mine = events.by(leader, since=sync - 1)
    got = [e.ts_ms for e in mine if e.type == "JoinGroupReceived"]
    synced = [e.ts_ms for e in mine if e.type == "SyncGroupSent"]
    if not got or not synced or synced[0] - got[0] <= WAIT_SLACK_MS:
        return []
    took = synced[0] - got[0]
    computed = [e for e in mine if e.type == "AssignmentComputed"]
    detail = f"the leader sent its SyncGroup {took / 1000:.1f}s after the join"
    if computed and computed[0].data.get("duration_ms") is not None:
        detail += f" (its assignor ran {float(computed[0].data['duration_ms']):.0f} ms)"
    return [Wait("sync", leader, took, WAIT_SLOW_ASSIGNMENT, detail, EXACT)]


def _spoke(events: EventIndex, member: str, t0: int, t1: int) -> bool:
    return any(e.type not in _ROUTINE for e in events.by(member, since=t0 - 1, until=t1))


def _why_late(
    events: EventIndex, member: str, start: int, sent: int, members: Mapping[str, _Member]
) -> tuple[str, str, str]:
    """Why `member` sent its JoinGroup only at `sent`."""
    mine = events.by(member, until=sent)
    started = [e for e in mine if e.type == "MemberStarted" and e.ts_ms >= start - 1]
    if started:
        static = members[member].instance_id
        kind = f"static member {static} restarting" if static else "restarting"
        return WAIT_RESTARTING, f"{kind}: process started {_clock(started[-1].ts_ms)}", EXACT
    told = [
        e
        for e in mine
        if e.ts_ms >= start - 1
        and (e.type == "HeartbeatFailed" or (e.type == "RejoinRequested" and e.source == "member"))
    ]
    if told:
        # Its heartbeat thread learnt of the rebalance at `told`; the JoinGroup waits for
        # the main thread's next poll: the time between is processing.
        busy = sent - told[0].ts_ms
        if busy > WAIT_SLACK_MS:
            limit = members[member].max_poll_ms
            batches = [e for e in mine if e.type == "RecordsConsumed"]
            polled = (
                f" of {batches[-1].data.get('count', '?')} records polled at "
                f"{_clock(batches[-1].ts_ms)}"
                if batches
                else ""
            )
            detail = (
                f"still processing: told of the rebalance at {_clock(told[0].ts_ms)} "
                f"by its heartbeat, it polled (and joined) only {busy / 1000:.1f}s later"
                f"{polled}"
            )
            if limit:
                detail += f"; the broker waits up to max.poll.interval.ms={limit}"
            return WAIT_PROCESSING, detail, EXACT
        hb = members[member].heartbeat_ms
        every = f" (heartbeat.interval.ms={hb})" if hb else ""
        return (
            WAIT_LATE_JOIN,
            f"learnt of the rebalance only at its heartbeat at {_clock(told[0].ts_ms)}{every}",
            EXACT,
        )
    return WAIT_LATE_JOIN, "rejoined late (it learnt of the rebalance at a heartbeat)", EXACT


# -- cost --------------------------------------------------------------------------------


def _rate_per_ms(
    consumed: Mapping[str, Sequence[Event]], member: str, until: int, span: int
) -> float | None:
    """Records per ms `member` consumed in the `span` ms before `until` (`consumed`: each
    member's RecordsConsumed events)."""
    got = [e for e in consumed.get(member, ()) if until - span <= e.ts_ms < until]
    if len(got) < 2:
        return None
    n = sum(int(e.data.get("count", 0) or 0) for e in got)
    return n / span


def _lag_at(
    observed: _Observed,
    t: int,
    after: bool,
    parsed: dict[int, dict[TopicPartition, int]] | None = None,
) -> dict[TopicPartition, int] | None:
    """The lag per partition in the broker's description last before `t` (first after,
    when `after`). `parsed` keeps each description's lag once read (by the event's
    identity, the events outliving it): a generation of 1,000 members asks for the same
    two descriptions of 10,000 partitions once per member."""
    if after:
        k = bisect_left(observed.ts, t)
        found = observed.events[k] if k < len(observed.ts) else None
    else:
        k = bisect_right(observed.ts, t)
        found = observed.events[k - 1] if k else None
    if found is None:
        return None
    if parsed is not None and id(found) in parsed:
        return parsed[id(found)]
    lag = found.data["lag"]
    out = {
        (str(topic), int(p)): int(n)
        for topic, parts in lag.items()
        if isinstance(parts, Mapping)
        for p, n in parts.items()
        if isinstance(n, int) and str(p).isdigit()
    }
    if parsed is not None:
        parsed[id(found)] = out
    return out


def _lag_growth(
    observed: _Observed,
    owned: Sequence[TopicPartition],
    t0: int,
    t1: int,
    parsed: dict[int, dict[TopicPartition, int]] | None = None,
) -> int | None:
    """How much the lag on the partitions `owned` before the rebalance grew while their
    member had none (the broker's descriptions just before and just after, from the
    `observed` GroupObserved events that carry a lag), when known."""
    if not owned:
        return None
    before = _lag_at(observed, t0, after=False, parsed=parsed)
    after = _lag_at(observed, t1, after=True, parsed=parsed)
    if before is None or after is None:
        return None
    if any(tp not in before or tp not in after for tp in owned):
        return None
    return max(0, sum(after[tp] - before[tp] for tp in owned))


def _consumed(events: EventIndex) -> dict[str, list[Event]]:
    """Each member's RecordsConsumed events."""
    out: dict[str, list[Event]] = {}
    for e in events.of("RecordsConsumed"):
        out.setdefault(e.member, []).append(e)
    return out


@dataclass(frozen=True)
class _Observed:
    """The broker's descriptions that carry the lag, with their times (ascending)."""

    events: list[Event]
    ts: list[int]


def _observed(events: EventIndex) -> _Observed:
    found = [e for e in events.of("GroupObserved") if isinstance(e.data.get("lag"), Mapping)]
    return _Observed(found, [e.ts_ms for e in found])


def _costs(
    events: EventIndex, state: GroupState, rec: GenerationRecord, now_ms: int
) -> tuple[Cost, ...]:
    # Indexed once for all members (per member, each was a pass over every event or
    # partition: a generation of N members cost N × events).
    consumed = events.memo("consumed", _consumed)
    observed = events.memo("observed", _observed)
    out = []
    t0, _t1 = rec.rebalance_window(now_ms)
    owned_before: dict[str, list[TopicPartition]] = {}
    for tp, who in owners_at(state, t0 - 1).items():
        for k in who:
            owned_before.setdefault(k, []).append(tp)
    parsed: dict[int, dict[TopicPartition, int]] = {}
    for key, ms in sorted(rebalance_unassigned(state, rec, now_ms).items()):
        # Named as the views name it (an untraced member by its client id).
        member = state.members[key].name if key in state.members else key
        grown = _lag_growth(observed, owned_before.get(key, ()), t0, t0 + ms, parsed)
        if grown is not None:
            out.append(Cost(member, ms, grown, MEASURED_LAG))
            continue
        rate = _rate_per_ms(consumed, key, rec.start_ms, 10_000)
        if rate is None:
            out.append(Cost(member, ms))
        else:
            out.append(Cost(member, ms, round(rate * ms), ESTIMATED_RATE))
    return tuple(out)


# -- advice ------------------------------------------------------------------------------


def _ceil_s(ms: float) -> int:
    """Round up to a whole second, in ms."""
    return int(math.ceil(ms / 1000.0) * 1000)


def _is_heartbeat(e: Event) -> bool:
    """An answered heartbeat: a member's own, or one the proxy traced."""
    if e.type == "HeartbeatSucceeded" and e.source == "member":
        return True
    return e.type == "HeartbeatTraced" and e.source == "wire" and e.data.get("error") == "NONE"


def _heartbeat_every(events: Sequence[Event], member: str | None) -> int | None:
    """The usual time between `member`'s heartbeats (the median gap; of every member's
    when `member` is None), when it was seen: its heartbeat.interval.ms when its
    configuration was not traced."""
    last: dict[str, int] = {}
    gaps = []
    for e in events:
        who = e.member or e.client_id
        if member is not None and who != member:
            continue
        if _is_heartbeat(e):
            if who in last and e.ts_ms > last[who]:
                gaps.append(e.ts_ms - last[who])
            last[who] = e.ts_ms
        elif e.type in _HEARTBEATS_PAUSED:  # a gap across a rejoin is not the interval
            last.pop(who, None)
    gaps.sort()
    return gaps[len(gaps) // 2] if gaps else None


# A member's own steps after which its heartbeats pause (its join, its start, leaving).
_HEARTBEATS_PAUSED = frozenset(
    {"JoinGroupSent", "MemberStarted", "LeaveGroupSent", "PollIntervalExceeded"}
)


def _heartbeat_basis(
    events: Sequence[Event], member: str, members: Mapping[str, _Member]
) -> tuple[int, bool, str]:
    """(heartbeat interval, whether it is a configured value, how it is known)."""
    info = members.get(member)
    if info is not None and info.heartbeat_ms:
        default = ", the client's default" if info.heartbeat_default else ""
        return info.heartbeat_ms, True, f"3 × heartbeat.interval.ms={info.heartbeat_ms}{default}"
    own = _heartbeat_every(events, member)
    if own:
        return own, False, f"3 × the {own} ms seen between heartbeats"
    group = _heartbeat_every(events, None)
    if group:
        return group, False, f"3 × the {group} ms seen between the other members' heartbeats"
    return (
        DEFAULT_HEARTBEAT_MS,
        True,
        f"3 × the clients' default heartbeat.interval.ms={DEFAULT_HEARTBEAT_MS}, no "
        "heartbeat traced",
    )


def _longest_heartbeat_gap(events: Sequence[Event]) -> int:
    """The longest time between two successive answered heartbeats of one member, while it
    was in a generation (a gap across its own rejoin is the protocol's, not a silence)."""
    last: dict[str, int] = {}
    longest = 0
    for e in events:
        who = e.member or e.client_id
        if e.source not in ("member", "wire") or not who:
            continue
        if _is_heartbeat(e):
            if who in last:
                longest = max(longest, e.ts_ms - last[who])
            last[who] = e.ts_ms
        elif e.type in _HEARTBEATS_PAUSED:
            last.pop(who, None)
    return longest


def _advise_dead(
    w: Wait, members: Mapping[str, _Member], ctx: Context, events: Sequence[Event] = ()
) -> list[Advice]:
    session = w.session_timeout_ms
    if not session:
        dead = members.get(w.member)
        lower = (
            "a lower consumer.session.timeout.ms (the group's config on the broker; the "
            "member sends none with group.protocol=consumer)"
            if dead is not None and dead.group_protocol == "consumer"
            else "a lower session.timeout.ms"
        )
        return [
            Advice(
                "dead-member-held-join",
                "shutdown",
                "LeaveGroup",
                f"the join waited {w.ms / 1000:.1f}s for {w.member}, dead until its session "
                "timed out: stopped gracefully (consumer.close()) it would have sent "
                f"LeaveGroup; {lower} shortens the wait (its value is not known: neither "
                "traced nor stored)",
            )
        ]
    hb, configured, why = _heartbeat_basis(events, w.member, members)
    # A session must outlive a few missed heartbeats and the longest silence a live
    # member was seen to have between two heartbeats (a GC pause, a slow network); the
    # cluster sets the floor.
    gap = _longest_heartbeat_gap(events)
    floor = ctx.bounds.min_session_ms if ctx.bounds else 0
    three = 3 * hb if configured else _ceil_s(3 * hb)  # a measured interval: whole seconds
    suggested = max(three, _ceil_s(2 * gap) if gap else 0, floor)
    if not configured and three != 3 * hb:
        why += ", rounded up to a whole second"
    if gap and _ceil_s(2 * gap) > three:
        why = f"2 × the longest gap seen between two heartbeats, {gap} ms"
        if _ceil_s(2 * gap) != 2 * gap:
            why += ", rounded up to a whole second"
    what = "the join waited" if w.phase == "join" else "the group waited"
    where = " (stored in __consumer_offsets)" if w.session_from == STORED else ""
    out = []
    if suggested < session:
        bound = f" (the cluster's floor: {ctx.bounds.session_range()})" if ctx.bounds else ""
        out.append(
            Advice(
                "dead-member-held-join",
                "session.timeout.ms",
                str(suggested),
                f"{what} {w.ms / 1000:.1f}s for dead {w.member} until its "
                f"session.timeout.ms={session}{where}; session.timeout.ms={suggested} "
                f"({why}){bound} would have cut the wait to "
                f"about {suggested / 1000:.1f}s",
            )
        )
    out.append(
        Advice(
            "dead-member-held-join",
            "shutdown",
            "LeaveGroup",
            f"stop {w.member} gracefully (SIGTERM, consumer.close()): it sends LeaveGroup "
            f"and the group does not wait {session / 1000:.0f}s for it",
        )
    )
    return out


def _advise_poll(
    events: EventIndex, member: str, members: Mapping[str, _Member], until: int
) -> list[Advice]:
    """Processing longer than max.poll.interval.ms: the batch and its time, measured."""
    info = members.get(member)
    limit = info.max_poll_ms if info else None
    mine = events.by(member, until=until + 60_000)
    worst: tuple[int, int] | None = None  # (batch ms, records)
    for i, e in enumerate(mine):
        if e.type != "RecordsConsumed":
            continue
        # Measured only for a batch whose processing outlived a poll interval (the
        # heartbeat thread said so) or held a join: the next main-thread step after it
        # is the end of its processing. Gaps between other polls may be idle time.
        later = mine[i + 1 :]
        nxt = next((x for x in later if x.type in _MAIN_THREAD), None)
        if nxt is None:
            continue
        breached = any(
            x.type in ("PollIntervalExceeded", "HeartbeatFailed") and x.ts_ms <= nxt.ts_ms
            for x in later
        )
        took, n = nxt.ts_ms - e.ts_ms, int(e.data.get("count", 0) or 0)
        if breached and n > 0 and (worst is None or took > worst[0]):
            worst = (took, n)
    if limit is None:
        return []
    if worst is None:
        return [
            Advice(
                "max-poll-interval",
                "max.poll.interval.ms",
                "",
                f"{member} did not poll within max.poll.interval.ms={limit}; no batch was "
                "traced, so kgctl cannot measure its processing time",
            )
        ]
    took, n = worst
    per_record = took / n
    records = int(0.8 * limit / per_record)
    interval = _ceil_s(1.5 * took)
    out = []
    if records >= 1:
        out.append(
            Advice(
                "max-poll-interval",
                "max.poll.records",
                str(records),
                f"{member} spent {took / 1000:.1f}s on {plural(n, 'record')} "
                f"({per_record:.0f} ms each) against max.poll.interval.ms={limit}: "
                f"max.poll.records={records} keeps a batch within 80% of the interval",
            )
        )
    single = " (one record alone outlives the interval)" if records < 1 else ""
    out.append(
        Advice(
            "max-poll-interval",
            "max.poll.interval.ms",
            str(interval),
            f"{'or ' if out else ''}max.poll.interval.ms={interval} (1.5 × the "
            f"{took / 1000:.1f}s batch of {plural(n, 'record')} seen){single}",
        )
    )
    return out


@dataclass(frozen=True)
class Restart:
    """A member that stopped and came back under the same name."""

    member: str
    stopped_ms: int
    back_ms: int  # its first JoinGroup after starting again
    static: bool
    session_timeout_ms: int | None = None
    rebalanced: bool = True  # a new generation began while it was away

    @property
    def down_ms(self) -> int:
        return self.back_ms - self.stopped_ms

    def text(self) -> str:
        kind = "static" if self.static else "dynamic"
        within = ""
        if self.session_timeout_ms:
            side = "within" if self.down_ms < self.session_timeout_ms else "beyond"
            within = f", {side} session.timeout.ms={self.session_timeout_ms}"
        outcome = "the group rebalanced" if self.rebalanced else "no rebalance"
        return f"{self.member} ({kind}) was away {self.down_ms / 1000:.1f}s{within}: {outcome}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "stopped_ms": self.stopped_ms,
            "back_ms": self.back_ms,
            "down_ms": self.down_ms,
            "static": self.static,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalanced": self.rebalanced,
        }


def restarts(state: GroupState, events: Sequence[Event]) -> tuple[Restart, ...]:
    """Every member that stopped (or left) and joined again under the same name: from
    the stop to its first JoinGroup after starting, and whether the group rebalanced for
    it (the generation it came back to is newer than the one it left, or a generation
    began while it was away)."""
    ordered = index(events)
    return _restarts(state, ordered, _members(ordered))


def _restarts(
    state: GroupState, ordered: EventIndex, members: Mapping[str, _Member]
) -> tuple[Restart, ...]:
    """`restarts` of events already in time order, their members already read."""
    out = []
    for member, t0, back, gen_before in _returns(ordered):
        info = members.get(member)
        after = _generation_after(ordered, member, back)
        began = any(t0 <= g.start_ms <= back.ts_ms + START_SLACK_MS for g in state.generations)
        rebalanced = began or (after is not None and gen_before is not None and after > gen_before)
        out.append(
            Restart(
                member,
                t0,
                back.ts_ms,
                bool(back.instance_id or (info and info.instance_id)),
                info.session_ms if info else None,
                rebalanced,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Replacement:
    """A second process that took a static member's group.instance.id while the first
    still held it (the broker handed the identity over; the first, if still running, was
    fenced with FENCED_INSTANCE_ID)."""

    instance_id: str
    old: str
    new: str
    at_ms: int  # the newcomer's JoinGroup
    fenced_ms: int | None = None  # when the old one was told FENCED_INSTANCE_ID
    rebalanced: bool = False  # a rebalance began with it

    def text(self) -> str:
        fenced = (
            f"; {self.old} was fenced (FENCED_INSTANCE_ID) at {_clock(self.fenced_ms)}"
            if self.fenced_ms is not None
            else ""
        )
        outcome = "the group rebalanced" if self.rebalanced else "no rebalance"
        return (
            f"{self.new} took group.instance.id {self.instance_id} from {self.old} at "
            f"{_clock(self.at_ms)}{fenced}: {outcome}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "old": self.old,
            "new": self.new,
            "at_ms": self.at_ms,
            "fenced_ms": self.fenced_ms,
            "rebalanced": self.rebalanced,
        }


def replacements(state: GroupState, events: Sequence[Event]) -> tuple[Replacement, ...]:
    """Every static member whose group.instance.id another process took (a process of
    another name: one of the same name restarting is a `Restart`)."""
    ordered = sorted(events, key=lambda e: e.ts_ms)
    holder: dict[str, tuple[str, str]] = {}  # instance id -> (member, member id)
    out = []
    for e in ordered:
        iid = _instance_of(e)
        if not iid or e.source not in ("member", "wire"):
            continue
        who = e.member or e.client_id
        member_id = str(e.member_id or e.data.get("member_id") or "")
        if e.type == "JoinGroupSent" and not member_id and iid in holder:
            old = holder[iid][0]
            if old != who:
                fenced = next(
                    (
                        x.ts_ms
                        for x in ordered
                        if x.member == old and x.ts_ms >= e.ts_ms and x.data.get("error") == FENCED
                    ),
                    None,
                )
                began = any(abs(g.start_ms - e.ts_ms) <= START_SLACK_MS for g in state.generations)
                out.append(Replacement(iid, old, who, e.ts_ms, fenced, began))
        elif member_id:
            holder[iid] = (who or member_id, member_id)
    return tuple(out)


def _returns(ordered: EventIndex) -> list[tuple[str, int, Event, int | None]]:
    """(member, when it stopped, its first JoinGroup back, its generation when it stopped)."""
    stopped: dict[str, tuple[int, int | None]] = {}
    generation: dict[str, int] = {}
    started: set[str] = set()
    out = []
    # Only these types count below.
    for e in ordered.of(
        "JoinCompleted", "MemberStopped", "LeaveGroupSent", "MemberStarted", "JoinGroupSent"
    ):
        if e.source != "member" or not e.member:
            continue
        if e.type == "JoinCompleted":
            generation[e.member] = int(e.data.get("generation", e.generation) or -1)
        if e.type in ("MemberStopped", "LeaveGroupSent"):
            stopped.setdefault(e.member, (e.ts_ms, generation.get(e.member)))
            started.discard(e.member)
        elif e.type == "MemberStarted" and e.member in stopped:
            started.add(e.member)
        elif e.type == "JoinGroupSent" and e.member in started:
            t0, gen = stopped.pop(e.member)
            started.discard(e.member)
            out.append((e.member, t0, e, gen))
    return out


def _generation_after(ordered: EventIndex, member: str, back: Event) -> int | None:
    """The generation `member` completed first after coming back."""
    for e in ordered.by(member, since=back.ts_ms - 1):
        if e.type == "JoinCompleted":
            return int(e.data.get("generation", e.generation) or -1)
    return None


def _advise_batch(events: EventIndex, w: Wait, start_ms: int) -> list[Advice]:
    """A join held by a member finishing its batch: a batch of about a second keeps the
    wait to about a second (the per-record time measured on the batch it was finishing)."""
    batches = [e for e in events.by(w.member, until=start_ms + w.ms) if e.type == "RecordsConsumed"]
    if not batches:
        return []
    b = batches[-1]
    n = int(b.data.get("count", 0) or 0)
    nxt = next(
        (e.ts_ms for e in events.by(w.member, since=b.ts_ms) if e.type in _MAIN_THREAD), None
    )
    if n <= 0 or nxt is None:
        return []
    took = nxt - b.ts_ms
    per_record = took / n
    records = int(1000 / per_record) if per_record > 0 else n
    if records >= n or records < 1:
        return []
    return [
        Advice(
            "processing-held-join",
            "max.poll.records",
            str(records),
            f"the join waited {w.ms / 1000:.1f}s for {w.member} to finish a batch of "
            f"{plural(n, 'record')} ({took / 1000:.1f}s, {per_record:.0f} ms each): with "
            f"max.poll.records={records} a batch takes about a second, and so does the wait",
        )
    ]


def _advise_restart(
    trigger: Trigger, back: Sequence[Restart], since: int, until: int, ctx: Context
) -> list[Advice]:
    out = []
    for r in back:
        if r.static or r.member != trigger.who or not since < r.back_ms <= until:
            continue
        session = _ceil_s(max(1.5 * r.down_ms, 1000))
        if ctx.bounds is not None:
            session = min(max(session, ctx.bounds.min_session_ms), ctx.bounds.max_session_ms)
        out.append(
            Advice(
                "dynamic-restart",
                "group.instance.id",
                f"session.timeout.ms={session}",
                f"{r.member} restarted in {r.down_ms / 1000:.1f}s as a dynamic member (a new "
                "member id: a rebalance to leave, one to join); as a static member "
                f"(group.instance.id) with session.timeout.ms={session} (1.5 × the restart "
                "seen) the group would not rebalance",
            )
        )
    return out


def _prepared_owned(
    events: EventIndex, since: int, until: int
) -> dict[str, tuple[TopicPartition, ...]]:
    """Each member's partitions as it prepared to join (JoinPrepared `owned`)."""
    out: dict[str, tuple[TopicPartition, ...]] = {}
    for e in events.of("JoinPrepared", since=since, until=until):
        if e.member:
            raw = e.data.get("owned") or {}
            if isinstance(raw, dict):
                out[e.member] = tuple(
                    sorted((str(t), int(p)) for t, ids in raw.items() for p in ids)
                )
    return out


def _advise_cooperative(
    events: EventIndex,
    since: int,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, _Member],
    ctx: Context,
    revoked: int,
    now_ms: int,
) -> list[Advice]:
    speakers = _speaks_consumer(events, rec)
    # (a member's `protocol` is its last JoinPrepared's: one restarted onto the consumer
    # protocol still carries its classic life's)
    eager = [
        k
        for k in rec.members
        if k in members and members[k].protocol == "eager" and k not in speakers
    ]
    if not eager or prev is None or revoked == 0:
        return []
    if speakers or (state.group_type == "consumer" and rec.end_ms is None):
        return _advise_cooperative_classic_members(events, since, rec, prev, eager, now_ms)
    if ctx.cooperative is None:
        return []
    after_t = rec.stable_ms if rec.stable_ms is not None else now_ms
    after = owners_at(state, after_t)
    partitions: dict[str, int] = {}
    for (topic, p), who in after.items():
        if who:  # owners() lists every partition ever owned, later ones included
            partitions[topic] = max(partitions.get(topic, 0), p + 1)
    subs = {k: members[k].subscription or tuple(sorted(partitions)) for k in rec.members}
    owned = _owned_before(events, since, state, rec, prev)
    for held in owned.values():
        for topic, p in held:
            partitions[topic] = max(partitions.get(topic, 0), p + 1)
    plan = ctx.cooperative(
        AssignmentInput(subs, {k: tuple(sorted(v)) for k, v in owned.items()}, partitions)
    )
    moving = sum(1 for k, tps in owned.items() for tp in tps if tp not in set(plan.get(k, ())))
    if moving >= revoked:
        return []
    return [
        Advice(
            "eager-stop-the-world",
            "partition.assignment.strategy",
            "cooperative-sticky",
            f"the eager protocol revoked {plural(revoked, 'partition')} from members that stayed; "
            f"cooperative-sticky, re-run on this generation's members and subscriptions, "
            f"would have revoked {moving} and left the others consuming",
        )
    ]


def _owned_before(
    events: EventIndex,
    since: int,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord,
) -> dict[str, list[TopicPartition]]:
    """What each member of `rec` owned as the rebalance began: its own words when it
    prepared to join, else the owners when the previous generation was stable."""
    owned: dict[str, list[TopicPartition]] = {k: [] for k in rec.members}
    prepared = _prepared_owned(events, since, rec.sync_ms or rec.start_ms)
    before_t = prev.stable_ms if prev.stable_ms is not None else rec.start_ms - 1
    for tp, who in owners_at(state, min(before_t, rec.start_ms - 1)).items():
        for k in who:
            if k in owned and k not in prepared:
                owned[k].append(tp)
    for k, claimed in prepared.items():
        if k in owned:
            owned[k] = list(claimed)
    return owned


def _advise_cooperative_classic_members(
    events: EventIndex,
    since: int,
    rec: GenerationRecord,
    prev: GenerationRecord,
    eager: list[str],
    now_ms: int,
) -> list[Advice]:
    """Eager classic members of a consumer-protocol group (a mixed group): the broker
    assigns, so re-running a client assignor says nothing of it. Each eager member gave
    up all it held; a cooperative one gives up only what the broker's new assignment
    takes from it (taken as the one it was given here: the broker computes its target
    from the assignments it gave, not from what a member let go of)."""
    # Each one's own words: what it held when it prepared to join, and what the
    # generation gave it (its JoinCompleted). There is no barrier: each prepares when
    # its heartbeat hears of the rebalance, after the generation's own start.
    until = rec.end_ms if rec.end_ms is not None else now_ms
    given: dict[str, frozenset[TopicPartition]] = {}
    completed: dict[str, int] = {}
    for e in events.of("JoinCompleted", since=rec.start_ms, until=until):
        if e.member in eager and e.generation == rec.generation:
            given[e.member] = owned_pairs(owned_from(e.data.get("assignment")))
            completed[e.member] = e.ts_ms
    owned: dict[str, frozenset[TopicPartition]] = {}
    for e in events.of("JoinPrepared", since=since, until=until):
        if e.member in completed and e.ts_ms <= completed[e.member]:
            owned[e.member] = owned_pairs(owned_from(e.data.get("owned")))
    stayed = [k for k in eager if k in prev.members and owned.get(k)]
    held = sum(len(owned[k]) for k in stayed)
    moving = sum(1 for k in stayed for tp in owned[k] if tp not in given[k])
    if not held or moving >= held:
        return []
    one = len(stayed) == 1
    gave = f"gave up all {plural(held, 'partition')}" if held > 1 else "gave up the partition"
    who = (
        f"{stayed[0]} (a classic member, eager protocol) {gave} it held"
        if one
        else f"{', '.join(stayed)} (classic members, eager protocol) {gave} they held"
    )
    back = "every one" if moving == 0 else f"all but {moving}"
    kept = "kept them all" if moving == 0 else f"given up only {moving}"
    return [
        Advice(
            "eager-stop-the-world",
            "partition.assignment.strategy",
            "cooperative-sticky",
            f"{who}; the broker, which assigns this consumer-protocol group, gave "
            f"{'it' if one else 'them'} back {back}: with cooperative-sticky "
            f"{'it' if one else 'they'} would have {kept} (inferred: the broker's assignment "
            "taken as it would have been with a cooperative member)",
        )
    ]


def _protocols(events: EventIndex, member: str, until: int) -> tuple[str, ...]:
    """The assignors `member` offered in its last JoinGroup up to `until`."""
    found: tuple[str, ...] = ()
    for e in events.by(member, until=until):
        if e.type == "JoinGroupSent":
            raw = e.data.get("protocols")
            if isinstance(raw, list):
                found = tuple(str(p) for p in raw)
    return found


def _advise_replaced(
    events: EventIndex, trigger: Trigger, prev: GenerationRecord | None, until: int
) -> list[Advice]:
    """A static member replaced: by a process that offered the assignors in another order
    (the group's choice changed, so it rebalanced), or while the old one still ran (it
    was fenced: two processes shared one group.instance.id)."""
    if trigger.cause != Cause.STATIC_MEMBER_REPLACED.value or prev is None:
        return []
    new = trigger.who
    old = next((k for k in prev.members if k != new and k in trigger.evidence), new)
    out = []
    mine, theirs = _protocols(events, new, until), _protocols(events, old, trigger.at_ms - 1)
    if mine and theirs and mine[0] != theirs[0]:
        out.append(
            Advice(
                "static-member-replaced",
                "partition.assignment.strategy",
                ",".join(theirs),
                f"{new} took {old}'s group.instance.id offering {','.join(mine)} where "
                f"{old} offered {','.join(theirs)}: the group's assignor changed with it, "
                "so the replacement rebalanced the group (a static member replaced in a "
                "stable group with the same assignors does not); list the same assignors, "
                "in the same order, on every member",
            )
        )
    fenced = any(
        e.type == "MemberFailed" and e.member == old and e.data.get("error") == FENCED
        and e.ts_ms >= trigger.at_ms
        for e in events
    )  # fmt: skip
    if fenced and old != new:
        out.append(
            Advice(
                "static-member-replaced",
                "group.instance.id",
                "one per process",
                f"{old} was still running when {new} joined with its group.instance.id: the "
                f"broker fenced {old} (FENCED_INSTANCE_ID) and it stopped; give each process "
                "its own id (a restart should stop the old process first)",
            )
        )
    return out


def _advise_loop(diags: Sequence[Diagnosis], window: int = 5, times: int = 3) -> dict[int, Advice]:
    """A member that started `times` of the last `window` rebalances: its reasons."""
    out: dict[int, Advice] = {}
    for i in range(len(diags)):
        recent = diags[max(0, i - window + 1) : i + 1]
        who = diags[i].trigger.who
        if not who:
            continue
        mine = [
            d
            for d in recent
            if d.trigger.who == who
            and d.trigger.reason != RejoinReason.FIRST_JOIN.value
            and d.trigger.cause != Cause.MEMBER_JOINED.value
        ]
        if len(mine) >= times:
            reasons = sorted({d.trigger.reason or d.trigger.cause for d in mine})
            out[diags[i].generation] = Advice(
                "rejoin-loop",
                "member",
                who,
                f"{who} started {len(mine)} of the last {len(recent)} rebalances "
                f"(reasons: {', '.join(reasons)}): fix that member first",
            )
    return out


def _advise_kip848(
    state: GroupState,
    waits: Sequence[Wait],
    costs: Sequence[Cost],
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    moved: Sequence[Move],
    revoked: int,
) -> list[Advice]:
    """A classic group whose rebalance stopped members that stayed: the consumer protocol
    (KIP-848) has no join barrier and no stop-the-world; each member is reconciled on its
    own heartbeats and only the partitions that move pause."""
    if state.group_type == "consumer" or (state.group_epoch or -1) >= 0 or prev is None:
        return []
    if state.protocol_type not in ("", "consumer"):
        return []  # a Connect or other classic protocol: no KIP-848 equivalent
    stayed = {k for k in rec.members if k in prev.members}
    named = {state.members[k].name if k in state.members else k for k in stayed}
    idle = {c.member: c.unassigned_ms for c in costs if c.member in named and c.unassigned_ms}
    held = sum(
        w.ms
        for w in waits
        if w.phase == "join" and w.why in (WAIT_DEAD, WAIT_PROCESSING, WAIT_RESTARTING)
    )
    if held <= 1000 and sum(idle.values()) <= 1000:
        return []
    owned = len(state.owners(rec.stable_ms or rec.start_ms))
    # Only a partition taken from a live owner pauses (revoked, then assigned); a new
    # partition is assigned at once, a dead member's waits for its session either way.
    handed = sum(1 for m in moved if set(m.before) & stayed)
    stopped = ", ".join(f"{k} {v / 1000:.1f}s" for k, v in sorted(idle.items()))
    waited = ", ".join(dict.fromkeys(w.member for w in waits if w.phase == "join"))
    text = (
        "with group.protocol=consumer (KIP-848, brokers 4.0+) there is no join barrier "
        "and no stop-the-world: each member is reconciled on its own heartbeats"
    )
    if stopped:
        text += f"; here the members that stayed went without partitions ({stopped})"
    if revoked:
        text += f" and gave up {plural(revoked, 'partition')}"
    text += (
        f", where only the {handed} taken from one of them would have paused"
        if handed
        else ", where none of theirs would have paused"
    )
    if owned:
        text += f" (of {plural(owned, 'partition')})"
    if waited and held > 1000:
        text += (
            f"; the {held / 1000:.1f}s the join waited for {waited} would not have held "
            "the others (a dead member's own partitions still wait for its session "
            "timeout, group.consumer.session.timeout.ms on the broker)"
        )
    return [Advice("kip-848", "group.protocol", "consumer", text)]


# -- putting it together ------------------------------------------------------------------


def diagnose(
    state: GroupState,
    events: Sequence[Event],
    now_ms: int,
    ctx: Context | None = None,
) -> tuple[Diagnosis, ...]:
    """A diagnosis of every generation of `state` (folded from `events`, in time order)."""
    ctx = ctx or Context()
    events = index(events)
    members = _members(events)
    # The same for every generation: read once (at 1,000 members each is a pass over
    # every event kept).
    back = _restarts(state, events, members)
    out: list[Diagnosis] = []
    gens = state.generations
    for i, rec in enumerate(gens):
        prev = gens[i - 1] if i > 0 else None
        out.append(_diagnose_one(state, events, rec, prev, members, ctx, now_ms, back))
    loops = _advise_loop(out)
    return tuple(
        d if d.generation not in loops else _with_advice(d, loops[d.generation]) for d in out
    )


# What a diagnosis reads before its rebalance began: the trigger, a silent member's
# last heartbeat (a session timeout before), its consumption rate (10 s before).
NEEDED_BEFORE_MS = 60_000


def keep_diagnoses(
    before: Mapping[int, Diagnosis], fresh: Sequence[Diagnosis], window_from_ms: int | None
) -> dict[int, Diagnosis]:
    """Each generation's newest diagnosis, except for a rebalance that had finished when
    it was diagnosed and whose events (from NEEDED_BEFORE_MS before it began) have begun
    to leave the window kept (a live view keeps recent events only): that one keeps what
    was said while the window held them all."""
    out = dict(before)
    for d in fresh:
        kept = out.get(d.generation)
        lost = window_from_ms is not None and window_from_ms > d.start_ms - NEEDED_BEFORE_MS
        if not lost or kept is None or kept.stable_ms is None:
            out[d.generation] = d
    return out


def _with_advice(d: Diagnosis, a: Advice) -> Diagnosis:
    return replace(d, advice=d.advice + (a,))


def _fallback_trigger(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, _Member],
) -> Trigger:
    """The trigger when no member, wire event or broker log said it: what the broker's
    records and the generations' shapes allow to infer, else unknown."""
    if rec.cause:
        # The observer's attribution compares the broker's descriptions or stored
        # records: who came and went is a fact there, why the group rebalanced is not.
        return Trigger(
            rec.cause,
            "",
            "",
            INFERRED,
            f"broker's records/snapshots: {rec.evidence or 'the observer attribution'}",
            rec.start_ms,
        )
    elif prev is None and rec.generation == 1 and not rec.inferred:
        # The broker numbers a classic group's rebalances from 1: its first
        # generation is made when the first members join the new group.
        return Trigger(
            Cause.MEMBER_JOINED.value,
            ", ".join(sorted(rec.members)),
            "",
            INFERRED,
            "generation 1 (the broker's own id): a new group's first members joined",
            rec.start_ms,
        )
    elif prev is None and not (events and events[0].ts_ms < rec.start_ms):
        return Trigger(
            Cause.UNKNOWN.value,
            "",
            "",
            INFERRED,
            "already made when the sources begin: what started it was not seen",
        )
    elif prev is not None and _same_stored_members(events, prev.generation, rec.generation):
        # Nobody came or went between two generations the broker numbered: one of the
        # same members sent a new JoinGroup (a leader's metadata or subscription
        # change, a rejoin after an error); the records do not say which or why.
        return Trigger(
            Cause.REJOIN_REQUESTED.value,
            "",
            "",
            INFERRED,
            f"generations {prev.generation} and {rec.generation} have the same members: "
            "one of them rejoined (the broker's records do not say which, or why)",
            rec.start_ms,
        )
    elif late := _assigned_late(events, prev, members):
        return Trigger(
            Cause.MEMBER_JOINED.value,
            ", ".join(late),
            "first_join",
            INFERRED,
            f"{', '.join(late)} joined generation {prev.generation if prev else '?'} "
            "empty-handed (a classic member of a consumer-protocol group is answered "
            "before the broker has a target for it); the broker's next target assignment "
            "is the one that gave them partitions",
            rec.start_ms,
        )
    else:
        return Trigger(Cause.UNKNOWN.value, "", "", INFERRED, "no source said why")


def _diagnose_one(
    state: GroupState,
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, _Member],
    ctx: Context,
    now_ms: int,
    found_restarts: tuple[Restart, ...],
) -> Diagnosis:
    since = (prev.stable_ms if prev.stable_ms is not None else prev.start_ms) if prev else -1
    until = rec.sync_ms if rec.sync_ms is not None else (rec.stable_ms or rec.start_ms)
    cands = _candidates(events, since, until, prev, rec, state, members, ctx)
    chosen, also = _pick(cands, rec.start_ms)
    notes: list[str] = []
    if chosen is None:
        chosen = _fallback_trigger(events, rec, prev, members)
    if chosen.confidence == INFERRED:
        notes.append("kgctl infers this trigger: no member, wire event or broker log said it")
    start = rec.start_ms
    if (
        chosen.confidence == EXACT
        and chosen.at_ms > since
        and not any(k in members for k in rec.members)
    ):
        # Untraced members (or none: everyone left): the stored record says when the
        # generation was written; the broker's log, or the words of a member that then
        # left, say when the rebalance began.
        start = min(start, chosen.at_ms)
    traced = any(k in members for k in rec.members)
    mine = [b for b in ctx.broker_reasons if b.group == state.group]
    waits = _waits(events, replace(rec, start_ms=start), prev, state, members, chosen, mine)
    if state.group_type == "consumer" and not waits:
        # KIP-848: no barrier; the epochs are the broker's and each member reconciles alone.
        notes.append(
            f"group epoch {rec.generation} (consumer protocol): no join barrier, each member "
            "was reconciled on its own heartbeats; the broker's descriptions do not say how "
            "long each took to give up or take its partitions"
        )
    elif rec.members and not waits and (rec.inferred or not any(k in members for k in rec.members)):
        notes.append(
            "no member of this generation was traced: what the rebalance waited for is "
            "not known (kgctl join members, --trace-topic or the proxy's wire events show it)"
        )
    protocol_change = _protocol_change(events, rec, prev)
    if protocol_change:
        notes.append(protocol_change)
    moved = rebalance_moves(state, rec, now_ms)
    revoked = _revoked(events, rec, prev)
    advice: list[Advice] = []
    for w in waits:
        if w.why == WAIT_DEAD:
            advice += _advise_dead(w, members, ctx, events)
        elif w.why == WAIT_PROCESSING:
            advice += _advise_batch(events, w, rec.start_ms)
    if chosen.reason == POLL_BREACH or chosen.reason == (RejoinReason.POLL_INTERVAL_EXCEEDED.value):
        if not any(a.pattern == "max-poll-interval" for a in advice):
            advice += _advise_poll(events, chosen.who, members, chosen.at_ms)
    advice += _advise_restart(chosen, found_restarts, since, until, ctx)
    advice += _advise_replaced(events, chosen, prev, until)
    advice += _advise_cooperative(events, since, state, rec, prev, members, ctx, revoked, now_ms)
    costs = _costs(events, state, rec, now_ms)
    advice += _advise_kip848(state, waits, costs, rec, prev, moved, revoked)
    advice = list({(a.pattern, a.setting, a.value): a for a in advice}.values())
    return Diagnosis(
        generation=rec.generation,
        inferred=rec.inferred,
        start_ms=start,
        sync_ms=rec.sync_ms,
        stable_ms=rec.stable_ms,
        trigger=chosen,
        also=also,
        waits=tuple(waits),
        costs=costs,
        moved=len(moved),
        revoked=revoked,
        advice=tuple(advice),
        notes=tuple(notes),
        epoch=state.group_type == "consumer",
        protocol_change=protocol_change,
        # Its start is known when a member (or the broker's log) said it, exactly.
        timed=traced
        or (chosen.confidence == EXACT and 0 < chosen.at_ms <= start)
        or start < rec.start_ms
        or not rec.stable_ms
        or not _stored_only(events, rec),
    )


def _same_stored_members(events: EventIndex, before: int, after: int) -> bool:
    """Both generations' stored records (__consumer_offsets) list the same member ids."""

    def ids(generation: int) -> set[str] | None:
        for e in events.of("GenerationChanged"):
            if e.generation == generation and e.data.get("stored_in"):
                return {str(m.get("member_id")) for m in e.data.get("members") or []}
        return None

    old, new = ids(before), ids(after)
    return bool(old) and old == new


def _stored_only(events: EventIndex, rec: GenerationRecord) -> bool:
    """The generation is known only from the broker's stored record (read after the fact):
    its start is when the record was written."""
    return any(
        e.data.get("stored_in")
        and e.generation == rec.generation
        and e.data.get("rebalance_started_ms") is None
        for e in events.of("GenerationChanged")
    )


def _revoked(events: EventIndex, rec: GenerationRecord, prev: GenerationRecord | None) -> int:
    """Partitions revoked in this rebalance from members that are in the new generation."""
    if prev is None:
        return 0
    since = prev.stable_ms if prev.stable_ms is not None else prev.start_ms
    until = rec.stable_ms if rec.stable_ms is not None else (rec.sync_ms or rec.start_ms)
    n = 0
    for e in events.of("PartitionsRevoked", since=since, until=until):
        if e.member in rec.members:
            parts = e.data.get("partitions") or {}
            n += sum(len(v) for v in parts.values() if isinstance(v, list))
    return n
