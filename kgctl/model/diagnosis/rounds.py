"""Cooperative second rounds, for any client: a classic group on a cooperative assignor
hands out, in the round that moves partitions, only what nobody has to give up; the
members that gave partitions up join again at once, and the generation that makes hands
those partitions out. That generation is the second round of the first, started by the
same cause: never a trigger of its own, never a member to fix.

A member's own words say it when it gives them (the Java client's and kgctl's JoinGroup
reason `need to revoke partitions and re-join`: exact); otherwise it is read from the
generations' shape (inferred): the same members, a cooperative assignor, the next
generation begun right after the last one completed, and partitions given up in it by
members that stayed (when the sources show the assignments; when they do not, the
diagnosis says it could not see them)."""

from __future__ import annotations

from dataclasses import replace

from kgctl.model.diagnosis.causes import member_name
from kgctl.model.diagnosis.types import EXACT, INFERRED, Confidence, Diagnosis, Trigger
from kgctl.model.event_index import EventIndex
from kgctl.model.reasons import WIRE_REASONS, Cause, RejoinReason
from kgctl.model.state import GenerationRecord, GroupState

# How soon after a cooperative round completed its second round begins: the members
# that revoked join again from the callback that revoked (Java: onJoinComplete asks for
# the rejoin, the same poll sends it; librdkafka the same), after their revocation
# callbacks (and the commits those make) ran.
SECOND_ROUND_MS = 5_000

_FOLLOWUP_WORDS = (
    WIRE_REASONS[RejoinReason.COOPERATIVE_FOLLOWUP.value],
    RejoinReason.COOPERATIVE_FOLLOWUP.value,
)


def is_cooperative(assignor: str) -> bool:
    """An assignor that gives partitions up in one round and out in the next (Java's and
    librdkafka's `cooperative-sticky`, and assignors named for it)."""
    return "cooperative" in assignor.lower()


def as_second_round(
    d: Diagnosis,
    first: Diagnosis | None,
    events: EventIndex,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
) -> Diagnosis:
    """`d` (of `rec`) read as the second round of `first` (the diagnosis of `prev`) when
    it is one, else `d` as it was."""
    if first is None or prev is None or rec.generation != prev.generation + 1:
        return d
    if state.group_type == "consumer" or not is_cooperative(_assignor(events, prev, state)):
        return d  # KIP-848 has no rounds; an eager round revokes everything in one
    chosen = d.trigger
    if chosen.confidence == EXACT and chosen.cause not in (Cause.REJOIN_REQUESTED, Cause.UNKNOWN):
        return d  # someone's own words name another cause
    if chosen.reason.startswith("kgctl proxy injected"):
        return d
    done = prev.stable_ms or prev.sync_ms or prev.start_ms
    after_ms = rec.start_ms - done
    if after_ms < 0 or not _same_members(events, rec, prev):
        return d
    said = _said_followup(events, prev, rec)
    given_up = _given_up(events, state, prev, rec)
    unheld: set[str] = set()
    if not given_up and first.trigger.round_of is not None:
        # The previous generation was itself a later round: what a member gave up in
        # the rounds before it, and nobody held since, is handed out now (a librdkafka
        # member whose revocation ran only after the next round had begun).
        unheld = _given_up_unheld(state, first.trigger.round_of, prev, rec)
    # Begun at once, as a second round is. A start only bounded (the broker's record
    # dates the end of the join phase, which waits for every member's rejoin: 6 s and
    # more in a loaded CI run) cannot show that; a member's words or the partitions it
    # gave up do without it, since a member that gives partitions up joins again at once.
    soon = after_ms <= SECOND_ROUND_MS
    if not soon and (rec.start_exact or not (said or given_up or unheld)):
        return d
    if said:
        confidence: Confidence = EXACT
        how = f"{', '.join(said)}'s JoinGroup reason {_FOLLOWUP_WORDS[0]!r}"
    elif unheld or given_up:
        confidence = INFERRED
        # By name, as the rest of the text says them (the cluster's records key a
        # member by its member id).
        names = ", ".join(sorted({member_name(state, m) for m in unheld or given_up}))
        how = (
            f"{names} gave up partitions in generation {first.trigger.round_of} or after "
            "that nobody held when this one began, and joined again"
            if unheld
            else f"{names} gave up partitions in generation {prev.generation} and joined again"
        )
    elif _assignments_known(state, prev):
        return d  # nobody gave anything up: no second round was needed
    else:
        # Nothing shows whether anyone gave partitions up (the cluster's records, the
        # broker's log: a rejoin after an error reads the same there): say it may be.
        return _maybe_second_round(d, prev, after_ms, _assignor(events, prev, state))
    when = (
        f"begun {after_ms} ms after it"
        if rec.start_exact
        else f"its join phase over {after_ms} ms after it (when it began, the records do not say)"
    )
    evidence = (
        f"the cooperative second round of generation {prev.generation} "
        f"({first.trigger.cause_name.replace('_', ' ')}): the same members, {when}, "
        f"on the cooperative assignor {_assignor(events, prev, state)!r}; {how}"
    )
    second = Trigger(
        cause=first.trigger.cause,
        other_cause=first.trigger.other_cause,
        who="",
        reason=f"second round of generation {prev.generation}",
        confidence=confidence,
        evidence=evidence,
        at_ms=rec.start_ms,
        round_of=prev.generation,
    )
    # What read the rejoin as a cause of its own (a JoinGroup without a reason, the
    # broker's `Updating metadata for member`) misread it: only other candidates stay.
    also = tuple(
        t for t in (chosen, *d.also) if t.cause not in (Cause.REJOIN_REQUESTED, Cause.UNKNOWN)
    )
    notes = tuple(n for n in d.notes if not n.startswith("kgctl infers this trigger"))
    if confidence == INFERRED:
        notes += (
            "kgctl infers that this generation is a cooperative second round (from the "
            "generations' members, timing and assignor)",
        )
    return replace(d, trigger=second, also=also, notes=notes)


