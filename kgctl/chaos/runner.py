"""The chaos runner: set up, then for each step act, wait for the group to settle, judge.

A run is four parts the runner sequences: the plan (`plan.py`: group, topics, members,
timings), the resources it sets up and cleans (`resources.py`: fleet, proxy, topics,
clients), the event pump every event goes through (`pump.py`: folded, recorded, shown)
and the judge that reads them (`judge.py`, over the pure `verdict.py`); actions perform
against the run's `RunContext` (`context.py`). Chaos adds its own events (ScenarioStarted,
StepStarted, ActionPerformed, GroupSettled, StepFinished, InvariantViolated,
ScenarioFinished) with the members' envelope. `run_scenario` is the library entry point.
"""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, Protocol

from kgctl.chaos import app_checks, verdict
from kgctl.chaos.actions import ACTIONS
from kgctl.chaos.context import RunContext
from kgctl.chaos.fit import fit_scenario
from kgctl.chaos.journal import Journal, StepReport
from kgctl.chaos.judge import Judge
from kgctl.chaos.options import RunOptions
from kgctl.chaos.plan import FleetPlan
from kgctl.chaos.pump import EventPump, Sink, now_ms
from kgctl.chaos.resources import RunResources, is_loopback
from kgctl.chaos.scenario import Scenario, Step, load_scenario
from kgctl.chaos.scenarios import builtin, builtin_names
from kgctl.errors import ExitStatus, KgctlError, NotFoundError, SetupError, UsageError
from kgctl.model.events import Event
from kgctl.model.state import GroupState
from kgctl.settings import ClientSettings

