"""Every group's records in `__consumer_offsets`, read once for all groups.

`kgctl monitor` follows the whole cluster: one consumer assigned every partition of the
internal topic (no group, nothing committed), from its beginning or from a time, and
every classic group-metadata record (key type 2) parsed with `group_records`, and a
consumer-protocol group's epoch, member and assignment records (types 3, 5, 8) with
`consumer_group_records`. Offset commits, which are most of the topic, are skipped by
their key's first two bytes without being decoded. What compaction left is what is
read: a partition cleaned long ago keeps only each group's latest generation.

With a `shard_group`, several monitors share the topic as one Kafka consumer group: each
reads only the partitions the group assigns it (a group's records, and its coordinator,
live in one partition: `partition_for`), and a partition it is given is read from its
beginning, so the monitor that takes it over after another died counts what that one
counted. Nothing is committed: a partition kept through a rebalance goes on where it was.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import kafka.errors as Errors
from kafka import TopicPartition
from kafka.structs import MemberState

from kgctl.adapters import clients
from kgctl.adapters.admin import ClusterAdmin
from kgctl.adapters.group_log import AnyGroupRecord, GroupLogUnavailable, _why, parse_any
from kgctl.adapters.group_records import (
    OFFSETS_TOPIC,
)
from kgctl.errors import ConnectError
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)

WAIT_FOR_TOPIC_S = 2.0
START_RETRY_FIRST_S = 1.0  # the first wait for a cluster that did not answer at the start
START_RETRY_MAX_S = 30.0  # the longest, after doubling


def _unreachable(exc: BaseException) -> bool:
    """A start-up failure worth retrying: the cluster did not answer (down, restarting, a
    timeout), as opposed to a refusal (ACLs, a bad login) or bad settings."""
    if isinstance(exc, ConnectError):
        return True
    return isinstance(exc, Errors.KafkaTimeoutError | Errors.KafkaConnectionError)


class OffsetsLogFollower(threading.Thread):
    """A daemon thread handing on every group's records (`parse_any`) as written.

    `on_records(records, read)` gets each poll's parsed records in offset order per
    partition and how many raw records the poll read; `on_caught_up()` once when every
    partition has reached the end offset it had at the start (history replayed);
    `on_unavailable(reason)` once when the topic may not be read (ACLs, a refused login,
    bad settings), and the thread ends. A cluster that does not answer at the start is
    retried with a backoff, and a failure after the start (a broker restart) by the
    consumer itself; both are reported through `on_error(reason)`, and the thread goes on.
    """

    def __init__(
        self,
        settings: ClientSettings,
        wanted: Callable[[str], bool],
        on_records: Callable[[list[AnyGroupRecord], int], None],
        on_caught_up: Callable[[], None] = lambda: None,
        on_unavailable: Callable[[str], None] = lambda _m: None,
        on_error: Callable[[str], None] = lambda _m: None,
        since_ms: int | None = None,
        shard: Shard | None = None,
    ) -> None:
        super().__init__(name="kgctl-monitor-offsets", daemon=True)
        self.settings, self.wanted, self.since_ms = settings, wanted, since_ms
        self.on_records, self.on_caught_up = on_records, on_caught_up
        self.on_unavailable, self.on_error = on_unavailable, on_error
        self.shard = shard
        self.stopping = threading.Event()
        self._ends: dict[Any, int] = {}  # the end offsets of the partitions being replayed
        self._next: dict[Any, int] = {}  # per partition, the offset after the last one read
        self._owned: set[Any] = set()  # with a shard group: the partitions it was given

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        # A cluster that does not answer yet (down when the monitor starts, or restarting)
        # is waited for with a backoff, told through on_error; only a topic this principal
        # may not read ends the thread through on_unavailable. Before, any failure here did,
        # and a monitor started while the cluster was down kept to descriptions for good.
        delay = START_RETRY_FIRST_S
        while not self.stopping.is_set():
            consumer: Any = None
            try:
                consumer = self._open()
            except Exception as exc:
                self._close(consumer)
                if not _unreachable(exc):
                    self.on_unavailable(
                        str(exc) if isinstance(exc, GroupLogUnavailable) else _why(exc)
                    )
                    return
                self.on_error(_why(exc))
                self.stopping.wait(delay)
                delay = min(delay * 2, START_RETRY_MAX_S)
                continue
            try:
                self._follow(consumer)
            finally:
                self._close(consumer)
            return

    def _open(self) -> Any:
        """The consumer, bootstrapped and placed: assigned every partition and rewound,
        or subscribed in the shard group."""
        shard = self.shard
        consumer = clients.consumer(
            self.settings,
            "kgctl-monitor-offsets",
            group_id=shard.group if shard is not None else None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **(shard.consumer_config() if shard is not None else {}),
        )
        try:
            if shard is None:
                self._ends = self._start(consumer)
            else:
                self._join(consumer, shard)
        except BaseException:
            self._close(consumer)
            raise
        return consumer

    def _partitions(self, consumer: Any) -> set[int] | None:
        """The topic's partitions, waiting while it does not exist yet (a cluster where
        no group has asked for a coordinator has none); None when stopped first. A topic
        the principal may not describe is GroupLogUnavailable."""
        checked = False
        while not self.stopping.is_set():
            parts = consumer.partitions_for_topic(OFFSETS_TOPIC)
            if parts:
                return set(parts)
            if not checked:
                # Not in the metadata of every topic: not there yet, or hidden from this
                # principal (an ACL); only a request for the topic itself tells which.
                checked = True
                admin = ClusterAdmin(self.settings)
                try:
                    error = admin.topic_error(OFFSETS_TOPIC)
                finally:
                    admin.close()
                if error == "TOPIC_AUTHORIZATION_FAILED":
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
        return self._rewind(consumer, tps)

    def _join(self, consumer: Any, shard: Shard) -> None:
        """Subscribe as a member of the shard group: partitions come and go with its
        rebalances (`_reassigned`). Not waiting for the topic as `_partitions` does: on a
        cluster where no group has asked for a coordinator yet, the shard group's own
        request for one is what creates it."""
        consumer.subscribe([OFFSETS_TOPIC])

    def _rewind(self, consumer: Any, tps: list[Any]) -> dict[Any, int]:
        """Seek `tps` to their beginning (or `since_ms`); their end offsets now."""
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

    def _follow(self, consumer: Any) -> None:
        behind = self._behind(consumer)
        if not behind and self.shard is None:
            self.on_caught_up()
        while not self.stopping.is_set():
            try:
                polled = consumer.poll(timeout_ms=200, max_records=5000)
            except Exception as exc:  # the consumer reconnects by itself; say so and go on
                self.on_error(_why(exc))
                self.stopping.wait(1.0)
                continue
            if self.shard is not None:
                rejoin_dropped_join(consumer)
                if consumer.assignment() != self._owned:
                    self._reassigned(consumer, self.shard)
            out: list[AnyGroupRecord] = []
            read = 0
            for tp, records in polled.items():
                read += len(records)
                seen = self._next.get(tp, -1)
                for rec in records:
                    if rec.offset < seen or (
                        self.since_ms is not None and rec.timestamp < self.since_ms
                    ):
                        continue  # read already (kept through a shard rebalance), or before --since
                    parsed = parse_any(rec, self.wanted)
                    if parsed is not None:
                        out.append(parsed)
                if records:
                    self._next[tp] = max(seen, records[-1].offset + 1)
            if read:
                self.on_records(out, read)
            if self._ends:
                # Partitions given to this reader since the last poll joined the replay.
                behind = self._behind(consumer)
                if not behind:
                    self._ends = {}
                    self.on_caught_up()

    def _reassigned(self, consumer: Any, shard: Shard) -> None:
        """The shard group's rebalance changed this reader's partitions (seen after the
        poll it happened in: kafka-python runs a rebalance listener on its I/O thread,
        where nothing may block). A partition newly given is replayed from its beginning;
        one kept goes on where it was (an eager assignor revokes everything and gives it
        back, and with nothing committed the consumer would start it over)."""
        owned = set(consumer.assignment())
        for tp in set(self._next) - owned:
            del self._next[tp]
        for tp in owned & self._owned:
            if tp in self._next:
                consumer.seek(tp, self._next[tp])
        new = sorted(owned - self._owned, key=lambda tp: tp.partition)
        if new:
            self._ends.update(self._rewind(consumer, new))
        self._owned = owned
        count = len(consumer.partitions_for_topic(OFFSETS_TOPIC) or ())
        shard.on_owned(frozenset(tp.partition for tp in owned), count)

    def _behind(self, consumer: Any) -> set[Any]:
        """The replayed partitions not yet read to the end offset they had when given."""
        owned = consumer.assignment()
        return {tp for tp, end in self._ends.items() if tp in owned and consumer.position(tp) < end}

    @staticmethod
    def _close(consumer: Any) -> None:
        if consumer is None:
            return
        try:
            consumer.close()
        except Exception:
            log.debug("closing the offsets-log consumer failed", exc_info=True)


def rejoin_dropped_join(consumer: Any) -> bool:
    """Ask again for a join that kafka-python 3.0.12 started and then dropped; whether
    it had.

    Its consumer rejoins when the topic metadata changed since it, as the leader, last
    assigned (the first join of a member that joined before the metadata came). The
    leader's assignment inside that join makes the two equal again, so a poll whose
    timer ran out before the SyncGroup answer finds nothing left to rejoin for and never
    takes the finished join: the member stays rebalancing with no partitions and no
    heartbeat, is expelled a session later, and never comes back. Seen in the shard
    group, one monitor in four under load. Every other rejoin it starts keeps its own
    flag set until the join is taken, so rebalancing with nothing to rejoin for is only
    this; the flag set sends the next poll to take the join (or to join again)."""
    coordinator = consumer._coordinator
    if coordinator.state is MemberState.STABLE or coordinator.need_rejoin():
        return False
    log.info("kafka-python dropped the shard group's join; joining again")
    coordinator.request_rejoin()
    return True


class Shard:
    """`--shard-group`: the Kafka consumer group the monitors share the topic in, and
    what this monitor is told as its partitions change: `on_owned(partitions, count)`,
    the partitions it owns now out of the topic's `count`."""

    def __init__(
        self,
        group: str,
        session_timeout_ms: int,
        on_owned: Callable[[frozenset[int], int], None],
    ) -> None:
        self.group, self.session_timeout_ms, self.on_owned = group, session_timeout_ms, on_owned

    def consumer_config(self) -> dict[str, Any]:
        return {
            "session_timeout_ms": self.session_timeout_ms,
            # Kafka's ratio of heartbeats to session (3 s to 45 s).
            "heartbeat_interval_ms": max(100, self.session_timeout_ms // 15),
            # An internal topic is only excluded from pattern subscriptions; said anyway.
            "exclude_internal_topics": False,
        }
