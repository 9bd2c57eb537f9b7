"""Members that are the user's own program (`client: command`), in any language.

A fleet member with `client: command` runs the scenario's `command` (or `kgctl chaos run
--app 'CMD'`) once per member, with placeholders filled in (`{bootstrap}`, `{group}`,
`{topics}`, `{name}`, `{instance_id}`, `{client_id}`) and the same as environment
variables (`KGCTL_BOOTSTRAP`, ...). Such a program reports nothing to kgctl: the run
always puts a `kgctl proxy` between it and the cluster, and its steps are read from the
wire (`wire_member_events`: the traced exchanges of its client id, named as the member).
When the program also prints Kafka's VerifiableConsumer JSON lines on stdout, its
`records_consumed` and `offsets_committed` become the member's RecordsConsumed and
OffsetsCommitted events, and at-least-once is judged from them exactly.

Every member's stdout and stderr are kept in files (`log_files`), named in the journal.
The process runs in its own process group; every signal goes to the whole group, so a
shell wrapper or a child the program forks is frozen, stopped or killed with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from kgctl.chaos.java import java_event
from kgctl.errors import UsageError
from kgctl.model.events import Event
from kgctl.model.wire import WireSteps

PLACEHOLDERS = ("bootstrap", "group", "topics", "name", "instance_id", "client_id")
ENV_NAMES = {
    "bootstrap": "KGCTL_BOOTSTRAP",
    "group": "KGCTL_GROUP",
    "topics": "KGCTL_TOPICS",
    "name": "KGCTL_MEMBER",
    "instance_id": "KGCTL_INSTANCE_ID",
    "client_id": "KGCTL_CLIENT_ID",
}
# The VerifiableConsumer lines kept as the member's own events: what it processed and
# what it committed. Its callbacks (partitions_assigned/revoked) are left to the wire,
# which says what the coordinator gave, in the order the proxy saw it.
_SPOKEN = frozenset({"records_consumed", "offsets_committed"})
# Requests the run's proxy answers at most at these versions for a run with app members:
# Fetch up to v12 and OffsetCommit up to v9 name their topics (later versions name topic
# ids, which the judge could not read without the cluster's metadata).
APP_VERSION_CAPS = {1: 12, 8: 9}


def placeholders(
    *,
    bootstrap: str,
    group: str,
    topics: list[str],
    name: str,
    instance_id: str | None,
    client_id: str,
) -> dict[str, str]:
    return {
        "bootstrap": bootstrap,
        "group": group,
        "topics": ",".join(topics),
        "name": name,
        "instance_id": instance_id or "",
        "client_id": client_id,
    }


def check_template(command: list[str]) -> str | None:
    """What is wrong with a command template (None: nothing): an unknown placeholder or
    braces that are not one."""
    for part in command:
        try:
            part.format_map({k: "" for k in PLACEHOLDERS})
        except KeyError as exc:
            return (
                f"unknown placeholder {{{exc.args[0]}}} in {part!r}; "
                f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
        except (ValueError, IndexError):
            return f"{part!r}: braces are for placeholders ({{name}}); write {{{{ }}}} for one"
    return None


def expand(command: list[str], values: dict[str, str]) -> list[str]:
    return [part.format_map(values) for part in command]


def parse_app(text: str) -> list[str]:
    """`--app 'CMD'` as a command line (shell words, no shell)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--app {text!r}: not a command line ({exc})") from None
    if not words:
        raise UsageError("--app: give the command that starts one member, e.g. 'python app.py'")
    problem = check_template(words)
    if problem:
        raise UsageError(f"--app: {problem}")
    return words


