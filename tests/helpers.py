"""Helpers shared by the test modules: kgctl processes and plain consumers for the
real-broker tests, event and snapshot builders for the pure ones.

Test modules import from here, never from each other: a helper then has one home, and
changing one test file cannot break another's imports.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgctl.broker.provision import java_executable
from kgctl.model.events import Event
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.observe.infer import Inferrer

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text on import;
    # imported here once so that a consumer thread's first import does not raise it.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401

# -- kgctl join members as subprocesses ----------------------------------------------------

SESSION_MS = 6000
HEARTBEAT_MS = 500


class MemberProc:
    """A `kgctl join --output json` child; its stdout events collected on a thread."""

    def __init__(
        self, bootstrap: str, group: str, *args: str, name: str, protocol: str = "classic"
    ) -> None:
        # A consumer-protocol member has no session or heartbeat setting: the broker's.
        timing = (
            ["--session-timeout", str(SESSION_MS), "--heartbeat-interval", str(HEARTBEAT_MS)]
            if protocol == "classic"
            else ["--group-protocol", "consumer"]
        )
        cmd = [
            sys.executable, "-m", "kgctl", "join", "-b", bootstrap, "-g", group,
            "--name", name, "--output", "json", *timing,
            "-X", "metadata.max.age.ms=1000", *args,
        ]  # fmt: skip
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.stdout_noise: list[str] = []
        self._stderr: str | None = None
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
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
                self.stdout_noise.append(line)

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["type"] == type_]

    def wait(self, pred: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = pred()
            if result:
                return result
            if self.proc.poll() is not None:
                self._reader.join(timeout=5)  # it ends at the exited process's last line
                result = pred()
                if result:
                    return result
                raise AssertionError(f"{self.name} exited {self.proc.returncode} before {what}")
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: timed out waiting for {what}")

    def wait_event(self, type_: str, timeout: float = 20.0, **match: Any) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for e in self.of(type_):
                if all(e["data"].get(k) == v for k, v in match.items()):
                    return e
            return None

        return self.wait(found, timeout, f"{type_} {match}")

    def send(self, command: dict[str, Any]) -> None:  # a control line on stdin
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    @property
    def stderr(self) -> str:
        assert self.proc.stderr is not None
        if self.proc.poll() is None:
            return ""
        if self._stderr is None:
            self._stderr = self.proc.stderr.read()
        return self._stderr

    def last_completed(self) -> dict[str, Any] | None:
        done = self.of("JoinCompleted")
        return done[-1] if done else None


def converged(members: list[MemberProc], topic: str, partitions: int) -> int | None:
    """The generation every member completed with, if their assignments are disjoint and
    cover every partition and no member has started another rebalance since."""
    lasts = [m.last_completed() for m in members]
    if any(last is None for last in lasts):
        return None
    generations = {last["data"]["generation"] for last in lasts if last}
    if len(generations) != 1:
        return None
    owned: list[int] = []
    for member, last in zip(members, lasts, strict=True):
        assert last is not None
        if any(e["seq"] > last["seq"] for e in member.of("RejoinRequested")):
            return None
        owned += last["data"]["assignment"].get(topic, [])
    if sorted(owned) != list(range(partitions)):
        return None
    return generations.pop()


def wait_converged(
    members: list[MemberProc], topic: str, partitions: int, timeout: float = 30.0
) -> int:
    return members[0].wait(
        lambda: converged(members, topic, partitions), timeout, f"{len(members)} converge"
    )


# -- kgctl chaos runs -------------------------------------------------------------------------


def recorded_events(path: Path) -> list[dict[str, Any]]:
    """The events of a `--record` file, one JSON object a line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_chaos(
    name: str, bootstrap: str, tmp_path: Path, *extra: str, timeout: float = 600
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """`kgctl chaos run NAME --output json` as a user runs it: a separate process, so a
    killed broker's half-closed client sockets never reach this one. Returns the JSON
    journal, the recorded events and the exit status."""
    record = tmp_path / "events.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "kgctl", "chaos", "run", name, "-b", bootstrap,
         "--record", str(record), "--output", "json", *extra],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    try:
        journal = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"exit {proc.returncode}, no JSON journal\nstdout: {proc.stdout[-2000:]}\n"
            f"stderr: {proc.stderr[-4000:]}"
        ) from None
    return journal, recorded_events(record), proc.returncode


# -- kgctl watch and plain kafka-python consumers --------------------------------------------

