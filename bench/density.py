"""How many kgctl members one machine holds in one stable group, and where it breaks.

Steps of N members in one group on one topic of as many partitions as the largest step
has members, Kafka's default session timeout (45 s), heartbeat interval (3 s) and
`metadata.max.age.ms` (5 minutes), eager range. (Every member refreshes the metadata of
the whole topic on its own: kafka-python decodes it in Python, about 12 µs a partition,
so 10 partitions a member and a 30 s refresh made that most of an idle member's CPU at
a few hundred members: total cost grows with members × partitions.) Members are
`kgctl join --members K` processes
(K members each, one interpreter; K = 1 is one process per member), started one process
at a time (the next once the previous printed its first event). By default they do not
fetch (`--no-fetch`: a fleet that needs members in the group, not records); `fetch=True`
measures fetching members. A step is reached when DescribeGroups reports the group
complete (Stable, N members, every partition assigned once); then the group is held for
`hold_s` while the broker log is watched for any new "Preparing to rebalance" line and
/proc is read for every member process's PSS (smaps_rollup: shared pages counted once),
threads and CPU. The next step adds members to the same group.

A step fails (the **break point**) when the group is not complete within the timeout, a
rebalance starts during the hold, a member process dies, free memory would drop under
`min_free_gb`, or the members' PSS would pass `max_pss_gb`. At the largest stable size
(after stopping the failed step's extra members with SIGTERM, so they leave at once),
two triggers must complete: **growth** (the topic gets 10 % more partitions; the leader
sees them at its next metadata refresh, within 5 minutes) and **kill**
(one member process SIGKILLed: its K members are expired by the 45 s session timeout and
the rest rebalance).
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from kafka.admin import NewPartitions

from bench.latency import Env
from bench.members import ROOT, MemberConfig, _die_with_parent, command, cpu_seconds, proc_status
from bench.observe import now_ms
from bench.perprocess import pss_kb

DENSITY_CFG = MemberConfig(
    session_timeout_ms=45_000, heartbeat_interval_ms=3_000, metadata_max_age_ms=300_000
)
PARTITIONS_PER_MEMBER = 1


def mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


class Pack:
    """One member process of `count` members."""

    def __init__(self, env: Env, group: str, topic: str, index: int, count: int, fetch: bool,
                 cfg: MemberConfig, outdir: Path) -> None:  # fmt: skip
        extra = ["--members", str(count)] if count > 1 else []
        extra += [] if fetch else ["--no-fetch"]
        cmd = command("kgctl", env.bootstrap, group, [topic], f"p{index}", cfg, env.workdir, None,
                      extra)  # fmt: skip
        self.count = count
        self.out = outdir / f"p{index}.out"
        with open(self.out, "wb") as fh:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=fh,
                stderr=subprocess.DEVNULL,
                cwd=str(ROOT),
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )

    def started(self) -> bool:
        try:
            return self.out.stat().st_size > 0
        except OSError:
            return False


def _describe(env: Env, group: str) -> tuple[str, int]:
    """(state, members) of the group, or why it could not be described: at the break
    point the bench's own admin client may not get an answer either."""
    try:
        snap = env.observer.describe(group)
    except Exception as exc:  # recorded, not raised: the step's result must be kept
        return f"not described ({type(exc).__name__}: {str(exc)[:120]})", -1
    return snap.state, len(snap.members)


def _complete(
    env: Env, group: str, n: int, topic: str, partitions: int, timeout_s: float
) -> int | None:
    # One DescribeGroups a second: at thousands of members each answer costs the bench tens
    # of milliseconds to decode, CPU the members would not get.
    expected = {(topic, p) for p in range(partitions)}
    return env.observer.wait_complete(group, n, expected, timeout_s, poll_s=1.0)


