"""The conformance suite: each situation of conformance_situations.py, applied through
`kgctl proxy` to one member on the real broker, once with Java's VerifiableConsumer
4.4.0 (classic protocol) and once with `kgctl join` (and, for some, kcat); the two
traces are normalised (conformance_form.py) and every difference must be in the
allow-list of docs/member.md.

Every run has its own topic, group and client ids; the proxy is shared and its rules
name the run's client id. The runs go side by side on a pool of RUN_WORKERS threads
(at most JVM_SLOTS VerifiableConsumers at a time): the module's first test runs them
all, each test then judges one situation.

KGCTL_CONFORMANCE_DUMP=FILE writes every run's normalised trace to FILE (JSON).
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conformance_form import (
    Callback,
    Mark,
    Request,
    Trace,
    commit_failure,
    compare,
    normalise,
    partitions,
    read_allow_list,
    steady,
    unexplained,
)
from conformance_situations import SITUATIONS, Situation
from helpers import MemberProc, die_with_parent

from kgctl.broker.provision import java_executable, resolve_kafka_tools
from kgctl.model.events import Event
from kgctl.proxy.faults import parse_rule
from kgctl.proxy.runner import ProxyThread
from kgctl.settings import ClientSettings

pytestmark = pytest.mark.kafka

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )

ROOT = Path(__file__).resolve().parents[2]
MEMBER_DOC = ROOT / "docs" / "member.md"
RUN_WORKERS = 4
JVM_SLOTS = 2
SETTLE_S = 40.0  # a rejoin after a reset waits out the old member's 6 s session, twice
START_S = 45.0
JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
SETTINGS = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "500",
    "retry.backoff.ms": "100",
    "metadata.max.age.ms": "1000",
}
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms")
KCAT = shutil.which("kcat")
# kcat prints no time: its rebalance lines are stamped when read from its stderr pipe,
# which on two busy cores was seen more than 10 ms after the call (librdkafka sends the
# JoinGroup only once kcat's callback has given the partitions up).
KCAT_STAMP_LAG_MS = 50.0


@dataclass
class Run:
    """What one client did in one situation."""

    situation: str
    client: str  # java, kgctl, librdkafka
    client_id: str = ""
    requests: list[Request] = field(default_factory=list)
    callbacks: list[Callback] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    since_ms: float = 0.0
    armed: list[str] = field(default_factory=list)  # rule texts
    applied: set[str] = field(default_factory=set)  # rule texts that applied at least once
    problem: str = ""  # why the situation did not happen as scripted
    trace: Trace | None = None
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)  # what kcat printed besides rebalances


# -- members ----------------------------------------------------------------------------


class Member:
    """The member under test: a client process whose listener calls are collected."""

    client_id: str
    topic: str
    proc: subprocess.Popen[str]

    def callbacks(self) -> list[Callback]:
        raise NotImplementedError

    def subscribe(self, topics: list[str]) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot change its subscription")

    def label(self, topic: str, partition: int) -> str:
        """A partition as the steps show it: its number on the situation's topic, `bN` on
        the topic a subscription change adds."""
        return str(partition) if topic == self.topic else f"b{partition}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._join_reader()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _join_reader(self) -> None:
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.join(5)


def _java_callbacks(member: Member, lines: list[dict[str, Any]], commits: bool) -> list[Callback]:
    """Callbacks from VerifiableConsumer's JSON lines (ResubscribingMember prints the same)."""
    kinds = {"partitions_assigned": "assigned", "partitions_revoked": "revoked_or_lost"}
    out = []
    for x in lines:
        at = float(x["timestamp"])
        if x.get("name") in kinds:
            labels = [member.label(p["topic"], int(p["partition"])) for p in x["partitions"]]
            out.append(Callback(at, kinds[x["name"]], partitions(labels)))
        elif commits and x.get("name") == "offsets_committed" and not x.get("success", True):
            out.append(Callback(at, "commit failed", commit_failure(str(x.get("error")))))
    return out


