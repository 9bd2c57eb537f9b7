"""What the member consumed and committed, for RecordsConsumed and MemberStopped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ConsumeStats:
    """Per-partition progress; a record at or below the highest offset seen is a duplicate."""

    records: int = 0
    duplicates: int = 0
    highest: dict[tuple[str, int], int] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)

    def add_batch(self, topic: str, partition: int, offsets: list[int]) -> dict[str, Any]:
        """Record one partition's records of a poll; return its RecordsConsumed entry."""
        key = (topic, partition)
        dup = 0
        for offset in offsets:
            seen = self.highest.get(key)
            if seen is not None and offset <= seen:
                dup += 1
            else:
                self.highest[key] = offset
        self.records += len(offsets)
        self.duplicates += dup
        return {
            "topic": topic,
            "partition": partition,
            "first": min(offsets),
            "last": max(offsets),
            "count": len(offsets),
            "duplicates": dup,
        }

    def add_commit(self, offsets: dict[tuple[str, int], int]) -> None:
        self.committed.update(offsets)

    def totals(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "duplicates": self.duplicates,
            "committed": offsets_doc(self.committed),
            "consumed_up_to": offsets_doc({k: v + 1 for k, v in self.highest.items()}),
        }


def offsets_doc(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} as JSON: {topic: {"partition": offset}}."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out
