"""Chaos actions: each one acts on the fleet or the cluster and says what settling means.

An action gets the run and its step, does its thing (signals, control lines, admin
calls, more processes) and returns an `ActionOutcome`: whether a new generation must
appear before the group counts as settled, which members it touched, details for the
report, and optional checks to run once the group settled.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kgctl.chaos import checks
from kgctl.chaos.scenario import MemberSpec, Step
from kgctl.errors import SetupError, UsageError

if TYPE_CHECKING:
    from kgctl.chaos.runner import ActionOutcome, ChaosRun


def _outcome(*args: Any, **kwargs: Any) -> ActionOutcome:
    from kgctl.chaos.runner import ActionOutcome

    return ActionOutcome(*args, **kwargs)


def _now() -> int:
    return int(time.time() * 1000)


def _names(run: ChaosRun, raw: Any) -> list[str]:
    if raw in (None, "all"):
        return [m.name for m in run.fleet.active()]
    return list(raw)


def _effective(run: ChaosRun, name: str) -> set[str]:
    spec = run.specs[name]
    topics, pattern = run.subscriptions.get(name, (spec.subscribe, spec.pattern))
    if pattern:
        rx = re.compile(pattern)
        return {t for t in run.partitions if rx.fullmatch(t)}
    return set(topics)


def subscription_change(run: ChaosRun, step: Step) -> ActionOutcome:
    names = _names(run, step.args.get("members"))
    topics = step.args.get("topics")
    pattern = step.args.get("pattern")
    changed = False
    for name in names:
        before = _effective(run, name)
        run.subscriptions[name] = (list(topics or []), pattern)
        changed = changed or _effective(run, name) != before
        command: dict[str, Any]
        if pattern:
            command = {"op": "subscribe", "pattern": run.real_pattern(pattern)}
        else:
            command = {"op": "subscribe", "topics": [run.topics[t] for t in topics or []]}
        run.fleet.send(name, command)
    run.producer.set_topics(run.produce_topics())
    what = f"pattern {pattern!r}" if pattern else f"topics {', '.join(topics or [])}"
    return _outcome(
        f"subscription of {', '.join(names)} changed to {what}",
        expect_rebalance=changed,
        members=names,
        details={"members": names, "topics": topics, "pattern": pattern},
    )


def topic_create(run: ChaosRun, step: Step) -> ActionOutcome:
    topic, n = step.args["topic"], int(step.args["partitions"])
    real = run.topic_base + topic
    run.admin.create_topics({real: n}, run.replication)
    run.topics[topic], run.partitions[topic] = real, n
    run.journal.topics[topic] = real
    matching = [m.name for m in run.fleet.active() if topic in _effective(run, m.name)]
    run.producer.set_topics(run.produce_topics())
    return _outcome(
        f"topic {topic} created with {n} partitions"
        + (f", matching the subscription of {', '.join(matching)}" if matching else ""),
        expect_rebalance=bool(matching),
        members=matching,
        details={"topic": real, "partitions": n, "matching": matching},
    )


def partition_growth(run: ChaosRun, step: Step) -> ActionOutcome:
    topic, to = step.args["topic"], int(step.args["to"])
    before = run.partitions[topic]
    run.admin.grow_partitions(run.topics[topic], to)
    run.partitions[topic] = to
    return _outcome(
        f"CreatePartitions {topic} {before} → {to}",
        expect_rebalance=any(topic in _effective(run, m.name) for m in run.fleet.active()),
        details={"topic": run.topics[topic], "from": before, "to": to},
    )


def member_kill(run: ChaosRun, step: Step) -> ActionOutcome:
    name = step.args["member"]
    owned = run.state.members[name].partitions if name in run.state.members else {}
    pairs = [(t, p) for t, ids in owned.items() for p in ids]
    killed_ms = _now()
    run.fleet.kill(name)
    session = run.scenario.fleet.session_timeout_ms
    limit = 2 * session + 5000

    def handover() -> None:
        for tp in pairs:
            first = checks.first_owner_after(run.state, tp, killed_ms, name)
            took = None if first is None else first[1] - killed_ms
            if took is None or took > limit:
                shown = "never" if took is None else f"after {took / 1000:.1f}s"
                run.violation(
                    "kill-handover",
                    f"{tp[0]}-{tp[1]} of killed {name} moved {shown} "
                    f"(limit 2 × session timeout + 5 s = {limit / 1000:.0f}s)",
                    killed_ms,
                    [name],
                    f"{tp[0]}-{tp[1]}",
                )
        run.journal.held("kill-handover")

    return _outcome(
        f"SIGKILL {name} (pid {run.fleet.members[name].pid})",
        members=[name],
        details={"member": name, "owned": {t: list(ids) for t, ids in owned.items()}},
        after_settle=handover,
    )


def member_stop(run: ChaosRun, step: Step) -> ActionOutcome:
    name = step.args["member"]
    run.fleet.stop(name)
    static = run.fleet.members[name].launch.instance_id is not None
    how = "no LeaveGroup (static), found by session timeout" if static else "LeaveGroup"
    return _outcome(f"SIGTERM {name} ({how})", members=[name], details={"member": name})


def member_pause(run: ChaosRun, step: Step) -> ActionOutcome:
    name = step.args["member"]
    run.fleet.pause(name)
    # A frozen process cannot consume: the broker's reassignment is not a double owner.
    run.excused.setdefault(name, []).append((_now(), None))
    return _outcome(f"SIGSTOP {name}", members=[name], details={"member": name})


def member_resume(run: ChaosRun, step: Step) -> ActionOutcome:
    name = step.args["member"]
    member = run.fleet.members[name]
    since = member.paused_since_ms or _now()
    run.fleet.resume(name)
    session = run.scenario.fleet.session_timeout_ms
    intervals = run.excused.get(name, [])
    if intervals and intervals[-1][1] is None:
        # Until its next heartbeat tells it so, the resumed member still believes it owns.
        intervals[-1] = (intervals[-1][0], _now() + session)
    paused_ms = _now() - since
    return _outcome(
        f"SIGCONT {name} after {paused_ms / 1000:.1f}s",
        expect_rebalance=paused_ms >= session,
        members=[name],
        details={"member": name, "paused_ms": paused_ms},
    )


def member_add(run: ChaosRun, step: Step) -> ActionOutcome:
    f = run.scenario.fleet
    names = list(step.args["names"])
    for name in names:
        static = step.args.get("static", f.static)
        first = f.members[0] if f.members else None
        spec = MemberSpec(
            name=name,
            static=bool(static),
            assignors=list(first.assignors if first else f.assignors),
            subscribe=list(first.subscribe) if first else sorted(run.partitions),
            pattern=first.pattern if first else None,
        )
        run.specs[name] = spec
        run.fleet.start(run.launch_for(spec))
    return _outcome(f"started {', '.join(names)}", members=names, details={"members": names})


def _restart_one(run: ChaosRun, name: str) -> dict[str, Any]:
    old = run.fleet.members[name]
    static = old.launch.instance_id is not None
    gen_before = run.state.generation
    stopped_ms = _now()
    run.fleet.stop(name)
    if not run.wait_for(lambda: not old.running, 20):
        raise SetupError(f"{name} (pid {old.pid}) did not stop within 20s of SIGTERM")
    run.pump(0.05)
    new = run.fleet.start(old.launch)
    started_ms = _now()

    def back() -> bool:
        st = run.state.members.get(name)
        return bool(st and st.alive and st.phase == "Stable" and st.member_id) and new.running

    run.wait_for(back, run.settle_timeout())
    back_ms = _now()
    settled = run.settle(None if static else gen_before, run.settle_timeout())
    gens = sorted({g.generation for g in run.state.generations if g.generation > gen_before})
    return {
        "member": name,
        "static": static,
        "old_pid": old.pid,
        "new_pid": new.pid,
        "down_ms": started_ms - stopped_ms,
        "back_ms": back_ms - stopped_ms,
        "settled": settled is not None,
        "generations": gens,
    }


def rolling_restart(run: ChaosRun, step: Step) -> ActionOutcome:
    names = _names(run, step.args.get("members"))
    gap = step.args.get("gap_ms", 0) / 1000
    session = run.scenario.fleet.session_timeout_ms
    restarts = []
    for name in names:
        r = _restart_one(run, name)
        restarts.append(r)
        if r["static"] and r["back_ms"] < session and r["generations"]:
            run.violation(
                "static-restart-no-rebalance",
                f"static {name} was back within its session timeout ({r['back_ms']} ms < "
                f"{session} ms) yet generations {r['generations']} happened",
                members=[name],
            )
        elif r["static"] and r["back_ms"] < session:
            run.journal.held("static-restart-no-rebalance")
        if not r["static"] and not r["generations"]:
            run.violation(
                "dynamic-restart-rebalances",
                f"dynamic {name} restarted without any rebalance",
                members=[name],
            )
        elif not r["static"]:
            run.journal.held("dynamic-restart-rebalances")
        if gap:
            run.sleep(gap)
    return _outcome(
        f"rolling restart of {', '.join(names)}",
        expect_rebalance=False,
        members=names,
        details={"restarts": restarts},
    )


def slow_consumer(run: ChaosRun, step: Step) -> ActionOutcome:
    name = step.args["member"]
    f = run.scenario.fleet
    processing = int(step.args.get("processing_ms") or f.max_poll_interval_ms + 1500)
    since = _now()
    run.fleet.send(name, {"op": "processing_ms", "value": processing})

    def breached() -> bool:
        return any(
            e.type == "PollIntervalExceeded" and e.member == name and e.ts_ms >= since
            for e in run.state.recent
        )

    ok = run.wait_for(breached, (processing + f.max_poll_interval_ms) / 1000 + 15)
    # Back to normal: applied once the slow batch is done, then the member rejoins.
    run.fleet.send(name, {"op": "processing_ms", "value": run.specs[name].processing_ms})
    if not ok:
        run.violation(
            "expectation",
            f"{name} processed for {processing} ms per batch but never exceeded "
            f"max.poll.interval.ms ({f.max_poll_interval_ms} ms)",
            members=[name],
        )
    return _outcome(
        f"{name} processing {processing} ms per batch (max.poll.interval.ms "
        f"{f.max_poll_interval_ms})",
        members=[name],
        details={"member": name, "processing_ms": processing, "breached": ok},
    )


def coordinator_failover(run: ChaosRun, step: Step) -> ActionOutcome:
    from kgctl.broker.local import LocalBroker

    broker = LocalBroker(run.options.broker_state) if run.options.broker_state else LocalBroker()
    state = broker.load()
    ports = {int(p.rpartition(":")[2]) for p in run.settings.bootstrap.split(",")}
    if state is None or not ports & {n.port for n in state.nodes}:
        raise UsageError(
            "coordinator-failover needs the local cluster kgctl started (kgctl broker up "
            f"--brokers 3) at {run.settings.bootstrap}; no such cluster in "
            f"{broker.state_path} (pass --broker-state)"
        )
    node_id, host, port = run.admin.coordinator_of(run.group)
    node = next((n for n in state.nodes if n.port == port), None)
    if node is None:
        raise SetupError(
            f"coordinator {node_id} at {host}:{port} is not a node of {broker.state_path}"
        )
    killed_ms = _now()
    broker.stop_node(node.node_id, signal.SIGKILL)

    def moved() -> bool:
        for m in run.fleet.active():
            found = [
                e
                for e in run.state.recent
                if e.member == m.name and e.type == "CoordinatorFound" and e.ts_ms >= killed_ms
            ]
            if not found or found[-1].data.get("coordinator") == node_id:
                return False
        return True

    down_s = float(step.args.get("down_seconds", 0))

    def restart() -> None:
        left = down_s - (_now() - killed_ms) / 1000
        if left > 0:
            run.sleep(left)
        if step.args.get("restart", True):
            broker.up(brokers=len(state.nodes), tie_to_parent=run.options.tie_nodes_to_parent)
            run.pump(0.1)

    return _outcome(
        f"SIGKILL broker {node.node_id} (the coordinator, port {port})",
        expect_rebalance=False,
        details={"coordinator": node_id, "port": port, "restart": step.args.get("restart", True)},
        wait_for=moved,
        after_settle=restart,
    )


def static_conflict(run: ChaosRun, step: Step) -> ActionOutcome:
    name, dup = step.args["member"], step.args["duplicate"]
    old = run.fleet.members[name]
    if old.launch.instance_id is None:
        raise UsageError(f"static-conflict: {name} is not a static member (fleet.static: true)")
    run.expected_fenced.add(name)
    spec = MemberSpec(
        name=dup,
        static=True,
        assignors=list(run.specs[name].assignors),
        subscribe=list(run.specs[name].subscribe),
        pattern=run.specs[name].pattern,
    )
    run.specs[dup] = spec
    run.subscriptions[dup] = run.subscriptions.get(name, (spec.subscribe, spec.pattern))
    started = _now()
    run.fleet.start(run.launch_for(spec, name=dup, instance_id=old.launch.instance_id))
    # Once its successor joined, the older process only holds a stale view.
    run.excused.setdefault(name, []).append((started, None))
    return _outcome(
        f"started {dup} with the instance id {old.launch.instance_id!r} of {name}",
        expect_rebalance=False,
        members=[name, dup],
        details={"member": name, "duplicate": dup, "instance_id": old.launch.instance_id},
        wait_for=lambda: not old.running,
    )


def produce(run: ChaosRun, step: Step) -> ActionOutcome:
    count = int(step.args["count"])
    topics = step.args.get("topics")
    real = [run.topics[t] for t in topics] if topics else run.produce_topics()
    run.producer.produce(real, count)
    return _outcome(
        f"produced {count} numbered records to {', '.join(real)}",
        expect_rebalance=False,
        details={"count": count, "topics": real},
    )


def wait(run: ChaosRun, step: Step) -> ActionOutcome:
    seconds = step.args.get("seconds")
    if seconds:
        run.sleep(float(seconds))
    return _outcome(
        f"waited {seconds}s" if seconds else "waited until stable",
        expect_rebalance=False,
        settle=step.args.get("until") == "stable" or not seconds,
    )


ACTIONS: dict[str, Callable[[ChaosRun, Step], ActionOutcome]] = {
    "subscription-change": subscription_change,
    "topic-create": topic_create,
    "partition-growth": partition_growth,
    "member-kill": member_kill,
    "member-stop": member_stop,
    "member-pause": member_pause,
    "member-resume": member_resume,
    "member-add": member_add,
    "rolling-restart": rolling_restart,
    "slow-consumer": slow_consumer,
    "coordinator-failover": coordinator_failover,
    "static-conflict": static_conflict,
    "produce": produce,
    "wait": wait,
}
