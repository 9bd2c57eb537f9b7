"""Partition growth on the wire: the latency bench's `growth` case run through an
in-process `kgctl proxy`, every group request of the members recorded with its answer.

Prints, per run, t0 -> complete, the broker's prepare -> complete and each follower's
prepare -> JoinGroup, and writes the run's wire events (one JSON line each) per client
and repetition, so the order of heartbeats, JoinGroups and SyncGroups can be read
(docs/benchmarks.md, "Growth on the wire").

    .venv/bin/python -m bench.growth_wire --bootstrap 127.0.0.1:39887 \
        --broker-log DATA/node-1/logs/server.log --kinds kgctl,java,kp --reps 6 \
        --out-dir /tmp/growth-wire
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.latency import Env, run_case
from bench.members import MemberConfig
from kgctl.broker.provision import resolve_kafka_tools
from kgctl.proxy.runner import ProxyThread
from kgctl.settings import ClientSettings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--broker-log", required=True, help="the broker's server.log")
    ap.add_argument("--kinds", default="kgctl,java,kp")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--out-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    proxy = ProxyThread(ClientSettings(bootstrap=args.bootstrap))
    proxy.start()
    env = Env(proxy.bootstrap, Path(args.broker_log), args.out_dir, resolve_kafka_tools())
    rows: list[dict[str, object]] = []
    print(f"load average {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S')}")
    try:
        for rep in range(args.reps):
            for kind in args.kinds.split(","):
                seen = len(proxy.snapshot())
                res = run_case(env, kind, "growth", 3, rep, MemberConfig())
                wire = [e.to_dict() for e in proxy.snapshot()[seen:] if e.group == res.group]
                path = args.out_dir / f"{kind}-{rep}.jsonl"
                path.write_text("".join(json.dumps(e) + "\n" for e in wire), encoding="utf-8")
                row = {
                    "kind": kind, "rep": rep, "ok": res.ok, "t0_complete_ms": res.latency_ms,
                    "prepare_complete_ms": res.broker_rebalance_ms,
                    "followers_rejoin_ms": res.rejoin_delay_ms, "wire": str(path),
                }  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        env.close()
        proxy.close()
    print(f"load average {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S')}")
    for kind in args.kinds.split(","):
        mine = [r for r in rows if r["kind"] == kind and r["ok"]]
        if mine:
            t0 = statistics.median(int(str(r["t0_complete_ms"])) for r in mine)
            print(f"{kind}: {len(mine)} runs, t0 -> complete median {t0:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
