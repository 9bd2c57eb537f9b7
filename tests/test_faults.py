"""Faults on a real broker: the broker killed and restarted under `join` and `watch`.

A broker of this module's own (not the session one): it is SIGKILLed while a member
consumes and commits and a watch observes, then started again on the same port and data.
The member must rediscover the coordinator and complete a join again, committed offsets
must never go backwards, and the watch must report the outage and the recovery.
(`kgctl chaos`'s coordinator-failover scenario covers the three-node case.)
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kgctl.broker.local import LocalBroker

pytestmark = pytest.mark.kafka


class Proc:
    """A kgctl subprocess whose JSON-lines stdout is collected on a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgctl", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "KGCTL_BOOTSTRAP_SERVER"},
        )
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                continue

    def of(self, type_: str, after: float = 0.0) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["type"] == type_ and e["ts_ms"] >= after]

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.stderr()}"
            time.sleep(0.2)
        types = [e["type"] for e in self.events[-30:]]
        pytest.fail(f"no {what} within {timeout:.0f} s; last events: {types}")

    def wait_for_quietly(self, check: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.2)
        return None

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(doc) + "\n")
        self.proc.stdin.flush()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._thread.join(timeout=5)
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None or self.proc.stderr.closed:
            return ""
        text = self.proc.stderr.read()[-2000:]
        self.proc.stderr.close()
        return text


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    home: Path = tmp_path_factory.mktemp("kgctl-faults")
    broker = LocalBroker(home / "broker.json")
    broker.up(tie_to_parent=True, timeout_s=180)
    try:
        yield broker
    finally:
        broker.down()


# In a process of its own: kafka-python leaks a socket per refused connection, which
# would be unraisable ResourceWarnings (errors) in pytest while the broker is down.
PRODUCER = """
import sys, time
from kafka import KafkaProducer
producer = KafkaProducer(bootstrap_servers=sys.argv[1], linger_ms=5, retries=100)
n = 0
while True:
    try:
        producer.send(sys.argv[2], str(n).encode())
        n += 1
    except Exception:
        time.sleep(0.2)
    time.sleep(0.02)
"""


def test_broker_killed_and_restarted_under_join_and_watch(own_broker: LocalBroker) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    state = own_broker.load()
    assert state is not None
    bootstrap = state.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("faults-t", 2, 1)])
    admin.close()
    producing = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", PRODUCER, bootstrap, "faults-t"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    member = Proc(
        "join", "-g", "faults-g", "faults-t", "-b", bootstrap, "--output", "json",
        "--commit", "sync", "--session-timeout", "10000", "--heartbeat-interval", "500",
        "--timeout", "5", "--name", "m1",
    )  # fmt: skip
    watch: Proc | None = None
    try:
        member.wait_for("a first join", lambda: member.of("JoinCompleted"), 60)
        # Started once the group has a coordinator: a watch that cannot describe the
        # group at start exits 3 by design.
        watch = Proc(
            "watch", "faults-g", "-b", bootstrap, "--output", "json", "--interval", "0.5",
            "--timeout", "3",
        )  # fmt: skip
        member.wait_for("commits", lambda: len(member.of("OffsetsCommitted")) >= 3, 30)
        watch.wait_for("a group observed", lambda: watch.of("GroupObserved"), 30)

        killed_at = time.time() * 1000
        own_broker.stop_node(1)
        member.wait_for("CoordinatorLost", lambda: member.of("CoordinatorLost", killed_at), 30)
        watch.wait_for("BrokerDisconnected", lambda: watch.of("BrokerDisconnected", killed_at), 30)
        # Not a synchronisation: the outage itself. The member and the watch were seen
        # noticing it (above); two more seconds of it make them retry against no broker.
        time.sleep(2)
        own_broker.up(tie_to_parent=True, timeout_s=180)
        restarted_at = time.time() * 1000

        member.wait_for(
            "CoordinatorFound after the restart",
            lambda: member.of("CoordinatorFound", restarted_at - 1000),
            60,
        )
        if not member.wait_for_quietly(lambda: member.of("JoinCompleted", restarted_at - 1000), 15):
            # The coordinator reloaded the group with this member in it: no rebalance
            # was needed. A rejoin proves the rediscovered coordinator serves joins.
            member.send({"op": "rejoin"})
        member.wait_for(
            "a join completed after the restart",
            lambda: member.of("JoinCompleted", restarted_at - 1000),
            60,
        )
        member.wait_for(
            "a commit after the restart",
            lambda: member.of("OffsetsCommitted", restarted_at),
            60,
        )
        watch.wait_for("BrokerReconnected", lambda: watch.of("BrokerReconnected", killed_at), 60)
    finally:
        producing.kill()
        producing.wait()
        assert member.stop() == 0, member.stderr()
        if watch is not None:
            watch.stop()

    lost = member.of("CoordinatorLost", killed_at)[0]
    found = member.of("CoordinatorFound", restarted_at - 1000)[0]
    assert lost["seq"] < found["seq"]
    highest: dict[tuple[str, str], int] = {}
    for event in member.of("OffsetsCommitted"):
        for topic, partitions in event["data"]["offsets"].items():
            for partition, offset in partitions.items():
                key = (topic, partition)
                assert offset >= highest.get(key, -1), f"commit went back on {key}"
                highest[key] = offset
    disconnected = watch.of("BrokerDisconnected", killed_at)[0]
    reconnected = watch.of("BrokerReconnected", killed_at)[0]
    assert disconnected["seq"] < reconnected["seq"]
