"""Pure checks chaos runs over the group state and what it produced (no I/O, no clock).

The model's own invariants (kgctl/model/invariants.py) judge ownership and generations,
with what the run excuses (`excused_by`: members frozen, cut off or fenced, whose
overlap with their stale ownership is the broker's view, not a double consumption);
these add what only a chaos run knows: when a killed member's partitions found a new
owner, and the records it produced and its members consumed and committed. What a step did to the
group is judged in kgctl/chaos/verdict.py, from the model's timeline queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kgctl.model.state import GroupState, TopicPartition


def first_owner_after(
    state: GroupState, tp: TopicPartition, after_ms: int, not_member: str
) -> tuple[str, int] | None:
    """The first (member, time) another member owned `tp` at or after `after_ms`."""
    best: tuple[str, int] | None = None
    for sp in state.ownership.get(tp, ()):
        if sp.member == not_member:
            continue
        end = sp.end_ms
        if end is not None and end <= after_ms:
            continue
        t = max(sp.start_ms, after_ms)
        if best is None or t < best[1]:
            best = (sp.member, t)
    return best


def consumed_coverage(
    batches: Iterable[tuple[str, int, int, int]],
) -> dict[TopicPartition, list[tuple[int, int]]]:
    """(topic, partition, first, last) batches merged into offset ranges per partition."""
    ranges: dict[TopicPartition, list[tuple[int, int]]] = {}
    for topic, partition, first, last in batches:
        ranges.setdefault((topic, partition), []).append((first, last))
    merged: dict[TopicPartition, list[tuple[int, int]]] = {}
    for tp, rs in ranges.items():
        rs.sort()
        out: list[tuple[int, int]] = []
        for s, e in rs:
            if out and s <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        merged[tp] = out
    return merged


def missing_records(
    produced: Iterable[tuple[str, int, int]],
    coverage: Mapping[TopicPartition, list[tuple[int, int]]],
) -> list[tuple[str, int, int]]:
    """Produced (topic, partition, offset) that no member consumed."""
    out = []
    for topic, partition, offset in produced:
        if not any(s <= offset <= e for s, e in coverage.get((topic, partition), ())):
            out.append((topic, partition, offset))
    return sorted(out)


def duplicate_count(batches: Iterable[tuple[str, int, int, int]]) -> int:
    """Records delivered more than once, across all members (each extra delivery counts)."""
    union: dict[TopicPartition, list[tuple[int, int]]] = {}
    total = 0
    for topic, partition, first, last in batches:
        ranges = union.setdefault((topic, partition), [])
        for s, e in ranges:  # kept disjoint, so overlaps add up exactly
            lo, hi = max(s, first), min(e, last)
            if hi >= lo:
                total += hi - lo + 1
        ranges.append((first, last))
        union[(topic, partition)] = consumed_coverage((topic, partition, a, b) for a, b in ranges)[
            (topic, partition)
        ]
    return total


# (ms the commit was sent, member, partition, offset committed, what that member had
# consumed up to)
Commit = tuple[int, str, TopicPartition, int, int]


def commit_violations(log: Iterable[Commit]) -> list[tuple[str, str, int, str, str]]:
    """Committed offsets never go backwards and never pass the committer's position
    (what it consumed, or the committed offset it started from).

    Judged in the members' own time order (each commit when it was sent), not arrival
    order: members' event streams interleave, so a new owner's commit can arrive before
    the previous owner's commit it started from.
    Returns (rule, message, ts_ms, member, partition) tuples.
    """
    out: list[tuple[str, str, int, str, str]] = []
    committed: dict[TopicPartition, int] = {}
    # Within one millisecond: lower offsets first, and a commit its member consumed
    # up to before one that relies on it.
    for ts, member, tp, offset, own in sorted(log, key=lambda c: (c[0], c[3], c[4] < c[3])):
        before = committed.get(tp)
        where = f"{tp[0]}-{tp[1]}"
        if before is not None and offset < before:
            out.append(
                ("commits-monotonic", f"{member} committed {where} at {offset}, behind {before}",
                 ts, member, where)
            )  # fmt: skip
        position = max(own, before or 0)
        if offset > position:
            out.append(
                ("commit-not-ahead",
                 f"{member} committed {where} at {offset}, ahead of its position {position}",
                 ts, member, where)
            )  # fmt: skip
        committed[tp] = max(offset, before or 0)
    return out