def _maybe_second_round(
    d: Diagnosis, prev: GenerationRecord, after_ms: int, assignor: str
) -> Diagnosis:
    t = d.trigger
    if t.cause not in (Cause.REJOIN_REQUESTED, Cause.UNKNOWN):
        return d
    hedge = (
        f"; on the cooperative assignor {assignor!r} and begun {after_ms} ms after generation "
        f"{prev.generation}, it may be that one's cooperative second round (the sources do "
        "not show whether a member gave partitions up)"
    )
    return replace(d, trigger=replace(t, evidence=t.evidence + hedge))


def _assignor(events: EventIndex, rec: GenerationRecord, state: GroupState) -> str:
    """The assignor the group chose for `rec`: from its JoinGroup answers or its stored
    record, else the group's latest."""
    for e in events.of("JoinGroupReceived", "GenerationChanged"):
        if e.generation == rec.generation or e.data.get("generation") == rec.generation:
            protocol = e.data.get("protocol")
            if protocol:
                return str(protocol)
    return state.protocol


def _same_members(events: EventIndex, rec: GenerationRecord, prev: GenerationRecord) -> bool:
    """Both generations have the same members: by the broker's stored records when it
    stored both (a fact), else by the members the fold knew at each start."""
    stored: dict[int, set[str]] = {}
    for e in events.of("GenerationChanged"):
        if e.data.get("stored_in") and e.generation in (rec.generation, prev.generation):
            stored[e.generation] = {str(m.get("member_id")) for m in e.data.get("members") or []}
    if prev.generation in stored and rec.generation in stored:
        return bool(stored[prev.generation]) and stored[prev.generation] == stored[rec.generation]
    return bool(rec.members) and set(rec.members) == set(prev.members)


def _said_followup(events: EventIndex, prev: GenerationRecord, rec: GenerationRecord) -> list[str]:
    """Members whose own rejoin reason between the two rounds says they rejoin to finish
    a cooperative round."""
    out: list[str] = []
    for e in events.of("RejoinRequested", "JoinGroupSent", since=prev.start_ms, until=rec.start_ms):
        words = str(e.data.get("wire_reason") or e.data.get("reason") or "").lower()
        who = e.member or e.client_id
        if any(w in words for w in _FOLLOWUP_WORDS) and who not in out:
            out.append(who)
    return out


def _given_up(
    events: EventIndex, state: GroupState, prev: GenerationRecord, rec: GenerationRecord
) -> set[str]:
    """Members of both generations that gave partitions up during the first round: their
    own revocations, or an ownership of theirs that ended then (assignments traced).
    A cooperative member gives up what the round's assignment drops, so from when the
    round's JoinGroups were answered: a member that gave partitions up in the round
    before rejoins from its SyncGroup answer, and the wire dates that answer and the
    rejoin that began this round in one millisecond at times (a second round then read
    the topic's growth 3 s later as its own third one)."""
    stayed = set(prev.members) & set(rec.members)
    since = prev.sync_ms if prev.sync_ms is not None else prev.start_ms
    out = {
        e.member
        for e in events.of("PartitionsRevoked", since=since - 1, until=rec.start_ms)
        if e.member in stayed and e.data.get("partitions")
    }
    for spans in state.ownership.values():
        for sp in spans:
            if sp.member in stayed and sp.end_ms is not None and since <= sp.end_ms <= rec.start_ms:
                out.add(sp.member)
    return out


def _given_up_unheld(
    state: GroupState, first: int, prev: GenerationRecord, rec: GenerationRecord
) -> set[str]:
    """Members of both generations that gave partitions up from generation `first`'s
    assignment on, which nobody held when `rec` began."""
    began = next((g for g in state.generations if g.generation == first), None)
    if began is None:
        return set()
    stayed = set(prev.members) & set(rec.members)
    since = began.sync_ms if began.sync_ms is not None else began.start_ms
    out: set[str] = set()
    for spans in state.ownership.values():
        # (`rec`'s own assignment can be dated with its start: the records date both by
        # the end of its join phase)
        held = any(
            sp.start_ms < rec.start_ms and (sp.end_ms is None or sp.end_ms > rec.start_ms)
            for sp in spans
        )
        if held:
            continue
        out |= {
            sp.member
            for sp in spans
            if sp.member in stayed and sp.end_ms is not None and since <= sp.end_ms <= rec.start_ms
        }
    return out


def _assignments_known(state: GroupState, prev: GenerationRecord) -> bool:
    """Whether the sources showed the members' assignments of `prev` (a traced SyncGroup,
    a member's own report): then a round that took nothing from anyone is known."""
    return any(
        sp.generation == prev.generation for spans in state.ownership.values() for sp in spans
    )
