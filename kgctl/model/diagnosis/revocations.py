"""What a rebalance took from the members that stayed: the partitions they revoked and
the partitions that changed hands, for every client, not only those that report their
callbacks.

A kgctl member says what it revoked (PartitionsRevoked). A Java or librdkafka
application says nothing; what it did follows from its rebalance protocol, which its
assignors decide (the group's agreed assignor in DescribeGroups and the stored records,
or the protocols its JoinGroup offered on the wire):

- eager (`range`, `roundrobin`, `sticky`): a member revokes everything it owns before it
  rejoins, and owns nothing until its new assignment arrives;
- cooperative (`cooperative-sticky`): a member revokes only what its new assignment no
  longer holds, and keeps consuming the rest.

Counts read from an assignment nobody saw (no source had the owners before the
rebalance) are None: unknown, not 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from kgctl.model.diagnosis.rejoins import (
    aftermath,
    answered_unchanged,
    lead_up_since,
    unchanged_rejoins,
)
from kgctl.model.event_index import EventIndex
from kgctl.model.state import GenerationRecord, GroupState, TopicPartition
from kgctl.model.timeline import Move, owners_at, rebalance_instants

RebalanceProtocol = Literal["eager", "cooperative", ""]
EAGER: Final = "eager"
COOPERATIVE: Final = "cooperative"

# The classic assignors by the name they join with (the same in Java, librdkafka and
# kafka-python) and the rebalance protocol each supports.
EAGER_ASSIGNORS = frozenset({"range", "roundrobin", "sticky"})
COOPERATIVE_ASSIGNORS = frozenset({"cooperative-sticky"})


def protocol_of(assignors: tuple[str, ...]) -> RebalanceProtocol:
    """The rebalance protocol of a member offering `assignors`: the one all of them
    support (a list with one eager assignor is eager, as the Java client decides); ""
    when one is not known (a custom assignor)."""
    names = {a.lower() for a in assignors}
    if not names or not names <= EAGER_ASSIGNORS | COOPERATIVE_ASSIGNORS:
        return ""
    return COOPERATIVE if names <= COOPERATIVE_ASSIGNORS else EAGER


@dataclass(frozen=True)
class MemberProtocol:
    """A member's rebalance protocol and where it was read."""

    protocol: RebalanceProtocol
    basis: str  # in words: "its JoinGroup offered range", "the group's assignor is range"


def member_protocol(
    events: EventIndex, state: GroupState, member: str, until: int
) -> MemberProtocol:
    """`member`'s rebalance protocol: from the assignors its last JoinGroup up to `until`
    offered (the wire trace), else from the group's agreed assignor (an eager assignor
    agreed on is in every member's list, so every member is eager; a cooperative one may
    sit beside an eager one in a member's list: inferred)."""
    offered: tuple[str, ...] = ()
    for e in events.by(member, until=until):
        if e.type == "JoinGroupSent":
            raw = e.data.get("protocols")
            if isinstance(raw, list) and raw:
                offered = tuple(str(p) for p in raw)
    if offered:
        found = protocol_of(offered)
        if found:
            return MemberProtocol(found, f"its JoinGroup offered {', '.join(offered)}")
    m = state.members.get(member)
    if state.group_type == "consumer" and (m is None or m.protocol != "classic"):
        # (its server-side assignors share the classic names: `range` is not eager there)
        return MemberProtocol(COOPERATIVE, "the consumer protocol (KIP-848)")
    if state.protocol:
        found = protocol_of((state.protocol,))
        if found:
            return MemberProtocol(found, f"the group's assignor is {state.protocol}")
    return MemberProtocol("", "")


def reporters(events: EventIndex) -> frozenset[str]:
    """The members that report their own revocations and assignments (kgctl members, and
    an app member whose eager JoinGroups chaos reads as revocations)."""

    def build(ix: EventIndex) -> frozenset[str]:
        said = {e.member for e in ix.of("PartitionsRevoked", "PartitionsAssigned") if e.member}
        said |= {e.member for e in ix.of("MemberStarted", "JoinPrepared") if e.source == "member"}
        return frozenset(said)

    return events.memo("revocation-reporters", build)


