"""Which groups a round of the monitor describes.

Describing every group at every interval costs the monitor and the coordinators in
proportion to the groups the cluster has, most of them idle. What changes a group's
story is visible without describing it: ListGroups (v4+) gives every group's state in
one request per broker, and `__consumer_offsets` has a record for each classic
generation. So a round describes only the groups where something may have happened:

- a group never described (new, or just given to this monitor);
- a group listed in a state other than the one its last description showed, or in a
  rebalance (what its members wait for is only in its description);
- a group with a record read since its last description (a rebalance can start and end
  between two listings: a classic group's generation record says it did, a consumer
  group's epoch and member records too);
- every group listed without a type (Kafka 3.7), and every group when the listing has no
  states or the log is not read;
- every group once per sweep (30 s), for what neither source shows, a share of them
  each round.

A record read also wakes the poll thread for a round of its own, between two listings,
that describes only the groups with records (`take_touched`): a stored generation is
counted at the first description after its record (kgctl/monitor/follower.py), so its
lag is the log's and one describe, not an interval. Before the log's history is read
(`caught_up`), records wait for the next listing: the first rounds describe every group.

No I/O: the poll thread asks `due` with the listing and the time; the state thread tells
`touched` when a record is read (the one lock guards what both threads use).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

from kgctl.adapters.admin import ListedGroup, ListedType

# States where nothing moves until a member does: the listing is enough to see it start.
QUIET_STATES = frozenset({"Stable", "Empty"})
SWEEP_MS = 30_000


class DescribeRounds:
    """What each round describes, from what was listed, described and read."""

    def __init__(self, *, log_read: bool, interval_ms: int, sweep_ms: int = SWEEP_MS) -> None:
        self.log_read, self.interval_ms, self.sweep_ms = log_read, interval_ms, sweep_ms
        self.described_state: dict[str, str] = {}  # group -> state at its last description
        self.described_ms: dict[str, int] = {}  # group -> when it was last described
        self._touched: dict[str, ListedType] = {}  # group -> the type its records say
        self._lock = threading.Lock()
        self.wake = threading.Event()  # set when records wait for a round of their own
        self.caught_up = False

    def touched(self, group: str, kind: ListedType = "classic") -> None:
        """A record of `group` (a `kind` group: its record's type says) was read: describe
        it soon (at once once caught up)."""
        with self._lock:
            self._touched[group] = kind
        if self.caught_up:
            self.wake.set()

    def take_touched(self) -> dict[str, ListedType]:
        """The groups with records read since they were last asked for, for a round of
        their own, with the type their records say."""
        self.wake.clear()
        with self._lock:
            touched, self._touched = self._touched, {}
        return dict(sorted(touched.items()))

    def stop_reading_log(self) -> None:
        """The log cannot be read (an ACL): every group is described every round."""
        self.log_read = False

    def due(self, listed: Mapping[str, ListedGroup], now_ms: int) -> list[str]:
        """The groups to describe now, of those `listed`."""
        self.wake.clear()  # the records waiting are this round's
        with self._lock:
            touched, self._touched = self._touched, {}
        if not self.log_read:
            return sorted(listed)
        out = []
        stale = []
        for group, listing in listed.items():
            last = self.described_state.get(group)
            if (
                last is None
                or listing.state is None
                or listing.kind == "unknown"
                or listing.state not in QUIET_STATES
                or listing.state != last
                or group in touched
            ):
                out.append(group)
            elif now_ms - self.described_ms.get(group, now_ms) >= self.sweep_ms:
                stale.append(group)
        # The sweep, spread over the rounds: the groups described longest ago, as many a
        # round as describes each once a sweep (all at once, 10,000 groups held the poll
        # thread, and the records' rounds behind it, for seconds).
        share = max(1, math.ceil(len(listed) * self.interval_ms / self.sweep_ms))
        stale.sort(key=lambda g: (self.described_ms[g], g))
        return sorted(out + stale[:share])

    def described(self, states: Mapping[str, str], taken_ms: int) -> None:
        """What a round's descriptions, taken at `taken_ms`, said (group -> state); groups
        no longer listed are forgotten by `forget`."""
        self.described_state.update(states)
        for group in states:
            self.described_ms[group] = taken_ms

    def forget(self, group: str) -> None:
        self.described_state.pop(group, None)
        self.described_ms.pop(group, None)
        with self._lock:
            self._touched.pop(group, None)
