"""The typer application: one thin module per command, registered here."""

from __future__ import annotations

import typer

from kgctl import __version__

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


def _register() -> None:
    # Each command module adds itself to `app`; imported here so the order is fixed.
    from kgctl.cli import broker, chaos, demo, join, proxy, report, watch  # noqa: F401


_register()


def main() -> None:
    app()
