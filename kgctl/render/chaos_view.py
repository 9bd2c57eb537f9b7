"""Views of a chaos run: the live screen, plain lines, and the final text summary.

`render_chaos` is pure (journal + state + now → rich renderable): members × generations
(who owned what in each generation), the current step, the timeline of steps, and the
invariants. `ChaosDisplay` drives it: a rich Live on a terminal, else one line per chaos
event.
"""

from __future__ import annotations

import time
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kgctl.chaos.journal import Journal, StepReport
from kgctl.chaos.showdown import ShowdownRow
from kgctl.model.events import Event
from kgctl.model.state import GroupState
from kgctl.render.group_view import fmt_ms
from kgctl.render.proxy_lines import describe_wire

STATUS_STYLE = {
    "ok": "green",
    "passed": "bold green",
    "failed": "bold red",
    "not settled": "bold red",
    "running": "yellow",
    "interrupted": "bold yellow",
    "skipped": "dim",
    "setup failed": "bold red",
}


def _owned_at(state: GroupState, member: str, at_ms: int) -> str:
    parts: dict[str, list[int]] = {}
    for (topic, pid), spans in state.ownership.items():
        if any(sp.member == member and sp.covers(at_ms) for sp in spans):
            parts.setdefault(topic.rsplit(".", 1)[-1], []).append(pid)
    if not parts:
        return "-"
    return " ".join(
        f"{t}[{','.join(str(p) for p in sorted(ps))}]" for t, ps in sorted(parts.items())
    )


def generations_table(state: GroupState, now_ms: int, limit: int = 6) -> Table:
    """Rows: members; columns: the latest generations; cells: what the member owned then."""
    gens = list(state.generations)[-limit:]
    table = Table(box=box.SIMPLE_HEAD, title="members × generations", title_justify="left")
    table.add_column("member", style="bold")
    for g in gens:
        table.add_column(f"gen {g.generation}", overflow="fold")
    for key, m in sorted(state.members.items()):
        cells: list[RenderableType] = []
        for g in gens:
            # When every member had its share; else when the last one got it; else the end.
            at = g.stable_ms if g.stable_ms is not None else g.completed_ms
            if at is None:
                at = g.end_ms - 1 if g.end_ms else now_ms
            if g.end_ms is not None and at >= g.end_ms:
                at = g.end_ms - 1
            cells.append(Text(_owned_at(state, key, at)))
        style = "" if m.alive else "dim strike"
        table.add_row(Text(key, style=style), *cells)
    return table


def steps_table(journal: Journal) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="timeline", title_justify="left")
    for col in ("#", "step", "status", "cause", "gens", "stable after", "moved", "errors"):
        table.add_column(col, overflow="fold")
    for s in journal.steps:
        errors = sum(n for per in s.errors.values() for n in per.values())
        table.add_row(
            str(s.index + 1),
            s.name,
            Text(s.status, style=STATUS_STYLE.get(s.status, "")),
            s.cause,
            ",".join(str(g) for g in s.generations) or "-",
            fmt_ms(s.settle_ms),
            str(len(s.moved)),
            str(errors) if errors else "-",
        )
    return table


def invariants_text(journal: Journal) -> Text:
    text = Text("invariants: ")
    if not journal.invariants:
        text.append("none checked yet", style="dim")
    for rule, status in sorted(journal.invariants.items()):
        text.append(f"{rule} ", style="green" if status == "held" else "bold red")
        text.append("✓  " if status == "held" else "✗  ")
    return text


NO_FETCH = "members do not fetch (fleet.fetch: false): no records are read or checked"


def timings_text(journal: Journal) -> Text | None:
    """What the run changed in the scenario's timings to fit the cluster (None: nothing).

    One line per setting; the steps' `max_seconds`, all scaled by one factor, share a line.
    """
    changed = journal.cluster.get("timings") or []
    if not changed:
        return None
    text = Text("fitted to the cluster:", style="yellow")
    steps = [a for a in changed if str(a.get("setting", "")).startswith("step ")]
    for a in changed:
        if a not in steps:
            text.append(f"\n  {a.get('text')}")
    if steps:
        text.append(f"\n  each step's max_seconds: {steps[0].get('why')}")
    return text


