"""Follow one classic group's metadata records in `__consumer_offsets` (kafka-python).

The coordinator appends a group's metadata to the partition the group id hashes to
when a generation is stored: when the leader's SyncGroup completes, when a join round
ends with nobody (an Empty generation), and a tombstone when the group is deleted. So
reading that one partition gives the broker's own generation ids, as soon as they are
written, which DescribeGroups never reports.

The reader assigns the partition itself (no group, nothing committed) and first looks
back for the group's latest record, so the current generation is known at start:

- A stable group writes nothing until its next rebalance, so its latest record can be
  of any age: a time window (the last hour) would miss a group stable for a day.
- Other groups' offset commits share the partition, so a fixed count (end minus N)
  would miss it on a busy cluster.
- So it reads backwards in windows that double (1,000 records, 2,000, 4,000 ...) and
  stops at the first window holding a record of the group: it reads at most about
  twice what was written after that record. Compaction keeps each key's latest record,
  so on a cleaned partition the record is always within reach; the look-back still
  stops after LOOKBACK_MAX_RECORDS offsets or LOOKBACK_MAX_S seconds.

Then it follows the partition from the end offset it read before looking back.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import kafka.errors as Errors
from kafka import TopicPartition

from kgctl.adapters import clients
from kgctl.adapters.consumer_group_records import KEY_PREFIXES as CONSUMER_KEY_PREFIXES
from kgctl.adapters.consumer_group_records import ConsumerGroupRecord, parse_consumer_record
from kgctl.adapters.group_records import (
    GROUP_METADATA_KEY,
    OFFSETS_TOPIC,
    GroupRecord,
    RecordError,
    parse_key,
    parse_record,
    parse_value,
    partition_for,
)
from kgctl.errors import KgctlError
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)

LOOKBACK_FIRST_RECORDS = 1_000
LOOKBACK_MAX_RECORDS = 500_000
LOOKBACK_MAX_S = 15.0

_METADATA_PREFIX = GROUP_METADATA_KEY.to_bytes(2, "big")


# A record of a group's, as `parse_any` reads it: a classic group's metadata, or a consumer group's.
AnyGroupRecord = GroupRecord | ConsumerGroupRecord


def parse_any(rec: Any, wanted: Callable[[str], bool]) -> AnyGroupRecord | None:
    """A group-metadata record (or tombstone) of a group `wanted` accepts, or one of the
    consumer-group records `consumer_group_records` reads, from a raw consumer record;
    None for anything else (offset commits, other KIP-848 records)."""
    key = rec.key
    if not key:
        return None
    try:
        if key[:2] in CONSUMER_KEY_PREFIXES:
            return parse_consumer_record(
                key, rec.value, rec.offset, rec.timestamp, rec.partition, wanted=wanted
            )
        if key[:2] != _METADATA_PREFIX:
            return None
        group = parse_key(key)
        if group is None or not wanted(group):
            return None
        meta = None if rec.value is None else parse_value(rec.value)
    except RecordError as exc:
        log.debug("skipping %s offset %s: %s", OFFSETS_TOPIC, rec.offset, exc)
        return None
    return GroupRecord(group, meta, rec.offset, rec.timestamp, rec.partition)


class GroupLogUnavailable(Exception):
    """The internal topic cannot be read: not authorized, hidden, or unreachable."""


class GroupLogReader(threading.Thread):
    """A daemon thread that reports `group`'s metadata records as they are written.

    `on_ready(partition, latest, scanned)` is called once after the look-back (`latest`
    is None when no record of the group was found), then `on_record(record)` for every
    record that follows; `on_unavailable(reason)` once if the topic cannot be read, after
    which the thread ends. With `on_consumer_record`, a consumer-protocol group's records
    go there instead, from the end, without a look-back (`on_ready` gets None, 0).
    """

    def __init__(
        self,
        settings: ClientSettings,
        group: str,
        on_ready: Callable[[int, GroupRecord | None, int], None] = lambda *_a: None,
        on_record: Callable[[GroupRecord], None] = lambda _r: None,
        on_unavailable: Callable[[str], None] = lambda _m: None,
        on_consumer_record: Callable[[ConsumerGroupRecord], None] | None = None,
        on_between: Callable[[ConsumerGroupRecord], None] = lambda _r: None,
    ) -> None:
        super().__init__(name=f"kgctl-group-log-{group}", daemon=True)
        self.settings, self.group = settings, group
        self.on_ready, self.on_record, self.on_unavailable = on_ready, on_record, on_unavailable
        # A consumer-protocol group's records (its epoch bumps, members, assignments):
        # followed from the end, no look-back (a classic record is what that looks for,
        # and such a group has none: it would read back to its limits for nothing).
        self.on_consumer_record = on_consumer_record
        # Following a classic group: the consumer-group records it writes when Kafka's
        # online upgrade makes it a mixed group, until it is classic again.
        self.on_between = on_between
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        try:
            with self._reading() as consumer:
                consumer_group = self.on_consumer_record is not None
                tp, end, latest, scanned = self._start(consumer, look_back=not consumer_group)
                if self.stopping.is_set():
                    return
                consumer.seek(tp, end)
                self.on_ready(tp.partition, latest, scanned)  # (a consumer group's: None, 0)
                while not self.stopping.is_set():
                    for records in consumer.poll(timeout_ms=200).values():
                        for rec in records:
                            self._hand_on(rec, tp.partition)
        except GroupLogUnavailable as exc:  # the watch goes on, with inferred generations
            self.on_unavailable(str(exc))

    def look_back(self) -> tuple[int, GroupRecord | None, int]:
        """Once, without following (`kgctl watch --once`): the group's partition, its
        latest record (None if none was found) and how many records were scanned.
        Raises GroupLogUnavailable when the topic cannot be read."""
        with self._reading() as consumer:
            tp, _end, latest, scanned = self._start(consumer)
            return tp.partition, latest, scanned

    def history(
        self, since_ms: int, max_records: int = LOOKBACK_MAX_RECORDS
    ) -> list[AnyGroupRecord]:
        """Once (`kgctl explain`): every classic record of the group stored since
        `since_ms`, in order, plus the latest one before it (what the group was when the
        window began), and the consumer-group records stored between those (a mixed
        group's time as a consumer group). Compaction may have removed older generations:
        what is left is what is told. Raises GroupLogUnavailable when the topic cannot be
        read."""
        with self._reading() as consumer:
            tp, end, latest, _scanned = self._start(consumer)
            begin = consumer.beginning_offsets([tp])[tp]
            found = consumer.offsets_for_times({tp: max(since_ms, 0)}).get(tp)
            lo = found.offset if found is not None else end
            lo = max(lo, end - max_records, begin)
            deadline = time.monotonic() + LOOKBACK_MAX_S
            found_all = self._scan_all(consumer, tp, lo, end, deadline)
            records = [r for r in found_all if isinstance(r, GroupRecord)]
            before = [r for r in records if r.timestamp_ms < since_ms]
            after = [r for r in records if r.timestamp_ms >= since_ms]
            if not after and latest is not None and latest.timestamp_ms < since_ms:
                before = [latest]
            if not before and latest is not None and (not after or latest.offset < after[0].offset):
                before = [latest]
            classic = before[-1:] + after
            if not classic:
                return []
            # The consumer group's records after the first classic one told (before it,
            # there is nothing they could be compared with).
            between = [
                r
                for r in found_all
                if isinstance(r, ConsumerGroupRecord) and r.offset > classic[0].offset
            ]
            return sorted([*classic, *between], key=lambda r: r.offset)

    def consumer_history(self, max_records: int = LOOKBACK_MAX_RECORDS) -> list[AnyGroupRecord]:
        """Once (`kgctl explain` of a consumer-protocol group): every consumer-group record
        of the group left in its partition (the newest `max_records` offsets at most), in
        order, with the classic group's records among them (the group was, or is again, a
        classic group). All of them, not a window: who the members are at an epoch is
        what their records said last, however long ago. Compaction keeps only each key's newest
        record (the newest epoch, each member's newest metadata and assignment) once a
        segment is cleaned: what is left is what is told. Raises GroupLogUnavailable when
        the topic cannot be read."""
        with self._reading() as consumer:
            tp, end, _latest, _scanned = self._start(consumer, look_back=False)
            begin = consumer.beginning_offsets([tp])[tp]
            lo = max(begin, end - max_records)
            deadline = time.monotonic() + LOOKBACK_MAX_S
            return self._scan_all(consumer, tp, lo, end, deadline)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Any]:
        """A consumer of the topic, closed after; any failure to read it, while building
        the consumer or using it, comes out as GroupLogUnavailable saying why."""
        consumer: Any = None
        try:
            consumer = self._consumer()
            yield consumer
        except GroupLogUnavailable:
            raise
        except Exception as exc:
            raise GroupLogUnavailable(_why(exc)) from None
        finally:
            _close(consumer)

    # -- steps --------------------------------------------------------------------------

    def _consumer(self) -> Any:
        return clients.consumer(
            self.settings,
            "kgctl-watch-offsets",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )

    def _hand_on(self, rec: Any, partition: int) -> None:
        """A record read while following: the group's, to its callback; else nothing."""
        found = parse_any(rec, lambda g: g == self.group)
        if isinstance(found, ConsumerGroupRecord):
            if self.on_consumer_record is not None:
                self.on_consumer_record(found)
            else:
                self.on_between(found)
        elif found is not None and self.on_consumer_record is None:
            self.on_record(found)

    def _start(
        self, consumer: Any, look_back: bool = True
    ) -> tuple[Any, int, GroupRecord | None, int]:
        parts = consumer.partitions_for_topic(OFFSETS_TOPIC)
        if not parts:
            raise GroupLogUnavailable(
                f"{OFFSETS_TOPIC} is not visible to this client (no metadata: not "
                "authorized to describe it, or hidden by the cluster)"
            )
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(self.group, len(parts)))
        consumer.assign([tp])
        begin = consumer.beginning_offsets([tp])[tp]
        end = consumer.end_offsets([tp])[tp]
        if not look_back:
            return tp, end, None, 0
        latest, scanned = self._look_back(consumer, tp, begin, end)
        return tp, end, latest, scanned

    def _look_back(
        self, consumer: Any, tp: Any, begin: int, end: int
    ) -> tuple[GroupRecord | None, int]:
        """The group's latest record before `end`, reading backwards in doubling windows."""
        deadline = time.monotonic() + LOOKBACK_MAX_S
        hi, window, scanned = end, LOOKBACK_FIRST_RECORDS, 0
        while hi > begin and scanned < LOOKBACK_MAX_RECORDS and not self.stopping.is_set():
            lo = max(begin, hi - window)
            latest = self._scan(consumer, tp, lo, hi, deadline)
            scanned += hi - lo
            if latest is not None:
                return latest, scanned
            if time.monotonic() > deadline:
                log.info("look-back in %s stopped after %.0f s", tp, LOOKBACK_MAX_S)
                break
            hi, window = lo, window * 2
        return None, scanned

    def _scan(
        self, consumer: Any, tp: Any, lo: int, hi: int, deadline: float
    ) -> GroupRecord | None:
        """The group's last record with an offset in [lo, hi)."""
        consumer.seek(tp, lo)
        latest: GroupRecord | None = None
        while consumer.position(tp) < hi and time.monotonic() < deadline:
            if self.stopping.is_set():
                return None
            for records in consumer.poll(timeout_ms=200).values():
                for rec in records:
                    if rec.offset < hi:
                        latest = self._parse(rec, tp.partition) or latest
        return latest

    def _scan_all(
        self, consumer: Any, tp: Any, lo: int, hi: int, deadline: float
    ) -> list[AnyGroupRecord]:
        """The group's records, classic and consumer-group, with an offset in [lo, hi),
        in order."""
        consumer.seek(tp, lo)
        out: list[AnyGroupRecord] = []
        while consumer.position(tp) < hi and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                for rec in records:
                    if rec.offset < hi:
                        parsed = parse_any(rec, lambda g: g == self.group)
                        if parsed is not None:
                            out.append(parsed)
        return out

    def _parse(self, rec: Any, partition: int) -> GroupRecord | None:
        try:
            return parse_record(
                rec.key, rec.value, self.group, rec.offset, rec.timestamp, partition
            )
        except RecordError as exc:
            log.debug("skipping %s offset %s: %s", OFFSETS_TOPIC, rec.offset, exc)
            return None


def _close(consumer: Any) -> None:
    if consumer is None:
        return
    try:
        consumer.close()
    except Exception:
        log.debug("closing the group log consumer failed", exc_info=True)


def _why(exc: Exception) -> str:
    if isinstance(exc, KgctlError):  # the client could not be built: its one line says why
        return f"cannot read {OFFSETS_TOPIC}: {exc}"
    if isinstance(exc, Errors.TopicAuthorizationFailedError | Errors.AuthorizationError):
        return f"not authorized to read {OFFSETS_TOPIC} ({type(exc).__name__})"
    return f"cannot read {OFFSETS_TOPIC}: {type(exc).__name__}: {exc}"
