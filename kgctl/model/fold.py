"""`fold(state, event, now_ms) -> state`: the one pure function that turns events into state.

Events come from members (their own protocol steps, with real generations) and from the
broker observer (snapshots diffed into inferred events). Both may describe the same
member; a member is matched across sources by its member id. The fold never reads a
clock, never raises on an event it does not understand (unknown types and data fields
are logged and otherwise ignored), and never mutates the state it is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, islice, repeat
from typing import Any

from kgctl.model.events import Event
from kgctl.model.state import (
    PHASE_FAILED,
    PHASE_JOINING,
    PHASE_LEFT,
    PHASE_RECONCILING,
    PHASE_STABLE,
    PHASE_SYNCING,
    PHASE_UNKNOWN,
    REBALANCING_STATES,
    SYNCING_STATES,
    GenerationRecord,
    GroupState,
    MemberState,
    Owned,
    OwnershipSpan,
    TopicPartition,
    drafted,
    edited,
    evolve,
    finished,
    lives_changed_at,
    member_index,
    owned_from,
    owned_of_pairs,
    owned_pairs,
    writable,
)


def fold(state: GroupState, event: Event, now_ms: int) -> GroupState:
    """The state after `event`; `now_ms` is the caller's clock (used when an event has none)."""
    return _folded(state, event, now_ms, _recent(state, (event,)))


def _recent(state: GroupState, events: tuple[Event, ...]) -> tuple[Event, ...]:
    """The event log after `events`: the last `log_limit` events."""
    limit = state.log_limit
    return (state.recent + events[-limit:])[-limit:] if limit > 0 else ()


def _folded(
    state: GroupState, event: Event, now_ms: int, recent: tuple[Event, ...] | None
) -> GroupState:
    """`fold`, with the event log set to `recent` (None: left as it is)."""
    t = event.ts_ms if event.ts_ms > 0 else now_ms
    changes: dict[str, Any] = {
        "updated_ms": max(state.updated_ms, now_ms),
        "events_folded": state.events_folded + 1,
        "batch_edits": None,  # (a batch's own, `fold_many`'s, are set when it is finished)
    }
    if recent is not None:
        changes["recent"] = recent
    s = evolve(state, **changes)
    handler = _HANDLERS.get(event.type)
    if event.type in _MEMBER_TYPES:
        s = _touch_member(s, event, t)
    if handler is not None:
        s = handler(s, event, t)
    return s


def fold_all(state: GroupState, events: list[Event], now_ms: int) -> GroupState:
    """Fold many events in order."""
    return fold_many(state, ((ev, now_ms) for ev in events))


def fold_many(state: GroupState, steps: Iterable[tuple[Event, int]]) -> GroupState:
    """`fold` of each (event, now_ms) in order: the same state, made faster. The states
    in between are never seen, so one private draft is changed in place through the
    batch (each mapping copied at its first change, not at every event); `state` is
    left as it was."""
    draft = drafted(state)
    events: list[Event] = []
    for ev, now_ms in steps:
        draft = _folded(draft, ev, now_ms, None)  # (no handler reads the event log)
        events.append(ev)
    if events:
        draft = evolve(draft, recent=_recent(draft, tuple(events)))
    return finished(draft)


# -- members ------------------------------------------------------------------------------


def _key_for(s: GroupState, ev: Event) -> str:
    if ev.member:
        return ev.member
    found = s.find_member(ev.member_id)
    if found is not None:
        return found.key
    return ev.member_id or ev.client_id or f"{ev.host}:{ev.pid}"


def _with_member(s: GroupState, member: MemberState) -> GroupState:
    indexed = s.member_index_of is s.members
    members = writable(s, "members")
    old = members.get(member.key)
    if old is None or old.lives is not member.lives:
        edited(s, lives_changed_at(old.lives if old is not None else (), member.lives))
    members[member.key] = member
    index = s.member_index
    if not indexed:
        index = member_index(members)
    elif old is None or old.member_id != member.member_id:
        if old is not None and old.member_id and index.get(old.member_id) == member.key:
            index = member_index(members)  # another member may have the id it gave up
        elif member.member_id and member.member_id not in index:
            index = writable(s, "member_index")
            index[member.member_id] = member.key
        elif member.member_id and index[member.member_id] != member.key:
            index = member_index(members)  # which of the two comes first
    return evolve(s, members=members, member_index=index, member_index_of=members)


def _touch_member(s: GroupState, ev: Event, t: int) -> GroupState:
    """Create or refresh the member an event is about, merging identities across sources."""
    key = _key_for(s, ev)
    # An observer-made record (keyed by member id) for a member that now names itself.
    if ev.member and ev.member_id and ev.member_id != key and ev.member_id in s.members:
        s = _rename_member(s, ev.member_id, key)
    old = s.members.get(key)
    source = ev.source if ev.source in ("member", "observer") else "member"
    # A member traced on the wire counts as one that speaks (its steps are the protocol's),
    # and is marked so: its times are when the client was told, not its callbacks'.
    added = {source, "wire"} if ev.source == "wire" else {source}
    if old is None:
        old = _new_member(key, t)
    member = evolve(
        old,
        member_id=ev.member_id or old.member_id,
        client_id=ev.client_id or old.client_id,
        host=ev.host or old.host,
        instance_id=ev.instance_id if ev.instance_id is not None else old.instance_id,
        generation=ev.generation if ev.generation >= 0 else old.generation,
        last_seen_ms=max(old.last_seen_ms, t),
        sources=old.sources if added <= old.sources else old.sources | added,
    )
    return _with_member(s, member)


def _new_member(key: str, t: int) -> MemberState:
    return MemberState(
        key=key,
        first_seen_ms=t,
        last_seen_ms=t,
        unassigned_since_ms=t,
        sources=frozenset(),
        lives=((t, None),),
    )


def _revived(m: MemberState, t: int) -> MemberState:
    """A member that had gone and is back (a rejoin after a leave, a restart): alive,
    with a new life from `t`."""
    if m.alive:
        return m
    return evolve(m, alive=True, left_ms=None, left_reason="", lives=m.lives + ((t, None),))


