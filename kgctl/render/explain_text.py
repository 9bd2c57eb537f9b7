"""Pure rich view of an `Explanation`: one short paragraph per rebalance, newest first,
each line naming its evidence (`kgctl explain`)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kgctl.model.diagnosis import INFERRED, MEASURED_LAG, Cost, Diagnosis
from kgctl.model.explanation import Explanation
from kgctl.model.timeline import plural
from kgctl.render.group_view import fmt_clock, fmt_ms


def _line(label: str, body: str, style: str = "") -> tuple[Text, Text]:
    return Text(label, style="dim"), Text(body, style=style)


def _began(d: Diagnosis) -> str:
    """How the start is known: said (began), seen by a poll (began by: then or before),
    or only when the broker stored the generation (stored)."""
    if not d.timed:
        return "  stored "
    return "  began by " if d.start_bound else "  began "


def render_diagnosis(d: Diagnosis, superseded: bool = False) -> RenderableType:
    """One rebalance: when, trigger (and how we know), critical path, cost, advice
    (`superseded`: a newer rebalance began before this one was stable)."""
    if not d.timed:
        took = "? (when it began is not known)"
    elif d.duration_ms is not None:
        # (began at the poll that saw it, or before: at least this long)
        took = ("≥" if d.start_bound else "") + fmt_ms(d.duration_ms)
    else:
        took = (
            "- (the next rebalance began before it was stable)" if superseded else "not stable yet"
        )
    head = Text.assemble(
        (d.label, "bold"),
        (_began(d), "dim"),
        fmt_clock(d.start_ms),
        ("  took ", "dim"),
        took,
        ("  trigger ", "dim"),
        (d.trigger.confidence, "yellow" if d.trigger.confidence == INFERRED else "green"),
    )
    lines: list[tuple[Text, Text]] = []
    t = d.trigger
    lines.append(_line("trigger", t.text(), "bold"))
    lines.append(_line("evidence", t.evidence))
    for other in d.also:
        lines.append(_line("also", f"{other.text()} ({other.confidence}: {other.evidence})"))
    for w in d.critical_path:
        lines.append(_line("waited", w.text(), "magenta"))
    if d.costs:
        cost = ", ".join(
            f"{c.member} {'≥' if c.at_least else ''}{fmt_ms(c.unassigned_ms)} without partitions"
            + _missed(c)
            for c in d.costs
        )
        if any(c.at_least for c in d.costs):
            cost += (
                " (≥: the protocol's time, from the wire; the application's callbacks ran"
                " before and after it)"
            )
        lines.append(_line("cost", cost))
    unknown = d.partitions_moved is None or d.partitions_revoked is None
    if d.partitions_revoked or d.partitions_moved or unknown:
        moved = "?" if d.partitions_moved is None else str(d.partitions_moved)
        revoked = "?" if d.partitions_revoked is None else str(d.partitions_revoked)
        if d.revoked_at_least:
            revoked = f"≥{revoked}"
        said = f"{moved} partition{'' if d.partitions_moved == 1 else 's'} moved, {revoked} revoked"
        if unknown:
            said += " (?: the sources do not say who owned what before, or how a member rebalances)"
        if d.revoked_at_least:
            said += (
                " (≥: no source showed the eager members' JoinGroups; one the broker "
                "answered with the same generation gives partitions back, revoked again)"
            )
        lines.append(_line("moved", said))
    for a in d.advice:
        lines.append(_line("advice", f"{a.shown()}: {a.text}", "cyan"))
    for n in d.notes:
        lines.append(_line("note", n, "dim"))
    # A label column and a body that wraps under itself: each paragraph fits a terminal.
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, body in lines:
        grid.add_row(label, body)
    return Group(head, Padding(grid, (0, 0, 1, 2)))


def render_explanation(x: Explanation) -> RenderableType:
    health_style = "green" if x.healthy else "red"
    head = Text.assemble(
        ("group ", "dim"),
        (x.group, "bold"),
        ("  ", ""),
        ("healthy" if x.healthy else "unhealthy", health_style),
        (f": {x.health}", ""),
    )
    parts: list[RenderableType] = [head]
    shown = len(x.generations)
    more = f" (of {x.total} known)" if x.total > shown else ""
    parts.append(Text(f"sources: {'; '.join(x.sources) or 'none'}", style="dim"))
    parts.append(Text(f"{plural(shown, 'rebalance')}, newest first{more}\n"))
    parts += [render_diagnosis(d, superseded=i > 0) for i, d in enumerate(x.generations)]
    for taken in x.replaced:
        parts.append(Text(f"replaced: {taken.text()}", style="yellow"))
    for r in x.restarts:
        parts.append(Text(f"restart: {r.text()}", style="green" if not r.rebalanced else ""))
    for n in x.notes:
        parts.append(Text(f"note: {n}", style="dim"))
    return Group(*parts)


def _missed(c: Cost) -> str:
    """The records a member did not consume meanwhile, and how that is known."""
    if not c.records_missed:
        return ""
    records = plural(c.records_missed, "record")
    if c.records_basis == MEASURED_LAG:
        return f" (its partitions' lag grew by {records}, measured)"
    return f" (~{records} not consumed, estimated from its rate before)"
