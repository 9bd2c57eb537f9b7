"""`kgctl monitor` on a cluster of many groups: its CPU, its memory, and how long after a
rebalance ends it is counted, against describing every group at every interval.

Method (`python -m bench.monitor_scale`; defaults are the issue's figures):

1. a dedicated local broker (or `--bootstrap`); `--idle` groups made idle the way a
   cluster accumulates them: each has a committed offset and no member (ListGroups lists
   it Empty; `__consumer_offsets` holds its commit);
2. `--active` groups, each with one live librdkafka member (confluent-kafka, classic
   `range`, 10 s session), all driven by one thread of this process that polls each
   member every 20 ms; each member's assignment callback is kept with its time;
3. for each mode, a fresh `kgctl monitor -o json --interval 1 --metrics-listen` is started
   and given `--warmup` seconds once it reports it has caught up with the log; then, for
   `--seconds`, rebalances are provoked at `--rate` a second, round robin over the active
   groups: a second member joins a group (a rebalance), and leaves it 10 s later (another);
4. a rebalance's end is the first assignment callback of any of its group's members after
   the action (the coordinator has stored the generation before it answers the first
   SyncGroup; the callback runs at the member's next poll, up to 20 ms later, so the lag
   below is short by up to that); it is counted when the monitor's JSON line for that group
   is read (the line and the Prometheus counter are updated in the same call); lag = line
   read - end; a rebalance without a line within 30 s is missed, and a line whose cause is
   not the action's (`member_joined`, `member_left`) is counted wrong;
5. the monitor's CPU is its utime + stime over the measured window (/proc/PID/stat) divided
   by the window, its memory the RSS at the end and its peak (VmHWM); the broker's CPU
   over the same window is given beside it (what the describes cost the coordinator).

Modes: `log` (the monitor as shipped: the log, and describes only where something may
have happened) and `poll` (`--no-offsets-topic`: ListGroups and DescribeGroups of every
group each interval, generations inferred: the approach of exporters that poll).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.observe import now_ms, read_json_lines

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")
HOLD_S = 10.0  # a joiner stays this long before it leaves
LINE_TIMEOUT_S = 30.0
SLOW_MS = 2_000  # the target for the p99 lag


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, peak RSS) in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return rss / 1024, hwm / 1024


def make_idle(bootstrap: str, n: int, say: Callable[[str], None]) -> str:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-idle-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    started = time.monotonic()
    futures = []
    for i in range(n):
        group = ConsumerGroupTopicPartitions(f"{topic}-g{i:05d}", [TopicPartition(topic, 0, 1)])
        futures += list(admin.alter_consumer_group_offsets([group]).values())
    for f in futures:
        f.result()
    say(f"bench: {n} idle groups in {time.monotonic() - started:.0f}s")
    return topic


@dataclass
class Action:
    group: str
    kind: str  # "join" or "leave"
    at_ms: int
    ended_ms: int | None = None
    counted_ms: int | None = None
    cause: str | None = None


class Fleet:
    """The active groups' members, polled by one thread; joiners added and removed."""

    def __init__(self, bootstrap: str, topic: str, groups: list[str]) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.members: dict[str, Any] = {}  # name -> Consumer
        self.group_of: dict[str, str] = {}
        self.assigned: dict[str, list[int]] = {g: [] for g in groups}  # group -> callback times
        self.commands: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        for g in groups:
            self.commands.append(("add", g, f"{g}-m0"))
        self.thread.start()

    def _consumer(self, group: str, name: str) -> Any:
        from confluent_kafka import Consumer

        def on_assign(_c: Any, _parts: Any) -> None:
            with self.lock:
                self.assigned[group].append(now_ms())

        c = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": group, "client.id": name,
            "session.timeout.ms": "10000", "heartbeat.interval.ms": "1000",
            "partition.assignment.strategy": "range", "enable.auto.commit": "false",
        })  # fmt: skip
        c.subscribe([self.topic], on_assign=on_assign)
        return c

    def _loop(self) -> None:
        while not self.stopping.is_set():
            with self.lock:
                commands, self.commands = self.commands, []
            for op, group, name in commands:
                if op == "add":
                    self.members[name] = self._consumer(group, name)
                    self.group_of[name] = group
                else:
                    self.members.pop(name).close()  # LeaveGroup
            for c in list(self.members.values()):
                c.poll(0)
            time.sleep(0.02)
        for c in self.members.values():
            c.close()

    def tell(self, op: str, group: str, name: str) -> None:
        with self.lock:
            self.commands.append((op, group, name))

    def assignments_after(self, group: str, at_ms: int) -> int | None:
        with self.lock:
            later = [t for t in self.assigned[group] if t > at_ms]
        return min(later) if later else None

    def settled(self) -> int:
        with self.lock:
            return sum(1 for times in self.assigned.values() if times)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=120)


