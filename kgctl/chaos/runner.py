"""The chaos runner: set up, then for each step act, wait for the group to settle, judge.

Everything goes through one loop on the calling thread: member events arrive on the
fleet's queue, are checked (consumption inside the assignment, commits), folded into a
`GroupState`, recorded and shown; chaos adds its own events (ScenarioStarted,
StepStarted, ActionPerformed, GroupSettled, StepFinished, InvariantViolated,
ScenarioFinished) with the same envelope. `run_scenario` is the library entry point.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import queue as _queue
import re
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol

from kgctl.adapters.chaos import ChaosAdmin, NumberedProducer
from kgctl.chaos import checks, verdict
from kgctl.chaos.actions import ACTIONS, ActionOutcome
from kgctl.chaos.fit import FittedScenario, TimingOverrides, fit_scenario
from kgctl.chaos.fleet import Fleet, MemberLaunch, MemberProcess
from kgctl.chaos.journal import Journal, StepReport, ViolationRecord
from kgctl.chaos.scenario import MemberSpec, Scenario, Step, load_scenario
from kgctl.chaos.scenarios import builtin, builtin_names
from kgctl.errors import ExitStatus, KgctlError, NotFoundError, SetupError, UsageError
from kgctl.model.bounds import SOURCE_CLUSTER
from kgctl.model.events import Event
from kgctl.model.fold import fold
from kgctl.model.invariants import (
    Violation,
    check_complete_ownership,
    check_epoch_order,
    check_exclusive_ownership,
    check_idle_members,
    check_revoked_before_assigned,
    check_single_generation,
    excused_by,
)
from kgctl.model.state import GroupState, TopicPartition
from kgctl.proxy.runner import ProxyThread
from kgctl.settings import ClientSettings

Sink = Callable[[Event], None]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RunOptions:
    """How to run a scenario (beyond the scenario itself)."""

    topic_prefix: str = "kgctl."
    group: str | None = None  # an explicit group id (else kgctl.chaos.<scenario>.<run>)
    allow_destructive: bool = False
    keep_topics: bool = False
    broker_state: Path | None = None  # the LocalBroker state file (coordinator-failover)
    tie_nodes_to_parent: bool = False  # restarted broker nodes die with this process
    drain_timeout_s: float = 20.0
    timings: TimingOverrides = field(default_factory=TimingOverrides)  # --session-timeout ...


def is_loopback(bootstrap: str) -> bool:
    """Every bootstrap host is a loopback address (or resolves only to loopback)."""
    for part in bootstrap.split(","):
        host = part.strip().rpartition(":")[0].strip("[]")
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        if not infos or not all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos):
            return False
    return True


class ChaosRun:
    """One run of one scenario; `run()` returns its journal."""

    def __init__(
        self,
        scenario: Scenario,
        settings: ClientSettings,
        options: RunOptions | None = None,
        sinks: list[Sink] | None = None,
        record: IO[str] | None = None,
        refresh: Callable[[ChaosRun], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.settings = settings
        self.options = options or RunOptions()
        self.sinks = list(sinks or [])
        self.record = record
        self.refresh = refresh
        self.run_id = uuid.uuid4().hex[:8]
        prefix = f"{self.options.topic_prefix}{scenario.name}.{self.run_id}."
        self.topic_base = prefix
        self.group = (
            self.options.group or f"{self.options.topic_prefix}chaos.{scenario.name}.{self.run_id}"
        )
        self.topics: dict[str, str] = {t: prefix + t for t in scenario.fleet.topics}
        self.partitions: dict[str, int] = dict(scenario.fleet.topics)  # logical -> count
        self.journal = Journal(
            scenario=scenario.name,
            run_id=self.run_id,
            group=self.group,
            bootstrap=settings.bootstrap,
            origin=scenario.origin,
            topics=dict(self.topics),
        )
        self.state = GroupState(group=self.group)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"kgctl-chaos-{self.run_id}-"))
        self.fleet = Fleet(settings, self.workdir)
        self.admin: ChaosAdmin | None = None
        self.producer: NumberedProducer | None = None
        self.step: StepReport | None = None
        self.specs: dict[str, MemberSpec] = {m.name: m for m in scenario.fleet.members}
        self.subscriptions: dict[str, tuple[list[str], str | None]] = {}
        self.excused: dict[str, list[tuple[int, int | None]]] = {}
        self.expected_fenced: set[str] = set()
        self.cut_off: dict[str, str] = {}
        self.batches: list[tuple[str, int, int, int]] = []
        # (ts_ms, member, partition, offset committed, what that member had consumed)
        self.commit_log: list[checks.Commit] = []
        self.consumed_up_to: dict[tuple[str, TopicPartition], int] = {}
        self._seq = 0
        self._mono0 = time.monotonic()
        self._last_ts = 0
        self._step_events: list[Event] = []
        self._history: list[Event] = []  # every event of the run, for the diagnosis
        self.interrupted = False
        # Started by setup when the scenario has fault rules; the fleet connects through it.
        self.proxy: ProxyThread | None = None
        self.fitted: FittedScenario | None = None
        # A member the cluster refused for its timings: no point waiting for the group.
        self.refused: KgctlError | None = None
        # What the cleanup may delete: only what this run created, never a group or
        # topics that existed before it (refused, or acted on with --allow-destructive).
        self.created_topics = False
        self.owns_group = False

    # -- what actions use besides the fleet and the state (actions.ActionContext) --------
    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap

    @property
    def request_timeout_s(self) -> float:
        """How long a member waits for any answer before it gives up on it (--timeout)."""
        return self.settings.timeout_s

    @property
    def broker_state(self) -> Path | None:
        return self.options.broker_state

    @property
    def tie_nodes_to_parent(self) -> bool:
        return self.options.tie_nodes_to_parent

    def add_topic(self, logical: str, real: str, partitions: int) -> None:
        self.topics[logical], self.partitions[logical] = real, partitions
        self.journal.topics[logical] = real

    def held(self, rule: str) -> None:
        self.journal.held(rule)

    # -- events -------------------------------------------------------------------------
    def emit(self, type_: str, **data: Any) -> Event:
        self._seq += 1
        event = Event(
            type=type_,
            ts_ms=now_ms(),
            mono_ms=round((time.monotonic() - self._mono0) * 1000, 3),
            seq=self._seq,
            group=self.group,
            member="",
            client_id="kgctl-chaos",
            host=socket.gethostname(),
            pid=os.getpid(),
            generation=self.state.generation,
            source="chaos",
            data=data,
        )
        self._handle(event)
        return event

    def _synthesize_exit(self, member: MemberProcess) -> None:
        # A process that ended without MemberStopped (SIGKILL, crash): the fold must know.
        code = member.exit_code
        error = "SIGKILL" if code == -9 else f"exit {code}"
        self._seq += 1
        event = Event(
            type="MemberFailed",
            ts_ms=now_ms(),
            mono_ms=round((time.monotonic() - self._mono0) * 1000, 3),
            seq=self._seq,
            group=self.group,
            member=member.name,
            pid=member.pid,
            source="chaos",
            data={
                "error": error,
                "message": "the member process ended without stopping (seen by kgctl chaos)",
                "exit_status": code,
            },
        )
        self._handle(event)

    def _handle(self, event: Event) -> None:
        if event.source == "member":
            self._check_member_event(event)
            if event.data.get("error") == "INVALID_SESSION_TIMEOUT" and self.refused is None:
                self.refused = self._refusal(event)
        self.state = fold(self.state, event, now_ms())
        self._last_ts = max(self._last_ts, event.ts_ms)
        self._history.append(event)
        if self.step is not None:
            self._step_events.append(event)
        if self.record is not None:
            self.record.write(event.to_json() + "\n")
            self.record.flush()
        for sink in self.sinks:
            sink(event)

    def violation(
        self,
        rule: str,
        message: str,
        at_ms: int | None = None,
        members: list[str] | None = None,
        partition: str = "",
        step: str | None = None,
    ) -> None:
        at = at_ms if at_ms is not None else now_ms()
        name = step if step is not None else (self.step.name if self.step else "setup")
        v = ViolationRecord(rule, message, at, name, sorted(members or []), partition)
        if self.journal.add_violation(v):
            self.emit(
                "InvariantViolated",
                **{
                    k: getattr(v, k)
                    for k in ("rule", "message", "at_ms", "step", "members", "partition")
                },
            )

    def violation_found(self, v: Violation) -> None:
        """Record an ownership check's finding, charged to the step it happened in (the
        checks look back over the whole history, so that may be an earlier step)."""
        self.violation(
            v.rule,
            v.message,
            v.at_ms,
            list(v.members),
            f"{v.topic}-{v.partition}",
            step=self.step_at(v.at_ms),
        )

    def _refusal(self, ev: Event) -> SetupError:
        session = self.scenario.fleet.session_timeout_ms
        head = (
            f"the cluster refused {ev.member}'s session timeout of {session} ms "
            "(INVALID_SESSION_TIMEOUT: outside its group.min/max.session.timeout.ms)"
        )
        bounds = self.fitted.bounds if self.fitted is not None else None
        if bounds is None:
            return SetupError(f"{head}; pass --session-timeout MS within them")
        if bounds.source == SOURCE_CLUSTER:
            # Read from one broker: another (the coordinator) must enforce other values.
            known = f"one broker says {bounds.session_range()}, the coordinator differs"
        else:
            known = f"kgctl assumed {bounds.session_range()} ({bounds.origin()})"
        return SetupError(
            f"{head}; {known}; ask the cluster's admin for the bounds and pass "
            "--session-timeout MS within them"
        )

    def _check_member_event(self, ev: Event) -> None:
        member = self.state.members.get(ev.member)
        if ev.type == "RecordsConsumed":
            owned = set()
            if member is not None:
                owned = {(t, p) for t, ids in member.partitions.items() for p in ids}
            for b in ev.data.get("batches", []):
                tp = (str(b.get("topic")), int(b.get("partition", -1)))
                first, last = int(b.get("first", 0)), int(b.get("last", 0))
                self.batches.append((tp[0], tp[1], first, last))
                key = (ev.member, tp)
                self.consumed_up_to[key] = max(self.consumed_up_to.get(key, 0), last + 1)
                if tp not in owned and not excused_by(self.excused)(ev.member, ev.ts_ms):
                    # (An excused member, frozen or cut off from its coordinator, consumes
                    # what its own stale view says it owns: the fault shows that.)
                    self.violation(
                        "consumed-outside-assignment",
                        f"{ev.member} consumed {tp[0]}-{tp[1]} offsets {first}..{last} "
                        "outside its assignment",
                        ev.ts_ms,
                        [ev.member],
                        f"{tp[0]}-{tp[1]}",
                    )
            self.journal.held("consumed-outside-assignment")
        elif ev.type == "OffsetsCommitted":
            # Judged at the end in the members' own time order (check_commits): members'
            # streams interleave, so a new owner's commit can arrive before the previous
            # owner's commit it started from.
            for topic, parts in (ev.data.get("offsets") or {}).items():
                for p, offset in parts.items():
                    tp = (topic, int(p))
                    own = self.consumed_up_to.get((ev.member, tp), 0)
                    self.commit_log.append((ev.ts_ms, ev.member, tp, int(offset), own))
            self.journal.held("commits-monotonic")
            self.journal.held("commit-not-ahead")
        elif ev.type == "MemberFailed" and ev.member not in self.expected_fenced:
            self.violation(
                "member-failed",
                f"{ev.member} failed: {ev.data.get('error')}: {ev.data.get('message', '')}",
                ev.ts_ms,
                [ev.member],
            )

    # -- the loop -----------------------------------------------------------------------
    def pump(self, timeout_s: float = 0.1) -> None:
        """Handle every queued item, waiting up to `timeout_s` for the first one."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                kind, name, payload = self.fleet.queue.get(
                    timeout=max(left, 0.0) if left > 0 else 0.0001
                )
            except _queue.Empty:
                break
            if kind == "event":
                if payload.type in ("MemberStopped", "MemberFailed"):
                    for proc in self.fleet.history:
                        if proc.pid == payload.pid:
                            proc.stopped = True
                self._handle(payload)
            elif not payload.stopped:
                self._synthesize_exit(payload)
            if time.monotonic() >= deadline:
                break
        if self.refresh is not None:
            self.refresh(self)

    def wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if pred():
                return True
            self.pump(0.1)
        return pred()

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.pump(min(0.1, max(deadline - time.monotonic(), 0)))

    def stable_now(self, baseline_gen: int | None = None) -> bool:
        active = self.fleet.active()
        silent = [m.name for m in active if m.launch.client == "java"]
        names = [m.name for m in active]
        if not verdict.stable_now(self.state, names, baseline_gen, silent):
            return False
        if not silent:
            return True
        # Members that report no generation are settled when every partition has one
        # live owner again (a generation newer than the baseline cannot be seen on them)
        # and, on the consumer protocol, none is left without partitions while there
        # are enough for all (it is still reconciling).
        expected = self.expected_partitions()
        if check_complete_ownership(self.state, now_ms(), expected):
            return False
        return not check_idle_members(self.state, names, len(expected), reconciling=set())

    def settle(
        self, baseline_gen: int | None, timeout_s: float, extra: Callable[[], bool] | None = None
    ) -> int | None:
        """Wait until the group is stable (past `baseline_gen` if given) for the quiet time."""
        timer = verdict.QuietTimer(self.quiet_ms())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.refused is not None:
                raise self.refused
            if not self.fleet.running():
                self.pump(0.2)  # the exits' events
                return None  # every member ended: nothing can settle
            ok = self.stable_now(baseline_gen) and (extra is None or extra())
            settled = timer.update(ok, time.monotonic() * 1000, max(self._last_ts, 0) or now_ms())
            if settled is not None:
                return settled
            self.pump(0.1)
        return None

    # -- setup --------------------------------------------------------------------------
    def launch_for(
        self, spec: MemberSpec, name: str | None = None, instance_id: str | None = None
    ) -> MemberLaunch:
        f = self.scenario.fleet
        topics, pattern = self.subscriptions.get(spec.name, (spec.subscribe, spec.pattern))
        return MemberLaunch(
            name=name or spec.name,
            group=self.group,
            topics=[self.topics[t] for t in topics],
            pattern=self.real_pattern(pattern) if pattern else None,
            instance_id=instance_id or (f"{spec.name}" if spec.static else None),
            assignors=list(spec.assignors),
            session_timeout_ms=spec.session_timeout_ms or f.session_timeout_ms,
            heartbeat_interval_ms=f.heartbeat_interval_ms,
            max_poll_interval_ms=f.max_poll_interval_ms,
            commit=f.commit,
            processing_ms=spec.processing_ms,
            protocol=spec.protocol,
            client=spec.client,
            remote_assignor=spec.remote_assignor,
            fetch=f.fetch,
        )

    def real_pattern(self, pattern: str) -> str:
        return f"^{re.escape(self.topic_base)}(?:{pattern})$"

    def expected_partitions(self) -> set[TopicPartition]:
        """Partitions of every topic some active member subscribes to."""
        wanted: set[str] = set()
        for m in self.fleet.active():
            spec = self.specs.get(m.name)
            if spec is None:
                continue
            topics, pattern = self.subscriptions.get(spec.name, (spec.subscribe, spec.pattern))
            if pattern:
                rx = re.compile(pattern)
                wanted |= {t for t in self.partitions if rx.fullmatch(t)}
            else:
                wanted |= set(topics)
        return {(self.topics[t], p) for t in wanted for p in range(self.partitions[t])}

    def check_safety(self) -> None:
        sc = self.scenario
        grows = [s for s in sc.steps if s.action == "partition-growth"]
        if (
            grows
            and not is_loopback(self.settings.bootstrap)
            and not self.options.allow_destructive
        ):
            what = ", ".join(f"{s.args['topic']} to {s.args['to']}" for s in grows)
            raise UsageError(
                f"{self.settings.bootstrap} is not a local cluster and this scenario grows "
                f"partitions (irreversible): {what} on kgctl's own topics under "
                f"{self.topic_base}*; pass --allow-destructive to do it"
            )

    def setup(self) -> None:
        self.check_safety()
        self.admin = admin = ChaosAdmin(self.settings)
        self.fitted = fit_scenario(self.scenario, admin.group_bounds(), self.options.timings)
        self.scenario = sc = self.fitted.scenario
        self.journal.cluster = {
            "bounds": self.fitted.bounds.to_dict(),
            "timings": [a.to_dict() for a in self.fitted.adjustments],
        }
        brokers = admin.broker_count()
        if sc.fleet.brokers > brokers:
            raise SetupError(
                f"scenario {sc.name} needs a {sc.fleet.brokers}-broker cluster; "
                f"{self.settings.bootstrap} has {brokers} (kgctl broker up --brokers 3)"
            )
        existed = bool(self.options.group) and admin.group_exists(self.group)
        if existed and not self.options.allow_destructive:
            raise UsageError(
                f"group {self.group} already exists and kgctl did not create it; chaos would "
                "join it, rebalance it and commit offsets in it: pass --allow-destructive"
            )
        existing = admin.existing_topics() & set(self.topics.values())
        if existing:
            raise UsageError(
                f"topics {', '.join(sorted(existing))} already exist; kgctl creates its own"
            )
        self.owns_group = not existed
        self.replication = min(3, brokers)
        self.created_topics = True  # none of them existed: whatever gets created is ours
        admin.create_topics(
            {self.topics[t]: n for t, n in self.partitions.items()}, self.replication
        )
        self.producer = producer = NumberedProducer(self.settings, self.run_id)
        if sc.uses_proxy:
            self.start_proxy()
        self.emit(
            "ScenarioStarted",
            scenario=sc.name,
            origin=sc.origin,
            run_id=self.run_id,
            topics=self.topics,
            members=[m.name for m in sc.fleet.members],
            steps=[{"name": s.name, "action": s.action} for s in sc.steps],
            bounds=self.fitted.bounds.to_dict(),
            timings=[a.to_dict() for a in self.fitted.adjustments],
            fetch=sc.fleet.fetch,
        )
        self.journal.started_ms = now_ms()
        # Known before any member starts: the live view says it from the first frame.
        self.journal.setup = {"fetch": sc.fleet.fetch}
        started = now_ms()
        for spec in sc.fleet.members:
            self.fleet.start(self.launch_for(spec))
        if sc.fleet.produce_rate > 0:
            producer.start_rate(self.produce_topics(), sc.fleet.produce_rate)
        setup_timeout = self.settle_timeout() + self.fitted.first_join_delay_ms / 1000
        settled = self.settle(-1, setup_timeout)
        if settled is None:
            self.dump_stderr()
            raise SetupError(
                f"the fleet of {len(sc.fleet.members)} members did not form a stable group "
                f"within {setup_timeout:.0f}s{self.stderr_hint()}"
            )
        self.journal.setup |= {
            "members": [m.name for m in sc.fleet.members],
            "generation": self.state.generation,
            "settle_ms": settled - started,
        }
        self.emit(
            "GroupSettled",
            step="setup",
            generation=self.state.generation,
            settle_ms=settled - started,
        )

    def produce_topics(self) -> list[str]:
        subscribed: set[str] = set()
        for spec in self.specs.values():
            topics, pattern = self.subscriptions.get(spec.name, (spec.subscribe, spec.pattern))
            if pattern:
                rx = re.compile(pattern)
                subscribed |= {t for t in self.partitions if rx.fullmatch(t)}
            subscribed |= set(topics)
        return [self.topics[t] for t in sorted(subscribed or self.partitions)]

    def consumer_timings(self) -> tuple[int, int] | None:
        """The broker's (session, heartbeat interval) of consumer-protocol members, when
        the fleet has any: on that protocol both are the cluster's, not the member's."""
        if "consumer" not in {spec.protocol for spec in self.specs.values()}:
            return None
        bounds = self.fitted.bounds if self.fitted is not None else None
        configs = bounds.configs if bounds is not None else {}
        return (
            int(configs.get("group.consumer.session.timeout.ms", 45000)),
            int(configs.get("group.consumer.heartbeat.interval.ms", 5000)),
        )

    def quiet_ms(self) -> int:
        """How long the group must look stable to count as settled. A consumer-protocol
        member learns a new target only with its next heartbeat, and a partition it gives
        up reaches its new owner with that owner's next one: two intervals can pass
        between steps of one reconciliation while everything looks stable."""
        timings = self.consumer_timings()
        quiet = self.scenario.settle_quiet_ms
        return quiet if timings is None else max(quiet, 2 * timings[1] + 500)

    def settle_timeout(self) -> float:
        if self.scenario.settle_timeout_s:
            return float(self.scenario.settle_timeout_s)
        f = self.scenario.fleet
        session = f.session_timeout_ms
        timings = self.consumer_timings()
        if timings is not None:
            session = max(session, timings[0])
        return 3 * session / 1000 + f.max_poll_interval_ms / 1000 + 15

    def stderr_hint(self) -> str:
        for m in self.fleet.history:
            if m.stderr:
                return f"; {m.name}: {m.stderr[-1]}"
        return ""

    def dump_stderr(self) -> None:
        self.journal.members.update(
            {m.name: {"stderr": list(m.stderr)} for m in self.fleet.history if m.stderr}
        )

    # -- steps --------------------------------------------------------------------------
    def run_step(self, index: int, step: Step) -> bool:
        report = StepReport(
            index=index,
            name=step.name,
            action=step.action,
            started_ms=now_ms(),
            expect=step.expect.to_dict(),
        )
        self.journal.steps.append(report)
        self.step = report
        self._step_events = []
        self.emit(
            "StepStarted",
            index=index,
            step=step.name,
            action=step.action,
            args=step.args,
            expect=report.expect,
        )
        baseline_gen = self.state.generation
        report.action_ms = now_ms()
        outcome = ACTIONS[step.action].perform(self, step.args)
        report.cause = outcome.description
        report.details = outcome.details
        self.emit(
            "ActionPerformed",
            step=step.name,
            action=step.action,
            description=outcome.description,
            members=outcome.members,
            details=outcome.details,
        )
        settled: int | None = report.action_ms
        if outcome.settle:
            settled = self.settle(
                baseline_gen if outcome.expect_rebalance else None,
                self.settle_timeout(),
                outcome.wait_for,
            )
        ok = settled is not None
        if settled is not None:
            report.settled_ms = settled
            report.settle_ms = max(0, settled - report.action_ms)
            self.emit(
                "GroupSettled",
                step=step.name,
                generation=self.state.generation,
                settle_ms=report.settle_ms,
            )
            self.check_stable()
        else:
            self.violation(
                "settled",
                f"the group was not stable within {self.settle_timeout():.0f}s after "
                f"{outcome.description}",
                members=[m.name for m in self.fleet.active()],
            )
        if outcome.after_settle is not None and ok:
            outcome.after_settle()
        facts = self.fill_report(report, baseline_gen, outcome)
        self.check_expectations(step, facts, report)
        if step.expect.group_type and self.admin is not None:
            self.check_group_type(step.expect.group_type, report)
        self.check_exclusive()
        report.finished_ms = now_ms()
        failed = any(v.step == step.name for v in self.journal.violations)
        report.status = verdict.step_status(ok, failed)
        self.emit("StepFinished", **_report_data(report))
        self.step = None
        return ok

    def fill_report(
        self, report: StepReport, baseline_gen: int, outcome: ActionOutcome
    ) -> verdict.StepFacts:
        facts = verdict.step_facts(
            self.state,
            self._step_events,
            action_ms=report.action_ms,
            end_ms=report.settled_ms or now_ms(),
            baseline_generation=baseline_gen,
            acted_on=outcome.members,
            history=self._history,
        )
        report.generations = facts.generations
        report.rejoin_reasons = facts.rejoin_reasons
        report.cause = verdict.cause_line(report.cause, facts.rejoin_reasons, facts.diagnoses)
        report.diagnoses = [d.to_dict() for d in facts.diagnoses]
        report.protocol_changes = facts.protocol_changes
        report.errors = facts.errors
        report.revoked = facts.revoked
        report.fenced = facts.fenced
        report.moved = facts.moved
        report.affected = facts.affected
        report.unassigned_ms = facts.unassigned_ms
        return facts

    def check_stable(self) -> None:
        t = now_ms()
        expected = self.expected_partitions()
        for v in check_complete_ownership(self.state, t, expected):
            self.violation(
                "complete-ownership", v.message, t, list(v.members), f"{v.topic}-{v.partition}"
            )
        silent = {m.name for m in self.fleet.history if m.launch.client == "java"}
        if self.consumer_timings() is None:
            for v in check_single_generation(self.state, t):
                self.violation("single-generation", v.message, t, list(v.members))
            self.journal.held("single-generation")
        else:
            # Consumer protocol: members carry their own epochs, not one generation;
            # the group's meaning of "balanced" is that nobody is idle unless reconciling.
            names = [m.name for m in self.fleet.active()]
            for v in check_idle_members(self.state, names, len(expected)):
                self.violation("no-idle-member", v.message, t, list(v.members))
            self.journal.held("no-idle-member")
            for v in check_single_generation(self.state, t):
                if not set(v.members) & silent:
                    self.violation("single-generation", v.message, t, list(v.members))
        self.journal.held("complete-ownership")

    def check_exclusive(self) -> None:
        excused = excused_by(self.excused)
        if self.consumer_timings() is not None:
            self.check_handovers(excused)
        for v in check_exclusive_ownership(self.state, excused):
            self.violation_found(v)
        self.journal.held("exclusive-ownership")

    def check_group_type(self, want: str, report: StepReport) -> None:
        """The broker converted the group (or kept it) as the step expects."""
        assert self.admin is not None
        have = self.admin.group_type(self.group)
        report.details["group_type"] = have
        if have != want:
            self.violation(
                "expectation",
                f"the broker lists the group as {have or 'unknown'}, expected {want}",
            )
        self.journal.held("expectation")

    def check_handovers(self, excused: Callable[[str, int], bool]) -> None:
        """The consumer protocol's ownership rules, over the whole history: a partition
        changes owner only at a newer epoch, and only once its owner gave it up."""
        silent = {m.name for m in self.fleet.history if m.launch.client == "java"}
        found = check_epoch_order(self.state, silent) + check_revoked_before_assigned(
            self.state, excused
        )
        for v in found:
            self.violation_found(v)
        self.journal.held("single-owner-per-epoch")
        self.journal.held("revoked-before-assigned")

    def check_commits(self) -> None:
        for rule, message, ts, member, where in checks.commit_violations(self.commit_log):
            self.violation(rule, message, ts, [member], where, step=self.step_at(ts))
        self.journal.held("commits-monotonic")
        self.journal.held("commit-not-ahead")

    def step_at(self, at_ms: int) -> str:
        name = "setup"
        for s in self.journal.steps:
            if s.started_ms <= at_ms:
                name = s.name
        return name

    def check_expectations(self, step: Step, facts: verdict.StepFacts, report: StepReport) -> None:
        for failure in verdict.expectation_failures(step.expect, facts, report.settle_ms):
            self.violation("expectation", failure.message, members=list(failure.members))
        if step.expect.to_dict():
            self.journal.held("expectation")

    # -- the end ------------------------------------------------------------------------
    def drain(self) -> None:
        """Stop producing and wait until every produced record was consumed (bounded)."""
        producer = self.producer
        if producer is None:
            return
        producer.stop_rate()
        produced = producer.produced()

        def covered() -> bool:
            return not checks.missing_records(produced, checks.consumed_coverage(self.batches))

        if self.fleet.active():
            self.wait_for(covered, self.options.drain_timeout_s)

    def stop_members(self) -> None:
        self.fleet.signal_all_running(signal.SIGTERM)  # each leaves and exits
        self.wait_for(lambda: not self.fleet.running(), 15)
        self.pump(0.3)

    def final_checks(self) -> None:
        produced = self.producer.produced() if self.producer is not None else []
        coverage = checks.consumed_coverage(self.batches)
        missing = checks.missing_records(produced, coverage)
        dups = checks.duplicate_count(self.batches)
        self.journal.records = {
            "produced": len(produced),
            "produce_failed": self.producer.failed if self.producer is not None else 0,
            "consumed": sum(b - a + 1 for _t, _p, a, b in self.batches),
            "missing": len(missing),
            "duplicates": dups,
        }
        if missing:
            t, p, o = missing[0]
            self.violation(
                "at-least-once",
                f"{len(missing)} produced record(s) never consumed, first {t}-{p}@{o}",
                partition=f"{t}-{p}",
                step="end",
            )
        elif produced:
            self.journal.held("at-least-once")
        self.check_exclusive()
        self.check_commits()
        for m in self.fleet.history:
            entry = self.journal.members.setdefault(m.name, {})
            entry.update(pid=m.pid, exit_code=m.exit_code, instance_id=m.launch.instance_id)
            if m.stderr:
                entry["stderr"] = list(m.stderr)[-5:]

    def start_proxy(self) -> None:
        """A `kgctl proxy` in this process between the fleet and the cluster (the admin
        client and the producer stay direct); its events join the run's."""

        def deliver(event: Event) -> None:
            self.fleet.queue.put(("event", "proxy", event))

        self.proxy = ProxyThread(self.settings, sink=deliver)
        self.proxy.start()
        self.fleet.settings = replace(self.settings, bootstrap=self.proxy.bootstrap)

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.fleet.close(grace_s=10)
        if self.proxy is not None:
            self.proxy.close()
        if self.producer is not None:
            with contextlib.suppress(Exception):
                self.producer.close()
        if self.admin is not None:
            if not self.options.keep_topics:
                if self.created_topics:
                    self.admin.delete_topics(list(self.topics.values()))
                if self.owns_group:
                    self.admin.delete_group(self.group)
            self.admin.close()
        with contextlib.suppress(OSError):
            for p in self.workdir.iterdir():
                p.unlink()
            self.workdir.rmdir()

    def run(self) -> Journal:
        error = ""
        error_status = ExitStatus.SETUP_FAILED
        try:
            try:
                self.setup()
                for i, step in enumerate(self.scenario.steps):
                    if not self.run_step(i, step):
                        for rest in self.scenario.steps[i + 1 :]:
                            self.journal.steps.append(
                                StepReport(
                                    index=len(self.journal.steps),
                                    name=rest.name,
                                    action=rest.action,
                                    started_ms=now_ms(),
                                    status="skipped",
                                )
                            )
                        break
                self.drain()
                self.stop_members()
                self.final_checks()
            except KeyboardInterrupt:
                self.interrupted = True
                if self.step is not None:
                    self.step.status = "interrupted"
                self.fleet.close(grace_s=5)
                self.pump(0.2)
            except KgctlError as exc:
                if isinstance(exc, UsageError):
                    raise
                error = str(exc)
                # Cannot connect (3) and not authorized (8) keep their own status.
                error_status = exc.status
        finally:
            self.cleanup()
        self.journal.finished_ms = now_ms()
        self.journal.finish(interrupted=self.interrupted, error=error, error_status=error_status)
        with contextlib.suppress(Exception):
            self.emit(
                "ScenarioFinished",
                verdict=self.journal.verdict,
                exit_status=int(self.journal.exit_status),
                violations=len(self.journal.violations),
                journal=self.journal.to_dict(),
                # The members whose ownership the run knew to be stale, and when (frozen,
                # cut off from their coordinator, replaced): `kgctl report` excuses their
                # overlaps as the run did.
                excused={k: [list(i) for i in v] for k, v in self.excused.items() if v},
            )
        return self.journal


