"""The truth suite's harness: real consumers (librdkafka, Java) as OS
processes, what the harness did and when, and kgctl asked through its real command line.

A *run* is one situation for one client kind, in a group of its own: it starts the
members, lets the group settle, acts (a kill, a stop, a growth, ...), lets it settle
again, and keeps each member's own callbacks (tests/truth/client_*.py, one program per
client library, each printing the same JSON lines). The
ground truth (`Truth`) is read from those callbacks and the harness's actions only;
kgctl's answers are read from `kgctl explain -o json` and `kgctl watch --once -o json`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
KGCTL = [sys.executable, "-m", "kgctl"]


def now_ms() -> int:
    return int(time.time() * 1000)


class Member:
    """One client process (its program one of the suite's client_*.py) and what it
    reported about itself."""

    def __init__(
        self, program: str, name: str, group: str, topic: str, bootstrap: str, conf: dict[str, str]
    ):
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / program), name, group, topic, bootstrap]
            + [f"{k}={v}" for k, v in conf.items()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except json.JSONDecodeError:
                continue

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def owns(self) -> list[int]:
        for e in reversed(list(self.events)):
            if "owns" in e:
                return list(e["owns"])
        return []

    def summary(self) -> str:
        """What it owns, its last word and its errors (for a run that never settled)."""
        events = list(self.events)
        last = events[-1]["event"] if events else "nothing"
        state = "alive" if self.alive else f"exited {self.proc.returncode}"
        errors = [str(e["error"]) for e in events if e["event"] == "error"][-3:]
        return f"{self.name} ({state}) owns {self.owns()}, last said {last}, errors {errors}"

    def last_callback_ms(self) -> int:
        stamps = [e["ts_ms"] for e in list(self.events) if "owns" in e]
        return max(stamps, default=0)

    def end(self) -> None:
        """Close it gracefully, and kill it if it does not close in time."""
        if self.alive:
            try:
                self.tell("stop")
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        # The reader reads to the end of what the process wrote: a stdout closed under it
        # failed its thread (ValueError: I/O operation on closed file) and, warnings
        # being errors, the suite (a fenced static member's process, ended on its own).
        self._reader.join(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


@dataclass
class Action:
    ts_ms: int
    what: str
    member: str | None = None


@dataclass
class Run:
    """One situation of one client kind, in its own group, and its record."""

    client: str
    situation: str
    group: str
    topic: str
    partitions: int
    connect: str  # where the members connect (the proxy)
    program: str  # the members' client program (tests/truth/client_*.py)
    conf: dict[str, str]
    members: dict[str, Member] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    before: dict[int, str] = field(default_factory=dict)  # owners when the action began
    after: dict[int, str] = field(default_factory=dict)  # owners once settled again
    settled_ms: int = 0

    def name(self, n: int) -> str:
        # Unique client ids: the proxy's fault rules select by them, kgctl names by them.
        return f"{self.situation}-{self.client}-c{n}"

    def start(self, n: int, without: tuple[str, ...] = (), **conf: str) -> Member:
        """Member `n`, with the run's settings and `conf`, less the keys `without` (a
        consumer-protocol member refuses the classic timing and assignor)."""
        name = self.name(n)
        settings = {k: v for k, v in {**self.conf, **conf}.items() if k not in without}
        member = Member(self.program, name, self.group, self.topic, self.connect, settings)
        self.members[name] = member
        self.act("started", name)
        return member

    def act(self, what: str, member: str | None = None) -> Action:
        action = Action(now_ms(), what, member)
        self.actions.append(action)
        return action

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.alive]

    def owners(self) -> dict[int, str]:
        return {p: m.name for m in self.live() for p in m.owns()}

    def settle(
        self, expect: int, quiet_ms: int = 2500, timeout_s: float = 90, holders: int | None = None
    ) -> None:
        """Wait until `expect` live members own every partition between them (`holders`
        of them at least some, else as many as can) and no callback has come for
        `quiet_ms` (a cooperative second round included)."""
        need = min(expect, self.partitions) if holders is None else holders
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            live = self.live()
            owned = sorted(p for m in live for p in m.owns())
            last = max((m.last_callback_ms() for m in live), default=0)
            holders = sum(1 for m in live if m.owns())
            if (
                len(live) == expect
                and owned == list(range(self.partitions))
                and holders >= need
                and now_ms() - last >= quiet_ms
            ):
                self.settled_ms = now_ms()
                return
            time.sleep(0.2)
        raise AssertionError(
            f"{self.situation}/{self.client}: never settled on {expect} members: "
            + "; ".join(m.summary() for m in self.members.values())
        )

    def await_callback(self, name: str, since_ms: int, timeout_s: float = 30) -> None:
        """Until member `name` has reported an assignment callback at `since_ms` or later."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.members[name].last_callback_ms() >= since_ms:
                return
            time.sleep(0.1)
        raise AssertionError(f"{name} reported no callback after {since_ms}")

    def callbacks(self, since_ms: int) -> list[dict[str, Any]]:
        found = [e for m in self.members.values() for e in list(m.events) if e["ts_ms"] >= since_ms]
        return sorted(found, key=lambda e: e["ts_ms"])

    def end(self) -> None:
        for member in self.members.values():
            member.end()


# -- asking kgctl ------------------------------------------------------------------------

VIEWS = ("explain:cluster", "explain:broker-log", "explain:wire", "watch:cluster", "watch:wire")