def log_files(directory: Path, name: str) -> tuple[Path, Path]:
    """Where one app member process's stdout and stderr go: `<name>.<n>.stdout` and
    `.stderr` in `directory`, n counting the member's processes (a restart is the next)."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 1 + sum(1 for _ in directory.glob(f"{name}.*.stdout"))
    return directory / f"{name}.{n}.stdout", directory / f"{name}.{n}.stderr"


class AppMember:
    """A running app member as a `MemberHandle`: signals go to its process group; `stdout`
    yields kgctl events as JSON lines (a MemberStarted, then its VerifiableConsumer lines
    translated, when it prints any); `stdin` passes control lines through to it."""

    def __init__(
        self,
        command: list[str],
        env: dict[str, str],
        *,
        member: str,
        group: str,
        client_id: str,
        config: dict[str, Any],
        logs: tuple[Path, Path],
        preexec: Callable[[], None],
    ) -> None:
        self.stdout_path, self.stderr_path = logs
        try:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
                bufsize=1,
                preexec_fn=preexec,  # noqa: PLW1509 - spawned from the run's own thread
            )
        except OSError as exc:
            raise UsageError(
                f"cannot start member {member}: {command[0]}: {exc.strerror}; "
                "check the scenario's command (or --app)"
            ) from None
        self.pid = self._proc.pid
        self.stdin: IO[str] | None = self._proc.stdin
        # The fleet keeps the last stderr lines for the journal; the file has them all.
        err_read, err_write = os.pipe()
        self.stderr: IO[str] | None = os.fdopen(err_read, "r", encoding="utf-8")
        self._err = os.fdopen(err_write, "w", encoding="utf-8", buffering=1)
        self.member, self.group, self.client_id = member, group, client_id
        self.spoke_verifiable = False
        read_fd, write_fd = os.pipe()
        self.stdout: IO[str] | None = os.fdopen(read_fd, "r", encoding="utf-8")
        self._out = os.fdopen(write_fd, "w", encoding="utf-8", buffering=1)
        self._out.write(self._started(config).to_json() + "\n")
        threading.Thread(target=self._pump, name=f"kgctl-app-{self.pid}", daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stderr(self) -> None:
        assert self._proc.stderr is not None
        try:
            with (
                contextlib.suppress(OSError, ValueError),
                open(self.stderr_path, "w", encoding="utf-8") as log,
            ):
                for line in self._proc.stderr:
                    log.write(line)
                    log.flush()
                    self._err.write(line)
        finally:
            with contextlib.suppress(OSError):
                self._err.close()

    def _started(self, config: dict[str, Any]) -> Event:
        return Event(
            type="MemberStarted",
            ts_ms=int(time.time() * 1000),
            mono_ms=round(time.monotonic() * 1000, 3),
            seq=0,
            group=self.group,
            member=self.member,
            client_id=self.client_id,
            host=socket.gethostname(),
            pid=self.pid,
            data={"config": config, "client": {}},
        )

    def _pump(self) -> None:
        seq = 0
        assert self._proc.stdout is not None
        try:
            with (
                contextlib.suppress(OSError, ValueError),
                open(self.stdout_path, "w", encoding="utf-8") as log,
            ):
                for line in self._proc.stdout:
                    log.write(line)
                    log.flush()
                    event = self._spoken(line, seq + 1)
                    if event is not None:
                        seq += 1
                        self.spoke_verifiable = True
                        self._out.write(event.to_json() + "\n")
        finally:
            with contextlib.suppress(OSError):
                self._out.close()

    def _spoken(self, line: str, seq: int) -> Event | None:
        if not line.startswith("{"):
            return None
        try:
            name = json.loads(line).get("name")
        except (ValueError, AttributeError):
            return None
        if name not in _SPOKEN:
            return None
        return java_event(
            line,
            member=self.member,
            group=self.group,
            client_id=self.client_id,
            pid=self.pid,
            seq=seq,
            now_ms=int(time.time() * 1000),
            mono_ms=round(time.monotonic() * 1000, 3),
        )

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._proc.wait(timeout)

    def send_signal(self, sig: int) -> None:
        # The whole group: a wrapper script's children are the member too.
        try:
            os.killpg(self._proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            self._proc.send_signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def app_values(launch: Any) -> dict[str, str]:
    """The placeholders' values for `launch` (a MemberLaunch with `client: command`)."""
    return placeholders(
        bootstrap=launch.bootstrap,
        group=launch.group,
        topics=list(launch.topics),
        name=launch.name,
        instance_id=launch.instance_id,
        client_id=launch.client_id,
    )


def app_command(launch: Any) -> list[str]:
    return expand(list(launch.command), app_values(launch))


