"""`kgctl explain`'s answer: the group's recent rebalances, diagnosed, newest first, and
whether the group is healthy now. Pure: events and what else is known in, one
`Explanation` out (the diagnosis itself is kgctl/model/diagnosis/)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgctl.model.diagnosis import (
    Context,
    Diagnosis,
    Replacement,
    Restart,
    diagnose,
    replacements,
    restarts,
)
from kgctl.model.diagnosis.faults import unfollowed_faults
from kgctl.model.event_index import index
from kgctl.model.events import Event
from kgctl.model.fold import fold_many
from kgctl.model.state import REBALANCING_STATES, GroupState
from kgctl.model.timeline import plural
from kgctl.model.wire import member_steps


@dataclass(frozen=True)
class Explanation:
    """The last rebalances of one group, newest first, and its health now."""

    group: str
    now_ms: int
    sources: tuple[str, ...]
    generations: tuple[Diagnosis, ...]  # newest first
    healthy: bool
    health: str  # the state now, in words
    notes: tuple[str, ...] = ()
    total: int = 0  # generations known before --last/--since cut them
    restarts: tuple[Restart, ...] = ()  # members that stopped and came back, newest first
    # static members whose instance id another process took, newest first
    replaced: tuple[Replacement, ...] = ()
    state: GroupState = field(default_factory=lambda: GroupState(""), repr=False)

    def to_dict(self) -> dict[str, Any]:
        s = self.state
        return {
            "group": self.group,
            "now_ms": self.now_ms,
            "sources": list(self.sources),
            "healthy": self.healthy,
            "health": self.health,
            "state": {
                "state": s.state,
                "generation": s.generation,
                "generation_inferred": s.generation_inferred,
                "protocol_type": s.protocol_type,
                "protocol": s.protocol,
                "group_type": s.group_type,
                "group_epoch": s.group_epoch,
                "assignment_epoch": s.assignment_epoch,
                "coordinator": s.coordinator,
                "leader": s.leader,
                "members": [
                    {
                        "member": m.name,
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "instance_id": m.instance_id,
                        "partitions": {t: list(ids) for t, ids in m.partitions.items()},
                        "epoch": m.epoch,
                        "lag": m.lag,
                    }
                    for m in s.live_members
                ],
                "total_lag": s.total_lag,
            },
            "generations": [d.to_dict() for d in self.generations],
            "generations_known": self.total,
            "restarts": [r.to_dict() for r in self.restarts],
            "replaced": [r.to_dict() for r in self.replaced],
            "notes": list(self.notes),
        }


def health_of(state: GroupState, live: bool) -> tuple[bool, str]:
    """Healthy: the group exists, has live members and no rebalance is running (as the
    broker says now when `live`, else as the events ended)."""
    if state.missing:
        return False, "the group does not exist (`kgctl watch` without a group lists them)"
    if not state.live_members:
        return False, "no live member: nothing consumes"
    if state.state in REBALANCING_STATES or state.rebalancing:
        return False, f"rebalancing ({state.state})"
    when = "now" if live else "at the end of the events"
    # A consumer-protocol (KIP-848) group has epochs, not generations.
    where = (
        f"group epoch {state.group_epoch}"
        if state.group_type == "consumer" or state.group_epoch >= 0
        else f"generation {state.generation}"
    )
    return True, f"stable {when}, {plural(len(state.live_members), 'member')} in {where}"


def explain(
    group: str,
    events: Sequence[Event],
    now_ms: int,
    ctx: Context | None = None,
    *,
    last: int | None = None,
    since_ms: int | None = None,
    sources: Sequence[str] = (),
    live: bool = False,
    notes: Sequence[str] = (),
) -> Explanation:
    """Fold `events` of `group` (any order) and diagnose its generations."""
    # A proxy's trace of clients that report nothing themselves counts as their steps.
    mine = member_steps(e for e in events if e.group == group)
    ordered = sorted(mine, key=lambda e: e.ts_ms)
    state = fold_many(GroupState(group, log_limit=0), ((ev, ev.ts_ms) for ev in ordered))
    diags = diagnose(state, ordered, now_ms, ctx)
    notes = [*notes, *unfollowed_faults(index(ordered), diags)]
    total = len(diags)
    chosen = [d for d in diags if since_ms is None or (d.stable_ms or d.start_ms) >= since_ms]
    if last is not None:
        chosen = chosen[-last:] if last > 0 else []
    back = [r for r in restarts(state, ordered) if since_ms is None or r.back_ms >= since_ms]
    taken = [r for r in replacements(state, ordered) if since_ms is None or r.at_ms >= since_ms]
    healthy, health = health_of(state, live)
    return Explanation(
        group=group,
        now_ms=now_ms,
        sources=tuple(sources),
        generations=tuple(reversed(chosen)),
        healthy=healthy,
        health=health,
        notes=tuple(notes),
        total=total,
        restarts=tuple(reversed(back)),
        replaced=tuple(reversed(taken)),
        state=state,
    )
