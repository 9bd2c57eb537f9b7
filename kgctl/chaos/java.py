"""Java members in a chaos fleet: Apache Kafka's VerifiableConsumer, its output read as events.

A fleet member with `client: java` is Apache Kafka's own `VerifiableConsumer` (the
kafka-tools jars, `resolve_kafka_tools`) on the classic or the consumer protocol: the
Java client's membership code, not kgctl's. It prints one JSON object per line
(`startup_complete`, `partitions_revoked`, `partitions_assigned`, `records_consumed`,
`offsets_committed`, `shutdown_complete`); `java_event` turns each into the event kgctl
members emit for the same step, so the fold, the checks and the judge see one schema.

What a VerifiableConsumer does not report, these events do not claim: no generation or
member epoch (the envelope's generation is -1), no member id, no JoinGroup or heartbeat
steps. The runner judges such members by what they own (docs/scenarios.md).

`java_command` is the command line; `JavaMember` is the `MemberHandle` of one running
VerifiableConsumer: its stdout carries the translated events, it takes no control lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kgctl.model.events import Event

# kgctl's classic assignor names as the Java client's classes.
JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
# A small heap and the quick JIT tier: a fleet may hold a dozen of these on two cores.
JVM_FLAGS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def _partitions(raw: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in raw if isinstance(raw, list) else []:
        if isinstance(tp, dict) and isinstance(tp.get("partition"), int):
            out.setdefault(str(tp.get("topic")), []).append(int(tp["partition"]))
    return {t: sorted(ids) for t, ids in sorted(out.items())}


def _batches(raw: Any) -> list[dict[str, Any]]:
    out = []
    for b in raw if isinstance(raw, list) else []:
        if not isinstance(b, dict) or not isinstance(b.get("partition"), int):
            continue
        first, last = b.get("minOffset"), b.get("maxOffset")
        if isinstance(first, int) and isinstance(last, int):
            out.append(
                {
                    "topic": str(b.get("topic")),
                    "partition": int(b["partition"]),
                    "first": first,
                    "last": last,
                    "count": int(b.get("count") or last - first + 1),
                }
            )
    return out


def _offsets(raw: Any) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for c in raw if isinstance(raw, list) else []:
        # A negative offset is a client's "no offset", not a commit: librdkafka's
        # commit() lists the partitions it had nothing to commit for at -1001
        # (RD_KAFKA_OFFSET_INVALID), and sends none of them. A program printing that
        # list as it is would otherwise have "committed" backwards.
        if isinstance(c, dict) and isinstance(c.get("offset"), int) and c["offset"] >= 0:
            out.setdefault(str(c.get("topic")), {})[str(c.get("partition"))] = int(c["offset"])
    return out


def _data(
    name: str, raw: dict[str, Any], config: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The kgctl event type and data for one VerifiableConsumer line (None: not a step)."""
    if name == "startup_complete":
        # The fields of a kgctl member's MemberStarted that the launch knows.
        # `reports_generation`: the fold must not wait for this member's generation.
        return "MemberStarted", {"config": dict(config), "client": {}, "reports_generation": False}
    if name == "partitions_assigned":
        return "PartitionsAssigned", {"partitions": _partitions(raw.get("partitions"))}
    if name == "partitions_revoked":
        return "PartitionsRevoked", {"partitions": _partitions(raw.get("partitions"))}
    if name == "records_consumed":
        batches = _batches(raw.get("partitions"))
        return "RecordsConsumed", {"batches": batches, "count": sum(b["count"] for b in batches)}
    if name == "offsets_committed":
        offsets = _offsets(raw.get("offsets"))
        if raw.get("success", True):
            return "OffsetsCommitted", {"offsets": offsets}
        return "OffsetCommitFailed", {"offsets": offsets, "error": str(raw.get("error") or "")}
    if name == "shutdown_complete":
        return "MemberStopped", {"reason": "SIGTERM (VerifiableConsumer shut down)"}
    return None


# Set in an event's data when its line had no "timestamp" of its own: its time is when
# kgctl read the line, an upper bound of when the app did it (the judge allows for that).
READ_STAMPED = "read_stamped"


