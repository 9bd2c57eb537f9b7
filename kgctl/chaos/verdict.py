"""The chaos judge: a step's events in, the step's verdict out. Pure: no I/O, no clock.

The run acts and waits (kgctl/chaos/runner.py) and its judge (judge.py) records;
everything decided about what happened goes through here: whether the group is stable
now (`stable_now`), whether it stayed stable for the quiet time (`QuietTimer`), what a
step did to the group (`step_facts`: generations, rejoin reasons, errors, revocations,
fences, moves, time without partitions, all from the model's timeline queries), which
expectations failed (`expectation_failures`) and the step's status. `recorded_steps`
judges a recording the same way, so a recorded run can be judged again without Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgctl.chaos.scenario import Expect
from kgctl.model.diagnosis import Diagnosis, diagnose
from kgctl.model.events import Event
from kgctl.model.fold import fold
from kgctl.model.state import PHASE_STABLE, GroupState
from kgctl.model.timeline import (
    counted_errors,
    generations_since,
    moves,
    unassigned_by_member,
)

# Events whose members count as touched by the step (they rejoined, lost or got partitions).
_TOUCHING = frozenset({"JoinGroupSent", "PartitionsRevoked", "PartitionsLost", "JoinCompleted"})


def stable_now(
    state: GroupState,
    active: Iterable[str],
    baseline_gen: int | None = None,
    silent: Iterable[str] = (),
) -> bool:
    """Every active member is alive, Stable, in one generation that is the group's (and,
    given `baseline_gen`, newer than it).

    `silent` members report no generation (a Java VerifiableConsumer): they only need to
    be alive and Stable; the generation is judged on the others, and not at all when
    every member is silent (the caller then judges the group by what it owns)."""
    names = list(active)
    quiet = set(silent)
    if not names:
        return False
    gens = set()
    for name in names:
        m = state.members.get(name)
        if m is None or not m.alive or m.phase != PHASE_STABLE:
            return False
        if name in quiet:
            continue
        if m.generation < 0:
            return False
        gens.add(m.generation)
    if not gens:
        return True
    if len(gens) != 1:
        return False
    gen = gens.pop()
    if gen != state.generation:
        return False
    return baseline_gen is None or gen > baseline_gen


class QuietTimer:
    """Settled means stable for `quiet_ms` without a break; the group counts as settled
    from the moment that stretch began (the latest event time then)."""

    def __init__(self, quiet_ms: int) -> None:
        self.quiet_ms = quiet_ms
        self._since_mono: float | None = None
        self._since_ts = 0

    def update(self, ok: bool, mono_ms: float, ts_ms: int) -> int | None:
        """Feed one look at the group; returns when it settled, once it has."""
        if not ok:
            self._since_mono = None
            return None
        if self._since_mono is None:
            self._since_mono, self._since_ts = mono_ms, ts_ms
        if mono_ms - self._since_mono >= self.quiet_ms:
            return self._since_ts
        return None


@dataclass
class StepFacts:
    """What one step did to the group, between its action and the group settled."""

    generations: list[int] = field(default_factory=list)
    rejoin_reasons: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, dict[str, int]] = field(default_factory=dict)
    revoked: dict[str, int] = field(default_factory=dict)
    fenced: list[str] = field(default_factory=list)
    affected: list[str] = field(default_factory=list)
    moved: list[dict[str, Any]] = field(default_factory=list)
    unassigned_ms: dict[str, int] = field(default_factory=dict)
    # The diagnosis of each new generation (kgctl/model/diagnosis/): trigger, what it
    # waited for, cost, advice.
    diagnoses: list[Diagnosis] = field(default_factory=list)

    @property
    def rebalances(self) -> int:
        return len(self.generations)

    @property
    def protocol_changes(self) -> list[str]:
        """Where the group changed protocol during the step (a mixed group's migration),
        as its diagnoses say it: `generation 5: the group became a consumer-protocol
        group: ...`."""
        return [f"{d.label}: {d.protocol_change}" for d in self.diagnoses if d.protocol_change]


def step_facts(
    state: GroupState,
    events: Sequence[Event],
    *,
    action_ms: int,
    end_ms: int,
    baseline_generation: int,
    acted_on: Iterable[str] = (),
    history: Sequence[Event] | None = None,
) -> StepFacts:
    """The facts of a step: `state` folded up to the step's end, `events` the step's own
    (from its start), the window from the action to `end_ms` (settled, or given up)."""
    facts = StepFacts(generations=generations_since(state, baseline_generation))
    reasons: dict[str, set[str]] = {}
    affected: set[str] = set(acted_on)
    # Chaos's own events are not the group's, except a member's death it saw.
    members_events = [e for e in events if e.source != "chaos" or e.type == "MemberFailed"]
    for ev in members_events:
        if ev.type == "MemberFailed" and ev.data.get("error") == "FENCED_INSTANCE_ID":
            facts.fenced.append(ev.member)
        if ev.type == "RejoinRequested":
            reasons.setdefault(str(ev.data.get("reason")), set()).add(ev.member)
        if ev.type in _TOUCHING:
            affected.add(ev.member)
        if ev.type in ("PartitionsRevoked", "PartitionsLost"):
            n = sum(len(v) for v in (ev.data.get("partitions") or {}).values())
            if n:
                facts.revoked[ev.member] = facts.revoked.get(ev.member, 0) + n
    for ev, error in counted_errors(members_events):
        per = facts.errors.setdefault(ev.member, {})
        per[error] = per.get(error, 0) + 1
    facts.rejoin_reasons = {r: sorted(ms) for r, ms in sorted(reasons.items())}
    facts.moved = [
        {"partition": mv.name, "from": list(mv.before), "to": list(mv.after)}
        for mv in moves(state, action_ms)
    ]
    for mv in facts.moved:
        affected |= set(mv["from"]) | set(mv["to"])
    facts.affected = sorted(a for a in affected if a)
    facts.unassigned_ms = unassigned_by_member(state, action_ms, end_ms, with_zero=True)
    wanted = set(facts.generations)
    # The diagnosis needs what members said before the step too (their settings, when a
    # killed one was last heard of): the run's events so far, when given.
    told = members_events if history is None else history
    facts.diagnoses = [d for d in diagnose(state, told, end_ms) if d.generation in wanted]
    return facts


def cause_line(
    description: str,
    rejoin_reasons: dict[str, list[str]],
    diagnoses: Sequence[Diagnosis] = (),
) -> str:
    """What the action did, then each new generation's trigger and critical path
    (`SIGKILL m2 → gen 3: m2: timed out (inferred); detect waited 2.8s for m2 (dead)`),
    or, without a diagnosis, why members rejoined (`→ rebalance_in_progress (m1, m3)`)."""
    known = [d for d in diagnoses if d.trigger.cause_known]
    if known:
        return f"{description} → " + "; ".join(f"gen {d.generation}: {d.short()}" for d in known)
    if not rejoin_reasons:
        return description
    said = ", ".join(f"{r} ({', '.join(ms)})" for r, ms in rejoin_reasons.items())
    return f"{description} → {said}"


@dataclass(frozen=True)
class Failure:
    """An expectation that did not hold."""

    message: str
    members: tuple[str, ...] = ()


def expectation_failures(expect: Expect, facts: StepFacts, settle_ms: int | None) -> list[Failure]:
    """The step's expectations (`expect:` in the scenario) that its facts break."""
    out: list[Failure] = []
    n = facts.rebalances
    if expect.rebalances is not None and n != expect.rebalances:
        out.append(
            Failure(
                f"expected {expect.rebalances} rebalance(s), saw {n} "
                f"(generations {facts.generations})"
            )
        )
    if expect.min_rebalances is not None and n < expect.min_rebalances:
        out.append(Failure(f"expected at least {expect.min_rebalances} rebalance(s), saw {n}"))
    if expect.max_rebalances is not None and n > expect.max_rebalances:
        out.append(Failure(f"expected at most {expect.max_rebalances} rebalance(s), saw {n}"))
    if expect.max_seconds is not None and (
        settle_ms is None or settle_ms > expect.max_seconds * 1000
    ):
        shown = "never" if settle_ms is None else f"{settle_ms / 1000:.1f}s"
        out.append(
            Failure(
                f"expected the group stable within {expect.max_seconds}s of the action, "
                f"took {shown}"
            )
        )
    for m in expect.no_revokes_for:
        if facts.revoked.get(m):
            out.append(
                Failure(
                    f"expected no revocation for {m}, it lost {facts.revoked[m]} partition(s)",
                    (m,),
                )
            )
    for m in expect.fenced:
        if m not in facts.fenced:
            out.append(Failure(f"expected {m} to be fenced (FENCED_INSTANCE_ID); it was not", (m,)))
    return out


def step_status(settled: bool, failed: bool) -> str:
    """`not settled` when the group never settled, `failed` when a rule broke, else `ok`."""
    if not settled:
        return "not settled"
    return "failed" if failed else "ok"


@dataclass(frozen=True)
class RecordedStep:
    """A step found in a recording, judged again from its events."""

    index: int
    name: str
    recorded: dict[str, Any]  # the StepFinished data the run wrote
    facts: StepFacts


def recorded_steps(events: Sequence[Event]) -> list[RecordedStep]:
    """Judge every finished step of a recorded chaos run (`kgctl chaos run --record`)
    again: fold the events in file order, as the run did, and recompute each step's
    facts over the window the run recorded."""
    out: list[RecordedStep] = []
    state: GroupState | None = None
    step_events: list[Event] | None = None
    baseline = -1
    seen: list[Event] = []
    for ev in events:
        if state is None:
            state = GroupState(group=ev.group)
        if ev.source == "chaos" and ev.type == "StepStarted":
            step_events, baseline = [], state.generation
        if ev.source == "chaos" and ev.type == "StepFinished" and step_events is not None:
            d = ev.data
            acted = next(
                (e.data.get("members") or [] for e in step_events if e.type == "ActionPerformed"),
                [],
            )
            facts = step_facts(
                state,
                step_events,
                action_ms=int(d.get("action_ms") or 0),
                end_ms=int(d.get("settled_ms") or ev.ts_ms),
                baseline_generation=baseline,
                acted_on=acted,
                history=seen,
            )
            out.append(RecordedStep(int(d.get("index", len(out))), str(d.get("name")), d, facts))
            step_events = None
        state = fold(state, ev, ev.ts_ms)
        seen.append(ev)
        if step_events is not None:
            step_events.append(ev)
    return out