def _held(owners: Mapping[TopicPartition, tuple[str, ...]], member: str) -> set[TopicPartition]:
    return {tp for tp, who in owners.items() if member in who}


@dataclass(frozen=True)
class Revoked:
    """Partitions the members that stayed revoked: counted from their own callbacks,
    inferred from the protocol for the others (`inferred`: which, and from what)."""

    count: int | None  # None: a member reported nothing and what it owned is unknown
    inferred: tuple[tuple[str, int, str], ...] = ()  # (member, count, basis)
    eager: frozenset[str] = frozenset()  # silent members that revoked all they owned
    # At least `count`: an eager member whose JoinGroups no source showed may have
    # revoked again (a rejoin the broker answered with its generation gives partitions
    # back, revoked once more for the rebalance: `_revoked_again`, seen on the wire).
    at_least: bool = False
    # Of `count`, what silent eager members revoked once given their assignment, at
    # rejoins the broker answered with this generation (rejoins.py): (member, count).
    again: tuple[tuple[str, int], ...] = ()


def partitions_revoked(
    events: EventIndex,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    now_ms: int,
) -> Revoked:
    """The partitions revoked in the rebalance that made `rec` by members in it."""
    speaking = reporters(events)
    silent = [k for k in rec.members if k not in speaking]
    t0, t1 = rebalance_instants(state, rec, now_ms)
    if silent and _after_consumer_group(events, rec):
        return Revoked(None)
    if prev is None and (not silent or not _owned_before(state, t0)):
        # No generation before it: only a new group's first took nothing, unless the
        # owners before it were seen (a watch's first description).
        return Revoked(0 if not silent or _first(rec) else None)
    since = (prev.stable_ms if prev.stable_ms is not None else prev.start_ms) if prev else t0
    until = rec.stable_ms if rec.stable_ms is not None else (rec.sync_ms or rec.start_ms)
    n = 0
    for e in events.of("PartitionsRevoked", since=since, until=until):
        if e.member in rec.members:
            parts = e.data.get("partitions") or {}
            n += sum(len(v) for v in parts.values() if isinstance(v, list))
    if not silent:
        if not rec.members and _stored_members(events, rec.generation):
            return Revoked(None)  # the broker stored members the sources do not name
        return Revoked(n)
    before, after = owners_at(state, t0), owners_at(state, t1)
    known_before = _owners_known(events, state, rec, t0)
    # Rejoins answered with the previous generation after its aftermath lead up to this
    # rebalance (rejoins.py); those before were the previous rebalance's.
    lead = lead_up_since(state, prev, now_ms) if prev is not None else since
    # Until when a rejoin answered with this generation is this rebalance's (rejoins.py).
    after_rec = aftermath(state, rec, now_ms)
    last = after_rec[1] if after_rec is not None else until
    inferred: list[tuple[str, int, str]] = []
    eager: set[str] = set()
    again: list[tuple[str, int]] = []
    unknown = at_least = False
    for k in silent:
        held = _held(before, k)
        mp = member_protocol(events, state, k, rec.stable_ms or now_ms)
        # Once given its assignment, at a rejoin the broker answered with this generation
        # (no new rebalance), an eager member revoked it (and got it back).
        later = (
            0
            if mp.protocol != EAGER
            else _rejoins_after(events, k, lead, last, rec.generation, None)[0]
        )
        if later:
            eager.add(k)
            again.append((k, later))
        gave: int | None = 0
        if not held:
            # Nothing known held: a member that joined in this rebalance had nothing to
            # give up; one of the previous generation's, with no owners known, is unknown.
            if prev is not None and k in prev.members and not known_before:
                unknown = True
                continue
            gave = None
        elif _rejoined_as_new(events, k, since, until):
            # Removed from the group (its session or poll interval ran out), it lost its
            # partitions rather than revoking them, and joined again without a member id.
            gave = None
        elif mp.protocol == EAGER:
            gave = _eager_gave(events, k, len(held), prev, since, lead, until)
            eager.add(k)
            at_least = at_least or not _joins_seen(events, k, since, until)
        elif mp.protocol == COOPERATIVE:
            gave = len(held - _held(after, k))
        else:
            unknown = True
            continue
        if gave is not None or later:
            n += (gave or 0) + later
            inferred.append((k, (gave or 0) + later, mp.basis))
    return Revoked(
        None if unknown else n, tuple(inferred), frozenset(eager), at_least, tuple(again)
    )


