"""The monitor: every group of a cluster followed at once, on one thread that owns the
state, fed by two sources on their own threads.

1. History and records: one `OffsetsLogFollower` reads every classic group's metadata
   records in `__consumer_offsets` from the beginning (or `since_ms`), once for all
   groups, then follows them. Counts are derived from that history, so a monitor killed
   and started again counts the same rebalances (docs/monitor.md says what compaction
   takes away).
2. Descriptions: at each interval one ListGroups and DescribeGroups /
   ConsumerGroupDescribe batched by coordinator: the group's state, members and
   assignments, which the records do not carry, and consumer-protocol groups' epochs.

With `shard_group`, monitors on several machines share the cluster as one Kafka consumer
group over `__consumer_offsets`'s partitions: each follows (records and descriptions)
only the groups whose partition it owns now, and forgets those it is no longer given.

A principal that may not read `__consumer_offsets` is told once, and the monitor goes
on with descriptions only (with `shard_group` it cannot know its share: it stops). A
cluster that does not answer is retried with a backoff; `reachable` says so (a metric).
Each completed rebalance is diagnosed by the group's `GroupFollower`, folded into its
tally and handed to each of `listeners`.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgctl.adapters.admin import ClusterAdmin, ListedGroup, ListedType
from kgctl.adapters.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerRecordType,
    GroupEpoch,
)
from kgctl.adapters.group_log import AnyGroupRecord
from kgctl.adapters.group_records import OFFSETS_TOPIC, GroupRecord, partition_for
from kgctl.adapters.offsets_log import OffsetsLogFollower, Shard
from kgctl.errors import ExitStatus, KgctlError
from kgctl.model.snapshot import GroupSnapshot
from kgctl.monitor.accounting import GroupDeleted, GroupTally, tally
from kgctl.monitor.follower import Diagnosed, GroupFollower
from kgctl.monitor.rounds import DescribeRounds
from kgctl.observe.infer import upgrade_follows
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
# A round for records waits this long after the first of them: the records of one
# rebalance (a generation, then its members' commits) come in one round.
PROMPT_GAP_S = 0.2


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Selection:
    """Which groups are followed: `--groups` and `--exclude` regular expressions."""

    include: re.Pattern[str] | None = None
    exclude: re.Pattern[str] | None = None

    def __call__(self, group: str) -> bool:
        if self.include is not None and not self.include.search(group):
            return False
        return self.exclude is None or not self.exclude.search(group)


@dataclass
class Health:
    """The monitor's own state, for its metrics."""

    reachable: bool = True
    offsets_readable: bool | None = None  # None until the log reader has started
    offsets_caught_up: bool = False
    records_read: int = 0
    metadata_records: int = 0
    polls: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    last_poll_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    owned_partitions: tuple[int, ...] | None = None  # with a shard group: this one's

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


@dataclass(frozen=True)
class GroupRow:
    """One group as the views and metrics read it (a copy: no lock needed after)."""

    group: str
    state: str
    protocol: str
    assignor: str
    members: int
    generation: int
    tally: GroupTally


