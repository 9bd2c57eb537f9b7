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
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kgctl.chaos.app_checks import JUDGE_RECORDS, JUDGE_WIRE
from kgctl.chaos.journal import Journal
from kgctl.chaos.showdown import ShowdownRow
from kgctl.model.events import Event
from kgctl.model.state import GroupState
from kgctl.render import plain_console
from kgctl.render.group_view import fmt_clock, fmt_ms
from kgctl.render.layout import Packed, Wrapped
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
    gens = list(state.generations)[-limit:] if limit > 0 else []
    title = "members × generations"
    # As wide as its title: before the first generation the table is one narrow column.
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", min_width=len(title))
    table.add_column("member", style="bold", no_wrap=True)
    for g in gens:
        table.add_column(f"gen {g.generation}", no_wrap=True)
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


def _fitting_generations(
    console: Console, options: ConsoleOptions, state: GroupState, now_ms: int
) -> Table:
    """The generations table with as many of the latest generations as fit the width
    whole (a cell cut in two reads as two partitions)."""
    for limit in range(6, 0, -1):
        table = generations_table(state, now_ms, limit)
        # Measured unbounded: a table measured within the width claims to fit it.
        wanted = Measurement.get(console, options.update_width(10_000), table).maximum
        if wanted <= options.max_width:
            return table
    return table


def steps_table(journal: Journal, cause: bool = True, last: int | None = None) -> Table:
    """The steps, one a row (`last`: only the newest that many, with a row saying how many
    came before; `cause`: with each step's cause, which the summary tells in full below)."""
    table = Table(box=box.SIMPLE_HEAD, title="timeline", title_justify="left")
    # Short values never wrap; the step's name and its cause share what is left.
    table.add_column("#", no_wrap=True)
    table.add_column("step", overflow="fold")
    table.add_column("status", no_wrap=True)
    if cause:
        table.add_column("cause", overflow="fold")
    table.add_column("gens", overflow="fold")
    table.add_column("stable\nafter", no_wrap=True)
    table.add_column("moved", no_wrap=True)
    table.add_column("errors", no_wrap=True)
    steps = journal.steps
    if last is not None and len(steps) > last:
        earlier = len(steps) - last
        steps = steps[earlier:] if last > 0 else []
        table.add_row("", Text(f"({earlier} earlier)", style="dim"))
    for s in steps:
        errors = sum(n for per in s.errors.values() for n in per.values())
        row: list[RenderableType] = [
            str(s.index + 1),
            s.name,
            Text(s.status, style=STATUS_STYLE.get(s.status, "")),
        ]
        if cause:
            row.append(s.cause)
        row += [
            generations_text(s.generations),
            fmt_ms(s.settle_ms),
            str(len(s.moved)),
            str(errors) if errors else "-",
        ]
        table.add_row(*row)
    return table


def invariants_text(journal: Journal) -> RenderableType:
    """`invariants: rule ✓  rule ✗ ...`, wrapped between rules: a mark never parts from
    its rule."""
    if not journal.invariants:
        return Text.assemble("invariants: ", ("none checked yet", "dim"))
    return Packed(
        Text("invariants: "),
        [
            Text(f"{rule} {'✓' if status == 'held' else '✗'}",
                 style="green" if status == "held" else "bold red")
            for rule, status in sorted(journal.invariants.items())
        ],
    )  # fmt: skip


def _invariants_counted(journal: Journal) -> Text:
    """`invariants: 11 held ✓  exclusive-ownership ✗`: the line for a screen too small
    to name every rule; a broken rule is always named."""
    held = sum(1 for status in journal.invariants.values() if status == "held")
    text = Text("invariants: ")
    text.append(f"{held} held ✓", style="green")
    for rule, status in sorted(journal.invariants.items()):
        if status != "held":
            text.append(f"  {rule} ✗", style="bold red")
    return text


def generations_text(generations: list[int]) -> str:
    """A step's generations, a run of three or more as its ends: `4-11`, `5,6`, `-`."""
    runs: list[list[int]] = []
    for g in generations:
        if runs and g == runs[-1][-1] + 1:
            runs[-1].append(g)
        else:
            runs.append([g])
    return (
        ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(str(g) for g in r) for r in runs)
        or "-"
    )


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


