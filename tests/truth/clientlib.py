"""What the suite's client programs (client_*.py) share: the JSON lines each prints about
itself, and the harness's commands on its stdin. (Imported by those programs, which run
from this directory; kgctl never reads any of it.)"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any


class Out:
    """One program's JSON lines on stdout, whole lines from any of its threads."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()

    def report(self, event: str, ts_ms: int | None = None, **fields: Any) -> None:
        stamp = ts_ms if ts_ms is not None else int(time.time() * 1000)
        line = json.dumps({"ts_ms": stamp, "client": self.name, "event": event, **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


class Commands:
    """The harness's commands, one a line on stdin, read on a thread of their own. `stop`
    and `stall SECONDS` mean the same to every program and are obeyed here; when stdin
    closes (the harness went away) the program stops too, never outliving it."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.running = True
        self._pending: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            with self._lock:
                self._pending.append(line.strip())
        with self._lock:
            self._pending.append("stop")

    def take(self) -> list[str]:
        """The commands come since the last call that are the program's own. A `stall`
        sleeps here (no poll meanwhile: a member whose processing outlives
        max.poll.interval.ms); a `stop` clears `running`."""
        with self._lock:
            todo, self._pending = self._pending, []
        own = []
        for command in todo:
            if command == "stop":
                self.running = False
            elif command.startswith("stall "):
                seconds = float(command.split()[1])
                self.out.report("stalled", seconds=seconds)
                time.sleep(seconds)
                self.out.report("resumed")
            else:
                own.append(command)
        return own
