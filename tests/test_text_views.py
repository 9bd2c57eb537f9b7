"""The chaos screen, the chaos summary and `kgctl report` at 80 columns (and the chaos
screen at 140), rendered from recorded runs as kgctl's own console renders them (it
soft-wraps: a paragraph's width is the view's to keep), read as a person reads them:
every line within the width, nothing cut mid-word, the values one checks in sight."""

from __future__ import annotations

import gzip
import io
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console, RenderableType

from kgctl.chaos.journal import Journal
from kgctl.chaos.scenarios import builtin, builtin_names
from kgctl.cli.app import main
from kgctl.cli.base import Env
from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.state import GroupState
from kgctl.render.chaos_view import render_chaos, summary
from kgctl.render.report_text import render_report
from kgctl.report import build_report
from kgctl.report.summary import parse_lines

DATA = Path(__file__).parent / "data"


def _events(name: str) -> list[Event]:
    raw = (DATA / name).read_bytes()
    text = (gzip.decompress(raw) if name.endswith(".gz") else raw).decode()
    events, skipped = parse_lines(text.splitlines())
    assert not skipped
    return events


def _run(name: str) -> tuple[Journal, GroupState, int]:
    """The run's journal (its ScenarioFinished carries it) and its group folded to the end."""
    events = _events(name)
    (finished,) = [e for e in events if e.type == "ScenarioFinished"]
    journal = Journal.from_dict(finished.data["journal"])
    end = events[-1].ts_ms
    return (
        journal,
        fold_all(GroupState(journal.group), [e for e in events if e.group == journal.group], end),
        end,
    )


def _screen(view: RenderableType, width: int, height: int = 1000) -> list[str]:
    console = Console(
        width=width, height=height, soft_wrap=True, record=True, color_system=None,
        file=io.StringIO(),
    )  # fmt: skip
    console.print(view)
    return [line.rstrip() for line in console.export_text().splitlines()]


def _within(lines: list[str], width: int) -> None:
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, "\n".join(too_wide)


def _mid_run(journal: Journal) -> Journal:
    """The run as it was during its third step: two done, the third running."""
    steps = journal.steps[:2] + [replace(journal.steps[2], status="running")]
    return replace(journal, steps=steps, verdict="running")


def test_the_live_chaos_screen_fits_80x24_with_the_invariants_and_the_running_step() -> None:
    journal, state, end = _run("chaos_migrate_online.jsonl.gz")
    lines = _screen(render_chaos(_mid_run(journal), state, end), 80, 24)
    _within(lines, 80)
    # A Live cuts what is below the screen: it all fits, the bottom included.
    assert len(lines) <= 24, "\n".join(lines)
    text = "\n".join(lines)
    assert lines[0].startswith("kgctl chaos migrate-online  group kgctl.chaos.migrate-online.")
    assert re.search(r"\brunning\b", text)
    # Twelve rules would take five lines at 80 columns: counted, and a broken one named.
    assert f"invariants: {len(journal.invariants)} held ✓" in text
    broken = replace(_mid_run(journal), invariants=journal.invariants | {"expectation": "x"})
    shown = "\n".join(_screen(render_chaos(broken, state, end), 80, 24))
    assert f"invariants: {len(journal.invariants) - 1} held ✓  expectation ✗" in shown
    # The running step's row is on the screen, and what each member owned reads whole.
    assert re.search(r"^\s+3\s+roll every member .*\srunning\s", text, re.M), text
    owned = [cell for line in lines for cell in re.findall(r"orders\[[^\s]*", line)]
    assert owned and all(cell.endswith("]") for cell in owned), owned


def test_the_live_chaos_screen_at_140_columns_shows_the_whole_invariants_line() -> None:
    journal, state, end = _run("chaos_migrate_online.jsonl.gz")
    lines = _screen(render_chaos(_mid_run(journal), state, end), 140, 40)
    _within(lines, 140)
    assert len(lines) <= 40
    start = next(i for i, line in enumerate(lines) if line.startswith("invariants: "))
    block = "\n".join(lines[start : start + 3])
    for rule in journal.invariants:
        assert f"{rule} ✓" in block, (rule, block)
    # Wide enough for each step's cause in the timeline.
    assert "rolling restart of k1, k2, j1, j2" in "\n".join(lines[start:])


