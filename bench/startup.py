"""Start-up cost of one member: CPU seconds from exec to its first completed join.

Side by side in one run, alternating (the order flipped every repetition): a `kgctl join
--output json` process and a plain kafka-python consumer (bench/kp_member.py), each the
only member of its own fresh group on one shared topic. The clock starts at exec; a
member has started when it reports its first assignment (kgctl: `JoinCompleted`; kp:
`partitions_assigned`). At that line the bench reads the process's utime + stime from
/proc (every thread, live or ended, in clock ticks), and then kills it. Wall time to
that line is kept too. The ratio is of the medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from bench.latency import Env
from bench.members import ROOT, MemberConfig, _die_with_parent, command, cpu_seconds

# The line that says a member holds its first assignment, per kind.
_READY = {"kgctl": b'"type":"JoinCompleted"', "kp": b'"partitions_assigned"'}


def _one(env: Env, kind: str, topic: str, cfg: MemberConfig) -> dict[str, Any]:
    group = f"bench-startup-{kind}-{uuid.uuid4().hex[:6]}"
    cmd = command(kind, env.bootstrap, group, [topic], "s0", cfg, env.workdir)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=_die_with_parent,  # noqa: PLW1509
    )
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            if _READY[kind] in raw.replace(b" ", b""):
                cpu = cpu_seconds(proc.pid)
                wall = time.monotonic() - t0
                return {"kind": kind, "ok": True, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
        return {"kind": kind, "ok": False, "error": f"exited {proc.wait()} before joining"}
    finally:
        proc.kill()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def run_startup(env: Env, reps: int, say: Any = print) -> dict[str, Any]:
    """`reps` starts of each kind, alternating; medians and the kgctl / kp ratio."""
    topic = env.topic(2)
    cfg = MemberConfig()
    runs: list[dict[str, Any]] = []
    load = [float(Path("/proc/loadavg").read_text().split()[0])]
    for rep in range(reps):
        for kind in ("kgctl", "kp") if rep % 2 == 0 else ("kp", "kgctl"):
            r = _one(env, kind, topic, cfg)
            r["rep"] = rep
            runs.append(r)
            say(f"bench: start-up {kind} rep {rep}: {r}")
    load.append(float(Path("/proc/loadavg").read_text().split()[0]))
    out: dict[str, Any] = {"reps": reps, "loadavg_1m_start_end": load, "runs": runs}
    for kind in ("kgctl", "kp"):
        ok = [r for r in runs if r["kind"] == kind and r["ok"]]
        out[kind] = {
            "ok": len(ok),
            "cpu_s_median": statistics.median(r["cpu_s"] for r in ok) if ok else None,
            "cpu_s_all": [r["cpu_s"] for r in ok],
            "wall_s_median": statistics.median(r["wall_s"] for r in ok) if ok else None,
        }
    if out["kgctl"]["cpu_s_median"] and out["kp"]["cpu_s_median"]:
        out["cpu_ratio_kgctl_kp"] = round(
            out["kgctl"]["cpu_s_median"] / out["kp"]["cpu_s_median"], 2
        )
        out["wall_ratio_kgctl_kp"] = round(
            out["kgctl"]["wall_s_median"] / out["kp"]["wall_s_median"], 2
        )
    return out
