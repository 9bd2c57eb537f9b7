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


KEYS_HINT = "up/down choose a group  enter: kgctl watch it  q quit"


def table_order(rows: Mapping[str, GroupRow], now_ms: int) -> list[str]:
    """The groups as the table lists them: most churn first."""
    return [t.group for t in by_churn((r.tally for r in rows.values()), now_ms)]


def move_cursor(order: list[str], selected: str | None, key: str) -> str | None:
    """The group chosen after `key` ("up", "down"), of the groups in the table's `order`:
    the choice follows its group as the order changes; the first key chooses the top."""
    if not order:
        return None
    if selected not in order:
        return order[0] if key in ("up", "down") else None
    i = order.index(selected)
    if key == "down":
        i = min(i + 1, len(order) - 1)
    elif key == "up":
        i = max(i - 1, 0)
    return order[i]


def monitor_table(
    rows: Mapping[str, GroupRow],
    health: Health,
    now_ms: int,
    height: int | None = None,
    selected: str | None = None,
    keys: bool = False,
) -> Group:
    """Every group with its state, protocol, members, rebalances in the last 5 minutes and
    hour, the last trigger and the longest wait; most churn first, cut to `height` lines
    (the chosen group kept on screen); with `keys`, the keys' hint at the bottom."""
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
    room = len(ordered) if height is None else max(height - 3 - (1 if keys else 0), 1)
    chosen = next((i for i, t in enumerate(ordered) if t.group == selected), 0)
    first = max(0, chosen - room + 1)  # scrolled just enough to show the chosen group
    shown = ordered[first : first + room]
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
            style="reverse" if t.group == selected else None,
        )
    status = Text(status_line(health, len(rows), len(ordered) - len(shown)))
    if keys:
        return Group(status, table, Text(KEYS_HINT, style="dim"))
    return Group(status, table)


def status_line(health: Health, groups: int, hidden: int = 0) -> str:
    """The monitor's health in one line, above the table."""
    parts = [f"{groups} groups"]
    if hidden:
        parts.append(f"{hidden} not shown")
    if not health.reachable:
        parts.append("cluster UNREACHABLE, retrying")
    else:  # not known to be reachable before the first round answered
        parts.append("cluster reachable" if health.polls else "connecting")
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