def _merged_lives(
    a: tuple[tuple[int, int | None], ...], b: tuple[tuple[int, int | None], ...]
) -> tuple[tuple[int, int | None], ...]:
    """The union of two members' lives (one member seen under two keys)."""
    out: list[tuple[int, int | None]] = []
    for start, end in sorted(a + b, key=lambda span: span[0]):
        if out and (out[-1][1] is None or start <= out[-1][1]):
            last_end = out[-1][1]
            merged = None if last_end is None or end is None else max(last_end, end)
            out[-1] = (out[-1][0], merged)
        else:
            out.append((start, end))
    return tuple(out)


def _rename_member(s: GroupState, old_key: str, new_key: str) -> GroupState:
    edited(s, -math.inf)  # whose spans and lives are whose changes at every instant
    members = dict(s.members)
    old = members.pop(old_key)
    existing = members.get(new_key)
    merged = evolve(
        existing or old,
        key=new_key,
        first_seen_ms=min(old.first_seen_ms, (existing or old).first_seen_ms),
        sources=old.sources | (existing.sources if existing else frozenset()),
        subscription=old.subscription or (existing.subscription if existing else ()),
        lag=old.lag if old.lag is not None else (existing.lag if existing else None),
        lives=_merged_lives(old.lives, existing.lives) if existing else old.lives,
    )
    members[new_key] = merged
    ownership = {
        tp: tuple(evolve(sp, member=new_key) if sp.member == old_key else sp for sp in spans)
        for tp, spans in s.ownership.items()
    }
    leader = new_key if s.leader == old_key else s.leader
    return evolve(
        s,
        members=members,
        ownership=ownership,
        leader=leader,
        member_index=member_index(members),
        member_index_of=members,
    )


def _set_phase(s: GroupState, key: str, phase: str) -> GroupState:
    m = s.members.get(key)
    if m is None or m.phase == phase:
        return s
    return _with_member(s, evolve(m, phase=phase))


def _set_partitions(s: GroupState, key: str, new: Owned, t: int) -> GroupState:
    """Give a member exactly `new`; keep ownership spans and unassigned time in step."""
    return _set_pairs(s, key, owned_pairs(new), t)


def _set_pairs(s: GroupState, key: str, after: frozenset[TopicPartition], t: int) -> GroupState:
    """`_set_partitions` with the (topic, partition) pairs to own: a member's callbacks
    add or take away pairs, and the round trip through `Owned` was a tenth of their fold."""
    m = s.members.get(key)
    if m is None:
        return s
    before = owned_pairs(m.partitions)
    if before == after:
        return s
    gen = m.generation if m.generation >= 0 else s.generation
    edited(s, t)  # spans closed and opened at t
    ownership = writable(s, "ownership")
    for tp in before - after:
        ownership[tp] = _close_span(ownership.get(tp, ()), key, t)
    opened = (OwnershipSpan(key, gen, t),)  # (immutable: one for every partition it gets)
    for tp in sorted(after - before):
        ownership[tp] = ownership.get(tp, ()) + opened
    since = m.unassigned_since_ms
    s = evolve(s, ownership=ownership)
    if not after and since is None:
        since = t
    elif after:
        since = None
    return _with_member(s, evolve(m, partitions=owned_of_pairs(after), unassigned_since_ms=since))


def _close_span(spans: tuple[OwnershipSpan, ...], key: str, t: int) -> tuple[OwnershipSpan, ...]:
    """The spans with `key`'s open ones ended at `t` (those before the first kept as they
    are: a partition's history is mostly closed spans)."""
    for i, sp in enumerate(spans):
        if sp.end_ms is None and sp.member == key:
            rest = spans[i + 1 :]  # (mostly none: the open span is the newest)
            if rest:
                rest = _close_span(rest, key, t)
            return (*spans[:i], evolve(sp, end_ms=t), *rest)
    return spans


def _member_gone(s: GroupState, key: str, t: int, phase: str, reason: str) -> GroupState:
    m = s.members.get(key)
    if m is None:
        return s
    s = _set_partitions(s, key, {}, t)
    m = s.members[key]
    lives = m.lives
    if lives and lives[-1][1] is None:
        lives = lives[:-1] + ((lives[-1][0], t),)
    m = evolve(
        m,
        alive=False,
        phase=phase,
        left_ms=t if m.left_ms is None else m.left_ms,
        left_reason=reason or m.left_reason,
        unassigned_since_ms=None,
        lives=lives,
    )
    return _with_member(s, m)


# -- generations ----------------------------------------------------------------------------


def _replace_current(s: GroupState, rec: GenerationRecord) -> GroupState:
    return evolve(s, generations=s.generations[:-1] + (rec,))


def _begin_rebalance(s: GroupState, t: int, polled: bool = False) -> GroupState:
    """`polled`: seen in the broker's description, not in a step of the rebalance."""
    if s.rebalancing:
        return s
    return evolve(s, rebalancing=True, rebalance_started_ms=t, rebalance_start_polled=polled)


def _open_generation(
    s: GroupState, generation: int, t: int, inferred: bool, data: Mapping[str, Any]
) -> GroupState:
    """Start a generation record; close the previous one where the rebalance began."""
    if any(r.generation == generation and r.inferred == inferred for r in s.generations):
        return s
    # The rebalance that led here began at the latest rebalance start after the current
    # generation began (the broker may already say Stable when the number changes).
    started = s.rebalance_started_ms
    cur = s.current
    polled = s.rebalance_start_polled
    if started is None or (cur is not None and started <= cur.start_ms):
        started, polled = t, inferred
    # A consumer group's epoch record says when the broker bumped it: the rebalance began
    # then, before the description whose changes began it here (kgctl/monitor).
    written = _int(data.get("epoch_written_ms"), -1)
    if written >= 0 and (cur is None or written > cur.start_ms):
        started, polled = min(started, written), False
        if s.rebalance_started_ms is not None:
            # The start the descriptions saw is this generation's, not the next one's.
            s = evolve(s, rebalance_started_ms=min(started, t))
    start = min(started, t)
    gens = s.generations
    if gens:
        prev = gens[-1]
        end = prev.end_ms if prev.end_ms is not None else start
        gens = gens[:-1] + (evolve(prev, end_ms=end),)
    rec = GenerationRecord(
        generation=generation,
        start_ms=start,
        # (a start seen only by the polls: the rebalance began at it or before)
        start_exact=not polled,
        inferred=inferred,
        cause=str(data.get("cause", "")),
        cause_guess=bool(data.get("guess", True)),
        evidence=str(data.get("evidence", "")),
        members=tuple(sorted(m.key for m in s.live_members)),
    )
    return evolve(
        s,
        generations=gens + (rec,),
        generation=generation,
        generation_inferred=inferred,
    )