def render_chaos(journal: Journal, state: GroupState, now_ms: int) -> RenderableType:
    """The whole live screen for one moment of a run."""
    current: StepReport | None = next((s for s in journal.steps if s.status == "running"), None)
    head = Text()
    head.append(f"kgctl chaos {journal.scenario}", style="bold")
    head.append(f"  group {journal.group}  gen {state.generation}  ")
    head.append(journal.verdict, style=STATUS_STYLE.get(journal.verdict, ""))
    if current is not None:
        head.append(
            f"\nstep {current.index + 1}: {current.name} — {current.cause or current.action}"
        )
    parts: list[RenderableType] = [head]
    if journal.setup.get("fetch") is False:
        parts.append(Text(NO_FETCH, style="yellow"))
    timings = timings_text(journal)
    if timings is not None:
        parts.append(timings)
    parts += [generations_table(state, now_ms), steps_table(journal)]
    parts.append(invariants_text(journal))
    for v in journal.violations[-5:]:
        parts.append(Text(f"✗ {v.rule} [{v.step}] {v.message}", style="red"))
    return Group(*parts)


def event_line(event: Event) -> str | None:
    """One plain line for a chaos event, or a fault the run's proxy applied (None for
    member events and the rest of the wire trace)."""
    d = event.data
    if event.source == "wire" and event.type == "FaultInjected":
        return f"  {describe_wire(event)}"
    if event.source != "chaos":
        return None
    t = event.type
    if t == "ScenarioStarted":
        line = f"scenario {d.get('scenario')} run {d.get('run_id')} group {event.group}"
        for a in d.get("timings") or []:
            line += f"\n  fitted to the cluster: {a.get('text')}"
        if d.get("fetch") is False:
            line += f"\n  {NO_FETCH}"
        return line
    if t == "StepStarted":
        return f"step {int(d.get('index', 0)) + 1}: {d.get('step')} ({d.get('action')})"
    if t == "ActionPerformed":
        return f"  action: {d.get('description')}"
    if t == "GroupSettled":
        return f"  settled at generation {d.get('generation')} after {fmt_ms(d.get('settle_ms'))}"
    if t == "StepFinished":
        gens = ",".join(str(g) for g in d.get("generations", [])) or "none"
        return (
            f"  {d.get('status')}: generations {gens}, {len(d.get('moved', []))} moved, "
            f"affected {', '.join(d.get('affected', [])) or 'none'}"
        )
    if t == "InvariantViolated":
        return f"  VIOLATED {d.get('rule')} [{d.get('step')}]: {d.get('message')}"
    if t == "MemberFailed":
        return f"  {event.member} ended: {d.get('error')}"
    if t == "ScenarioFinished":
        return f"verdict: {d.get('verdict')} (exit {d.get('exit_status')})"
    return None


