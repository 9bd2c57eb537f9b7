"""What started a rebalance: every candidate in the window before it (a member's or the
wire's own words, the broker's log, a silent departure, a static member replaced, a
member that reports no protocol step coming or going) and the one chosen, with its
confidence and evidence."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kgctl.model.diagnosis.causes import (
    broker_cause,
    client_cause,
    member_id_in_broker_reason,
    member_name,
    wire_cause,
)
from kgctl.model.diagnosis.epochs import wire_group_join
from kgctl.model.diagnosis.faults import injected_faults, is_injected
from kgctl.model.diagnosis.members import MemberConfig
from kgctl.model.diagnosis.rejoins import answered_unchanged
from kgctl.model.diagnosis.types import (
    EXACT,
    FAILED,
    FENCED,
    INFERRED,
    LEFT,
    PARTITION_ADDED,
    POLL_BREACH,
    PREPARING,
    ROUTINE_TYPES,
    START_SLACK_MS,
    BrokerReason,
    Confidence,
    Context,
    Trigger,
)
from kgctl.model.event_index import EventIndex
from kgctl.model.event_types import EventType, is_type
from kgctl.model.events import Event
from kgctl.model.kafka_errors import FENCES_MEMBER
from kgctl.model.reasons import Cause, RejoinReason, cause_of_reason, named_cause
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
)
from kgctl.model.timeline import utc_clock as _clock


def _said_rejoin(e: Event, who: str, src: str) -> list[Trigger]:
    """A member's own rejoin reason (RejoinRequested; a wire JoinGroupSent)."""
    reason = str(e.data.get("reason", "") or "")
    named = cause_of_reason(reason)
    if named is None:
        return []
    cause, other = named_cause(named)
    if reason == RejoinReason.FIRST_JOIN.value and is_type(e, "RejoinRequested"):
        evidence = f"{who}'s {src}: first join"
    else:
        evidence = f"{who}'s {src}: {e.type} reason {reason}"
        extra = _what_changed(e)
        if extra:
            evidence += f" ({extra})"
    return [
        Trigger(
            cause=cause,
            other_cause=other,
            who=who,
            reason=reason,
            confidence=EXACT,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


def _wire_join(e: Event, who: str, src: str) -> list[Trigger]:
    """kgctl proxy: a JoinGroup as the client sent it (its KIP-800 reason), read as a
    member step by kgctl/model/wire.py (`member_steps`)."""
    reason = str(e.data.get("wire_reason") or e.data.get("reason") or "")
    who = e.member or e.client_id or who
    if reason:
        cause = wire_cause(reason)
        if cause is None:
            return []
        evidence = f"wire: {who}'s JoinGroup reason {reason!r}"
        return [
            Trigger(
                cause=cause,
                who=who,
                reason=reason,
                confidence=EXACT,
                evidence=evidence,
                at_ms=e.ts_ms,
            )
        ]
    if e.data.get("member_id"):
        return []
    evidence = f"wire: {who}'s JoinGroup without a member id (a new member)"
    return [
        Trigger(
            cause=Cause.MEMBER_JOINED,
            who=who,
            reason="",
            confidence=EXACT,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


def _said_poll(e: Event, who: str, src: str) -> list[Trigger]:
    ms = e.data.get("max_poll_interval_ms")
    evidence = f"{who}'s {src}: no poll within max.poll.interval.ms={ms}"
    return [
        Trigger(
            cause=Cause.TIMED_OUT,
            who=who,
            reason=POLL_BREACH,
            confidence=EXACT,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


def _said_leave(e: Event, who: str, src: str) -> list[Trigger]:
    reason = str(e.data.get("reason", "") or "")
    who = who or e.client_id
    if e.source == "wire":
        # The proxy's LeaveGroup as the client sent it: librdkafka's (v0-1) carry no
        # reason, and that it left does not say why (closed, or its poll timed out).
        said = str(e.data.get("wire_reason", "" if reason == WIRE_NO_REASON else reason))
        if not said:
            return [
                Trigger(
                    cause=Cause.MEMBER_LEFT,
                    who=who,
                    reason=UNSAID_LEAVE,
                    confidence=EXACT,
                    evidence=f"wire: {who}'s LeaveGroup without a reason (member id "
                    f"{e.member_id or '?'})",
                    at_ms=e.ts_ms,
                )
            ]
        reason = said
    cause = client_cause(reason)
    evidence = f"{who}'s {src}: LeaveGroup reason {reason!r}"
    return [
        Trigger(
            cause=cause if cause is not None and cause is not Cause.UNKNOWN else Cause.MEMBER_LEFT,
            who=who,
            reason=reason,
            confidence=EXACT,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


def _said_failed(e: Event, who: str, src: str) -> list[Trigger]:
    error = str(e.data.get("error", "") or "")
    if error == FENCED:
        iid = f" {e.instance_id}" if e.instance_id else ""
        evidence = (
            f"{who}'s {src}: {FENCED}: another process joined with its group.instance.id{iid}"
            " and the broker handed it the identity"
        )
        return [
            Trigger(
                cause=Cause.STATIC_MEMBER_REPLACED,
                who=who,
                reason=error,
                confidence=EXACT,
                evidence=evidence,
                at_ms=e.ts_ms,
            )
        ]
    evidence = f"{who}'s trace: failed with {error}"
    return [
        Trigger(
            cause=Cause.MEMBER_FAILED,
            who=who,
            reason=error,
            confidence=EXACT,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


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
    return [
        Trigger(
            cause=Cause.MEMBER_JOINED,
            who=who,
            reason=reason,
            confidence=EXACT,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


def _seen_left(e: Event, who: str, src: str) -> list[Trigger]:
    epoch = e.data.get("stored_with_epoch")
    evidence = (
        f"snapshots: {who} missing from the broker's description"
        if epoch is None
        else f"the broker's records: {who}'s member record deleted with group epoch {epoch} "
        "(the broker does not say whether it left or its session expired)"
    )
    return [
        Trigger(
            cause=Cause.MEMBER_LEFT,
            who=who,
            reason="",
            confidence=INFERRED,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


def _seen_joined(e: Event, who: str, src: str) -> list[Trigger]:
    epoch = e.data.get("stored_with_epoch")
    evidence = (
        f"snapshots: {who} new in the broker's description"
        if epoch is None
        else f"the broker's records: {who}'s member record written with group epoch {epoch}"
    )
    return [
        Trigger(
            cause=Cause.MEMBER_JOINED,
            who=who,
            reason="",
            confidence=INFERRED,
            evidence=evidence,
            at_ms=e.ts_ms,
        )
    ]


# (event type, the source it must come from, or None: any but chaos) -> its triggers.
_TRIGGER_READERS: dict[tuple[EventType, str | None], Callable[[Event, str, str], list[Trigger]]] = {
    ("RejoinRequested", None): _said_rejoin,
    ("JoinGroupSent", "wire"): _wire_join,
    ("GroupHeartbeatAnswered", "wire"): wire_group_join,
    ("PollIntervalExceeded", None): _said_poll,
    ("LeaveGroupSent", None): _said_leave,
    ("MemberFailed", None): _said_failed,
    ("MemberFenced", "member"): _said_fenced,
    ("MemberLeftGroup", "observer"): _seen_left,
    ("MemberJoinedGroup", "observer"): _seen_joined,
}


_TRIGGER_TYPES: tuple[EventType, ...] = tuple(sorted({t for t, _ in _TRIGGER_READERS}))
# The same, looked up by an event's own type (any string: a newer recording's too).
_TRIGGER_READERS_BY_NAME: dict[
    tuple[str, str | None], Callable[[Event, str, str], list[Trigger]]
] = {(str(t), source): reader for (t, source), reader in _TRIGGER_READERS.items()}


def _triggers_said_by(e: Event) -> list[Trigger]:
    reader = _TRIGGER_READERS_BY_NAME.get((e.type, e.source)) or _TRIGGER_READERS_BY_NAME.get(
        (e.type, None)
    )
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
    itself. A leader does that when it sees new partitions or a subscription change.
    Not one the broker answered with the generation the group was in: a member of a
    stable group that rejoins with its metadata unchanged is handed its generation again,
    without a rebalance (kafka-python does so right after a join it finished outside
    poll())."""
    out: list[Trigger] = []
    told: set[str] = set()
    for e in events.of(
        "HeartbeatFailed", "JoinGroupReceived", "JoinGroupSent", since=since, until=until
    ):
        if e.source != "wire":
            continue
        who = e.member or e.client_id
        if is_type(e, "HeartbeatFailed", "JoinGroupReceived") and e.data.get("error") not in (
            None, "", "NONE",
        ):  # fmt: skip
            told.add(who)
        if (
            is_type(e, "JoinGroupSent")
            and e.data.get("member_id")
            and not (e.data.get("wire_reason") or e.data.get("reason"))
            and who not in told
            and not answered_unchanged(events, e, prev.generation if prev else None)
            and not _refused(events, e)
        ):
            leader = prev is not None and prev.leader in (who, e.member_id)
            role = "the leader" if leader else "a member"
            reason = f"{role} rejoined on its own (the client gave no reason)"
            hint = ": a leader does so when it sees new partitions or a subscription change"
            evidence = f"wire: {who}'s JoinGroup with its member id, not told of a rebalance"
            out.append(
                Trigger(
                    cause=Cause.REJOIN_REQUESTED,
                    who=who,
                    reason=reason,
                    confidence=EXACT,
                    evidence=evidence + (hint if leader else ""),
                    at_ms=e.ts_ms,
                )
            )
            told.add(who)
    return out


# A member that reports any of these traces its protocol steps: its own words say why.
_STEPS: frozenset[EventType] = frozenset(
    {"RejoinRequested", "JoinGroupSent", "LeaveGroupSent", "GroupHeartbeatAnswered"}
)


# How long after its close's revocation a member's stop may be reported and still be
# dated from that revocation (a Java close: revoke, LeaveGroup, then shutdown_complete).
CLOSE_REPORT_MS = 3_000


def _stepless_comings_and_goings(events: EventIndex, since: int, until: int) -> list[Trigger]:
    """Members that report their start, stop and partitions but no protocol step (kgctl
    chaos's Java members: VerifiableConsumer prints no requests): their start is a join
    and their clean stop a leave, inferred from the timing since they do not say so."""
    stepless = events.memo("stepless", _stepless_members)
    out: list[Trigger] = []
    if not stepless:
        return out
    revoked_at: dict[str, int] = {}
    # Only these three types count below; the rest of the events never did.
    for e in events.of("PartitionsRevoked", "MemberStopped", "MemberStarted"):
        if e.member in stepless and is_type(e, "PartitionsRevoked"):
            revoked_at[e.member] = e.ts_ms
        if e.member in stepless and is_type(e, "MemberStopped"):
            # Its close revoked, then left; the stop is reported once the close is done.
            at = revoked_at.get(e.member, e.ts_ms)
            e = replace(e, ts_ms=at if e.ts_ms - at <= CLOSE_REPORT_MS else e.ts_ms)
        if e.member not in stepless or not since < e.ts_ms <= until:
            continue
        if is_type(e, "MemberStarted"):
            evidence = f"{e.member} started then; it reports its partitions, not its requests"
            out.append(
                Trigger(
                    cause=Cause.MEMBER_JOINED,
                    who=e.member,
                    reason="",
                    confidence=INFERRED,
                    evidence=evidence,
                    at_ms=e.ts_ms,
                )
            )
        elif is_type(e, "MemberStopped"):
            reason = str(e.data.get("reason", "") or "")
            evidence = f"{e.member}'s own report: stopped ({reason}), closing its consumer"
            out.append(
                Trigger(
                    cause=Cause.MEMBER_LEFT,
                    who=e.member,
                    reason=reason,
                    confidence=INFERRED,
                    evidence=evidence,
                    at_ms=e.ts_ms,
                )
            )
    return out


def _stepless_members(events: EventIndex) -> frozenset[str]:
    """Members that report their start but no protocol step."""
    started = {e.member for e in events.of("MemberStarted") if e.member}
    return frozenset(started - {e.member for e in events.of(*_STEPS)})


def instance_id_of(e: Event) -> str:
    return str(e.instance_id or e.data.get("instance_id") or "")


def member_id_of(e: Event) -> str:
    """The member id an event is about; a JoinGroupSent's is the one it was sent with
    (its data's: "" for a new member), since a step read off the wire carries the
    answer's member id in its envelope."""
    if is_type(e, "JoinGroupSent") and "member_id" in e.data:
        return str(e.data["member_id"] or "")
    return str(e.member_id or e.data.get("member_id") or "")


def static_replacements(
    events: EventIndex, since: int, until: int, prev: GenerationRecord | None
) -> tuple[list[Trigger], set[str]]:
    """A JoinGroup without a member id under a group.instance.id that a member of the
    last generation held (a member's own JoinGroupSent, or one the proxy saw): the broker
    replaces the static member, and fences the old member id (FENCED_INSTANCE_ID). The
    triggers, and the members replaced."""
    replaced: set[str] = set()
    if prev is None:
        return [], replaced
    holders = InstanceHolders()
    out: list[Trigger] = []
    for e in events.memo("instanced", _events_with_instance_id):
        iid = instance_id_of(e)
        if e.ts_ms > until:
            break
        who = e.member or e.client_id
        member_id = member_id_of(e)
        joining = is_type(e, "JoinGroupSent") and e.source in ("member", "wire") and not member_id
        held = holders.before_join(iid, e) if joining else None
        if joining and since < e.ts_ms and held is not None and held[0] in prev.members:
            old, old_id = held
            src = "wire" if e.source == "wire" else "trace"
            by = f"{old} (member id {old_id})" if old != who else f"its previous process ({old_id})"
            replaced.add(old)
            out.append(
                Trigger(
                    cause=Cause.STATIC_MEMBER_REPLACED,
                    who=who,
                    reason="",
                    confidence=EXACT,
                    evidence=f"{who}'s {src}: JoinGroup with group.instance.id {iid} and no "
                    f"member id while {by} held it: the broker replaced it",
                    at_ms=e.ts_ms,
                )
            )
        elif member_id and e.source in ("member", "wire", "observer"):
            holders.hold(iid, e.member or who or member_id, member_id)
    return out, replaced


@dataclass
class InstanceHolders:
    """Who held each group.instance.id (member, member id) as events are read in time
    order, and who held it before. A join's own answer can come first: the proxy dates a
    JoinGroup by its answer less its round trip in whole milliseconds, so a join
    answered within a millisecond sorts after its answer (the trace's JoinGroupTraced,
    the step JoinGroupReceived), which already names the new member id. Read as the
    holder, the newcomer replaced itself, and the process it fenced was not named
    (the truth suite's static conflict, its wire view "fence unknown" in some runs)."""

    now: dict[str, tuple[str, str]] = field(default_factory=dict)
    before: dict[str, tuple[str, str]] = field(default_factory=dict)

    def hold(self, iid: str, member: str, member_id: str) -> None:
        held = self.now.get(iid)
        if held is not None and held[1] != member_id:
            self.before[iid] = held
        self.now[iid] = (member, member_id)

    def before_join(self, iid: str, join: Event) -> tuple[str, str] | None:
        """Who held `iid` when `join` (a JoinGroupSent without a member id) was sent."""
        held = self.now.get(iid)
        if held is not None and join.member_id and held[1] == join.member_id:
            return self.before.get(iid)  # its own answer, read first
        return held


def _events_with_instance_id(events: EventIndex) -> list[Event]:
    """The events that name a group.instance.id, in order (none in a group of dynamic
    members). `instance_id_of` is true of the same events: written out here, since a
    call per event over a live view's 200,000 cost a diagnosis a tenth of a second."""
    return [e for e in events if e.instance_id or e.data.get("instance_id")]


def chaos_silenced_by(events: EventIndex, member: str, until: int) -> Event | None:
    """kgctl's own word that it killed, froze or cut off `member` before `until`: kgctl
    chaos's ActionPerformed (a fault naming it `cut_off` holds or drops what it sends) or
    the MemberFailed it wrote when the process ended without a word; kgctl proxy's
    FaultInjected that never answered one of its requests (`hang`, `blackhole`: every
    later answer on that connection waits behind it, its heartbeats' too)."""
    found = None
    for e in events.of("FaultInjected", until=until):
        silencing = e.data.get("effect") in _SILENCING_FAULTS
        if e.source == "wire" and silencing and (e.member or e.client_id) == member:
            found = e
    if found is not None:
        return found
    for e in events.of("ActionPerformed", "MemberFailed", until=until):
        if e.source != "chaos":
            continue
        acted = is_type(e, "ActionPerformed") and e.data.get("action") in _SILENCING
        details = e.data.get("details")
        cut_off = isinstance(details, dict) and details.get("cut_off") == member
        if (acted and member in (e.data.get("members") or [])) or cut_off:
            found = e
        elif (
            is_type(e, "MemberFailed")
            and e.member == member
            and found is None
            and not e.data.get("stopped_as_asked")  # a stop kgctl asked for: it left
        ):
            found = e
    return found


# Chaos actions after which a member says nothing more: the broker finds out at its
# session timeout.
_SILENCING = ("member-kill", "member-pause")
# kgctl proxy's fault effects that leave a request unanswered for good (docs/proxy.md).
_SILENCING_FAULTS = ("hang", "blackhole")


def chaos_said(e: Event) -> str:
    if is_type(e, "FaultInjected"):
        return (
            f"kgctl proxy at {_clock(e.ts_ms)}: fault rule {e.data.get('text', '?')} left its "
            f"{e.data.get('api', 'request')} unanswered, and every answer after it on that "
            "connection"
        )
    what = str(e.data.get("description") or e.data.get("error") or e.type)
    return f"kgctl chaos at {_clock(e.ts_ms)}: {what}"


def _broker_log_trigger(br: BrokerReason, state: GroupState, events: EventIndex) -> Trigger:
    member_id = member_id_in_broker_reason(br.reason)
    who = member_name(state, member_id, events)
    client = br.reason.partition("client reason: ")[2]
    unsaid = not client or client == "not provided"
    if unsaid:
        # The client gave no reason (kafka-python, librdkafka, older clients): the
        # broker's own words, without the member id they repeat.
        words = br.reason.partition("; client reason")[0].split()
        client = " ".join(w for w in words if w.strip("()") != (member_id or None))
    evidence = f"broker log {_clock(br.ts_ms)}: {br.reason}"
    if br.kind == FAILED or "heartbeat expiration" in br.reason:
        # The broker's words name the member by its id: its name is `who`.
        return Trigger(
            cause=Cause.TIMED_OUT,
            who=who,
            reason="session timeout",
            confidence=EXACT,
            evidence=evidence if br.kind == FAILED else _preparing(br),
            at_ms=br.ts_ms,
        )
    cause = broker_cause(br.reason) if br.kind == PREPARING else Cause.MEMBER_LEFT
    if br.kind == LEFT and not unsaid:
        named = client_cause(client)
        cause = named if named is not None and named is not Cause.UNKNOWN else cause
    if cause is Cause.MEMBER_LEFT and unsaid:
        client = UNSAID_LEAVE  # that it left is exact; why, the evidence tells
    return Trigger(
        cause=cause,
        who=who,
        reason=client or br.reason,
        confidence=EXACT,
        evidence=evidence if br.kind == LEFT else _preparing(br),
        at_ms=br.ts_ms,
    )


def _preparing(br: BrokerReason) -> str:
    return f"broker log {_clock(br.ts_ms)}: Preparing to rebalance (reason: {br.reason})"


# The reason of a leave whose client gave none (librdkafka's LeaveGroup has no field for
# it; the broker logs `client reason: not provided`): its cause is read from the evidence.
UNSAID_LEAVE = "left without a reason"
# How the proxy's trace (kgctl/model/wire.py) words a LeaveGroup without a reason.
WIRE_NO_REASON = "left the group"
# How long after a leave a member that joins again under the same name with a new member
# id is read as one whose poll timed out (librdkafka and Java leave when the application
# passes max.poll.interval.ms, forget their member id, and join at its next poll).
CAME_BACK_MS = 600_000


def _read_unsaid_leave(
    t: Trigger, member_id: str, events: EventIndex, state: GroupState, ctx: Context
) -> Trigger:
    """A leave whose client gave no reason: that the member left is exact, why it left
    is not. One that came back under its name with a new member id most likely passed
    max.poll.interval.ms (the client leaves then and joins at its next poll; a restart
    looks the same); one that did not was closed or unsubscribed."""
    back = _came_back(t.who, member_id, t.at_ms, events, state, ctx)
    if back is None:
        return replace(
            t,
            confidence=INFERRED,
            evidence=f"{t.evidence}: it gave no reason and did not join again (closed or "
            "unsubscribed)",
        )
    restarted = _restarted_at(t.who, t.at_ms, back, events)
    if restarted is not None:
        # Its process ended and a new one started between the leave and the join: a
        # restart, not a poll timeout (a member past max.poll.interval.ms rejoins from
        # the same process).
        return replace(
            t,
            evidence=f"{t.evidence}: its process started again at {_clock(restarted)} and "
            f"joined at {_clock(back)} with a new member id (a restart)",
        )
    return replace(
        t,
        cause=Cause.TIMED_OUT,
        confidence=INFERRED,
        evidence=f"{t.evidence}: it gave no reason and joined again at {_clock(back)} with a "
        "new member id, as a member past max.poll.interval.ms does (it leaves, then joins "
        "at its next poll; a restart looks the same)",
    )


def _restarted_at(who: str, left_ms: int, back_ms: int, events: EventIndex) -> int | None:
    """When `who`'s process started again between its leave and its join back (kgctl's
    own MemberStarted of the member it runs), if it did."""
    for e in events.of("MemberStarted", since=left_ms, until=back_ms):
        if e.source == "member" and e.member == who:
            return e.ts_ms
    return None


def _came_back(
    who: str, member_id: str, left_ms: int, events: EventIndex, state: GroupState, ctx: Context
) -> int | None:
    """When `who` joined again with another member id than `member_id` after leaving at
    `left_ms`: a JoinGroup without a member id (a member's or the wire's), the broker's
    `Adding new member`, the observer seeing it new."""
    until = left_ms + CAME_BACK_MS
    for e in events.of("JoinGroupSent", "MemberJoinedGroup", since=left_ms, until=until):
        joined = (
            e.source in ("member", "wire") and not e.data.get("member_id")
            if is_type(e, "JoinGroupSent")
            else e.source == "observer"
        )
        name = e.member or e.client_id or member_name(state, e.member_id)
        if joined and name == who and e.member_id != member_id:
            return e.ts_ms
    for br in ctx.broker_reasons:
        if br.group != state.group or not left_ms < br.ts_ms <= until:
            continue
        other = member_id_in_broker_reason(br.reason)
        new = "adding new member" in br.reason.lower()
        if new and other and other != member_id and member_name(state, other, events) == who:
            return br.ts_ms
    return None


def read_growth(
    t: Trigger,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    broker: Sequence[BrokerReason] = (),
) -> Trigger:
    """A rejoin that no words explain (the broker's `re-joining` or `Updating metadata`
    without a client reason, a JoinGroup on the wire without one, two generations of the
    same members): that a member rejoined may be exact, why it did is not. While a topic
    of the group grew (more partitions in this generation's assignment than in any
    before it, or the controller's log adding partitions to it since the last
    generation), the partitions changed, which makes the clients rejoin; inferred, as
    librdkafka and older clients do not say so."""
    if prev is None or not _unexplained_rejoin(t):
        return t
    grown = [
        f"{topic} had {a} partitions assigned up to generation {prev.generation} and "
        f"{b} in generation {rec.generation}"
        for topic, (a, b) in sorted(grown_topics(state, rec).items())
    ]
    if not grown:
        grown = _logged_growth(state, rec, prev, t, broker)
    if not grown:
        late = _late_view_of_growth(state, prev, t)
        if late:
            return replace(
                t,
                cause=Cause.PARTITIONS_CHANGED,
                other_cause="",
                confidence=INFERRED,
                evidence=f"{t.evidence}; {', '.join(late)}: likely its own late view of that "
                "growth (librdkafka's members each rejoin when their own metadata refresh, "
                "every topic.metadata.refresh.interval.ms, shows new partitions)",
            )
        if t.confidence != EXACT:
            return t
        return replace(
            t, confidence=INFERRED, evidence=f"{t.evidence}; no source says why it rejoined"
        )
    return replace(
        t,
        cause=Cause.PARTITIONS_CHANGED,
        other_cause="",
        confidence=INFERRED,
        evidence=f"{t.evidence}; {', '.join(grown)}: the topic grew, and a client that sees "
        "new partitions rejoins",
    )


def _unexplained_rejoin(t: Trigger) -> bool:
    """A rejoin no words explain: not an error kgctl proxy injected (the proxy's words say
    why), not a client's own `rejoin requested` (Java's enforceRebalance: it was asked)."""
    return (
        t.cause is Cause.REJOIN_REQUESTED
        and not is_injected(t)
        and client_cause(t.reason) is not Cause.REJOIN_REQUESTED
    )


def read_subscription(
    t: Trigger,
    events: EventIndex,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
) -> Trigger:
    """A rejoin that no words explain (as read_growth), by a member whose subscription in
    the broker's stored records differs between the last generation and this one: it
    changed its subscription, which makes a client rejoin (librdkafka and kafka-python
    say nothing of it). That the subscription changed is a fact of the records; that it
    is why this member rejoined is inferred."""
    if prev is None or not t.who or not _unexplained_rejoin(t):
        return t
    before = _stored_subscriptions(events, state, prev.generation)
    after = _stored_subscriptions(events, state, rec.generation)
    old, new = before.get(t.who), after.get(t.who)
    if old is None or new is None or old == new:
        return t
    words = t.evidence.removesuffix("; no source says why it rejoined")
    return replace(
        t,
        cause=Cause.SUBSCRIPTION_CHANGED,
        other_cause="",
        confidence=INFERRED,
        evidence=f"{words}; the broker's records: its subscription {old} in generation "
        f"{prev.generation}, {new} in generation {rec.generation}",
    )


def _stored_subscriptions(
    events: EventIndex, state: GroupState, generation: int
) -> dict[str, list[str]]:
    """Each member's subscription (by its name) as the broker stored `generation`."""
    out: dict[str, list[str]] = {}
    for e in events.of("GenerationChanged"):
        if not e.data.get("stored_in") or e.data.get("generation", e.generation) != generation:
            continue
        for m in e.data.get("members") or []:
            sub = m.get("subscription")
            if isinstance(sub, list):
                out[member_name(state, str(m.get("member_id", "")))] = sorted(str(x) for x in sub)
    return out


# How long after a growth a member's own rejoin may still be its view of it: librdkafka's
# topic.metadata.refresh.interval.ms (and Java's metadata.max.age.ms) default.
LATE_VIEW_MS = 300_000


def _late_view_of_growth(state: GroupState, prev: GenerationRecord, t: Trigger) -> list[str]:
    """The topics the generation just before grew in, when this unexplained rejoin came
    within a default metadata refresh of it: the leader's rejoin began that generation,
    and a librdkafka member whose own refresh came later rejoins once more, unasked.
    Only the generation just before: a later rejoin has other candidates."""
    if t.at_ms is None or not 0 <= t.at_ms - prev.start_ms <= LATE_VIEW_MS:
        return []
    return [
        f"{topic} grew from {a} to {b} partitions in generation {prev.generation}"
        for topic, (a, b) in sorted(grown_topics(state, prev).items())
    ]


def _logged_growth(
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord,
    t: Trigger,
    broker: Sequence[BrokerReason],
) -> list[str]:
    """The controller's log adding partitions to a topic of the group between the last
    generation and this rebalance."""
    since = prev.stable_ms if prev.stable_ms is not None else prev.start_ms
    until = max(rec.start_ms, t.at_ms) + START_SLACK_MS
    topics = {topic for topic, _ in state.ownership}
    added: dict[str, tuple[int, list[str]]] = {}  # topic -> (first at, partitions)
    for br in broker:
        if br.kind != PARTITION_ADDED or not since < br.ts_ms <= until:
            continue
        topic, _, partition = br.reason.removeprefix("new partition ").rpartition("-")
        if topic in topics:
            first, parts = added.get(topic, (br.ts_ms, []))
            added[topic] = (min(first, br.ts_ms), [*parts, partition])
    return [
        f"the controller's log added partitions {', '.join(ps)} to {topic} at {_clock(at)}"
        for topic, (at, ps) in sorted(added.items())
    ]


def grown_topics(state: GroupState, rec: GenerationRecord) -> dict[str, tuple[int, int]]:
    """Each topic whose highest partition assigned in generation `rec` is above every
    one assigned before it: topic -> (partitions seen before, partitions now)."""
    before: dict[str, int] = {}
    now: dict[str, int] = {}
    for (topic, partition), spans in state.ownership.items():
        for sp in spans:
            if sp.generation < rec.generation:
                before[topic] = max(before.get(topic, -1), partition)
            elif sp.generation == rec.generation:
                now[topic] = max(now.get(topic, -1), partition)
    return {
        topic: (before[topic] + 1, top + 1)
        for topic, top in now.items()
        if topic in before and top > before[topic]
    }


def trigger_candidates(
    events: EventIndex,
    since: int,
    until: int,
    prev: GenerationRecord | None,
    rec: GenerationRecord,
    state: GroupState,
    members: Mapping[str, MemberConfig],
    ctx: Context,
) -> list[Trigger]:
    """Everything in (since, until] that could have started the rebalance, and what the
    group's records stored with its epoch from its start on (see below)."""
    window = list(events.of(*_TRIGGER_TYPES, since=since, until=until))
    # A member record deleted with this epoch in the millisecond the epoch before was
    # reconciled: the leave that reconciled it (nobody left to wait for) began this one.
    window += [
        e
        for e in events.of(*_TRIGGER_TYPES, since=rec.start_ms - 1, until=since)
        if e.data.get("stored_with_epoch") == rec.generation
    ]
    out = [
        _named_as_views_name(t, _view_name(state, e)) if e.source == "observer" else t
        for e in window
        if _is_news_for_rebalance(e, state, prev, rec) and not _joined_before(e, events, prev)
        for t in _triggers_said_by(e)
    ]
    replaced, gone = static_replacements(events, since, until, prev)
    # The new process's first join is the replacement, not a new member.
    out = [
        t
        for t in out
        if t.cause != Cause.MEMBER_JOINED
        or not any(r.who == t.who and abs(r.at_ms - t.at_ms) <= START_SLACK_MS for r in replaced)
    ]
    out += replaced
    out += _wire_rejoins(events, since, until, prev)
    out += injected_faults(events, since, until)
    out += _stepless_comings_and_goings(events, since, until)
    # A replaced member is silent because it was fenced, not because it died.
    out += [
        t
        for t in _silent_departures(events, since, until, prev, rec, state, members)
        if t.who not in gone
    ]
    out += [
        _broker_log_trigger(br, state, events)
        for br in ctx.broker_reasons
        if br.group == state.group and _line_of(br, rec, since, until)
    ]
    out = [
        _read_unsaid_leave(t, _member_id_of(t, events, state, ctx), events, state, ctx)
        if t.reason == UNSAID_LEAVE and t.confidence == EXACT
        else t
        for t in out
    ]
    # A static member replaced in a stable group does not rebalance it (the broker hands
    # the identity over): a replacement long before this rebalance began did not start it.
    return [
        t
        for t in out
        if t.cause != Cause.STATIC_MEMBER_REPLACED or t.at_ms >= rec.start_ms - START_SLACK_MS
    ]


def _line_of(br: BrokerReason, rec: GenerationRecord, since: int, until: int) -> bool:
    """Whether a broker log line is about the rebalance that made `rec`. One that names
    its old generation is about the rebalance from that one: Kafka 4.4.0 wrote a mixed
    group's "Downgrade … for member leaving" in the millisecond the generation before was
    stored, which a window by time alone gives to that generation. One that names none
    (or a generation kgctl numbered itself), by its time."""
    if br.generation >= 0 and not rec.inferred:
        return br.generation == rec.generation - 1 and since <= br.ts_ms <= until
    return since < br.ts_ms <= until


def _member_id_of(t: Trigger, events: EventIndex, state: GroupState, ctx: Context) -> str:
    """The member id `t.who` had when it left (at `t.at_ms`)."""
    for e in events.of("LeaveGroupSent", since=t.at_ms - 1, until=t.at_ms):
        if e.member_id and (e.member or e.client_id) == t.who:
            return e.member_id
    for br in ctx.broker_reasons:
        if br.ts_ms == t.at_ms and br.group == state.group:
            found = member_id_in_broker_reason(br.reason)
            if member_name(state, found, events) == t.who:
                return found
    found_member = state.members.get(t.who)
    return found_member.member_id if found_member is not None else ""


def _named_as_views_name(t: Trigger, name: str) -> Trigger:
    """An observer's trigger with its member named as the views name it."""
    if not name or name == t.who:
        return t
    return replace(
        t, who=name, evidence=t.evidence.replace(t.who, name, 1) if t.who else t.evidence
    )


def _view_name(state: GroupState, e: Event) -> str:
    """The views' name of the member an observer's event is about; one the state does
    not know (a member of the first epoch read, never told as joining) by the client id
    its record gave."""
    if state.find_member(e.member_id) is None and e.client_id:
        return e.client_id
    return member_name(state, e.member_id)


def _is_news_for_rebalance(
    e: Event, state: GroupState, prev: GenerationRecord | None, rec: GenerationRecord
) -> bool:
    """Whether an observer's join or leave is news for this rebalance: a member seen new
    that was already in the last generation (the watch started after it joined), or seen
    gone that was not in it (dropped by an earlier rebalance, seen at the next poll),
    started nothing. One read from the group's records is news for its own epoch only:
    its member record was written or deleted with it (a member of the first epoch read,
    which the story starts from, was never told as joining, so it is in no generation's
    members)."""
    stored = e.data.get("stored_with_epoch")
    if e.source == "observer" and isinstance(stored, int):
        return stored == rec.generation
    if e.source != "observer" or prev is None:
        return True
    found = state.find_member(e.member_id)
    key = found.key if found is not None else e.member_id
    if is_type(e, "MemberJoinedGroup"):
        return key not in prev.members
    if is_type(e, "MemberLeftGroup"):
        return key in prev.members
    return True


def _refused(events: EventIndex, sent: Event) -> bool:
    """A JoinGroup the broker answered with an error (UNKNOWN_MEMBER_ID: the member id of
    a member it had removed): it started nothing; the join after it, if any, did."""
    who = sent.member or sent.client_id
    for later in events.by(who, since=sent.ts_ms - 1):
        if is_type(later, "JoinGroupReceived") and later.ts_ms >= sent.ts_ms:
            return later.data.get("error") not in (None, "", "NONE")
    return False


def _joined_before(e: Event, events: EventIndex, prev: GenerationRecord | None) -> bool:
    """A JoinGroup that the broker answered into `prev` (or earlier): it was that
    rebalance's, not news for the next one. A new member whose first JoinGroup an error
    sent back (kgctl proxy's NOT_COORDINATOR) joins with the next; should the previous
    generation's end be missing from the trace, that retry would fall in the next
    rebalance's window and read as its trigger."""
    if prev is None or not is_type(e, "JoinGroupSent"):
        return False
    who = e.member or e.client_id
    for later in events.by(who, since=e.ts_ms - 1):
        gen = later.data.get("generation")
        if is_type(later, "JoinGroupReceived") and isinstance(gen, int) and gen >= 0:
            # (the first answer with a generation: one sent back with an error, such as
            # MEMBER_ID_REQUIRED, is followed by the join it asked for)
            return later.ts_ms >= e.ts_ms and gen <= prev.generation
    return False


def _what_changed(e: Event) -> str:
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


def last_heard_ms(events: EventIndex, member: str, until: int) -> int | None:
    return events.last_ts_by(member, until)


def _silent_departures(
    events: EventIndex,
    since: int,
    until: int,
    prev: GenerationRecord | None,
    rec: GenerationRecord,
    state: GroupState,
    members: Mapping[str, MemberConfig],
) -> list[Trigger]:
    """Members of the previous generation gone without a word: removed by the coordinator
    when their session timed out (estimated from when they were last heard of)."""
    if prev is None:
        return []
    # A member's own words, or its LeaveGroup on the wire (an app member speaks only
    # there): it went with a word, not at a session timeout.
    said = {
        e.member
        for e in events.excluding(ROUTINE_TYPES, since=since, until=until)
        if e.source == "member" or (e.source == "wire" and is_type(e, "LeaveGroupSent"))
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
        last = last_heard_ms(events, key, until)
        if last is None:
            continue
        session = info.session_ms
        at = last + session if session else (m.left_ms or until)
        what = f"session.timeout.ms={session}" if session else "its session timeout"
        chaos = chaos_silenced_by(events, key, until)
        if fenced is not None:
            sent, answered, error = fenced
            at = min(at, rec.start_ms)
            said_so = (
                f"{key}'s heartbeat sent at {_clock(sent)} was answered {error} only at "
                f"{_clock(answered)} (fenced): the broker had removed it at {what}"
            )
            evidence = f"{chaos_said(chaos)}; {said_so}" if chaos else said_so
            confidence: Confidence = EXACT if chaos else INFERRED
        elif chaos is not None:
            # kgctl chaos says itself that it silenced the member: no guess about why.
            evidence = (
                f"{chaos_said(chaos)}; {key} silent since {_clock(last)} and missing "
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
                cause=Cause.TIMED_OUT,
                who=key,
                reason="session timeout",
                confidence=confidence,
                evidence=evidence,
                at_ms=min(at, until),
            )
        )
    return out


def _fencing_answers(events: EventIndex) -> dict[str, list[Event]]:
    """Each member's HeartbeatFailed with a fencing error, in time order."""
    out: dict[str, list[Event]] = {}
    for e in events.of("HeartbeatFailed"):
        if e.member and e.data.get("error") in FENCES_MEMBER:
            out.setdefault(e.member, []).append(e)
    return out


def _fenced_in_flight(events: EventIndex, member: str, t: int) -> tuple[int, int, str] | None:
    """When `member` sent a heartbeat before `t` that the broker answered after it by
    fencing it (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH): (sent, answered, the error).
    The member's own words: its HeartbeatFailed, with the round trip it measured."""
    mine = events.memo("fencings", _fencing_answers).get(member, [])
    i = bisect_left(mine, t, key=lambda e: e.ts_ms)
    if i == len(mine):
        return None
    e = mine[i]  # the first fencing answer after t: of a heartbeat sent before t?
    rtt = e.data.get("rtt_ms")
    if isinstance(rtt, (int, float)) and e.ts_ms - rtt <= t:
        return int(e.ts_ms - rtt), e.ts_ms, str(e.data["error"])
    return None


def choose_trigger(
    cands: list[Trigger], start_ms: int
) -> tuple[Trigger | None, tuple[Trigger, ...]]:
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
    return chosen, _distinct_from(also, chosen)


def _distinct_from(items: tuple[Trigger, ...], chosen: Trigger) -> tuple[Trigger, ...]:
    seen = {(chosen.cause_name, chosen.who)}
    out = []
    for t in items:
        if (t.cause_name, t.who) in seen:
            continue
        seen.add((t.cause_name, t.who))
        out.append(t)
    return tuple(out)
