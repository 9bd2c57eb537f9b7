"""What a rebalance cost each member: its time without partitions and the records it did
not consume meanwhile (the lag growth the broker described, else its measured rate)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kgctl.model.diagnosis.rejoins import aftermath, answered_unchanged, lead_up_since
from kgctl.model.diagnosis.types import ESTIMATED_RATE, MEASURED_LAG, Cost
from kgctl.model.event_index import EventIndex
from kgctl.model.events import Event
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
    TopicPartition,
)
from kgctl.model.timeline import owners_at, rebalance_unassigned, unassigned_basis


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
    observed: _LagDescriptions,
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
    observed: _LagDescriptions,
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


def _batches_by_member(events: EventIndex) -> dict[str, list[Event]]:
    """Each member's RecordsConsumed events."""
    out: dict[str, list[Event]] = {}
    for e in events.of("RecordsConsumed"):
        # (not `setdefault`: it made a list per event, of some 100,000 at 1,000 members)
        mine = out.get(e.member)
        if mine is None:
            mine = out[e.member] = []
        mine.append(e)
    return out


@dataclass(frozen=True)
class _LagDescriptions:
    """The broker's descriptions that carry the lag, with their times (ascending)."""

    events: list[Event]
    ts: list[int]


def _lag_descriptions(events: EventIndex) -> _LagDescriptions:
    found = [e for e in events.of("GroupObserved") if isinstance(e.data.get("lag"), Mapping)]
    return _LagDescriptions(found, [e.ts_ms for e in found])


def _eager_unassigned(
    events: EventIndex, rec: GenerationRecord, key: str, since: int, t1: int
) -> int | None:
    """How long a silent eager member owned nothing: from its revocation, as it sent a
    JoinGroup, to the assignment its next SyncGroup answer gave (or the group stable).
    It may rejoin more than once in a rebalance: a JoinGroup answered NOT_COORDINATOR is
    sent again (it revoked at the first), one answered with the generation the group was
    in gets its partitions back before it revokes them again for the rebalance, and one
    sent once it had its assignment, answered with this generation, gives that back
    (each time from a JoinGroup to an assignment counts). None when no JoinGroup was
    seen."""
    total, empty_since, sent = 0, None, False
    for e in events.by(key, since=since, until=t1):
        if e.type == "JoinGroupSent" and empty_since is None:
            empty_since, sent = e.ts_ms, True
        elif e.type == "JoinCompleted" and empty_since is not None:
            total += max(0, e.ts_ms - empty_since)
            empty_since = None
    if not sent:
        return None
    return total + (max(0, t1 - empty_since) if empty_since is not None else 0)


def _unassigned_after(
    events: EventIndex, rec: GenerationRecord, key: str, since: int, until: int
) -> int:
    """How long a silent eager member owned nothing after the rebalance, in (since,
    until]: from each rejoin the broker answered with `rec`'s generation unchanged to the
    SyncGroup answer that gave its partitions back (rejoins.py's aftermath). A rejoin
    whose answer is not seen yet counts nothing (the wire's time is a lower bound)."""
    total, empty_since = 0, None
    for e in events.by(key, since=since, until=until):
        if (
            e.type == "JoinGroupSent"
            and empty_since is None
            and e.data.get("member_id")
            and answered_unchanged(events, e, rec.generation)
        ):
            empty_since = e.ts_ms
        elif e.type == "JoinCompleted" and e.generation == rec.generation:
            if empty_since is not None:
                total += max(0, e.ts_ms - empty_since)
            empty_since = None
    return total


def member_costs(
    events: EventIndex,
    state: GroupState,
    rec: GenerationRecord,
    now_ms: int,
    *,
    eager: frozenset[str] = frozenset(),
) -> tuple[Cost, ...]:
    """Each member's cost. `eager`: silent members the eager protocol left with nothing
    from their JoinGroup (else, seen by polls, the rebalance's start) to their new
    assignment. A member known only from the broker's
    descriptions and records, none of them made during the rebalance, has no cost: when
    it lost and got its partitions is not known (only when they were stored)."""
    # Indexed once for all members (per member, each was a pass over every event or
    # partition: a generation of N members cost N × events).
    consumed = events.memo("consumed", _batches_by_member)
    observed = events.memo("observed", _lag_descriptions)
    out = []
    t0, t1 = rec.rebalance_window(now_ms)
    owned_before: dict[str, list[TopicPartition]] = {}
    for tp, who in owners_at(state, t0 - 1).items():
        for k in who:
            owned_before.setdefault(k, []).append(tp)
    parsed: dict[int, dict[TopicPartition, int]] = {}
    unassigned = rebalance_unassigned(state, rec, now_ms)
    # (`since` is exclusive: the description that showed the rebalance begin, at t0, is one.)
    polled = bool(events.of("GroupObserved", since=t0 - 1, until=t1))
    if not polled:
        unassigned = {
            k: ms
            for k, ms in unassigned.items()
            if k not in state.members or state.members[k].sources != frozenset({"observer"})
        }
    # A JoinGroup after the previous generation was stable is one of this rebalance,
    # unless it was the previous rebalance's aftermath (rejoins.py).
    i = state.generations.index(rec)
    prev = state.generations[i - 1] if i > 0 else None
    since = t0
    if prev is not None and prev.stable_ms is not None:
        since = lead_up_since(state, prev, now_ms)
    window = aftermath(state, rec, now_ms)
    for key in eager:
        eager_ms = _eager_unassigned(events, rec, key, min(since + 1, t0), t1)
        if window is not None and (later := _unassigned_after(events, rec, key, *window)):
            eager_ms = (eager_ms or 0) + later
        if eager_ms is None and polled:
            # Seen by polls only: the rebalance as they saw it begin and end (an eager
            # member revokes as it learns of it, within a heartbeat of its start).
            eager_ms = t1 - t0
        if eager_ms is not None:
            unassigned[key] = max(unassigned.get(key, 0), eager_ms)
    for key, ms in sorted(unassigned.items()):
        # Named as the views name it (an untraced member by its client id).
        member = state.members[key].name if key in state.members else key
        cost = Cost(member=member, unassigned_ms=ms, unassigned_basis=unassigned_basis(state, key))
        grown = _lag_growth(observed, owned_before.get(key, ()), t0, t0 + ms, parsed)
        if grown is not None:
            cost = replace(cost, records_missed=grown, records_basis=MEASURED_LAG)
        elif (rate := _rate_per_ms(consumed, key, rec.start_ms, 10_000)) is not None:
            cost = replace(cost, records_missed=round(rate * ms), records_basis=ESTIMATED_RATE)
        out.append(cost)
    return tuple(out)