# kafka-python 3.0.12 can strand a member whose poll() returns while its SyncGroup is
# still in flight (root-caused in docs/benchmarks.md): the broker then drops it. These
# consumers are the group under watch, not the subject of the test, so they poll long
# enough for a join to finish inside one poll.
PLAIN_POLL_MS = 2000


class PlainConsumer(threading.Thread):
    """A plain kafka-python KafkaConsumer polling in a thread until stopped, noting the
    generation of every assignment it gets."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.group, self.client_id = bootstrap, topic, group, name
        self.stopping = threading.Event()
        self.assigned = threading.Event()  # set once it owns a partition
        self.generations: list[int] = []  # as the consumer's coordinator knew them
        self.error: BaseException | None = None

    @property
    def generation(self) -> int:
        return self.generations[-1] if self.generations else -1

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        consumer: Any = None
        owner = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, assigned: Any) -> None:
                owner.generations.append(consumer._coordinator._generation.generation_id)
                if assigned:
                    owner.assigned.set()

        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                client_id=self.client_id,
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
                metadata_max_age_ms=1000,  # notice a topic that grew within a second
            )
            consumer.subscribe([self.topic], listener=Listener())
            try:
                while not self.stopping.is_set():
                    consumer.poll(timeout_ms=PLAIN_POLL_MS)
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=20)


class WatchProcess:
    """`python -m kgctl watch ...` (or another command giving JSON lines, e.g. `proxy`)
    with its JSON lines collected as they arrive."""

    def __init__(self, args: list[str], command: str = "watch") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgctl", command, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def wait_for(
        self, what: str, match: Callable[[dict[str, Any]], bool], timeout: float = 45
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for ev in self.events:
                    if match(ev):
                        return ev
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.1)
        with self.lock:
            seen = [(e["type"], e.get("client_id"), e["data"].get("cause")) for e in self.events]
        pytest.fail(f"no {what} within {timeout}s; saw {seen}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def event_is(type_: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def match(ev: dict[str, Any]) -> bool:
        if ev["type"] != type_:
            return False
        for key, want in fields.items():
            have = ev.get(key, ev["data"].get(key))
            if have != want:
                return False
        return True

    return match


# -- events and snapshots for the pure tier ---------------------------------------------------

FOLD_GROUP = "orders-app"


KEPT_RECORDINGS = sorted(
    p
    for d in (Path(__file__).parent / "data", Path(__file__).parent / "truth" / "data")
    for p in d.glob("*.jsonl*")
)


def group_streams(path: Path) -> list[list[Event]]:
    """Each group of a kept recording, as the views order it: by time, a proxy's trace
    read as its members' steps."""
    from kgctl.model.wire import member_steps
    from kgctl.recordings import recording_lines

    events = [Event.from_json(line) for line in recording_lines(path) if line.strip()]
    return [
        sorted(member_steps(e for e in events if e.group == group), key=lambda e: e.ts_ms)
        for group in sorted({e.group for e in events})
    ]


def mev(type_: str, ts: int, member: str, gen: int = -1, **data: Any) -> Event:
    return Event(
        type=type_,
        ts_ms=ts,
        mono_ms=float(ts),
        seq=ts,
        group=FOLD_GROUP,
        member=member,
        member_id=f"{member}-id",
        client_id=f"{member}-client",
        host="10.0.0.1",
        generation=gen,
        source="member",
        data=data,
    )


def oev(type_: str, ts: int, gen: int = -1, **data: Any) -> Event:
    return Event(
        type=type_, ts_ms=ts, mono_ms=float(ts), seq=ts, group=FOLD_GROUP, generation=gen,
        source="observer", data=data,
    )  # fmt: skip


