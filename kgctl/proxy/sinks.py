"""Where a proxy's events go besides the screen: a recording file and a trace topic."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import IO

from kgctl.adapters.trace import TracePublisher
from kgctl.errors import UsageError
from kgctl.model.events import Event
from kgctl.settings import ClientSettings


class RecordSink:
    """Every event as one JSON line in a file `kgctl report` reads."""

    def __init__(self, path: Path) -> None:
        try:
            self._file: IO[str] = path.open("w", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--record {path}: cannot write it ({exc.strerror})") from None

    def __call__(self, event: Event) -> None:
        self._file.write(event.to_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TopicSink:
    """Publishes the events that name a group to a trace topic, keyed by group, from its
    own thread: a send that waits for metadata must never stall the proxy's loop."""

    # Protocol steps are sent at once; routine ones (answered heartbeats, commits) are
    # batched within the publisher's window, as a member's are.
    ROUTINE = frozenset({"HeartbeatTraced", "OffsetCommitTraced"})

    def __init__(self, settings: ClientSettings, topic: str) -> None:
        self._publisher = TracePublisher(settings, topic)
        self._queue: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kgctl-proxy-trace", daemon=True)
        self._thread.start()

    def __call__(self, event: Event) -> None:
        if event.group:
            self._queue.put(event)

    def _run(self) -> None:
        while True:
            try:
                event = self._queue.get(timeout=0.5)
            except queue.Empty:
                self._publisher.send_due()
                continue
            if event is None:
                return
            self._publisher.publish(event.group, event.to_json())
            urgent = event.type not in self.ROUTINE or event.data.get("error") != "NONE"
            self._publisher.send_due(urgent=urgent)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(10)
        self._publisher.close()