def summary(journal: Journal) -> RenderableType:
    """The text report printed at the end of a run."""
    parts: list[RenderableType] = [steps_table(journal)]
    timings = timings_text(journal)
    if timings is not None:
        parts.insert(0, timings)
    for s in journal.steps:
        lines = Text(f"{s.index + 1}. {s.name}: ", style="bold")
        lines.append(s.cause or s.action)
        lines.append(f"\n   generations {s.generations or '-'}; stable after {fmt_ms(s.settle_ms)}")
        if s.unassigned_ms:
            shown = ", ".join(f"{m} {fmt_ms(ms)}" for m, ms in sorted(s.unassigned_ms.items()))
            lines.append(f"\n   without partitions: {shown}")
        if s.moved:
            moves = ", ".join(
                f"{mv['partition']} {'/'.join(mv['from']) or '-'}→{'/'.join(mv['to']) or '-'}"
                for mv in s.moved
            )
            lines.append(f"\n   moved: {moves}")
        lines.append(f"\n   affected: {', '.join(s.affected) or 'none'}")
        if s.errors:
            errs = "; ".join(
                f"{m}: " + ", ".join(f"{e}×{n}" for e, n in per.items())
                for m, per in s.errors.items()
            )
            lines.append(f"\n   errors seen: {errs}")
        parts.append(lines)
    r = journal.records
    if journal.setup.get("fetch") is False:
        parts.append(Text(NO_FETCH, style="yellow"))
    if r:
        parts.append(
            Text(
                f"records: {r.get('produced', 0)} produced, {r.get('consumed', 0)} consumed, "
                f"{r.get('missing', 0)} missing, {r.get('duplicates', 0)} duplicates"
            )
        )
    parts.append(invariants_text(journal))
    for v in journal.violations:
        who = f" {', '.join(v.members)}" if v.members else ""
        part = f" {v.partition}" if v.partition else ""
        parts.append(
            Text(f"✗ {v.rule} [step {v.step}]{who}{part} at {v.at_ms}: {v.message}", style="red")
        )
    verdict = Text(f"verdict: {journal.verdict}", style=STATUS_STYLE.get(journal.verdict, "bold"))
    if journal.error:
        verdict.append(f" — {journal.error}")
    parts.append(verdict)
    return Group(*parts)


class ChaosDisplay:
    """Live screen on a terminal, or one plain line per chaos event."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.live_mode = live
        self.live: Live | None = None
        self._last = 0.0

    @classmethod
    def make(cls, console: Console | None, view: str) -> ChaosDisplay | None:
        if view == "none":
            return None
        console = console or Console(stderr=False)
        live = view == "live" or (view == "auto" and console.is_terminal)
        return cls(console, live)

    def start(self, run: Any) -> None:
        if self.live_mode:
            self.live = Live(
                render_chaos(run.journal, run.state, int(time.time() * 1000)),
                console=self.console,
                auto_refresh=False,
                transient=True,
            )
            self.live.start()

    def on_event(self, event: Event) -> None:
        if self.live_mode:
            return
        line = event_line(event)
        if line is not None:
            self.console.print(line, highlight=False, soft_wrap=True)

    def refresh(self, run: Any) -> None:
        if self.live is None:
            return
        now = time.monotonic()
        if now - self._last < 0.25:
            return
        self._last = now
        self.live.update(
            render_chaos(run.journal, run.state, int(time.time() * 1000)), refresh=True
        )

    def stop(self, run: Any) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def showdown_table(rows: list[ShowdownRow], protocols: list[str]) -> RenderableType:
    """The protocol showdown side by side: per step and protocol, trigger → complete,
    the time members went without partitions (summed / the longest / how many members)
    and the partitions moved (+ those that got their first owner)."""
    table = Table(box=box.SIMPLE_HEAD, title="protocol showdown", title_justify="left")
    table.add_column("step", overflow="fold", ratio=2)
    for p in protocols:
        table.add_column(f"{p}\ncomplete", justify="right")
        table.add_column(f"{p} without\nΣ / max / n", justify="right")
        table.add_column(f"{p}\nmoved", justify="right")
    for row in rows:
        cells = [row.step]
        for p in protocols:
            m = row.by_protocol.get(p)
            if m is None:
                cells += ["not run", "", ""]
                continue
            without = (
                f"{fmt_ms(m.without_ms)} / {fmt_ms(m.longest_without_ms)} / {m.members_without}"
                if m.members_without
                else "-"
            )
            moved = f"{m.moved}" + (f" +{m.new}" if m.new else "")
            cells += [fmt_ms(m.complete_ms) if m.status == "ok" else m.status, without, moved]
        table.add_row(*cells)
    return table
