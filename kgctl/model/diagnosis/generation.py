"""`diagnose`: every generation of a folded group, each from its trigger, critical path,
cost and advice, and the rejoin loops across them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kgctl.model.diagnosis.advice import (
    advise_batch_size,
    advise_dead_member,
    advise_poll_interval,
    advise_rejoin_loop,
    advise_replaced_static_member,
    advise_static_membership,
)
from kgctl.model.diagnosis.cost import member_costs
from kgctl.model.diagnosis.epochs import read_epochs
from kgctl.model.diagnosis.members import MemberConfig, member_configs
from kgctl.model.diagnosis.mixed import assigned_late, describe_protocol_change, downgrade_leave
from kgctl.model.diagnosis.protocol_advice import advise_consumer_protocol, advise_cooperative
from kgctl.model.diagnosis.restarts import Restart, indexed_restarts
from kgctl.model.diagnosis.revocations import partitions_moved, partitions_revoked, revoked_note
from kgctl.model.diagnosis.rounds import as_second_round
from kgctl.model.diagnosis.trigger import (
    UNSAID_LEAVE,
    chaos_silenced_by,
    choose_trigger,
    read_growth,
    read_subscription,
    trigger_candidates,
)
from kgctl.model.diagnosis.types import (
    CONSUMER_SESSION_KEY,
    EXACT,
    INFERRED,
    POLL_BREACH,
    PREPARING,
    START_SLACK_MS,
    WAIT_DEAD,
    WAIT_PROCESSING,
    Advice,
    BrokerReason,
    Context,
    Diagnosis,
    Trigger,
)
from kgctl.model.diagnosis.waits import critical_path
from kgctl.model.event_index import EventIndex, index
from kgctl.model.event_types import is_type
from kgctl.model.events import Event
from kgctl.model.reasons import Cause, RejoinReason, named_cause
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
)
from kgctl.model.timeline import rebalance_moves


def diagnose(
    state: GroupState,
    events: Sequence[Event],
    now_ms: int,
    ctx: Context | None = None,
) -> tuple[Diagnosis, ...]:
    """A diagnosis of every generation of `state` (folded from `events`, in time order)."""
    ctx = ctx or Context()
    events = index(events)
    members = member_configs(events)
    # The same for every generation: read once (at 1,000 members each is a pass over
    # every event kept).
    back = indexed_restarts(state, events, members)
    out: list[Diagnosis] = []
    gens = state.generations
    for i, rec in enumerate(gens):
        prev = gens[i - 1] if i > 0 else None
        d = _diagnose_one(state, events, rec, prev, members, ctx, now_ms, back)
        d = read_epochs(d, events, rec, prev)
        out.append(as_second_round(d, out[-1] if out else None, events, state, rec, prev))
    loops = advise_rejoin_loop(out)
    return tuple(
        d if d.generation not in loops else _with_more_advice(d, loops[d.generation]) for d in out
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


def _with_more_advice(d: Diagnosis, a: Advice) -> Diagnosis:
    return replace(d, advice=d.advice + (a,))


def _fallback_trigger(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, MemberConfig],
) -> Trigger:
    """The trigger when no member, wire event or broker log said it: what the broker's
    records and the generations' shapes allow to infer, else unknown."""
    if rec.cause:
        # The observer's attribution compares the broker's descriptions or stored
        # records: who came and went is a fact there, why the group rebalanced is not.
        cause, other = named_cause(rec.cause)
        return Trigger(
            cause=cause,
            other_cause=other,
            who="",
            reason="",
            confidence=INFERRED,
            evidence=f"broker's records/snapshots: {rec.evidence or 'the observer attribution'}",
            at_ms=rec.start_ms,
        )
    elif prev is None and rec.generation == 1 and not rec.inferred:
        # The broker numbers a classic group's rebalances from 1: its first
        # generation is made when the first members join the new group.
        return Trigger(
            cause=Cause.MEMBER_JOINED,
            who=", ".join(sorted(rec.members)),
            reason="",
            confidence=INFERRED,
            evidence="generation 1 (the broker's own id): a new group's first members joined",
            at_ms=rec.start_ms,
        )
    elif prev is None and not (events and events[0].ts_ms < rec.start_ms):
        return Trigger(
            cause=Cause.UNKNOWN,
            who="",
            reason="",
            confidence=INFERRED,
            evidence="already made when the sources begin: what started it was not seen",
        )
    elif (
        prev is not None
        and _same_stored_members(events, prev.generation, rec.generation)
        and (left := downgrade_leave(events, prev))
    ):
        # The same members rejoined because Kafka rebalances a mixed group it converted
        # back to classic as its last consumer-protocol member left (prev's record).
        return Trigger(
            cause=Cause.MEMBER_LEFT,
            who="",
            reason="",
            confidence=INFERRED,
            evidence=f"generation {prev.generation} took the group back to the classic "
            f"protocol as {left}; the broker rebalances a group it converts back for a member "
            "leaving (Kafka's \"Downgrade group … from consumer to classic for member "
            'leaving"): the same members rejoined for that leave',
            at_ms=rec.start_ms,
        )
    elif prev is not None and _same_stored_members(events, prev.generation, rec.generation):
        # Nobody came or went between two generations the broker numbered: one of the
        # same members sent a new JoinGroup (a leader's metadata or subscription
        # change, a rejoin after an error); the records do not say which or why.
        return Trigger(
            cause=Cause.REJOIN_REQUESTED,
            who="",
            reason="",
            confidence=INFERRED,
            evidence=f"generations {prev.generation} and {rec.generation} have the same members: "
            "one of them rejoined (the broker's records do not say which, or why)",
            at_ms=rec.start_ms,
        )
    elif late := assigned_late(events, prev, members):
        return Trigger(
            cause=Cause.MEMBER_JOINED,
            who=", ".join(late),
            reason="first_join",
            confidence=INFERRED,
            evidence=f"{', '.join(late)} joined generation {prev.generation if prev else '?'} "
            "empty-handed (a classic member of a consumer-protocol group is answered "
            "before the broker has a target for it); the broker's next target assignment "
            "is the one that gave them partitions",
            at_ms=rec.start_ms,
        )
    else:
        return Trigger(
            cause=Cause.UNKNOWN,
            who="",
            reason="",
            confidence=INFERRED,
            evidence="no source said why",
        )


