"""Pure checks over a group state and its ownership history, used by chaos and tests.

1. Exclusive ownership: no partition is owned by two members at the same instant
   (checked over the whole history).
2. Complete ownership once stable: every known partition has exactly one live owner.
3. One generation once stable: every live member reports the same generation.

Checks 2 and 3 judge the state as it is now; call them when the group is stable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kgctl.model.state import GroupState, TopicPartition


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
                        Violation(
                            rule="exclusive-ownership",
                            message=(
                                f"{topic}-{pid} owned by both {a.member} (since "
                                f"{a.start_ms}) and {b.member} (since {b.start_ms})"
                            ),
                            at_ms=b.start_ms,
                            members=(a.member, b.member),
                            topic=topic,
                            partition=pid,
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
