"""`kgctl chaos` (not built yet: its issue is open)."""

from __future__ import annotations

import sys

import typer

from kgctl.cli.app import app
from kgctl.cli.common import Bootstrap, CommandConfig, Output, Overrides, Quiet, Timeout, Verbose
from kgctl.errors import ExitStatus


@app.command(
    "chaos",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def chaos_command(
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = "text",  # type: ignore[assignment]
    timeout: Timeout = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Not built yet."""
    print("kgctl: chaos is not built yet", file=sys.stderr)
    raise typer.Exit(int(ExitStatus.NOT_BUILT))
