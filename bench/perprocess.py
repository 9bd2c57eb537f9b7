"""What one process per member costs: N consumers as N processes against N consumers in
one process (issue: "if one process per member is the limit, say what would lift it and
measure that too").

Both layouts run plain kafka-python consumers with the density settings (session 45 s,
heartbeat 3 s, eager range), one group each on a topic of 2N partitions, one layout
after the other on the same broker so they do not share the CPU. The process layout is
what `kgctl join` does today (without kgctl's own code, to compare like with like); the
threaded layout is what a `kgctl join --members N` would do: one interpreter, one set of
imports, each consumer still a real member with its own connections, I/O thread,
member id and heartbeats. Once the group is complete, CPU (utime+stime) and memory
(PSS from /proc/PID/smaps_rollup, so shared pages are not counted N times) are read
over `hold_s`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.latency import Env
from bench.members import _die_with_parent, cpu_seconds

# One consumer per thread; argv: bootstrap topic group count name-prefix.
MEMBERS = r"""
import sys, threading, time, warnings
warnings.simplefilter("ignore")
from kafka import KafkaConsumer

bootstrap, topic, group, count, prefix = sys.argv[1:6]

def member(i):
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      client_id=f"{prefix}-{i}", session_timeout_ms=45000,
                      heartbeat_interval_ms=3000)
    while True:
        c.poll(timeout_ms=200)

for i in range(int(count)):
    threading.Thread(target=member, args=(i,), daemon=True).start()
    time.sleep(0.05)
while True:
    time.sleep(3600)
"""


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _layout(env: Env, n: int, per_process: int, hold_s: float, say: Any) -> dict[str, Any]:
    topic = env.topic(2 * n)
    group = f"bench-perprocess-{per_process}-{uuid.uuid4().hex[:6]}"
    procs = []
    started = time.monotonic()
    try:
        for start in range(0, n, per_process):
            count = min(per_process, n - start)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", MEMBERS, env.bootstrap, topic, group, str(count),
                     f"m{start}"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=_die_with_parent,
                )
            )  # fmt: skip
        expected = {(topic, p) for p in range(2 * n)}
        if env.observer.wait_complete(group, n, expected, 600) is None:
            return {"ok": False, "error": "group never complete", "members": n}
        ready_s = time.monotonic() - started
        time.sleep(5.0)
        pids = [p.pid for p in procs]
        c0 = sum(cpu_seconds(pid) for pid in pids)
        t0 = time.monotonic()
        samples = []
        while time.monotonic() - t0 < hold_s:
            time.sleep(min(10.0, hold_s))
            samples.append(sum(pss_kb(pid) for pid in pids))
        wall = time.monotonic() - t0
        cpu = sum(cpu_seconds(pid) for pid in pids) - c0
        complete = env.observer.wait_complete(group, n, expected, 5) is not None
        result = {
            "ok": complete and all(p.poll() is None for p in procs),
            "members": n,
            "members_per_process": per_process,
            "processes": len(procs),
            "ready_s": round(ready_s, 1),
            "held_s": round(wall, 1),
            "cpu_pct_all": round(100 * cpu / wall, 1),
            "cpu_pct_per_member": round(100 * cpu / wall / n, 3),
            "pss_mb_all": round(statistics.median(samples) / 1024, 1),
            "pss_mb_per_member": round(statistics.median(samples) / 1024 / n, 2),
            "threads_per_member": round(sum(threads(pid) for pid in pids) / n, 2),
        }
        say(f"bench: {n} members, {per_process} per process: {result}")
        return result
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


def run_per_process(
    env: Env, n: int, per_process: list[int], hold_s: float, say: Any = print
) -> list[dict[str, Any]]:
    return [_layout(env, n, k, hold_s, say) for k in per_process]
