"""Per-group rebalance accounting: a pure fold from a group's monitor events to its tally.

No I/O, no clock (`now_ms` is passed in), nothing of Kafka: the monitor turns each
completed, diagnosed rebalance into a `Rebalance`, and a deleted group into a
`GroupDeleted`; `tally` folds them. A generation is counted once per incarnation of the
group and protocol: the same record read again (the history replayed at start, a poll
after the record) is not a second rebalance, a mixed group's classic generation is not
its consumer group's epoch of the same number, and a group deleted and created again
starts its generations over without losing its counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

Protocol = Literal["classic", "consumer"]
HOUR_MS = 3_600_000
FIVE_MIN_MS = 300_000
# The end times kept for the 5-minute and hour windows: a group rebalancing more often
# than this an hour is shown as at least this many (memory stays bounded).
RECENT_LIMIT = 1_000
# The wait of a member the rebalance waited for until its session timed out.
WAIT_DEAD = "dead"


@dataclass(frozen=True)
class WaitSeen:
    """One member a phase of the rebalance waited for, and why (diagnosis' words)."""

    member: str
    ms: int
    why: str


@dataclass(frozen=True)
class Rebalance:
    """One completed rebalance of a group, as its diagnosis tells it."""

    group: str
    generation: int  # the generation it produced (a consumer group's epoch)
    protocol: Protocol
    cause: str  # a `Cause` value, as explain names the trigger
    confidence: str  # exact | inferred
    ended_ms: int  # when the group was stable again
    duration_ms: int | None  # None when its start was not seen (only its record)
    unassigned_ms: tuple[int, ...] = ()  # each member's time without partitions
    waits: tuple[WaitSeen, ...] = ()
    trigger: str = ""  # the trigger in words

    @property
    def longest_wait_ms(self) -> int:
        return max((w.ms for w in self.waits), default=0)

    @property
    def session_timeout_waits(self) -> int:
        """Members it waited for until their session timed out."""
        return sum(1 for w in self.waits if w.why == WAIT_DEAD)


@dataclass(frozen=True)
class GroupDeleted:
    """The group was deleted (a tombstone, or gone from the listing)."""

    group: str
    at_ms: int


MonitorEvent = Rebalance | GroupDeleted


@dataclass(frozen=True)
class GroupTally:
    """What the monitor has counted for one group."""

    group: str
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (cause, protocol)
    recent: tuple[int, ...] = ()  # end times within the last hour, oldest first
    # The newest generation counted in this incarnation, by protocol: a mixed group's
    # classic generation N and its consumer group's epoch N are two rebalances (the way
    # back writes the classic group at the consumer group's last epoch).
    counted: Mapping[str, int] = field(default_factory=dict)
    last: Rebalance | None = None
    longest_wait_ms: int = 0  # the longest wait of any rebalance counted
    session_timeout_waits: int = 0
    deletions: int = 0

    @property
    def counted_generation(self) -> int:
        """The newest generation counted in this incarnation, of either protocol."""
        return max(self.counted.values(), default=-1)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def tally(t: GroupTally | None, event: MonitorEvent, now_ms: int) -> GroupTally:
    """The group's tally after `event`."""
    t = t if t is not None else GroupTally(event.group)
    if isinstance(event, GroupDeleted):
        return replace(t, counted={}, deletions=t.deletions + 1)
    if event.generation <= t.counted.get(event.protocol, -1):
        return t  # already counted (read again), or older than what was counted
    key = (event.cause, event.protocol)
    counts = dict(t.counts)
    counts[key] = counts.get(key, 0) + 1
    recent = _window(t.recent + (event.ended_ms,), now_ms)
    return replace(
        t,
        counts=counts,
        recent=recent,
        counted={**t.counted, event.protocol: event.generation},
        last=event,
        longest_wait_ms=max(t.longest_wait_ms, event.longest_wait_ms),
        session_timeout_waits=t.session_timeout_waits + event.session_timeout_waits,
    )


def _window(ends: tuple[int, ...], now_ms: int) -> tuple[int, ...]:
    kept = tuple(sorted(e for e in ends if e > now_ms - HOUR_MS))
    return kept[-RECENT_LIMIT:]


def within(t: GroupTally, now_ms: int, window_ms: int) -> int:
    """Rebalances that ended in the last `window_ms` (at most an hour)."""
    return sum(1 for e in t.recent if now_ms - window_ms < e <= now_ms)


def by_churn(tallies: Iterable[GroupTally], now_ms: int) -> list[GroupTally]:
    """Most rebalances in the last 5 minutes first, then the last hour, then ever."""
    return sorted(
        tallies,
        key=lambda t: (
            -within(t, now_ms, FIVE_MIN_MS),
            -within(t, now_ms, HOUR_MS),
            -t.total,
            t.group,
        ),
    )
