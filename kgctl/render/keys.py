"""Single keys from the terminal for the live views (watch, monitor): cbreak mode while a
view runs, and one key at a time, arrows included."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator


@contextlib.contextmanager
def single_keys() -> Iterator[bool]:
    """Single-key input without echo, when stdin is a terminal; yields whether it is."""
    if not sys.stdin.isatty():
        yield False
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def read_key(enabled: bool, wait_s: float) -> str:
    """The key typed within `wait_s` ("" if none): a character, "up" or "down", or
    "enter"; without a terminal (`enabled` False), only the wait."""
    if not enabled:
        time.sleep(wait_s)
        return ""
    ready, _, _ = select.select([sys.stdin], [], [], wait_s)
    if not ready:
        return ""
    key = os.read(sys.stdin.fileno(), 1).decode(errors="ignore")
    if key == "\x1b":  # an arrow key arrives as ESC [ A/B in one burst
        rest, _, _ = select.select([sys.stdin], [], [], 0.01)
        if rest:
            seq = os.read(sys.stdin.fileno(), 2).decode(errors="ignore")
            return {"[A": "up", "[B": "down"}.get(seq, "")
    if key in ("\r", "\n"):
        return "enter"
    return key
