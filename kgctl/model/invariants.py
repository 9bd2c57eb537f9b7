"""Pure checks over a group state and its ownership history, used by chaos and tests.

1. Exclusive ownership: no partition is owned by two members at the same instant
   (checked over the whole history).
2. Complete ownership once stable: every known partition has exactly one live owner.
3. One generation once stable: every live member reports the same generation.

Checks 2 and 3 judge the state as it is now; call them when the group is stable.

What they mean on the consumer protocol (KIP-848), where members reconcile one by one
and each carries its own member epoch instead of one generation for all:

4. Single owner at every epoch: a partition passes from one member to another only at
   a newer epoch (its new owner's epoch above the one its previous owner took it at);
   two members holding it at one epoch is two owners (over the whole history).
5. Revoked before assigned: a partition's next owner takes it only after its previous
   owner revoked it (or lost it, or left); the broker withholds it until then.
6. No member without partitions unless reconciling: once the group is stable and there
   are at least as many partitions as members, every member owns some.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kgctl.model.state import PHASE_RECONCILING, GroupState, OwnershipSpan, TopicPartition
from kgctl.model.timeline import utc_clock


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which rule, who, which partition, when."""

    rule: str  # exclusive-ownership | complete-ownership | single-generation
    message: str
    at_ms: int
    members: tuple[str, ...] = ()
    topic: str = ""
    partition: int = -1

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "message": self.message,
            "at_ms": self.at_ms,
            "members": list(self.members),
            "topic": self.topic,
            "partition": self.partition,
        }


def _between(
    rule: str, tp: TopicPartition, a: OwnershipSpan, b: OwnershipSpan, message: str
) -> Violation:
    """A violation between a partition's owner `a` and the member `b` that took it,
    dated when `b` took it (the three ownership checks judge such pairs)."""
    topic, pid = tp
    return Violation(
        rule=rule,
        message=message,
        at_ms=b.start_ms,
        members=(a.member, b.member),
        topic=topic,
        partition=pid,
    )


Interval = tuple[int, int | None]  # ms, from start to end (None: still)


def excused_by(excused: Mapping[str, Sequence[Interval]]) -> Callable[[str, int], bool]:
    """For the exclusive-ownership check (and consumption outside the assignment): an
    overlap is excused when, at its start, the older owner was frozen (SIGSTOP), cut off
    from its coordinator by a fault, or already fenced by the broker: it holds the
    partition only in its own stale view. A chaos run knows when (and records it in its
    ScenarioFinished, which `kgctl report` reads back)."""
    return lambda member, at_ms: any(
        start <= at_ms and (end is None or at_ms <= end) for start, end in excused.get(member, ())
    )


def check_exclusive_ownership(
    state: GroupState, excused: Callable[[str, int], bool] | None = None
) -> list[Violation]:
    """Every instant where two members owned the same partition (spans overlapping).

    `excused(older_owner, at_ms)` lets a caller that knows more (chaos knows which
    members were frozen or fenced) drop overlaps with an owner that could not act.
    """
    out: list[Violation] = []
    for (topic, pid), spans in sorted(state.ownership.items()):
        ordered = sorted(spans, key=lambda sp: (sp.start_ms, sp.member))
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                if a.member == b.member:
                    continue
                # b starts at or after a; they overlap if a is still open when b starts.
                if a.end_ms is None or a.end_ms > b.start_ms:
                    if excused is not None and excused(a.member, b.start_ms):
                        continue
                    out.append(
                        _between(
                            "exclusive-ownership",
                            (topic, pid),
                            a,
                            b,
                            f"{topic}-{pid} owned by both {a.member} (since "
                            f"{utc_clock(a.start_ms)} UTC) and {b.member} (since "
                            f"{utc_clock(b.start_ms)} UTC)",
                        )
                    )
    return out


def check_complete_ownership(
    state: GroupState, now_ms: int, expected: Iterable[TopicPartition] | None = None
) -> list[Violation]:
    """Every expected partition (default: every partition ever owned) has one live owner."""
    live = {m.key for m in state.live_members}
    owners = state.owners()
    partitions = sorted(set(expected) if expected is not None else set(owners))
    out: list[Violation] = []
    for topic, pid in partitions:
        holders = tuple(sorted(m for m in owners.get((topic, pid), ()) if m in live))
        if len(holders) == 1:
            continue
        what = "no live owner" if not holders else f"{len(holders)} owners"
        out.append(
            Violation(
                rule="complete-ownership",
                message=f"{topic}-{pid} has {what} in a stable group"
                + (f": {', '.join(holders)}" if holders else ""),
                at_ms=now_ms,
                members=holders,
                topic=topic,
                partition=pid,
            )
        )
    return out


