"""Options every command shares, as typer declarations, and how a typer command ends.

The run-time side (`Env`, the settings, the one place that maps errors to exit codes) is
`kgctl.cli.base`, which needs no typer; it is re-exported here for the typer commands.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from kgctl.cli import base
from kgctl.cli.base import Env, OutputFormat, given_env, make_env, make_settings
from kgctl.errors import SetupError

__all__ = [
    "AllowDestructive",
    "Bootstrap",
    "CommandConfig",
    "Env",
    "HeartbeatInterval",
    "MaxPollInterval",
    "Output",
    "OutputFormat",
    "Overrides",
    "Quiet",
    "SessionTimeout",
    "Timeout",
    "Verbose",
    "emit_json",
    "end_as_typer",
    "given_env",
    "make_env",
    "make_settings",
    "run",
    "spinner",
]

Bootstrap = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        "-b",
        envvar="KGCTL_BOOTSTRAP_SERVER",
        help="Kafka bootstrap address host:port[,host:port].",
        show_default=False,
    ),
]
CommandConfig = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        help="Java client properties file (security.protocol, sasl.*, ssl.*, client.id).",
        show_default=False,
    ),
]
Overrides = Annotated[
    list[str] | None,
    typer.Option("-X", help="One client setting key=value (repeatable).", show_default=False),
]
Output = Annotated[
    OutputFormat,
    typer.Option(
        "--output", "-o", help="text for people; json for programs (nothing else on stdout)."
    ),
]
Timeout = Annotated[
    float,
    typer.Option("--timeout", help="Seconds to wait when connecting and for each request."),
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show debug logs and tracebacks.")]
# A scenario's timings, overridden for every member (chaos run, demo); checked against the
# cluster's group bounds before anything starts (kgctl/chaos/fit.py).
SessionTimeout = Annotated[
    int | None,
    typer.Option(
        "--session-timeout",
        help="session.timeout.ms of every member (default: the scenario's, fitted to the "
        "cluster's group.min/max.session.timeout.ms).",
        min=1,
        show_default=False,
    ),
]
HeartbeatInterval = Annotated[
    int | None,
    typer.Option(
        "--heartbeat-interval",
        help="heartbeat.interval.ms of every member (default: the scenario's share of the "
        "session timeout).",
        min=1,
        show_default=False,
    ),
]
MaxPollInterval = Annotated[
    int | None,
    typer.Option(
        "--max-poll-interval",
        help="max.poll.interval.ms of every member (default: the scenario's).",
        min=1,
        show_default=False,
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only results and errors.")]
# chaos run and demo: what kgctl did not create, or cannot undo off the loopback.
AllowDestructive = Annotated[
    bool,
    typer.Option(
        "--allow-destructive",
        help="Allow acting on a group kgctl did not create, or growing partitions on a "
        "cluster that is not on loopback.",
    ),
]


T = TypeVar("T")


def run(env: Env, action: Callable[[], T]) -> T:
    """Run a typer command's body (`kgctl.cli.base.run`); its exit status as `typer.Exit`."""
    try:
        return base.run(env, action, passthrough=(typer.Exit,))
    except base.CommandExit as exc:
        raise typer.Exit(exc.status) from None


def end_as_typer(body: Callable[[], int]) -> None:
    """Run a typer-free command body (`kgctl.cli.base.run` inside, returning the exit
    status) as a typer command ends: `typer.Exit` for a status other than 0."""
    try:
        status = body()
    except base.CommandExit as exc:
        status = exc.status
    if status:
        raise typer.Exit(status)


def spinner(env: Env) -> Callable[[str, Callable[[], bool], float], None]:
    """A `wait(label, ready, timeout_s)` that shows a spinner on stderr while it polls."""

    def wait(label: str, ready: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        assert env.err is not None
        status = env.err.status(label, spinner="dots") if not env.quiet else None
        with status or contextlib.nullcontext():
            while not ready():
                if time.monotonic() > deadline:
                    raise SetupError(
                        f"{label.replace('waiting for ', '')} did not answer within "
                        f"{timeout_s:.0f} s; see kgctl broker logs"
                    )
                time.sleep(0.3)

    return wait


def emit_json(env: Env, document: Any) -> None:
    env.line(json.dumps(document, sort_keys=True))
