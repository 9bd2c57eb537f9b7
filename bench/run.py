"""`python -m bench.run [--smoke]`: every kgctl benchmark on a dedicated local broker.

Full run (docs/benchmarks.md): rebalance latency of kgctl / Java VerifiableConsumer /
plain kafka-python members, a member's start-up CPU against plain kafka-python's,
density (packed members, the break point), fold and view throughput and the live watch
at 1,000 members, tracing cost; and, only when named in `--only`: how fast `kgctl watch`
shows a generation change (watchlag), members per process (perprocess), an idle
member's CPU by setting (idle). `--smoke`
runs a seconds-long subset (no Java) for CI. Results go to a JSON file and a summary
is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import micro, watchstream
from bench.density import run_density
from bench.idle import run_idle
from bench.latency import SCENARIOS, Env, result_dicts, run_case, summarize
from bench.members import MemberConfig
from bench.perprocess import run_per_process
from bench.startup import run_startup
from bench.tracecost import run_trace_cost
from bench.watchlag import run_watch_lag


def machine() -> dict[str, Any]:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    try:
        java = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, check=False
        ).stderr.splitlines()[0]
    except (OSError, IndexError):
        java = "absent"
    return {
        "nproc": os.cpu_count(),
        "mem_gb": round(mem_kb / 1024 / 1024, 1),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "kafka_python": metadata.version("kafka-python"),
        "rich": metadata.version("rich"),
        "java": java,
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
    }


PLANS: dict[str, dict[str, Any]] = {
    "full": {
        "kinds": ("kgctl", "java", "kp"),
        # (scenario, group size, repetitions)
        "cases": [
            ("scale-out", 3, 3),
            ("scale-out", 10, 2),
            ("scale-out", 30, 2),
            ("kill", 3, 3),
            ("growth", 3, 3),
            ("subscription", 3, 3),
        ],
        "fold": (200, 2000, 20),
        "view_s": 5.0,
        # the live watch on a synthetic stream: members, partitions, seconds per phase
        "watch": (1000, 10000, 20.0),
        # the live watch through a rebalance, replayed (bench/watchstream.py): members,
        # partitions, runs, seconds of warm-up, of steady traffic, of settling
        "watchstream": (1000, 10000, 5, 5.0, 20.0, 10.0),
        "trace": [(30.0, 0), (30.0, 500)],
        "density_steps": [1000, 2000, 3000],
        "density_hold_s": 300.0,
        "density_cfg": None,
        "density_per_process": 50,
        # watch lag (only with --only watchlag): members, rebalances per mode, interval
        "watchlag": (3, 10, 1.0),
        # one process per member against several members per process (only with --only)
        "perprocess": (60, [1, 10, 60], 60.0),
        # start-up CPU, kgctl join vs plain kafka-python: repetitions of each
        "startup": 7,
        # an idle member's CPU by setting (only with --only idle): members, hold
        "idle": (20, 60.0),
    },
    "smoke": {
        "kinds": ("kgctl", "kp"),
        "cases": [("scale-out", 2, 1)],
        "fold": (20, 200, 5),
        "view_s": 0.5,
        "watch": (20, 200, 1.0),
        "watchstream": (20, 200, 1, 1.0, 2.0, 2.0),
        "trace": [(3.0, 200)],
        # Several members per process: one pack of 3, then a second process of 1.
        "density_steps": [3, 4],
        "density_hold_s": 2.0,
        "density_cfg": MemberConfig(
            session_timeout_ms=6000, heartbeat_interval_ms=500, metadata_max_age_ms=1000
        ),
        "density_per_process": 3,
        "watchlag": (2, 2, 1.0),
        "perprocess": (2, [1, 2], 2.0),
        "startup": 1,
        "idle": (2, 2.0),
    },
}


def parse_cases(text: str) -> list[tuple[str, int, int]]:
    """`scenario:n:reps[,...]`, e.g. `subscription:3:2,scale-out:30:2`."""
    cases = []
    for item in text.split(","):
        scenario, n, reps = item.split(":")
        if scenario not in SCENARIOS:
            raise SystemExit(f"--cases: unknown scenario {scenario!r} (one of {SCENARIOS})")
        cases.append((scenario, int(n), int(reps)))
    return cases


def group_age(text: str) -> float:
    """`--group-age SECONDS`: a finite number of seconds, 0 or more."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds, 0 or more (e.g. 30)"
        )
    return seconds


