"""The protocol showdown: one scenario run once per group protocol, compared step by step.

A scenario with `compare_protocols: true` (the built-in `protocol-showdown`) is run on the
classic protocol, then on the consumer protocol (KIP-848), each run with its own group and
topics on the same cluster and the same fleet of kgctl and Java members. `compare` (pure)
reads the two journals into rows: for each step, the time from the trigger until the
group was complete and stable again, the time members went without partitions (summed
over members, and the longest), and the partitions moved. `kgctl chaos run
protocol-showdown` prints them side by side; `bench/showdown.py` writes the raw JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgctl.chaos.journal import Journal, StepReport
from kgctl.chaos.runner import Display, RunOptions, run_scenario
from kgctl.chaos.scenario import PROTOCOLS, Scenario, with_protocol
from kgctl.model.events import Event
from kgctl.settings import ClientSettings


@dataclass(frozen=True)
class Measure:
    """One step of one run, as the showdown compares it."""

    status: str
    complete_ms: int | None  # trigger → every partition owned and the group stable
    without_ms: int  # the time members went without partitions, summed over members
    longest_without_ms: int  # the longest any one member went without
    members_without: int  # how many members went without partitions at all
    moved: int  # partitions that went from one member to another
    new: int  # partitions that got their first owner (new partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "complete_ms": self.complete_ms,
            "without_ms": self.without_ms,
            "longest_without_ms": self.longest_without_ms,
            "members_without": self.members_without,
            "moved": self.moved,
            "new": self.new,
        }


@dataclass(frozen=True)
class ShowdownRow:
    """One step, measured on each protocol."""

    step: str
    action: str
    by_protocol: dict[str, Measure] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "action": self.action,
            **{p: m.to_dict() for p, m in self.by_protocol.items()},
        }


def measure(step: StepReport) -> Measure:
    """What the showdown compares of one step report."""
    without = [ms for ms in step.unassigned_ms.values() if ms > 0]
    return Measure(
        status=step.status,
        complete_ms=step.settle_ms,
        without_ms=sum(without),
        longest_without_ms=max(without, default=0),
        members_without=len(without),
        moved=sum(1 for mv in step.moved if mv.get("from")),
        new=sum(1 for mv in step.moved if not mv.get("from")),
    )


def compare(journals: dict[str, Journal]) -> list[ShowdownRow]:
    """The steps of runs of one scenario, side by side (by position: the runs share their
    steps); a step a run never reached is left out of that run's column."""
    rows: list[ShowdownRow] = []
    longest = max((len(j.steps) for j in journals.values()), default=0)
    for i in range(longest):
        first = next(j.steps[i] for j in journals.values() if len(j.steps) > i)
        by = {p: measure(j.steps[i]) for p, j in journals.items() if len(j.steps) > i}
        rows.append(ShowdownRow(first.name, first.action, by))
    return rows


def runs(sc: Scenario) -> dict[str, Scenario]:
    """The scenario once per protocol it runs on, in the order of PROTOCOLS."""
    return {p: with_protocol(sc, p) for p in PROTOCOLS if p in sc.protocols}


def exit_status(journals: dict[str, Journal]) -> int:
    """The worst of the runs' exit statuses (0 when every run passed)."""
    return max((int(j.exit_status) for j in journals.values()), default=0)


def run_showdown(
    sc: Scenario,
    settings: ClientSettings,
    *,
    options: RunOptions | None = None,
    display: Display | None = None,
    record: str | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> dict[str, Journal]:
    """Run `sc` once per protocol, one after the other (never at once: they would share
    the machine), and return each run's journal by protocol. A run that fails does not
    stop the next: both columns are the measurement. `record`: a path prefix, each run
    writing `<record>.<protocol>.jsonl`."""
    journals: dict[str, Journal] = {}
    for protocol, one in runs(sc).items():
        path = f"{record}.{protocol}.jsonl" if record else None
        journals[protocol] = run_scenario(
            one, settings, options=options, display=display, record=path, on_event=on_event
        )
        if journals[protocol].verdict == "interrupted":
            break
    return journals