def check_single_generation(state: GroupState, now_ms: int) -> list[Violation]:
    """Every live member that reports a generation reports the same one."""
    gens: dict[int, list[str]] = {}
    for m in state.live_members:
        if m.generation >= 0:
            gens.setdefault(m.generation, []).append(m.key)
    if len(gens) <= 1:
        return []
    newest = max(gens)
    out: list[Violation] = []
    for gen, keys in sorted(gens.items()):
        if gen == newest:
            continue
        for key in sorted(keys):
            out.append(
                Violation(
                    rule="single-generation",
                    message=f"{key} is on generation {gen} while the group is on {newest}",
                    at_ms=now_ms,
                    members=(key,),
                )
            )
    return out


def check_stable_group(
    state: GroupState, now_ms: int, expected: Iterable[TopicPartition] | None = None
) -> list[Violation]:
    """All three checks; call once the group is believed stable."""
    return (
        check_exclusive_ownership(state)
        + check_complete_ownership(state, now_ms, expected)
        + check_single_generation(state, now_ms)
    )


def _handovers(
    state: GroupState,
) -> list[tuple[TopicPartition, OwnershipSpan, OwnershipSpan]]:
    """Each change of a partition's owner: (partition, previous span, next span), the
    next span being the first of another member to start after the previous one."""
    out = []
    for tp, spans in sorted(state.ownership.items()):
        ordered = sorted(spans, key=lambda sp: (sp.start_ms, sp.member))
        for i, a in enumerate(ordered):
            nxt = next((b for b in ordered[i + 1 :] if b.member != a.member), None)
            if nxt is not None:
                out.append((tp, a, nxt))
    return out


def check_epoch_order(state: GroupState, unknown: Iterable[str] = ()) -> list[Violation]:
    """Single owner at every epoch: each handover goes to a newer epoch. Spans of members
    in `unknown` (they report no epoch) or with no epoch are not judged."""
    skip = set(unknown)
    out: list[Violation] = []
    for (topic, pid), a, b in _handovers(state):
        if a.member in skip or b.member in skip or a.generation < 0 or b.generation < 0:
            continue
        if b.generation > a.generation:
            continue
        out.append(
            _between(
                "single-owner-per-epoch",
                (topic, pid),
                a,
                b,
                f"{topic}-{pid} went from {a.member} (epoch {a.generation}) to "
                f"{b.member} at epoch {b.generation}: two owners at one epoch",
            )
        )
    return out


def check_revoked_before_assigned(
    state: GroupState, excused: Callable[[str, int], bool] | None = None
) -> list[Violation]:
    """Each handover: the previous owner gave the partition up (revoked, lost, or left)
    before its next owner took it. `excused(previous_owner, at_ms)` as for
    `check_exclusive_ownership` (a frozen or cut-off owner that could not act)."""
    out: list[Violation] = []
    for (topic, pid), a, b in _handovers(state):
        if a.end_ms is not None and a.end_ms <= b.start_ms:
            continue
        if excused is not None and excused(a.member, b.start_ms):
            continue
        when = (
            "still owned it" if a.end_ms is None else f"gave it up {a.end_ms - b.start_ms} ms later"
        )
        out.append(
            _between(
                "revoked-before-assigned",
                (topic, pid),
                a,
                b,
                f"{topic}-{pid} assigned to {b.member} while {a.member} {when}",
            )
        )
    return out


def check_idle_members(
    state: GroupState, names: Iterable[str], partitions: int, reconciling: Iterable[str] = ()
) -> list[Violation]:
    """No member without partitions unless reconciling, in a stable group: when there are
    at least as many `partitions` as live members among `names`, each owns some, except a
    member known to be reconciling (its target differs from what it owns, or the caller
    says so in `reconciling`)."""
    live = [state.members[n] for n in names if n in state.members and state.members[n].alive]
    if partitions < len(live):
        return []
    moving = set(reconciling)
    out: list[Violation] = []
    for m in live:
        if m.partitions or m.reconciling or m.phase == PHASE_RECONCILING or m.key in moving:
            continue
        out.append(
            Violation(
                rule="no-idle-member",
                message=(
                    f"{m.key} owns no partition in a stable group of {len(live)} members "
                    f"over {partitions} partitions, and is not reconciling"
                ),
                at_ms=state.updated_ms,
                members=(m.key,),
            )
        )
    return out
