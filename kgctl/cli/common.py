"""Options every command shares, and the one place that maps errors to exit codes."""

from __future__ import annotations

import contextlib
import contextvars
import enum
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

from kgctl.errors import ExitStatus, KgctlError, SetupError
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
# chaos run and demo: what kgctl did not create, or cannot undo off the loopback.
AllowDestructive = Annotated[
    bool,
    typer.Option(
        "--allow-destructive",
        help="Allow acting on a group kgctl did not create, or growing partitions on a "
        "cluster that is not on loopback.",
    ),
]


@dataclass
class Env:
    """Everything a command needs from its surroundings, handed down from the CLI.

    Every byte a command writes goes through it: `stdout`/`stderr` (text streams) and the
    rich consoles on them, `out` and `err`. A test runs a command in-process with its own
    streams: `kgctl.cli.app.main([...], env=Env(stdout=io.StringIO(), ...))`.
    """

    output: OutputFormat = OutputFormat.text
    verbose: bool = False
    quiet: bool = False
    stdout: TextIO | None = None  # None: the process's (looked up when written to)
    stderr: TextIO | None = None
    # The rich consoles are made on first use: a command that only writes lines
    # (`kgctl join --output json`, a member) never imports rich.
    _out: Console | None = field(default=None, init=False, repr=False)
    _err: Console | None = field(default=None, init=False, repr=False)

    @property
    def out(self) -> Console:
        if self._out is None:
            from rich.console import Console

            self._out = Console(file=self.stdout, soft_wrap=True)
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            from rich.console import Console

            self._err = (
                Console(file=self.stderr, soft_wrap=True)
                if self.stderr is not None
                else Console(stderr=True, soft_wrap=True)
            )
        return self._err

    @property
    def json(self) -> bool:
        return self.output is OutputFormat.json

    @property
    def stdout_stream(self) -> TextIO:
        return self.stdout if self.stdout is not None else sys.stdout

    @property
    def stderr_stream(self) -> TextIO:
        return self.stderr if self.stderr is not None else sys.stderr

    def line(self, text: str) -> None:
        """A result line on stdout, as is (no markup)."""
        stream = self.stdout_stream
        stream.write(text + "\n")
        stream.flush()

    def error_line(self, text: str) -> None:
        """A line on stderr, as is: errors, and what must show even with --quiet."""
        stream = self.stderr_stream
        stream.write(text + "\n")
        stream.flush()

    def say(self, message: str) -> None:
        """A human note: on stderr, so stdout stays clean for results."""
        if not self.quiet:
            assert self.err is not None
            self.err.print(message, highlight=False)


# The streams `main(env=...)` was given, for the command it runs (in-process tests).
_given_env: contextvars.ContextVar[Env | None] = contextvars.ContextVar("kgctl_env", default=None)


def make_env(output: OutputFormat, verbose: bool, quiet: bool) -> Env:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not verbose:
        # kafka-python logs retries at WARNING/ERROR that kgctl reports itself.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    given = _given_env.get()
    if given is None:
        return Env(output=output, verbose=verbose, quiet=quiet)
    return Env(
        output=output, verbose=verbose, quiet=quiet, stdout=given.stdout, stderr=given.stderr
    )


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
            traceback.print_exc(file=env.stderr_stream)
        env.error_line(f"kgctl: error: {exc}")
        raise typer.Exit(int(exc.status)) from None
    except KeyboardInterrupt:
        env.error_line("kgctl: interrupted")
        raise typer.Exit(int(ExitStatus.INTERRUPTED)) from None
    except typer.Exit:
        raise
    except Exception as exc:  # a bug: say so in one line unless asked for the trace
        if env.verbose:
            raise
        env.error_line(
            f"kgctl: error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose "
            "for the traceback)"
        )
        raise typer.Exit(int(ExitStatus.ERROR)) from None


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


@contextlib.contextmanager
def given_env(env: Env | None) -> Iterator[None]:
    """Commands run within write to `env`'s streams (None: the process's)."""
    token = _given_env.set(env)
    try:
        yield
    finally:
        _given_env.reset(token)