class JavaMember(Member):
    """VerifiableConsumer; its JSON lines (with their own timestamps) read on a thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, s: Situation, cid: str) -> None:
        self.client_id, self.topic, self.commits = cid, topic, s.commit == "sync"
        self.lines: list[dict[str, Any]] = []
        props = {"client.id": cid, **_settings(s)}
        self.props = _properties(props)
        extra = ["--group-protocol", s.protocol.upper()]
        if s.protocol == "classic":
            extra += ["--assignment-strategy", JAVA_ASSIGNORS[s.assignor]]
        if s.commit == "auto":
            extra.append("--enable-autocommit")
        if s.static:
            extra += ["--group-instance-id", f"{cid}-instance"]
        self.proc = subprocess.Popen(
            [java_executable(), "-cp", f"{resolve_kafka_tools()}/*",
             "org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", bootstrap,
             "--group-id", group, "--topic", topic, *extra,
             "--command-config", str(self.props)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, preexec_fn=die_with_parent,  # noqa: PLW1509 - a pool thread lives as long
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def callbacks(self) -> list[Callback]:
        return _java_callbacks(self, list(self.lines), self.commits)

    def stop(self) -> None:
        super().stop()
        self._join_reader()
        self.props.unlink(missing_ok=True)

    def kill(self) -> None:
        super().kill()
        self.props.unlink(missing_ok=True)


def _settings(s: Situation) -> dict[str, str]:
    """The client settings of a run: a consumer-protocol member takes its session and
    heartbeat interval from the broker (Java refuses them with group.protocol=consumer)."""
    if s.protocol == "consumer":
        return {k: v for k, v in SETTINGS.items() if k not in CLASSIC_ONLY}
    return dict(SETTINGS)


def _properties(props: dict[str, str]) -> Path:
    fd, name = tempfile.mkstemp(suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return Path(name)


class ResubscribingJavaMember(JavaMember):
    """ResubscribingMember.java (the Java client itself, kafka-clients 4.4.0): a Java member
    whose subscription the situation changes, which VerifiableConsumer cannot do."""

    classes: Path | None = None  # compiled once per module (the `java_classes` fixture)

    def __init__(self, bootstrap: str, group: str, topic: str, s: Situation, cid: str) -> None:
        assert self.classes is not None
        self.client_id, self.topic, self.commits = cid, topic, s.commit == "sync"
        self.lines = []
        props = {"client.id": cid, **SETTINGS, "bootstrap.servers": bootstrap, "group.id": group}
        props["partition.assignment.strategy"] = JAVA_ASSIGNORS[s.assignor]
        props["enable.auto.commit"] = "true" if s.commit == "auto" else "false"
        if s.static:
            props["group.instance.id"] = f"{cid}-instance"
        self.props = _properties(props)
        self.proc = subprocess.Popen(
            [java_executable(), "-cp", f"{self.classes}:{resolve_kafka_tools()}/*",
             "ResubscribingMember", str(self.props), topic],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, preexec_fn=die_with_parent,  # noqa: PLW1509 - a pool thread lives as long
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def subscribe(self, topics: list[str]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("subscribe " + ",".join(topics) + "\n")
        self.proc.stdin.flush()


class KgctlMember(Member):
    def __init__(self, bootstrap: str, group: str, topic: str, s: Situation, cid: str) -> None:
        self.client_id, self.topic, self.commits = cid, topic, s.commit == "sync"
        args = ["--client-id", cid, "--commit", s.commit]
        if s.protocol == "classic":
            args += ["--assignor", s.assignor]
        args += ["--from", "earliest", "-X", f"retry.backoff.ms={SETTINGS['retry.backoff.ms']}"]
        if s.static:
            args += ["--instance-id", f"{cid}-instance"]
        self.m = MemberProc(bootstrap, group, topic, *args, name=cid, protocol=s.protocol)
        self.proc = self.m.proc

    def callbacks(self) -> list[Callback]:
        kinds = {
            "PartitionsAssigned": "assigned",
            "PartitionsRevoked": "revoked",
            "PartitionsLost": "lost",
        }
        out = []
        for e in list(self.m.events):
            at = float(e["ts_ms"])
            if e["type"] in kinds:
                labels = [self.label(t, p) for t, ps in e["data"]["partitions"].items() for p in ps]
                out.append(Callback(at, kinds[e["type"]], partitions(labels)))
            elif self.commits and e["type"] == "OffsetCommitFailed":
                out.append(Callback(at, "commit failed", commit_failure(str(e["data"]["error"]))))
        return out

    def subscribe(self, topics: list[str]) -> None:
        self.m.send({"op": "subscribe", "topics": topics})

    def stop(self) -> None:
        super().stop()
        self.m._reader.join(5)

    def kill(self) -> None:
        self.m.kill()


class KcatMember(Member):
    """kcat -G: librdkafka's balanced consumer; its rebalance lines read from stderr (with
    the time each line was read: kcat prints no timestamp)."""

    def __init__(self, bootstrap: str, group: str, topic: str, s: Situation, cid: str) -> None:
        assert KCAT is not None
        self.client_id, self.topic = cid, topic
        self.lines: list[tuple[float, str]] = []
        conf = {
            "client.id": cid,
            # librdkafka 2.0.2 (kcat 1.7's) has no consumer retry.backoff.ms: it warns, ignores it.
            **{k: v for k, v in SETTINGS.items() if k != "retry.backoff.ms"},
            "partition.assignment.strategy": s.assignor,
            "enable.auto.commit": "true" if s.commit == "auto" else "false",
        }
        if s.static:
            conf["group.instance.id"] = f"{cid}-instance"
        args = [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]
        self.proc = subprocess.Popen(
            [KCAT, "-b", bootstrap, "-G", group, topic, "-o", "beginning", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, preexec_fn=die_with_parent,  # noqa: PLW1509
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.time() * 1000, line.strip()))

    def callbacks(self) -> list[Callback]:
        out = []
        for at, line in list(self.lines):
            if "rebalanced" not in line:
                continue
            kind = "assigned" if "assigned:" in line else "revoked" if "revoked:" in line else ""
            if not kind:
                continue
            body = line.split(kind + ":", 1)[1]
            labels = [self.label(t, int(p)) for t, p in _KCAT_PARTITION.findall(body)]
            out.append(Callback(at, kind, partitions(labels), KCAT_STAMP_LAG_MS))
        return out

    def noise(self) -> list[str]:
        """What kcat printed besides its rebalance lines (errors it was told of)."""
        return [line for _, line in list(self.lines) if "rebalanced" not in line]


# kcat's rebalance line lists partitions as `topic [N]`.
_KCAT_PARTITION = re.compile(r"([\w.-]+) \[(\d+)\]")


MEMBERS: dict[str, type[Member]] = {
    "java": JavaMember,
    "java-resubscribing": ResubscribingJavaMember,
    "kgctl": KgctlMember,
    "librdkafka": KcatMember,
}


# -- the proxy's trace ---------------------------------------------------------------------


# A ConsumerGroupHeartbeat request's optional fields as the proxy traces them, each with
# the value that means "not sent" (null, or -1 for the rebalance timeout), by the name a
# step shows.
CGH_FIELDS = (
    ("instance_id", "instance_id", None),
    ("rebalance_timeout", "rebalance_timeout_ms", -1),
    ("topics", "subscription", None),
    ("regex", "regex", None),
    ("assignor", "server_assignor", None),
    ("owned", "owned", None),
)


def _heartbeat_request(
    e: Event, label: Callable[[str, int], str], names: dict[str, str]
) -> Request:
    """A ConsumerGroupHeartbeat from its traced event: the member epoch sent (as
    `generation`), the optional fields it carried, owned partitions and the answer's
    assignment as labels (topic ids named by `names`)."""
    d = e.data
    req, resp = d.get("request") or {}, d.get("response") or {}

    def labels(by_id: dict[str, list[int]] | None) -> tuple[str, ...] | None:
        if by_id is None:
            return None
        return tuple(label(names.get(t, t), int(p)) for t, ps in by_id.items() for p in ps)

    return Request(
        api="ConsumerGroupHeartbeat",
        sent_ms=e.ts_ms - float(d.get("latency_ms", 0.0)),
        answered_ms=float(e.ts_ms),
        error=str(d.get("error", "NONE")),
        member_id=str(req.get("member_id") or ""),
        generation=int(req.get("member_epoch", -1)),
        injected=bool(d.get("injected")),
        owned=labels(req.get("owned")),
        dropped=bool(d.get("dropped")),
        version=int(d.get("api_version", -1)),
        answer_member_id=str(resp.get("member_id") or ""),
        answer_generation=int(resp.get("member_epoch", -1)) if resp else -1,
        fields=tuple(
            # An empty topic list (a leave after unsubscribing) is not a subscription.
            "topics=[]" if name == "topics" and req[key] == [] else name
            for name, key, unset in CGH_FIELDS
            if req.get(key, unset) != unset
        ),
        assignment=labels(resp.get("assignment")),
        interval_ms=int(resp.get("heartbeat_interval_ms", 0) or 0),
    )


def window_start(seen_ms: float = 0.0) -> float:
    """Now, as the start of the compared run: the start of this millisecond, once the
    clock has left the millisecond of `seen_ms`, the last stamp the test saw before it
    (`past_millisecond_of`). The members and the proxy stamp in whole milliseconds
    (truncated), so what happens just after now may be stamped just before it; what is
    stamped in this millisecond before the rules are armed is the member's own steady
    traffic (answered heartbeats and commits, never steps), not what the test waited
    for (seen: the first `assigned` a fast settle check saw, stamped in the window's
    first millisecond, counted as the situation's)."""
    return float(math.floor(past_millisecond_of(seen_ms)))


def past_millisecond_of(stamp_ms: float) -> float:
    """Now (ms since the epoch), taken once the clock is past the millisecond `stamp_ms`
    falls in: waits for that clock tick, never more than a millisecond (a stamp ahead of
    the clock, which a step back of it would make, counts as now)."""
    tick = math.floor(min(stamp_ms, time.time() * 1000)) + 1
    while (now := time.time() * 1000) < tick:
        time.sleep((tick - now) / 1000)
    return now


def requests_of(
    events: list[Event],
    client_id: str,
    label: Callable[[str, int], str],
    names: dict[str, str] | None = None,
) -> list[Request]:
    """The member's group requests from the proxy's events (`names`: topic id -> name, for
    the consumer protocol's partitions). A request a `delay` rule held while the member
    closed its connection is never traced (it was never forwarded): its FaultInjected
    stands for it, unanswered."""
    out, traced = [], set()
    for e in events:
        if e.client_id != client_id or not e.type.endswith("Traced"):
            continue
        d = e.data
        traced.add((d.get("connection"), d.get("correlation_id")))
        if e.type == "ConsumerGroupHeartbeatTraced":
            out.append(_heartbeat_request(e, label, names or {}))
            continue
        req, resp = d.get("request") or {}, d.get("response") or {}
        owned = req.get("owned")
        reason = req.get("reason")
        if e.type == "LeaveGroupTraced" and req.get("members"):
            reason = req["members"][0].get("reason")
        out.append(
            Request(
                api=e.type[: -len("Traced")],
                sent_ms=e.ts_ms - float(d.get("latency_ms", 0.0)),
                answered_ms=float(e.ts_ms),
                error=str(d.get("error", "NONE")),
                member_id=str(req.get("member_id") or ""),
                generation=int(req["generation"]) if "generation" in req else -1,
                injected=bool(d.get("injected")),
                reason=reason,
                owned=None
                if owned is None
                else tuple(label(t, int(p)) for t, ps in owned.items() for p in ps),
                dropped=bool(d.get("dropped")),
                version=int(d.get("api_version", -1)),
                answer_member_id=str(resp.get("member_id") or ""),
                answer_generation=int(resp.get("generation", -1) or -1),
            )
        )
    for e in events:
        d = e.data
        if e.type != "FaultInjected" or d.get("effect") != "delay" or e.client_id != client_id:
            continue
        if (d.get("connection"), d.get("correlation_id")) in traced:
            continue
        out.append(
            Request(
                api=str(d["api"]),
                sent_ms=float(e.ts_ms),
                answered_ms=float(e.ts_ms) + float(d.get("delay_ms", 0)),
                error="NO_RESPONSE",
                member_id=e.member_id,
                generation=e.generation,
            )
        )
    return out


class Chains:
    """Arms a situation's later stages from the proxy's loop thread, the moment a rule of
    the stage before applies (a poll from the test's thread could arm it too late)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next: dict[str, list[Any]] = {}  # client id -> [rule texts of each later stage]
        self.proxy: ProxyThread | None = None

    def sink(self, event: Event) -> None:
        if event.type != "FaultInjected":
            return
        with self.lock:
            stages = self.next.get(event.client_id)
            if not stages:
                return
            stage = stages.pop(0)
        assert self.proxy is not None
        for text in stage:
            self.proxy.run_._add(parse_rule(text))  # on the loop thread: the sink's


@pytest.fixture(scope="module")
def chains() -> Chains:
    return Chains()


@pytest.fixture(scope="module")
def proxy(bootstrap: str, chains: Chains) -> Iterator[ProxyThread]:
    p = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10), sink=chains.sink)
    chains.proxy = p
    p.start()
    try:
        yield p
    finally:
        p.close()


# -- one run -------------------------------------------------------------------------------


class Runner:
    def __init__(self, bootstrap: str, proxy: ProxyThread, chains: Chains) -> None:
        self.bootstrap, self.proxy, self.chains = bootstrap, proxy, chains
        self.admin_lock = threading.Lock()
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap)
        self.jvms = threading.Semaphore(JVM_SLOTS)
        self.topics: list[str] = []
        self.names: dict[str, str] = {}  # topic id -> name (consumer-protocol partitions)
        self.configured: list[str] = []  # groups given configs of their own

    def close(self) -> None:
        self.producer.close()
        with self.admin_lock:
            if self.topics:
                self.admin.delete_topics(self.topics)
            for group in self.configured:
                self._group_config(group, {}, unset=True)
            self.admin.close()

    def warm(self) -> None:
        """Wait until the broker's group coordinator answers (its __consumer_offsets exists
        and is loaded). On a fresh broker the first member to join was otherwise answered
        COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS by the broker itself
        (seen on a session broker: Java's first-join, whichever client comes first):
        the broker's start, not the client's behaviour. A group that does not exist is a
        coordinator's answer."""
        group = f"conformance-warm-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + START_S
        while True:
            try:
                with self.admin_lock:
                    answer = self.admin.describe_groups([group])[group]
                error = str(answer.get("error") or "")
                if "Coordinator" not in error:
                    return
            except Exception as exc:  # the coordinator's own retriable errors
                error = repr(exc)
            assert time.monotonic() < deadline, f"no group coordinator answered: {error}"
            time.sleep(0.2)  # polling the broker until its coordinator is ready

    def topic(self) -> str:
        name = f"conformance-{uuid.uuid4().hex[:10]}"
        with self.admin_lock:
            self.admin.create_topics([NewTopic(name, 2, 1)])
            self.topics.append(name)
            for t in self.admin.describe_topics([name]):
                self.names[str(t["topic_id"])] = str(t["name"])
        self.produce(name)
        return name

    def configure(self, group: str, configs: dict[str, str]) -> None:
        """The group's own configs (consumer protocol: session, heartbeat interval)."""
        with self.admin_lock:
            self._group_config(group, configs)
            self.configured.append(group)

    def _group_config(self, group: str, configs: dict[str, str], unset: bool = False) -> None:
        if unset:
            keys = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")
            configs = {k: ("DELETE", None) for k in keys}  # type: ignore[misc]
        resource = ConfigResource(ConfigResourceType.GROUP, group, configs=configs)
        result = self.admin.alter_configs([resource])
        assert result == {"group": {group: "OK"}}, result

    def produce(self, topic: str) -> None:
        for i in range(10):
            self.producer.send(topic, value=f"r{i}".encode(), partition=i % 2)
        self.producer.flush(30)

    def grow(self, topic: str) -> None:
        with self.admin_lock:
            self.admin.create_partitions({topic: NewPartitions(3)})

    def events(self, client_id: str) -> list[Event]:
        return [e for e in self.proxy.snapshot() if e.client_id == client_id]

    def arm(self, rules: tuple[str, ...], client_id: str) -> list[str]:
        texts = [f"{r}:client={client_id}" for r in rules]
        for t in texts:
            self.proxy.run_.add_rule(t)
        return texts

    def run(self, s: Situation, client: str) -> Run:
        if client == "java":
            with self.jvms:
                return self._run(s, client)
        return self._run(s, client)

    def _run(self, s: Situation, client: str) -> Run:
        cid = f"{client[:5]}-{uuid.uuid4().hex[:8]}"
        run = Run(s.id, client, cid)
        topic, group = self.topic(), f"conformance-{s.id}-{cid}"

        def label(t: str, p: int) -> str:
            return str(p) if t == topic else f"b{p}"

        peer: MemberProc | None = None
        member: Member | None = None
        if s.group_config:
            self.configure(group, dict(s.group_config))
        try:
            if s.peer:
                pid = f"peer-{uuid.uuid4().hex[:8]}"
                peer = MemberProc(
                    self.proxy.bootstrap, group, topic, "--client-id", pid,
                    "--assignor", s.assignor, "--commit", "none",
                    "--session-timeout", str(s.peer_session_ms), name=pid,
                )  # fmt: skip
                peer.wait_event("PartitionsAssigned", timeout=START_S)
            if s.window == "start":
                run.since_ms = window_start()
                run.armed += self.arm(s.stages[0] if s.stages else (), cid)
            kind = s.java if client == "java" else client
            member = MEMBERS[kind](self.proxy.bootstrap, group, topic, s, cid)
            if not self._wait(lambda: self._settled(member, run, since=0.0), START_S, member):
                run.problem = "the member never joined before the situation"
            elif s.ready == "committed" and not self._wait(
                lambda: self._committed(member.client_id), START_S, member
            ):
                run.problem = "the member never committed before the situation"
            elif s.window == "fault":
                joined = self._situation(s, run, member, topic, group, peer)
                peer = joined or peer
            else:
                self._watch(s, run, member)
            if member.proc.poll() is not None:
                run.marks.append(Mark(time.time() * 1000, "exited"))
            else:
                run.marks.append(Mark(self._stop_time(member), "stop"))
                member.stop()
            run.exit_code = member.proc.returncode
            run.callbacks = member.callbacks()
            if isinstance(member, KcatMember):
                run.notes = member.noise()[:20]
        finally:
            if member is not None:
                member.kill()
            if peer is not None:
                peer.kill()
            with self.chains.lock:
                self.chains.next.pop(cid, None)
        events = self.events(cid)
        run.requests = requests_of(events, cid, label, self.names)
        run.applied = {
            str(e.data["text"]) for e in events if e.type == "FaultInjected" and "text" in e.data
        }
        if not run.problem:
            missing = [r for r in run.armed if r not in run.applied]
            if missing:
                run.problem = f"rules that never applied: {missing}"
        run.trace = normalise(run.requests, run.callbacks, run.marks, run.since_ms)
        return run

    def _situation(
        self,
        s: Situation,
        run: Run,
        member: Member,
        topic: str,
        group: str,
        peer: MemberProc | None,
    ) -> MemberProc | None:
        """Arms the situation's rules, does its trigger, watches the member; returns the
        peer its trigger started, if any (the caller stops it)."""
        cid = member.client_id
        joined: MemberProc | None = None
        with self.chains.lock:
            self.chains.next[cid] = [
                tuple(f"{r}:client={cid}" for r in stage) for stage in s.stages[1:]
            ]
        for stage in s.stages[1:]:
            run.armed += [f"{r}:client={cid}" for r in stage]
        run.since_ms = window_start(self._last_seen(member))
        if peer is not None and s.peer_rules:
            peer_id = peer.name
            for r in s.peer_rules:
                self.proxy.run_.add_rule(f"{r}:client={peer_id}")
        run.armed += self.arm(s.stages[0] if s.stages else (), cid)
        if s.trigger == "grow":
            self.grow(topic)
        elif s.trigger == "produce":
            self.produce(topic)
        elif s.trigger == "subscribe":
            extra = f"{topic}-b"
            with self.admin_lock:
                self.admin.create_topics([NewTopic(extra, 1, 1)])
                self.topics.append(extra)
            member.subscribe([topic, extra])
        elif s.trigger == "peer-joins":
            pid = f"peer-{uuid.uuid4().hex[:8]}"
            joined = MemberProc(
                self.bootstrap, group, topic, "--client-id", pid, "--commit", "none",
                name=pid, protocol=s.protocol,
            )  # fmt: skip
        self._watch(s, run, member)
        return joined

    def _watch(self, s: Situation, run: Run, member: Member) -> None:
        if s.stop_on:
            self._wait(lambda: self._applied(member.client_id, s.stop_on), SETTLE_S, member)
            return
        if s.until == "exited":
            self._wait(lambda: member.proc.poll() is not None, SETTLE_S, member)
            return
        # Not every situation ends in a new SyncGroup (a heartbeat's NOT_COORDINATOR
        # only finds the coordinator again): such a wait runs out and the member is
        # compared as it stands. Making a run-out the run's problem failed two of them.
        self._wait(lambda: self._settled(member, run, since=run.since_ms), SETTLE_S, member)
        if s.steady:
            self._wait(lambda: self._steady(member, run) > s.steady, SETTLE_S, member)

    def _steady(self, member: Member, run: Run) -> int:
        """Steady heartbeats (`conformance_form.steady`) since the window opened."""
        reqs = requests_of(self.events(member.client_id), member.client_id, member.label)
        return sum(1 for r in reqs if r.sent_ms >= run.since_ms and steady(r))

    def _committed(self, client_id: str) -> bool:
        return any(
            e.type == "OffsetCommitTraced" and e.data.get("error") == "NONE"
            for e in self.events(client_id)
        )

    def _applied(self, client_id: str, api: str) -> bool:
        return any(
            e.type == "FaultInjected" and e.data.get("api") == api for e in self.events(client_id)
        )

    @staticmethod
    def _all_applied(run: Run, events: list[Event]) -> bool:
        """Every rule armed for the run has applied at least once (`events`: the member's)."""
        applied = {str(e.data.get("text")) for e in events if e.type == "FaultInjected"}
        return all(r in applied for r in run.armed)

    def _settled(self, member: Member, run: Run, since: float) -> bool:
        """A member again: every armed rule applied, then a SyncGroup answered NONE sent
        after the last one applied, then an assignment given to the listener."""
        events = self.events(member.client_id)
        if not self._all_applied(run, events):
            return False
        last_fault = max(
            [e.ts_ms for e in events if e.type == "FaultInjected"] + [since], default=since
        )
        reqs = requests_of(events, member.client_id, member.label, self.names)
        if any(r.api == "ConsumerGroupHeartbeat" for r in reqs):
            return _heartbeats_settled(reqs, last_fault)
        syncs = [
            r
            for r in reqs
            if r.api == "SyncGroup" and r.error == "NONE" and r.sent_ms >= last_fault
        ]
        if not syncs:
            return False
        after = syncs[-1].answered_ms
        return any(c.kind == "assigned" and c.at_ms >= after for c in member.callbacks())

    def _last_seen(self, member: Member) -> float:
        """The latest stamp of the member's the test has seen: a listener call, or a
        proxy event about it (what a wait has just been satisfied by)."""
        seen = [c.at_ms for c in member.callbacks()]
        seen += [float(e.ts_ms) for e in self.events(member.client_id)]
        return max(seen, default=0.0)

    def _stop_time(self, member: Member) -> float:
        """When the stop about to be sent is sent: once the clock has left the millisecond
        of the last stamp the test has seen, at most 1 ms on. Both are stamped in whole
        milliseconds (truncated), and `normalise` puts a stop before whatever is stamped
        in its own millisecond, a reaction to it; what the test saw before it stopped
        the member must not share that millisecond. (Seen in CI: the `assigned` a settle
        waited for, stamped in the millisecond the test then stopped the member in, came
        after `<stop>` in the trace.)"""
        return past_millisecond_of(self._last_seen(member))

    @staticmethod
    def _wait(check: Callable[[], bool], timeout: float, member: Member) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return True
            if member.proc.poll() is not None:
                return check()
            time.sleep(0.1)  # polling a condition, not waiting out a time
        return False


def _heartbeats_settled(reqs: list[Request], since: float) -> bool:
    """A consumer-protocol member again: after `since`, a heartbeat answered NONE with an
    assignment, and then (that one or a later one, answered NONE) a heartbeat saying it
    owns exactly that assignment: it reconciled and acknowledged."""
    beats = sorted(
        (r for r in reqs if r.api == "ConsumerGroupHeartbeat" and r.sent_ms >= since),
        key=lambda r: r.sent_ms,
    )
    for i, given in enumerate(beats):
        if given.error != "NONE" or not given.assignment:
            continue
        target = sorted(given.assignment)
        if any(
            b.error == "NONE" and b.owned is not None and sorted(b.owned) == target
            for b in beats[i:]
        ):
            return True
    return False


def selected(s: Situation) -> bool:
    """KGCTL_CONFORMANCE_ONLY=GLOB[,GLOB] runs only the situations it names (while working
    on one); unset, every situation runs."""
    only = os.environ.get("KGCTL_CONFORMANCE_ONLY", "")
    return not only or any(fnmatch.fnmatchcase(s.id, g.strip()) for g in only.split(","))


def _clients(s: Situation) -> list[str]:
    out = ["java", "kgctl"]
    if s.kcat and KCAT is not None:
        out.append("librdkafka")
    return out


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ResubscribingMember.java compiled against the kafka-tools jars (about 3 s)."""
    out = tmp_path_factory.mktemp("conformance-java")
    beside = Path(java_executable()).with_name("javac")
    javac = str(beside) if beside.exists() else shutil.which("javac")
    assert javac, "javac not found: make system-deps installs openjdk-17-jdk-headless"
    subprocess.run(
        [javac, "-cp", f"{resolve_kafka_tools()}/*", "-d", str(out),
         str(Path(__file__).with_name("ResubscribingMember.java"))],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    ResubscribingJavaMember.classes = out
    return out


@pytest.fixture(scope="module")
def runs(
    bootstrap: str, proxy: ProxyThread, chains: Chains, java_classes: Path
) -> Iterator[dict[tuple[str, str], Run]]:
    runner = Runner(bootstrap, proxy, chains)
    runner.warm()
    jobs = [(s, c) for s in SITUATIONS if selected(s) for c in _clients(s)]
    # Java runs first in the queue: the JVMs are the slowest to start, and the slots let
    # kgctl runs fill the gaps.
    jobs.sort(key=lambda j: j[1] != "java")
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(RUN_WORKERS, thread_name_prefix="conformance") as pool:
            futures = {(s.id, c): pool.submit(runner.run, s, c) for s, c in jobs}
            results = {k: f.result() for k, f in futures.items()}
    finally:
        runner.close()
    took = time.monotonic() - started
    dump = os.environ.get("KGCTL_CONFORMANCE_DUMP")
    if dump:
        Path(dump).write_text(
            json.dumps(
                {
                    "seconds": round(took, 1),
                    "runs": {
                        f"{sid} {c}": {
                            "problem": r.problem,
                            "exit": r.exit_code,
                            "notes": r.notes,
                            "raw": _raw(r),
                            **(r.trace.to_dict() if r.trace else {}),
                        }
                        for (sid, c), r in results.items()
                    },
                },
                indent=1,
            )
        )
    yield results


def _raw(run: Run) -> list[str]:
    """The run's requests and callbacks, in time, for reading a dump (not compared)."""
    t0 = run.since_ms
    rows = [
        (
            r.sent_ms,
            f"{r.sent_ms - t0:9.1f} {r.api} v{r.version} gen={r.generation} -> {r.error} "
            f"(answered {r.answered_ms - t0:.1f})",
        )
        for r in run.requests
    ]
    rows += [(c.at_ms, f"{c.at_ms - t0:9.1f} {c.kind} {c.detail}") for c in run.callbacks]
    rows += [(m.at_ms, f"{m.at_ms - t0:9.1f} <{m.what}>") for m in run.marks]
    return [text for _, text in sorted(rows)]


def _shown(run: Run) -> str:
    assert run.trace is not None
    return "\n".join(f"    {s}" for s in run.trace.steps) + f"\n    reasons: {run.trace.reasons}"


def _judge(runs: dict[tuple[str, str], Run], s: Situation, client: str) -> None:
    if not selected(s):
        pytest.skip("not among KGCTL_CONFORMANCE_ONLY's situations")
    java, other = runs[(s.id, "java")], runs[(s.id, client)]
    for r in (java, other):
        assert not r.problem, f"{s.id} did not happen for {r.client} ({r.client_id}): {r.problem}"
    assert java.trace is not None and other.trace is not None
    allowed = read_allow_list(MEMBER_DOC.read_text(encoding="utf-8"))
    diffs = compare(java.trace, other.trace, client)
    left = unexplained(diffs, allowed, s.id, client)
    assert not left, (
        f"{s.id}: {client} differs from Java where docs/member.md allows nothing:\n  "
        + "\n  ".join(left)
        + f"\n  java:\n{_shown(java)}\n  {client}:\n{_shown(other)}"
    )


@pytest.mark.parametrize("situation", SITUATIONS, ids=[s.id for s in SITUATIONS])
def test_kgctl_does_what_java_does(runs: dict[tuple[str, str], Run], situation: Situation) -> None:
    _judge(runs, situation, "kgctl")


KCAT_SITUATIONS = [s for s in SITUATIONS if s.kcat]


@pytest.mark.parametrize("situation", KCAT_SITUATIONS, ids=[s.id for s in KCAT_SITUATIONS])
def test_librdkafka_differs_from_java_only_where_documented(
    runs: dict[tuple[str, str], Run], situation: Situation
) -> None:
    if KCAT is None:
        pytest.skip("kcat not installed: the librdkafka column is not run (make system-deps)")
    _judge(runs, situation, "librdkafka")
