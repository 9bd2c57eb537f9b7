"""Options every command shares, and the one place that maps errors to exit codes."""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from kgctl.errors import ExitStatus, KgctlError
from kgctl.settings import ClientSettings


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"


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


@dataclass
class Env:
    """Everything a command needs from its surroundings, handed down from the CLI."""

    output: OutputFormat = OutputFormat.text
    verbose: bool = False
    quiet: bool = False
    out: Console | None = None
    err: Console | None = None

    def __post_init__(self) -> None:
        self.out = self.out or Console(soft_wrap=True)
        self.err = self.err or Console(stderr=True, soft_wrap=True)

    @property
    def json(self) -> bool:
        return self.output is OutputFormat.json

    def say(self, message: str) -> None:
        """A human note: on stderr, so stdout stays clean for results."""
        if not self.quiet:
            assert self.err is not None
            self.err.print(message, highlight=False)


def make_env(output: OutputFormat, verbose: bool, quiet: bool) -> Env:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not verbose:
        # kafka-python logs retries at WARNING/ERROR that kgctl reports itself.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    return Env(output=output, verbose=verbose, quiet=quiet)


def make_settings(
    bootstrap: str | None,
    command_config: Path | None,
    overrides: list[str] | None,
    timeout: float,
) -> ClientSettings:
    return ClientSettings.from_options(bootstrap, command_config, overrides, timeout)


T = TypeVar("T")


def run(env: Env, action: Callable[[], T]) -> T:
    """Run a command's body; turn known errors into one line and an exit code."""
    try:
        return action()
    except KgctlError as exc:
        if env.verbose:
            import traceback

            traceback.print_exc()
        print(f"kgctl: error: {exc}", file=sys.stderr)
        raise typer.Exit(int(exc.status)) from None
    except KeyboardInterrupt:
        print("kgctl: interrupted", file=sys.stderr)
        raise typer.Exit(int(ExitStatus.INTERRUPTED)) from None
    except typer.Exit:
        raise
    except Exception as exc:  # a bug: say so in one line unless asked for the trace
        if env.verbose:
            raise
        print(
            f"kgctl: error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose "
            "for the traceback)",
            file=sys.stderr,
        )
        raise typer.Exit(int(ExitStatus.ERROR)) from None


def spinner(env: Env) -> Callable[[str, Callable[[], bool], float], None]:
    """A `wait(label, ready, timeout_s)` that shows a spinner on stderr while it polls."""

    def wait(label: str, ready: Callable[[], bool], timeout_s: float) -> None:
        import contextlib
        import time

        from kgctl.errors import SetupError

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
    import json

    sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    sys.stdout.flush()
