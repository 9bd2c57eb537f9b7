"""Rebalance latency, same broker and scenario for kgctl, Java and plain kafka-python.

One case = one kind, one scenario, one group size, one repetition, on a fresh group and
fresh topic(s):

1. setup: start the members, wait until the broker reports the group complete
   (observe.complete) and leave it complete for the group's age (`--group-age`, 1 s by
   default: no rebalance left over from the setup);
2. trigger (wall clock t0): scale-out spawns N-1 more members; kill SIGKILLs one member;
   growth adds partitions; subscription sends every member a new topic list;
3. t_stable: first DescribeGroups sample that is complete again; latency = t_stable - t0;
4. 1.5 s more to catch trailing rebalances, then everyone is SIGKILLed.

Also recorded: broker-side rebalance start (first "Preparing to rebalance" after t0,
from the broker log), rebalances (generations) the scenario took, and each pre-existing
member's time without partitions (revoked/lost -> assigned, as the member reports it).
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

from bench import growth_phases
from bench.members import Member, MemberConfig, client_id, spawn
from bench.observe import BrokerLog, Observer, now_ms

SCENARIOS = ("scale-out", "kill", "growth", "subscription")
SETTLE_S = 1.5


@dataclass
class CaseResult:
    kind: str
    scenario: str
    n: int
    rep: int
    ok: bool
    latency_ms: int | None = None
    broker_start_ms: int | None = None  # t0 -> first PreparingRebalance
    broker_rebalance_ms: int | None = None  # first PreparingRebalance -> complete
    last_rebalance_ms: int | None = None  # last PreparingRebalance before complete -> complete
    rebalances: int = 0
    spurious_after: int = 0  # rebalances started after t_stable (within SETTLE_S)
    unassigned_ms: list[int] = field(default_factory=list)  # per pre-existing member
    rejoin_delay_ms: list[int] = field(default_factory=list)  # kgctl: prepare -> JoinGroupSent
    setup_ms: int | None = None
    group: str = ""
    broker_log: list[tuple[int, str, int]] = field(default_factory=list)  # (ms after t0, ...)
    error: str = ""
    loadavg_1m: float | None = None  # the machine's load average when triggered
    loadavg_end_1m: float | None = None  # ... and when the case ended
    trigger_delay_ms: int = 0  # --trigger-jitter: the random wait before t0
    group_age_ms: int = 0  # --group-age: how long the group stayed complete before that
    # --through-proxy, growth: the phases read from the trace (bench/growth_phases.py)
    # and the trace itself, compact, from 3 s before t0 to the end.
    wire_phases: dict[str, Any] | None = None
    wire_timeline: list[list[Any]] = field(default_factory=list)


class Env:
    def __init__(
        self,
        bootstrap: str,
        log_path: Path,
        workdir: Path,
        java_libs: Path | None,
        member_logs: Path | None = None,
        proxy: Any = None,
        trigger_jitter_ms: int = 0,
        group_age_s: float = 1.0,
    ) -> None:
        self.trigger_jitter_ms = trigger_jitter_ms
        self.group_age_s = group_age_s
        self.bootstrap = bootstrap
        # With a proxy (`--through-proxy`, a ProxyThread tracing Metadata too) the members
        # connect through it; the bench's own admin and observer do not.
        self.proxy = proxy
        self.member_bootstrap = proxy.bootstrap if proxy is not None else bootstrap
        self.member_logs = member_logs
        self.log = BrokerLog(log_path)
        self.workdir = workdir
        self.java_libs = java_libs
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kgctl-bench")
        self.observer = Observer(bootstrap)

    def topic(self, partitions: int) -> str:
        name = f"bench-{uuid.uuid4().hex[:8]}"
        self.admin.create_topics([NewTopic(name, partitions, 1)])
        return name

    def close(self) -> None:
        self.admin.close()
        self.observer.close()


def _unassigned(m: Member, t0: int, t_end: int) -> int:
    """Time without partitions after t0 as the member reports it (revoked/lost -> assigned)."""
    total = 0
    start: int | None = None
    for r in sorted(m.reports, key=lambda r: r.ts_ms):
        if r.ts_ms < t0 or r.ts_ms > t_end:
            continue
        if r.what in ("revoked", "lost") and r.partitions and start is None:
            start = r.ts_ms
        elif r.what == "assigned" and start is not None:
            total += r.ts_ms - start
            start = None
    if start is not None:
        total += t_end - start
    return total


def _diagnose(env: Env, group: str, members: list[Member]) -> str:
    try:
        snap = env.observer.describe(group)
    except Exception as exc:  # diagnostics only
        return f"describe failed: {exc}"
    subs = sorted({m.subscription or () for m in snap.members})
    owned = [
        sum(len(ps) for ps in (m.partitions or {}).values()) if m.partitions is not None else None
        for m in snap.members
    ]
    dead = [m.name for m in members if m.proc.poll() is not None]
    return (
        f"last sample: {snap.state}, {len(snap.members)} members, subscriptions {subs}, "
        f"partitions per member {owned}, exited {dead}"
    )


def run_case(
    env: Env,
    kind: str,
    scenario: str,
    n: int,
    rep: int,
    cfg: MemberConfig,
    setup_timeout_s: float = 120.0,
) -> CaseResult:
    res = CaseResult(kind, scenario, n, rep, ok=False)
    parts = max(12, 2 * n)
    t1 = env.topic(parts)
    t2 = env.topic(parts) if scenario == "subscription" else ""
    group = f"bench-{scenario}-{kind}-{n}-{rep}-{uuid.uuid4().hex[:6]}"
    members: list[Member] = []
    res.group = group

    def add(count: int) -> None:
        for _ in range(count):
            name = f"{kind}-{len(members)}"
            members.append(
                spawn(
                    kind,
                    env.member_bootstrap,
                    group,
                    [t1],
                    name,
                    cfg,
                    env.workdir,
                    env.java_libs,
                    stderr_dir=logs,
                )
            )

    logs: Path | None = None
    if env.member_logs is not None:
        logs = env.member_logs / group
        logs.mkdir(parents=True, exist_ok=True)

    expected = {(t1, p) for p in range(parts)}
    seen = len(env.proxy.snapshot()) if env.proxy is not None else 0
    try:
        t_setup = now_ms()
        setup_offset = env.log.size()
        add(1 if scenario == "scale-out" else n)
        if env.observer.wait_complete(group, len(members), expected, setup_timeout_s) is None:
            res.error = "setup: group never complete; " + _diagnose(env, group, members)
            # Times relative to the setup's start, as evidence.
            res.broker_log = [
                (e.ts_ms - t_setup, e.what, e.generation)
                for e in env.log.events(group, setup_offset)
            ]
            return res
        # Left complete for the group's age: at least no rebalance left over from the
        # setup (1 s, the default); longer, the members' heartbeat and metadata periods
        # have run for a while, as in a long-lived group. A parameter of the
        # measurement, not a wait for an event: the check below is the synchronisation.
        time.sleep(env.group_age_s)
        res.group_age_ms = round(env.group_age_s * 1000)
        if env.observer.wait_complete(group, len(members), expected, 30) is None:
            res.error = "setup: group not complete after settling"
            return res
        res.setup_ms = now_ms() - t_setup
        if env.trigger_jitter_ms:
            # The trigger otherwise comes a fixed ~1 s after the group was complete, so at
            # the same point of every member's heartbeat and metadata periods (they start
            # at the join): a random wait makes t0 fall anywhere in them, as in real life.
            res.trigger_delay_ms = random.randrange(env.trigger_jitter_ms)
            time.sleep(res.trigger_delay_ms / 1000)
        res.loadavg_1m = float(Path("/proc/loadavg").read_text().split()[0])
        existing = list(members)
        log_offset = env.log.size()
        want_members, topics = n, None
        t0 = now_ms()
        if scenario == "scale-out":
            add(n - 1)
        elif scenario == "kill":
            members[-1].kill()
            existing = members[:-1]
            want_members = n - 1
        elif scenario == "growth":
            env.admin.create_partitions({t1: NewPartitions(parts + parts // 2)})
            expected = {(t1, p) for p in range(parts + parts // 2)}
        elif scenario == "subscription":
            for m in members:
                m.send({"op": "subscribe", "topics": [t1, t2]})
            expected |= {(t2, p) for p in range(parts)}
            topics = tuple(sorted((t1, t2)))
        timeout = 60.0 + cfg.session_timeout_ms / 1000
        if scenario == "scale-out":
            # Start-up is part of it: 1→30 JVMs took 93-143 s on 2 shared cores.
            timeout += 3.0 * (n - 1)
        t_stable = env.observer.wait_complete(group, want_members, expected, timeout, topics)
        if t_stable is None:
            res.error = "trigger: group never complete; " + _diagnose(env, group, members)
            # The coordinator's side of the failure, as evidence.
            res.broker_log = [
                (e.ts_ms - t0, e.what, e.generation) for e in env.log.events(group, log_offset)
            ]
            res.unassigned_ms = [_unassigned(m, t0, now_ms()) for m in existing]
            return res
        time.sleep(SETTLE_S)
        t_end = now_ms()
        res.ok = True
        res.latency_ms = t_stable - t0
        log_events = env.log.events(group, log_offset)
        preps = [e for e in log_events if e.what == "prepare"]
        res.broker_log = [(e.ts_ms - t0, e.what, e.generation) for e in log_events]
        res.rebalances = sum(1 for e in preps if e.ts_ms <= t_stable)
        res.spurious_after = sum(1 for e in preps if e.ts_ms > t_stable)
        if preps:
            res.broker_start_ms = preps[0].ts_ms - t0
            res.broker_rebalance_ms = t_stable - preps[0].ts_ms
            before = [e.ts_ms for e in preps if e.ts_ms <= t_stable]
            if before:
                res.last_rebalance_ms = t_stable - before[-1]
        res.unassigned_ms = [_unassigned(m, t0, t_end) for m in existing]
        res.loadavg_end_1m = float(Path("/proc/loadavg").read_text().split()[0])
        if env.proxy is not None and scenario == "growth":
            _read_wire(env, res, seen, members, t0, t_stable, t_end, t1, parts + parts // 2)
        if kind == "kgctl" and preps:
            t_prep = preps[0].ts_ms
            for m in existing:
                sent = [r.ts_ms for r in m.reports if r.what == "join_sent" and r.ts_ms >= t0]
                # A member that started the rebalance itself sent its JoinGroup first.
                if sent and min(sent) >= t_prep:
                    res.rejoin_delay_ms.append(min(sent) - t_prep)
        return res
    finally:
        for m in members:
            m.kill()
        for m in members:
            m.reap()


def _read_wire(
    env: Env,
    res: CaseResult,
    seen: int,
    members: list[Member],
    t0: int,
    t_stable: int,
    t_end: int,
    topic: str,
    new_count: int,
) -> None:
    """The case's own wire events (its group's requests, its members' Metadata) read as
    the growth's phases."""
    ids = {client_id(m.kind, m.name) for m in members}
    events = [
        e.to_dict()
        for e in env.proxy.snapshot()[seen:]
        if e.group == res.group or (e.type == "MetadataTraced" and e.client_id in ids)
    ]
    res.wire_phases = growth_phases.phases(events, t0, t_stable, topic, new_count)
    res.wire_timeline = growth_phases.timeline(events, t0, -3000, t_end - t0)