def _note_completed(s: GroupState, key: str, t: int) -> GroupState:
    """Remember the latest moment a member of the current generation got its share (a
    member that reports no generation: of whichever generation is current)."""
    rec = s.current
    m = s.members[key]
    if rec is None or rec.inferred or (m.reports_generation and m.generation != rec.generation):
        return s
    return _replace_current(s, evolve(rec, completed_ms=max(t, rec.completed_ms or t)))


def _maybe_stable(s: GroupState, t: int) -> GroupState:
    """Close the rebalance once every traced live member completed the current generation.

    A member that reports no generation (Java's VerifiableConsumer) is done when Stable by
    its own report (its assignment callback ran); the generation is judged on the others,
    and when every member is such a member there is none to judge."""
    if s.generation_inferred:
        return s
    # One pass that stops at the first member still on its way, beginning with the one
    # the last pass stopped at: called at every member's completion, a pass from the
    # first member each time made a rebalance of N members cost N². It starts where
    # that member was, if it is still there (members may have come or gone since),
    # else at the first; where it starts changes only which member it stops at. (It
    # skips to that place with `islice`: a list of the keys and a search in it cost
    # 20 µs a member's completion at 1,000 members.)
    members = s.members
    hint = members.get(s.pending_hint)
    if hint is not None and _on_its_way(hint, s.generation):
        return s
    at = s.pending_at if hint is not None and 0 <= s.pending_at < len(members) else 0
    if at and next(islice(members, at, None)) != s.pending_hint:
        at = 0
    traced = consumer = numbered = False
    for i, (key, m) in enumerate(
        chain(islice(members.items(), at, None), islice(members.items(), at))
    ):
        if not m.alive or "member" not in m.sources:
            continue
        if _on_its_way(m, s.generation):
            return evolve(s, pending_hint=key, pending_at=(at + i) % len(members))
        traced = True
        numbered = numbered or m.reports_generation
        consumer = consumer or m.protocol == "consumer"
    if not traced or (numbered and s.generation < 0) or (consumer and _orphaned(s)):
        return s
    return _mark_stable(s, t)


def _on_its_way(m: MemberState, generation: int) -> bool:
    """A live traced member that has not completed `generation`. A consumer-protocol
    member told of a new target is not done until it owns it, even while its own state
    still says STABLE (its reconciliation starts on its next poll)."""
    return (
        m.alive
        and "member" in m.sources
        and (
            m.phase != PHASE_STABLE
            or (m.reports_generation and m.generation != generation)
            or (m.protocol == "consumer" and m.reconciling)
        )
    )


def _orphaned(s: GroupState) -> bool:
    """In a consumer-protocol group the broker gives a member a partition only once its
    previous owner revoked it, so a member can be STABLE at the new epoch with nothing
    while the partitions it will get are still free: the round is not complete while a
    partition given up during it, of a topic some live member subscribes to, has no
    live owner. (Like the rest of the fold, this assumes every member is traced or
    observed: a member nobody reports on would leave its partitions looking orphaned.)"""
    rec = s.current
    if rec is None:
        return False
    live = {m.key: m for m in s.live_members}
    wanted = [(set(m.subscription), m.regex) for m in live.values() if m.protocol == "consumer"]
    for (topic, _pid), spans in s.ownership.items():
        if not spans or any(sp.end_ms is None and sp.member in live for sp in spans):
            continue
        if max(sp.end_ms or 0 for sp in spans) < rec.start_ms:
            continue  # given up before this round: not this round's business
        if any(topic in names or _matches(regex, topic) for names, regex in wanted):
            return True
    return False


def _matches(regex: str | None, topic: str) -> bool:
    if not regex:
        return False
    try:
        return re.fullmatch(regex, topic) is not None
    except re.error:
        return False


def _mark_stable(s: GroupState, t: int) -> GroupState:
    rec = s.current
    if rec is not None and rec.stable_ms is None:
        s = _replace_current(
            s,
            evolve(
                rec,
                stable_ms=max(t, rec.completed_ms or t),
                sync_ms=rec.sync_ms if rec.sync_ms is not None else None,
                members=tuple(sorted(m.key for m in s.live_members)),
            ),
        )
    return evolve(s, rebalancing=False)


# -- member event handlers ---------------------------------------------------------------


def _on_rebalance_hint(s: GroupState, ev: Event, t: int) -> GroupState:
    return _begin_rebalance(s, t)


def _on_join_sent(s: GroupState, ev: Event, t: int) -> GroupState:
    s = _begin_rebalance(s, t)
    key = _key_for(s, ev)
    m = s.members[key]
    if not m.alive and m.phase != PHASE_FAILED:
        # It left (max.poll.interval breach, LeaveGroup) and is joining again: alive.
        s = _with_member(s, _revived(m, t))
    return _set_phase(s, _key_for(s, ev), PHASE_JOINING)


