"""The live views' `Grid` draws what rich's `Table` draws for the same table.

The group view's tables are `Grid`s for speed (kgctl/render/grid.py); what a user sees
must not change with it. Each case here is drawn both ways and compared line by line,
character by character, with each character's style."""

from __future__ import annotations

import io
import random

import pytest
from rich import box
from rich.console import Console, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from kgctl.render import plain_console
from kgctl.render.grid import Grid

WORDS = [
    "m0001", "orders[0,1,2,3]", "gone: SIGTERM", "-", "", "abc-def-ghi-jkl", "≥1.2s", "x",
    "stable", "1,234", "none for 3.2s", "c2 ≥410ms +997 more", "b[/x]",
]  # fmt: skip
HEADERS = ["member", "member id", "gen", "lag", "partitions", "cause", "no partitions"]


def _rich_table(title: str, columns: list[dict], rows: list[tuple[list, str | None]]) -> Table:
    t = Table(
        title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
        show_edge=False, pad_edge=False, padding=(0, 1), expand=True,
    )  # fmt: skip
    for c in columns:
        t.add_column(no_wrap=True, **c)
    for cells, style in rows:
        t.add_row(*cells, style=style)
    return t


def _grid(title: str, columns: list[dict], rows: list[tuple[list, str | None]]) -> Grid:
    g = Grid(title)
    for c in columns:
        g.add_column(**c)
    for cells, style in rows:
        g.add_row(*cells, style=style)
    return g


def _seen(console: Console, renderable: RenderableType) -> list[list[tuple[str, Style]]]:
    """Each line as a user sees it: its characters, each with its style."""
    lines = console.render_lines(renderable, console.options, pad=True)
    return [[(ch, seg.style or Style.null()) for seg in line for ch in seg.text] for line in lines]


class _AsciiFile(io.StringIO):
    """A terminal that takes ASCII only (rich draws its rules with '-' there)."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "ascii"


def _random_table(rnd: random.Random) -> tuple[list[dict], list[tuple[list, str | None]]]:
    columns = []
    for _ in range(rnd.randint(1, 9)):
        c: dict = {"header": rnd.choice(HEADERS)}
        if rnd.random() < 0.3:
            c["justify"] = "right"
        if rnd.random() < 0.3:
            c["min_width"] = rnd.randint(1, 10)
        if rnd.random() < 0.3:
            c["max_width"] = rnd.randint(1, 30)
        if rnd.random() < 0.3:
            c["ratio"] = rnd.randint(1, 3)
        if rnd.random() < 0.2:
            c["overflow"] = "crop"
        columns.append(c)
    rows: list[tuple[list, str | None]] = []
    for _ in range(rnd.randint(0, 6)):
        cells: list = [
            " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 4))) for _ in columns
        ]
        if rnd.random() < 0.2:
            cells[0] = Text(cells[0], style="red")
        if rnd.random() < 0.2:
            cells[-1] = Text.assemble(("12:00:01", "dim"), " ", ("mem", "cyan"), " left")
        rows.append((cells, rnd.choice([None, "dim"])))
    return columns, rows


@pytest.mark.parametrize("seed", range(8))
def test_a_grid_looks_as_rich_draws_the_same_table(seed: int) -> None:
    # Terminals from 10 columns (columns narrower than their padding included) to wide
    # ones, colour and plain ASCII. (Under 7 columns, with 8 or more columns in the
    # table, a blank cell can differ in boldness: nobody reads the view there.)
    rnd = random.Random(seed)
    for case in range(200):
        columns, rows = _random_table(rnd)
        width = rnd.randint(10, 220)
        console = plain_console(
            file=_AsciiFile() if case % 5 == 0 else io.StringIO(), width=width,
            force_terminal=True, color_system="truecolor", legacy_windows=False,
        )  # fmt: skip
        drawn = _seen(console, _grid("Members (3 live)", columns, rows))
        expected = _seen(console, _rich_table("Members (3 live)", columns, rows))
        assert drawn == expected, (seed, case, width, columns, rows)


def test_a_cell_is_one_line_and_its_markup_is_text() -> None:
    console = plain_console(file=io.StringIO(), width=40)
    g = Grid("Members")
    g.add_column("member")
    g.add_column("partitions", ratio=1)
    g.add_row("c[/x]\nsecond", "orders[0,1]")
    console.print(g)
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert lines[0] == "Members"
    assert lines[1].split() == ["member", "partitions"]
    assert set(lines[2]) == {"─"}
    assert lines[3].split() == ["c[/x]", "second", "orders[0,1]"]
    assert len(lines) == 4
