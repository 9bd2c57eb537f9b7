"""CPU cost of `--trace-topic` for one kgctl member.

Three kgctl members run at the same time, each alone in its own group on the same
topic (so each gets every partition and the same records): two plain, one with
`--trace-topic`. A producer writes `rate` records/s (in 20 ms batches) to the topic for
the whole window. After the groups are complete, each member's CPU time (utime+stime
from /proc) is measured over `windows` consecutive windows of `seconds / windows`.
Run side by side so shared machine load hits them alike. The result is the median over
the windows of (traced - plain) / plain; the second plain member gives the same figure
for two identical members, the noise floor of the method.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from typing import Any

from kafka import KafkaProducer

from bench.latency import Env
from bench.members import MemberConfig, cpu_seconds, spawn


def run_trace_cost(env: Env, seconds: float, rate: int, windows: int = 3) -> dict[str, Any]:
    cfg = MemberConfig(session_timeout_ms=10_000, heartbeat_interval_ms=3_000)
    topic = env.topic(6)
    trace = env.topic(1)
    stop = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=env.bootstrap, linger_ms=5)
        per_tick = max(1, rate // 50)
        while not stop.is_set():
            if rate:
                for _ in range(per_tick):
                    producer.send(topic, b"x" * 100)
            time.sleep(0.02)
        producer.close()

    g = uuid.uuid4().hex[:6]
    plain = spawn("kgctl", env.bootstrap, f"bench-trace-off-{g}", [topic], "off", cfg, env.workdir)
    control = spawn("kgctl", env.bootstrap, f"bench-trace-aa-{g}", [topic], "aa", cfg, env.workdir)
    traced = spawn(
        "kgctl",
        env.bootstrap,
        f"bench-trace-on-{g}",
        [topic],
        "on",
        cfg,
        env.workdir,
        extra=["--trace-topic", trace],
    )
    members = (plain, control, traced)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        expected = {(topic, p) for p in range(6)}
        for m in members:
            if env.observer.wait_complete(m_group(m), 1, expected, 60) is None:
                return {"ok": False, "error": f"{m.name}: group never complete"}
        time.sleep(2.0)  # past the first fetches
        per_window: list[dict[str, float]] = []
        l0 = traced.lines
        t_all = time.monotonic()
        for _ in range(windows):
            c0 = {m.name: cpu_seconds(m.pid) for m in members}
            t0 = time.monotonic()
            time.sleep(seconds / windows)
            wall = time.monotonic() - t0
            per_window.append({m.name: (cpu_seconds(m.pid) - c0[m.name]) / wall for m in members})
        wall_all = time.monotonic() - t_all

        def median_extra(name: str) -> float | None:
            extras = [100 * (w[name] - w["off"]) / w["off"] for w in per_window if w["off"] > 0]
            return round(statistics.median(extras), 1) if extras else None

        def median_pct(name: str) -> float:
            return round(100 * statistics.median(w[name] for w in per_window), 2)

        return {
            "ok": all(w["off"] > 0 for w in per_window),
            "seconds": round(wall_all, 1),
            "windows": windows,
            "records_per_s": rate,
            "events_per_s": round((traced.lines - l0) / wall_all, 1),
            "cpu_pct_without": median_pct("off"),
            "cpu_pct_with": median_pct("on"),
            "cpu_pct_control": median_pct("aa"),
            "extra_cpu_pct_of_member": median_extra("on"),
            "noise_pct_of_member": median_extra("aa"),
        }
    finally:
        stop.set()
        producer.join(5)
        for m in members:
            m.kill()
            m.reap()


def m_group(m: Any) -> str:
    # spawn() does not keep the group; it is the 4th argument of the command line.
    args = m.proc.args
    return str(args[args.index("-g") + 1])
