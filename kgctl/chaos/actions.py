"""Chaos actions: one `Action` per kind, each with its arguments, its checks and its act.

An action declares the arguments a scenario step may give it (`args`: kind and whether
required; `kgctl/chaos/scenario.py` reads them), checks what only it knows about them
when the scenario is loaded (`validate`, against a `StepCheck`: the members and topics
known at that step), and acts during a run (`perform`, against an `ActionContext`: the
fleet, the group as folded, the cluster, and waiting) returning an `ActionOutcome`:
whether a new generation must appear before the group counts as settled, which members
it touched, details for the report, and optional checks to run once the group settled.

A new action is a subclass here, added to `ACTIONS`; the scenario schema, its
validation and the runner pick it up from there (docs/architecture.md).
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from kgctl.broker.local import LocalBroker
from kgctl.chaos import checks
from kgctl.chaos.fleet import Fleet, MemberLaunch
from kgctl.errors import SetupError, UsageError
from kgctl.model.state import PHASE_STABLE, GroupState
from kgctl.proxy.faults import Rule, RuleError, parse_rule

if TYPE_CHECKING:
    from kgctl.adapters.chaos import ChaosAdmin, NumberedProducer
    from kgctl.chaos.scenario import MemberSpec, Scenario
    from kgctl.proxy.runner import ProxyThread

Args = Mapping[str, Any]
# A member or topic name a scenario may use.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")


@dataclass
class ActionOutcome:
    """What an action did and what settling means after it."""

    description: str
    expect_rebalance: bool = True
    members: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    settle: bool = True
    after_settle: Callable[[], None] | None = None
    wait_for: Callable[[], bool] | None = None  # extra condition before settling


class Arg(NamedTuple):
    """One argument of an action. Kinds: str, int, num, bool, member (a fleet member),
    members (a list of them, or `all`), topic (a fleet topic), topics, str_list, protocol
    (classic or consumer)."""

    kind: str
    required: bool = False


@dataclass
class StepCheck:
    """What an action's `validate` sees of a scenario at its step: the members and topics
    known so far (an action that adds some updates them for the steps after it), and
    where to report a problem (`error(key, message)`; key None: the step itself)."""

    names: list[str]
    topics: dict[str, int]
    error: Callable[[str | None, str], None]

    def regex(self, key: str, pattern: str) -> None:
        try:
            re.compile(pattern)
        except re.error as exc:
            self.error(key, f"not a regular expression ({exc})")


class ActionContext(Protocol):
    """What an action may use of a run (`kgctl/chaos/context.py: RunContext` is a real
    run's): the fleet and its plan, the group as folded so far, the cluster, the run's
    checks, and waiting, which keeps folding the members' events."""

    scenario: Scenario
    group: str
    fleet: Fleet
    admin: ChaosAdmin | None
    producer: NumberedProducer | None
    topic_base: str
    topics: dict[str, str]  # logical name -> real name
    partitions: dict[str, int]  # logical name -> partition count
    replication: int
    specs: dict[str, MemberSpec]
    subscriptions: dict[str, tuple[list[str], str | None]]
    excused: dict[str, list[tuple[int, int | None]]]  # members whose ownership is stale
    expected_fenced: set[str]
    cut_off: dict[str, str]  # fault id -> the member whose heartbeats it swallows
    proxy: ProxyThread | None  # between the fleet and the cluster when the scenario has faults

    @property
    def state(self) -> GroupState:
        """The group as folded so far; the run folds it, an action only reads it."""
        ...

    @property
    def bootstrap(self) -> str: ...
    @property
    def broker_state(self) -> Path | None: ...
    @property
    def tie_nodes_to_parent(self) -> bool: ...

    def add_topic(self, logical: str, real: str, partitions: int) -> None: ...
    def launch_for(
        self, spec: MemberSpec, name: str | None = None, instance_id: str | None = None
    ) -> MemberLaunch: ...
    def real_pattern(self, pattern: str) -> str: ...
    def produce_topics(self) -> list[str]: ...
    def violation(
        self,
        rule: str,
        message: str,
        at_ms: int | None = None,
        members: list[str] | None = None,
        partition: str = "",
        step: str | None = None,
    ) -> None: ...
    def held(self, rule: str) -> None: ...
    def wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool: ...
    def sleep(self, seconds: float) -> None: ...
    def pump(self, timeout_s: float = 0.1) -> None: ...
    def settle(
        self, baseline_gen: int | None, timeout_s: float, extra: Callable[[], bool] | None = None
    ) -> int | None: ...
    def settle_timeout(self) -> float: ...
    def consumer_timings(self) -> tuple[int, int] | None: ...
    @property
    def request_timeout_s(self) -> float: ...


class Action:
    """One kind of chaos action: `name`, `args`, `validate`, `perform`."""

    name: ClassVar[str]
    args: ClassVar[dict[str, Arg]] = {}

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        """Checks beyond each argument's kind; may complete `args` (defaults that depend
        on the fleet) and update `check.names`/`check.topics` for later steps."""

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        raise NotImplementedError(self.name)


def _now() -> int:
    return int(time.time() * 1000)


def _names(ctx: ActionContext, raw: Any) -> list[str]:
    if raw in (None, "all"):
        return [m.name for m in ctx.fleet.active()]
    return list(raw)


def _effective(ctx: ActionContext, name: str) -> set[str]:
    spec = ctx.specs[name]
    topics, pattern = ctx.subscriptions.get(name, (spec.subscribe, spec.pattern))
    if pattern:
        rx = re.compile(pattern)
        return {t for t in ctx.partitions if rx.fullmatch(t)}
    return set(topics)


def _admin(ctx: ActionContext) -> ChaosAdmin:
    if ctx.admin is None:
        raise SetupError("no admin client: the run was not set up")
    return ctx.admin


def _producer(ctx: ActionContext) -> NumberedProducer:
    if ctx.producer is None:
        raise SetupError("no producer: the run was not set up")
    return ctx.producer


class SubscriptionChange(Action):
    """Members subscribe to other topics or a pattern."""

    name = "subscription-change"
    args = {"members": Arg("members"), "topics": Arg("topics"), "pattern": Arg("str")}

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        if ("topics" in args) == ("pattern" in args):
            check.error(None, "subscription-change needs exactly one of 'topics' or 'pattern'")
        if "pattern" in args:
            check.regex("pattern", args["pattern"])

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        names = _names(ctx, args.get("members"))
        topics = args.get("topics")
        pattern = args.get("pattern")
        changed = False
        for name in names:
            before = _effective(ctx, name)
            ctx.subscriptions[name] = (list(topics or []), pattern)
            changed = changed or _effective(ctx, name) != before
            command: dict[str, Any]
            if pattern:
                command = {"op": "subscribe", "pattern": ctx.real_pattern(pattern)}
            else:
                command = {"op": "subscribe", "topics": [ctx.topics[t] for t in topics or []]}
            ctx.fleet.send(name, command)
        _producer(ctx).set_topics(ctx.produce_topics())
        what = f"pattern {pattern!r}" if pattern else f"topics {', '.join(topics or [])}"
        return ActionOutcome(
            f"subscription of {', '.join(names)} changed to {what}",
            expect_rebalance=changed,
            members=names,
            details={"members": names, "topics": topics, "pattern": pattern},
        )


class TopicCreate(Action):
    """A new topic (a pattern subscription may match it)."""

    name = "topic-create"
    args = {"topic": Arg("str", True), "partitions": Arg("int", True)}

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        if "topic" not in args:
            return
        if args["topic"] in check.topics:
            check.error("topic", f"topic {args['topic']!r} already exists")
        elif not NAME.match(args["topic"]):
            check.error("topic", "use letters, digits, . _ -")
        elif args.get("partitions", 1) < 1:
            check.error("partitions", "at least 1")
        else:
            check.topics[args["topic"]] = args.get("partitions", 1)

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        topic, n = args["topic"], int(args["partitions"])
        real = ctx.topic_base + topic
        _admin(ctx).create_topics({real: n}, ctx.replication)
        ctx.add_topic(topic, real, n)
        matching = [m.name for m in ctx.fleet.active() if topic in _effective(ctx, m.name)]
        _producer(ctx).set_topics(ctx.produce_topics())
        return ActionOutcome(
            f"topic {topic} created with {n} partitions"
            + (f", matching the subscription of {', '.join(matching)}" if matching else ""),
            expect_rebalance=bool(matching),
            members=matching,
            details={"topic": real, "partitions": n, "matching": matching},
        )


class PartitionGrowth(Action):
    """CreatePartitions on a topic (irreversible)."""

    name = "partition-growth"
    args = {"topic": Arg("topic", True), "to": Arg("int", True)}

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        if "topic" not in args or "to" not in args:
            return
        have = check.topics[args["topic"]]
        if args["to"] <= have:
            check.error("to", f"must be more than {have} (partitions can only grow)")
        else:
            check.topics[args["topic"]] = args["to"]

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        topic, to = args["topic"], int(args["to"])
        before = ctx.partitions[topic]
        _admin(ctx).grow_partitions(ctx.topics[topic], to)
        ctx.partitions[topic] = to
        return ActionOutcome(
            f"CreatePartitions {topic} {before} → {to}",
            expect_rebalance=any(topic in _effective(ctx, m.name) for m in ctx.fleet.active()),
            details={"topic": ctx.topics[topic], "from": before, "to": to},
        )


class MemberKill(Action):
    """SIGKILL a member: no LeaveGroup, found by session timeout."""

    name = "member-kill"
    args = {"member": Arg("member", True)}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        name = args["member"]
        owned = ctx.state.members[name].partitions if name in ctx.state.members else {}
        pairs = [(t, p) for t, ids in owned.items() for p in ids]
        killed_ms = _now()
        ctx.fleet.kill(name)
        session = ctx.scenario.fleet.session_timeout_ms
        timings = ctx.consumer_timings()
        if timings is not None and ctx.fleet.members[name].launch.protocol == "consumer":
            session = timings[0]  # the broker's, on the consumer protocol
        limit = 2 * session + 5000

        def handover() -> None:
            for tp in pairs:
                first = checks.first_owner_after(ctx.state, tp, killed_ms, name)
                took = None if first is None else first[1] - killed_ms
                if took is None or took > limit:
                    shown = "never" if took is None else f"after {took / 1000:.1f}s"
                    ctx.violation(
                        "kill-handover",
                        f"{tp[0]}-{tp[1]} of killed {name} moved {shown} "
                        f"(limit 2 × session timeout + 5 s = {limit / 1000:.0f}s)",
                        killed_ms,
                        [name],
                        f"{tp[0]}-{tp[1]}",
                    )
            ctx.held("kill-handover")

        return ActionOutcome(
            f"SIGKILL {name} (pid {ctx.fleet.members[name].pid})",
            members=[name],
            details={"member": name, "owned": {t: list(ids) for t, ids in owned.items()}},
            after_settle=handover,
        )


class MemberStop(Action):
    """SIGTERM a member: LeaveGroup (dynamic) or session timeout (static)."""

    name = "member-stop"
    args = {"member": Arg("member", True)}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        name = args["member"]
        ctx.fleet.stop(name)
        static = ctx.fleet.members[name].launch.instance_id is not None
        how = "no LeaveGroup (static), found by session timeout" if static else "LeaveGroup"
        return ActionOutcome(f"SIGTERM {name} ({how})", members=[name], details={"member": name})


class MemberPause(Action):
    """SIGSTOP a member (frozen: no heartbeats, no polls)."""

    name = "member-pause"
    args = {"member": Arg("member", True)}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        name = args["member"]
        ctx.fleet.pause(name)
        # A frozen process cannot consume: the broker's reassignment is not a double owner.
        ctx.excused.setdefault(name, []).append((_now(), None))
        return ActionOutcome(f"SIGSTOP {name}", members=[name], details={"member": name})


class MemberResume(Action):
    """SIGCONT a paused member."""

    name = "member-resume"
    args = {"member": Arg("member", True)}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        name = args["member"]
        member = ctx.fleet.members[name]
        since = member.paused_since_ms or _now()
        ctx.fleet.resume(name)
        session = ctx.scenario.fleet.session_timeout_ms
        intervals = ctx.excused.get(name, [])
        if intervals and intervals[-1][1] is None:
            # Until its next heartbeat tells it so, the resumed member still believes it owns.
            intervals[-1] = (intervals[-1][0], _now() + session)
        paused_ms = _now() - since
        return ActionOutcome(
            f"SIGCONT {name} after {paused_ms / 1000:.1f}s",
            expect_rebalance=paused_ms >= session,
            members=[name],
            details={"member": name, "paused_ms": paused_ms},
        )


class MemberAdd(Action):
    """Start more members, like the fleet's first."""

    name = "member-add"
    args = {
        "count": Arg("int"),
        "names": Arg("str_list"),
        "static": Arg("bool"),
        "clients": Arg("str_list"),
    }

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        for client in args.get("clients") or []:
            if client not in ("kgctl", "java"):
                check.error("clients", f"unknown client {client!r}; expected kgctl or java")
        if "names" in args:
            new = list(args["names"])
        else:
            new = []
            i = len(check.names) + 1
            while len(new) < (args.get("count") or 1):
                if f"m{i}" not in check.names:
                    new.append(f"m{i}")
                i += 1
            args["names"] = new
        for n in new:
            if n in check.names:
                check.error("names", f"member {n!r} exists")
            check.names.append(n)

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        f = ctx.scenario.fleet
        names = list(args["names"])
        first = f.members[0]  # a validated fleet has at least one member
        # `clients` cycles over the new members (kgctl, java, kgctl, ...); else the first's.
        clients = list(args.get("clients") or [first.client])
        for i, name in enumerate(names):
            spec = replace(
                first,
                name=name,
                client=clients[i % len(clients)],
                static=bool(args.get("static", f.static)),
                assignors=list(first.assignors),
                subscribe=list(first.subscribe),
                processing_ms=0,
                session_timeout_ms=None,  # the fleet's, not the first member's own
            )
            ctx.specs[name] = spec
            ctx.fleet.start(ctx.launch_for(spec))
        return ActionOutcome(
            f"started {', '.join(names)}", members=names, details={"members": names}
        )


class RollingRestart(Action):
    """Stop and start members one after another."""

    name = "rolling-restart"
    args = {"members": Arg("members"), "gap_ms": Arg("int"), "protocol": Arg("protocol")}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        names = _names(ctx, args.get("members"))
        gap = args.get("gap_ms", 0) / 1000
        session = ctx.scenario.fleet.session_timeout_ms
        protocol = args.get("protocol")
        restarts = []
        for name in names:
            r = self._restart_one(ctx, name, protocol)
            restarts.append(r)
            if r["generations"] is None:
                pass  # no member reports generations (Java members only): not judged
            elif r["static"] and r["back_ms"] < session and r["generations"]:
                ctx.violation(
                    "static-restart-no-rebalance",
                    f"static {name} was back within its session timeout ({r['back_ms']} ms < "
                    f"{session} ms) yet generations {r['generations']} happened",
                    members=[name],
                )
            elif r["static"] and r["back_ms"] < session:
                ctx.held("static-restart-no-rebalance")
            if r["generations"] is None:
                pass
            elif not r["static"] and not r["generations"]:
                ctx.violation(
                    "dynamic-restart-rebalances",
                    f"dynamic {name} restarted without any rebalance",
                    members=[name],
                )
            elif not r["static"]:
                ctx.held("dynamic-restart-rebalances")
            if gap:
                ctx.sleep(gap)
        onto = f" onto the {protocol} protocol" if protocol else ""
        return ActionOutcome(
            f"rolling restart of {', '.join(names)}{onto}",
            expect_rebalance=False,
            members=names,
            details={"restarts": restarts, "protocol": protocol},
        )

    @staticmethod
    def _restart_one(ctx: ActionContext, name: str, protocol: str | None) -> dict[str, Any]:
        old = ctx.fleet.members[name]
        launch = old.launch
        if protocol:
            # An online migration: the same member back on the other protocol.
            launch = replace(launch, protocol=protocol)
            ctx.specs[name] = replace(ctx.specs[name], protocol=protocol)
        judged = any(m.launch.client != "java" for m in ctx.fleet.active())
        static = old.launch.instance_id is not None
        gen_before = ctx.state.generation
        stopped_ms = _now()
        ctx.fleet.stop(name)
        if not ctx.wait_for(lambda: not old.running, 20):
            raise SetupError(f"{name} (pid {old.pid}) did not stop within 20s of SIGTERM")
        ctx.pump(0.05)
        new = ctx.fleet.start(launch)
        started_ms = _now()
        # A Java member reports no member id: its first assignment says it is back.
        silent = launch.client == "java"

        def back() -> bool:
            st = ctx.state.members.get(name)
            return bool(
                st and st.alive and st.phase == PHASE_STABLE and (st.member_id or silent)
            ) and (new.running)

        ctx.wait_for(back, ctx.settle_timeout())
        back_ms = _now()
        settled = ctx.settle(None if static else gen_before, ctx.settle_timeout())
        gens = sorted({g.generation for g in ctx.state.generations if g.generation > gen_before})
        return {
            "member": name,
            "static": static,
            "old_pid": old.pid,
            "new_pid": new.pid,
            "down_ms": started_ms - stopped_ms,
            "back_ms": back_ms - stopped_ms,
            "settled": settled is not None,
            "generations": gens if judged else None,
            "protocol": launch.protocol,
        }


class SlowConsumer(Action):
    """A member processes slower than max.poll.interval.ms allows."""

    name = "slow-consumer"
    args = {"member": Arg("member", True), "processing_ms": Arg("int")}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        name = args["member"]
        f = ctx.scenario.fleet
        processing = int(args.get("processing_ms") or f.max_poll_interval_ms + 1500)
        since = _now()
        ctx.fleet.send(name, {"op": "processing_ms", "value": processing})

        def breached() -> bool:
            return any(
                e.type == "PollIntervalExceeded" and e.member == name and e.ts_ms >= since
                for e in ctx.state.recent
            )

        ok = ctx.wait_for(breached, (processing + f.max_poll_interval_ms) / 1000 + 15)
        # Back to normal: applied once the slow batch is done, then the member rejoins.
        ctx.fleet.send(name, {"op": "processing_ms", "value": ctx.specs[name].processing_ms})
        if not ok:
            ctx.violation(
                "expectation",
                f"{name} processed for {processing} ms per batch but never exceeded "
                f"max.poll.interval.ms ({f.max_poll_interval_ms} ms)",
                members=[name],
            )
        return ActionOutcome(
            f"{name} processing {processing} ms per batch (max.poll.interval.ms "
            f"{f.max_poll_interval_ms})",
            members=[name],
            details={"member": name, "processing_ms": processing, "breached": ok},
        )


class CoordinatorFailover(Action):
    """SIGKILL the group's coordinator broker (a local 3-node cluster)."""

    name = "coordinator-failover"
    args = {"restart": Arg("bool"), "down_seconds": Arg("num")}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        broker = LocalBroker(ctx.broker_state) if ctx.broker_state else LocalBroker()
        state = broker.load()
        ports = {int(p.rpartition(":")[2]) for p in ctx.bootstrap.split(",")}
        if state is None or not ports & {n.port for n in state.nodes}:
            raise UsageError(
                "coordinator-failover needs the local cluster kgctl started (kgctl broker up "
                f"--brokers 3) at {ctx.bootstrap}; no such cluster in "
                f"{broker.state_path} (pass --broker-state)"
            )
        node_id, host, port = _admin(ctx).coordinator_of(ctx.group)
        node = next((n for n in state.nodes if n.port == port), None)
        if node is None:
            raise SetupError(
                f"coordinator {node_id} at {host}:{port} is not a node of {broker.state_path}"
            )
        killed_ms = _now()
        broker.stop_node(node.node_id, signal.SIGKILL)

        def moved() -> bool:
            for m in ctx.fleet.active():
                found = [
                    e
                    for e in ctx.state.recent
                    if e.member == m.name and e.type == "CoordinatorFound" and e.ts_ms >= killed_ms
                ]
                if not found or found[-1].data.get("coordinator") == node_id:
                    return False
            return True

        down_s = float(args.get("down_seconds", 0))
        nodes = len(state.nodes)

        def restart() -> None:
            left = down_s - (_now() - killed_ms) / 1000
            if left > 0:
                ctx.sleep(left)
            if args.get("restart", True):
                broker.up(brokers=nodes, tie_to_parent=ctx.tie_nodes_to_parent)
                ctx.pump(0.1)

        return ActionOutcome(
            f"SIGKILL broker {node.node_id} (the coordinator, port {port})",
            expect_rebalance=False,
            details={"coordinator": node_id, "port": port, "restart": args.get("restart", True)},
            wait_for=moved,
            after_settle=restart,
        )


class StaticConflict(Action):
    """Start a second process with a static member's instance id."""

    name = "static-conflict"
    args = {"member": Arg("member", True), "duplicate": Arg("str")}

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        if "member" in args:
            dup = args.get("duplicate") or f"{args['member']}-dup"
            args["duplicate"] = dup
            check.names.append(dup)

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        name, dup = args["member"], args["duplicate"]
        old = ctx.fleet.members[name]
        if old.launch.instance_id is None:
            raise UsageError(f"static-conflict: {name} is not a static member (fleet.static: true)")
        ctx.expected_fenced.add(name)
        original = ctx.specs[name]
        spec = replace(
            original,
            name=dup,
            static=True,
            assignors=list(original.assignors),
            subscribe=list(original.subscribe),
            processing_ms=0,
        )
        ctx.specs[dup] = spec
        ctx.subscriptions[dup] = ctx.subscriptions.get(name, (spec.subscribe, spec.pattern))
        started = _now()
        ctx.fleet.start(ctx.launch_for(spec, name=dup, instance_id=old.launch.instance_id))
        # Once its successor joined, the older process only holds a stale view.
        ctx.excused.setdefault(name, []).append((started, None))
        return ActionOutcome(
            f"started {dup} with the instance id {old.launch.instance_id!r} of {name}",
            expect_rebalance=False,
            members=[name, dup],
            details={"member": name, "duplicate": dup, "instance_id": old.launch.instance_id},
            wait_for=lambda: not old.running,
        )


class Produce(Action):
    """Produce numbered records (checked for at-least-once)."""

    name = "produce"
    args = {"count": Arg("int", True), "topics": Arg("topics")}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        count = int(args["count"])
        topics = args.get("topics")
        real = [ctx.topics[t] for t in topics] if topics else ctx.produce_topics()
        _producer(ctx).produce(real, count)
        return ActionOutcome(
            f"produced {count} numbered records to {', '.join(real)}",
            expect_rebalance=False,
            details={"count": count, "topics": real},
        )


class Wait(Action):
    """Wait some seconds, or until the group is stable."""

    name = "wait"
    args = {"seconds": Arg("num"), "until": Arg("str")}

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        until = args.get("until")
        if until is not None and until != "stable":
            check.error("until", "the only value is 'stable'")
        if until is None and "seconds" not in args:
            check.error(None, "wait needs 'seconds' or 'until: stable'")

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        seconds = args.get("seconds")
        if seconds:
            ctx.sleep(float(seconds))
        return ActionOutcome(
            f"waited {seconds}s" if seconds else "waited until stable",
            expect_rebalance=False,
            settle=args.get("until") == "stable" or not seconds,
        )


SESSION_TERM = re.compile(r"\{session(?:\*([0-9.]+))?\}")


def session_rule(text: str, session_ms: int) -> str:
    """A scenario's fault rule with `{session}` / `{session*1.5}` replaced by that many
    milliseconds of the fleet's session timeout (as fitted to the cluster)."""
    return SESSION_TERM.sub(lambda m: str(round(session_ms * float(m.group(1) or 1))), text)


def _proxy(ctx: ActionContext) -> ProxyThread:
    if ctx.proxy is None:
        raise SetupError("no proxy: the run did not start one (a scenario with faults does)")
    return ctx.proxy


class Fault(Action):
    """Put a `kgctl proxy` fault rule in force between the fleet and the cluster
    (docs/proxy.md): `rule` as `API:EFFECT[:SELECTOR]...`, optionally only for one
    `member` (or the group's current `leader`), with an `id` for a later `heal`."""

    name = "fault"
    args = {
        "rule": Arg("str"),
        "rules": Arg("str_list"),
        "member": Arg("str"),
        "id": Arg("str"),
        "rebalance": Arg("bool"),
        "settle": Arg("bool"),
    }

    def validate(self, args: dict[str, Any], check: StepCheck) -> None:
        if ("rule" in args) == ("rules" in args):
            check.error(None, "fault needs 'rule' or 'rules' (exactly one of them)")
        for key in ("rule", "rules"):
            texts = args.get(key)
            for text in [texts] if isinstance(texts, str) else texts or []:
                try:
                    parse_rule(session_rule(str(text), 6000))
                except RuleError as exc:
                    check.error(key, str(exc).replace("fault rule ", "", 1))
        member = args.get("member")
        if member is not None and member != "leader" and member not in check.names:
            check.error("member", f"unknown member {member!r} (or 'leader')")

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        member = args.get("member")
        if member == "leader":
            member = ctx.state.leader
            if not member or member not in ctx.fleet.members:
                raise SetupError("fault: the group has no known leader to fault")
        session = ctx.scenario.fleet.session_timeout_ms
        timings = ctx.consumer_timings()
        if timings is not None and (
            not member or ctx.fleet.members[member].launch.protocol == "consumer"
        ):
            session = timings[0]  # a consumer-protocol member's session is the broker's
        texts = [session_rule(str(t), session) for t in args.get("rules") or [args["rule"]]]
        rules = [parse_rule(t) for t in texts]
        for rule in rules:
            if member:
                # Exactly this member's client id (kgctl join's default for --name).
                rule.client, rule.client_exact = f"kgctl-{member}", True
            if args.get("id"):
                rule.id = str(args["id"])
        wait_for = None
        rebalance = bool(args.get("rebalance", False))
        if member and any(r.error == "FENCED_INSTANCE_ID" for r in rules):
            # The member must end, fenced; the broker still holds its static identity
            # until its session times out, then hands its partitions on.
            ctx.expected_fenced.add(member)
            fenced = ctx.fleet.members[member]
            wait_for = lambda: not fenced.running  # noqa: E731
            rebalance = True
        proxy = _proxy(ctx)
        for rule in rules:
            proxy.run_.add_rule(rule)
        details: dict[str, Any] = {"rules": [r.to_dict() for r in rules], "member": member}
        swallowed = ("blackhole", "hang")
        heartbeats = ("Heartbeat", "ConsumerGroupHeartbeat")
        held = [r for r in rules if r.api == "ConsumerGroupHeartbeat" and r.effect == "delay"]
        if member and held and held[0].count:
            # A fencing loop: each held heartbeat reaches the broker after the member's
            # session ended; the step lasts until the last one was answered.
            if held[0].delay_ms / 1000 >= ctx.request_timeout_s:
                raise SetupError(
                    f"fault: {member}'s heartbeat would be held {held[0].delay_ms} ms, longer "
                    f"than the members' request timeout ({ctx.request_timeout_s:g} s): it "
                    "would give up and send another instead of being fenced; run with "
                    f"--timeout {held[0].delay_ms // 1000 + 15} (or on a cluster with a "
                    "shorter group.consumer.session.timeout.ms)"
                )
            wait_for = _released(held[0])
        if member and any(
            r.api in heartbeats and (r.effect in swallowed or r in held) for r in rules
        ):
            # Cut off from its coordinator, the member keeps its partitions and consumes
            # them, as Java's classic consumer does, until an answer tells it it was
            # removed: from the coordinator's rebalance on, two members own them. That
            # overlap is what the fault shows, not a broken invariant; heal ends it.
            ctx.excused.setdefault(member, []).append((_now(), None))
            ctx.cut_off[str(args.get("id") or rules[0].id)] = member
            details["cut_off"] = member
        shown = ", ".join(f"{r.id} {t}" for r, t in zip(rules, texts, strict=True))
        return ActionOutcome(
            f"fault in force: {shown}" + (f" on {member}" if member else ""),
            expect_rebalance=rebalance,
            members=[member] if member else [],
            details=details,
            # settle: false when the fault keeps a member out of any stable group (a
            # blackhole) until a later heal.
            settle=bool(args.get("settle", True)),
            wait_for=wait_for,
        )


def _released(rule: Rule) -> Callable[[], bool]:
    """True once a counted delay rule ran out and its last held request was let through
    (its delay after the last application, plus a margin for the answer)."""
    ran_out: list[float] = []

    def released() -> bool:
        if rule.applied < (rule.count or 0):
            return False
        if not ran_out:
            ran_out.append(time.monotonic())
        return time.monotonic() - ran_out[0] >= (rule.delay_ms + 500) / 1000

    return released


class Heal(Action):
    """Remove the fault rules with this `id` (every rule without one)."""

    name = "heal"
    args = {"id": Arg("str"), "rebalance": Arg("bool")}

    def perform(self, ctx: ActionContext, args: Args) -> ActionOutcome:
        run = _proxy(ctx).run_
        which = args.get("id")
        if which:
            run.remove_rule(str(which))
        else:
            run.clear_rules()
        healed = [ctx.cut_off.pop(k) for k in list(ctx.cut_off) if not which or k == which]
        session = ctx.scenario.fleet.session_timeout_ms
        for member in healed:
            intervals = ctx.excused.get(member, [])
            if intervals and intervals[-1][1] is None:
                # Its next heartbeat answer (UNKNOWN_MEMBER_ID) ends the overlap.
                intervals[-1] = (intervals[-1][0], _now() + session)
        return ActionOutcome(
            f"fault {which} healed" if which else "every fault healed",
            expect_rebalance=bool(args.get("rebalance", False)),
            details={"name": which, "reconnected": healed},
        )


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        SubscriptionChange(),
        TopicCreate(),
        PartitionGrowth(),
        MemberKill(),
        MemberStop(),
        MemberPause(),
        MemberResume(),
        MemberAdd(),
        RollingRestart(),
        SlowConsumer(),
        CoordinatorFailover(),
        StaticConflict(),
        Produce(),
        Wait(),
        Fault(),
        Heal(),
    )
}
