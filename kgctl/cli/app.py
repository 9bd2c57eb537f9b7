"""The typer application: one thin module per command, registered here.

Command modules define their commands and know nothing of `app`; this module imports
them and registers each one, in the order `--help` and docs/cli.md list them.
"""

from __future__ import annotations

import sys

import typer

# typer carries its own click; pinned in pyproject.toml with typer.
from typer._click import exceptions as click_errors

from kgctl import __version__
from kgctl.cli import broker, chaos, demo, explain, join, proxy, report, watch
from kgctl.cli.common import Env, given_env

app = typer.Typer(
    name="kgctl",
    help="Diagnose and provoke Apache Kafka consumer-group rebalances with real members.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kgctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Diagnose and provoke Apache Kafka consumer-group rebalances with real members."""


app.add_typer(broker.broker_app, name="broker")
app.add_typer(chaos.chaos_app, name="chaos")
app.command("demo")(demo.demo_command)
app.command("explain")(explain.explain_command)
app.command("join")(join.join_command)
app.command("proxy")(proxy.proxy_command)
app.command("report")(report.report_command)
app.command("watch")(watch.watch_command)


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    """Run kgctl. With `env` (in-process, tests) its output goes to env's streams and the
    exit status is returned; without, the process exits with it."""
    with given_env(env):
        try:
            # Not standalone: click would print a usage error as a box of several lines;
            # kgctl says every bad input in one line (docs/cli.md, exit status 2).
            returned = app(args=argv, prog_name="kgctl", standalone_mode=False)
            code = returned if isinstance(returned, int) else 0
        except click_errors.NoArgsIsHelpError as exc:
            # `kgctl chaos` alone: typer has printed the help already, the answer.
            code = exc.exit_code
        except click_errors.ClickException as exc:
            typer.echo(f"kgctl: error: {_one_line(exc)}", err=True)
            code = exc.exit_code
        except typer.Abort:
            code = 130
        except SystemExit as exc:
            if env is None:
                raise
            status = exc.code
            code = status if isinstance(status, int) else (0 if status is None else 1)
    if env is None:
        sys.exit(code)
    return int(code)


def _one_line(exc: click_errors.ClickException) -> str:
    """Click's message on one line, with where to read the command's options."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_errors.UsageError) and ctx is not None:
        return f"{message}; see '{ctx.command_path} -h'"
    return message