def java_event(
    line: str,
    *,
    member: str,
    group: str,
    client_id: str,
    pid: int,
    seq: int,
    now_ms: int,
    mono_ms: float = 0.0,
    config: dict[str, Any] | None = None,
) -> Event | None:
    """One VerifiableConsumer output line as a kgctl event (None: not JSON, or not a step
    kgctl folds). Its own timestamp wins over `now_ms` when it has one."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    found = _data(str(raw.get("name", "")), raw, config or {})
    if found is None:
        return None
    type_, data = found
    ts = raw.get("timestamp")
    if not isinstance(ts, int) or ts <= 0:
        ts = now_ms
        data[READ_STAMPED] = True
    return Event(
        type=type_,
        ts_ms=ts,
        mono_ms=mono_ms,
        seq=seq,
        group=group,
        member=member,
        client_id=client_id,
        host=socket.gethostname(),
        pid=pid,
        generation=-1,  # a VerifiableConsumer does not say
        data=data,
    )


def java_command(
    java: str,
    libs: Path,
    *,
    bootstrap: str,
    group: str,
    topic: str,
    protocol: str,
    properties: Path,
    instance_id: str | None = None,
    assignors: list[str] | None = None,
    remote_assignor: str | None = None,
    session_timeout_ms: int | None = None,
    auto_commit: bool = False,
) -> list[str]:
    """The VerifiableConsumer command line for one member. On the consumer protocol the
    session and heartbeat are the broker's, and the assignor is the broker's
    (`remote_assignor`): the Java client refuses the classic settings there."""
    cmd = [java, *JVM_FLAGS, "-cp", f"{libs}/*", "org.apache.kafka.tools.VerifiableConsumer"]
    cmd += ["--bootstrap-server", bootstrap, "--group-id", group, "--topic", topic]
    cmd += ["--group-protocol", protocol.upper(), "--reset-policy", "earliest"]
    if instance_id:
        cmd += ["--group-instance-id", instance_id]
    if protocol == "consumer":
        if remote_assignor:
            cmd += ["--group-remote-assignor", remote_assignor]
    else:
        if session_timeout_ms:
            cmd += ["--session-timeout", str(session_timeout_ms)]
        names = [JAVA_ASSIGNORS[a] for a in assignors or [] if a in JAVA_ASSIGNORS]
        if names:
            cmd += ["--assignment-strategy", ",".join(names)]
    if auto_commit:
        cmd += ["--enable-autocommit"]
    cmd += ["--consumer.config", str(properties)]
    return cmd


def write_properties(path: Path, properties: dict[str, str]) -> Path:
    """The member's client properties, private to this user (they may hold secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        for key, value in properties.items():
            fh.write(f"{key}={value}\n")
    return path


class JavaMember:
    """A running VerifiableConsumer as a `MemberHandle`: `stdout` yields kgctl events as
    JSON lines (translated on a thread as the JVM prints them); no control lines."""

    def __init__(
        self,
        proc: subprocess.Popen[str],
        translate: Callable[[str, int], Event | None],
    ) -> None:
        self._proc = proc
        self.pid = proc.pid
        self.stdin: IO[str] | None = None
        self.stderr: IO[str] | None = proc.stderr
        read_fd, write_fd = os.pipe()
        self.stdout: IO[str] | None = os.fdopen(read_fd, "r", encoding="utf-8")
        self._out = os.fdopen(write_fd, "w", encoding="utf-8", buffering=1)
        self._translate = translate
        threading.Thread(target=self._pump, name=f"kgctl-java-{proc.pid}", daemon=True).start()

    def _pump(self) -> None:
        seq = 0
        assert self._proc.stdout is not None
        try:
            with contextlib.suppress(OSError, ValueError):
                for line in self._proc.stdout:
                    seq += 1
                    event = self._translate(line, seq)
                    if event is not None:
                        self._out.write(event.to_json() + "\n")
        finally:
            # The fleet's reader sees the end of the member's events, whatever happened.
            with contextlib.suppress(OSError):
                self._out.close()

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._proc.wait(timeout)

    def send_signal(self, sig: int) -> None:
        self._proc.send_signal(sig)

    def kill(self) -> None:
        self._proc.kill()


def translator(
    member: str, group: str, client_id: str, pid: int, config: dict[str, Any] | None = None
) -> Callable[[str, int], Event | None]:
    def translate(line: str, seq: int) -> Event | None:
        return java_event(
            line,
            member=member,
            group=group,
            client_id=client_id,
            pid=pid,
            seq=seq,
            now_ms=int(time.time() * 1000),
            mono_ms=round(time.monotonic() * 1000, 3),
            config=config,
        )

    return translate
