"""How many kgctl members one machine holds in one stable group.

Steps of N members (one `kgctl join` process each) in one group on one topic of 2N
partitions, Kafka's default session timeout (45 s) and heartbeat interval (3 s):
members are started in batches (the next batch once the previous one printed its first
event), then the group must be complete (Stable, N members, every partition assigned,
checked with DescribeGroups), then it is held for `hold_s` while the broker log is
watched for any further rebalance and /proc is sampled for RSS, threads and CPU of every
member. The next step adds members to the same group. A step fails when the group is
not complete within the timeout, a rebalance starts during the hold, a member dies, or
free memory would drop under 2 GB.
"""

from __future__ import annotations

import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from bench.latency import Env
from bench.members import ROOT, MemberConfig, _die_with_parent, command, cpu_seconds, proc_status
from bench.observe import now_ms

DENSITY_CFG = MemberConfig(
    session_timeout_ms=45_000, heartbeat_interval_ms=3_000, metadata_max_age_ms=300_000
)


def mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_density(
    env: Env,
    steps: list[int],
    hold_s: float,
    batch: int = 10,
    complete_timeout_s: float = 600.0,
    say=print,
    cfg: MemberConfig = DENSITY_CFG,
) -> dict[str, Any]:
    max_n = max(steps)
    topic = env.topic(2 * max_n)
    group = f"bench-density-{uuid.uuid4().hex[:6]}"
    outdir = env.workdir / group
    outdir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    out: dict[str, Any] = {
        "group": group,
        "topic_partitions": 2 * max_n,
        "session_timeout_ms": cfg.session_timeout_ms,
        "heartbeat_interval_ms": cfg.heartbeat_interval_ms,
        "hold_s": hold_s,
        "steps": [],
    }

    def started(i: int) -> bool:
        try:
            return (outdir / f"m{i}.out").stat().st_size > 0
        except OSError:
            return False

    try:
        for n in steps:
            step: dict[str, Any] = {"members": n, "ok": False}
            out["steps"].append(step)
            t_ramp = now_ms()
            while len(procs) < n:
                if mem_available_kb() < 2_000_000:
                    step["error"] = f"stopped at {len(procs)} members: under 2 GB free"
                    return out
                first = len(procs)
                for _ in range(min(batch, n - len(procs))):
                    i = len(procs)
                    cmd = command("kgctl", env.bootstrap, group, [topic], f"m{i}", cfg, env.workdir)
                    with open(outdir / f"m{i}.out", "wb") as fh:
                        procs.append(
                            subprocess.Popen(
                                cmd,
                                stdin=subprocess.PIPE,
                                stdout=fh,
                                stderr=subprocess.DEVNULL,
                                cwd=str(ROOT),
                                preexec_fn=_die_with_parent,  # noqa: PLW1509
                            )
                        )
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not all(
                    started(i) for i in range(first, len(procs))
                ):
                    time.sleep(0.2)
            step["ramp_s"] = round((now_ms() - t_ramp) / 1000, 1)
            expected = {(topic, p) for p in range(2 * max_n)}
            t_done = env.observer.wait_complete(group, n, expected, complete_timeout_s)
            if t_done is None:
                snap = env.observer.describe(group)
                step["error"] = (
                    f"not complete within {complete_timeout_s:.0f} s: state {snap.state}, "
                    f"{len(snap.members)} members"
                )
                return out
            step["complete_after_ramp_s"] = round((t_done - t_ramp) / 1000 - step["ramp_s"], 1)
            say(f"bench: density {n} members complete; holding {hold_s:.0f} s")
            log_offset = env.log.size()
            cpu0 = [cpu_seconds(p.pid) for p in procs]
            load0 = loadavg()
            t0 = time.monotonic()
            time.sleep(hold_s)
            wall = time.monotonic() - t0
            cpu1 = [cpu_seconds(p.pid) for p in procs]
            stats = [proc_status(p.pid) for p in procs]
            dead = sum(1 for p in procs if p.poll() is not None)
            rebalances = [e for e in env.log.events(group, log_offset) if e.what == "prepare"]
            snap = env.observer.describe(group)
            rss = [s["rss_kb"] for s in stats if "rss_kb" in s]
            threads = [s["threads"] for s in stats if "threads" in s]
            cpu_pct = [100 * (b - a) / wall for a, b in zip(cpu0, cpu1, strict=True)]
            step.update(
                {
                    "hold_s": round(wall, 1),
                    "rebalances_during_hold": len(rebalances),
                    "dead_members": dead,
                    "state_after_hold": snap.state,
                    "members_after_hold": len(snap.members),
                    "rss_mb_median": round(statistics.median(rss) / 1024, 1),
                    "rss_mb_max": round(max(rss) / 1024, 1),
                    "rss_gb_total": round(sum(rss) / 1024 / 1024, 2),
                    "threads_median": statistics.median(threads),
                    "cpu_pct_per_member_median": round(statistics.median(cpu_pct), 2),
                    "cpu_pct_all_members": round(sum(cpu_pct), 1),
                    "loadavg_1m_start_end": [load0, loadavg()],
                    "mem_available_gb_end": round(mem_available_kb() / 1024 / 1024, 1),
                }
            )
            step["ok"] = (
                not rebalances and not dead and snap.state == "Stable" and len(snap.members) == n
            )
            say(f"bench: density {n}: {step}")
            if not step["ok"]:
                return out
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait(10)
            if p.stdin:
                p.stdin.close()
