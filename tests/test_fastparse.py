"""`kgctl join`'s own parse (kgctl/cli/fastparse.py, from the table generated from join's
typer declarations) gives the command what typer gives it, option by option, and leaves to
typer every command line it does not fully understand."""

from __future__ import annotations

import enum
import functools
import typing
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kgctl.cli import fastparse
from kgctl.cli.app import JOIN_OPTIONS
from kgctl.cli.join import join_command

# What `kgctl join` parses with at run time: the generated table, read as the CLI reads it
# (tests/test_docs.py fails when it is stale against the declarations).
TABLE = fastparse.load(JOIN_OPTIONS)


def fast(argv: list[str]) -> dict[str, Any] | None:
    return fastparse.parse(TABLE, argv)


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
    assert fast(argv) == expected


LEFT_TO_TYPER = [
    ["--help"],
    ["-g", "g", "t", "--session-timeout", "0"],  # below min=1: typer words the error
    ["-g", "g", "t", "--commit", "sometimes"],  # not a choice
    ["-g", "g", "t", "--max-records", "many"],  # not a number
    ["-g", "g", "t", "--no-such-option"],
    ["-g"],  # a value missing
    ["-vq", "-g", "g", "t"],  # bundled short flags
    ["-g", "g", "t", "--quiet=yes"],
    ["-g=g", "t"],  # click reads the value "=g"
    ["-o=json", "-g", "g", "t"],  # "=json": typer refuses it
]


@pytest.mark.parametrize("argv", LEFT_TO_TYPER, ids=" ".join)
def test_what_it_does_not_understand_is_left_to_typer(argv: list[str]) -> None:
    assert fast(argv) is None


def test_environment_variable_as_typer_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGCTL_BOOTSTRAP_SERVER", "from-env:9092")
    argv = ["-g", "g", "t"]
    parsed = fast(argv)
    assert parsed is not None and parsed["bootstrap"] == "from-env:9092"
    assert parsed == typer_kwargs(argv)
    explicit = fast(["-b", "cli:1", *argv])
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
    assert fast(argv) == expected


def test_members_below_one_is_left_to_typer() -> None:
    assert fast(["-g", "g", "t", "--members", "0"]) is None


def join_click_command() -> Any:
    """`kgctl join` as typer hands it to click: the parameters typer would parse."""
    import typer.main

    from kgctl.cli.app import build_app

    return typer.main.get_command(build_app("join")).commands["join"]  # type: ignore[attr-defined]


def sample_values(param: Any) -> list[str]:
    """Values typer accepts for one option: every choice, a bound itself, a plain value."""
    kind = param.type_descriptor.annotation
    if typing.get_origin(kind) is list:
        (kind,) = typing.get_args(kind)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return [str(member.value) for member in kind]
    if kind is int:
        return [str(param.min if param.min is not None else 7), "12"]
    if kind is float:
        return [str(param.min if param.min is not None else 0.5), "2.5"]
    return ["/tmp/kgctl-x.properties" if kind is Path else "some-value"]


def every_option_line() -> list[list[str]]:
    lines = []
    for param in join_click_command().params:
        if param.param_type_name != "option":
            continue
        for spelling in [*param.opts, *param.secondary_opts]:
            if param.is_flag:
                lines.append(["-g", "g", "t", spelling])
                continue
            for value in sample_values(param):
                lines.append(["-g", "g", "t", spelling, value])
                if spelling.startswith("--"):
                    lines.append(["-g", "g", "t", f"{spelling}={value}"])
    return lines


def test_the_table_has_every_spelling_typer_has() -> None:
    assert TABLE is not None, "the generated table says typer parses every join line"
    typer_spellings = {
        s
        for p in join_click_command().params
        if p.param_type_name == "option"
        for s in [*p.opts, *p.secondary_opts]
    }
    table_spellings = {s for spec in TABLE for s in spec.names}
    assert table_spellings == typer_spellings - {"--help", "-h"}
    assert [spec.name for spec in TABLE] == [
        p.name for p in join_click_command().params if p.name != "help"
    ]


@pytest.mark.parametrize("argv", every_option_line(), ids=" ".join)
def test_every_option_as_typer_reads_it(argv: list[str]) -> None:
    expected = typer_kwargs(argv)
    assert expected is not None, "typer refused a value the sample meant to be good"
    assert fast(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["-g", "g", "t", option, str(spec.low - 1)]
        for spec in (TABLE or [])
        if spec.low is not None
        for option in spec.names
    ],
    ids=" ".join,
)
def test_below_a_bound_both_refuse(argv: list[str]) -> None:
    # typer says what is wrong; the fast parse must not accept what typer refuses.
    assert typer_kwargs(argv) is None
    assert fast(argv) is None