def _eager_gave(
    events: EventIndex,
    member: str,
    held: int,
    prev: GenerationRecord | None,
    since: int,
    lead: int,
    until: int,
) -> int:
    """What an eager `member` holding `held` partitions once the previous generation was
    stable (at `since`) revoked for this rebalance: all it held once the previous
    rebalance's aftermath was over (at `lead`), and again what rejoins answered with the
    previous generation gave back after it."""
    if prev is None:
        return held
    if lead > since:
        held = _rejoins_after(events, member, since, lead, prev.generation, held)[1]
    return held + _revoked_again(events, member, lead, until, prev.generation)


def _rejoins_after(
    events: EventIndex,
    member: str,
    since: int,
    until: int,
    generation: int,
    holding: int | None,
) -> tuple[int, int]:
    """An eager `member`'s rejoins in (since, until] that the broker answered with
    `generation` once it had that generation's assignment: what it revoked at them (all
    it held at each) and what it held after them (what the SyncGroup after each gave
    back; nothing after one that failed). `holding`: what it held at `since`, None when
    it had not joined `generation` yet (its JoinGroup for it is no rejoin)."""
    revoked = 0
    for e in events.by(member, since=since, until=until):
        if (
            holding is not None
            and e.type == "JoinGroupSent"
            and e.data.get("member_id")
            and answered_unchanged(events, e, generation)
        ):
            revoked, holding = revoked + holding, 0
        elif e.type == "JoinCompleted" and e.generation == generation:
            parts = e.data.get("assignment") or {}
            holding = sum(len(v) for v in parts.values() if isinstance(v, list))
    return revoked, holding or 0


def _joins_seen(events: EventIndex, member: str, since: int, until: int) -> bool:
    """Some source showed `member`'s JoinGroups in the rebalance (the wire, its own
    events): a rejoin it made more than the rebalance needed would show too."""
    return any(e.type == "JoinGroupSent" for e in events.by(member, since=since, until=until))


def _revoked_again(events: EventIndex, member: str, since: int, until: int, generation: int) -> int:
    """What an eager `member` revoked once more: after a rejoin the broker answered with
    `generation` unchanged (no rebalance), the assignment its SyncGroup then gave back,
    which it revoked again as it rejoined for the rebalance. (A SyncGroup that failed
    gave nothing back, and a rejoin after it revoked nothing.)"""
    total = 0
    for sent in unchanged_rejoins(events, member, since, until, generation):
        # From the rejoin on, in order: its SyncGroup may be answered within the same
        # millisecond (an unloaded proxy: 0.3 ms), and the JoinGroup after it too.
        mine = events.by(member, since=sent.ts_ms - 1, until=until)
        later = mine[next(i for i, e in enumerate(mine) if e is sent) + 1 :]
        back = next((i for i, e in enumerate(later) if e.type == "JoinCompleted"), None)
        if back is None or not any(e.type == "JoinGroupSent" for e in later[back + 1 :]):
            continue
        parts = later[back].data.get("assignment") or {}
        total += sum(len(v) for v in parts.values() if isinstance(v, list))
    return total


def _rejoined_as_new(events: EventIndex, member: str, since: int, until: int) -> bool:
    """`member` asked for a new member id in this rebalance (a JoinGroup of the wire's
    without one): the group had removed it."""
    return any(
        e.type == "JoinGroupSent" and "member_id" in e.data and not e.data.get("member_id")
        for e in events.by(member, since=since, until=until)
    )


def revoked_note(revoked: Revoked, names: Mapping[str, str]) -> str:
    """The words that say a revoked count was inferred, and from what."""
    if not revoked.inferred:
        return ""
    by_basis: dict[str, list[str]] = {}
    for k, n, basis in revoked.inferred:
        by_basis.setdefault(basis, []).append(f"{names.get(k, k)} {n}")
    parts = [f"{', '.join(who)} ({basis}: {_rule(basis)})" for basis, who in by_basis.items()]
    after = ""
    if revoked.again:
        who = ", ".join(f"{names.get(k, k)} {n}" for k, n in revoked.again)
        after = (
            f"; of them, once given their assignment, at a rejoin the broker answered "
            f"with this generation (no new rebalance): {who}"
        )
    return (
        "revoked partitions inferred from the assignor's protocol (the members did not "
        "report their callbacks): " + "; ".join(parts) + after
    )


