"""Start-up cost of one member: CPU seconds from exec to its first completed join.

Side by side in one run, the order rotated every repetition: a `kgctl join --output json`
process and a plain kafka-python consumer (bench/kp_member.py), and with `--startup-baseline
DIR` the kgctl of another source tree (an older commit, unpacked with `git archive`), each
the only member of its own fresh group on one shared topic. The clock starts at exec; a
member has started when it reports its first assignment (kgctl: `JoinCompleted`; kp:
`partitions_assigned`). At that line the bench kills the process (SIGKILL) and reads its
utime + stime from the kernel's accounting of the reaped child (`wait4`: every thread, live
or ended, in microseconds; /proc's clock ticks of 10 ms were too coarse for a 30 ms
difference). Wall time to that line is kept too. The ratio is of the medians.

kgctl's modules are compiled to bytecode before the run, as an installed wheel has them
(kafka-python's are, in site-packages). Without this, a source checkout run with
PYTHONDONTWRITEBYTECODE=1 (as on this machine) compiled kgctl's member path from source
at every start: about 0.06 CPU-s (0.26 -> 0.20 for the same code, 2026-11-30 14:28-14:29)
that an installed kgctl never pays.
"""

from __future__ import annotations

import compileall
import os
import signal
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from bench.latency import Env
from bench.members import ROOT, MemberConfig, _die_with_parent, command

# The line that says a member holds its first assignment, per kind.
_READY = {
    "kgctl": b'"type":"JoinCompleted"',
    "kgctl-baseline": b'"type":"JoinCompleted"',
    "kp": b'"partitions_assigned"',
}


def _one(
    env: Env, kind: str, topic: str, cfg: MemberConfig, baseline: Path | None = None
) -> dict[str, Any]:
    group = f"bench-startup-{kind}-{uuid.uuid4().hex[:6]}"
    # The baseline is another kgctl source tree (an older commit, `git archive`): run from
    # there, `python -m kgctl` imports its kgctl before the installed one.
    base = kind == "kgctl-baseline"
    cmd = command("kgctl" if base else kind, env.bootstrap, group, [topic], "s0", cfg, env.workdir)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(baseline if base and baseline is not None else ROOT),
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=_die_with_parent,  # noqa: PLW1509
    )
    assert proc.stdout is not None
    load = _load()
    try:
        for raw in proc.stdout:
            if _READY[kind] in raw.replace(b" ", b""):
                wall = time.monotonic() - t0
                cpu = _kill_and_cpu(proc)
                return {
                    "kind": kind,
                    "ok": True,
                    "cpu_s": round(cpu, 4),
                    "wall_s": round(wall, 3),
                    "loadavg_1m": load,
                }
        return {"kind": kind, "ok": False, "error": f"exited {proc.wait()} before joining"}
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def _kill_and_cpu(proc: subprocess.Popen[bytes]) -> float:
    """SIGKILL the process and return its CPU seconds (user + system, all threads)."""
    os.kill(proc.pid, signal.SIGKILL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = -signal.SIGKILL  # reaped here: Popen must not wait for it again
    return usage.ru_utime + usage.ru_stime


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "min": ordered[0],
        "q1": round(quartiles[0], 4),
        "median": round(statistics.median(ordered), 4),
        "q3": round(quartiles[2], 4),
        "max": ordered[-1],
    }


def run_startup(
    env: Env, reps: int, say: Any = print, baseline: Path | None = None
) -> dict[str, Any]:
    """`reps` starts of each kind, the order rotated every repetition; medians and the
    kgctl / kp ratio (and kgctl-baseline / kp with `baseline`, another kgctl tree)."""
    topic = env.topic(2)
    cfg = MemberConfig()
    trees = [ROOT / "kgctl", *([baseline / "kgctl"] if baseline is not None else [])]
    compiled = all(compileall.compile_dir(str(tree), quiet=1) for tree in trees)
    kinds = ["kgctl", "kp", *(["kgctl-baseline"] if baseline is not None else [])]
    runs: list[dict[str, Any]] = []
    load = [_load()]
    for rep in range(reps):
        shift = rep % len(kinds)
        for kind in kinds[shift:] + kinds[:shift]:
            r = _one(env, kind, topic, cfg, baseline)
            r["rep"] = rep
            runs.append(r)
            say(f"bench: start-up {kind} rep {rep}: {r}")
    load.append(_load())
    out: dict[str, Any] = {
        "reps": reps,
        "loadavg_1m_start_end": load,
        "cpu_method": "wait4 rusage (utime + stime, all threads) of the process SIGKILLed at "
        "its first-assignment line",
        "kgctl_bytecode": "compiled before the run" if compiled else "compileall failed",
        "runs": runs,
    }
    if baseline is not None:
        out["baseline_tree"] = str(baseline)
    for kind in kinds:
        ok = [r for r in runs if r["kind"] == kind and r["ok"]]
        out[kind] = {
            "ok": len(ok),
            "cpu_s_median": statistics.median(r["cpu_s"] for r in ok) if ok else None,
            "cpu_s_all": [r["cpu_s"] for r in ok],
            "cpu_s_spread": _spread([r["cpu_s"] for r in ok]),
            "wall_s_median": statistics.median(r["wall_s"] for r in ok) if ok else None,
        }
    for kind, key in (("kgctl", "kgctl_kp"), ("kgctl-baseline", "baseline_kp")):
        if kind in out and out[kind]["cpu_s_median"] and out["kp"]["cpu_s_median"]:
            out[f"cpu_ratio_{key}"] = round(
                out[kind]["cpu_s_median"] / out["kp"]["cpu_s_median"], 2
            )
            out[f"wall_ratio_{key}"] = round(
                out[kind]["wall_s_median"] / out["kp"]["wall_s_median"], 2
            )
    return out
