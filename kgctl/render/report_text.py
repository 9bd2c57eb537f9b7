"""Pure rich views of a `Report`: the summary table `kgctl report` prints."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from kgctl.model.diagnosis import INFERRED
from kgctl.model.reasons import cause_text as _cause_words
from kgctl.render.explain_text import render_diagnosis
from kgctl.render.group_view import fmt_clock, fmt_ms
from kgctl.render.layout import Packed, Wrapped
from kgctl.report import Rebalance, Report


def cause_text(r: Rebalance) -> str:
    """The rebalance's trigger and critical path in short form (its diagnosis), else the
    cause the members' words name."""
    d = r.diagnosis
    if d is not None and d.trigger.cause_known:
        return d.short()
    text = _cause_words(r.cause_name)
    return text + (" (guess)" if r.cause_guess else "")


def is_guess(r: Rebalance) -> bool:
    d = r.diagnosis
    if d is not None and d.trigger.cause_known:
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


def error_codes_text(r: Rebalance) -> str:
    """The errors by their code alone, counted over the requests that met them
    (`UNKNOWN_MEMBER_ID ×4`): a table cell's worth; the JSON and the page name each
    event type too."""
    counts: dict[str, int] = {}
    for e in r.errors:
        code = e.what.split(" ", 1)[-1]
        counts[code] = counts.get(code, 0) + e.count
    return ", ".join(f"{c} ×{n}" if n > 1 else c for c, n in counts.items()) or "-"


WIDE = 120  # columns from which the table has room for milliseconds and join/sync


class RebalanceTable:
    """One row per rebalance, its columns chosen for the width: below 120 columns the
    start is to the second, join/sync is left out (the paragraphs below have both) and
    the errors are counted, their codes named under the table, so that the cause and
    who went without partitions keep room to be read."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.max_width >= WIDE
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
        # Times, counts and generations are read whole or not at all: they never wrap or
        # get cut; the cause, who went without partitions and the errors wrap in the rest.
        columns: list[tuple[str, dict[str, Any]]] = [
            ("#", {"justify": "right", "no_wrap": True}),
            ("gen", {"justify": "right", "no_wrap": True}),
            ("started", {"no_wrap": True}),
            ("cause", {"overflow": "fold", "ratio": 3}),
            ("took", {"justify": "right", "no_wrap": True}),
            ("without\npartitions", {"overflow": "fold", "ratio": 2}),
            ("moved", {"justify": "right", "no_wrap": True}),
            ("errors", {"overflow": "fold", "ratio": 2} if wide else {"no_wrap": True}),
        ]
        if wide:
            columns.insert(5, ("join/sync", {"justify": "right", "no_wrap": True}))
        for name, kw in columns:
            table.add_column(name, **kw)
        for r in self.report.rebalances:
            gen = f"{'+' if r.inferred else ''}{r.generation}"
            if r.previous_generation is not None:
                gen = f"{r.previous_generation}→{gen}"
            started = fmt_clock(r.start_ms)
            row: list[RenderableType] = [
                str(r.index),
                gen,
                started if wide else started.split(".")[0],
                Text(cause_text(r), style="yellow" if is_guess(r) else ""),
                took_text(r, self.report),
                unassigned_text(r),
                str(len(r.moves)),
                Text(
                    error_codes_text(r) if wide else str(sum(e.count for e in r.errors) or "-"),
                    style="red" if r.errors else "dim",
                ),
            ]
            if wide:
                row.insert(5, f"{fmt_ms(r.join_ms)}/{fmt_ms(r.sync_phase_ms)}")
            table.add_row(*row)
        yield from console.render(table, options)
        if not wide and any(r.errors for r in self.report.rebalances):
            # Error codes do not fit a narrow column whole: they follow the table.
            said = [
                Text.assemble((f"#{r.index} ", "dim"), (error_codes_text(r), "red"))
                for r in self.report.rebalances
                if r.errors
            ]
            yield Packed(Text("errors: "), said, sep="; ")


def render_report(report: Report) -> RenderableType:
    """Header line, one row per rebalance, then the invariants verdict."""
    head = Packed(
        Text(""),
        [
            Text.assemble(("group ", "dim"), (report.group or "?", "bold")),
            Text.assemble(("from ", "dim"), fmt_clock(report.first_ms) if report.events else "-"),
            Text.assemble(("for ", "dim"), fmt_ms(report.last_ms - report.first_ms)),
            Text.assemble(("events ", "dim"), str(len(report.events))),
            Text.assemble(("members ", "dim"), str(len(report.members))),
            Text.assemble(("rebalances ", "dim"), str(len(report.rebalances))),
        ],
    )
    table = RebalanceTable(report)
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
    return Wrapped(Group(head, table, causes, *lines))


def _checks_passed(report: Report) -> str:
    """Say which rules were checked how often: the bare count read as a number of rules
    next to chaos's own verdict, which names other rules."""
    per_rule: dict[str, int] = {}
    for c in report.checks:
        per_rule[c.rule] = per_rule.get(c.rule, 0) + 1
    said = ", ".join(f"{rule} ×{n}" if n > 1 else rule for rule, n in per_rule.items())
    return f"all {len(report.checks)} checks passed ({said})" if said else "no check ran"
