"""Events in time order, with the lookups a diagnosis makes of them.

A diagnosis asks the same events many questions per generation: what was said between
two moments, a member's last word, the steps of a few types. At 1,000 members a live
view keeps some 200,000 events, nine in ten of them routine (records, heartbeats,
commits, descriptions), and a pass over all of them per question cost seconds per
diagnosis. The index answers each question from the events it concerns: by time
(bisection), by type, by member. Built once per diagnosis, read-only after; pure.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any, TypeVar, overload

from kgctl.model.event_types import EventType
from kgctl.model.events import Event

T = TypeVar("T")
_TS = attrgetter("ts_ms")


class _Positions:
    """Where events of one kind sit in the whole (ascending), with their times."""

    __slots__ = ("at", "_ts", "_all_ts")

    def __init__(self, all_ts: list[int]) -> None:
        self.at: list[int] = []
        self._ts: list[int] | None = None
        self._all_ts = all_ts

    def window(self, since: int | None, until: int | None) -> list[int]:
        """Positions of the events with since < ts_ms <= until (None: unbounded)."""
        if since is None and until is None:
            return self.at
        ts = self.ts()
        lo = 0 if since is None else bisect_right(ts, since)
        hi = len(ts) if until is None else bisect_right(ts, until)
        return self.at[lo:hi]

    def ts(self) -> list[int]:
        if self._ts is None:
            every = self._all_ts
            self._ts = [every[i] for i in self.at]
        return self._ts


class EventIndex(Sequence[Event]):
    """The events, sorted by time (stable: events of one instant keep their order), as a
    sequence, plus windows by time, type and member that keep that order."""

    def __init__(self, events: Iterable[Event], ordered: bool = False) -> None:
        self._all: list[Event] = list(events) if ordered else sorted(events, key=_TS)
        self._ts = [e.ts_ms for e in self._all]
        self._types: dict[str, _Positions] = {}
        self._members: dict[str, _Positions] = {}
        types, members, ts = self._types, self._members, self._ts
        for i, e in enumerate(self._all):
            kind = types.get(e.type)
            if kind is None:
                kind = types[e.type] = _Positions(ts)
            kind.at.append(i)
            if e.member:
                mine = members.get(e.member)
                if mine is None:
                    mine = members[e.member] = _Positions(ts)
                mine.at.append(i)
        self._memo: dict[str, Any] = {}

    # -- the sequence ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._all)

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | Sequence[Event]:
        return self._all[i]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._all)

    # -- windows ----------------------------------------------------------------------------

    def between(self, since: int | None = None, until: int | None = None) -> list[Event]:
        """Every event with since < ts_ms <= until (None: unbounded)."""
        lo = 0 if since is None else bisect_right(self._ts, since)
        hi = len(self._ts) if until is None else bisect_right(self._ts, until)
        return self._all[lo:hi]

    def of(
        self, *types: EventType, since: int | None = None, until: int | None = None
    ) -> list[Event]:
        """The events of these types in since < ts_ms <= until, in order."""
        return self._of_names(types, since, until)

    def _of_names(self, types: Iterable[str], since: int | None, until: int | None) -> list[Event]:
        found = [self._types[t].window(since, until) for t in types if t in self._types]
        return self._at(found)

    def excluding(
        self, types: Collection[EventType], since: int | None = None, until: int | None = None
    ) -> list[Event]:
        """The events of any other type in since < ts_ms <= until, in order."""
        # Every other type seen, catalogued or not (a newer recording's): not EventType.
        return self._of_names((t for t in self._types if t not in types), since, until)

    def by(self, member: str, since: int | None = None, until: int | None = None) -> list[Event]:
        """`member`'s events (its `member` field) in since < ts_ms <= until, in order."""
        mine = self._members.get(member)
        return [] if mine is None else [self._all[i] for i in mine.window(since, until)]

    def last_ts_by(self, member: str, until: int) -> int | None:
        """When `member`'s last event up to `until` was stamped."""
        mine = self._members.get(member)
        if mine is None:
            return None
        ts = mine.ts()
        k = bisect_right(ts, until)
        return ts[k - 1] if k else None

    def memo(self, key: str, build: Callable[[EventIndex], T]) -> T:
        """What `build` derives from these events, derived once: a diagnosis asks the same
        of every generation (the events with an instance id, each member's batches)."""
        if key not in self._memo:
            self._memo[key] = build(self)
        found: T = self._memo[key]
        return found

    def _at(self, found: list[list[int]]) -> list[Event]:
        if not found:
            return []
        picked = found[0] if len(found) == 1 else sorted(i for part in found for i in part)
        return [self._all[i] for i in picked]


def index(events: Sequence[Event]) -> EventIndex:
    """`events` indexed (sorted by time), or themselves when they already are."""
    return events if isinstance(events, EventIndex) else EventIndex(events)
