"""The typer application: one thin module per command, registered here; and `main`, the
console script's entry point.

Command modules define their commands and know nothing of `app`; this module registers
each one, in the order `--help` and docs/cli.md list them. A command line that names one
command builds an app with that command only, so `kgctl join` does not import the
broker's, chaos's, watch's or report's modules (and what they import) to start a member;
`app` (for --help, completion, docs and tests) has them all. `kgctl join` is first parsed
without typer at all (`kgctl.cli.fastparse`, from a table generated from join's typer
declarations) and run by `kgctl.cli.join_run`; a command line that parse does not fully
understand (help, a bad value, ...) goes to typer, as every other command does. Nothing at
this module's top imports typer.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgctl import __version__
from kgctl.cli.base import Env, given_env

if TYPE_CHECKING:
    import typer
    from typer._click import exceptions as click_errors

# name -> (module, attribute, is a group of subcommands), in the order of --help.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "broker": ("kgctl.cli.broker", "broker_app", True),
    "chaos": ("kgctl.cli.chaos", "chaos_app", True),
    "demo": ("kgctl.cli.demo", "demo_command", False),
    "explain": ("kgctl.cli.explain", "explain_command", False),
    "join": ("kgctl.cli.join", "join_command", False),
    "monitor": ("kgctl.cli.monitor", "monitor_command", False),
    "proxy": ("kgctl.cli.proxy", "proxy_command", False),
    "report": ("kgctl.cli.report", "report_command", False),
    "watch": ("kgctl.cli.watch", "watch_command", False),
}
HELP = "Diagnose and provoke Apache Kafka consumer-group rebalances with real members."
# `kgctl join`'s options as a table, generated from its typer declarations (`make docs`).
JOIN_OPTIONS = Path(__file__).with_name("join_options.json")


def build_app(only: str | None = None) -> typer.Typer:
    """The app with every command, or with the one named `only`."""
    import typer

    def version_callback(value: bool) -> None:
        if value:
            typer.echo(f"kgctl {__version__}")
            raise typer.Exit()

    def root(
        version: bool = typer.Option(
            False,
            "--version",
            callback=version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ) -> None:
        """Diagnose and provoke Apache Kafka consumer-group rebalances with real members."""

    built = typer.Typer(
        name="kgctl",
        help=HELP,
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    built.callback()(root)
    for name, (module, attribute, group) in COMMANDS.items():
        if only is not None and name != only:
            continue
        target = getattr(importlib.import_module(module), attribute)
        if group:
            built.add_typer(target, name=name)
        else:
            built.command(name)(target)
    return built


_full: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    # `app` is built on first use: importing this module for `main` costs no command.
    global _full
    if name == "app":
        if _full is None:
            _full = build_app()
        return _full
    raise AttributeError(name)


def _command_of(argv: list[str]) -> str | None:
    """The command an argv names, when it is the first word and a known one."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    """Run kgctl. With `env` (in-process, tests) its output goes to env's streams and the
    exit status is returned; without, the process exits with it."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(args)
    with given_env(env):
        try:
            code = _join_without_typer(args[1:]) if command == "join" else None
            if code is None:
                code = _with_typer(command, argv, env)
        except SystemExit as exc:
            if env is None:
                raise
            status = exc.code
            code = status if isinstance(status, int) else (0 if status is None else 1)
    if env is None:
        sys.exit(code)
    return int(code)


def _join_without_typer(argv: list[str]) -> int | None:
    """`kgctl join`'s exit status, or None when its command line is typer's to parse."""
    from kgctl.cli import fastparse

    kwargs = fastparse.parse(fastparse.load(JOIN_OPTIONS), argv)
    if kwargs is None:
        return None
    from kgctl.cli.base import CommandExit
    from kgctl.cli.join_run import run_join

    try:
        return run_join(**kwargs)
    except CommandExit as exc:
        return exc.status


def _with_typer(command: str | None, argv: list[str] | None, env: Env | None) -> int:
    import typer

    # typer carries its own click; pinned in pyproject.toml with typer.
    from typer._click import exceptions as click_errors

    try:
        # Not standalone: click would print a usage error as a box of several lines;
        # kgctl says every bad input in one line (docs/cli.md, exit 2).
        cli = typer.main.get_command(build_app(command))
        reflow_help(cli)
        returned = cli(args=argv, prog_name="kgctl", standalone_mode=False)
        return returned if isinstance(returned, int) else 0
    except click_errors.NoArgsIsHelpError as exc:
        # `kgctl chaos` alone: typer has printed the help already, the answer.
        return exc.exit_code
    except click_errors.ClickException as exc:
        stream = env.stderr_stream if env is not None else sys.stderr
        stream.write(f"kgctl: error: {_one_line(exc)}\n")
        stream.flush()
        return exc.exit_code
    except typer.Abort:
        return 130


def reflow_help(command: Any) -> None:
    """Let each help paragraph wrap at the terminal's width: typer keeps a docstring's
    line breaks after its first paragraph, so at 80 columns a line written for 90 broke
    into a long line and a stub ("... 6 when" / "the" / "fleet or ..."). A paragraph that
    starts with \\b keeps its lines (click's mark for that)."""
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(
            p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs
        )
    for sub in getattr(command, "commands", {}).values():
        reflow_help(sub)


def _one_line(exc: click_errors.ClickException) -> str:
    """Click's message on one line, with where to read the command's options."""
    from typer._click import exceptions as click_errors

    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_errors.NoSuchOption) and ctx is not None:
        message = _no_such_option(exc.option_name, ctx)
    if isinstance(exc, click_errors.UsageError) and ctx is not None:
        return f"{message}; see '{ctx.command_path} -h'"
    return message


def _no_such_option(name: str, ctx: Any) -> str:
    """`--bogus is not an option of kgctl join`, with the options it may be a typo of.

    Click suggests what is close to the name dashes included, so that every long option
    shares two characters with it: it offered --verbose for any unknown option. Here the
    names are compared without their dashes, and an option the name begins is offered too
    (`--time`: --timeout)."""
    import difflib

    longs = [
        o
        for param in ctx.command.get_params(ctx)
        for o in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
        if o.startswith("--")
    ]
    bare = name.lstrip("-")
    begun = [o for o in longs if len(bare) >= 3 and o[2:].startswith(bare)]
    close = difflib.get_close_matches(bare, [o[2:] for o in longs], n=2, cutoff=0.75)
    offered = list(dict.fromkeys(begun + [f"--{o}" for o in close]))[:3]
    said = f"{name} is not an option of {ctx.command_path}"
    return f"{said} (did you mean {' or '.join(offered)}?)" if offered else said
