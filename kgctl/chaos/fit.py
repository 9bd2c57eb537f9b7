"""A scenario's timings fitted to the cluster it runs on (pure).

The built-in scenarios are written with short session timeouts so that a rebalance
found by a session timeout takes seconds. A stock cluster refuses those
(`group.min.session.timeout.ms` is 6 s by default): every member would be answered
INVALID_SESSION_TIMEOUT. Before the fleet starts, the runner reads the cluster's bounds
and `fit_scenario` moves the session timeout into them, keeps the heartbeat at the same
share of the session, and stretches each step's `max_seconds` in the same proportion,
since what a step waits for (a session to expire, a heartbeat to carry the rebalance)
scales with them. Every change is an `Adjustment` the live view and the journal show.
Options given on the command line (`--session-timeout`, ...) win over the scenario and
are checked against the bounds instead of moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kgctl.chaos.scenario import Expect, Fleet, Scenario, Step
from kgctl.errors import UsageError
from kgctl.model.bounds import GroupBounds


@dataclass(frozen=True)
class TimingOverrides:
    """Timings given on the command line; None keeps the scenario's."""

    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    max_poll_interval_ms: int | None = None


@dataclass(frozen=True)
class Adjustment:
    """One timing the run uses that differs from the scenario's, and why."""

    setting: str  # session | heartbeat | max-poll | step 'NAME' max_seconds | setup wait
    before: float
    after: float
    unit: str  # ms | s
    why: str

    def describe(self) -> str:
        """`session 3 s → 6 s: the cluster's minimum`."""
        after = _fmt(self.after, self.unit)
        if self.before == 0:  # an addition, not a change (the setup's wait)
            return f"{self.setting} +{after}: {self.why}"
        return f"{self.setting} {_fmt(self.before, self.unit)} → {after}: {self.why}"

    def to_dict(self) -> dict[str, object]:
        return {
            "setting": self.setting,
            "before": self.before,
            "after": self.after,
            "unit": self.unit,
            "why": self.why,
            "text": self.describe(),
        }


@dataclass(frozen=True)
class FittedScenario:
    """The scenario as it will run, the bounds it was fitted to, and what changed."""

    scenario: Scenario
    bounds: GroupBounds
    adjustments: list[Adjustment] = field(default_factory=list)
    first_join_delay_ms: int = 0  # the cluster holds an empty group's first join this long


def _fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value / 1000:g} s" if value >= 1000 and value % 100 == 0 else f"{value:g} ms"
    return f"{value:g} s"


def fit_scenario(
    scenario: Scenario, bounds: GroupBounds, overrides: TimingOverrides | None = None
) -> FittedScenario:
    """The scenario with timings the cluster accepts; UsageError for an override it refuses."""
    o = overrides or TimingOverrides()
    f = scenario.fleet
    changes: list[Adjustment] = []
    session = _session(f, bounds, o, changes)
    heartbeat = _heartbeat(f, session, o, changes)
    max_poll = f.max_poll_interval_ms
    if o.max_poll_interval_ms is not None:
        if o.max_poll_interval_ms <= 0:
            raise UsageError(
                f"--max-poll-interval {o.max_poll_interval_ms}: must be a positive number of ms"
            )
        if o.max_poll_interval_ms != max_poll:
            changes.append(
                Adjustment(
                    "max-poll", max_poll, o.max_poll_interval_ms, "ms", "--max-poll-interval"
                )
            )
        max_poll = o.max_poll_interval_ms
    factor = session / f.session_timeout_ms
    if "consumer" in f.protocols:
        # Consumer-protocol members have the broker's session, not the fleet's: limits
        # written for the fleet's session stretch to the longer of the two.
        broker = bounds.configs["group.consumer.session.timeout.ms"]
        factor = max(session, broker) / f.session_timeout_ms
    steps = [_scaled_step(s, factor, changes) for s in scenario.steps]
    settle_timeout = scenario.settle_timeout_s
    if settle_timeout is not None and factor != 1:
        scaled = round(settle_timeout * factor, 1)
        changes.append(
            Adjustment("settle_timeout_s", settle_timeout, scaled, "s", _proportion(factor))
        )
        settle_timeout = scaled
    delay = bounds.initial_rebalance_delay_ms
    if delay > 0:
        changes.append(
            Adjustment(
                "setup wait",
                0,
                delay,
                "ms",
                "group.initial.rebalance.delay.ms holds the first join of an empty group",
            )
        )
    # A member's own session timeout keeps its proportion to the fleet's.
    members = [
        replace(m, session_timeout_ms=round(m.session_timeout_ms * factor))
        if m.session_timeout_ms is not None and factor != 1
        else m
        for m in f.members
    ]
    fleet = replace(
        f,
        members=members,
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        max_poll_interval_ms=max_poll,
    )
    fitted = replace(scenario, fleet=fleet, steps=steps, settle_timeout_s=settle_timeout)
    return FittedScenario(fitted, bounds, changes, first_join_delay_ms=delay)