# What callers import from here (the CLI, the showdown, bench/, tests).
__all__ = [
    "ChaosRun",
    "Display",
    "RunOptions",
    "Sink",
    "is_loopback",
    "resolve_scenario",
    "run_scenario",
]


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
        self.settings = settings
        self.options = options or RunOptions()
        self.run_id = uuid.uuid4().hex[:8]
        self.plan = FleetPlan.for_run(scenario, self.run_id, self.options)
        self.resources = RunResources(settings, self.options, self.run_id)
        self.journal = Journal(
            scenario=scenario.name,
            run_id=self.run_id,
            group=self.plan.group,
            bootstrap=settings.bootstrap,
            origin=scenario.origin,
            topics=dict(self.plan.topics),
        )
        redraw = (lambda: refresh(self)) if refresh is not None else None
        self.events = EventPump(
            self.plan.group, self.resources.fleet, list(sinks or []), record, redraw
        )
        self.judge = Judge(self.journal, self.plan, self.resources.fleet, self.events.emit)
        self.events.before_fold = self.judge.read
        self.context: RunContext | None = None  # once set up
        self.interrupted = False

    # What the live view, the tests and callers read of a run.
    @property
    def state(self) -> GroupState:
        return self.events.state

    @property
    def topics(self) -> dict[str, str]:
        """Logical topic name -> the run's real one."""
        return self.plan.topics

    @property
    def workdir(self) -> Path:
        return self.resources.workdir

    def check_safety(self) -> None:
        self.resources.check_safety(self.plan)

    # -- setup --------------------------------------------------------------------------
    def setup(self) -> RunContext:
        """Check, connect, fit the scenario to the cluster, claim its topics, start the
        producer (and the proxy), then the fleet, and wait for its first stable group."""
        self.check_safety()
        admin = self.resources.connect()
        fitted = fit_scenario(self.plan.scenario, admin.group_bounds(), self.options.timings)
        self.plan.fit(fitted)
        sc = fitted.scenario
        self.journal.cluster = {
            "bounds": fitted.bounds.to_dict(),
            "timings": [a.to_dict() for a in fitted.adjustments],
        }
        self.resources.claim(self.plan)
        producer = self.resources.start_producer(self.run_id)
        if sc.uses_proxy:
            # App members (client: command) are named and judged from this trace.
            self.resources.start_proxy(
                app_checks.proxy_config(self), lambda e: app_checks.wire_events(self, e)
            )
        self.context = ctx = RunContext(
            self.plan, self.resources, self.judge, self.events, self.journal, self.options
        )
        self.events.emit(
            "ScenarioStarted",
            scenario=sc.name,
            origin=sc.origin,
            run_id=self.run_id,
            topics=self.plan.topics,
            members=[m.name for m in sc.fleet.members],
            steps=[{"name": s.name, "action": s.action} for s in sc.steps],
            bounds=fitted.bounds.to_dict(),
            timings=[a.to_dict() for a in fitted.adjustments],
            fetch=sc.fleet.fetch,
        )
        self.journal.started_ms = now_ms()
        # Known before any member starts: the live view says it from the first frame.
        self.journal.setup = {"fetch": sc.fleet.fetch}
        started = now_ms()
        for spec in sc.fleet.members:
            ctx.fleet.start(self.plan.launch_for(spec))
        if sc.fleet.produce_rate > 0:
            producer.start_rate(self.plan.produce_topics(), sc.fleet.produce_rate)
        setup_timeout = self.plan.settle_timeout() + fitted.first_join_delay_ms / 1000
        settled = ctx.settle(-1, setup_timeout)
        if settled is None:
            raise self._no_stable_group((now_ms() - started) / 1000, setup_timeout)
        self.journal.setup |= {
            "members": [m.name for m in sc.fleet.members],
            "generation": self.state.generation,
            "settle_ms": settled - started,
        }
        self.events.emit(
            "GroupSettled",
            step="setup",
            generation=self.state.generation,
            settle_ms=settled - started,
        )
        return ctx

    def _no_stable_group(self, waited_s: float, limit_s: float) -> SetupError:
        """The fleet never formed a group: what its members said on stderr goes into the
        journal, the first of it into the error line. The line gives the time really
        waited: the wait ends early when every member has ended (on a broker that refuses
        them, within seconds), and "within 75s" after 1.9 s misled (broker audit, 4)."""
        history = self.resources.fleet.history
        self.journal.members.update(
            {m.name: {"stderr": list(m.stderr)} for m in history if m.stderr}
        )
        hint = next((f"; {m.name}: {m.stderr[-1]}" for m in history if m.stderr), "")
        return SetupError(
            f"the fleet of {len(self.plan.scenario.fleet.members)} members did not form a "
            f"stable group {_waited(waited_s, limit_s)}{hint}"
        )

    # -- steps --------------------------------------------------------------------------
    def run_step(self, ctx: RunContext, index: int, step: Step) -> bool:
        """Act, wait for the group to settle, judge; False when it did not settle."""
        judge, events = self.judge, self.events
        report = StepReport(
            index=index,
            name=step.name,
            action=step.action,
            started_ms=now_ms(),
            expect=step.expect.to_dict(),
        )
        self.journal.steps.append(report)
        judge.step = report
        first_event = len(events.history)  # the step's events: from its StepStarted on
        events.emit(
            "StepStarted",
            index=index,
            step=step.name,
            action=step.action,
            args=step.args,
            expect=report.expect,
        )
        baseline_gen = self.state.generation
        report.action_ms = now_ms()
        outcome = ACTIONS[step.action].perform(ctx, step.args)
        report.cause = outcome.description
        report.details = outcome.details
        events.emit(
            "ActionPerformed",
            step=step.name,
            action=step.action,
            description=outcome.description,
            members=outcome.members,
            details=outcome.details,
        )
        settled: int | None = report.action_ms
        if outcome.settle:
            settled = ctx.settle(
                baseline_gen if outcome.expect_rebalance else None,
                ctx.settle_timeout(),
                outcome.wait_for,
            )
        ok = settled is not None
        if settled is not None:
            report.settled_ms = settled
            report.settle_ms = max(0, settled - report.action_ms)
            events.emit(
                "GroupSettled",
                step=step.name,
                generation=self.state.generation,
                settle_ms=report.settle_ms,
            )
            judge.check_stable(self.state)
        else:
            judge.violation(
                "settled",
                f"the group was not stable within {ctx.settle_timeout():.0f}s after "
                f"{outcome.description}",
                members=[m.name for m in ctx.fleet.active()],
            )
        if outcome.after_settle is not None and ok:
            outcome.after_settle()
        step_events = events.history[first_event:]
        facts = judge.step_facts(
            report, self.state, step_events, events.history, baseline_gen, outcome
        )
        judge.check_expectations(step, facts, report)
        if step.expect.group_type and ctx.admin is not None:
            judge.check_group_type(ctx.admin, step.expect.group_type, report)
        judge.check_exclusive(self.state)
        report.finished_ms = now_ms()
        failed = any(v.step == step.name for v in self.journal.violations)
        report.status = verdict.step_status(ok, failed)
        events.emit("StepFinished", **_report_data(report))
        judge.step = None
        return ok

    def _skip_rest(self, after: int) -> None:
        for rest in self.plan.scenario.steps[after + 1 :]:
            self.journal.steps.append(
                StepReport(
                    index=len(self.journal.steps),
                    name=rest.name,
                    action=rest.action,
                    started_ms=now_ms(),
                    status="skipped",
                )
            )

    # -- the end ------------------------------------------------------------------------
    def drain(self, ctx: RunContext) -> None:
        """Stop producing and wait until every produced record was consumed (bounded)."""
        producer = ctx.producer
        if producer is None:
            return
        producer.stop_rate()
        covered = app_checks.drained(self, producer, self.judge.all_consumed(producer))
        if ctx.fleet.active():
            ctx.wait_for(covered, self.options.drain_timeout_s)

    def stop_members(self) -> None:
        fleet = self.resources.fleet
        fleet.signal_all_running(signal.SIGTERM)  # each leaves and exits
        self.events.wait_for(lambda: not fleet.running(), 15)
        self.events.pump(0.3)

    def final_checks(self) -> None:
        # App members printing no records_consumed lines: the wire judges at-least-once.
        wire = app_checks.wire_judged(self)
        self.judge.final_checks(self.state, self.resources.producer, records_judge=not wire)
        producer = self.resources.producer
        app_checks.judge(self, producer.produced() if producer is not None else [])
        for m in self.resources.fleet.history:
            entry = self.journal.members.setdefault(m.name, {})
            entry.update(pid=m.pid, exit_code=m.exit_code, instance_id=m.launch.instance_id)
            if m.stderr:
                entry["stderr"] = list(m.stderr)[-5:]

    def cleanup(self) -> None:
        self.resources.close(self.plan)

    def run(self) -> Journal:
        error = ""
        error_status = ExitStatus.SETUP_FAILED
        try:
            try:
                ctx = self.setup()
                for i, step in enumerate(self.plan.scenario.steps):
                    if not self.run_step(ctx, i, step):
                        self._skip_rest(i)
                        break
                self.drain(ctx)
                self.stop_members()
                self.final_checks()
            except KeyboardInterrupt:
                self.interrupted = True
                if self.judge.step is not None:
                    self.judge.step.status = "interrupted"
                self.resources.fleet.close(grace_s=5)
                self.events.pump(0.2)
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
            self.events.emit(
                "ScenarioFinished",
                verdict=self.journal.verdict,
                exit_status=int(self.journal.exit_status),
                violations=len(self.journal.violations),
                journal=self.journal.to_dict(),
                # The members whose ownership the run knew to be stale, and when (frozen,
                # cut off from their coordinator, replaced): `kgctl report` excuses their
                # overlaps as the run did.
                excused={k: [list(i) for i in v] for k, v in self.judge.excused.items() if v},
            )
        return self.journal


def _waited(waited_s: float, limit_s: float) -> str:
    """How long a wait lasted, in words: to its limit, or cut short because every member
    had ended."""
    if waited_s < limit_s - 1:
        return f"(every member ended after {waited_s:.1f}s, of the {limit_s:.0f}s allowed)"
    return f"within {limit_s:.0f}s"


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