def _rule(basis: str) -> str:
    names = set(basis.replace(",", " ").split())
    if names & EAGER_ASSIGNORS:
        return "eager, each member revokes all it owns as it rejoins"
    return "cooperative, a member revokes only what its new assignment drops"


def partitions_moved(
    events: EventIndex,
    state: GroupState,
    rec: GenerationRecord,
    moves: tuple[Move, ...],
    now_ms: int,
) -> int | None:
    """The partitions the rebalance gave to another member than their last owner: each
    is counted once, when its new owner takes it (a cooperative partition revoked in the
    first round and assigned in the second moved once, in the second). A partition that
    never had an owner (the growth added it, the group's first assignment) did not move;
    one that went to no one has not moved yet. None when nobody saw who owned what
    before (only the assignment now is known)."""
    t0, _t1 = rebalance_instants(state, rec, now_ms)
    if not _owners_known(events, state, rec, t0):
        return None
    i = state.generations.index(rec)
    prev = state.generations[i - 1] if i > 0 else None
    # Right after a mixed group's way back, a partition no classic generation gave anyone
    # was a consumer-protocol member's (the one that left): not known by name.
    unnamed = prev is not None and _after_consumer_group(events, prev)
    n = 0
    for mv in moves:
        if not mv.after:
            continue
        if unnamed and not mv.before:
            return None  # (an owner before the upgrade is not its last)
        last = mv.before or _last_owners(state, (mv.topic, mv.partition), t0)
        if last and set(last) != set(mv.after):
            n += 1
    return n


def _stored_members(events: EventIndex, generation: int) -> bool:
    """The broker's stored record of `generation` lists members."""
    return any(
        e.generation == generation and e.data.get("stored_in") and e.data.get("members")
        for e in events.of("GenerationChanged")
    )


def _after_consumer_group(events: EventIndex, rec: GenerationRecord) -> bool:
    """`rec` is the first classic generation after the group was a consumer group (a
    mixed group's way back): what each member held then is not known by name."""
    return any(
        e.generation == rec.generation and e.data.get("consumer_epochs_between")
        for e in events.of("GenerationChanged")
    )


def _first(rec: GenerationRecord) -> bool:
    """A new group's first generation (the broker numbers a classic group's from 1)."""
    return rec.generation == 1 and not rec.inferred


def _owners_known(events: EventIndex, state: GroupState, rec: GenerationRecord, t0: int) -> bool:
    """Whether who owned what just before `rec`'s rebalance is known: someone was seen
    owning something by then, or the group is seen from its first generation and every
    member until then reports its assignments (had one owned something, it would say)."""
    if _after_consumer_group(events, rec):
        return False
    if _owned_before(state, t0):
        return True
    i = state.generations.index(rec)
    earlier = state.generations[:i]
    if any(not g.members and _stored_members(events, g.generation) for g in earlier):
        return False  # members the broker stored, their holdings not known
    speaking = reporters(events)
    if _first(earlier[0] if earlier else rec):
        return all(k in speaking for g in earlier for k in g.members)
    # Seen from later on: known only if every member was seen from its start (a member
    # that started with the recording owned nothing until it said so).
    started = {e.member for e in events.of("MemberStarted") if e.source == "member"}
    return all(k in started for g in (*earlier, rec) for k in g.members)


def _owned_before(state: GroupState, t: int) -> bool:
    return any(sp.start_ms <= t for spans in state.ownership.values() for sp in spans)


def _last_owners(state: GroupState, tp: TopicPartition, t: int) -> tuple[str, ...]:
    """Who last owned `tp` before `t`, when nobody did at `t`."""
    spans = [sp for sp in state.ownership.get(tp, ()) if sp.end_ms is not None and sp.end_ms <= t]
    if not spans:
        return ()
    last = max(sp.end_ms or 0 for sp in spans)
    return tuple(sp.member for sp in spans if sp.end_ms == last)