def _cut_off_by_proxy(events: EventIndex, member: str, until: int) -> bool:
    """A member kgctl proxy left unanswered (a fault rule's hang or blackhole) was no
    dead process: a graceful stop or its own session is no advice for it."""
    silenced = chaos_silenced_by(events, member, until)
    return silenced is not None and is_type(silenced, "FaultInjected")


def _poll_advice(
    events: EventIndex, chosen: Trigger, members: Mapping[str, MemberConfig]
) -> list[Advice]:
    """max.poll.interval.ms advice when the trigger is a poll interval that ran out: said
    (a member's or the client's reason), or read from a leave without a reason and a join
    back with a new member id (trigger.py's _read_unsaid_leave: inferred, and so advised)."""
    if chosen.reason in (POLL_BREACH, RejoinReason.POLL_INTERVAL_EXCEEDED.value):
        return advise_poll_interval(events, chosen.who, members, chosen.at_ms)
    if chosen.cause == Cause.TIMED_OUT and chosen.reason == UNSAID_LEAVE:
        return advise_poll_interval(events, chosen.who, members, chosen.at_ms, inferred=True)
    return []


def _diagnose_one(
    state: GroupState,
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, MemberConfig],
    ctx: Context,
    now_ms: int,
    found_restarts: tuple[Restart, ...],
) -> Diagnosis:
    since = (prev.stable_ms if prev.stable_ms is not None else prev.start_ms) if prev else -1
    until = rec.sync_ms if rec.sync_ms is not None else (rec.stable_ms or rec.start_ms)
    cands = trigger_candidates(events, since, until, prev, rec, state, members, ctx)
    chosen, also = choose_trigger(cands, rec.start_ms)
    notes: list[str] = []
    if chosen is None:
        chosen = _fallback_trigger(events, rec, prev, members)
    mine = [b for b in ctx.broker_reasons if b.group in (state.group, "")]
    chosen = read_subscription(chosen, events, state, rec, prev)
    chosen = read_growth(chosen, state, rec, prev, mine)
    if chosen.confidence == INFERRED:
        # (a leave the broker logged without the client's reason: the line says what
        # happened; that it says nothing would be false)
        logged = chosen.evidence.startswith("broker log")
        notes.append(
            "kgctl infers this trigger: the broker log says what happened, not why"
            if logged
            else "kgctl infers this trigger: no member, wire event or broker log said it"
        )
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
    mine = [b for b in mine if b.group == state.group]
    prepared = prepared_at(mine, rec, since)
    if prepared is not None and prepared < start:
        # The broker's own line says when it began this generation's rebalance, whatever
        # the reason is read as; the wire's first sign (a survivor told at its heartbeat)
        # and the stored record come later.
        start = prepared
    timed_rec = replace(rec, start_ms=start)
    if (
        rec.sync_ms is None
        and chosen.reason == "session timeout"
        and _epochs(state, events, rec)
        and (
            any(e.source == "wire" for e in events.by(chosen.who, until=start))
            or (chosen.who not in members and chosen.evidence.startswith("broker log"))
        )
    ):
        # A consumer group's epoch has no join phase: what it waited for is the broker
        # noticing the silent member (the detect wait), from the epoch's start. (Only for
        # a member the proxy traced, or one the broker's log says it removed: a kgctl
        # member's heartbeat held by a chaos fault would get the dead member's advice,
        # which is wrong for it.)
        timed_rec = replace(timed_rec, sync_ms=start)
    consumer_session = (
        ctx.bounds.configs.get(CONSUMER_SESSION_KEY)
        if ctx.bounds is not None and state.group_type == "consumer"
        else None
    )
    waits = critical_path(events, timed_rec, prev, state, members, chosen, mine, consumer_session)
    if _epochs(state, events, rec) and state.group_type == "consumer" and not waits:
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
    protocol_change = describe_protocol_change(events, rec, prev)
    if protocol_change:
        notes.append(protocol_change)
    # Its start is known when a member (or the broker's log) said it, exactly.
    timed = (
        traced
        or (chosen.confidence == EXACT and 0 < chosen.at_ms <= start)
        or start < rec.start_ms
        or not rec.stable_ms
        or not _known_only_from_stored_record(events, rec)
    )
    moved = rebalance_moves(state, rec, now_ms)
    took = partitions_revoked(events, state, rec, prev, now_ms)
    revoked = took.count
    said = revoked_note(took, {k: m.name for k, m in state.members.items()})
    if said:
        notes.append(said)
    advice: list[Advice] = []
    for w in waits:
        if w.why == WAIT_DEAD and not _cut_off_by_proxy(events, w.member, rec.start_ms):
            advice += advise_dead_member(w, members, ctx, events)
        elif w.why == WAIT_PROCESSING:
            advice += advise_batch_size(events, w, rec.start_ms)
    if not any(a.pattern == "max-poll-interval" for a in advice):
        advice += _poll_advice(events, chosen, members)
    advice += advise_static_membership(chosen, found_restarts, since, until, ctx)
    advice += advise_replaced_static_member(events, chosen, prev, until)
    advice += advise_cooperative(
        events, since, state, rec, prev, members, ctx, revoked or 0, now_ms
    )
    costs = member_costs(events, state, rec, now_ms, eager=took.eager)
    advice += advise_consumer_protocol(state, waits, costs, rec, prev, moved, revoked or 0)
    advice = list({(a.pattern, a.setting, a.value): a for a in advice}.values())
    return Diagnosis(
        generation=rec.generation,
        inferred=rec.inferred,
        start_ms=start,
        sync_ms=rec.sync_ms,
        stable_ms=rec.stable_ms,
        trigger=chosen,
        also=also,
        critical_path=tuple(waits),
        costs=costs,
        partitions_moved=partitions_moved(events, state, rec, moved, now_ms),
        partitions_revoked=revoked,
        revoked_at_least=took.at_least and revoked is not None,
        advice=tuple(advice),
        notes=tuple(notes),
        group_epoch=_epochs(state, events, rec),
        protocol_change=protocol_change,
        timed=timed,
        # Dated by the polls alone (no step, broker line or member's words moved it).
        start_bound=timed
        and not traced
        and not rec.start_exact
        and start == rec.start_ms
        and not (chosen.confidence == EXACT and 0 < chosen.at_ms <= start),
    )