def two_member_eager_history() -> list[Event]:
    """m1 alone in generation 1, then m2 joins and generation 2 splits the partitions."""
    return [
        mev("MemberStarted", 1000, "m1"),
        mev("JoinGroupSent", 1010, "m1"),
        mev("JoinGroupReceived", 1100, "m1", 1, leader="m1-id", protocol="range"),
        mev("SyncGroupReceived", 1150, "m1", 1, partitions={"t": [0, 1, 2, 3]}),
        mev("JoinCompleted", 1160, "m1", 1, partitions={"t": [0, 1, 2, 3]}),
        mev("MemberStarted", 5000, "m2"),
        mev("JoinGroupSent", 5010, "m2"),
        mev("PartitionsRevoked", 5200, "m1", 1, partitions={"t": [0, 1, 2, 3]}),
        mev("JoinGroupSent", 5210, "m1", 1),
        mev("JoinGroupReceived", 5300, "m1", 2, leader="m1-id"),
        mev("JoinGroupReceived", 5300, "m2", 2, leader="m1-id"),
        mev("PartitionsAssigned", 5400, "m1", 2, partitions={"t": [0, 1]}),
        mev("JoinCompleted", 5400, "m1", 2),
        mev("PartitionsAssigned", 5450, "m2", 2, partitions={"t": [2, 3]}),
        mev("JoinCompleted", 5450, "m2", 2),
    ]


WATCH_GROUP = "billing"  # the classic group of the watch tests
KIP848_GROUP = "orders"  # the KIP-848 (`consumer` protocol) group


def member(
    mid: str, client: str, parts: list[int] | None, sub: tuple[str, ...] = ("t",)
) -> MemberSnapshot:
    """A classic group's member as DescribeGroups shows it (partitions None: mid-rebalance)."""
    return MemberSnapshot(
        member_id=mid,
        client_id=client,
        host="/10.1.1.1",
        subscription=sub,
        partitions=None if parts is None else {"t": parts},
    )


def snap(state: str, *members: MemberSnapshot, **kw: object) -> GroupSnapshot:
    return GroupSnapshot(
        group=WATCH_GROUP, state=state, protocol_type="consumer", protocol="range",
        coordinator="1 h:9092", members=members, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def infer(*snaps: GroupSnapshot) -> list[Event]:
    """The observer's events for snapshots taken one second apart (from 1000 ms)."""
    inf = Inferrer(snaps[0].group if snaps else WATCH_GROUP)
    out: list[Event] = []
    for i, s in enumerate(snaps):
        out += inf.observe(s, 1000 * (i + 1))
    return out


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events if e.type != "GroupObserved"]


def causes(events: list[Event]) -> list[tuple[int, str, bool]]:
    return [
        (e.generation, e.data["cause"], e.data["guess"])
        for e in events
        if e.type == "RebalanceAttributed"
    ]


def cmember(
    mid: str, epoch: int, parts: list[int], target: list[int] | None = None
) -> MemberSnapshot:
    """A KIP-848 member as ConsumerGroupDescribe shows it: owned and target partitions."""
    return MemberSnapshot(
        member_id=mid,
        client_id=f"c-{mid}",
        host="/10.0.0.7",
        subscription=("t",),
        partitions={"t": parts} if parts else {},
        member_epoch=epoch,
        target={"t": target if target is not None else parts}
        if (target if target is not None else parts)
        else {},
        member_type="consumer",
    )


def csnap(state: str, epoch: int, *members: MemberSnapshot, assigned: int = -1) -> GroupSnapshot:
    return GroupSnapshot(
        group=KIP848_GROUP,
        state=state,
        protocol_type="consumer",
        protocol="uniform",
        coordinator="1 h:9092",
        members=members,
        group_type="consumer",
        group_epoch=epoch,
        assignment_epoch=epoch if assigned < 0 else assigned,
    )


def die_with_parent() -> None:
    """Between fork and exec: the child gets SIGKILL when the test process dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no client outlives the tests


def verifiable_consumer(
    libs: Path,
    bootstrap: str,
    group: str,
    topic: str,
    *,
    protocol: str,
    properties: dict[str, str],
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.Popen[bytes], Path]:
    """Apache Kafka's Java VerifiableConsumer (kafka-tools jars in `libs`) in `group`,
    on `protocol` (classic or consumer), with these client properties; silent. Returns
    the process and its properties file (the caller deletes it once the JVM is up)."""
    props = libs.parent / f"verifiable-{group}-{properties.get('client.id', 'java')}.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    proc = subprocess.Popen(
        [java_executable(), "-cp", f"{libs}/*", "org.apache.kafka.tools.VerifiableConsumer",
         "--bootstrap-server", bootstrap, "--group-id", group, "--topic", topic,
         "--group-protocol", protocol, *extra, "--command-config", str(props)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - the tests spawn from their own thread
    )  # fmt: skip
    return proc, props


def group_with_offsets(bootstrap: str, topic: str, offset: int, prefix: str = "users-group") -> str:
    """A group someone else owns: empty, with a committed offset on `topic`-0."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()
    return group