def trigger_jitter(text: str) -> int:
    """`--trigger-jitter MS`: whole milliseconds, 0 or more."""
    try:
        ms = int(text)
    except ValueError:
        ms = -1
    if ms < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of milliseconds, 0 or more (e.g. 1000)"
        )
    return ms


def run(args: argparse.Namespace) -> dict[str, Any]:
    plan = dict(PLANS["smoke" if args.smoke else "full"])
    if args.cases:
        plan["cases"] = parse_cases(args.cases)
    sections = (
        set(args.only.split(","))
        if args.only
        else {
            "latency",
            "micro",
            "trace",
            "density",
            "startup",
        }
    )
    say = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    out: dict[str, Any] = {
        "mode": "smoke" if args.smoke else "full",
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
    }
    work = Path(tempfile.mkdtemp(prefix="kgctl-bench-"))
    broker = None
    bootstrap, log_path = args.bootstrap, Path(args.broker_log or "/nonexistent")
    if not bootstrap:
        from kgctl.broker.local import LocalBroker

        say("bench: starting a dedicated local broker")
        broker = LocalBroker(work / "broker.json")
        state = broker.up(tie_to_parent=True, timeout_s=180)
        bootstrap, log_path = state.bootstrap, Path(state.nodes[0].log)
        out["kafka"] = state.version
    out["bootstrap"] = bootstrap
    try:
        java_libs = None
        kinds = [k for k in plan["kinds"] if k in (args.kinds or "kgctl,java,kp").split(",")]
        if "latency" in sections and "java" in kinds:
            from bench.tools import tools_libs

            java_libs = tools_libs(say=say)
        proxy = None
        if args.through_proxy:
            from kgctl.proxy.runner import ProxyConfig, ProxyThread
            from kgctl.settings import ClientSettings

            # The members' wire, group APIs and Metadata, for the growth's phases.
            proxy = ProxyThread(
                ClientSettings(bootstrap=bootstrap), ProxyConfig(trace_metadata=True)
            )
            proxy.start()
            out["through_proxy"] = proxy.bootstrap
        env = Env(
            bootstrap,
            log_path,
            work,
            java_libs,
            member_logs=args.member_logs,
            proxy=proxy,
            trigger_jitter_ms=args.trigger_jitter or 0,
            group_age_s=args.group_age,
        )
        try:
            if "micro" in sections:
                m, p, rounds = plan["fold"]
                say("bench: fold and view")
                out["fold"] = micro.bench_fold(m, p, rounds)
                out["view"] = [
                    micro.bench_view(m, p, plan["view_s"], 160, 50),
                    micro.bench_view(m, p, plan["view_s"], 80, 24),
                ]
                wm, wp, ws = plan["watch"]
                say(f"bench: watch at {wm} members, {wp} partitions")
                out["watch"] = micro.bench_watch(wm, wp, ws)
                sm, sp, runs, warm, steady, settle = plan["watchstream"]
                say(f"bench: watch through a rebalance of {sm} members, {sp} partitions")
                out["watchstream"] = watchstream.bench(
                    sm, sp, runs, steady, settle, warm_s=warm, say=say
                )
            if "latency" in sections:
                results = []
                cfg = MemberConfig()
                for rep in range(max(c[2] for c in plan["cases"])):
                    for scenario, n, reps in plan["cases"]:
                        if rep >= reps:
                            continue
                        # Rotate the order of kinds so slow drift in machine load is shared.
                        order = kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]
                        for kind in order:
                            if scenario == "subscription" and kind == "java":
                                continue  # VerifiableConsumer has one fixed --topic
                            r = run_case(env, kind, scenario, n, rep, cfg)
                            phases = ""
                            if r.wire_phases is not None:
                                phases = f" phases {r.wire_phases['phases']}"
                            say(
                                f"bench: {scenario} n={n} {kind} rep {rep}: "
                                f"{r.latency_ms} ms load {r.loadavg_1m}{phases} {r.error}"
                            )
                            results.append(r)
                out["latency_config"] = cfg.__dict__
                out["latency_cases"] = result_dicts(results)
                out["latency_max_load"] = args.max_load
                out["latency_group_age_s"] = args.group_age
                out["latency_trigger_jitter_ms"] = args.trigger_jitter or 0
                out["latency"] = summarize(results, args.max_load)
            if "startup" in sections:
                say("bench: start-up, kgctl join vs plain kafka-python")
                reps = args.startup_reps or plan["startup"]
                out["startup"] = run_startup(env, reps, say=say, baseline=args.startup_baseline)
            if "idle" in sections:
                n, hold = plan["idle"]
                say(f"bench: idle members, {n} in one process, by setting")
                out["idle"] = run_idle(env, n, hold, say=say)
            if "trace" in sections:
                out["trace"] = []
                for seconds, rate in plan["trace"]:
                    say(f"bench: trace cost {rate} records/s for {seconds:.0f} s")
                    out["trace"].append(run_trace_cost(env, seconds, rate))
            if "watchlag" in sections:
                members, rebalances, interval = plan["watchlag"]
                out["watchlag"] = run_watch_lag(
                    bootstrap, work, members, rebalances, interval, say=say
                )
            if "perprocess" in sections:
                n, layouts, hold = plan["perprocess"]
                say(f"bench: {n} members, {layouts} per process")
                out["perprocess"] = run_per_process(env, n, layouts, hold, say=say)
            if "density" in sections:
                steps = [int(s) for s in args.density.split(",")] if args.density else None
                kw = {"cfg": plan["density_cfg"]} if plan["density_cfg"] else {}
                out["density"] = run_density(
                    env,
                    steps or plan["density_steps"],
                    args.hold if args.hold is not None else plan["density_hold_s"],
                    per_process=args.per_process or plan["density_per_process"],
                    fetch=args.fetch,
                    budget_s=args.density_budget * 60 if args.density_budget else None,
                    say=say,
                    **kw,
                )
        finally:
            env.close()
            if proxy is not None:
                proxy.close()
    finally:
        if broker is not None:
            broker.down()
        out["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
        out["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    ap.add_argument("--smoke", action="store_true", help="seconds-long subset for CI")
    ap.add_argument(
        "--only",
        help="comma list of latency,micro,trace,startup,density and (not run by default) "
        "watchlag,perprocess,idle",
    )
    ap.add_argument("--kinds", help="comma list of kgctl,java,kp (latency)")
    ap.add_argument(
        "--cases",
        help="latency cases instead of the plan's, scenario:n:reps comma list, "
        "e.g. subscription:3:2 (scenarios: scale-out, kill, growth, subscription)",
    )
    ap.add_argument(
        "--member-logs",
        type=Path,
        help="keep every latency member's stderr in DIR/<group>/<name>.err "
        "(KP_MEMBER_DEBUG=1 adds kafka-python's DEBUG log for kind kp)",
    )
    ap.add_argument("--bootstrap", help="use this broker instead of starting one")
    ap.add_argument("--broker-log", help="its server.log (broker-side rebalance start)")
    ap.add_argument("--density", help="comma list of member counts, e.g. 100,200,250")
    ap.add_argument("--hold", type=float, help="density hold per step, seconds")
    ap.add_argument(
        "--max-load",
        type=float,
        help="latency: leave out of the medians every case triggered at a higher 1-minute "
        "load average (kept, marked, in latency_cases)",
    )
    ap.add_argument(
        "--per-process", type=int, help="density: members per process (kgctl join --members)"
    )
    ap.add_argument(
        "--fetch", action="store_true", help="density: members fetch (default --no-fetch)"
    )
    ap.add_argument(
        "--density-budget",
        type=float,
        help="density: minutes after which no new step starts (the triggers still run)",
    )
    ap.add_argument(
        "--startup-reps", type=int, help="start-up: repetitions of each kind (default 7)"
    )
    ap.add_argument(
        "--startup-baseline",
        type=Path,
        help="start-up: also run the kgctl of this source tree (e.g. `git archive main`), "
        "side by side, as kind kgctl-baseline",
    )
    ap.add_argument(
        "--through-proxy",
        action="store_true",
        help="latency: members connect through an in-process kgctl proxy tracing their "
        "group requests and Metadata; growth cases get their phases from that trace",
    )
    ap.add_argument(
        "--trigger-jitter",
        type=trigger_jitter,
        metavar="MS",
        help="latency: wait a random 0..MS ms before each trigger, so it falls anywhere in "
        "the members' heartbeat and metadata periods (recorded per case)",
    )
    ap.add_argument(
        "--group-age",
        type=group_age,
        default=1.0,
        metavar="SECONDS",
        help="latency: how long the group stays complete before the trigger (default 1; "
        "recorded per case); any --trigger-jitter comes on top",
    )
    ap.add_argument("--out", type=Path, help="JSON results file")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
