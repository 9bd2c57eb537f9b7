"""Pure rich views of a `Report`: the summary table `kgctl report` prints."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kgctl.model.diagnosis import INFERRED
from kgctl.model.reasons import Cause
from kgctl.model.reasons import cause_text as _cause_words
from kgctl.render.explain_text import render_diagnosis
from kgctl.render.group_view import fmt_clock, fmt_ms
from kgctl.report import Rebalance, Report


def cause_text(r: Rebalance) -> str:
    """The rebalance's trigger and critical path in short form (its diagnosis), else the
    cause the members' words name."""
    d = r.diagnosis
    if d is not None and d.trigger.cause != Cause.UNKNOWN.value:
        return d.short()
    text = _cause_words(r.cause)
    return text + (" (guess)" if r.cause_guess else "")


def is_guess(r: Rebalance) -> bool:
    d = r.diagnosis
    if d is not None and d.trigger.cause != Cause.UNKNOWN.value:
        return d.trigger.confidence == INFERRED
    return r.cause_guess


def _superseded(r: Rebalance, report: Report) -> bool:
    return r.duration_ms is None and r is not report.rebalances[-1]


def took_text(r: Rebalance, report: Report) -> str:
    """How long the rebalance took; one that never settled says whether a newer one
    began first (the run went on) or the recording ended first."""
    if r.duration_ms is not None:
        return fmt_ms(r.duration_ms)
    return "superseded" if _superseded(r, report) else "not stable"


def unassigned_text(r: Rebalance) -> str:
    return ", ".join(f"{m} {fmt_ms(ms)}" for m, ms in sorted(r.unassigned_ms.items())) or "-"


def errors_text(r: Rebalance) -> str:
    return ", ".join(f"{e.what}" + (f" ×{e.count}" if e.count > 1 else "") for e in r.errors) or "-"


def render_report(report: Report) -> RenderableType:
    """Header line, one row per rebalance, then the invariants verdict."""
    span = fmt_ms(report.last_ms - report.first_ms)
    head = Text.assemble(
        ("group ", "dim"),
        (report.group or "?", "bold"),
        ("  from ", "dim"),
        fmt_clock(report.first_ms) if report.events else "-",
        ("  for ", "dim"),
        span,
        ("  events ", "dim"),
        str(len(report.events)),
        ("  members ", "dim"),
        str(len(report.members)),
        ("  rebalances ", "dim"),
        str(len(report.rebalances)),
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for name, kw in (
        ("#", {"justify": "right"}),
        ("gen", {"justify": "right"}),
        ("started", {}),
        ("cause", {}),
        ("took", {"justify": "right"}),
        ("join/sync", {"justify": "right"}),
        ("without partitions", {}),
        ("moved", {"justify": "right"}),
        ("errors", {}),
    ):
        table.add_column(name, **kw)  # type: ignore[arg-type]
    for r in report.rebalances:
        gen = f"{'+' if r.inferred else ''}{r.generation}"
        if r.previous_generation is not None:
            gen = f"{r.previous_generation}→{gen}"
        took = took_text(r, report)
        table.add_row(
            str(r.index),
            gen,
            fmt_clock(r.start_ms),
            Text(cause_text(r), style="yellow" if is_guess(r) else ""),
            took,
            f"{fmt_ms(r.join_ms)}/{fmt_ms(r.sync_phase_ms)}",
            unassigned_text(r),
            str(len(r.moves)),
            Text(errors_text(r), style="red" if r.errors else "dim"),
        )
    # Each rebalance explained: trigger and evidence, what it waited for, cost, advice.
    why: list[RenderableType] = [Text("why, rebalance by rebalance:", style="bold")]
    for r in report.rebalances:
        if r.diagnosis is not None:
            why.append(Text(f"#{r.index}", style="dim"))
            why.append(render_diagnosis(r.diagnosis, superseded=_superseded(r, report)))
        elif r.evidence:
            why.append(Text(f"#{r.index} {r.evidence}", style="dim"))
    causes = Group(*why) if report.rebalances else Text("")
    if report.violations:
        verdict = Text(f"invariants: {len(report.violations)} violation(s)", style="bold red")
        lines = [verdict] + [
            Text(f"  {v.rule}: {v.message}", style="red") for v in report.violations
        ]
    else:
        lines = [Text(f"invariants: {_checks_passed(report)}", style="green")]
    if report.skipped:
        lines.append(Text(f"skipped {len(report.skipped)} line(s) that were not events", "dim"))
    return Group(head, table, causes, *lines)


def _checks_passed(report: Report) -> str:
    """Say which rules were checked how often: the bare count read as a number of rules
    next to chaos's own verdict, which names other rules."""
    per_rule: dict[str, int] = {}
    for c in report.checks:
        per_rule[c.rule] = per_rule.get(c.rule, 0) + 1
    said = ", ".join(f"{rule} ×{n}" if n > 1 else rule for rule, n in per_rule.items())
    return f"all {len(report.checks)} checks passed ({said})" if said else "no check ran"