WIDE = 120  # columns from which the live timeline has room for each step's cause


def render_chaos(journal: Journal, state: GroupState, now_ms: int) -> RenderableType:
    """The whole live screen for one moment of a run, laid out for the console's size."""
    return ChaosScreen(journal, state, now_ms)


class ChaosScreen:
    """The live screen. What must stay in sight comes first: the run and its step, then
    the invariants (counted, the broken ones named, where naming all takes more lines
    than the screen's height spares) and the latest violations; below them the
    generations that fit the width, and as many of the newest steps as fit the height (a
    Live cuts the bottom)."""

    def __init__(self, journal: Journal, state: GroupState, now_ms: int) -> None:
        self.journal, self.state, self.now_ms = journal, state, now_ms

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        journal, state = self.journal, self.state
        options = options.update(no_wrap=False, overflow="fold")
        current = next((s for s in journal.steps if s.status == "running"), None)
        head = Packed(
            Text(""),
            [
                Text(f"kgctl chaos {journal.scenario}", style="bold"),
                Text(f"group {journal.group}"),
                Text(f"gen {state.generation if state.generation >= 0 else '-'}"),
                Text(journal.verdict, style=STATUS_STYLE.get(journal.verdict, "")),
            ],
        )
        top: list[RenderableType] = [head]
        if current is not None:
            # One line: its cause can be a paragraph, which the summary tells in full.
            top.append(
                Text(
                    f"step {current.index + 1}: {current.name} — {current.cause or current.action}",
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
        if journal.setup.get("fetch") is False:
            top.append(Text(NO_FETCH, style="yellow"))
        timings = timings_text(journal)
        if timings is not None:
            top.append(timings)
        invariants = invariants_text(journal)
        # Their lines in proportion to the screen's: two of 24, three of 40.
        if len(console.render_lines(invariants, options, pad=False)) > max(
            2, options.size.height // 12
        ):
            invariants = _invariants_counted(journal)
        top.append(invariants)
        for v in journal.violations[-5:]:
            top.append(Text(f"✗ {v.rule} [{v.step}] {v.message}", style="red"))
        top.append(_fitting_generations(console, options, state, self.now_ms))
        used = sum(len(console.render_lines(r, options, pad=False)) for r in top)
        room = options.size.height - used
        # Below 120 columns a cause wraps into a tall narrow column: the running step's
        # is in the head, the others' in the summary at the end.
        cause = options.max_width >= WIDE
        timeline = steps_table(journal, cause=cause)
        for last in range(len(journal.steps) - 1, 0, -1):
            if len(console.render_lines(timeline, options, pad=False)) <= room:
                break
            timeline = steps_table(journal, cause=cause, last=last)
        yield from console.render(Group(*top, timeline), options)


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
        line = (
            f"  {d.get('status')}: generations {gens}, {len(d.get('moved', []))} moved, "
            f"affected {', '.join(d.get('affected', [])) or 'none'}"
        )
        for change in d.get("protocol_changes") or []:
            line += f"\n  protocol changed at {change}"
        return line
    if t == "InvariantViolated":
        return f"  VIOLATED {d.get('rule')} [{d.get('step')}]: {d.get('message')}"
    if t == "MemberFailed":
        return f"  {event.member} ended: {d.get('error') or d.get('message')}"
    if t == "ScenarioFinished":
        return f"verdict: {d.get('verdict')} (exit {d.get('exit_status')})"
    return None


def summary(journal: Journal) -> RenderableType:
    """The text report printed at the end of a run."""
    parts: list[RenderableType] = [steps_table(journal, cause=False)]
    timings = timings_text(journal)
    if timings is not None:
        parts.insert(0, timings)
    # Each step: its number, then its paragraph wrapping under itself.
    steps = Table.grid(padding=(0, 1))
    steps.add_column(no_wrap=True)
    steps.add_column(overflow="fold")
    for s in journal.steps:
        lines = Text()
        lines.append(f"{s.name}: ", style="bold")
        lines.append(s.cause or s.action)
        gens = generations_text(s.generations)
        lines.append(f"\ngenerations {gens}; stable after {fmt_ms(s.settle_ms)}")
        waited = {m: ms for m, ms in s.unassigned_ms.items() if ms}
        if waited:
            shown = ", ".join(f"{m} {fmt_ms(ms)}" for m, ms in sorted(waited.items()))
            lines.append(f"\nwithout partitions: {shown}")
        if s.moved:
            moves = ", ".join(
                f"{mv['partition']} {'/'.join(mv['from']) or '-'}→{'/'.join(mv['to']) or '-'}"
                for mv in s.moved
            )
            lines.append(f"\nmoved: {moves}")
        for change in s.protocol_changes:
            lines.append(f"\nprotocol changed at {change}", style="cyan")
        lines.append(f"\naffected: {', '.join(s.affected) or 'none'}")
        if s.errors:
            errs = "; ".join(
                f"{m}: " + ", ".join(f"{e}×{n}" for e, n in per.items())
                for m, per in s.errors.items()
            )
            lines.append(f"\nerrors seen: {errs}")
        steps.add_row(Text(f"{s.index + 1}.", style="bold"), lines)
    parts.append(steps)
    r = journal.records
    if journal.setup.get("fetch") is False:
        parts.append(Text(NO_FETCH, style="yellow"))
    if r:
        parts.append(Text(records_text(journal)))
    parts.append(invariants_text(journal))
    for v in journal.violations:
        who = f" {', '.join(v.members)}" if v.members else ""
        part = f" {v.partition}" if v.partition else ""
        parts.append(
            Text(
                f"✗ {v.rule} [step {v.step}]{who}{part} at {fmt_clock(v.at_ms)}: {v.message}",
                style="red",
            )
        )
    verdict = Text(f"verdict: {journal.verdict}", style=STATUS_STYLE.get(journal.verdict, "bold"))
    if journal.error:
        verdict.append(f" — {journal.error}")
    parts.append(verdict)
    return Wrapped(Group(*parts))


def records_text(journal: Journal) -> str:
    """The run's records line, saying where its counts come from."""
    r = journal.records
    judge = journal.setup.get("judge")
    if judge == JUDGE_WIRE:
        # Nothing the programs processed was reported: what reached them is all known.
        return (
            f"records: {r.get('produced', 0)} produced, {r.get('fetched', 0)} fetched per the "
            "wire (distinct offsets in Fetch answers), "
            f"{r.get('not_committed', 0)} never committed; consumed, missing and duplicates "
            "unknown (no records_consumed lines)"
        )
    source = " per the members' VerifiableConsumer lines" if judge == JUDGE_RECORDS else ""
    return (
        f"records: {r.get('produced', 0)} produced, {r.get('consumed', 0)} consumed{source}, "
        f"{r.get('missing', 0)} missing, {r.get('duplicates', 0)} duplicates"
    )


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
        console = console or plain_console(stderr=False)
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


def scenario_table(rows: list[dict[str, Any]]) -> RenderableType:
    """`kgctl chaos list`: each scenario on a line with the protocol its members speak and
    its steps, its description under it, indented: readable at 80 columns, where a
    table's description column would be a word wide."""
    parts: list[RenderableType] = []
    for r in rows:
        if r.get("compare_protocols"):
            protocol = "each protocol, compared"
        else:
            protocol = "+".join(r.get("protocols", []))
            # Where it means something on one protocol only, --group-protocol cannot change it.
            if len(r.get("meaningful_on", [])) == 1:
                protocol += " only"
        steps: list[str] = []
        for action in r["steps"]:
            if steps and steps[-1].split(" ×")[0] == action:
                n = int(steps[-1].split(" ×")[1]) + 1 if " ×" in steps[-1] else 2
                steps[-1] = f"{action} ×{n}"
            else:
                steps.append(action)
        head = Packed(
            Text.assemble((r["name"], "bold"), "  ", (protocol, "cyan"), "  "),
            [
                Text(step + ("," if i < len(steps) - 1 else ""), "dim")
                for i, step in enumerate(steps)
            ],
            sep=" ",
        )
        parts += [head, Padding(Text(r["description"]), (0, 0, 1, 4))]
    return Wrapped(Group(*parts))


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
