"""What an idle member costs, by the settings that wake it (docs/member.md, "Many members,
idle members").

One `kgctl join --members N` process (N members, one group, one topic of 2N partitions,
Kafka's default session timeout 45 s, heartbeat interval 3 s and metadata refresh
5 minutes, no records) per variant, one variant after the other: the defaults (fetch
long-polls of 500 ms, the poll loop's 200 ms), `--fetch-max-wait 5000`, and `--no-fetch`.
Once the group is complete and 3 s have passed, the process's CPU (utime + stime) and PSS
are read over `hold_s`.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from bench.latency import Env
from bench.members import ROOT, MemberConfig, _die_with_parent, command, cpu_seconds
from bench.perprocess import pss_kb, threads

VARIANTS: dict[str, list[str]] = {
    "default": [],
    "fetch-max-wait 5000": ["--fetch-max-wait", "5000"],
    "no-fetch": ["--no-fetch"],
}
CFG = MemberConfig(
    session_timeout_ms=45_000, heartbeat_interval_ms=3_000, metadata_max_age_ms=300_000
)


def run_idle(env: Env, n: int, hold_s: float, say: Any = print) -> list[dict[str, Any]]:
    out = []
    for variant, extra in VARIANTS.items():
        topic = env.topic(2 * n)
        group = f"bench-idle-{uuid.uuid4().hex[:6]}"
        cmd = command("kgctl", env.bootstrap, group, [topic], "i", CFG, env.workdir, None,
                      ["--members", str(n), *extra])  # fmt: skip
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=str(ROOT),
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        try:
            expected = {(topic, p) for p in range(2 * n)}
            done = env.observer.wait_complete(group, n, expected, 180)
            time.sleep(3.0)  # past the join's own work
            c0, w0 = cpu_seconds(proc.pid), time.monotonic()
            load0 = float(Path("/proc/loadavg").read_text().split()[0])
            time.sleep(hold_s)
            cpu, wall = cpu_seconds(proc.pid) - c0, time.monotonic() - w0
            row = {
                "variant": variant,
                "members": n,
                "complete": done is not None,
                "held_s": round(wall, 1),
                "cpu_pct_per_member": round(100 * cpu / wall / n, 3),
                "cpu_pct_all": round(100 * cpu / wall, 1),
                "pss_mb_per_member": round(pss_kb(proc.pid) / 1024 / n, 2),
                "threads": threads(proc.pid),
                "loadavg_1m_start_end": [
                    load0,
                    float(Path("/proc/loadavg").read_text().split()[0]),
                ],
            }
        finally:
            proc.terminate()
            proc.wait(30)
            if proc.stdin:
                proc.stdin.close()
        say(f"bench: idle {variant}: {row}")
        out.append(row)
    return out