class Monitor:
    """Follow the groups `selection` accepts; `step()` applies what the sources read."""

    def __init__(
        self,
        settings: ClientSettings,
        selection: Selection,
        interval_s: float = 10.0,
        since_ms: int | None = None,
        offsets_topic: bool = True,
        on_poll: Callable[[float], None] = lambda _s: None,
        clock: Callable[[], int] = wall_ms,
        shard_group: str | None = None,
        shard_session_ms: int = 45_000,
    ) -> None:
        self.settings, self.selection, self.interval_s = settings, selection, interval_s
        self.since_ms, self.offsets_topic = since_ms, offsets_topic
        self.on_poll, self.clock = on_poll, clock
        # Called with each rebalance counted (metrics, the JSON lines), in order.
        self.listeners: list[Callable[[Diagnosed], None]] = []
        self.group_listeners: list[Callable[[str], None]] = []  # each group first followed
        self.forget_listeners: list[Callable[[str], None]] = []  # each group given away
        self.health = Health(offsets_readable=None if offsets_topic else False)
        self.shard_group, self.shard_session_ms = shard_group, shard_session_ms
        # With a shard group: the partitions of __consumer_offsets this monitor owns now
        # (none until the group assigns some) and the topic's partition count; without
        # one, None: every group is this monitor's.
        self.owned: frozenset[int] | None = frozenset() if shard_group else None
        self.offsets_partitions = 0
        self.polled_owned = self.owned  # what it owned when the last poll was applied
        if shard_group:
            self.health.owned_partitions = ()
        self.settle_ms = int(interval_s * 2000) + 1000
        self.followers: dict[str, GroupFollower] = {}
        self.tallies: dict[str, GroupTally] = {}
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.stopping = threading.Event()
        self.lock = threading.Lock()  # guards `rows` and `health` for the readers
        self.rows: dict[str, GroupRow] = {}
        self.changed: set[str] = set()  # groups whose row is to be made again
        self.settling: set[str] = set()  # groups a generation of which waits to settle
        self.admin = ClusterAdmin(settings)
        self.log_reader: OffsetsLogFollower | None = None
        self.threads: list[threading.Thread] = []
        self.listed: dict[str, ListedGroup] = {}
        # Which groups each round describes (the listing's states and the log say where
        # something may have happened); every group every round without the log.
        self.rounds = DescribeRounds(
            log_read=bool(offsets_topic), interval_ms=int(interval_s * 1000)
        )
        self.fatal: KgctlError | None = None  # what ends the monitor, raised by step()
        self.undescribed: set[str] = set()  # listed untyped groups no describe knows
        # Consumer groups created since the log was caught up, not followed yet: the
        # epoch record each was created with, for the rebalance its first member began.
        self.created: dict[str, ConsumerGroupRecord] = {}
        # Classic groups' tombstones read, each held until what follows it says whether
        # it deleted its group or was Kafka's online upgrade to a consumer group (which
        # writes the tombstone, then the consumer group's records, at once).
        self.tombstones: dict[str, GroupRecord] = {}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        if not self.offsets_topic:
            self._note(
                "--no-offsets-topic: following groups by their descriptions only "
                "(generations inferred)"
            )
        if self.offsets_topic:
            self.log_reader = OffsetsLogFollower(
                self.settings,
                self.selection,
                on_records=lambda recs, n: self.inbox.put(("records", (recs, n))),
                on_caught_up=lambda: self.inbox.put(("caught_up", None)),
                on_unavailable=lambda why: self.inbox.put(("unavailable", why)),
                on_error=lambda why: self.inbox.put(("log_error", why)),
                since_ms=self.since_ms,
                shard=Shard(
                    self.shard_group, self.shard_session_ms,
                    lambda owned, count: self.inbox.put(("owned", (owned, count))),
                ) if self.shard_group else None,
            )  # fmt: skip
            self.log_reader.start()
            self.threads.append(self.log_reader)
        poller = threading.Thread(target=self._poll_loop, name="kgctl-monitor-poll", daemon=True)
        poller.start()
        self.threads.append(poller)

    def stop(self) -> None:
        self.stopping.set()
        self.rounds.wake.set()  # the poll thread may be waiting for records
        if self.log_reader is not None:
            self.log_reader.stop()
        for th in self.threads:
            th.join(timeout=5)
        self.admin.close()

    # -- the sources' threads -------------------------------------------------------------

    def _poll_loop(self) -> None:
        failures = 0
        kinds: dict[str, ListedType] = {}  # the last listing's, for the rounds between
        listed_at = -float("inf")
        while not self.stopping.is_set():
            started = time.monotonic()
            full = started - listed_at >= self.interval_s
            try:
                if full:
                    listed: dict[str, ListedGroup] | None = {
                        g: t for g, t in self.admin.list_all().items() if self.ours(g)
                    }
                    assert listed is not None
                    kinds = {g: t.kind for g, t in listed.items()}
                    due = self.rounds.due(listed, self.clock())
                else:
                    # Records were read: their groups now, without a listing. A group
                    # not listed yet is of the type its records say.
                    listed = None
                    touched = self.rounds.take_touched()
                    due = [g for g in touched if self.ours(g)]
                    kinds = {**touched, **kinds}
                # What the round's descriptions are newer than: stamped after the
                # records' groups were taken. A record is stamped before its group is
                # touched (`_records`); stamped at the round's start, a record read
                # during the listing was taken by this round yet newer than its
                # description, so no round was due for it and its rebalance waited for
                # `settle_ms` (the benchmark's 11-21 s lags).
                taken = self.clock()
                # Nothing to describe between two listings: the records' groups were
                # taken by a listing's round meanwhile (or the monitor is stopping).
                idle = not full and not due
                snaps = (
                    {}
                    if idle
                    else self.admin.describe_all({g: kinds.get(g, "classic") for g in due})
                )
                undescribed = self.admin.undescribed if full else frozenset()
            except KgctlError as exc:
                failures += 1
                self.inbox.put(("poll_failed", str(exc)))
                delay = min(self.interval_s * 2.0 ** min(failures, 6), MAX_BACKOFF_S)
                self.stopping.wait(delay)
                listed_at = -float("inf")
                continue
            failures = 0
            if full:
                listed_at = started
            took = time.monotonic() - started
            if not idle:
                self.inbox.put(("described", (listed, snaps, undescribed, took, taken)))
            # Until the next listing, or records to describe (a short pause first, so
            # that the records of one rebalance's members come in one round).
            self.rounds.wake.wait(max(0.0, listed_at + self.interval_s - time.monotonic()))
            left = listed_at + self.interval_s - time.monotonic()
            self.stopping.wait(min(PROMPT_GAP_S, max(0.0, left)))

    def ours(self, group: str) -> bool:
        """Whether this monitor follows `group`: selected, and (sharing the cluster) in a
        partition it owns. Read by the poll thread too: `owned` is replaced, not changed."""
        if not self.selection(group):
            return False
        owned = self.owned
        if owned is None:
            return True
        return bool(owned) and partition_for(group, self.offsets_partitions) in owned

    # -- the state's thread ---------------------------------------------------------------

    def step(self, timeout_s: float = 0.5) -> list[Diagnosed]:
        """Apply everything the sources have read (waiting up to `timeout_s` for the
        first of it); the rebalances that completed meanwhile."""
        out: list[Diagnosed] = []
        try:
            item = self.inbox.get(timeout=timeout_s)
        except queue.Empty:
            item = None
        while item is not None:
            out += self._apply(*item)
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                item = None
        now = self.clock()
        # Only groups given something this step, or with a generation waiting for its
        # settling time, can complete one now (at 10,000 groups, ticking them all at each
        # step was a few per cent of a core).
        for group in sorted(self.settling | self.changed):
            f = self.followers.get(group)
            if f is not None:
                out += f.tick(now)
            if f is not None and f.settling:
                self.settling.add(group)
            else:
                self.settling.discard(group)
        self._count_all(out)
        self._publish()
        if self.fatal is not None:
            raise self.fatal
        return out

    def _follower(self, group: str) -> GroupFollower:
        self.changed.add(group)  # asked for to be given something: its row is redone
        f = self.followers.get(group)
        if f is None:
            stored = self.health.offsets_readable is not False
            f = self.followers[group] = GroupFollower(group, self.settle_ms, stored)
            for listener in self.group_listeners:
                listener(group)
        return f

    def _apply(self, kind: str, payload: Any) -> list[Diagnosed]:
        now = self.clock()
        if kind == "records":
            records, read = payload
            self.health.records_read += read
            self.health.metadata_records += len(records)
            return self._records(records, now)
        if kind == "described":
            listed, snaps, undescribed, seconds, taken = payload
            return self._described(listed, snaps, undescribed, seconds, taken, now)
        if kind == "caught_up":
            self.health.offsets_caught_up = True
            self.rounds.caught_up = True
            out: list[Diagnosed] = []
            for f in self.followers.values():
                out += f.tick(now, flush=True)
            return out
        if kind == "owned":
            self._owned(*payload)
        elif kind == "unavailable":
            self._offsets_unavailable(str(payload))
        elif kind == "log_error":
            self.health.error("offsets_log")
        elif kind == "poll_failed":
            with self.lock:
                self.health.reachable = False
                self.health.error("poll")
            if not any("unreachable" in n for n in self.health.notes[-1:]):
                self._note(f"cluster unreachable, retrying: {payload}")
        return []

    def _records(self, records: list[AnyGroupRecord], now: int) -> list[Diagnosed]:
        out: list[Diagnosed] = []
        for rec in records:
            if self.owned is not None and rec.partition not in self.owned:
                continue  # read before its partition was given to another monitor
            held = self.tombstones.pop(rec.group, None)
            if held is not None:
                if isinstance(rec, ConsumerGroupRecord) and upgrade_follows(held.timestamp_ms, rec):
                    self.followers[rec.group].upgraded(held)  # the group goes on
                else:
                    self._delete(held, out, now)
            if isinstance(rec, ConsumerGroupRecord):
                # A consumer group's epoch, member or assignment moved: described soon.
                # A tombstone (the group or a member gone) waits for the listing: its
                # group may be gone, and a description would only find it missing.
                if rec.value is not None:
                    self.rounds.touched(rec.group, "consumer")
                    if rec.group in self.followers:
                        self.followers[rec.group].consumer_record(rec, now)
                    elif self.rounds.caught_up and isinstance(rec.value, GroupEpoch):
                        self.created.setdefault(rec.group, rec)
                elif rec.kind is ConsumerRecordType.MEMBER_METADATA and rec.group in self.followers:
                    # (a member's record deleted: with the epoch after it, a leave the
                    # follower of a once-classic group stops keeping the member for)
                    self.followers[rec.group].consumer_record(rec, now)
                continue
            f = self._follower(rec.group)
            self.rounds.touched(rec.group)
            if rec.metadata is None:
                self.tombstones[rec.group] = rec  # what follows it says what it was
                continue
            out += f.record(rec, now)
        # A tombstone with no consumer group's record after it in the poll deleted its
        # group, unless the group is listed as a consumer group: the records written with
        # the tombstone are then in the next poll (a poll ends at max_records).
        self._held_deleted(self.listed, out, now)
        return out

    def _described(
        self,
        listed: dict[str, ListedGroup] | None,
        snaps: dict[str, GroupSnapshot],
        undescribed: frozenset[str],
        seconds: float,
        taken: int,
        now: int,
    ) -> list[Diagnosed]:
        if not self.health.reachable:
            self._note("cluster reachable again")
        with self.lock:
            self.health.reachable = True
            self.health.polls += 1
            self.health.last_poll_s = seconds
        self.on_poll(seconds)
        out: list[Diagnosed] = []
        before, self.polled_owned = self.polled_owned, self.owned
        if listed is not None:
            listed = {g: t for g, t in listed.items() if self.ours(g)}  # asked before a change
            self._held_deleted(listed, out, now)
        for group, snap in snaps.items():
            # A round for records read has no listing: the group is this monitor's or not.
            wanted = self.ours(group) if listed is None else group in listed
            if not wanted:
                continue
            f = self.followers.get(group)
            if (
                self.health.polls > 1
                and group not in self.listed
                and (f is None or f.snapshot is None)
                # a group of a partition just given to this monitor was there before
                and (before is None or partition_for(group, self.offsets_partitions) in before)
            ):
                # Not there at the previous round: it was created since, and whatever
                # members it has joined it (not a group found already made at the start).
                # A consumer group's stand-in has epoch 0: its records do not tell the
                # follower who joined it, its descriptions do (follower.observed).
                epoch = None if snap.group_epoch is None else 0
                absent = GroupSnapshot(group=group, state="Dead", missing=True, group_epoch=epoch)
                f = self._follower(group)
                out += f.observed(absent, now)
                created = self.created.pop(group, None)
                if created is not None:
                    f.consumer_record(created, now)
            out += self._observe(group, snap, now, taken)
        self.rounds.described(
            {g: snap.state for g, snap in snaps.items() if g in self.followers}, taken
        )
        if listed is None:
            return out  # a round for records read, between two listings
        for group in sorted(undescribed & set(listed)):
            if group not in self.undescribed:
                # Listed without a type (Kafka 3.7) and described by neither request: a
                # consumer-protocol group there (seen on 3.7.2 with KIP-848 on).
                self.undescribed.add(group)
                self._note(
                    f"group {group}: listed without a type, and neither DescribeGroups nor "
                    "ConsumerGroupDescribe describes it (a consumer-protocol group on Kafka "
                    "3.7?): not followed"
                )
        # Bounded: a created group is followed by the listing after it, or was deleted
        # before it was.
        stale = now - 2 * int(self.interval_s * 1000)
        self.created = {
            g: r
            for g, r in self.created.items()
            if g not in self.followers and r.timestamp_ms > stale
        }
        for group in set(self.listed) - set(listed):
            # No longer listed: deleted (its tombstone, when the log is read, says so too).
            self.rounds.forget(group)
            gone = GroupSnapshot(group=group, state="Dead", missing=True)
            out += self._observe(group, gone, now, taken)
        self.listed = listed
        return out

    def _observe(self, group: str, snap: GroupSnapshot, now: int, taken: int) -> list[Diagnosed]:
        f = self._follower(group)
        before = f.snapshot
        out = f.observed(snap, now, taken_ms=taken)
        # Deleted by this description (a follower reading the group's records waits for
        # its tombstone, which `_records` counts).
        gone = before is not None and not before.missing and f.snapshot is snap and snap.missing
        if gone:
            self._count_all(out)
            out = []
            self._deleted(group, now)
        return out

    def _held_deleted(
        self, listed: dict[str, ListedGroup], done: list[Diagnosed], now: int
    ) -> None:
        """The tombstones held of groups `listed` does not list as consumer groups deleted
        their groups."""
        for group in sorted(self.tombstones):
            listing = listed.get(group)
            if listing is None or listing.kind != "consumer":
                self._delete(self.tombstones.pop(group), done, now)

    def _delete(self, tombstone: GroupRecord, done: list[Diagnosed], now: int) -> None:
        """`tombstone` deleted its group: `done`, then what the group completed before
        the deletion, are counted first (and `done` emptied)."""
        done += self._follower(tombstone.group).record(tombstone, now)
        self._count_all(done)
        done.clear()
        self._deleted(tombstone.group, now)

    def _deleted(self, group: str, now: int) -> None:
        """The group was deleted (its tombstone, or described missing; whichever comes
        first counts): its next generations are a new group's."""
        t = self.tallies.get(group)
        self.changed.add(group)
        if t is not None and t.counted_generation >= 0:
            self.tallies[group] = tally(t, GroupDeleted(group, now), now)

    def _count_all(self, done: list[Diagnosed]) -> None:
        for d in done:
            self._count(d)

    def _owned(self, owned: frozenset[int], count: int) -> None:
        """The shard group gave this monitor `owned` (of `count` partitions): the groups
        of the others' partitions are forgotten (their series go with them), those of new
        ones come from their replayed records and the next descriptions."""
        before = self.owned or frozenset()
        self.offsets_partitions, self.owned = count, owned
        if owned - before:
            with self.lock:
                self.health.offsets_caught_up = False  # until the new ones are replayed
        for group in [g for g in self.followers if not self.ours(g)]:
            del self.followers[group]
            self.tombstones.pop(group, None)
            self.changed.add(group)
            self.tallies.pop(group, None)
            self.listed.pop(group, None)
            self.rounds.forget(group)
            for listener in self.forget_listeners:
                listener(group)
        with self.lock:
            self.health.owned_partitions = tuple(sorted(owned))
        self._note(
            f"shard group {self.shard_group}: owns {len(owned)} of {count} {OFFSETS_TOPIC} "
            f"partition(s) {sorted(owned)}"
        )

    def _offsets_unavailable(self, why: str) -> None:
        if self.shard_group:
            # Without the topic the shard group has nothing to share: no way to know which
            # groups are this monitor's. The state thread raises it out of step().
            self.fatal = KgctlError(
                f"--shard-group {self.shard_group}: {why}; the monitors share the cluster "
                f"by reading {OFFSETS_TOPIC}, so give them read access to it, or run one "
                "monitor without --shard-group (descriptions only)",
                status=ExitStatus.SETUP_FAILED,
            )
            return
        with self.lock:
            self.health.offsets_readable = False
        self.rounds.stop_reading_log()
        self._note(f"{why}: following groups by their descriptions only (generations inferred)")
        for f in self.followers.values():
            f.stored_source = False
            f.inferrer.stored_source = False

    def _note(self, text: str) -> None:
        log.info("%s", text)  # the command shows the notes (once each)
        with self.lock:
            self.health.notes.append(text)
            del self.health.notes[:-20]

    def _count(self, d: Diagnosed) -> None:
        r = d.rebalance
        before = self.tallies.get(r.group)
        after = tally(before, r, self.clock())
        self.tallies[r.group] = after
        self.changed.add(r.group)
        if after is not before:
            for listener in self.listeners:
                listener(d)

    def _publish(self) -> None:
        if self.health.offsets_readable is None and self.log_reader is not None:
            # reading: the reader would have said otherwise
            self.health.offsets_readable = True
        if not self.changed:
            return
        # Only the rows of the groups something happened to are made again: at 10,000
        # groups, remaking them all at every step was most of the monitor's CPU.
        rows = dict(self.rows)
        for group in self.changed:
            f = self.followers.get(group)
            snap = f.snapshot if f is not None else None
            if f is None or (snap is not None and snap.missing and group not in self.tallies):
                rows.pop(group, None)
                continue
            rows[group] = GroupRow(
                group=group,
                state=snap.state if snap is not None else "Unknown",
                protocol=f.protocol,
                assignor=(snap.protocol if snap is not None else "") or f.state.protocol,
                members=len(snap.members) if snap is not None else 0,
                generation=f.state.generation,
                tally=self.tallies.get(group) or GroupTally(group),
            )
        self.changed.clear()
        with self.lock:
            self.rows = rows

    def view(self) -> tuple[dict[str, GroupRow], Health]:
        """The groups and the health now, for another thread (metrics, the table)."""
        with self.lock:
            h = self.health
            copy = Health(
                reachable=h.reachable,
                offsets_readable=h.offsets_readable,
                offsets_caught_up=h.offsets_caught_up,
                records_read=h.records_read,
                metadata_records=h.metadata_records,
                polls=h.polls,
                errors=dict(h.errors),
                last_poll_s=h.last_poll_s,
                notes=list(h.notes),
                owned_partitions=h.owned_partitions,
            )
            return dict(self.rows), copy