def _hold(
    env: Env, group: str, packs: list[Pack], n: int, hold_s: float, say: Any
) -> dict[str, Any]:
    log_offset = env.log.size()
    pids = [p.proc.pid for p in packs]
    cpu0 = [cpu_seconds(pid) for pid in pids]
    load0 = loadavg()
    t0 = time.monotonic()
    pss_samples: list[int] = []
    deadline = t0 + hold_s
    while time.monotonic() < deadline:
        time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
        pss_samples.append(sum(pss_kb(pid) for pid in pids))
        say(f"bench: density {n}: held {time.monotonic() - t0:.0f} s, load {loadavg()}")
    wall = time.monotonic() - t0
    cpu = [cpu_seconds(pid) - c for pid, c in zip(pids, cpu0, strict=True)]
    stats = [proc_status(pid) for pid in pids]
    dead = sum(p.count for p in packs if p.proc.poll() is not None)
    rebalances = [e for e in env.log.events(group, log_offset) if e.what == "prepare"]
    state, described = _describe(env, group)
    pss = statistics.median(pss_samples) if pss_samples else 0
    return {
        "hold_s": round(wall, 1),
        "rebalances_during_hold": len(rebalances),
        "dead_members": dead,
        "state_after_hold": state,
        "members_after_hold": described,
        "processes": len(packs),
        "pss_mb_per_member": round(pss / 1024 / n, 2),
        "pss_gb_all": round(pss / 1024 / 1024, 2),
        "rss_mb_per_process_median": round(
            statistics.median(s.get("rss_kb", 0) for s in stats) / 1024, 1
        ),
        "threads_per_member": round(sum(s.get("threads", 0) for s in stats) / n, 2),
        "cpu_pct_per_member": round(100 * sum(cpu) / wall / n, 3),
        "cpu_pct_all_members": round(100 * sum(cpu) / wall, 1),
        "loadavg_1m_start_end": [load0, loadavg()],
        "mem_available_gb_end": round(mem_available_kb() / 1024 / 1024, 1),
        "ok": not rebalances and not dead and state == "Stable" and described == n,
    }


