"""The proxy's event stream: wire events stamped with the client they are about."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from kgctl.model.events import EVENT_TYPES, Event


class WireEmitter:
    """Builds `Event`s with source `wire` and hands each to `sink` (the asyncio loop's
    thread only). The envelope names the client the event is about: its client id, and
    the group, member id, instance id and generation its request carried."""

    def __init__(
        self,
        sink: Callable[[Event], None],
        *,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._wall, self._mono = wall, mono
        self._t0 = mono()
        self._seq = 0

    def emit(self, type_: str, _envelope: dict[str, Any] | None = None, **data: Any) -> Event:
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
        env = _envelope or {}
        self._seq += 1
        client_id = str(env.get("client_id", ""))
        instance_id = env.get("instance_id")
        event = Event(
            type=type_,
            ts_ms=int(self._wall() * 1000),
            mono_ms=round((self._mono() - self._t0) * 1000, 3),
            seq=self._seq,
            group=str(env.get("group", "")),
            member=str(instance_id or client_id),
            member_id=str(env.get("member_id", "")),
            instance_id=instance_id,
            client_id=client_id,
            host=self.host,
            pid=self.pid,
            generation=int(env.get("generation", -1)),
            source="wire",
            data=data,
        )
        self.sink(event)
        return event
