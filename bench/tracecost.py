"""CPU cost of `--trace-topic` for one kgctl member.

Two kgctl members run at the same time, each alone in its own group on the same topic
(so each gets every partition and the same records): one plain, one with
`--trace-topic`. A producer writes `rate` records/s (in 20 ms batches) to the topic for
the whole window. After both groups are complete, each member's CPU time (utime+stime
from /proc) is measured over `seconds`. Run side by side so shared machine load hits
both alike; the ratio is the result.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from kafka import KafkaProducer

from bench.latency import Env
from bench.members import MemberConfig, cpu_seconds, spawn


def run_trace_cost(env: Env, seconds: float, rate: int) -> dict[str, Any]:
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
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        expected = {(topic, p) for p in range(6)}
        for m in (plain, traced):
            if env.observer.wait_complete(m_group(m), 1, expected, 60) is None:
                return {"ok": False, "error": f"{m.name}: group never complete"}
        time.sleep(2.0)  # past the first fetches
        c0 = {m.name: cpu_seconds(m.pid) for m in (plain, traced)}
        l0 = {m.name: m.lines for m in (plain, traced)}
        t0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        cpu = {m.name: cpu_seconds(m.pid) - c0[m.name] for m in (plain, traced)}
        lines = {m.name: m.lines - l0[m.name] for m in (plain, traced)}
        off, on = cpu["off"], cpu["on"]
        return {
            "ok": off > 0,
            "seconds": round(wall, 1),
            "records_per_s": rate,
            "events_per_s": round(lines["on"] / wall, 1),
            "cpu_pct_without": round(100 * off / wall, 2),
            "cpu_pct_with": round(100 * on / wall, 2),
            "extra_cpu_pct_of_member": round(100 * (on - off) / off, 1) if off else None,
        }
    finally:
        stop.set()
        producer.join(5)
        for m in (plain, traced):
            m.kill()
            m.reap()


def m_group(m: Any) -> str:
    # spawn() does not keep the group; it is the 4th argument of the command line.
    args = m.proc.args
    return str(args[args.index("-g") + 1])
