"""Every classic group's metadata records in `__consumer_offsets`, read once for all groups.

`kgctl monitor` follows the whole cluster: one consumer assigned every partition of the
internal topic (no group, nothing committed), from its beginning or from a time, and
every group-metadata record (key type 2) parsed with `group_records`. Offset commits,
which are most of the topic, are skipped by their key's first two bytes without being
decoded. What compaction left is what is read: a partition cleaned long ago keeps only
each group's latest generation.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kafka import TopicPartition

from kgctl.adapters import clients
from kgctl.adapters.group_log import GroupLogUnavailable, _why
from kgctl.adapters.group_records import (
    GROUP_METADATA_KEY,
    OFFSETS_TOPIC,
    GroupRecord,
    RecordError,
    parse_key,
    parse_value,
)
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)

WAIT_FOR_TOPIC_S = 2.0
_METADATA_PREFIX = GROUP_METADATA_KEY.to_bytes(2, "big")


def parse_any(rec: Any, wanted: Callable[[str], bool]) -> GroupRecord | None:
    """A group-metadata record (or tombstone) of a group `wanted` accepts, from a raw
    consumer record; None for anything else (offset commits, KIP-848 records)."""
    key = rec.key
    if not key or key[:2] != _METADATA_PREFIX:
        return None
    try:
        group = parse_key(key)
        if group is None or not wanted(group):
            return None
        meta = None if rec.value is None else parse_value(rec.value)
    except RecordError as exc:
        log.debug("skipping %s offset %s: %s", OFFSETS_TOPIC, rec.offset, exc)
        return None
    return GroupRecord(group, meta, rec.offset, rec.timestamp, rec.partition)


class OffsetsLogFollower(threading.Thread):
    """A daemon thread handing on every classic group's metadata records as written.

    `on_records(records, read)` gets each poll's parsed records in offset order per
    partition and how many raw records the poll read; `on_caught_up()` once when every
    partition has reached the end offset it had at the start (history replayed);
    `on_unavailable(reason)` once when the topic cannot be read, and the thread ends.
    A failure after the start (a broker restart) is retried by the consumer itself; the
    thread reports it through `on_error(reason)` and goes on.
    """

    def __init__(
        self,
        settings: ClientSettings,
        wanted: Callable[[str], bool],
        on_records: Callable[[list[GroupRecord], int], None],
        on_caught_up: Callable[[], None] = lambda: None,
        on_unavailable: Callable[[str], None] = lambda _m: None,
        on_error: Callable[[str], None] = lambda _m: None,
        since_ms: int | None = None,
    ) -> None:
        super().__init__(name="kgctl-monitor-offsets", daemon=True)
        self.settings, self.wanted, self.since_ms = settings, wanted, since_ms
        self.on_records, self.on_caught_up = on_records, on_caught_up
        self.on_unavailable, self.on_error = on_unavailable, on_error
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        consumer: Any = None
        try:
            consumer = clients.consumer(
                self.settings,
                "kgctl-monitor-offsets",
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            ends = self._start(consumer)
        except Exception as exc:
            self._close(consumer)
            self.on_unavailable(_why(exc) if not isinstance(exc, GroupLogUnavailable) else str(exc))
            return
        try:
            self._follow(consumer, ends)
        finally:
            self._close(consumer)

    def _partitions(self, consumer: Any) -> set[int] | None:
        """The topic's partitions, waiting while it does not exist yet (a cluster where
        no group has asked for a coordinator has none); None when stopped first. A topic
        the principal may not describe is GroupLogUnavailable."""
        while not self.stopping.is_set():
            parts = consumer.partitions_for_topic(OFFSETS_TOPIC)
            if parts:
                return set(parts)
            if OFFSETS_TOPIC in consumer._client.cluster.unauthorized_topics:
                raise GroupLogUnavailable(f"not authorized to describe {OFFSETS_TOPIC}")
            consumer._client.cluster.request_update()
            self.stopping.wait(WAIT_FOR_TOPIC_S)
        return None

    def _start(self, consumer: Any) -> dict[Any, int]:
        parts = self._partitions(consumer)
        if parts is None:
            return {}
        tps = [TopicPartition(OFFSETS_TOPIC, p) for p in sorted(parts)]
        consumer.assign(tps)
        begins = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
        found = (
            consumer.offsets_for_times({tp: self.since_ms for tp in tps})
            if self.since_ms is not None
            else {}
        )
        for tp in tps:
            at = found.get(tp)
            consumer.seek(tp, at.offset if at is not None else begins[tp])
            if self.since_ms is not None and at is None:
                consumer.seek(tp, ends[tp])  # nothing written since: follow from the end
        return dict(ends)

    def _follow(self, consumer: Any, ends: dict[Any, int]) -> None:
        behind = {tp for tp, end in ends.items() if consumer.position(tp) < end}
        if not behind:
            self.on_caught_up()
        while not self.stopping.is_set():
            try:
                polled = consumer.poll(timeout_ms=200, max_records=5000)
            except Exception as exc:  # the consumer reconnects by itself; say so and go on
                self.on_error(_why(exc))
                self.stopping.wait(1.0)
                continue
            out: list[GroupRecord] = []
            read = 0
            for records in polled.values():
                read += len(records)
                for rec in records:
                    parsed = parse_any(rec, self.wanted)
                    if parsed is not None:
                        out.append(parsed)
            if read:
                self.on_records(out, read)
            if behind:
                behind = {tp for tp in behind if consumer.position(tp) < ends[tp]}
                if not behind:
                    self.on_caught_up()

    @staticmethod
    def _close(consumer: Any) -> None:
        if consumer is None:
            return
        try:
            consumer.close()
        except Exception:
            log.debug("closing the offsets-log consumer failed", exc_info=True)
