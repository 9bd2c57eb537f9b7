"""Watch lag: how long after a rebalance completes `kgctl watch` shows the new generation.

One run per mode, each on a fresh group and fresh topics:

- `offsets`: `kgctl watch G -o json --interval 1` (generations from `__consumer_offsets`)
- `poll`: the same with `--no-offsets-topic` (DescribeGroups polling, inferred numbering)

1. start N `kgctl join` members on topic A; wait until every one completed the same
   generation; start the watch and wait for its first Stable snapshot, then 1 s;
2. trigger a rebalance: one member (in turn) is told on stdin to subscribe to A and B,
   the next trigger back to A alone (a subscription change DescribeGroups can see);
3. the rebalance is complete when every member reported JoinCompleted for one new
   generation; t_join = the earliest of those JoinCompleted wall-clock timestamps (the
   broker stores the generation before it answers the first SyncGroup);
4. t_watch = when the bench read the watch's GenerationChanged line for it (offsets:
   the same generation id; poll: the next inferred one); lag = t_watch - t_join;
5. 1.5 s of quiet, then the next trigger. A rebalance the watch never shows within
   10 s is counted as missed.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.members import Member, MemberConfig, spawn
from bench.observe import read_json_lines

MODES = ("offsets", "poll")
SHOW_TIMEOUT_S = 10.0
QUIET_S = 1.5


@dataclass
class LagResult:
    mode: str
    members: int
    interval_s: float
    rebalances: int = 0
    lags_ms: list[int] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)  # member-reported, per rebalance
    missed: int = 0
    error: str = ""

    def summary(self) -> dict[str, Any]:
        lags = self.lags_ms
        return {
            "mode": self.mode,
            "members": self.members,
            "interval_s": self.interval_s,
            "rebalances": self.rebalances,
            "shown": len(lags),
            "missed": self.missed,
            "lag_median_ms": int(statistics.median(lags)) if lags else None,
            "lag_max_ms": max(lags) if lags else None,
            "lag_min_ms": min(lags) if lags else None,
            "error": self.error,
        }


class WatchLines:
    """`python -m kgctl watch ... -o json`, each line kept with the time it was read."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgctl", "watch", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.lines: list[tuple[int, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        read_json_lines(self.proc.stdout, self.lines, self.lock)

    def generation_changes(self) -> list[tuple[int, dict[str, Any]]]:
        with self.lock:
            return [(t, e) for t, e in self.lines if e.get("type") == "GenerationChanged"]

    def wait(self, match: Any, timeout_s: float) -> tuple[int, dict[str, Any]] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                for t, e in self.lines:
                    if match(e):
                        return t, e
            time.sleep(0.02)
        return None

    def nth_change(self, n: int, timeout_s: float) -> tuple[int, dict[str, Any]] | None:
        """The n-th GenerationChanged line (from 0), waiting for it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            changes = self.generation_changes()
            if len(changes) > n:
                return changes[n]
            time.sleep(0.02)
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _completed(m: Member) -> dict[int, int]:
    """generation -> wall-clock ms of the member's JoinCompleted for it."""
    out: dict[int, int] = {}
    for r in list(m.reports):
        if r.what == "completed" and r.generation >= 0:
            out.setdefault(r.generation, r.ts_ms)
    return out


def _common_generation(members: list[Member], above: int, timeout_s: float) -> int | None:
    """The first generation above `above` every member completed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = [_completed(m) for m in members]
        common = set(done[0]).intersection(*done[1:]) if done else set()
        newer = sorted(g for g in common if g > above)
        if newer:
            return newer[-1]
        time.sleep(0.05)
    return None


def run_mode(
    bootstrap: str,
    workdir: Path,
    mode: str,
    members: int,
    rebalances: int,
    interval_s: float = 1.0,
    cfg: MemberConfig | None = None,
    admin: Any = None,
) -> LagResult:
    from kafka.admin import NewTopic

    cfg = cfg or MemberConfig()
    res = LagResult(mode, members, interval_s)
    tag = uuid.uuid4().hex[:8]
    group = f"bench-watchlag-{mode}-{tag}"
    topic_a, topic_b = f"bench-wl-a-{tag}", f"bench-wl-b-{tag}"
    admin.create_topics([NewTopic(topic_a, 6, 1), NewTopic(topic_b, 3, 1)])
    fleet: list[Member] = []
    watch: WatchLines | None = None
    try:
        for i in range(members):
            fleet.append(spawn("kgctl", bootstrap, group, [topic_a], f"m{i}", cfg, workdir))
        gen = _common_generation(fleet, -1, 60)
        if gen is None:
            res.error = "the members never completed one generation together"
            return res
        args = [group, "-b", bootstrap, "-o", "json", "--interval", str(interval_s)]
        watch = WatchLines(args + (["--no-offsets-topic"] if mode == "poll" else []))
        if watch.wait(lambda e: e["type"] == "GroupObserved", 30) is None:
            res.error = "the watch printed no snapshot"
            return res
        time.sleep(1.0)
        seen = len(watch.generation_changes())
        subscribed_b = [False] * members
        for k in range(rebalances):
            who = k % members
            subscribed_b[who] = not subscribed_b[who]
            topics = [topic_a, topic_b] if subscribed_b[who] else [topic_a]
            fleet[who].send({"op": "subscribe", "topics": topics})
            new = _common_generation(fleet, gen, 30)
            res.rebalances += 1
            if new is None:
                res.error = f"rebalance {k + 1} never completed"
                break
            t_join = min(_completed(m)[new] for m in fleet)
            gen = new
            res.generations.append(new)
            if mode == "offsets":
                shown = watch.wait(
                    lambda e, g=new: e["type"] == "GenerationChanged" and e["generation"] == g,
                    SHOW_TIMEOUT_S,
                )
            else:
                shown = watch.nth_change(seen, SHOW_TIMEOUT_S)
            if shown is None:
                res.missed += 1
            else:
                res.lags_ms.append(shown[0] - t_join)
            seen = len(watch.generation_changes())
            time.sleep(QUIET_S)
    finally:
        if watch is not None:
            watch.stop()
        for m in fleet:
            m.kill(signal.SIGKILL)
        for m in fleet:
            m.reap()
        try:
            admin.delete_topics([topic_a, topic_b])
        except Exception:  # topics of a finished case; the broker may already be gone
            pass
    return res


def run_watch_lag(
    bootstrap: str,
    workdir: Path,
    members: int,
    rebalances: int,
    interval_s: float = 1.0,
    say: Any = print,
) -> dict[str, Any]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kgctl-bench-watchlag")
    results = []
    try:
        for mode in MODES:
            say(f"bench: watch lag, {mode}, {members} members, {rebalances} rebalances")
            r = run_mode(bootstrap, workdir, mode, members, rebalances, interval_s, admin=admin)
            say(f"bench: watch lag {mode}: {r.summary()}")
            results.append(r)
    finally:
        admin.close()
    return {
        "summary": [r.summary() for r in results],
        "cases": [asdict(r) for r in results],
    }
