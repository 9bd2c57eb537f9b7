"""The fleet's backend seam: members that are not local processes (pure: no broker).

A backend that runs members elsewhere (a pod per member, say) hands the fleet handles
that yield the member's events and take its signals; the fleet and the runner's queue
must not know the difference.
"""

from __future__ import annotations

import io
import json
import signal
import threading
from pathlib import Path
from typing import IO

from kgctl.chaos.fleet import Fleet, MemberHandle, MemberLaunch
from kgctl.chaos.pump import silent_end
from kgctl.model.events import Event
from kgctl.settings import ClientSettings


class RemoteMember:
    """A member somewhere else: its events arrive as lines, signals end it."""

    def __init__(self, name: str, group: str) -> None:
        started = Event("MemberStarted", 1, 0.0, 1, group, member=name).to_json()
        joined = Event("JoinCompleted", 2, 1.0, 2, group, member=name, generation=1).to_json()
        self.pid = 4242
        self.stdin: IO[str] | None = io.StringIO()
        self.stdout: IO[str] | None = io.StringIO(f"{started}\n{joined}\n")
        self.stderr: IO[str] | None = io.StringIO("")
        self.signals: list[int] = []
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        # The events were all read: the "pod" ends when its stream does.
        if self.code is None:
            self.code = 0
        return self.code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        self.code = -sig

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class RemoteBackend:
    def __init__(self) -> None:
        self.spawned: dict[str, tuple[RemoteMember, list[str]]] = {}

    def spawn(self, launch: MemberLaunch, command: list[str]) -> MemberHandle:
        member = RemoteMember(launch.name, launch.group)
        self.spawned[launch.name] = (member, command)
        return member


def test_a_fleet_runs_members_on_another_backend_and_reads_their_events(
    tmp_path: Path,
) -> None:
    backend = RemoteBackend()
    fleet = Fleet(ClientSettings("broker:9092"), tmp_path, backend=backend)
    member = fleet.start(MemberLaunch(name="m1", group="g", topics=["orders"]))
    items = [fleet.queue.get(timeout=5) for _ in range(3)]
    kinds = [(kind, name) for kind, name, _payload in items]
    assert kinds == [("event", "m1"), ("event", "m1"), ("exit", "m1")]
    assert [p.type for k, _n, p in items if k == "event"] == ["MemberStarted", "JoinCompleted"]
    # The backend got the same `kgctl join` command a local process would run.
    _remote, command = backend.spawned["m1"]
    assert command[command.index("-g") + 1] == "g"
    assert command[-2:] == ["--", "orders"]
    assert member.pid == 4242 and member.exit_code == 0
    # Control lines and signals reach the member through its handle.
    fleet.send("m1", {"op": "pause"})
    remote = backend.spawned["m1"][0]
    assert remote.stdin is not None and json.loads(remote.stdin.getvalue()) == {"op": "pause"}
    fleet.close(grace_s=1)


class LingeringMember(RemoteMember):
    """A member that runs until a signal ends it."""

    def __init__(self, name: str, group: str) -> None:
        super().__init__(name, group)
        self.ended = threading.Event()

    def wait(self, timeout: float | None = None) -> int:
        self.ended.wait(timeout)
        return self.code if self.code is not None else 0

    def send_signal(self, sig: int) -> None:
        super().send_signal(sig)
        self.ended.set()


class LingeringBackend(RemoteBackend):
    def spawn(self, launch: MemberLaunch, command: list[str]) -> MemberHandle:
        member = LingeringMember(launch.name, launch.group)
        self.spawned[launch.name] = (member, command)
        return member


def test_the_runs_last_sigterm_is_a_stop_kgctl_asked_for(tmp_path: Path) -> None:
    # A by-hand run: at the end, the fleet's SIGTERM ended each app member, which was
    # then reported as "the member process ended without stopping" (an error).
    fleet = Fleet(ClientSettings("broker:9092"), tmp_path, backend=LingeringBackend())
    member = fleet.start(MemberLaunch(name="m1", group="g", topics=["orders"]))
    assert member.running and not member.asked_to_stop
    fleet.signal_all_running(signal.SIGTERM)
    assert member.asked_to_stop
    assert silent_end(member.proc.wait(5), member.asked_to_stop)["stopped_as_asked"] is True
    fleet.close(grace_s=1)
