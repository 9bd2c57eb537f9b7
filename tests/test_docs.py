"""Generated docs and completions are current; every command and option has help."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgctl.cli import docgen
from kgctl.errors import ExitStatus

ROOT = Path(__file__).resolve().parents[1]
# The console script, as a shell calls it (completion keys on the program name).
KGCTL = [str(Path(sys.executable).with_name("kgctl"))]


def _stale_message(rel: Path) -> str:
    return f"{rel} is stale: run `{docgen.REGENERATE}` (python -m kgctl.cli.docgen)"


@pytest.mark.parametrize("rel", sorted(docgen.generated(), key=str), ids=str)
def test_generated_file_is_current(rel: Path) -> None:
    expected = docgen.generated()[rel]
    path = ROOT / rel
    assert path.exists(), _stale_message(rel)
    assert path.read_text(encoding="utf-8") == expected, _stale_message(rel)


def test_every_command_option_and_argument_has_help() -> None:
    assert docgen.missing_help() == [], "add help= (or a docstring) to these"


def test_cli_reference_lists_every_command_and_exit_status() -> None:
    text = docgen.cli_markdown()
    for path, _cmd, _ctx in docgen.walk():
        assert f"`{' '.join(path)}`" in text
    for status in ExitStatus:
        row = re.search(rf"^\| {int(status)} \| `{status.name}` \| (.+) \|$", text, re.M)
        assert row and row.group(1).strip(), f"exit status {status.name} has no meaning"


@pytest.mark.parametrize("shell", sorted(docgen.SHELLS))
def test_checked_in_completion_is_what_kgctl_prints(shell: str) -> None:
    # The machinery the user's shell calls: `_KGCTL_COMPLETE=source_<shell> kgctl`.
    env = {**os.environ, "_KGCTL_COMPLETE": f"source_{shell}"}
    done = subprocess.run(KGCTL, env=env, capture_output=True, text=True, timeout=60)
    script = (ROOT / "completions" / docgen.SHELLS[shell]).read_text()
    assert done.stdout.strip() == script.strip(), _stale_message(Path("completions"))


def _complete(words: str, env: dict[str, str] | None = None) -> tuple[list[str], float]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    full = {**os.environ, **(env or {}), "_KGCTL_COMPLETE": "complete_bash",
            "COMP_WORDS": words, "COMP_CWORD": str(cword)}  # fmt: skip
    full.pop("KGCTL_BOOTSTRAP_SERVER", None) if env is None else None
    started = time.monotonic()
    done = subprocess.run(KGCTL, env=full, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    return done.stdout.split(), time.monotonic() - started


def test_completion_of_commands_scenarios_and_file_groups() -> None:
    commands, _ = _complete("kgctl ")
    assert {"join", "watch", "report", "chaos", "broker"} <= set(commands)
    scenarios, _ = _complete("kgctl chaos show s")
    assert scenarios and all(s.startswith("s") for s in scenarios)
    assert "slow-consumer" in scenarios
    groups, _ = _complete("kgctl report tests/data/two_members_growth.jsonl --group ")
    assert groups == ["kgctl-report-8e00e607"]


def test_group_completion_fails_silently_and_quickly() -> None:
    # Nothing listens on port 1: no groups, no error text, no long wait.
    groups, took = _complete("kgctl watch -b 127.0.0.1:1 ")
    assert groups == []
    assert took < 10, took
    groups, _ = _complete("kgctl watch ")  # no bootstrap at all: nothing to ask
    assert groups == []


def test_troubleshooting_names_real_scenarios_and_commands() -> None:
    scenarios = pytest.importorskip("kgctl.chaos.scenarios")
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    named = set(re.findall(r"kgctl chaos run ([a-z0-9-]+)", text))
    assert named, "troubleshooting.md names no scenario"
    assert named <= set(scenarios.builtin_names()), named - set(scenarios.builtin_names())