def prepared_at(lines: Sequence[BrokerReason], rec: GenerationRecord, since: int) -> int | None:
    """When the broker's log says it began preparing `rec`'s rebalance: its `Preparing to
    rebalance` line naming the generation before, after the previous one was stable."""
    found = [
        b.ts_ms
        for b in lines
        if b.kind == PREPARING and b.generation == rec.generation - 1 and since < b.ts_ms
        and b.ts_ms <= (rec.stable_ms or rec.start_ms)
    ]  # fmt: skip
    return min(found, default=None)


def _epochs(state: GroupState, events: EventIndex, rec: GenerationRecord) -> bool:
    """A consumer-protocol group's epoch: the broker says the group is one, or its
    members heartbeat on the consumer protocol at this epoch and nobody in the events
    joined by JoinGroup (a trace alone; a mixed group is mixed.py's to tell)."""
    if state.group_type == "consumer":
        # A mixed group's classic generations before its upgrade (the first consumer-
        # protocol heartbeat came after they began) were generations, not epochs.
        first = events.memo("first consumer heartbeat", _first_consumer_heartbeat)
        return first is None or first <= rec.start_ms + START_SLACK_MS
    answered = events.memo("epochs answered", _epochs_answered)
    return rec.generation in answered and not events.of("JoinGroupReceived")


def _first_consumer_heartbeat(events: EventIndex) -> int | None:
    """When the first ConsumerGroupHeartbeat was answered (a member on the consumer
    protocol: before it, the group was classic), if the events show one."""
    answered = events.of("GroupHeartbeatAnswered")
    return min((e.ts_ms for e in answered), default=None)


def _epochs_answered(events: EventIndex) -> frozenset[int]:
    return frozenset(
        int(e.data["member_epoch"])
        for e in events.of("GroupHeartbeatAnswered")
        if isinstance(e.data.get("member_epoch"), int)
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


def _known_only_from_stored_record(events: EventIndex, rec: GenerationRecord) -> bool:
    """The generation is known only from the broker's stored record (read after the fact):
    its start is when the record was written."""
    return any(
        e.data.get("stored_in")
        and e.generation == rec.generation
        and e.data.get("rebalance_started_ms") is None
        for e in events.of("GenerationChanged")
    )