def test_the_chaos_summary_at_80_columns_wraps_between_words_under_each_step() -> None:
    journal, _state, _end = _run("chaos_migrate_online.jsonl.gz")
    lines = _screen(summary(journal), 80)
    _within(lines, 80)
    text = "\n".join(lines)
    # Every step numbered, its paragraph continued under its text, not at the margin.
    first = lines.index(next(line for line in lines if line.startswith("1. roll every member")))
    body = lines[first + 1 : lines.index(next(ln for ln in lines if ln.startswith("2. ")))]
    assert body and all(line.startswith("   ") for line in body), body
    # Each moved partition's name whole (they are long), each rule whole with its mark.
    assert text.count("kgctl.migrate-online.311234fd.orders-7 ") == 2
    for rule in journal.invariants:
        assert re.search(rf"(^|\s){re.escape(rule)} ✓", text, re.M), rule
    assert "generations 4-11; stable after 17.5s" in text
    assert lines[-1] == "verdict: passed"


def test_the_chaos_summary_names_only_the_members_that_went_without_partitions() -> None:
    journal, _state, _end = _run("chaos_migrate_online.jsonl.gz")
    produce = journal.steps[1]
    assert produce.unassigned_ms and not any(produce.unassigned_ms.values())
    text = "\n".join(_screen(summary(journal), 80))
    paragraph = text.split("2. records on the consumer protocol")[1].split("\n3. ")[0]
    assert "without partitions" not in paragraph
    assert "without partitions: j1 2.2s, j2 1.7s, k1 639ms, k2 1.5s" in text


def test_the_report_at_80_columns_keeps_times_and_counts_whole_and_names_the_errors() -> None:
    report = build_report(_events("chaos_member_kill.jsonl"))
    lines = _screen(render_report(report), 80)
    _within(lines, 80)
    text = "\n".join(lines)
    rows = [line for line in lines if re.match(r"\s*\d+\s+\S+\s+\d\d:\d\d:\d\d ", line)]
    assert len(rows) == len(report.rebalances), text
    # The header's figures each with their label.
    assert re.search(r"(^|  )events \d+(  |$)", text, re.M)
    assert re.search(r"(^|  )rebalances 3(  |$)", text, re.M)
    # The codes do not fit the narrow column whole: counted there, named under the table.
    assert "errors: #1 REBALANCE_IN_PROGRESS ×2" in text
    assert re.search(r"^\s+1\s.*\s2$", rows[0]), rows[0]


def test_the_live_chaos_screen_before_the_first_generation_says_so_whole() -> None:
    lines = _screen(render_chaos(Journal("tour", "r1", "g", "b"), GroupState("g"), 0), 80, 24)
    assert lines[0] == "kgctl chaos tour  group g  gen -  running"
    assert "invariants: none checked yet" in lines
    assert "members × generations" in lines  # its title on one line over an empty table


def test_chaos_list_at_80_columns_names_each_scenarios_protocol_and_whole_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    assert main(["chaos", "list"], env=Env(stdout=out, stderr=io.StringIO())) == 0
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    _within(lines, 80)
    # A scenario's line, its steps continued (indented under its first step), then its
    # description (indented by four).
    heads: dict[str, str] = {}
    name = ""
    for line in lines:
        if line and not line.startswith(" "):
            name = line.split()[0]
            heads[name] = line
        elif line.startswith("     ") and name:
            heads[name] += "\n" + line.strip()
        else:
            name = ""
    assert set(heads) == set(builtin_names())
    for name, head in heads.items():
        for action in {s.action for s in builtin(name).steps}:
            assert re.search(rf"(  |,\s){re.escape(action)}( ×\d+)?(,|$)", head, re.M), (
                action,
                head,
            )
    assert "  consumer only  " in heads["fencing-loop"]
    assert "  each protocol, compared  " in heads["protocol-showdown"]
