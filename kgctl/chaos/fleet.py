"""The fleet: real `kgctl join` member processes, their control pipes and event readers.

Each member is `python -m kgctl join ... --output json` with stdin and stdout pipes. A
reader thread per process parses its stdout events into one queue; when the process
ends the reader queues an exit notice with the return code. Members are started in
their own process group (Ctrl-C on the terminal reaches only chaos, which stops them in
order) and with PR_SET_PDEATHSIG set between fork and exec, so that they end even when
the chaos process is SIGKILLed before the member's own prctl runs. The kernel sends
that signal when the *thread* that forked the child exits: spawn from a thread that
lives for the whole run (the runner spawns from its calling thread).

Where the members run is the backend's business (`FleetBackend`): the fleet asks it to
spawn a member and gets back a `MemberHandle`, something that can be signalled, written
to (control lines), read from (events as JSON lines) and waited for. `LocalProcesses`
is the only backend today; docs/scaling.md describes how another (a Kubernetes Indexed
Job, events back over the trace topic) plugs in without touching the runner.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol

from kgctl.broker.provision import java_executable, resolve_kafka_tools
from kgctl.chaos.app import app_command, spawn_app
from kgctl.chaos.java import JavaMember, java_command, translator, write_properties
from kgctl.errors import UsageError
from kgctl.recordings import event_of_line
from kgctl.settings import ClientSettings


def _child_setup() -> None:
    # Between fork and exec: own process group, and die with the parent (Linux).
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent already died before prctl
            os._exit(1)


@dataclass
class MemberLaunch:
    """How to start one member process."""

    name: str
    group: str
    topics: list[str] = field(default_factory=list)  # real topic names
    pattern: str | None = None  # a real-name regex
    instance_id: str | None = None
    assignors: list[str] = field(default_factory=lambda: ["range"])
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 500
    max_poll_interval_ms: int = 30000
    commit: str = "auto"
    processing_ms: int = 0
    protocol: str = "classic"  # classic | consumer (KIP-848): Java's group.protocol
    client: str = "kgctl"  # kgctl | java (Apache Kafka's VerifiableConsumer)
    remote_assignor: str | None = None  # consumer protocol: the broker-side assignor

    @property
    def client_id(self) -> str:
        """The client id the member connects with (what a proxy fault rule selects)."""
        return f"kgctl-{self.name}"

    fetch: bool = True  # False: `--no-fetch`
    # client "command" (the user's program, kgctl/chaos/app.py): its command template,
    # the address it is given ({bootstrap}) and where its stdout/stderr files go.
    command: list[str] = field(default_factory=list)
    bootstrap: str = ""
    log_dir: Path = Path(".")


class MemberHandle(Protocol):
    """One member as its backend runs it: a local process, or a pod elsewhere.

    The same surface as `subprocess.Popen` so a local process is its own handle: `stdout`
    yields the member's events as JSON lines, `stdin` takes control lines (docs/member.md),
    signals mean what they mean to a process (SIGKILL: gone without a word; SIGTERM: leave
    and exit; SIGSTOP/SIGCONT: freeze and thaw)."""

    pid: int
    stdin: IO[str] | None
    stdout: IO[str] | None
    stderr: IO[str] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class FleetBackend(Protocol):
    """Where members run."""

    def spawn(self, launch: MemberLaunch, command: list[str]) -> MemberHandle:
        """Start the member `command` describes (a `kgctl join` command line)."""
        ...


class LocalProcesses:
    """Members as child processes of this one, tied to it (PR_SET_PDEATHSIG): `kgctl
    join`, or a Java VerifiableConsumer whose output is translated into events."""

    def spawn(self, launch: MemberLaunch, command: list[str]) -> MemberHandle:
        if launch.client == "command":
            return spawn_app(launch, command, _child_setup)
        java = launch.client == "java"
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL if java else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            preexec_fn=_child_setup,  # noqa: PLW1509 - spawned from the run's own thread
        )
        if java:
            config = {
                "name": launch.name,
                "group": launch.group,
                "topics": list(launch.topics),
                "instance_id": launch.instance_id,
                "client_id": launch.client_id,
                "group_protocol": launch.protocol,
                "remote_assignor": launch.remote_assignor,
                "max_poll_interval_ms": launch.max_poll_interval_ms,
            }
            if launch.protocol == "classic":
                config["session_timeout_ms"] = launch.session_timeout_ms
                config["heartbeat_interval_ms"] = launch.heartbeat_interval_ms
                config["assignors"] = list(launch.assignors)
            return JavaMember(
                proc, translator(launch.name, launch.group, launch.client_id, proc.pid, config)
            )
        return proc


@dataclass
class MemberProcess:
    """One running (or ended) member, as its backend runs it."""

    launch: MemberLaunch
    proc: MemberHandle
    started_ms: int
    paused: bool = False
    paused_since_ms: int | None = None
    expected_exit: bool = False  # chaos asked it to end (kill, stop, fencing expected)
    asked_to_stop: bool = False  # chaos sent it SIGTERM (a stop, a restart)
    stopped: bool = False  # MemberStopped seen
    exit_code: int | None = None
    stderr: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))
    reader: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.launch.name

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    @property
    def running(self) -> bool:
        return self.exit_code is None and self.proc.poll() is None


# Items in the fleet's queue: ("event", name, Event) or ("exit", name, MemberProcess).
Item = tuple[str, str, Any]


class Fleet:
    """Starts, signals, controls and finally ends every member process of one run."""

    def __init__(
        self, settings: ClientSettings, workdir: Path, backend: FleetBackend | None = None
    ) -> None:
        self.settings = settings
        self.workdir = workdir
        self.backend: FleetBackend = backend or LocalProcesses()
        self.queue: queue.Queue[Item] = queue.Queue()
        self.members: dict[str, MemberProcess] = {}  # the newest process per name
        self.history: list[MemberProcess] = []  # every process ever started
        self._config_file: Path | None = None
        # App members' stdout/stderr files: beside the workdir, kept after the run.
        self.app_logs = workdir.with_name(workdir.name + "-apps")
        if settings.properties:
            # Secrets go through a private file, not the command line (visible in ps).
            workdir.mkdir(parents=True, exist_ok=True)
            path = workdir / "client.properties"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                for key, value in settings.properties.items():
                    fh.write(f"{key}={value}\n")
            self._config_file = path

    def command(self, launch: MemberLaunch) -> list[str]:
        if launch.client == "command":
            return app_command(launch)
        if launch.client == "java":
            return self.java_command(launch)
        cmd = [sys.executable, "-m", "kgctl", "join", "-b", self.settings.bootstrap]
        cmd += ["-g", launch.group, "--name", launch.name, "--output", "json"]
        if launch.protocol == "classic":
            # On the consumer protocol the session, the heartbeat and the assignment are
            # the broker's: kgctl join (like Java) refuses them.
            cmd += ["--session-timeout", str(launch.session_timeout_ms)]
            cmd += ["--heartbeat-interval", str(launch.heartbeat_interval_ms)]
            for a in launch.assignors:
                cmd += ["--assignor", a]
        cmd += ["--max-poll-interval", str(launch.max_poll_interval_ms)]
        cmd += ["--commit", launch.commit, "--timeout", str(self.settings.timeout_s)]
        if launch.instance_id:
            cmd += ["--instance-id", launch.instance_id]
        if launch.processing_ms:
            cmd += ["--processing-ms", str(launch.processing_ms)]
        if launch.protocol != "classic":
            cmd += ["--group-protocol", launch.protocol]
            if launch.remote_assignor:
                cmd += ["--remote-assignor", launch.remote_assignor]
        if not launch.fetch:
            cmd += ["--no-fetch"]
        if self._config_file is not None:
            cmd += ["--command-config", str(self._config_file)]
        if "metadata.max.age.ms" not in self.settings.properties:
            # Partition growth and new pattern topics are seen within a second.
            cmd += ["-X", "metadata.max.age.ms=1000"]
        if launch.pattern:
            cmd += ["--pattern", launch.pattern]
        else:
            cmd += ["--", *launch.topics]
        return cmd

    def java_command(self, launch: MemberLaunch) -> list[str]:
        """Apache Kafka's VerifiableConsumer for `launch`; its client properties (the
        run's, then the member's client id and timings) in a private file."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        props = dict(self.settings.properties)
        props["client.id"] = launch.client_id
        props.setdefault("metadata.max.age.ms", "1000")
        props["max.poll.interval.ms"] = str(launch.max_poll_interval_ms)
        # The same request timeout as kgctl members (--timeout).
        props.setdefault("request.timeout.ms", str(int(self.settings.timeout_s * 1000)))
        if launch.protocol == "classic":
            props["heartbeat.interval.ms"] = str(launch.heartbeat_interval_ms)
        path = write_properties(self.workdir / f"java-{launch.name}.properties", props)
        return java_command(
            java_executable(),
            resolve_kafka_tools(),
            bootstrap=self.settings.bootstrap,
            group=launch.group,
            topic=launch.topics[0],
            protocol=launch.protocol,
            properties=path,
            instance_id=launch.instance_id,
            assignors=launch.assignors,
            remote_assignor=launch.remote_assignor,
            session_timeout_ms=launch.session_timeout_ms,
            # Never auto-commit: a VerifiableConsumer reports only the commits it makes
            # itself (synchronously after each batch), and chaos's commit checks must see
            # every commit of the group.
            auto_commit=False,
        )

    def start(self, launch: MemberLaunch) -> MemberProcess:
        if launch.client == "command":
            launch = replace(launch, bootstrap=self.settings.bootstrap, log_dir=self.app_logs)
        proc = self.backend.spawn(launch, self.command(launch))
        member = MemberProcess(launch=launch, proc=proc, started_ms=int(time.time() * 1000))
        member.reader = threading.Thread(
            target=self._read, args=(member,), name=f"kgctl-chaos-{launch.name}", daemon=True
        )
        member.reader.start()
        threading.Thread(target=self._read_stderr, args=(member,), daemon=True).start()
        self.members[launch.name] = member
        self.history.append(member)
        return member

    def _read(self, member: MemberProcess) -> None:
        assert member.proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for line in member.proc.stdout:
                try:
                    event = event_of_line(line)
                except (ValueError, TypeError):
                    member.stderr.append(f"stdout: {line.rstrip()[:200]}")
                    continue
                self.queue.put(("event", member.name, event))
        member.exit_code = member.proc.wait()
        self.queue.put(("exit", member.name, member))

    @staticmethod
    def _read_stderr(member: MemberProcess) -> None:
        assert member.proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for line in member.proc.stderr:
                member.stderr.append(line.rstrip())

    # -- acting on members --------------------------------------------------------------
    def send(self, name: str, command: dict[str, Any]) -> None:
        member = self.members[name]
        if member.proc.stdin is None:  # validation keeps control actions off Java members
            raise UsageError(f"{name} takes no control lines (a {member.launch.client} member)")
        member.proc.stdin.write(json.dumps(command) + "\n")
        member.proc.stdin.flush()

    def signal_all_running(self, sig: int) -> None:
        """Signal every member still running (thawing a frozen one first)."""
        for m in self.history:
            if m.running:
                m.expected_exit = True
                # A SIGTERM is a stop kgctl asked for (the run's end): no error of the
                # member's when it ends by itself (pump.silent_end).
                m.asked_to_stop = m.asked_to_stop or sig == signal.SIGTERM
                with contextlib.suppress(OSError):
                    if m.paused:
                        self.resume(m.name)
                    m.proc.send_signal(sig)

    def signal(self, name: str, sig: int) -> None:
        member = self.members[name]
        if member.proc.poll() is None:
            member.proc.send_signal(sig)

    def kill(self, name: str) -> None:
        self.members[name].expected_exit = True
        self.signal(name, signal.SIGKILL)

    def stop(self, name: str) -> None:
        member = self.members[name]
        member.expected_exit = member.asked_to_stop = True
        self.signal(name, signal.SIGTERM)

    def pause(self, name: str) -> None:
        member = self.members[name]
        self.signal(name, signal.SIGSTOP)
        member.paused, member.paused_since_ms = True, int(time.time() * 1000)

    def resume(self, name: str) -> None:
        member = self.members[name]
        self.signal(name, signal.SIGCONT)
        member.paused, member.paused_since_ms = False, None

    def active(self) -> list[MemberProcess]:
        """Members that run, are not paused and are not on their way out."""
        return [
            m
            for m in self.members.values()
            if m.running and not m.paused and not m.expected_exit and not m.stopped
        ]

    def running(self) -> list[MemberProcess]:
        return [m for m in self.history if m.running]

    def close(self, grace_s: float = 10.0) -> None:
        """End every process this fleet started: SIGCONT, SIGTERM, then SIGKILL."""
        for m in self.history:
            if m.proc.poll() is None:
                m.expected_exit = m.asked_to_stop = True
                with contextlib.suppress(OSError):
                    if m.paused:
                        m.proc.send_signal(signal.SIGCONT)
                    m.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for m in self.history:
            left = max(0.0, deadline - time.monotonic())
            try:
                m.proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    m.proc.kill()
                m.proc.wait(timeout=5)
        for m in self.history:
            if m.reader is not None:
                m.reader.join(timeout=2)
            for stream in (m.proc.stdin, m.proc.stdout, m.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError, ValueError):
                        stream.close()
