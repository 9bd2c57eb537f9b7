"""The event pump of a chaos run: the one loop every event of the run goes through.

Member events arrive on the fleet's queue (the proxy's too, when there is one); chaos
adds its own (`emit`) with the same envelope. Each event is read by the judge before it
is folded (`before_fold`: whether a member consumed inside its assignment is judged on
the state before its own event), folded into the `GroupState`, kept in the run's
history, written to the recording and handed to the sinks (the display, `on_event`).
Everything happens on the calling thread: waiting (`wait_for`, `sleep`) is pumping.
"""

from __future__ import annotations

import os
import queue
import socket
import time
from collections.abc import Callable
from typing import IO, Any

from kgctl.chaos.fleet import Fleet, MemberProcess
from kgctl.model.events import Event
from kgctl.model.fold import fold
from kgctl.model.state import GroupState

Sink = Callable[[Event], None]


def now_ms() -> int:
    return int(time.time() * 1000)


def silent_end(code: int | None, asked_to_stop: bool) -> dict[str, Any]:
    """The MemberFailed data of a process that ended without a MemberStopped line. One
    kgctl sent SIGTERM that ended by itself stopped as asked, whatever its exit code: the
    process is gone all the same (the fold's MemberFailed), but it is no error and no
    failure of the member."""
    if asked_to_stop and code != -9:
        return {
            "error": "",
            "reason": "SIGTERM",
            "stopped_as_asked": True,
            "message": f"stopped as asked (SIGTERM from kgctl chaos), exit {code}",
            "exit_status": code,
        }
    return {
        "error": "SIGKILL" if code == -9 else f"exit {code}",
        "message": "the member process ended without stopping (seen by kgctl chaos)",
        "exit_status": code,
    }


class EventPump:
    """The run's event stream: the folded state, the history, the recording, the sinks."""

    def __init__(
        self,
        group: str,
        fleet: Fleet,
        sinks: list[Sink],
        record: IO[str] | None = None,
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self.group = group
        self.fleet = fleet
        self.sinks = sinks
        self.record = record
        self.refresh = refresh  # after each pump: the live view redraws
        # Sees every event before it is folded, with the state before it (the judge).
        self.before_fold: Callable[[Event, GroupState], None] | None = None
        self.state = GroupState(group=group)
        self.history: list[Event] = []  # every event of the run, for the diagnosis
        self.last_ts = 0  # the latest event time seen
        self._seq = 0
        self._mono0 = time.monotonic()

    def _mono_ms(self) -> float:
        return round((time.monotonic() - self._mono0) * 1000, 3)

    def emit(self, type_: str, **data: Any) -> Event:
        """One of chaos's own events, handled as any member's."""
        self._seq += 1
        event = Event(
            type=type_,
            ts_ms=now_ms(),
            mono_ms=self._mono_ms(),
            seq=self._seq,
            group=self.group,
            member="",
            client_id="kgctl-chaos",
            host=socket.gethostname(),
            pid=os.getpid(),
            generation=self.state.generation,
            source="chaos",
            data=data,
        )
        self._handle(event)
        return event

    def _ended_silently(self, member: MemberProcess) -> None:
        # A process that ended without MemberStopped (SIGKILL, crash): the fold must know.
        self._seq += 1
        event = Event(
            type="MemberFailed",
            ts_ms=now_ms(),
            mono_ms=self._mono_ms(),
            seq=self._seq,
            group=self.group,
            member=member.name,
            pid=member.pid,
            source="chaos",
            data=silent_end(member.exit_code, member.asked_to_stop),
        )
        self._handle(event)

    def _handle(self, event: Event) -> None:
        if self.before_fold is not None:
            self.before_fold(event, self.state)
        self.state = fold(self.state, event, now_ms())
        self.last_ts = max(self.last_ts, event.ts_ms)
        self.history.append(event)
        if self.record is not None:
            self.record.write(event.to_json() + "\n")
            self.record.flush()
        for sink in self.sinks:
            sink(event)

    def pump(self, timeout_s: float = 0.1) -> None:
        """Handle every queued item, waiting up to `timeout_s` for the first one."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                kind, _name, payload = self.fleet.queue.get(
                    timeout=max(left, 0.0) if left > 0 else 0.0001
                )
            except queue.Empty:
                break
            if kind == "event":
                if payload.type in ("MemberStopped", "MemberFailed"):
                    for proc in self.fleet.history:
                        if proc.pid == payload.pid:
                            proc.stopped = True
                self._handle(payload)
            elif not payload.stopped:
                self._ended_silently(payload)
            if time.monotonic() >= deadline:
                break
        if self.refresh is not None:
            self.refresh()

    def wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        """Pump until `pred` holds (True) or `timeout_s` passed (then `pred` once more)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if pred():
                return True
            self.pump(0.1)
        return pred()

    def sleep(self, seconds: float) -> None:
        """Pump for `seconds`: members' events keep being folded meanwhile."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.pump(min(0.1, max(deadline - time.monotonic(), 0)))
