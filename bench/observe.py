"""The broker's side of a rebalance, measured the same way for every kind of member.

- `Observer.wait_complete`: DescribeGroups (kgctl's admin adapter, kafka-python) every
  50 ms until the group is Stable with the expected number of members, every expected
  partition assigned exactly once and (optionally) every member subscribed to the
  expected topics. The time of a sample is when its response arrived.
- `BrokerLog`: the coordinator's own INFO lines, millisecond timestamps:
  "Preparing to rebalance group G ..." and "Stabilized group G generation N ...".
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kgctl.adapters.admin import GroupAdmin
from kgctl.model.snapshot import GroupSnapshot
from kgctl.settings import ClientSettings

POLL_S = 0.05


def now_ms() -> int:
    return int(time.time() * 1000)


def read_json_lines(
    stream: Iterable[str], into: list[tuple[int, dict[str, Any]]], lock: threading.Lock
) -> None:
    """Each JSON line of a kgctl command's stdout, kept with the wall-clock ms it was read
    (what the lag benchmarks measure); other lines are skipped."""
    for line in stream:
        t = now_ms()
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        with lock:
            into.append((t, doc))


def complete(
    snap: GroupSnapshot,
    members: int,
    partitions: set[tuple[str, int]],
    topics: tuple[str, ...] | None = None,
) -> bool:
    if snap.missing or snap.state != "Stable" or len(snap.members) != members:
        return False
    seen: list[tuple[str, int]] = []
    for m in snap.members:
        if m.partitions is None:
            return False
        if topics is not None and m.subscription is not None and m.subscription != topics:
            return False
        seen.extend((t, p) for t, ps in m.partitions.items() for p in ps)
    return len(seen) == len(partitions) and set(seen) == partitions


class Observer:
    def __init__(self, bootstrap: str) -> None:
        self.admin = GroupAdmin(ClientSettings(bootstrap=bootstrap, timeout_s=10))

    def describe(self, group: str) -> GroupSnapshot:
        return self.admin.describe(group, with_lag=False)

    def wait_complete(
        self,
        group: str,
        members: int,
        partitions: set[tuple[str, int]],
        timeout_s: float,
        topics: tuple[str, ...] | None = None,
        poll_s: float = POLL_S,
    ) -> int | None:
        """Wall-clock ms of the first complete sample, None on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                snap = self.describe(group)
            except Exception:
                snap = None
            t = now_ms()
            if snap is not None and complete(snap, members, partitions, topics):
                return t
            time.sleep(max(0.0, poll_s - (time.monotonic() - started)))
        return None

    def close(self) -> None:
        self.admin.close()


_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] ")


@dataclass(frozen=True)
class LogEvent:
    ts_ms: int
    what: str  # prepare | stabilized
    generation: int


class BrokerLog:
    """Reads the coordinator's lines about one group from the broker's server.log."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def events(self, group: str, since_offset: int = 0) -> list[LogEvent]:
        out: list[LogEvent] = []
        try:
            with open(self.path, "rb") as fh:
                fh.seek(since_offset)
                data = fh.read().decode("utf-8", "replace")
        except OSError:
            return out
        prep = f"Preparing to rebalance group {group} "
        stab = f"Stabilized group {group} generation "
        for line in data.splitlines():
            if prep not in line and stab not in line:
                continue
            m = _LINE.match(line)
            if not m:
                continue
            ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
            t = int(ts * 1000) + int(m.group(2))
            if prep in line:
                g = re.search(r"old generation (\d+)", line)
                out.append(LogEvent(t, "prepare", int(g.group(1)) if g else -1))
            else:
                n = re.search(rf"{re.escape(stab)}(\d+)", line)
                out.append(LogEvent(t, "stabilized", int(n.group(1)) if n else -1))
        return out
