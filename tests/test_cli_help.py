"""`kgctl COMMAND -h` as a person reads it in an 80-column terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", [["chaos", "run"], ["join"], ["watch"], ["explain"]])
def test_help_text_wraps_at_the_terminal_not_at_the_docstrings_line_breaks(
    command: list[str],
) -> None:
    env = {**os.environ, "COLUMNS": "80", "LINES": "50", "TERM": "xterm"}
    out = subprocess.run(
        [sys.executable, "-m", "kgctl", *command, "-h"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    # The description: from the line after "Usage:" to the first box of options.
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    prose = [line.rstrip() for line in lines[start:end]]
    paragraphs: list[list[str]] = [[]]
    for line in prose:
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    assert len(paragraphs) >= 2, out  # a summary and at least one paragraph after it
    for para in paragraphs:
        # Wrapped at 80 columns every line but a paragraph's last is nearly full: none is
        # a stub left by a line break written for a wider screen.
        assert all(len(line) >= 60 for line in para[:-1]), "\n".join(para)
        assert all(len(line) <= 80 for line in para), "\n".join(para)