def _triggers(env: Env, group: str, topic: str, packs: list[Pack], partitions: int,
              timeout_s: float, say: Any) -> list[dict[str, Any]]:  # fmt: skip
    n = sum(p.count for p in packs)
    out = []
    grown = partitions + max(1, partitions // 10)
    t0 = now_ms()
    env.admin.create_partitions({topic: NewPartitions(grown)})
    done = _complete(env, group, n, topic, grown, timeout_s)
    out.append(
        {
            "trigger": "growth",
            "members": n,
            "partitions": f"{partitions} -> {grown}",
            "ok": done is not None,
            "trigger_to_complete_ms": done - t0 if done else None,
        }
    )
    say(f"bench: density growth at {n}: {out[-1]}")
    victim = packs[-1]
    t0 = now_ms()
    victim.proc.send_signal(signal.SIGKILL)
    left = n - victim.count
    done = _complete(env, group, left, topic, grown, timeout_s)
    out.append(
        {
            "trigger": "kill",
            "members": f"{n} -> {left}",
            "killed_process_members": victim.count,
            "ok": done is not None,
            "trigger_to_complete_ms": done - t0 if done else None,
        }
    )
    say(f"bench: density kill at {n}: {out[-1]}")
    return out


def run_density(
    env: Env,
    steps: list[int],
    hold_s: float,
    per_process: int = 50,
    fetch: bool = False,
    complete_timeout_s: float = 600.0,
    min_free_gb: float = 4.0,
    max_pss_gb: float = 12.0,
    triggers: bool = True,
    budget_s: float | None = None,
    say: Any = print,
    cfg: MemberConfig = DENSITY_CFG,
) -> dict[str, Any]:
    max_n = max(steps)
    partitions = PARTITIONS_PER_MEMBER * max_n
    topic = env.topic(partitions)
    group = f"bench-density-{uuid.uuid4().hex[:6]}"
    outdir = env.workdir / group
    outdir.mkdir(parents=True, exist_ok=True)
    packs: list[Pack] = []
    out: dict[str, Any] = {
        "group": group,
        "topic_partitions": partitions,
        "members_per_process": per_process,
        "fetch": fetch,
        "session_timeout_ms": cfg.session_timeout_ms,
        "heartbeat_interval_ms": cfg.heartbeat_interval_ms,
        "metadata_max_age_ms": cfg.metadata_max_age_ms,
        "hold_s": hold_s,
        "limits": {"min_free_gb": min_free_gb, "max_pss_gb": max_pss_gb},
        "budget_s": budget_s,
        "steps": [],
        "largest_stable": None,
        "break_point": None,
    }
    started = time.monotonic()
    try:
        for n in steps:
            if budget_s is not None and out["steps"] and time.monotonic() - started > budget_s:
                out["not_run"] = {"steps": steps[steps.index(n) :], "why": "time budget spent"}
                break
            step: dict[str, Any] = {"members": n, "ok": False}
            out["steps"].append(step)
            t_ramp = now_ms()
            while sum(p.count for p in packs) < n:
                have = sum(p.count for p in packs)
                pss = sum(pss_kb(p.proc.pid) for p in packs) / 1024 / 1024
                per_member = pss / have if have else 0.05
                if mem_available_kb() < min_free_gb * 1024 * 1024:
                    step["error"] = f"stopped at {have} members: under {min_free_gb} GB free"
                    break
                if pss + per_member * min(per_process, n - have) > max_pss_gb:
                    step["error"] = f"stopped at {have} members: PSS would pass {max_pss_gb} GB"
                    break
                pack = Pack(env, group, topic, len(packs), min(per_process, n - have), fetch,
                            cfg, outdir)  # fmt: skip
                packs.append(pack)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not pack.started():
                    time.sleep(0.2)
            step["ramp_s"] = round((now_ms() - t_ramp) / 1000, 1)
            if "error" not in step:
                t_done = _complete(env, group, n, topic, partitions, complete_timeout_s)
                if t_done is None:
                    state, described = _describe(env, group)
                    step["error"] = (
                        f"not complete within {complete_timeout_s:.0f} s: state {state}, "
                        f"{described} members"
                    )
                else:
                    step["complete_after_ramp_s"] = round(
                        (t_done - t_ramp) / 1000 - step["ramp_s"], 1
                    )
                    say(f"bench: density {n} members complete; holding {hold_s:.0f} s")
                    step.update(_hold(env, group, packs, n, hold_s, say))
            say(f"bench: density {n}: {step}")
            if not step["ok"]:
                out["break_point"] = {"members": n, "why": step.get("error") or _why(step)}
                break
            out["largest_stable"] = n
        if triggers and out["largest_stable"]:
            stable = out["largest_stable"]
            # Back to the largest stable size: the failed step's extra members leave.
            extra = []
            while packs and sum(p.count for p in packs) > stable:
                extra.append(packs.pop())
            for p in extra:
                p.proc.send_signal(signal.SIGTERM)
            for p in extra:
                p.proc.wait(60)
            if _complete(env, group, stable, topic, partitions, complete_timeout_s) is not None:
                out["triggers"] = _triggers(env, group, topic, packs, partitions,
                                            complete_timeout_s, say)  # fmt: skip
            else:
                out["triggers"] = [{"ok": False, "error": "not complete again at the stable size"}]
        return out
    finally:
        for p in packs:
            if p.proc.poll() is None:
                p.proc.kill()
        for p in packs:
            p.proc.wait(10)
            if p.proc.stdin:
                p.proc.stdin.close()


def _why(step: dict[str, Any]) -> str:
    parts = []
    if step.get("rebalances_during_hold"):
        parts.append(f"{step['rebalances_during_hold']} rebalances during the hold")
    if step.get("dead_members"):
        parts.append(f"{step['dead_members']} members dead")
    if step.get("state_after_hold") not in (None, "Stable"):
        parts.append(f"state {step['state_after_hold']}")
    return ", ".join(parts) or "incomplete"
