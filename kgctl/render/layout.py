"""Layout shared by the text views: text that wraps at the width it is given, and lines
of items that wrap between items."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.text import Text


class Wrapped:
    """Lays its renderable out at the width it is given, text wrapped between words.

    kgctl's consoles soft-wrap (`Env.out`: a plain line stays one line in a pipe or a
    file), which leaves a paragraph to the terminal, that cuts it mid-word, and a Live
    screen crops it at the edge. The views that are paragraphs and tables wrap
    themselves instead, with this.
    """

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from console.render(self.renderable, options.update(no_wrap=False, overflow="fold"))


class Packed:
    """Items on a line, wrapped between items, never inside one (`rule ✓`, `events 1836`):
    `label` starts the first line and the others are indented under the first item."""

    def __init__(self, label: Text, items: Sequence[Text], sep: str = "  ") -> None:
        self.label, self.items, self.sep = label, items, sep

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        indent = self.label.cell_len
        text = self.label.copy()
        column = indent
        for i, item in enumerate(self.items):
            gap = self.sep if i else ""
            if i and column + len(gap) + item.cell_len > options.max_width:
                text.append("\n" + " " * indent)
                column, gap = indent, ""
            text.append(gap)
            text.append_text(item)
            column += len(gap) + item.cell_len
        yield text
