"""What every command shares at run time, without typer: the `Env` every byte of output goes
through, the settings, and the one place that maps errors to exit codes.

`kgctl join` runs from here without importing typer (docs/benchmarks.md, "Start-up");
`kgctl.cli.common` adds the typer side (the shared option declarations, and `run` as typer
commands end: `typer.Exit`).
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import logging
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

from kgctl.errors import ExitStatus, KgctlError
from kgctl.settings import ClientSettings


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"


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
            from kgctl.render import plain_console

            self._out = plain_console(file=_trimmed(self.stdout_stream), soft_wrap=True)
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            from kgctl.render import plain_console

            self._err = (
                plain_console(file=self.stderr, soft_wrap=True)
                if self.stderr is not None
                else plain_console(stderr=True, soft_wrap=True)
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


class _TrimmedLines:
    """A text stream whose lines lose their trailing spaces: rich pads a table's cells to
    the console's width, which a file or a pipe keeps as trailing blanks on every line.
    Spaces at the end of what is written so far wait for the rest of their line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._spaces = ""

    def write(self, text: str) -> int:
        lines = (self._spaces + text).split("\n")
        last = lines.pop()
        out = "".join(line.rstrip(" ") + "\n" for line in lines)
        kept = last.rstrip(" ")
        self._spaces = last[len(kept) :]
        self._stream.write(out + kept)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _trimmed(stream: TextIO) -> TextIO:
    """`stream`, with its lines' trailing spaces dropped unless it is a terminal."""
    try:
        if stream.isatty():
            return stream
    except (AttributeError, ValueError):
        pass
    return _TrimmedLines(stream)  # type: ignore[return-value]


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


class CommandExit(Exception):
    """The command ends with this exit status; what it had to say is written already."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


T = TypeVar("T")


def run(env: Env, action: Callable[[], T], passthrough: tuple[type[BaseException], ...] = ()) -> T:
    """Run a command's body; turn known errors into one line and `CommandExit`.

    `passthrough`: exceptions that already say how the command ends (typer's `Exit`, for
    the typer commands), raised on as they are."""
    try:
        return action()
    except KgctlError as exc:
        if env.verbose:
            traceback.print_exc(file=env.stderr_stream)
        env.error_line(f"kgctl: error: {exc}")
        raise CommandExit(int(exc.status)) from None
    except KeyboardInterrupt:
        env.error_line("kgctl: interrupted")
        raise CommandExit(int(ExitStatus.INTERRUPTED)) from None
    except CommandExit:
        raise
    except Exception as exc:  # a bug: say so in one line unless asked for the trace
        if env.verbose or isinstance(exc, passthrough):
            raise
        env.error_line(
            f"kgctl: error: unexpected {type(exc).__name__}: {exc} (rerun with --verbose "
            "for the traceback)"
        )
        raise CommandExit(int(ExitStatus.ERROR)) from None


@contextlib.contextmanager
def given_env(env: Env | None) -> Iterator[None]:
    """Commands run within write to `env`'s streams (None: the process's)."""
    token = _given_env.set(env)
    try:
        yield
    finally:
        _given_env.reset(token)
