"""Several members in one process (`kgctl join --members N`): one interpreter, N members.

Each member is a whole `Member`: its own KafkaConsumer (connections, I/O thread, member id,
heartbeats), its own name and event stream, run on its own thread. What they share is
what one process has once: the interpreter and its imports (a member process is ~20 MB of
PSS before it does anything; a packed member 1-3 MB, docs/benchmarks.md), stdin, stdout
and the signals. The main thread reads stdin and hands each control line to the member it
names (`"member": NAME`) or, without a name, to every member; SIGINT/SIGTERM/SIGHUP stop
them all, each with its commit and LeaveGroup as alone. The process ends when every member
has ended; its exit status is the first failed member's (0 when none failed).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Any

from kgctl.errors import ExitStatus
from kgctl.member.runner import Member, MemberConfig, Sink
from kgctl.model.events import Event
from kgctl.settings import ClientSettings

# How often the main thread looks up from waiting on members (signals are handled then).
WAIT_S = 0.5


def packed_configs(config: MemberConfig, count: int, pid: int) -> list[MemberConfig]:
    """`count` members from one member's config: names, instance and client ids get -1..-N."""
    base = config.name or config.instance_id or f"member-{pid}"
    out = []
    for i in range(1, count + 1):
        out.append(
            replace(
                config,
                name=f"{base}-{i}",
                instance_id=f"{config.instance_id}-{i}" if config.instance_id else None,
                client_id=f"{config.client_id}-{i}" if config.client_id else None,
                read_stdin=False,
            )
        )
    return out


class MemberPack:
    """Runs `Member`s side by side on threads; stdin and signals are the main thread's."""

    def __init__(
        self,
        configs: list[MemberConfig],
        settings: ClientSettings,
        make_sinks: Callable[[MemberConfig], list[Sink]],
        *,
        stdin: IO[str] | None = None,
        member_class: type[Member] = Member,
    ) -> None:
        self.stdin = stdin if stdin is not None else sys.stdin
        lock = threading.Lock()

        def locked(sink: Sink) -> Sink:
            # Members write events from their own threads: one line at a time.
            def write(event: Event) -> None:
                with lock:
                    sink(event)

            return write

        self.members = [
            member_class(c, settings, [locked(s) for s in make_sinks(c)], stdin=self.stdin)
            for c in configs
        ]
        self.by_name = {m.config.label: m for m in self.members}
        self.errors: list[BaseException | None] = [None] * len(self.members)
        self.statuses: list[ExitStatus] = [ExitStatus.OK] * len(self.members)

    def _run_one(self, index: int) -> None:
        try:
            self.statuses[index] = self.members[index].run()
        except BaseException as exc:  # handed to the main thread, raised there
            self.errors[index] = exc

    def _route(self, line: str) -> None:
        """A control line to the member it names, or to every member."""
        try:
            raw = json.loads(line)
        except ValueError:
            raw = None
        name = raw.get("member") if isinstance(raw, dict) else None
        targets = [self.by_name[name]] if name in self.by_name else self.members
        if isinstance(name, str) and name not in self.by_name:
            targets = []  # a name no member has: nobody's command
        for member in targets:
            member.control.feed(line, "stdin")

    def _read_stdin(self) -> None:
        def loop() -> None:
            with contextlib.suppress(OSError, ValueError):
                for line in self.stdin:
                    self._route(line)

        threading.Thread(target=loop, name="kgctl-control-stdin", daemon=True).start()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        for member in self.members:
            member._on_signal(signum, _frame)

    def run(self) -> ExitStatus:
        """Run every member until each has ended; the first failure is raised here."""
        previous: dict[Any, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                previous[sig] = signal.signal(sig, self._on_signal)
        threads = [
            threading.Thread(target=self._run_one, args=(i,), name=f"kgctl-{m.config.label}")
            for i, m in enumerate(self.members)
        ]
        try:
            self._read_stdin()
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(WAIT_S)
        finally:
            for sig, handler in previous.items():
                with contextlib.suppress(Exception):
                    signal.signal(sig, handler)
        for error in self.errors:
            if error is not None:
                raise error
        return next((s for s in self.statuses if s != ExitStatus.OK), ExitStatus.OK)
