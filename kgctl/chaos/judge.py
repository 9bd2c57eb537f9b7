"""The judge of a chaos run: reads every member event as it comes and the group at each
step's end, and writes what held and what broke into the journal.

What is decided lives in pure code: a step's facts, its expectations and whether the
group is stable in `kgctl/chaos/verdict.py`, ownership and generations in
`kgctl/model/invariants.py`, records and commits in `kgctl/chaos/checks.py`. The judge
feeds them (the state, the step's events, what the run excuses) and records their
findings: each broken rule once, in the journal and as an InvariantViolated event,
charged to the step it happened in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kgctl.adapters.chaos import ChaosAdmin, NumberedProducer
from kgctl.chaos import checks, verdict
from kgctl.chaos.actions import ActionOutcome
from kgctl.chaos.fleet import Fleet
from kgctl.chaos.java import READ_STAMPED
from kgctl.chaos.journal import Journal, StepReport, ViolationRecord
from kgctl.chaos.plan import FleetPlan
from kgctl.chaos.pump import now_ms
from kgctl.chaos.scenario import Step
from kgctl.errors import SetupError
from kgctl.model.events import Event
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

Emit = Callable[..., Event]
# How long after an app consumed kgctl may read the line saying so (a pipe and a reader
# thread: milliseconds; a run's busiest seen was 11 ms): a line stamped at its reading
# (READ_STAMPED) counts as consumed while its member owned the partition within this.
READ_LATENCY_MS = 250


class Judge:
    """Every rule a run checks, recorded in its journal."""

    def __init__(self, journal: Journal, plan: FleetPlan, fleet: Fleet, emit: Emit) -> None:
        self.journal = journal
        self.plan = plan
        self.fleet = fleet
        self.emit = emit  # InvariantViolated goes into the run's events
        self.step: StepReport | None = None  # the step running: where a finding is charged
        # Members whose ownership is stale, and since/until when (frozen, cut off from
        # their coordinator, replaced): their overlaps are the broker's view, not a
        # double consumption.
        self.excused: dict[str, list[tuple[int, int | None]]] = {}
        self.expected_fenced: set[str] = set()  # their MemberFailed is the point
        # A member the cluster refused for its timings: no point waiting for the group.
        self.refused: SetupError | None = None
        self.batches: list[tuple[str, int, int, int]] = []  # (topic, partition, first, last)
        self.commit_log: list[checks.Commit] = []
        self.consumed_up_to: dict[tuple[str, TopicPartition], int] = {}

    # -- findings -----------------------------------------------------------------------
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

    def held(self, rule: str) -> None:
        self.journal.held(rule)

    def step_at(self, at_ms: int) -> str:
        name = "setup"
        for s in self.journal.steps:
            if s.started_ms <= at_ms:
                name = s.name
        return name

    def _silent(self) -> set[str]:
        """Members that report no generation or epoch (Java's VerifiableConsumer)."""
        return {m.name for m in self.fleet.history if m.launch.client == "java"}

    # -- as events come -----------------------------------------------------------------
    def read(self, ev: Event, state: GroupState) -> None:
        """Judge a member's event on the state before it (chaos's and the proxy's own
        events only pass by)."""
        if ev.source != "member":
            return
        if ev.type == "RecordsConsumed":
            self._consumed(ev, state)
        elif ev.type == "OffsetsCommitted":
            self._committed(ev)
        elif ev.type == "MemberFailed" and ev.member not in self.expected_fenced:
            self.violation(
                "member-failed",
                f"{ev.member} failed: {ev.data.get('error')}: {ev.data.get('message', '')}",
                ev.ts_ms,
                [ev.member],
            )
        if ev.data.get("error") == "INVALID_SESSION_TIMEOUT" and self.refused is None:
            self.refused = self.plan.refusal(ev.member)

    def _consumed(self, ev: Event, state: GroupState) -> None:
        # A line without its own timestamp is stamped when kgctl read it, which is after
        # the app consumed: it owned the partition at some moment of the read latency.
        slack = READ_LATENCY_MS if ev.data.get(READ_STAMPED) else 0

        def owned(tp: tuple[str, int]) -> bool:
            # When it consumed, not when its line arrived: an app member's stdout is read
            # later than the proxy's events of the same moment (a Java member's record
            # processed at .872 came after its JoinGroup of .987 had ended its ownership).
            return any(
                s.member == ev.member
                and s.start_ms <= ev.ts_ms
                and (s.end_ms is None or s.end_ms > ev.ts_ms - slack)
                for s in state.ownership.get(tp, ())
            )

        for b in ev.data.get("batches", []):
            tp = (str(b.get("topic")), int(b.get("partition", -1)))
            first, last = int(b.get("first", 0)), int(b.get("last", 0))
            self.batches.append((tp[0], tp[1], first, last))
            key = (ev.member, tp)
            self.consumed_up_to[key] = max(self.consumed_up_to.get(key, 0), last + 1)
            if not owned(tp) and not excused_by(self.excused)(ev.member, ev.ts_ms):
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

    def _committed(self, ev: Event) -> None:
        # Judged at the end in the members' own time order (check_commits): members'
        # streams interleave, so a new owner's commit can arrive before the previous
        # owner's commit it started from. A commit is placed when it was sent, not
        # answered: the broker applied it on arrival, and a member frozen (SIGSTOP)
        # with its request out reads the answer after its thaw, long after its
        # partition's next owner started from that offset and moved on.
        sent_ms = ev.ts_ms - round(float(ev.data.get("duration_ms") or 0))
        for topic, parts in (ev.data.get("offsets") or {}).items():
            for p, offset in parts.items():
                tp = (topic, int(p))
                own = self.consumed_up_to.get((ev.member, tp), 0)
                self.commit_log.append((sent_ms, ev.member, tp, int(offset), own))
        self.journal.held("commits-monotonic")
        self.journal.held("commit-not-ahead")

    # -- the group ----------------------------------------------------------------------
    def group_stable(self, state: GroupState, baseline_gen: int | None = None) -> bool:
        """The active members are stable in one generation (newer than `baseline_gen`
        when given); with silent members, every partition has one live owner too."""
        active = self.fleet.active()
        silent = [m.name for m in active if m.launch.client == "java"]
        names = [m.name for m in active]
        if not verdict.stable_now(state, names, baseline_gen, silent):
            return False
        if not silent:
            return True
        # Members that report no generation are settled when every partition has one
        # live owner again (a generation newer than the baseline cannot be seen on them)
        # and, on the consumer protocol, none is left without partitions while there
        # are enough for all (it is still reconciling).
        expected = self.plan.expected_partitions(names)
        if check_complete_ownership(state, now_ms(), expected):
            return False
        return not check_idle_members(state, names, len(expected), reconciling=set())

    def check_stable(self, state: GroupState) -> None:
        """The settled group owns every partition, in one generation or (consumer
        protocol) with nobody idle."""
        t = now_ms()
        names = [m.name for m in self.fleet.active()]
        expected = self.plan.expected_partitions(names)
        for v in check_complete_ownership(state, t, expected):
            self.violation(
                "complete-ownership", v.message, t, list(v.members), f"{v.topic}-{v.partition}"
            )
        silent = self._silent()
        if self.plan.consumer_timings() is None:
            for v in check_single_generation(state, t):
                self.violation("single-generation", v.message, t, list(v.members))
            self.journal.held("single-generation")
        else:
            # Consumer protocol: members carry their own epochs, not one generation;
            # the group's meaning of "balanced" is that nobody is idle unless reconciling.
            for v in check_idle_members(state, names, len(expected)):
                self.violation("no-idle-member", v.message, t, list(v.members))
            self.journal.held("no-idle-member")
            for v in check_single_generation(state, t):
                if not set(v.members) & silent:
                    self.violation("single-generation", v.message, t, list(v.members))
        self.journal.held("complete-ownership")

    def check_exclusive(self, state: GroupState) -> None:
        """No partition had two owners at once, over the whole history (bar what the run
        excuses); on the consumer protocol, its handover rules too."""
        excused = excused_by(self.excused)
        if self.plan.consumer_timings() is not None:
            self._check_handovers(state, excused)
        for v in check_exclusive_ownership(state, excused):
            self.violation_found(v)
        self.journal.held("exclusive-ownership")

    def _check_handovers(self, state: GroupState, excused: Callable[[str, int], bool]) -> None:
        """The consumer protocol's ownership rules, over the whole history: a partition
        changes owner only at a newer epoch, and only once its owner gave it up."""
        found = check_epoch_order(state, self._silent()) + check_revoked_before_assigned(
            state, excused
        )
        for v in found:
            self.violation_found(v)
        self.journal.held("single-owner-per-epoch")
        self.journal.held("revoked-before-assigned")

    def check_group_type(self, admin: ChaosAdmin, want: str, report: StepReport) -> None:
        """The broker converted the group (or kept it) as the step expects."""
        have = admin.group_type(self.plan.group)
        report.details["group_type"] = have
        if have != want:
            self.violation(
                "expectation",
                f"the broker lists the group as {have or 'unknown'}, expected {want}",
            )
        self.journal.held("expectation")

    # -- a step -------------------------------------------------------------------------
    def step_facts(
        self,
        report: StepReport,
        state: GroupState,
        events: Sequence[Event],
        history: Sequence[Event],
        baseline_gen: int,
        outcome: ActionOutcome,
    ) -> verdict.StepFacts:
        """What the step did (verdict.step_facts), written into its report."""
        facts = verdict.step_facts(
            state,
            events,
            action_ms=report.action_ms,
            end_ms=report.settled_ms or now_ms(),
            baseline_generation=baseline_gen,
            acted_on=outcome.members,
            history=history,
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

    def check_expectations(self, step: Step, facts: verdict.StepFacts, report: StepReport) -> None:
        for failure in verdict.expectation_failures(step.expect, facts, report.settle_ms):
            self.violation("expectation", failure.message, members=list(failure.members))
        if step.expect.to_dict():
            self.journal.held("expectation")

    # -- the end ------------------------------------------------------------------------
    def final_checks(
        self, state: GroupState, producer: NumberedProducer | None, records_judge: bool = True
    ) -> None:
        """Once the members stopped: every produced record consumed (at-least-once), the
        records' totals, ownership over the whole run, the commits in time order."""
        produced = producer.produced() if producer is not None else []
        coverage = checks.consumed_coverage(self.batches)
        missing = checks.missing_records(produced, coverage)
        dups = checks.duplicate_count(self.batches)
        self.journal.records = {
            "produced": len(produced),
            "produce_failed": producer.failed if producer is not None else 0,
            "consumed": sum(b - a + 1 for _t, _p, a, b in self.batches),
            "missing": len(missing),
            "duplicates": dups,
        }
        if not records_judge:
            pass  # the wire judges at-least-once (app members, kgctl/chaos/app_checks.py)
        elif missing:
            t, p, o = missing[0]
            self.violation(
                "at-least-once",
                f"{len(missing)} produced record(s) never consumed, first {t}-{p}@{o}",
                partition=f"{t}-{p}",
                step="end",
            )
        elif produced:
            self.journal.held("at-least-once")
        self.check_exclusive(state)
        self._check_commits()

    def _check_commits(self) -> None:
        for rule, message, ts, member, where in checks.commit_violations(self.commit_log):
            self.violation(rule, message, ts, [member], where, step=self.step_at(ts))
        self.journal.held("commits-monotonic")
        self.journal.held("commit-not-ahead")

    def all_consumed(self, producer: NumberedProducer) -> Callable[[], bool]:
        """A condition to wait for: every record `producer` produced so far was consumed."""
        produced = producer.produced()

        def covered() -> bool:
            return not checks.missing_records(produced, checks.consumed_coverage(self.batches))

        return covered
