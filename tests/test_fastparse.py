"""`kgctl join`'s own parse (kgctl/cli/fastparse.py) gives the command what typer gives it,
and leaves to typer every command line it does not fully understand."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kgctl.cli import fastparse
from kgctl.cli.join import join_command


def typer_kwargs(argv: list[str]) -> dict[str, Any] | None:
    """What typer hands join_command for argv (None when typer rejects it)."""
    seen: dict[str, Any] = {}

    @functools.wraps(join_command)
    def capture(**kwargs: Any) -> None:
        seen.update(kwargs)

    app = typer.Typer()
    app.command("join")(capture)
    app.command("other")(lambda: None)  # two commands: `join` is a subcommand, as in kgctl
    result = CliRunner().invoke(app, ["join", *argv])
    return seen if result.exit_code == 0 else None


UNDERSTOOD = [
    ["-g", "g", "t"],
    ["-b", "h:1", "-g", "g", "t1", "t2", "--output", "json"],
    ["--group=g", "--name", "m-1", "--session-timeout", "6000", "--heartbeat-interval=500", "t"],
    ["-g", "g", "--pattern", "a.*", "--assignor", "range", "--assignor", "cooperative-sticky"],
    ["-g", "g", "-X", "a=b", "-X", "metadata.max.age.ms=1000", "--", "-odd-topic"],
    ["-g", "g", "t", "--commit", "async", "--from", "latest", "--processing-ms", "2.5"],
    ["-g", "g", "t", "-o", "json", "-v", "--quiet", "--fail-on-missing", "--timeout", "3"],
    ["-g", "g", "t", "--command-config", "/tmp/x.properties", "--max-records", "7"],
    ["t", "-g", "g", "--duration", "0", "--instance-id", "i", "--client-id", "c"],
    ["-g", "g", "t", "--group-protocol", "consumer", "--remote-assignor", "uniform"],
]


@pytest.mark.parametrize("argv", UNDERSTOOD, ids=" ".join)
def test_fast_parse_gives_what_typer_gives(argv: list[str]) -> None:
    expected = typer_kwargs(argv)
    assert expected is not None
    assert fastparse.parse(join_command, argv) == expected


LEFT_TO_TYPER = [
    ["--help"],
    ["-g", "g", "t", "--session-timeout", "0"],  # below min=1: typer words the error
    ["-g", "g", "t", "--commit", "sometimes"],  # not a choice
    ["-g", "g", "t", "--max-records", "many"],  # not a number
    ["-g", "g", "t", "--no-such-option"],
    ["-g"],  # a value missing
    ["-vq", "-g", "g", "t"],  # bundled short flags
    ["-g", "g", "t", "--quiet=yes"],
]


@pytest.mark.parametrize("argv", LEFT_TO_TYPER, ids=" ".join)
def test_what_it_does_not_understand_is_left_to_typer(argv: list[str]) -> None:
    assert fastparse.parse(join_command, argv) is None


def test_environment_variable_as_typer_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGCTL_BOOTSTRAP_SERVER", "from-env:9092")
    argv = ["-g", "g", "t"]
    parsed = fastparse.parse(join_command, argv)
    assert parsed is not None and parsed["bootstrap"] == "from-env:9092"
    assert parsed == typer_kwargs(argv)
    explicit = fastparse.parse(join_command, ["-b", "cli:1", *argv])
    assert explicit is not None and explicit["bootstrap"] == "cli:1"


@pytest.mark.parametrize(
    "argv",
    [
        ["-g", "g", "t", "--members", "20", "--no-fetch"],
        ["-g", "g", "t", "--fetch", "--fetch-max-wait", "5000", "--members=2"],
    ],
    ids=" ".join,
)
def test_density_options_as_typer_reads_them(argv: list[str]) -> None:
    expected = typer_kwargs(argv)
    assert expected is not None
    assert fastparse.parse(join_command, argv) == expected


def test_members_below_one_is_left_to_typer() -> None:
    assert fastparse.parse(join_command, ["-g", "g", "t", "--members", "0"]) is None