def median(xs: list[float] | list[int]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def summarize(results: list[CaseResult], max_load: float | None = None) -> list[dict[str, Any]]:
    """One row per (scenario, n, kind): medians over repetitions (cases triggered at a load
    average above `max_load` are left out and counted)."""
    rows: list[dict[str, Any]] = []
    loaded = [r for r in results if max_load is not None and (r.loadavg_1m or 0) > max_load]
    results = [r for r in results if r not in loaded]
    keys = sorted(
        {(r.scenario, r.n, r.kind) for r in results},
        key=lambda k: (SCENARIOS.index(k[0]), k[1], k[2]),
    )
    for scenario, n, kind in keys:
        rs = [r for r in results if (r.scenario, r.n, r.kind) == (scenario, n, kind)]
        ok = [r for r in rs if r.ok]
        rows.append(
            {
                "scenario": scenario,
                "n": n,
                "kind": kind,
                "reps": len(rs),
                "ok": len(ok),
                "latency_ms": median([r.latency_ms for r in ok if r.latency_ms is not None]),
                "latency_all_ms": [r.latency_ms for r in ok],
                "broker_rebalance_ms": median(
                    [r.broker_rebalance_ms for r in ok if r.broker_rebalance_ms is not None]
                ),
                "last_rebalance_ms": median(
                    [r.last_rebalance_ms for r in ok if r.last_rebalance_ms is not None]
                ),
                "broker_start_ms": median(
                    [r.broker_start_ms for r in ok if r.broker_start_ms is not None]
                ),
                "rebalances": median([r.rebalances for r in ok]),
                "spurious_after": sum(r.spurious_after for r in ok),
                "unassigned_max_ms": median([max(r.unassigned_ms) for r in ok if r.unassigned_ms]),
                "unassigned_median_ms": median(
                    [statistics.median(r.unassigned_ms) for r in ok if r.unassigned_ms]
                ),
                "rejoin_delay_ms": [d for r in ok for d in r.rejoin_delay_ms],
                "errors": [r.error for r in rs if r.error],
                "loadavg_1m": [r.loadavg_1m for r in rs],
                "left_out_for_load": sum(
                    1 for r in loaded if (r.scenario, r.n, r.kind) == (scenario, n, kind)
                ),
            }
        )
        traced = [r.wire_phases for r in ok if r.wire_phases is not None]
        if traced:
            # --through-proxy: each phase's median and every value, in run order.
            names = list(traced[0]["phases"])
            rows[-1]["phases_all_ms"] = {k: [t["phases"][k] for t in traced] for k in names}
            rows[-1]["phases_ms"] = {
                k: median([v for v in rows[-1]["phases_all_ms"][k] if v is not None]) for k in names
            }
    by = {(r["scenario"], r["n"], r["kind"]): r for r in rows}
    for row in rows:
        java = by.get((row["scenario"], row["n"], "java"))
        if java and java["latency_ms"] and row["latency_ms"] is not None:
            row["ratio_vs_java"] = round(row["latency_ms"] / java["latency_ms"], 2)
        kp = by.get((row["scenario"], row["n"], "kp"))
        if kp and kp["latency_ms"] and row["latency_ms"] is not None:
            row["ratio_vs_kp"] = round(row["latency_ms"] / kp["latency_ms"], 2)
    return rows


def result_dicts(results: list[CaseResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
