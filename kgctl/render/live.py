"""The live terminal loop of `kgctl watch`: rich Live at 4+ refreshes a second; q, p, arrows.

The loop drains the watch's event queue, folds, and redraws from state; `p` freezes the
screen (events keep being folded and recorded), `q` or Ctrl-C quits.
"""

from __future__ import annotations

import gc
import time

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from kgctl.observe.watch import Watch
from kgctl.render import plain_console
from kgctl.render.explain_text import render_diagnosis
from kgctl.render.group_view import FrameMemo, render_group
from kgctl.render.keys import read_key, single_keys

# Frames are drawn on a fixed grid of this many a second (a key draws one at once): a
# frame that takes long does not push the ones after it back, and the view never asks
# for more frames than the eye needs (at 1,000 members a frame is tens of milliseconds).
REFRESH_PER_S = 5


class _Collections:
    """How the cycle collector runs while the view does. The watch keeps minutes of
    events and a state of every member and partition (at 1,000 members, well over a
    million objects), and the fold makes new ones at every event. With Python's defaults,
    objects that lived for one frame were promoted, and each full collection went
    through the whole heap: seconds with the view frozen (docs/benchmarks.md). So young
    objects are collected only after YOUNG_THRESHOLD new ones, and when the view starts
    and every FREEZE_S after, what has lived so far is set aside (`gc.freeze`, a
    constant-time move): a collection then goes through the objects made since. The
    state and events are trees freed by their reference counts, not cycles: in a
    minute of a 1,000-member group rebalancing (bench.watchstream) the collector freed
    nothing, and its collections were 2 % of a core while the group rebalanced, each a
    pass over tens of thousands of objects all kept. Every FULL_COLLECTION_S everything
    is handed back to the collector, so a cycle set aside is freed at the latest then."""

    YOUNG_THRESHOLD = 100_000
    FREEZE_S = 1.0
    FULL_COLLECTION_S = 1800.0

    def __init__(self) -> None:
        self.saved = gc.get_threshold()
        self.thawed_at = time.monotonic()
        self.frozen_at = self.thawed_at - self.FREEZE_S  # at the first turn

    def __enter__(self) -> _Collections:
        gc.set_threshold(self.YOUNG_THRESHOLD, self.saved[1], self.saved[2])
        return self

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.thawed_at >= self.FULL_COLLECTION_S:
            gc.unfreeze()
            self.thawed_at = self.frozen_at = now
        elif now - self.frozen_at >= self.FREEZE_S:
            gc.freeze()
            self.frozen_at = now

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()
        gc.set_threshold(*self.saved)


def run_live(watch: Watch, console: Console | None = None, commits: bool = True) -> None:
    """Show the watch until q or Ctrl-C (a proxy's successful commits in its event log
    only with `commits`)."""
    console = console or plain_console()
    watch.background = True  # diagnoses on a worker thread: the frames go on meanwhile
    paused = False
    frozen = None
    scroll = 0  # event-log lines back from the newest
    explaining = False  # the newest generation's diagnosis in full, below the tables
    period = 1.0 / REFRESH_PER_S
    memo = FrameMemo()

    def frame() -> Group:
        width, height = console.size
        hint = Text(
            "q quit  p pause/resume  up/down scroll events  e explain the newest generation",
            style="dim",
        )
        now = watch.clock()
        found = watch.diagnoses(now)
        if explaining:
            top = render_group(
                watch.state, now, width=width, height=max(height // 2, 12), paused=paused,
                scroll=scroll, diagnoses=found, memo=memo, commits=commits,
            )  # fmt: skip
            newest = found[max(found)] if found else None
            pane = render_diagnosis(newest) if newest else Text("no generation seen yet")
            return Group(top, pane, hint)
        body = render_group(
            watch.state, now, width=width, height=height - 1, paused=paused, scroll=scroll,
            diagnoses=found, memo=memo, commits=commits,
        )  # fmt: skip
        return Group(body, hint)

    with (
        _Collections() as collections,
        single_keys() as keys,
        Live(frame(), console=console, screen=True, auto_refresh=False, transient=True) as live,
    ):
        due = time.monotonic() + period
        while True:
            watch.drain()
            collections.tick()
            if watch.fatal is not None:
                raise watch.fatal
            key = read_key(keys, max(0.0, due - time.monotonic()))
            if not key:
                # The next frame on the grid; one that is late starts the grid again.
                due = max(due + period, time.monotonic())
            if key in ("q", "Q"):
                return
            if key in ("p", "P"):
                paused = not paused
                frozen = frame() if paused else None
            if key in ("e", "E"):
                explaining = not explaining
                frozen = frame() if paused else None
            if key in ("up", "down"):
                scroll = max(0, scroll + (1 if key == "up" else -1))
                frozen = frame() if paused else None
            live.update(frozen if paused and frozen is not None else frame(), refresh=True)
