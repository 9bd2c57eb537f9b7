"""The member's control topic: commands read from a topic (docs/member.md, Live control).

Commands whose key is the member's group id or name are handed, as text, to the
member's control queue (`kgctl/member/control.py` parses them).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from kafka import TopicPartition

from kgctl.adapters import clients
from kgctl.errors import NotFoundError
from kgctl.settings import ClientSettings


class ControlTopicReader:
    """Reads control commands from a topic on a daemon thread (from its end, no group)."""

    def __init__(
        self, settings: ClientSettings, topic: str, keys: set[str], feed: Callable[[str], None]
    ) -> None:
        self._stop = threading.Event()
        self._keys = keys
        self._feed = feed
        self._consumer = clients.consumer(
            settings,
            "kgctl-member-control",
            group_id=None,
            auto_offset_reset="latest",
            enable_auto_commit=False,
        )
        partitions = self._consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            self._consumer.close()
            raise NotFoundError(f"--control-topic {topic!r} does not exist; create it first")
        self._consumer.assign(tps)
        self._consumer.seek_to_end(*tps)
        for tp in tps:
            self._consumer.position(tp)  # resolve now: commands sent from here on count
        self._thread = threading.Thread(target=self._loop, name="kgctl-control-topic", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                batches = self._consumer.poll(timeout_ms=300)
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(0.5)
                continue
            for records in batches.values():
                for record in records:
                    key = record.key.decode(errors="replace") if record.key else ""
                    if key in self._keys and record.value:
                        self._feed(record.value.decode(errors="replace"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        with contextlib.suppress(Exception):
            self._consumer.close(autocommit=False, timeout_ms=2000)