def _on_join_received(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    if _is_error(ev.data.get("error")):
        return s  # a failed JoinGroup: the member retries from JoinGroup
    # The response's own generation wins: the envelope may still carry the old one.
    gen = _int(ev.data.get("generation"), -1)
    gen = gen if gen >= 0 else ev.generation
    if gen >= 0:
        m = s.members[key]
        if not m.alive and m.phase == PHASE_LEFT:
            # Its own successful JoinGroup proves it is a member: any inference that it
            # had gone (from another member's events folded first) is undone.
            m = _revived(m, t)
        s = _with_member(s, evolve(m, generation=gen))
    if gen > s.generation or (gen >= 0 and s.generation_inferred):
        s = _begin_rebalance(s, t)
        s = _open_generation(s, gen, t, inferred=False, data={})
    rec = s.current
    leader_id = str(ev.data.get("leader", "") or "")
    leader = ""
    if leader_id:
        found = s.find_member(leader_id)
        leader = found.key if found is not None else leader_id
    if rec is not None and rec.generation == gen:
        rec = evolve(rec, sync_ms=rec.sync_ms if rec.sync_ms is not None else t)
        rec = evolve(rec, leader=leader or rec.leader)
        s = _replace_current(s, rec)
    protocol = str(ev.data.get("protocol", "") or ev.data.get("protocol_name", "") or "")
    if protocol:
        s = evolve(s, protocol=protocol)
    if leader:
        s = evolve(s, leader=leader)
    s = _drop_members_missing_from(s, ev.data.get("members"), key, gen, t)
    return _set_phase(s, key, PHASE_SYNCING)


def _drop_members_missing_from(
    s: GroupState, members: Any, leader_key: str, gen: int, t: int
) -> GroupState:
    """The leader's JoinGroup response lists every member of the new generation: a traced
    member missing from it was removed by the coordinator (a SIGKILLed or frozen process
    found by session timeout), even though it never said so itself."""
    if not isinstance(members, list) or not members or gen < 0:
        # Only the leader's answer lists the generation (never empty: it has the leader);
        # a follower's lists no one, and says nothing of who was removed.
        return s
    ids = {str(m.get("member_id", "")) for m in members if isinstance(m, dict)}
    for m in s.live_members:
        # Only members of an earlier generation: one still on its first join (arriving
        # after this round closed) is not in any generation yet, so it was not removed.
        if (
            m.key != leader_key
            and m.member_id
            and m.member_id not in ids
            and 0 <= m.generation < gen
        ):
            s = _member_gone(s, m.key, t, PHASE_LEFT, f"not in generation {gen} (timed out)")
    return s


def _on_sync_received(s: GroupState, ev: Event, t: int) -> GroupState:
    return _set_phase(s, _key_for(s, ev), PHASE_SYNCING)


def _on_join_completed(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    gen = _int(ev.data.get("generation"), -1)
    if gen >= 0:
        s = _with_member(s, evolve(s.members[key], generation=gen))
    # The full assignment after the join: `assignment` (kgctl join) or `partitions`.
    full = ev.data.get("assignment", ev.data.get("partitions"))
    if full is not None:
        s = _set_partitions(s, key, owned_from(full), t)
    s = _set_phase(s, key, PHASE_STABLE)
    return _maybe_stable(_note_completed(s, key, t), t)


def _on_assigned(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    m = s.members[key]
    added = owned_pairs(owned_from(ev.data.get("partitions")))
    s = _set_pairs(s, key, owned_pairs(m.partitions) | added, t)
    if m.protocol == "consumer" and m.member_state:
        return s  # still reconciling: stable once its acknowledgement is answered
    # (A consumer-protocol member that reports no state of its own, such as Java's
    # VerifiableConsumer in a chaos fleet, says only that its callback ran: it has what
    # it was given.)
    s = _set_phase(s, key, PHASE_STABLE)
    return _maybe_stable(_note_completed(s, key, t), t)


def _on_revoked(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    m = s.members[key]
    removed = owned_pairs(owned_from(ev.data.get("partitions")))
    s = _begin_rebalance(s, t) if ev.type == "PartitionsRevoked" else s
    if not m.reports_generation and m.alive:
        # A member with no steps of its own between its callbacks: Java always calls
        # onPartitionsAssigned once the rebalance it revoked for is over (the consumer
        # protocol too, with nothing new), so it is on its way until then.
        phase = PHASE_RECONCILING if m.protocol == "consumer" else PHASE_JOINING
        s = _set_phase(s, key, phase)
    return _set_pairs(s, key, owned_pairs(m.partitions) - removed, t)


def _on_generation_reset(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    m = s.members[key]
    return _with_member(s, evolve(m, generation=-1))


def _on_leave(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    reason = str(ev.data.get("reason", "") or "left the group")
    s = _member_gone(s, key, t, PHASE_LEFT, reason)
    return _after_departure(s, t)


def _on_stopped(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    m = s.members[key]
    if not m.alive:
        return s
    s = _member_gone(s, key, t, PHASE_LEFT, str(ev.data.get("reason", "") or "stopped"))
    return _after_departure(s, t)


def _after_departure(s: GroupState, t: int) -> GroupState:
    """A member left: the others rebalance; with none left, the broker empties the group
    and no rebalance is pending (the last one to leave ends the one the others began)."""
    return _begin_rebalance(s, t) if s.live_members else evolve(s, rebalancing=False)


def _on_started(s: GroupState, ev: Event, t: int) -> GroupState:
    """A process started under a label that had left (a restart): that member lives again."""
    key = _key_for(s, ev)
    m = s.members[key]
    config = ev.data.get("config")
    if isinstance(config, Mapping):
        protocol = str(config.get("group_protocol") or "classic")
        reports = ev.data.get("reports_generation") is not False
        m = evolve(m, protocol=protocol, member_state="", reports_generation=reports)
        s = _with_member(s, m)
    if m.alive:
        return s
    return _with_member(
        s,
        evolve(
            _revived(m, t),
            phase=PHASE_UNKNOWN,
            generation=-1,
            member_id=ev.member_id,
            partitions={},
            unassigned_since_ms=t,
        ),
    )


def _on_failed(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    ended = str(ev.data.get("member_id") or "")
    if ended and s.members[key].member_id not in ("", ended):
        # The member id that failed (a process fenced on the wire) is not the member's
        # now: another process of its name took over, and lives.
        return s
    reason = str(ev.data.get("error", "") or ev.data.get("reason", "") or "failed")
    return _member_gone(s, key, t, PHASE_FAILED, reason)


# -- observer event handlers -------------------------------------------------------------


def _on_group_observed(s: GroupState, ev: Event, t: int) -> GroupState:
    d = ev.data
    broker_state = str(d.get("state", "") or s.state)
    classic = d.get("group_type") == "classic"  # DescribeGroups (a classic group) says so
    s = evolve(
        s,
        state=broker_state,
        protocol_type=str(d.get("protocol_type", s.protocol_type) or s.protocol_type),
        protocol=str(d.get("protocol", "") or s.protocol),
        coordinator=str(d.get("coordinator", "") or s.coordinator),
        group_type=str(d.get("group_type", "") or s.group_type),
        # A classic group has no epochs: one back from being a consumer group (a mixed
        # group's way back) keeps none of its last ones.
        group_epoch=-1 if classic else _int(d.get("group_epoch"), s.group_epoch),
        assignment_epoch=-1 if classic else _int(d.get("assignment_epoch"), s.assignment_epoch),
        missing=bool(d.get("missing", False)),
        observed_ms=t,
        connected=True,
        disconnected_since_ms=None,
    )
    raw_members = d.get("members")
    described: set[str] = set()
    if isinstance(raw_members, list):
        s, described = _observe_members(s, raw_members, broker_state, t, classic)
        # Members only the broker knew about are gone once it stops describing them.
        for key, m in list(s.members.items()):
            if m.alive and m.sources == frozenset({"observer"}) and key not in described:
                s = _member_gone(s, key, t, PHASE_LEFT, "no longer described by the broker")
    if broker_state in REBALANCING_STATES:
        s = _begin_rebalance(s, t, polled=True)
    s = _apply_lag(s, d.get("lag"), d.get("total_lag"))
    return s


def _observe_members(
    s: GroupState, raws: list[Any], broker_state: str, t: int, classic: bool = False
) -> tuple[GroupState, set[str]]:
    """Every member of one description, as `_observe_member` one after the other would
    leave them, with one copy of the members mapping instead of one per member (a
    description of 1,000 members cost 1,000 copies of 1,000): the members' records are
    updated in a private copy, and the ownership of untraced members (which reads and
    changes only its own member) set after, in the same order. A member described twice
    in one answer has what came before it applied first."""
    members = dict(s.members)
    index = dict(s.member_index) if s.member_index_of is s.members else member_index(members)
    pending: list[tuple[str, Owned]] = []
    described: set[str] = set()
    rebuild = False  # a new member took the key of another with another member id

    def settle(state: GroupState) -> GroupState:
        nonlocal index, rebuild
        if rebuild:
            index, rebuild = member_index(members), False
        state = evolve(state, members=members, member_index=index, member_index_of=members)
        for key, owned in pending:
            state = _set_partitions(state, key, owned, t)
        pending.clear()
        return state

    for raw in raws:
        if not isinstance(raw, Mapping) or not raw.get("member_id"):
            continue
        member_id = str(raw["member_id"])
        # A consumer group reports assignments in every state; a classic one in Stable.
        with_partitions = broker_state == "Stable" or "target" in raw
        key = index.get(member_id, member_id)
        if key in described and pending:
            s = settle(s)
            members = dict(s.members)
            index = dict(s.member_index)
        found = members.get(key) if member_id in index else None
        rebuild = rebuild or (found is None and key in members)
        member, owned = _observed(found, raw, member_id, t, with_partitions, classic)
        prior = members.get(member.key)
        if prior is None or prior.lives is not member.lives:
            edited(s, lives_changed_at(prior.lives if prior is not None else (), member.lives))
        members[member.key] = member
        index.setdefault(member_id, member.key)
        if owned is not None:
            pending.append((member.key, owned))
        described.add(member.key)
    return settle(s), described


def _observed(
    found: MemberState | None,
    raw: Mapping[str, Any],
    member_id: str,
    t: int,
    with_partitions: bool,
    classic: bool = False,
) -> tuple[MemberState, Owned | None]:
    """A described member's record, and the partitions to give it (an untraced member
    in a description that carries assignments), else None. `classic`: a classic group's
    description, whose members have no member epoch or target (one that had them while
    the group was a consumer group keeps none)."""
    key = found.key if found is not None else member_id
    # Described again after it was thought gone: alive, its last known reason kept.
    old = (
        (evolve(_revived(found, t), left_reason=found.left_reason) if not found.alive else found)
        if found is not None
        else _new_member(key, t)
    )
    sub = raw.get("subscription")
    target = owned_from(raw["target"]) if "target" in raw else None if classic else old.target
    phase = old.phase
    if with_partitions and "member" not in old.sources:
        reconciled = target is None or dict(target) == dict(owned_from(raw.get("partitions")))
        phase = PHASE_STABLE if reconciled else PHASE_RECONCILING
    member = evolve(
        old,
        member_id=member_id,
        client_id=str(raw.get("client_id", "") or old.client_id),
        host=str(raw.get("host", "") or old.host),
        instance_id=_opt_str(raw.get("instance_id")) or old.instance_id,
        subscription=tuple(str(x) for x in sub) if isinstance(sub, list) else old.subscription,
        last_seen_ms=max(old.last_seen_ms, t),
        phase=phase,
        sources=old.sources if "observer" in old.sources else old.sources | {"observer"},
        epoch=_int(raw.get("member_epoch"), -1 if classic else old.epoch),
        target=target,
        protocol=str(raw.get("member_type") or ("classic" if classic else old.protocol)),
        regex=_opt_str(raw.get("regex")) or old.regex,
    )
    if with_partitions and "partitions" in raw and "member" not in old.sources:
        # A traced member's own events say exactly when it owned what; trust those.
        return member, owned_from(raw["partitions"])
    return member, None


def _observe_member(
    s: GroupState, raw: Mapping[str, Any], member_id: str, t: int, with_partitions: bool
) -> GroupState:
    member, owned = _observed(s.find_member(member_id), raw, member_id, t, with_partitions)
    s = _with_member(s, member)
    if owned is not None:
        s = _set_partitions(s, member.key, owned, t)
    return s


def _apply_lag(s: GroupState, raw: Any, total: Any) -> GroupState:
    if not isinstance(raw, Mapping):
        return s
    lag: dict[str, dict[int, int]] = {}
    for topic, parts in raw.items():
        if isinstance(parts, Mapping):
            lag[str(topic)] = _lag_of_topic(parts)
    members: dict[str, MemberState] = {}
    for key, m in s.members.items():
        total_of_member = 0
        for t, ids in m.partitions.items():
            known = lag.get(t)
            if known:
                total_of_member += sum(map(known.get, ids, repeat(0)))
        members[key] = m if m.lag == total_of_member else evolve(m, lag=total_of_member)
    total_lag = _int(total, -1)
    # The same keys and member ids: the index stays right for the new mapping.
    valid = s.member_index_of is s.members
    return evolve(
        s,
        lag=lag,
        total_lag=total_lag if total_lag >= 0 else sum(sum(v.values()) for v in lag.values()),
        members=members,
        member_index_of=members if valid else None,
    )


def _lag_of_topic(parts: Mapping[Any, Any]) -> dict[int, int]:
    """partition -> lag from one topic's `{"partition": lag}` (a partition or a lag that
    is not a whole number of 0 or more is left out). A description carries 10,000 of
    them a second at 1,000 members: what JSON gives (string keys, int values, all of
    them right) is read in bulk, anything else one by one."""
    keys, values = list(parts.keys()), list(parts.values())
    if {*map(type, keys)} <= {str} and {*map(type, values)} <= {int}:
        try:
            ids = list(map(int, keys))  # (what `_int` does with a string)
        except ValueError:
            pass
        else:
            if not ids or (min(ids) >= 0 and min(values) >= 0):
                return dict(zip(ids, values, strict=True))
    return lag_by_entry(parts)


def lag_by_entry(parts: Mapping[Any, Any]) -> dict[int, int]:
    """`_lag_of_topic`, entry by entry."""
    out: dict[int, int] = {}
    for pid, value in parts.items():
        p, v = _int(pid, -1), _int(value, -1)
        if p >= 0 and v >= 0:
            out[p] = v
    return out


def _on_state_changed(s: GroupState, ev: Event, t: int) -> GroupState:
    to = str(ev.data.get("to", "") or ev.data.get("state", "") or "")
    if not to:
        return s
    s = evolve(s, state=to)
    if to == "PreparingRebalance":
        s = _begin_rebalance(s, t, polled=True)
    elif to in REBALANCING_STATES:
        s = _begin_rebalance(s, t, polled=True)
        rec = s.current
        # The assignment is known from CompletingRebalance / Reconciling on, not Assigning.
        unsynced = rec is not None and rec.stable_ms is None and rec.sync_ms is None
        if rec is not None and unsynced and rec.end_ms is None and to in SYNCING_STATES:
            s = _replace_current(s, evolve(rec, sync_ms=t))
    elif to == "Stable":
        s = _mark_stable(s, t) if s.rebalancing or _current_unstable(s) else s
    elif to in ("Empty", "Dead"):
        s = evolve(s, rebalancing=False)
    return s


def _current_unstable(s: GroupState) -> bool:
    rec = s.current
    return rec is not None and rec.stable_ms is None


def _on_generation_changed(s: GroupState, ev: Event, t: int) -> GroupState:
    d = ev.data
    gen = ev.generation if ev.generation >= 0 else _int(d.get("generation", d.get("to")), -1)
    inferred = bool(d.get("inferred", False))
    if gen < 0:
        return s
    if inferred and s.generations and not s.generation_inferred:
        # Members already report real generations: the observer's numbering adds nothing.
        return s
    stored = bool(d.get("stored_in"))  # the broker's own record of the generation
    if stored and not s.generation_inferred and gen < s.generation:
        return s  # members already reported a newer one
    known_start = s.rebalance_started_ms
    # Whether the rebalance's start was seen (a PreparingRebalance, a member's rejoin):
    # a stored record alone says only when its join phase ended.
    cur = s.current
    seen_start = known_start is not None and (cur is None or known_start > cur.start_ms)
    known = s.generations
    s = _open_generation(s, gen, t, inferred=inferred, data=d)
    opened = s.generations is not known  # (it returns the state as it was for one it has)
    rec = s.current
    if rec is None:
        return s
    # The start first: a stable time found below is never before it (one found at the
    # watch's start is the record's write time, seconds before the watch's clock).
    started = _int(d.get("rebalance_started_ms"), -1)
    if started >= 0 and known_start is None:
        rec = evolve(rec, start_ms=min(started, rec.start_ms))
    traced = any("member" in m.sources for m in s.live_members)
    if stored and opened and not seen_start and not traced:
        ended = _int(d.get("sync_ms"), -1)
        bound = min(rec.start_ms, ended) if ended >= 0 else rec.start_ms
        rec = evolve(rec, start_exact=False, start_ms=bound)
        gens = s.generations
        if len(gens) > 1 and gens[-2].end_ms is not None and gens[-2].end_ms > bound:
            # (the previous generation ended where this one's rebalance began, at the latest)
            s = evolve(s, generations=gens[:-2] + (evolve(gens[-2], end_ms=bound), gens[-1]))
    if stored and rec.generation == gen:
        s, rec = _stored_generation(s, rec, d, t, traced)
    sync = _int(d.get("sync_ms"), -1)
    if sync >= 0 and rec.sync_ms is None:
        rec = evolve(rec, sync_ms=sync)
    stable = _int(d.get("stable_ms"), -1)
    if stable >= 0 and rec.stable_ms is None:
        # A consumer group's stored epoch, dated by its members' assignment records.
        rec = evolve(rec, stable_ms=max(stable, rec.start_ms))
    s = _replace_current(s, rec)
    # `settled`: a consumer group's epoch moved and it had already reconciled by then.
    if (inferred or d.get("settled")) and s.state in ("Stable", "Empty"):
        s = _mark_stable(s, t)
    return s


def _stored_generation(
    s: GroupState, rec: GenerationRecord, d: Mapping[str, Any], t: int, traced: bool
) -> tuple[GroupState, GenerationRecord]:
    """What the broker's stored record adds: leader, assignor, and (unless traced members
    say exactly when they got their share) when the generation was stable."""
    leader_id = str(d.get("leader", "") or "")
    found = s.find_member(leader_id)
    leader = found.key if found is not None else leader_id
    s = evolve(
        s,
        leader=leader or s.leader,
        protocol=str(d.get("protocol", "") or s.protocol),
        protocol_type=str(d.get("protocol_type", "") or s.protocol_type),
    )
    members = _stored_members(s, d)
    rec = evolve(
        rec, leader=leader or rec.leader, members=rec.members if members is None else members
    )
    if rec.stable_ms is None and not traced:
        # Stored when the leader's SyncGroup completed; the broker answers SyncGroup
        # (and says Stable) right after: its write time (the watch reads it later, by
        # seconds for one found when the watch began).
        written = _int(d.get("written_ms"), -1)
        at = written if written > 0 else t
        rec = evolve(rec, stable_ms=max(at, rec.start_ms))
    raws = d.get("members")
    stored_assignments = isinstance(raws, list) and any(
        isinstance(r, Mapping) and "partitions" in r for r in raws
    )
    newer = (
        s.observed_ms is not None and rec.stable_ms is not None and s.observed_ms > rec.stable_ms
    )
    if stored_assignments and not traced and rec.stable_ms is not None and not newer:
        # The record lists the generation's members with the assignment each was given,
        # as a Stable description would: who owned what from when it was stored (so
        # moves and revocations are known between two stored generations). A record
        # read after a newer description (a live watch's reader behind its polls) has
        # nothing to add: the description's owners are the newer.
        assert isinstance(raws, list)
        s, described = _observe_members(s, raws, "Stable", rec.stable_ms)
        for key, m in list(s.members.items()):
            if m.alive and m.sources == frozenset({"observer"}) and key not in described:
                s = _member_gone(s, key, rec.stable_ms, PHASE_LEFT, "not in a later generation")
        rec = evolve(rec, members=tuple(sorted(described)))
    return s, rec


def _stored_members(s: GroupState, d: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The generation's members as its record lists them, by the keys the state knows
    them by (a member not known yet by its member id, the key it will be described
    under). The members described at the moment the record is folded are those of
    another generation when the reader and the polls do not keep pace (the record read
    before the description that shows the new member, or after the one that no longer
    shows the member that left): the record says who this generation's members are
    (none, for an Empty generation). None when the event lists no members."""
    raws = d.get("members")
    if not isinstance(raws, list):
        return None
    keys = set()
    for raw in raws:
        member_id = str(raw.get("member_id", "") or "") if isinstance(raw, Mapping) else ""
        if member_id:
            found = s.find_member(member_id)
            keys.add(found.key if found is not None else member_id)
    return tuple(sorted(keys))


def _on_member_joined(s: GroupState, ev: Event, t: int) -> GroupState:
    raw = dict(ev.data)
    raw.setdefault("client_id", ev.client_id)
    raw.setdefault("host", ev.host)
    raw.setdefault("instance_id", ev.instance_id)
    member_id = str(raw.get("member_id", "") or ev.member_id)
    if not member_id:
        return s
    return _observe_member(s, raw, member_id, t, with_partitions=False)


def _on_member_left(s: GroupState, ev: Event, t: int) -> GroupState:
    member_id = str(ev.data.get("member_id", "") or ev.member_id)
    found = s.find_member(member_id) or s.members.get(ev.member)
    if found is None or not found.alive:
        return s
    reason = str(ev.data.get("reason", "") or "left the group")
    return _member_gone(s, found.key, t, PHASE_LEFT, reason)


def _on_partitions_moved(s: GroupState, ev: Event, t: int) -> GroupState:
    moves = ev.data.get("moves")
    if not isinstance(moves, list):
        return s
    for mv in moves:
        if not isinstance(mv, Mapping):
            continue
        tp = (str(mv.get("topic", "")), _int(mv.get("partition"), -1))
        if tp[1] < 0:
            continue
        src = s.find_member(str(mv.get("from", "") or ""))
        dst = s.find_member(str(mv.get("to", "") or ""))
        # (a traced member's own events say what it owns: asked first, since the
        # observer's moves of a 10,000-partition rebalance each built its owned set)
        if src is not None and "member" not in src.sources:
            src_owned = owned_pairs(src.partitions)
            if tp in src_owned:
                s = _set_pairs(s, src.key, src_owned - {tp}, t)
        if dst is not None and dst.alive and "member" not in dst.sources:
            now_owned = owned_pairs(s.members[dst.key].partitions)
            if tp not in now_owned:
                s = _set_pairs(s, dst.key, now_owned | {tp}, t)
    return s


def _on_attributed(s: GroupState, ev: Event, t: int) -> GroupState:
    d = ev.data
    target = ev.generation if ev.generation >= 0 else _int(d.get("generation"), -1)
    gens = list(s.generations)
    if ev.source == "observer" and gens and not gens[-1].inferred:
        # Members report real generation ids; the observer's numbering differs, so its
        # cause goes to the latest real generation (unless a cause is already known).
        if gens[-1].cause:
            return s
        target = gens[-1].generation
    for i in range(len(gens) - 1, -1, -1):
        if target < 0 or gens[i].generation == target:
            gens[i] = evolve(
                gens[i],
                cause=str(d.get("cause", "") or gens[i].cause),
                cause_guess=bool(d.get("guess", True)),
                evidence=str(d.get("evidence", "") or gens[i].evidence),
            )
            break
    return evolve(s, generations=tuple(gens))


def _on_disconnected(s: GroupState, ev: Event, t: int) -> GroupState:
    return evolve(
        s,
        connected=False,
        disconnected_since_ms=s.disconnected_since_ms or t,
        last_error=str(ev.data.get("error", "") or ""),
    )


def _on_reconnected(s: GroupState, ev: Event, t: int) -> GroupState:
    return evolve(s, connected=True, disconnected_since_ms=None, last_error="")


# -- helpers -----------------------------------------------------------------------------


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _is_error(value: Any) -> bool:
    return bool(value) and str(value) not in ("NONE", "NoError", "None", "0")


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _on_heartbeat_failed(s: GroupState, ev: Event, t: int) -> GroupState:
    error = str(ev.data.get("error", "")).lower().replace("_", "")
    return _begin_rebalance(s, t) if "rebalanceinprogress" in error else s


# -- a consumer-protocol member's own events (KIP-848) ------------------------------------

# Java's MemberState -> the fold's phase.
_CONSUMER_PHASES = {
    "JOINING": PHASE_JOINING,
    "FENCED": PHASE_JOINING,
    "RECONCILING": PHASE_RECONCILING,
    "ACKNOWLEDGING": PHASE_RECONCILING,
    "STABLE": PHASE_STABLE,
}


def _consumer_epoch(s: GroupState, key: str, epoch: int, t: int) -> GroupState:
    """A member epoch the broker gave: the member's, and a new group epoch when higher.
    A consumer group's epoch bumps on every membership or subscription change; the
    round it starts is complete when every traced member is STABLE at it."""
    if epoch <= 0:
        return s
    m = s.members[key]
    s = _with_member(s, evolve(m, epoch=epoch, generation=epoch, protocol="consumer"))
    if epoch > s.generation:
        s = _begin_rebalance(s, t)
        s = _open_generation(s, epoch, t, inferred=False, data={})
    m = s.members[key]
    if m.member_state == "STABLE" and not m.reconciling:
        s = _note_completed(s, key, t)
        s = _maybe_stable(s, t)
    return s


def _on_group_heartbeat(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    d = ev.data
    m = s.members[key]
    sent = d.get("sent") if isinstance(d.get("sent"), Mapping) else {}
    assert isinstance(sent, Mapping)
    if _int(sent.get("member_epoch"), -1) == 0 and not m.alive and m.phase != PHASE_FAILED:
        m = _revived(m, t)  # it left (max.poll.interval.ms) and joins again
    m = evolve(m, protocol="consumer")
    if isinstance(sent.get("subscription"), list):
        m = evolve(m, subscription=tuple(str(x) for x in sent["subscription"]))
    if isinstance(sent.get("regex"), str):
        m = evolve(m, regex=sent["regex"] or None)  # "" clears it
    if not _is_error(d.get("error")) and d.get("assignment") is not None:
        m = evolve(m, target=owned_from(d.get("assignment")))
    s = _with_member(s, m)
    if _is_error(d.get("error")):
        return s
    return _consumer_epoch(s, key, _int(d.get("member_epoch"), -1), t)


def _on_consumer_heartbeat(s: GroupState, ev: Event, t: int) -> GroupState:
    """A plain heartbeat; a consumer-protocol member's carries its epoch."""
    if "member_epoch" not in ev.data:
        return s
    return _consumer_epoch(s, _key_for(s, ev), _int(ev.data.get("member_epoch"), -1), t)


def _on_target(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    m = s.members[key]
    return _with_member(s, evolve(m, target=owned_from(ev.data.get("target")), protocol="consumer"))


def _on_reconcile_started(s: GroupState, ev: Event, t: int) -> GroupState:
    s = _begin_rebalance(s, t)
    return _set_phase(s, _key_for(s, ev), PHASE_RECONCILING)


def _on_reconcile_completed(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    return _set_partitions(s, key, owned_from(ev.data.get("assignment")), t)


def _on_member_state(s: GroupState, ev: Event, t: int) -> GroupState:
    key = _key_for(s, ev)
    m = s.members[key]
    state = str(ev.data.get("state", "") or "")
    if state == "JOINING" and not m.alive and m.phase != PHASE_FAILED:
        m = _revived(m, t)  # back after leaving on max.poll.interval.ms
    m = evolve(m, member_state=state, protocol="consumer")
    s = _with_member(s, m)
    phase = _CONSUMER_PHASES.get(state)
    if phase is None or not m.alive:
        return s
    s = _set_phase(s, key, phase)
    if state in ("JOINING", "FENCED"):
        return _begin_rebalance(s, t)
    if state == "STABLE":
        return _maybe_stable(_note_completed(s, key, t), t)
    return s


def _on_fenced(s: GroupState, ev: Event, t: int) -> GroupState:
    return _begin_rebalance(s, t)


_Handler = Callable[[GroupState, Event, int], GroupState]

_HANDLERS: dict[str, _Handler] = {
    "RejoinRequested": _on_rebalance_hint,
    "JoinPrepared": _on_rebalance_hint,
    "JoinGroupSent": _on_join_sent,
    "JoinGroupReceived": _on_join_received,
    "SyncGroupSent": _on_sync_received,
    "SyncGroupReceived": _on_sync_received,
    "JoinCompleted": _on_join_completed,
    "PartitionsAssigned": _on_assigned,
    "PartitionsRevoked": _on_revoked,
    "PartitionsLost": _on_revoked,
    "HeartbeatFailed": _on_heartbeat_failed,
    "HeartbeatSucceeded": _on_consumer_heartbeat,
    "GroupHeartbeatAnswered": _on_group_heartbeat,
    "TargetAssignmentReceived": _on_target,
    "ReconciliationStarted": _on_reconcile_started,
    "ReconciliationCompleted": _on_reconcile_completed,
    "MemberStateChanged": _on_member_state,
    "MemberFenced": _on_fenced,
    "GenerationReset": _on_generation_reset,
    "LeaveGroupSent": _on_leave,
    "MemberStopped": _on_stopped,
    "MemberFailed": _on_failed,
    "MemberStarted": _on_started,
    "GroupObserved": _on_group_observed,
    "GroupStateChanged": _on_state_changed,
    "GenerationChanged": _on_generation_changed,
    "MemberJoinedGroup": _on_member_joined,
    "MemberLeftGroup": _on_member_left,
    "PartitionsMoved": _on_partitions_moved,
    "RebalanceAttributed": _on_attributed,
    "BrokerDisconnected": _on_disconnected,
    "BrokerReconnected": _on_reconnected,
}

# Member-sourced types that identify a member (chaos and observer types do not).
_MEMBER_TYPES = frozenset(
    name
    for name in (
        "MemberStarted TopicMissing RejoinRequested CoordinatorLookupSent CoordinatorFound "
        "CoordinatorLost JoinPrepared PartitionsRevoked JoinGroupSent JoinGroupReceived "
        "AssignmentComputed SyncGroupSent SyncGroupReceived JoinCompleted PartitionsAssigned "
        "PartitionsLost JoinFailed HeartbeatSucceeded HeartbeatFailed GenerationReset "
        "PollIntervalExceeded RecordsConsumed OffsetsCommitted OffsetCommitFailed "
        "ControlReceived LeaveGroupSent MemberFailed MemberStopped "
        "MemberStateChanged GroupHeartbeatAnswered TargetAssignmentReceived "
        "ReconciliationStarted ReconciliationCompleted ReconciliationAborted MemberFenced"
    ).split()
)
