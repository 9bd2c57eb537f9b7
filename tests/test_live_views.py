"""The live screens as a person sees them: `kgctl watch` and `kgctl chaos run` in a
pseudo-terminal of 100x30, their frames read back and the keys typed (p, arrows, q)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import group_with_offsets

DATA = Path(__file__).parent / "data"
COLS, ROWS = 100, 30
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
REDRAW = re.compile(r"\x1b\[H|\r(?:\x1b\[2K\x1b\[1A)+\x1b\[2K")


class Terminal:
    """A kgctl command on a pseudo-terminal; what it draws is kept, frame by frame."""

    def __init__(self, *args: str, cwd: Path) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
        env.pop("KGCTL_BOOTSTRAP_SERVER", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgctl", *args],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        self.master = master
        self.raw = bytearray()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the command ended and closed the terminal
                return
            if not chunk:
                return
            with self.lock:
                self.raw.extend(chunk)

    def text(self) -> str:
        with self.lock:
            return bytes(self.raw).decode(errors="replace")

    def frames(self) -> list[str]:
        """Every complete screen drawn so far, as plain text. rich redraws a full-screen
        view from the top left (ESC [H) and an inline one by erasing its lines upwards
        (CR, then ESC [2K ESC [1A per line): either starts a new frame."""
        drawn = REDRAW.split(self.text())[1:-1]
        return [ANSI.sub("", f) for f in drawn]

    def wait_frame(self, what: str, match: Callable[[str], bool], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for frame in reversed(self.frames()):
                if match(frame):
                    return frame
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        shown = self.frames()[-1:] or [ANSI.sub("", self.text()[-3000:])]
        pytest.fail(f"no frame with {what} within {timeout}s; last:\n{shown[0]}")

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=5)
        os.close(self.master)


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def open_(*args: str) -> Terminal:
        opened.append(Terminal(*args, cwd=tmp_path))
        return opened[-1]

    yield open_
    for t in opened:
        t.close()


def fits(frame: str) -> bool:
    lines = frame.rstrip("\n").split("\r\n")
    return len(lines) <= ROWS and all(len(line) <= COLS for line in lines)


def test_watch_live_view_draws_the_group_and_obeys_its_keys(
    terminals: Callable[..., Terminal],
) -> None:
    recording = DATA / "two_members_growth.jsonl"
    group = json.loads(recording.read_text().splitlines()[0])["group"]
    term = terminals("watch", group, "--replay", str(recording), "--speed", "0")
    live = term.wait_frame("the recording folded", lambda f: "MemberStopped" in f)
    assert fits(live), live
    for needle in (
        f"group {group}",
        "assignor range",
        "generation 4",
        "leader a",
        "Members (0 live)",  # both stopped at the end of the recording
        "gone: kgctl: member stopping (SIGTERM)",
        "Generations",
        "Events",
        "q quit  p pause/resume  up/down scroll events",
    ):
        assert needle in live, f"{needle!r} not on the screen:\n{live}"
    rows = [line.split()[0] for line in live.split("\r\n") if line.split()]
    assert {"a", "b", "4", "3", "2"} <= set(rows), live

    term.type(b"p")
    paused = term.wait_frame("[paused]", lambda f: "[paused]" in f)
    assert paused.split("\r\n")[0].startswith(f"group {group}")
    term.type(b"\x1b[A")  # up: one event back, the newest (MemberStopped) scrolls off
    back = term.wait_frame("the log one line back", lambda f: "(1 back;" in f)
    assert "Events (1 back; down arrow for newer)" in back and "MemberStopped" not in back
    term.type(b"\x1b[B")  # down: the newest again
    term.wait_frame(
        "the newest events again",
        lambda f: "MemberStopped" in f and "back;" not in f and "[paused]" in f,
    )
    term.type(b"p")
    term.wait_frame("the pause lifted", lambda f: "MemberStopped" in f and "[paused]" not in f)
    term.type(b"q")
    assert term.proc.wait(timeout=15) == 0
    term.reader.join(timeout=5)
    # The terminal is given back: the alternate screen is left and the cursor shown.
    assert term.text().rstrip().endswith("\x1b[?1049l") or "\x1b[?1049l" in term.text()[-200:]


TWO_MEMBERS = """\
name: two-members
description: two members, then a member joins
fleet:
  members: 2
  assignors: [range]
  session_timeout_ms: 6000
  heartbeat_interval_ms: 500
  topics: {orders: 4}
  produce_rate: 20
steps:
  - name: add m3
    action: member-add
    names: [m3]
    expect: {min_rebalances: 1, max_seconds: 30}
"""


@pytest.mark.kafka
def test_chaos_live_view_shows_the_run_then_its_summary(
    bootstrap: str, terminals: Callable[..., Terminal], tmp_path: Path
) -> None:
    scenario = tmp_path / "two-members.yaml"
    scenario.write_text(TWO_MEMBERS)
    record = tmp_path / "run.jsonl"
    term = terminals(
        "chaos", "run", str(scenario), "-b", bootstrap, "--timeout", "15",
        "--record", str(record),
    )  # fmt: skip
    during = term.wait_frame(
        "the step running", lambda f: "step 1: add m3" in f and "kgctl chaos two-members" in f
    )
    assert fits(during), during
    head = during.split("\r\n")[0]
    assert head.startswith("kgctl chaos two-members  group kgctl.chaos.two-members.")
    assert "running" in head
    for needle in ("timeline", "add m3", "invariants:"):
        assert needle in during, f"{needle!r} not on the screen:\n{during}"
    assert term.proc.wait(timeout=180) == 0, ANSI.sub("", term.text()[-3000:])
    term.reader.join(timeout=5)
    # The live view is transient: once done, the summary is what stays on the terminal.
    after = ANSI.sub("", REDRAW.split(term.text())[-1])
    assert "verdict: passed" in after, after
    assert "1. add m3: started m3" in after
    finished = [json.loads(line) for line in record.read_text().splitlines()][-1]
    assert finished["type"] == "ScenarioFinished" and finished["data"]["verdict"] == "passed"


@pytest.mark.kafka
def test_monitor_live_table_opens_the_chosen_group_in_watch_and_comes_back(
    bootstrap: str, terminals: Callable[..., Terminal], topic: Any
) -> None:
    t = topic(1)
    first = group_with_offsets(bootstrap, t, 3, prefix="live-monitor-a")
    second = group_with_offsets(bootstrap, t, 5, prefix="live-monitor-b")
    term = terminals(
        "monitor", "-b", bootstrap, "--groups", "^live-monitor-", "--interval", "0.5",
        "--timeout", "15",
    )  # fmt: skip
    table = term.wait_frame(
        "both groups listed", lambda f: first in f and second in f and "polls" in f
    )
    assert "up/down choose a group  enter: kgctl watch it  q quit" in table, table
    order = [line.split()[0] for line in table.split("\r\n") if line.startswith("live-monitor-")]
    term.type(b"\x1b[B")  # down: the first group listed is chosen
    term.type(b"\r")
    shown = term.wait_frame(f"kgctl watch of {order[0]}", lambda f: f"group {order[0]}" in f)
    assert "q quit  p pause/resume" in shown, shown  # the watch's own screen and keys
    seen = len(term.frames())
    term.type(b"q")  # the watch's q: back to the table, the monitor still running
    deadline = time.monotonic() + 30
    while not any("enter: kgctl watch it" in f for f in term.frames()[seen:]):
        assert time.monotonic() < deadline, ANSI.sub("", term.text()[-2000:])
        assert term.proc.poll() is None, ANSI.sub("", term.text()[-2000:])
        time.sleep(0.05)
    term.type(b"q")
    assert term.proc.wait(timeout=20) == 0, ANSI.sub("", term.text()[-2000:])