def _report_data(report: StepReport) -> dict[str, Any]:
    d = asdict(report)
    d["rebalances"] = report.rebalances
    return d


def resolve_scenario(scenario: Scenario | str | Path) -> Scenario:
    """A Scenario from itself, a built-in name, or a file path."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, str) and scenario in builtin_names():
        return builtin(scenario)
    path = Path(scenario)
    if path.exists():
        return load_scenario(path)
    raise NotFoundError(
        f"{scenario}: no such scenario file or built-in ({', '.join(builtin_names())})"
    )


class Display(Protocol):
    """What shows a run as it goes (`kgctl/render/chaos_view.py: ChaosDisplay`); the
    caller builds it, so chaos never imports render."""

    def start(self, run: Any) -> None: ...

    def on_event(self, event: Event) -> None: ...

    def refresh(self, run: Any) -> None: ...

    def stop(self, run: Any) -> None: ...


def run_scenario(
    scenario: Scenario | str | Path,
    settings: ClientSettings,
    *,
    options: RunOptions | None = None,
    display: Display | None = None,
    record: str | Path | None = None,
    on_event: Sink | None = None,
) -> Journal:
    """Run a scenario (a Scenario, a built-in name or a YAML path) and return its journal.

    `display` shows the run as it goes (None: nothing). `record`: write every event
    (members' and chaos's) as JSON lines to this file. Ctrl-C stops the run; the journal
    returned is then partial (verdict "interrupted"). Call it from a thread that lives
    for the run (members get PR_SET_PDEATHSIG, which fires when the spawning thread ends).
    """
    sc = resolve_scenario(scenario)
    sinks: list[Sink] = [on_event] if on_event is not None else []
    if display is not None:
        sinks.append(display.on_event)
    fh = open(record, "w", encoding="utf-8") if record is not None else None  # noqa: SIM115
    try:
        run = ChaosRun(
            sc, settings, options, sinks, fh, display.refresh if display is not None else None
        )
        if display is not None:
            display.start(run)
        try:
            return run.run()
        finally:
            if display is not None:
                display.stop(run)
    finally:
        if fh is not None:
            fh.close()
