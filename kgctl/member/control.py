"""Live control of a member: JSON lines from stdin or a control topic.

Readers run on their own threads and only parse and queue; the poll thread applies the
commands (kafka-python's consumer is not thread safe).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

OPS = ("subscribe", "pause", "resume", "processing_ms", "commit", "leave", "rejoin")


@dataclass(frozen=True)
class Command:
    """One parsed control command; `error` is set when the line was not understood."""

    op: str
    source: str  # stdin | topic
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    value: float | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def parse_command(line: str, source: str) -> Command | None:
    """Parse one control line; None for a blank line, a Command with `error` if invalid."""
    text = line.strip()
    if not text:
        return None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return Command(op="invalid", source=source, error=f"not JSON: {exc.msg}")
    if not isinstance(raw, dict):
        return Command(op="invalid", source=source, error="expected a JSON object")
    op = raw.get("op")
    if op not in OPS:
        return Command(
            op=str(op), source=source, raw=raw, error=f"unknown op; expected one of {OPS}"
        )
    if op == "subscribe":
        topics = raw.get("topics")
        pattern = raw.get("pattern")
        if bool(topics) == bool(pattern):
            return Command(op, source, raw=raw, error="give exactly one of topics or pattern")
        if topics is not None and (
            not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics)
        ):
            return Command(op, source, raw=raw, error="topics must be a list of names")
        if pattern is not None and not isinstance(pattern, str):
            return Command(op, source, raw=raw, error="pattern must be a string")
        return Command(op, source, topics=tuple(topics or ()), pattern=pattern, raw=raw)
    if op == "processing_ms":
        value = raw.get("value")
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            return Command(op, source, raw=raw, error="value must be a number >= 0")
        return Command(op, source, value=float(value), raw=raw)
    return Command(op, source, raw=raw)


class ControlQueue:
    """Commands from every source, read by the poll thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Command] = queue.SimpleQueue()
        # Called after each command is queued (the member's loop wakes to apply it).
        self.on_put: Callable[[], None] | None = None

    def put(self, command: Command) -> None:
        self._queue.put(command)
        if self.on_put is not None:
            self.on_put()

    def feed(self, line: str, source: str) -> None:
        command = parse_command(line, source)
        if command is not None:
            self.put(command)

    def drain(self) -> list[Command]:
        out: list[Command] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def read_stream(self, stream: IO[str], source: str = "stdin") -> threading.Thread:
        """Read lines on a daemon thread; end of input just ends the reader, not the member."""

        def loop() -> None:
            try:
                for line in stream:
                    self.feed(line, source)
            except (OSError, ValueError):
                return

        thread = threading.Thread(target=loop, name=f"kgctl-control-{source}", daemon=True)
        thread.start()
        return thread