def _session(f: Fleet, b: GroupBounds, o: TimingOverrides, changes: list[Adjustment]) -> int:
    wanted = f.session_timeout_ms
    if o.session_timeout_ms is not None:
        if not b.min_session_ms <= o.session_timeout_ms <= b.max_session_ms:
            raise UsageError(
                f"--session-timeout {o.session_timeout_ms}: outside the cluster's "
                f"{b.session_range()} ({b.origin()}); use a value in that range"
            )
        if o.session_timeout_ms != wanted:
            changes.append(
                Adjustment("session", wanted, o.session_timeout_ms, "ms", "--session-timeout")
            )
        return o.session_timeout_ms
    if wanted < b.min_session_ms:
        why = f"the cluster's minimum (group.min.session.timeout.ms, {b.origin()})"
        changes.append(Adjustment("session", wanted, b.min_session_ms, "ms", why))
        return b.min_session_ms
    if wanted > b.max_session_ms:
        why = f"the cluster's maximum (group.max.session.timeout.ms, {b.origin()})"
        changes.append(Adjustment("session", wanted, b.max_session_ms, "ms", why))
        return b.max_session_ms
    return wanted


def _heartbeat(f: Fleet, session: int, o: TimingOverrides, changes: list[Adjustment]) -> int:
    before = f.heartbeat_interval_ms
    if o.heartbeat_interval_ms is not None:
        hb = o.heartbeat_interval_ms
        # The same rule as a scenario file's: a heartbeat must fit three times in a
        # session, or one late heartbeat costs the member its place in the group.
        if hb <= 0 or hb * 3 > session:
            raise UsageError(
                f"--heartbeat-interval {hb}: must be positive and at most a third of the "
                f"session timeout ({session} ms); use at most {session // 3}"
            )
        if hb != before:
            changes.append(Adjustment("heartbeat", before, hb, "ms", "--heartbeat-interval"))
        return hb
    if session == f.session_timeout_ms:
        return before
    scaled = max(1, round(before * session / f.session_timeout_ms))
    share = f"kept at the scenario's share of the session (1/{f.session_timeout_ms / before:g})"
    changes.append(Adjustment("heartbeat", before, scaled, "ms", share))
    return scaled


def _proportion(factor: float) -> str:
    return f"in proportion to the session timeout (×{factor:g})"


def _scaled_step(step: Step, factor: float, changes: list[Adjustment]) -> Step:
    limit = step.expect.max_seconds
    if limit is None or factor == 1:
        return step
    scaled = round(limit * factor, 1)
    changes.append(
        Adjustment(f"step '{step.name}' max_seconds", limit, scaled, "s", _proportion(factor))
    )
    expect: Expect = replace(step.expect, max_seconds=scaled)
    return replace(step, expect=expect)
