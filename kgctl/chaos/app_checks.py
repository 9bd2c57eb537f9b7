"""A chaos run's app members (`client: command`): its proxy, their wire events, their judge.

The runner calls these few functions (so its own code stays about kgctl's and Java's
members): `proxy_config` (a run with app members traces Fetch answers and keeps Fetch and
OffsetCommit at versions that name topics), `wire_events` (an app member's traced steps,
named as the member), `wire_judged` / `committed_all` (the drain: wait until the group
committed everything produced), and `judge` at the end (the wire judge,
kgctl/model/wire_judge.py, its findings charged to steps, each member's facts and log
files in the journal; which judge decided at-least-once in `journal.setup["judge"]`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from kgctl.chaos.app import APP_VERSION_CAPS, AppMember, AppWire
from kgctl.model.events import Event
from kgctl.model.timeline import unassigned_ms
from kgctl.model.wire_judge import RULES, judge_wire
from kgctl.proxy.runner import ProxyConfig

# Which judge decided at-least-once and duplicates (journal.setup["judge"]).
JUDGE_RECORDS = "records"  # members' own RecordsConsumed (kgctl, Java, VerifiableConsumer lines)
JUDGE_WIRE = "wire"  # the group's committed offsets, from the wire


def _apps(run: Any) -> list[Any]:
    return [m for m in run.resources.fleet.history if m.launch.client == "command"]


def has_apps(run: Any) -> bool:
    return any(m.client == "command" for m in run.plan.scenario.fleet.members)


def proxy_config(run: Any) -> ProxyConfig | None:
    if not has_apps(run):
        return None
    return ProxyConfig(trace_fetch=True, version_caps=dict(APP_VERSION_CAPS))


# Each run's namer of its app members' wire events (it remembers their assignments).
_NAMERS: weakref.WeakKeyDictionary[Any, AppWire] = weakref.WeakKeyDictionary()


def wire_events(run: Any, event: Event) -> list[Event]:
    """`event` from the run's proxy, with an app member's steps added (kgctl/chaos/app.py).
    Called on the proxy's thread only: it reads the fleet's dict of members."""
    namer = _NAMERS.get(run)
    if namer is None:

        def member_of(client_id: str) -> str | None:
            name = client_id[len("kgctl-") :] if client_id.startswith("kgctl-") else ""
            m = run.resources.fleet.members.get(name)
            return name if m is not None and m.launch.client == "command" else None

        namer = _NAMERS[run] = AppWire(member_of, run.resources.topic_names)
    return namer.events(event)


def wire_judged(run: Any) -> bool:
    """At-least-once is the wire's to judge: app members, none printing records_consumed."""
    apps = _apps(run)
    if not apps:
        return False
    return not any(isinstance(m.proc, AppMember) and m.proc.spoke_verifiable for m in apps)


def _ends(produced: list[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for t, p, o in produced:
        ends[(t, p)] = max(ends.get((t, p), 0), o + 1)
    return ends


def committed_all(run: Any, produced: list[tuple[str, int, int]]) -> bool:
    """The group's committed offsets (from the wire so far) cover every produced record."""
    names = {m.name for m in _apps(run)}
    found = judge_wire(run.events.history, members=names)
    return all(found.committed.get(tp, 0) >= end for tp, end in _ends(produced).items())


def drained(run: Any, producer: Any, consumed: Callable[[], bool]) -> Callable[[], bool]:
    """What the drain waits for. Without app members: every record consumed. With them,
    also every record committed on the wire (committed-progress judges commits, and a
    member told to stop right after it printed records_consumed may not have committed
    yet); app members printing no records_consumed lines are judged by commits alone."""
    if not has_apps(run):
        return consumed
    produced = producer.produced()
    wire = wire_judged(run)

    def covered() -> bool:
        return (wire or consumed()) and committed_all(run, produced)

    return covered


def judge(run: Any, produced: list[tuple[str, int, int]]) -> bool:
    """Judge the app members from the wire; True when this judge decided at-least-once
    (the runner then leaves it alone)."""
    apps = _apps(run)
    if not apps:
        return False
    wire = wire_judged(run)
    run.journal.setup["judge"] = JUDGE_WIRE if wire else JUDGE_RECORDS
    steps = [(s.name, s.started_ms) for s in run.journal.steps]
    end = max((e.ts_ms for e in run.events.history), default=0)
    found = judge_wire(
        run.events.history,
        members={m.name for m in apps},
        steps=steps,
        produced_ends=_ends(produced) if wire else None,
        end_ms=end,
    )
    for f in found.findings:
        run.judge.violation(
            f.rule, f.message, f.at_ms, [f.member] if f.member else [], f.partition,
            step="end" if f.rule == "at-least-once" else run.judge.step_at(f.at_ms),
        )  # fmt: skip
    for rule in RULES:
        if rule != "at-least-once" or wire:
            run.journal.held(rule)
    t0 = run.journal.started_ms or min((m.started_ms for m in apps), default=0)
    for m in apps:
        entry = run.journal.members.setdefault(m.name, {})
        facts = found.members.get(m.name)
        if facts is not None:
            entry["wire"] = facts.to_dict()
        entry["without_partitions_ms"] = unassigned_ms(run.state, m.name, t0, end)
        logs = entry.setdefault("logs", [])
        if isinstance(m.proc, AppMember):
            logs.append({"stdout": str(m.proc.stdout_path), "stderr": str(m.proc.stderr_path)})
    if wire:
        producer = run.resources.producer
        given = sum(f.given for f in found.members.values())
        # No "consumed", "missing" or "duplicates": the wire cannot tell what was processed.
        run.journal.records = {
            "produced": len(produced),
            "produce_failed": producer.failed if producer is not None else 0,
            "fetched": found.fetched_records(),
            "given": given,
            "not_committed": sum(found.not_committed.values()),
        }
    return wire


def judge_line(journal: Any) -> str | None:
    """The line saying which judge decided at-least-once (None: no app members)."""
    judge = journal.setup.get("judge")
    if judge is None:
        return None
    if judge == JUDGE_WIRE:
        return "judge: wire (no records_consumed lines: at-least-once from the committed offsets)"
    return "judge: records (the members' VerifiableConsumer lines: exact at-least-once)"
