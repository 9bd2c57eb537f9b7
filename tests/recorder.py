"""Record a real run: `kgctl join --output json` members as subprocesses, one JSONL file.

Used by the real-broker report test, and run by hand to regenerate the checked-in
fixture tests/data/two_members_growth.jsonl from a real broker:

    .venv/bin/python tests/recorder.py 127.0.0.1:19092 tests/data/two_members_growth.jsonl

and the explain fixtures (`KIND`: dead_member_growth, slow_member, busy_member,
dynamic_restart, static_restart, wire_dead_member_growth):

    .venv/bin/python tests/recorder.py 127.0.0.1:39887 tests/data/KIND.jsonl KIND
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any


class Recording:
    """Member processes of one group whose events land in one ordered list."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.events: list[dict[str, Any]] = []
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.retired: list[subprocess.Popen[str]] = []
        self._readers: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, name: str, *args: str, session_ms: int = 6000) -> None:
        cmd = [
            sys.executable, "-m", "kgctl", "join", "-b", self.bootstrap, "-g", self.group,
            "--name", name, "--output", "json", "--session-timeout", str(session_ms),
            "--heartbeat-interval", str(max(session_ms // 6, 100)),
            "-X", "metadata.max.age.ms=1000", *args,
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        if name in self.procs:
            self.retired.append(self.procs[name])  # a restart: closed with the others
        self.procs[name] = proc
        reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        reader.start()
        self._readers.append(reader)

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._lock:
                self.events.append(event)

    def of(self, name: str, type_: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["member"] == name and e["type"] == type_]

    def wait_converged(self, names: list[str], partitions: int, timeout: float = 40.0) -> int:
        """Wait until `names` completed one generation with disjoint, complete assignments."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lasts = [self.of(n, "JoinCompleted") for n in names]
            if all(lasts):
                done = [x[-1] for x in lasts]
                gens = {d["data"]["generation"] for d in done}
                owned = sorted(p for d in done for ids in d["data"]["assignment"].values()
                               for p in ids)  # fmt: skip
                pending = any(
                    e["seq"] > d["seq"] for n, d in zip(names, done, strict=True)
                    for e in self.of(n, "RejoinRequested")
                )  # fmt: skip
                if len(gens) == 1 and owned == list(range(partitions)) and not pending:
                    return gens.pop()
            time.sleep(0.2)
        raise AssertionError(f"{names} did not converge on {partitions} partitions")

    def stop(self, name: str, sig: int = signal.SIGTERM) -> int:
        proc = self.procs[name]
        proc.send_signal(sig)
        return proc.wait(timeout=20)

    def close(self) -> None:
        every = [*self.retired, *self.procs.values()]
        for proc in every:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            if proc.stdin is not None:
                proc.stdin.close()
        for reader in self._readers:
            reader.join(timeout=5)
        for proc in every:
            if proc.stdout is not None:
                proc.stdout.close()

    def write(self, path: Path) -> None:
        with self._lock:
            ordered = sorted(self.events, key=lambda e: (e["ts_ms"], e["member"], e["seq"]))
        path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in ordered))


def create_topic(bootstrap: str, partitions: int) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient, NewTopic

    name = f"kgctl-report-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def grow_topic(bootstrap: str, topic: str, total: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient, NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_partitions({topic: NewPartitions(total_count=total)})
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, count: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(count):
            producer.send(topic, str(i).encode())
        producer.flush()
    finally:
        producer.close()


def wait_for(rec: Recording, name: str, type_: str, count: int = 1, timeout: float = 40.0) -> None:
    """Wait until `name` emitted `count` events of `type_`."""
    deadline = time.monotonic() + timeout
    while len(rec.of(name, type_)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} emitted no {type_} within {timeout}s")
        time.sleep(0.1)


def record_dead_member_growth(bootstrap: str, out: Path, session_ms: int = 6000) -> str:
    """a, b, c join a 4-partition topic; c is SIGKILLed and the topic grows to 8 at once:
    the leader rejoins for the new partitions and the join waits for c's session timeout."""
    topic = create_topic(bootstrap, 4)
    group = f"kgctl-explain-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    try:
        # a first, so that it leads: only the leader rejoins for new partitions.
        rec.start("a", topic, session_ms=session_ms)
        rec.wait_converged(["a"], 4)
        for name in ("b", "c"):
            rec.start(name, topic, session_ms=session_ms)
        rec.wait_converged(["a", "b", "c"], 4)
        rec.stop("c", signal.SIGKILL)
        grow_topic(bootstrap, topic, 8)
        rec.wait_converged(["a", "b"], 8, timeout=session_ms / 1000 + 30)
        rec.stop("b")
        rec.stop("a")
    finally:
        rec.close()
        rec.write(out)
    return group


def record_slow_member(bootstrap: str, out: Path, max_poll_ms: int = 2000) -> str:
    """a and b join; b spends 2 x max.poll.interval.ms on one batch: it leaves the group
    (PollIntervalExceeded), the group rebalances without it, and it joins again."""
    topic = create_topic(bootstrap, 2)
    group = f"kgctl-explain-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    try:
        rec.start("a", topic, "--max-poll-interval", str(max_poll_ms))
        rec.start(
            "b", topic, "--max-poll-interval", str(max_poll_ms),
            "--processing-ms", str(2 * max_poll_ms), "--max-records", "1000000",
        )  # fmt: skip
        rec.wait_converged(["a", "b"], 2)
        produce(bootstrap, topic, 20)
        wait_for(rec, "b", "PollIntervalExceeded")
        count = len(rec.of("b", "JoinCompleted"))
        wait_for(rec, "b", "JoinCompleted", count + 1)
        rec.stop("b", signal.SIGKILL)
        rec.stop("a")
    finally:
        rec.close()
        rec.write(out)
    return group


def record_restart(bootstrap: str, out: Path, static: bool, session_ms: int = 6000) -> str:
    """a and b join; b is stopped (SIGTERM) and started again under the same name: a
    dynamic b leaves and joins with a new member id; a static one (group.instance.id)
    comes back within its session timeout."""
    topic = create_topic(bootstrap, 4)
    group = f"kgctl-explain-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    ids = {n: ("--instance-id", f"{group}-{n}") if static else () for n in ("a", "b")}
    try:
        rec.start("a", topic, *ids["a"], session_ms=session_ms)
        rec.wait_converged(["a"], 4)
        rec.start("b", topic, *ids["b"], session_ms=session_ms)
        rec.wait_converged(["a", "b"], 4)
        rec.stop("b")
        count = len(rec.of("b", "JoinCompleted"))
        rec.start("b", topic, *ids["b"], session_ms=session_ms)
        wait_for(rec, "b", "JoinCompleted", count + 1)
        rec.wait_converged(["a", "b"], 4)
        rec.stop("b")
        rec.stop("a")
    finally:
        rec.close()
        rec.write(out)
    return group


def record_scale_out(bootstrap: str, out: Path, assignor: str = "range") -> str:
    """a and b share 6 partitions; c joins (each member with `assignor`)."""
    topic = create_topic(bootstrap, 6)
    group = f"kgctl-explain-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    try:
        rec.start("a", topic, "--assignor", assignor)
        rec.wait_converged(["a"], 6)
        rec.start("b", topic, "--assignor", assignor)
        rec.wait_converged(["a", "b"], 6)
        rec.start("c", topic, "--assignor", assignor)
        rec.wait_converged(["a", "b", "c"], 6)
        for name in ("c", "b", "a"):
            rec.stop(name)
    finally:
        rec.close()
        rec.write(out)
    return group


class Trickle(threading.Thread):
    """Produces `count` records every `every_s` until stopped: a consumer that polls
    always finds a batch."""

    def __init__(self, bootstrap: str, topic: str, count: int = 5, every_s: float = 0.3):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.count, self.every_s = bootstrap, topic, count, every_s
        self.stopping = threading.Event()

    def run(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap)
        try:
            # The pace of the records, not a synchronisation: wait() returns early on stop.
            while not self.stopping.wait(self.every_s):
                for i in range(self.count):
                    producer.send(self.topic, str(i).encode())
                producer.flush()
        finally:
            producer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def record_busy_member(bootstrap: str, out: Path, processing_ms: int = 2500) -> str:
    """a processes each batch for `processing_ms` and always finds another (records keep
    coming); b joins: the join waits for a to finish the batch it is on."""
    topic = create_topic(bootstrap, 2)
    group = f"kgctl-explain-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    trickle = Trickle(bootstrap, topic)
    try:
        rec.start("a", topic, "--processing-ms", str(processing_ms), "--max-poll-interval", "60000")
        rec.wait_converged(["a"], 2)
        trickle.start()
        wait_for(rec, "a", "RecordsConsumed", 2)  # busy: one batch done, the next begun
        rec.start("b", topic, "--max-poll-interval", "60000")
        rec.wait_converged(["a", "b"], 2, timeout=60)
        rec.stop("b")
        rec.stop("a", signal.SIGKILL)
    finally:
        trickle.stop()
        rec.close()
        rec.write(out)
    return group


PLAIN_CONSUMER = """
import sys, warnings
warnings.simplefilter("ignore")
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], group_id=sys.argv[3],
                  client_id=sys.argv[4], session_timeout_ms=6000, heartbeat_interval_ms=1000,
                  metadata_max_age_ms=1000)
try:
    while True:
        c.poll(timeout_ms=200)
finally:
    c.close()
"""


def record_wire_dead_member_growth(bootstrap: str, out: Path) -> str:
    """Plain kafka-python consumers app-a, app-b, app-c behind `kgctl proxy` (its wire
    trace is the recording): app-c is SIGKILLed and the topic grown from 4 to 8."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    topic = create_topic(bootstrap, 4)
    group = f"kgctl-wire-{uuid.uuid4().hex[:8]}"
    proxy = subprocess.Popen(
        [sys.executable, "-m", "kgctl", "proxy", "-b", bootstrap, "--listen",
         f"127.0.0.1:{port}", "--record", str(out), "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    consumers: dict[str, subprocess.Popen[str]] = {}
    try:
        assert proxy.stdout is not None
        proxy.stdout.readline()  # ProxyStarted: it listens
        for name in ("app-a", "app-b", "app-c"):
            consumers[name] = subprocess.Popen(
                [sys.executable, "-c", PLAIN_CONSUMER, f"127.0.0.1:{port}", topic, group, name]
            )
            time.sleep(1.5)  # joins one at a time, app-a first (it leads): not a sync
        time.sleep(5)  # the group settles on 4 partitions (no events to wait on: plain)
        consumers["app-c"].kill()
        grow_topic(bootstrap, topic, 8)
        time.sleep(12)  # app-c's 6 s session times out and the group settles on 8
    finally:
        for proc in consumers.values():
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=20)
        proxy.terminate()
        proxy.wait(timeout=20)
        if proxy.stdout is not None:
            proxy.stdout.close()
    return group


def record_two_members(bootstrap: str, out: Path, grow: bool = True) -> str:
    """a joins; b joins; (the topic grows 4 -> 6); b leaves on SIGTERM; a stops."""
    topic = create_topic(bootstrap, 4)
    group = f"kgctl-report-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    try:
        rec.start("a", topic)
        rec.wait_converged(["a"], 4)
        rec.start("b", topic)
        rec.wait_converged(["a", "b"], 4)
        partitions = 4
        if grow:
            grow_topic(bootstrap, topic, 6)
            partitions = 6
            rec.wait_converged(["a", "b"], partitions)
        rec.stop("b")
        rec.wait_converged(["a"], partitions)
        rec.stop("a")
    finally:
        rec.close()
        rec.write(out)
    return group


def record_static_replaced(bootstrap: str, out: Path, session_ms: int = 6000) -> str:
    """a, a static member with range, alone in its group; a second process (a2) joins with
    a's group.instance.id, roundrobin first: the broker hands it the identity (a is
    fenced) and, the group's assignor changing with it, rebalances."""
    topic = create_topic(bootstrap, 2)
    group = f"kgctl-explain-{uuid.uuid4().hex[:8]}"
    rec = Recording(bootstrap, group)
    iid = ("--instance-id", f"{group}-a")
    try:
        rec.start("a", topic, *iid, "--assignor", "range", session_ms=session_ms)
        rec.wait_converged(["a"], 2)
        rec.start(
            "a2", topic, *iid, "--assignor", "roundrobin", "--assignor", "range",
            session_ms=session_ms,
        )  # fmt: skip
        wait_for(rec, "a", "MemberFailed")
        rec.wait_converged(["a2"], 2)
        rec.stop("a2")
    finally:
        rec.close()
        rec.write(out)
    return group


RECORDERS = {
    "static_replaced": record_static_replaced,
    "two_members_growth": record_two_members,
    "dead_member_growth": record_dead_member_growth,
    "slow_member": record_slow_member,
    "busy_member": record_busy_member,
    "wire_dead_member_growth": record_wire_dead_member_growth,
    "dynamic_restart": lambda b, out: record_restart(b, out, static=False),
    "static_restart": lambda b, out: record_restart(b, out, static=True),
}

if __name__ == "__main__":
    # recorder.py BOOTSTRAP OUT [KIND], KIND one of RECORDERS (default two_members_growth)
    kind = sys.argv[3] if len(sys.argv) > 3 else "two_members_growth"
    print(RECORDERS[kind](sys.argv[1], Path(sys.argv[2])))