_kgctl_slots = threading.BoundedSemaphore(3)  # two cores: a few kgctl processes at a time


def ask(
    view: str,
    group: str,
    bootstrap: str,
    *,
    trace_topic: str,
    broker_logs: list[Path],
    empty_state: Path,
) -> dict[str, Any]:
    """kgctl's answer about `group` in one view, from the sources that view names: the
    cluster only (what a user's remote cluster gives), with the broker's log, or with the
    proxy's wire trace."""
    command, source = view.split(":")
    if command == "explain":
        args = [*KGCTL, "explain", group, "-b", bootstrap, "-o", "json"]
    else:
        args = [*KGCTL, "watch", group, "-b", bootstrap, "--once", "-o", "json"]
    if source == "broker-log":
        for log in broker_logs:
            args += ["--broker-log", str(log)]
    if source == "wire":
        args += ["--trace-topic", trace_topic]
    # No local kgctl broker state: kgctl must not find the session broker's logs by itself.
    env = {**os.environ, "KGCTL_STATE_DIR": str(empty_state)}
    with _kgctl_slots:
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    try:
        return dict(json.loads(done.stdout))
    except json.JSONDecodeError:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}


def ask_text(group: str, bootstrap: str, *extra: str) -> str:
    """`kgctl explain`'s text (for people), as the audit read it."""
    done = subprocess.run(
        [*KGCTL, "explain", group, "-b", bootstrap, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


# The proxy's events a situation waits for (Proxy.wait_for).
KEPT_PROXY_EVENTS = ("ProxyStarted", "FaultRuleAdded", "FaultRuleRemoved", "SyncGroupTraced")


class Proxy:
    """One `kgctl proxy` all the runs' members connect through, publishing its wire trace
    to a topic; fault rules are added on its stdin, each scoped to one group."""

    def __init__(self, bootstrap: str, trace_topic: str) -> None:
        self.trace_topic = trace_topic
        self.upstream = bootstrap
        # Per group, the newest event the proxy printed: (its seq, its ts_ms).
        self.printed: dict[str, tuple[int, int]] = {}
        self.proc = subprocess.Popen(
            [*KGCTL, "proxy", "-b", bootstrap, "--trace-topic", trace_topic, "-o", "json"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        assert self.proc.stdout is not None
        try:
            first = json.loads(self.proc.stdout.readline())
            assert first["type"] == "ProxyStarted", first
            self.bootstrap = str(first["data"]["bootstrap"])
        except BaseException:
            self.stop()
            raise
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._lock = threading.Lock()

    def _read(self) -> None:
        # The proxy prints every traced exchange of every member: dozens of clients'
        # heartbeats and fetches. A reader that parses and keeps them all falls behind,
        # the proxy's stdout fills and its loop stalls on the write: every member's
        # requests wait with it (runs then failed with "Unable to bootstrap" and lost
        # sessions). Only the events the situations wait for are kept.
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._note_printed(line)
            if not any(f'"type":"{t}"' in line for t in KEPT_PROXY_EVENTS):
                continue
            try:
                self.events.append(json.loads(line))
            except json.JSONDecodeError:
                continue

    def _note_printed(self, line: str) -> None:
        # Read without parsing the line (see _read): the envelope's keys are sorted and
        # come after `data`, so the last "group" and "seq" keys are the envelope's.
        g, s, t = line.rfind('"group":"'), line.rfind('"seq":'), line.rfind('"ts_ms":')
        if min(g, s, t) < 0:
            return
        group = line[g + 9 : line.index('"', g + 9)]
        if not group:
            return
        try:
            seq = int(line[s + 6 : line.index(",", s)])
            ts = int(line[t + 8 : line.index(",", t)])
        except ValueError:
            return
        self.printed[group] = max(self.printed.get(group, (0, 0)), (seq, ts))

    def await_published(self, group: str, timeout_s: float = 60) -> None:
        """Until the trace topic holds every event of `group` the proxy traced before
        this call. The proxy publishes from a queue of its own thread: under the suite's
        load it ran seconds behind, and a wire view asked at a fixed delay after the
        situation missed its last steps (CI: a static conflict's fence, said unknown).
        First an event of the group stamped after this call is awaited on the proxy's
        stdout (its members heartbeat every second or so), then that event on the topic:
        one partition per group, in order, so everything before it is there too."""
        from kgctl.adapters.trace import read_trace
        from kgctl.settings import ClientSettings

        start = now_ms()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.printed.get(group, (0, 0))[1] < start:
            time.sleep(0.1)
        target = self.printed.get(group)
        if target is None:
            return  # nothing of the group went through the proxy
        seq, ts = target
        settings = ClientSettings(bootstrap=self.upstream)
        while time.monotonic() < deadline:
            events = read_trace(settings, self.trace_topic, group, ts, timeout_s=10)
            if any(e.seq >= seq for e in events):
                return
            time.sleep(0.3)
        raise AssertionError(f"the trace topic never held {group}'s event {seq} (proxy seq)")

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout_s: float = 30) -> None:
        """Until the proxy has emitted an event `match` accepts."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(match(e) for e in list(self.events)):
                return
            time.sleep(0.1)
        raise AssertionError("the proxy never showed the awaited event")

    def add_rule(self, rule: str) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": "add", "rule": rule}) + "\n")
            self.proc.stdin.flush()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if hasattr(self, "_reader"):  # (a proxy that failed to start has none)
            self._reader.join(timeout=10)  # to the end of its stdout, as Member.end
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
