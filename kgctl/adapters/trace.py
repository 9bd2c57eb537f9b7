"""Read kgctl member events from a Kafka trace topic (values: events as JSON lines)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kgctl.model.events import Event
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
        from kafka import KafkaConsumer, TopicPartition

        from kgctl.adapters.sockets import close_abandoned_connects

        close_abandoned_connects()
        consumer: Any = None
        try:
            cfg = self.settings.kafka_config()
            cfg.setdefault("client_id", "kgctl-watch-trace")
            consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, **cfg)
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
        except Exception as exc:  # the watch goes on with the observer alone
            self.on_error(f"trace topic {self.topic}: {type(exc).__name__}: {exc}")
        finally:
            if consumer is not None:
                consumer.close()

    def _handle(self, value: bytes | None) -> None:
        # A record holds one or more events, one JSON document per line.
        for line in (value or b"").splitlines():
            if not line.strip():
                continue
            try:
                event = Event.from_json(line.decode("utf-8"))
            except (ValueError, TypeError, UnicodeDecodeError):
                log.debug("skipping a trace record line that is not a kgctl event")
                continue
            if event.group == self.group:
                self.deliver(event)
