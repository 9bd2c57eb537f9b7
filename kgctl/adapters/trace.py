"""The Kafka trace topic: members publish their events to it, `kgctl watch` reads them.

Values are events as JSON lines, several per record (docs/events.md). `TracePublisher`
is the member's writer, `TraceTopicReader` the watch's reader.
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
from kgctl.errors import KgctlError, NotAuthorizedError, UsageError, grant_hint
from kgctl.model.events import Event
from kgctl.recordings import event_of_line
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


class TraceTopicReader(threading.Thread):
    """A daemon thread that hands every event of one group on `topic` to `deliver`.

    It reads all partitions without joining a group (so it never disturbs anything),
    from the records stamped since the reader was made (the watch started): a watch shows
    what happens from now on, including what members published while this thread was
    still connecting. A topic that does not exist yet is waited for (members create it)
    and then read whole.
    """

    def __init__(
        self,
        settings: ClientSettings,
        topic: str,
        group: str,
        deliver: Callable[[Event], None],
        on_error: Callable[[str], None],
    ) -> None:
        super().__init__(name=f"kgctl-trace-{topic}", daemon=True)
        self.settings, self.topic, self.group = settings, topic, group
        self.deliver, self.on_error = deliver, on_error
        self.stopping = threading.Event()
        self.since_ms = int(time.time() * 1000)

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        consumer: Any = None
        try:
            consumer = clients.consumer(
                self.settings, "kgctl-watch-trace", enable_auto_commit=False, group_id=None
            )
            # kafka-python answers an empty set, not None, for a topic that does not exist.
            parts = consumer.partitions_for_topic(self.topic)
            created_since = not parts
            while not parts and not self.stopping.wait(1.0):
                parts = consumer.partitions_for_topic(self.topic)
            if self.stopping.is_set():
                return
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            if created_since:
                # The first member created it after the watch started: all of it is new,
                # its first steps included.
                consumer.seek_to_beginning(*tps)
            else:
                # Record timestamps are the members' clocks: across hosts, skew moves
                # this start by as much.
                found = consumer.offsets_for_times({tp: self.since_ms for tp in tps})
                for tp in tps:
                    at = found.get(tp)
                    if at is None:
                        consumer.seek_to_end(tp)
                    else:
                        consumer.seek(tp, at.offset)
            while not self.stopping.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    for record in records:
                        self._handle(record.value)
        except KgctlError as exc:  # the client could not be built: its one line says why
            self.on_error(f"trace topic {self.topic}: {exc}")
        except Exception as exc:  # the watch goes on with the observer alone
            self.on_error(f"trace topic {self.topic}: {type(exc).__name__}: {exc}")
        finally:
            if consumer is not None:
                consumer.close()

    def _handle(self, value: bytes | None) -> None:
        for event in events_of(value, self.group):
            self.deliver(event)


def events_of(value: bytes | None, group: str) -> list[Event]:
    """`group`'s events in one trace record (one or more JSON documents, one a line)."""
    out = []
    for line in (value or b"").splitlines():
        if not line.strip():
            continue
        try:
            event = event_of_line(line.decode("utf-8"))
        except (ValueError, TypeError, UnicodeDecodeError):
            log.debug("skipping a trace record line that is not a kgctl event")
            continue
        if event.group == group:
            out.append(event)
    return out


def read_trace(
    settings: ClientSettings, topic: str, group: str, since_ms: int, timeout_s: float
) -> list[Event]:
    """Once (`kgctl explain`): `group`'s events on `topic` stamped since `since_ms`, up to
    the end offsets as they were when asked (what members publish meanwhile is not
    waited for). A topic that does not exist gives none."""
    events: list[Event] = []
    consumer = clients.consumer(
        settings, "kgctl-explain-trace", enable_auto_commit=False, group_id=None
    )
    try:
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            return events
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        found = consumer.offsets_for_times({tp: max(since_ms, 0) for tp in tps})
        for tp in tps:
            at = found.get(tp)
            consumer.seek(tp, at.offset if at is not None else ends[tp])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    if record.offset < ends[TopicPartition(record.topic, record.partition)]:
                        events += events_of(record.value, group)
    finally:
        consumer.close()
    return events


# A burst larger than this is split over several records (brokers take 1 MB by default).
TRACE_RECORD_MAX_BYTES = 256 * 1024


