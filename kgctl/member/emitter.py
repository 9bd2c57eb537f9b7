"""The member's event stream: builds `Event` envelopes on any thread and hands them to
the main thread through a queue (kafka-python runs callbacks on its I/O thread)."""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from kgctl.model.events import EVENT_TYPES, Event


class Emitter:
    """Stamps events with who/where/when and queues them; `drain` runs on the main thread."""

    def __init__(
        self,
        group: str,
        member: str,
        client_id: str,
        instance_id: str | None = None,
        *,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.group = group
        self.member = member
        self.client_id = client_id
        self.instance_id = instance_id
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.member_id = ""
        self.generation = -1
        # Reads (member_id, generation) from the coordinator when set.
        self.identity: Callable[[], tuple[str, int]] | None = None
        self._wall = wall
        self._mono = mono
        self._t0 = mono()
        self._seq = 0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Event] = queue.SimpleQueue()
        # Called with each event after it is queued (the member's writer wakes to write it).
        self.on_emit: Callable[[Event], None] | None = None

    def emit(self, type_: str, **data: Any) -> Event:
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
        if self.identity is not None:
            try:
                self.member_id, self.generation = self.identity()
            except Exception:  # identity is best effort; never lose the event
                pass
        with self._lock:
            self._seq += 1
            event = Event(
                type=type_,
                ts_ms=int(self._wall() * 1000),
                mono_ms=round((self._mono() - self._t0) * 1000, 3),
                seq=self._seq,
                group=self.group,
                member=self.member,
                member_id=self.member_id,
                instance_id=self.instance_id,
                client_id=self.client_id,
                host=self.host,
                pid=self.pid,
                generation=self.generation,
                data=data,
            )
            self._queue.put(event)
        if self.on_emit is not None:
            self.on_emit(event)
        return event

    def drain(self) -> list[Event]:
        """Every queued event, in seq order (call on the main thread)."""
        out: list[Event] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out