def spawn_app(launch: Any, command: list[str], preexec: Callable[[], None]) -> AppMember:
    """Start one app member (`command`, expanded from `launch`'s template); `preexec`
    runs in the child before exec (the fleet's: own process group, die with the parent)."""
    values = app_values(launch)
    env = dict(os.environ)
    env.update({ENV_NAMES[k]: v for k, v in values.items()})
    if launch.pattern:
        env["KGCTL_PATTERN"] = launch.pattern
    # The timings the run's checks assume (the scenario's, fitted to the cluster): a
    # program that keeps its own (librdkafka's 45 s session) is judged by these anyway.
    env["KGCTL_SESSION_TIMEOUT_MS"] = str(launch.session_timeout_ms)
    env["KGCTL_HEARTBEAT_INTERVAL_MS"] = str(launch.heartbeat_interval_ms)
    env["KGCTL_MAX_POLL_INTERVAL_MS"] = str(launch.max_poll_interval_ms)
    # group.protocol: on `consumer`, the session and heartbeat interval are the broker's.
    env["KGCTL_GROUP_PROTOCOL"] = launch.protocol
    if launch.remote_assignor:
        env["KGCTL_REMOTE_ASSIGNOR"] = launch.remote_assignor
    config = {
        "name": launch.name,
        "group": launch.group,
        "topics": list(launch.topics),
        "instance_id": launch.instance_id,
        "client_id": launch.client_id,
        "command": list(launch.command),
        "group_protocol": launch.protocol,
    }
    return AppMember(
        command,
        env,
        member=launch.name,
        group=launch.group,
        client_id=launch.client_id,
        config=config,
        logs=log_files(launch.log_dir, launch.name),
        preexec=preexec,
    )


class AppWire:
    """Names app members' traced exchanges as their steps (`events`), one run's worth.

    An eager member (its group's protocol is not a cooperative assignor) has given up
    everything it owned before it sends JoinGroup, as the Java and librdkafka clients
    do; the wire shows no callback, so the JoinGroup stands for it: a PartitionsRevoked
    of the last assignment its SyncGroup answers gave. Without it, a member whose answer
    of the new generation came first would seem to share partitions with one still
    holding the old generation's."""

    def __init__(
        self, members: Callable[[str], str | None], topic_names: Mapping[str, str] | None = None
    ) -> None:
        self.members = members
        self.owned: dict[str, dict[str, list[int]]] = {}
        # What each consumer-protocol app member last said; its answers' topic ids named
        # by `topic_names` (the run's topics, {id: name}).
        self.wire = WireSteps(topic_names=topic_names if topic_names is not None else {})

    def events(self, event: Event) -> list[Event]:
        """`event`, and the member steps it means when its client is an app member
        (`members(client_id)` names it). Other clients' events are left as they are."""
        name = self.members(event.client_id) if event.source == "wire" else None
        if name is None:
            return [event]
        named = replace(event, member=name)
        out = [named, *self.wire.steps(named)]
        if named.type == "JoinGroupTraced":
            owned = self.owned.pop(name, None)
            if owned and not _cooperative(named.data):
                sent = out[1].ts_ms if len(out) > 1 else named.ts_ms  # when it sent JoinGroup
                revoked = replace(
                    named, type="PartitionsRevoked", ts_ms=sent, data={"partitions": owned}
                )
                out.insert(1, revoked)
        for e in out:
            if e.type == "JoinCompleted":
                self.owned[name] = dict(e.data.get("assignment") or {})
        return out


def _cooperative(join: dict[str, Any]) -> bool:
    """Whether a traced JoinGroup is a cooperative member's: by the protocol the group
    chose (its answer names it), else by the member's first choice, which a fleet of one
    program shares (Java lists `range, cooperative-sticky` by default and is eager: a
    cooperative assignor merely listed is not the one in force)."""
    chosen = (join.get("response") or {}).get("protocol")
    if not chosen:
        protocols = (join.get("request") or {}).get("protocols") or []
        chosen = protocols[0] if protocols else ""
    return "cooperative" in str(chosen)


def wire_member_events(event: Event, members: Callable[[str], str | None]) -> list[Event]:
    """One event through a fresh `AppWire` (no memory of earlier assignments)."""
    return AppWire(members).events(event)