class MonitorProc:
    """`kgctl monitor -o json` with its lines kept and their read times."""

    def __init__(self, bootstrap: str, interval_s: float, poll_only: bool) -> None:
        args = [sys.executable, "-m", "kgctl", "monitor", "-b", bootstrap, "-o", "json"]
        args += ["--interval", str(interval_s), "--metrics-listen", "127.0.0.1:0"]
        args += ["--no-offsets-topic"] if poll_only else []
        self.proc = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines: list[tuple[int, dict[str, Any]]] = []
        self.url: str | None = None
        self.lock = threading.Lock()
        threading.Thread(target=self._out, daemon=True).start()
        threading.Thread(target=self._err, daemon=True).start()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        read_json_lines(self.proc.stdout, self.lines, self.lock)

    def _err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = re.search(r"metrics at (http://\S+)", line)
            if m:
                self.url = m.group(1)

    def metric(self, name: str) -> float | None:
        if self.url is None:
            return None
        try:
            text = urllib.request.urlopen(self.url, timeout=5).read().decode()
        except OSError:
            return None
        m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
        return float(m.group(1)) if m else None

    def lines_of(self, group: str, after_ms: int) -> list[tuple[int, dict[str, Any]]]:
        with self.lock:
            return [(t, d) for t, d in self.lines if d.get("group") == group and t > after_ms]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class ModeResult:
    mode: str
    interval_s: float
    window_s: float = 0.0
    cpu_core_fraction: float = 0.0
    broker_cpu_core_fraction: float | None = None
    rss_mb: float = 0.0
    peak_rss_mb: float = 0.0
    rebalances: int = 0
    lags_ms: list[int] = field(default_factory=list)
    missed: int = 0
    wrong_cause: int = 0
    error: str = ""
    # The first few rebalances missed or given a wrong cause, to read what happened.
    examples: list[dict[str, Any]] = field(default_factory=list)
    # The first few counted later than the target's p99 (2 s), with their lines.
    slow: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lags = sorted(self.lags_ms)

        def pct(p: float) -> int | None:
            return lags[min(len(lags) - 1, int(p * len(lags)))] if lags else None

        return {
            "mode": self.mode, "interval_s": self.interval_s, "window_s": round(self.window_s, 1),
            "cpu_core_fraction": round(self.cpu_core_fraction, 4),
            "broker_cpu_core_fraction": None if self.broker_cpu_core_fraction is None
            else round(self.broker_cpu_core_fraction, 4),
            "rss_mb": round(self.rss_mb, 1), "peak_rss_mb": round(self.peak_rss_mb, 1),
            "rebalances": self.rebalances, "counted": len(lags), "missed": self.missed,
            "wrong_cause": self.wrong_cause,
            "lag_median_ms": int(statistics.median(lags)) if lags else None,
            "lag_p99_ms": pct(0.99), "lag_max_ms": lags[-1] if lags else None,
            "slow_over_2s": sum(1 for x in lags if x > SLOW_MS),
            "error": self.error, "examples": self.examples, "slow": self.slow,
        }  # fmt: skip


def run_mode(
    mode: str,
    interval_s: float,
    bootstrap: str,
    fleet: Fleet,
    groups: list[str],
    seconds: float,
    rate: float,
    warmup_s: float,
    broker_pid: int | None,
    say: Callable[[str], None],
) -> ModeResult:
    res = ModeResult(mode, interval_s)
    mon = MonitorProc(bootstrap, interval_s, poll_only=mode == "poll")
    try:
        deadline = time.monotonic() + 300
        ready = "kgctl_monitor_polls_total" if mode == "poll" else "kgctl_monitor_offsets_caught_up"
        while (mon.metric(ready) or 0) < 1:
            if time.monotonic() > deadline or mon.proc.poll() is not None:
                res.error = "the monitor never caught up"
                return res
            time.sleep(0.5)
        say(f"bench: {mode}@{interval_s:g}s: monitor ready, warming up {warmup_s:.0f}s")
        time.sleep(warmup_s)
        start_cpu, start_t = cpu_s(mon.proc.pid), time.monotonic()
        start_broker = cpu_s(broker_pid) if broker_pid else None
        actions: list[Action] = []
        joiners: list[tuple[float, str, str]] = []  # (leave at, group, name)
        k = 0
        while time.monotonic() - start_t < seconds:
            due = start_t + k / rate
            time.sleep(max(0.0, due - time.monotonic()))
            now = time.monotonic()
            if joiners and joiners[0][0] <= now:
                _, group, name = joiners.pop(0)
                actions.append(Action(group, "leave", now_ms()))
                fleet.tell("remove", group, name)
            else:
                group = groups[k % len(groups)]
                name = f"{group}-j{k}"
                actions.append(Action(group, "join", now_ms()))
                fleet.tell("add", group, name)
                joiners.append((now + HOLD_S, group, name))
            k += 1
        window = time.monotonic() - start_t
        res.window_s = window
        res.cpu_core_fraction = (cpu_s(mon.proc.pid) - start_cpu) / window
        if start_broker is not None and broker_pid:
            res.broker_cpu_core_fraction = (cpu_s(broker_pid) - start_broker) / window
        res.rss_mb, res.peak_rss_mb = memory_mb(mon.proc.pid)
        _wait_lines(actions, mon, LINE_TIMEOUT_S)
        for _, group, name in joiners:  # the ones still in: out, outside the window
            fleet.tell("remove", group, name)
        _score(res, actions, fleet, mon)
        return res
    finally:
        mon.stop()


