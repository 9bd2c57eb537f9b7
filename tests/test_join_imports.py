"""`kgctl join --output json` imports what a member uses and nothing else.

Every process a chaos fleet or a user's script starts pays its imports in CPU before it
joins (docs/benchmarks.md, "Start-up"): typer and its click, rich, and the broker, chaos,
watch and render packages cost a member more than kafka-python's own start; a plain join
command line is parsed from the generated option table (kgctl/cli/fastparse.py). The
interpreter's own import log (`python -X importtime`) of a real `kgctl join` run says
what was imported; the run fails at once on a closed port, after it has built its
consumer (kafka-python is imported: the test sees the member's whole path).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from kgctl.errors import ExitStatus

ROOT = Path(__file__).resolve().parent.parent
# Packages a member has no use for (prefixes of module names).
NOT_FOR_A_MEMBER = (
    "rich",
    "pydantic",
    "markdown_it",
    "typer",
    "click",
    "shellingham",
    # the KIP-848 state machine: a classic member has no use for it
    "kgctl.member.membership",
    "kgctl.member.consumer_member",
    "yaml",
    "kgctl.broker",
    "kgctl.chaos",
    "kgctl.render",
    "kgctl.proxy",
    "kgctl.cli.broker",
    "kgctl.cli.chaos",
    "kgctl.cli.watch",
    "kgctl.cli.report",
    "kgctl.cli.explain",
    "kgctl.cli.demo",
)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def imported_modules(argv: list[str]) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kgctl", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
        check=False,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    errors = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    return done.returncode, "\n".join(errors), modules


def test_join_json_imports_only_what_a_member_uses() -> None:
    port = closed_port()
    argv = ["join", "-b", f"127.0.0.1:{port}", "-g", "g", "t", "--output", "json"]
    status, errors, modules = imported_modules([*argv, "--timeout", "1"])
    # It really ran the member: it got as far as kafka-python and failed on the port.
    assert status == int(ExitStatus.CANNOT_CONNECT), errors
    assert "kafka" in modules and "kgctl.member.runner" in modules
    extra = sorted(m for m in modules if m.startswith(NOT_FOR_A_MEMBER))
    assert extra == [], f"kgctl join --output json imported {extra[:12]}"


def test_a_join_error_is_one_line_without_typer() -> None:
    # The member's own usage error (no --group) comes from the typer-free path too: one
    # line, exit 2, and still no typer.
    status, errors, modules = imported_modules(["join", "t", "--output", "json"])
    assert status == int(ExitStatus.USAGE)
    assert errors.splitlines() == ["kgctl: error: --group/-g is required"]
    assert not any(m.startswith(("typer", "click", "rich")) for m in modules)


def test_a_bad_value_is_still_typer_s_one_line() -> None:
    # What the fast parse does not understand goes to typer, which words it as before.
    status, errors, modules = imported_modules(["join", "-g", "g", "t", "--commit", "often"])
    assert status == int(ExitStatus.USAGE) and "typer" in modules
    (line,) = errors.splitlines()
    assert line.startswith("kgctl: error: Invalid value for '--commit'") and "-h'" in line


def test_join_help_still_comes_from_typer() -> None:
    # The fast path leaves --help to typer, whose help is rich's (so rich is imported).
    status, _errors, modules = imported_modules(["join", "--help"])
    assert status == 0 and "rich.console" in modules
