"""`kgctl monitor`'s views, pure: the groups table (sorted by churn) and one text line per
diagnosed rebalance. The monitor's rows and the clock in, rich renderables and strings out."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kgctl.model.reasons import cause_text
from kgctl.monitor.accounting import FIVE_MIN_MS, HOUR_MS, Rebalance, by_churn, within
from kgctl.monitor.service import GroupRow, Health

STATE_STYLES = {"Stable": "green", "Empty": "dim"}


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}s" if ms else "-"


def monitor_table(
    rows: Mapping[str, GroupRow], health: Health, now_ms: int, height: int | None = None
) -> Group:
    """Every group with its state, protocol, members, rebalances in the last 5 minutes and
    hour, the last trigger and the longest wait; most churn first, cut to `height` lines."""
    table = Table(expand=False, pad_edge=False, box=None, header_style="bold")
    for name, justify in (
        ("group", "left"),
        ("state", "left"),
        ("protocol", "left"),
        ("members", "right"),
        ("gen", "right"),
        ("5m", "right"),
        ("1h", "right"),
        ("total", "right"),
        ("last trigger", "left"),
        ("longest wait", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    by_group = {r.tally.group: r for r in rows.values()}
    ordered = by_churn((r.tally for r in rows.values()), now_ms)
    shown = ordered if height is None else ordered[: max(height - 3, 1)]
    for t in shown:
        r = by_group[t.group]
        last = t.last
        table.add_row(
            r.group,
            Text(r.state, style=STATE_STYLES.get(r.state, "yellow")),
            r.protocol,
            str(r.members),
            str(r.generation) if r.generation >= 0 else "-",
            str(within(t, now_ms, FIVE_MIN_MS)),
            str(within(t, now_ms, HOUR_MS)),
            str(t.total),
            (last.trigger + ("" if last.confidence == "exact" else " (inferred)"))
            if last is not None
            else "-",
            _seconds(t.longest_wait_ms),
        )
    return Group(Text(status_line(health, len(rows), len(ordered) - len(shown))), table)


def status_line(health: Health, groups: int, hidden: int = 0) -> str:
    """The monitor's health in one line, above the table."""
    parts = [f"{groups} groups"]
    if hidden:
        parts.append(f"{hidden} not shown")
    parts.append("cluster reachable" if health.reachable else "cluster UNREACHABLE, retrying")
    if health.offsets_readable is False:
        parts.append("__consumer_offsets not read: descriptions only")
    elif not health.offsets_caught_up:
        parts.append("reading __consumer_offsets history")
    parts.append(f"{health.records_read} records read, {health.polls} polls")
    return " · ".join(parts)


def rebalance_line(r: Rebalance) -> str:
    """One diagnosed rebalance, for a log or a pipe."""
    took = f"{r.duration_ms / 1000:.1f}s" if r.duration_ms is not None else "start not seen"
    waits = "".join(f"; waited {w.ms / 1000:.1f}s for {w.member} ({w.why})" for w in r.waits)
    inferred = "" if r.confidence == "exact" else " (inferred)"
    return (
        f"{r.group} generation {r.generation} ({r.protocol}): {cause_text(r.cause)}{inferred}"
        f", {r.trigger}, took {took}{waits}"
    )
