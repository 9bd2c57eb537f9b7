"""Apache Kafka's Java consumer (kafka-tools' VerifiableConsumer) reporting what it itself
saw, in the truth suite's JSON lines: the same interface as client_rdkafka.py. The JVM's
own rebalance listener prints `partitions_assigned` and `partitions_revoked` with its
clock; this wrapper turns each into an `assigned` / `revoked` line with the partitions
the member owns after it. kgctl never reads it.

usage: client_java.py NAME GROUP TOPIC BOOTSTRAP [key=value ...]

The keys are the suite's (librdkafka's names): `group.protocol=consumer` and
`partition.assignment.strategy` choose the protocol and the assignor; the rest are Java
client properties of the same name. Commands on stdin, one a line: `stop` (SIGTERM: the
VerifiableConsumer's shutdown hook closes the consumer, a LeaveGroup on the classic
protocol). The harness kills this wrapper with SIGKILL; the JVM dies with it (the
kernel's parent-death signal), as a killed client does, without a word to the group.

VerifiableConsumer's listener reports a lost partition as revoked (Java's default
`onPartitionsLost`): a lost is a `revoked` line here.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from clientlib import Out

from kgctl.broker.provision import java_executable, resolve_kafka_tools

name, group, topic, bootstrap = sys.argv[1:5]
extra = dict(kv.split("=", 1) for kv in sys.argv[5:])
protocol = "consumer" if extra.pop("group.protocol", "classic") == "consumer" else "classic"
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
assignor = ASSIGNORS[extra.pop("partition.assignment.strategy", "range")]
session = extra.pop("session.timeout.ms", None)
report = Out(name).report


def die_with_wrapper() -> None:
    """Between fork and exec: the JVM gets SIGKILL the moment this wrapper dies."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


properties = {
    "client.id": name,
    # The growth situation: the members must see new partitions within seconds.
    "metadata.max.age.ms": "1000",
    **extra,
}
fd, props_path = tempfile.mkstemp(prefix=f"truth-{name}-", suffix=".properties")
with os.fdopen(fd, "w") as fh:
    fh.writelines(f"{k}={v}\n" for k, v in properties.items())
libs = resolve_kafka_tools()
# The class-data archive the suite makes once per session (conftest.py): half a JVM's
# start-up CPU, with dozens of JVMs starting on two cores. Without it, this member
# writes it as it exits.
archive = os.environ.get("KGCTL_TRUTH_JAVA_CDS", "")
sharing = []
if archive:
    exists = Path(archive).exists()
    sharing = [
        f"-XX:SharedArchiveFile={archive}" if exists else f"-XX:ArchiveClassesAtExit={archive}"
    ]
command = [
    java_executable(),
    # A small heap and the quick JIT tier: the suite runs dozens of these on two cores.
    *("-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *sharing),
    "-cp",
    f"{libs}/*",
    "org.apache.kafka.tools.VerifiableConsumer",
    *("--bootstrap-server", bootstrap, "--group-id", group, "--topic", topic),
    *("--group-protocol", protocol.upper(), "--reset-policy", "earliest"),
    "--command-config",
    props_path,
]
if protocol == "classic":
    command += ["--assignment-strategy", assignor]
    if session is not None:
        command += ["--session-timeout", session]
jvm = subprocess.Popen(
    command,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    preexec_fn=die_with_wrapper,  # noqa: PLW1509 - spawned before any other thread starts
)
owns: set[int] = set()


def mine(raw: Any) -> list[int]:
    return sorted(
        int(tp["partition"])
        for tp in raw or []
        if isinstance(tp, dict)
        and tp.get("topic") == topic
        and isinstance(tp.get("partition"), int)
    )


def translate() -> None:
    assert jvm.stdout is not None
    for line in jvm.stdout:
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        what, ts = raw.get("name"), raw.get("timestamp")
        if what == "startup_complete":
            os.unlink(props_path)  # the JVM has read it
            report("started", ts, config={**properties, "group.protocol": protocol})
        elif what == "partitions_assigned":
            parts = mine(raw.get("partitions"))
            owns.update(parts)
            report("assigned", ts, partitions=parts, owns=sorted(owns))
        elif what == "partitions_revoked":
            parts = mine(raw.get("partitions"))
            owns.difference_update(parts)
            report("revoked", ts, partitions=parts, owns=sorted(owns))
        elif what == "shutdown_complete":
            report("closed", ts)


said: list[str] = []  # the JVM's last lines on stderr, for an `error` if it dies


def keep_stderr() -> None:
    assert jvm.stderr is not None
    for line in jvm.stderr:
        said[:] = [*said[-9:], line.rstrip()]


def watch_jvm() -> None:
    """A JVM that ends before it was told to says why (the harness shows `error` lines)."""
    code = jvm.wait()
    if not stopping.is_set():
        report("error", error=f"the JVM exited {code}: " + " | ".join(said))


stopping = threading.Event()
reader = threading.Thread(target=translate, daemon=True)
reader.start()
threading.Thread(target=keep_stderr, daemon=True).start()
threading.Thread(target=watch_jvm, daemon=True).start()
# Commands until `stop` or the harness goes away (stdin closed): never outlive it.
for command_line in sys.stdin:
    if command_line.strip() == "stop":
        break
stopping.set()
report("closing")
jvm.send_signal(signal.SIGTERM)
try:
    jvm.wait(timeout=30)
except subprocess.TimeoutExpired:
    jvm.kill()
    jvm.wait()
reader.join(timeout=5)
Path(props_path).unlink(missing_ok=True)