def _wait_lines(actions: list[Action], mon: MonitorProc, timeout_s: float) -> None:
    """Until each group has as many lines after its first action as it had actions (or
    the timeout: what has none by then is missed)."""
    wanted: dict[str, tuple[int, int]] = {}
    for a in actions:
        first, n = wanted.get(a.group, (a.at_ms, 0))
        wanted[a.group] = (first, n + 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(len(mon.lines_of(g, first)) >= n for g, (first, n) in wanted.items()):
            return
        time.sleep(0.2)


def _score(res: ModeResult, actions: list[Action], fleet: Fleet, mon: MonitorProc) -> None:
    # Each group's actions in order; its lines after each action's end, in order.
    used: dict[str, int] = {}
    for a in actions:
        res.rebalances += 1
        end = fleet.assignments_after(a.group, a.at_ms)
        lines = [x for x in mon.lines_of(a.group, a.at_ms) if x[0] > used.get(a.group, 0)]
        if end is None or not lines or lines[0][0] - end > LINE_TIMEOUT_S * 1000:
            res.missed += 1
            _example(res, a, end, lines)
            continue
        t, doc = lines[0]
        used[a.group] = t
        res.lags_ms.append(t - end)
        if t - end > SLOW_MS and len(res.slow) < 5:
            res.slow.append({"group": a.group, "action": a.kind, "at_ms": a.at_ms,
                             "ended_ms": end, "read_ms": t, "line": doc})  # fmt: skip
        want = "member_joined" if a.kind == "join" else "member_left"
        if doc["trigger"]["cause"] != want:
            res.wrong_cause += 1
            _example(res, a, end, lines)


def _example(
    res: ModeResult, a: Action, end: int | None, lines: list[tuple[int, dict[str, Any]]]
) -> None:
    if len(res.examples) < 5:
        res.examples.append({
            "group": a.group, "action": a.kind, "at_ms": a.at_ms, "ended_ms": end,
            "lines": [
                {"read_ms": t, "generation": d.get("generation"),
                 "cause": d["trigger"]["cause"], "evidence": d["trigger"].get("evidence")}
                for t, d in lines[:3]
            ],
        })  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--idle", type=int, default=10_000)
    p.add_argument("--active", type=int, default=300)
    p.add_argument("--rate", type=float, default=2.0, help="rebalances provoked a second")
    p.add_argument("--seconds", type=float, default=120.0, help="the measured window per mode")
    p.add_argument("--warmup", type=float, default=20.0)
    p.add_argument(
        "--modes",
        default="log:1,poll:1,log:10",
        help="MODE:INTERVAL,...: log (as shipped) or poll (--no-offsets-topic), --interval",
    )
    p.add_argument("--bootstrap")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)

    def say(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    out["args"] = {**vars(args), "out": str(args.out)}
    out["machine"] = {"nproc": os.cpu_count(), "loadavg_start": os.getloadavg()[0]}
    broker = None
    broker_pid = None
    bootstrap = args.bootstrap
    work = Path(tempfile.mkdtemp(prefix="kgctl-bench-monitor-"))
    if not bootstrap:
        from kgctl.broker.local import LocalBroker

        say("bench: starting a dedicated local broker")
        broker = LocalBroker(work / "broker.json")
        state = broker.up(tie_to_parent=True, timeout_s=180)
        bootstrap, broker_pid = state.bootstrap, state.nodes[0].pid
        out["kafka"] = state.version
    fleet = None
    try:
        make_idle(bootstrap, args.idle, say)
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"bench-active-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
        groups = [f"{topic}-g{i:03d}" for i in range(args.active)]
        fleet = Fleet(bootstrap, topic, groups)
        deadline = time.monotonic() + 600
        while fleet.settled() < len(groups) and time.monotonic() < deadline:
            time.sleep(1)
        say(f"bench: {fleet.settled()} of {len(groups)} active groups assigned")
        out["modes"] = []
        for spec in args.modes.split(","):
            mode, _, interval = spec.partition(":")
            r = run_mode(
                mode, float(interval or 1), bootstrap, fleet, groups, args.seconds, args.rate,
                args.warmup, broker_pid, say,
            )  # fmt: skip
            say(f"bench: {mode}: {json.dumps(r.summary())}")
            out["modes"].append(r.summary())
        out["machine"]["loadavg_end"] = os.getloadavg()[0]
    finally:
        if fleet is not None:
            fleet.stop()
        if broker is not None:
            broker.down()
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