class TracePublisher:
    """Publishes events to a Kafka topic, keyed by group, as JSON lines.

    Events are sent in bursts and a burst is one record whose value holds its events one
    per line (docs/events.md). In kafka-python a produce request costs a member 1-3 ms of
    CPU whatever it carries, so one record per event made a busy member (tens of events a
    second) spend more on its trace than on consuming. Routine events (records consumed,
    heartbeats, commits) wait for a burst at most `window_s` apart; the caller asks for
    an urgent burst when a protocol step happened, so a watch sees rebalances at once.
    `send_due` is called from the member's loop, at least once per poll timeout.
    """

    def __init__(
        self,
        settings: ClientSettings,
        topic: str,
        *,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topic = topic
        self._window_s = window_s
        self._clock = clock
        self._pending: dict[str, list[str]] = {}
        self._last_burst = float("-inf")
        _ensure_trace_topic(settings, topic)
        # A send that must wait for metadata blocks the member's loop: 5 s, not 60.
        self._producer = clients.producer(
            settings, "kgctl-member-trace", linger_ms=20, max_block_ms=5000
        )

    def publish(self, key: str, value: str) -> None:
        """Queue one event's JSON; `send_due` sends it."""
        self._pending.setdefault(key, []).append(value)

    def send_due(self, urgent: bool = False) -> None:
        """Send the queued events if `urgent` or the window has passed since the last burst."""
        if not self._pending:
            return
        now = self._clock()
        if not urgent and now - self._last_burst < self._window_s:
            return
        pending, self._pending = self._pending, {}
        self._last_burst = now
        for key, lines in pending.items():
            for chunk in json_line_chunks(lines, TRACE_RECORD_MAX_BYTES):
                self._producer.send(self.topic, key=key.encode(), value=chunk)

    def close(self, timeout_s: float = 5.0) -> None:
        # One budget for the flush and the close: with the broker gone, each would
        # otherwise wait it out in turn.
        deadline = time.monotonic() + timeout_s
        with contextlib.suppress(Errors.KafkaError):
            self.send_due(urgent=True)
        try:
            self._producer.flush(timeout=max(deadline - time.monotonic(), 0.0))
        except Errors.KafkaTimeoutError:
            # Departure (p): undeliverable (the broker is gone). kafka-python's close()
            # raises while any record is undelivered and leaves the producer open, to fail
            # again from its __del__ at exit; Java's close(timeout) drops them. Have the
            # sender thread drop them (it owns the batches) and wait for it to finish.
            sender = self._producer._sender
            sender.force_close()
            sender.join(max(deadline - time.monotonic(), 0.5))
        self._producer.close(timeout=max(deadline - time.monotonic(), 0.0))


def _ensure_trace_topic(settings: ClientSettings, topic: str) -> None:
    """Create the trace topic if it is missing.

    The member is the trace topic's writer, and kgctl's own broker (like many clusters)
    does not create topics on first use: without this a send waits for metadata that
    never comes. One partition keeps a group's events in order for every reader.
    """
    # The member's first client when tracing: a wrong password shows up here first.
    admin = clients.admin(settings, "kgctl-member-trace")
    try:
        if topic not in admin.list_topics():
            # Replication -1: the cluster's default.replication.factor (brokers from 2.4).
            admin.create_topics(
                {topic: {"num_partitions": 1, "replication_factor": -1}}, wait_for_metadata=True
            )
    except Errors.TopicAlreadyExistsError:
        pass  # another member created it first
    except Errors.AuthorizationError:
        raise NotAuthorizedError(
            f"--trace-topic {topic} does not exist and this client may not create it: "
            f"{grant_hint('Create', 'Topic', [topic], settings.principal)}, "
            "or create it (1 partition)"
        ) from None
    except Errors.InvalidTopicError as exc:
        raise UsageError(f"--trace-topic {topic!r} is not a valid topic name ({exc})") from None
    finally:
        admin.close()


def json_line_chunks(lines: list[str], max_bytes: int) -> Iterator[bytes]:
    """`lines` joined by newlines, cut into values of at most `max_bytes` (a longer
    single line is its own value)."""
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encode()
        if chunk and size + len(data) + 1 > max_bytes:
            yield b"\n".join(chunk)
            chunk, size = [], 0
        chunk.append(data)
        size += len(data) + 1
    if chunk:
        yield b"\n".join(chunk)
