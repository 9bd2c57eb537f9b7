"""`Grid`: the live views' tables of one-line cells, drawn as rich's `Table` draws them.

The watch draws its members and generations tables five times a second. rich's `Table`
measures every cell by rendering it, then renders each one again through padding, line
splitting and shaping: at 1,000 members and 10,000 partitions that was most of a frame
(docs/benchmarks.md, "The live watch at 1,000 members, session 23"). These tables hold
one line per cell and never wrap, so a cell's width is its text's length, and the table
can be laid out by arithmetic and drawn as one run of segments per line. The layout is
rich's own (the same measurements, the same `ratio_distribute` and `ratio_reduce`), and
a test holds the output to `Table`'s, character by character and style by style, over
many widths.

It draws what `group_view` asks for: a left-justified bold title, a bold header, the
`SIMPLE_HEAD` rule under it, no outer edge, one space of padding between columns, and
the table expanded to the width. A line break in a cell is shown as a space (a row is
one line).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich._ratio import ratio_distribute, ratio_reduce
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

Justify = Literal["left", "right"]
Overflow = Literal["ellipsis", "crop"]


@dataclass(frozen=True)
class GridColumn:
    header: str
    justify: Justify = "left"
    overflow: Overflow = "ellipsis"
    min_width: int | None = None
    max_width: int | None = None
    # A share of what the other columns leave (rich's `ratio`): the column's own text
    # does not widen it.
    ratio: int | None = None


@dataclass(frozen=True)
class GridRow:
    cells: tuple[Text, ...]
    style: str | None


def _one_line(cell: str | Text) -> Text:
    text = Text(cell) if isinstance(cell, str) else cell.copy()
    if "\n" in text.plain:
        text.plain = text.plain.replace("\n", " ")
    return text


class Grid:
    """A table of one-line cells (`add_column`, `add_row`, as rich's `Table`)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.columns: list[GridColumn] = []
        self.rows: list[GridRow] = []

    def add_column(
        self,
        header: str,
        justify: Justify = "left",
        overflow: Overflow = "ellipsis",
        min_width: int | None = None,
        max_width: int | None = None,
        ratio: int | None = None,
    ) -> None:
        self.columns.append(GridColumn(header, justify, overflow, min_width, max_width, ratio))

    def add_row(self, *cells: str | Text, style: str | None = None) -> None:
        padded = list(cells) + [""] * (len(self.columns) - len(cells))
        self.rows.append(GridRow(tuple(_one_line(c) for c in padded), style))

    # -- layout -----------------------------------------------------------------------

    def _padding(self, index: int) -> tuple[int, int]:
        """(left, right) blanks of a column's cells: none at the table's edges."""
        return (0 if index == 0 else 1), (0 if index == len(self.columns) - 1 else 1)

    def _measure(self, index: int, lengths: list[int], max_width: int) -> int:
        """The widest a column asks to be within `max_width` (rich's measurement of its
        padded cells, clamped by the column's own bounds)."""
        if max_width < 1:
            return 0
        col = self.columns[index]
        pad = sum(self._padding(index))
        widest = 0
        for length in lengths:
            if max_width - pad < 1:
                cell = max_width
            else:
                text = min(max(0, length), max_width)
                cell = min((text if text >= 1 else 0) + pad, max_width)
            widest = max(widest, cell if cell >= 1 else 0)
        widest = min(widest, max_width)
        if col.min_width is not None:
            widest = max(widest, col.min_width + pad)
        if col.max_width is not None:
            widest = min(widest, col.max_width + pad)
        return widest

    def widths(self, max_width: int) -> list[int]:
        """Each column's width with its padding, for a table `max_width` wide without
        the dividers between columns."""
        columns = self.columns
        lengths = [
            [cell_len(col.header)] + [cell_len(row.cells[i].plain) for row in self.rows]
            for i, col in enumerate(columns)
        ]
        natural = [self._measure(i, lengths[i], max_width) for i in range(len(columns))]
        widths = [w or 1 for w in natural]
        ratios = [col.ratio or 0 for col in columns if col.ratio is not None]
        if any(ratios):
            fixed = [
                0 if col.ratio is not None else w for col, w in zip(columns, natural, strict=True)
            ]
            minimums = [1 + sum(self._padding(i)) for i, c in enumerate(columns) if c.ratio]
            flex = iter(ratio_distribute(max_width - sum(fixed), ratios, minimums))
            widths = [
                fixed[i] + next(flex) if col.ratio is not None else widths[i]
                for i, col in enumerate(columns)
            ]
        table_width = sum(widths)
        if table_width > max_width:
            # Nothing here wraps: every column gives up the same share, then asks again.
            widths = ratio_reduce(table_width - max_width, [1] * len(widths), widths, widths)
            table_width = sum(widths)
            widths = [self._measure(i, lengths[i], w) for i, w in enumerate(widths)]
        if table_width < max_width:
            extra = ratio_distribute(max_width - table_width, widths)
            widths = [w + e for w, e in zip(widths, extra, strict=True)]
        return widths

    # -- drawing ----------------------------------------------------------------------

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.columns:
            yield Segment("\n")
            return
        dividers = len(self.columns) - 1
        widths = self.widths(options.max_width - dividers)
        table_width = sum(widths) + dividers
        drawn = options.update(width=table_width, height=None, justify="left")
        yield from console.render(Text(self.title, style="bold"), drawn)
        header = console.get_style("table.header")
        # (on an ASCII terminal rich draws another box: '|' between columns, '-' rules)
        lines = box.SIMPLE_HEAD.substitute(options, safe=console.safe_box)
        cells = [Text(c.header) for c in self.columns]
        yield from _joined(self._line(console, options, cells, widths, header, lines.head_vertical))
        yield Segment.line()
        yield Segment(lines.get_row(widths, "head", edge=False))
        yield Segment.line()
        for k, row in enumerate(self.rows):
            style = console.get_style(row.style) if row.style else Style.null()
            between = lines.foot_vertical if k == len(self.rows) - 1 else lines.mid_vertical
            cells = list(row.cells)
            yield from _joined(self._line(console, options, cells, widths, style, between, style))
            yield Segment.line()

    def _line(
        self,
        console: Console,
        options: ConsoleOptions,
        cells: list[Text],
        widths: list[int],
        style: Style,
        between: str,
        row_style: Style | None = None,
    ) -> Iterator[Segment]:
        """One line's cells and the dividers between them (the caller ends the line)."""
        # A blank divider takes the row's background only (as rich's).
        blank = row_style is not None and not between.strip()
        shade = row_style.background_style if row_style is not None and blank else None
        divider = Segment(between, shade)
        last = len(cells) - 1
        pads = [self._padding(i) for i in range(len(cells))]
        # (a row none of whose cells has room for text is one line of unstyled blanks)
        height = 1 if any(w > sum(p) for w, p in zip(widths, pads, strict=True)) else 0
        for i, (cell, width, col) in enumerate(zip(cells, widths, self.columns, strict=True)):
            left, right = pads[i]
            inner = width - left - right
            if inner <= 0:
                # A column narrower than its padding (a terminal too narrow for the
                # table): rich's own cell, the slow way.
                yield from _rich_cell(console, options, cell, pads[i], width, height, col, style)
                if i < last:
                    yield divider
                continue
            text = cell.copy()
            if col.justify == "right":
                text.rstrip()
                text.truncate(inner, overflow=col.overflow)
                text.pad_left(inner - cell_len(text.plain))
            else:
                text.truncate(inner, overflow=col.overflow, pad=True)
            drawn = [Segment(" " * left, style)] if left else []
            # (a text without spans renders without its own style: rich adds it as a span
            # when it joins the lines of a cell, so here it is added by hand)
            own = console.get_style(text.style) if text.style and not text.spans else None
            for seg in text.render(console):
                seg_style = own or seg.style
                drawn.append(Segment(seg.text, style + seg_style if seg_style else style))
            if right:
                drawn.append(Segment(" " * right, style))
            yield from drawn
            if i < last:
                yield divider


def _joined(segments: Iterable[Segment]) -> list[Segment]:
    """The segments with each run of one style joined into one. A line of the member
    table was some 30 segments (each cell's padding, text and divider); rich goes over
    every segment of a frame several times to fit it to the screen, and a frame at 1,000
    members spent more time there than in drawing it (docs/benchmarks.md)."""
    out: list[Segment] = []
    for seg in segments:
        if out and not seg.control:
            prev = out[-1]
            if not prev.control and (prev.style is seg.style or prev.style == seg.style):
                out[-1] = Segment(prev.text + seg.text, prev.style)
                continue
        out.append(seg)
    return out


def _rich_cell(
    console: Console,
    options: ConsoleOptions,
    cell: Text,
    padding: tuple[int, int],
    width: int,
    height: int,
    col: GridColumn,
    style: Style,
) -> list[Segment]:
    """One cell drawn by rich's own steps, as its `Table` draws it."""
    left, right = padding
    shaped = options.update(
        width=width, justify=col.justify, no_wrap=True, overflow=col.overflow, height=None
    )
    lines = console.render_lines(Padding(cell, (0, right, 0, left)), shaped, style=style)
    return Segment.set_shape(Segment.align_top(lines, width, height, style), width, 1)[0]
