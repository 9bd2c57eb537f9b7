"""`kgctl proxy` against a real broker: clients of three implementations form one group
through it, each fault effect changes what a client visibly does, and a bad peer costs
only its own connection.

One proxy serves the whole module (`ProxyThread`, in-process); every test has its own
group, and fault rules are scoped to the test's own client ids, so the tests stay
independent. Clients: `kgctl join` subprocesses, Apache Kafka's Java VerifiableConsumer
(kafka-tools jars) and kcat (librdkafka) in balanced-consumer mode.
"""

from __future__ import annotations

import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MemberProc, die_with_parent, verifiable_consumer

from kgctl.broker.provision import resolve_kafka_tools
from kgctl.model.events import Event
from kgctl.proxy.runner import ProxyConfig, ProxyThread
from kgctl.settings import ClientSettings

pytestmark = pytest.mark.kafka

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient, NewTopic

    from kgctl.adapters import wire
    from kgctl.adapters.admin import GroupAdmin


SESSION_MS = 6000


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)  # polling a condition, not waiting out a time
    pytest.fail(f"no {what} within {timeout:.0f} s (last: {last!r})")


@pytest.fixture(scope="module")
def proxy(bootstrap: str) -> Iterator[ProxyThread]:
    p = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    p.start()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def topic(bootstrap: str) -> Iterator[Callable[[int], str]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    made: list[str] = []

    def create(partitions: int) -> str:
        name = f"proxy-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, partitions, 1)])
        made.append(name)
        return name

    try:
        yield create
    finally:
        if made:
            admin.delete_topics(made)
        admin.close()


@pytest.fixture
def members() -> Iterator[list[Any]]:
    """Every client process a test starts; all are ended when it ends."""
    procs: list[Any] = []
    yield procs
    for p in procs:
        if isinstance(p, MemberProc):
            p.kill()
        else:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def traced(proxy: ProxyThread, type_: str, client: str, since: int = 0) -> list[Event]:
    return [
        e for e in proxy.snapshot() if e.type == type_ and e.client_id == client and e.seq > since
    ]


def described(bootstrap: str, group: str) -> Any:
    admin = GroupAdmin(ClientSettings.from_options(bootstrap))
    try:
        return admin.describe(group, with_lag=False)
    finally:
        admin.close()


def join(bootstrap: str, group: str, topic: str, name: str, *args: str) -> MemberProc:
    return MemberProc(bootstrap, group, topic, "--client-id", name, *args, name=name)


# -- one group of three client implementations ---------------------------------------


def test_kgctl_java_and_kcat_members_form_one_group_through_the_proxy(
    proxy: ProxyThread, bootstrap: str, topic: Callable[[int], str], members: list[Any]
) -> None:
    name = topic(6)
    group = f"proxy-mixed-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex[:6]
    kgctl_id, java_id, kcat_id = f"kgctl-{tag}", f"java-{tag}", f"kcat-{tag}"
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: make system-deps installs it"
    members.append(join(proxy.bootstrap, group, name, kgctl_id))
    java, props = verifiable_consumer(
        resolve_kafka_tools(),
        proxy.bootstrap,
        group,
        name,
        protocol="classic",
        properties={"client.id": java_id, "session.timeout.ms": str(SESSION_MS)},
    )  # fmt: skip
    members.append(java)
    members.append(
        subprocess.Popen(
            [
                kcat,
                "-b",
                proxy.bootstrap,
                "-G",
                group,
                name,
                "-q",
                "-o",
                "beginning",
                "-X",
                f"client.id={kcat_id}",
                "-X",
                f"session.timeout.ms={SESSION_MS}",
            ],  # fmt: skip
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
    )
    try:

        def synced(client: str) -> bool:
            """Its last successful SyncGroup is of the newest generation on the wire."""
            events = proxy.snapshot()
            newest = max(
                (e.generation for e in events if e.type == "JoinGroupTraced" and e.group == group),
                default=-1,
            )
            syncs = [
                e
                for e in traced(proxy, "SyncGroupTraced", client)
                if e.group == group and e.data["error"] == "NONE"
            ]
            return bool(syncs) and syncs[-1].data["request"]["generation"] == newest

        def stable_with_three() -> Any:
            # The broker shows the leader's assignments as soon as it has them; a
            # follower's own SyncGroup may still be unsent, or its answer not yet through
            # the proxy (CI once: the kgctl member's), so each one's is waited for too.
            snap = described(bootstrap, group)
            clients = sorted(m.client_id for m in snap.members)
            ok = snap.state == "Stable" and clients == sorted([kgctl_id, java_id, kcat_id])
            ok = ok and all(m.partitions for m in snap.members)
            return snap if ok and all(synced(c) for c in clients) else None

        snap = wait_for("a Stable group of the three clients", stable_with_three, 90)
    finally:
        props.unlink(missing_ok=True)
    owned = [(t, p) for m in snap.members for t, ps in (m.partitions or {}).items() for p in ps]
    assert sorted(owned) == [(name, p) for p in range(6)], "each partition exactly once"
    # Every member's connection goes through the proxy: the broker sees the proxy's
    # address for all of them, and the proxy traced each one's protocol steps.
    generation = wait_for(
        "the broker's generation",
        lambda: next(
            (
                e.generation
                for e in reversed(proxy.snapshot())
                if e.type == "JoinGroupTraced" and e.group == group and e.generation >= 0
            ),
            None,
        ),
    )
    for client in (kgctl_id, java_id, kcat_id):
        joins = [e for e in traced(proxy, "JoinGroupTraced", client) if e.group == group]
        assert joins, f"no JoinGroup of {client} on the wire"
        good = [e for e in joins if e.data["error"] == "NONE"]
        assert good, f"{client}: no successful JoinGroup"
        for e in joins:
            # KIP-800: JoinGroup v8+ carries the client's reason; earlier versions cannot.
            if e.data["api_version"] >= 8 and e.data["request"]["member_id"]:
                assert e.data["request"]["reason"], f"{client} v{e.data['api_version']}: no reason"
        syncs = [e for e in traced(proxy, "SyncGroupTraced", client) if e.data["error"] == "NONE"]
        assert syncs, f"{client}: no successful SyncGroup"
        # The SyncGroup carries the generation the broker's JoinGroup answer gave it.
        join_gens = {e.data["response"]["generation"] for e in good}
        assert syncs[-1].data["request"]["generation"] in join_gens
        assert syncs[-1].data["response"]["assignment"], f"{client}: empty assignment"
    last_syncs = {
        c: traced(proxy, "SyncGroupTraced", c)[-1].data["request"]["generation"]
        for c in (kgctl_id, java_id, kcat_id)
    }
    assert set(last_syncs.values()) == {generation}, last_syncs
    # A kgctl member sends the Java client's KIP-800 reasons; the proxy shows them as sent:
    # none on the first JoinGroup, then why it joins again (the member id it was given).
    first = [e.data["request"]["reason"] or "" for e in traced(proxy, "JoinGroupTraced", kgctl_id)]
    assert first[0] == "", first
    assert first[1].startswith("need to re-join with the given member-id: "), first


# -- one test per fault effect --------------------------------------------------------


def test_error_injected_on_join_group_makes_the_member_look_up_the_coordinator_again(
    proxy: ProxyThread, topic: Callable[[int], str], members: list[Any]
) -> None:
    name, group, client = (
        topic(2),
        f"proxy-error-{uuid.uuid4().hex[:8]}",
        f"err-{uuid.uuid4().hex[:6]}",
    )
    rule = proxy.run_.add_rule(f"JoinGroup:error=NOT_COORDINATOR:count=1:client={client}")
    member = join(proxy.bootstrap, group, name, client)
    members.append(member)
    member.wait_event("JoinCompleted", timeout=30)
    failed = member.of("JoinFailed")
    assert failed and failed[0]["data"]["error"] == "NOT_COORDINATOR"
    injected = [e for e in traced(proxy, "FaultInjected", client) if e.data["rule"] == rule.id]
    assert len(injected) == 1
    lookups = traced(proxy, "FindCoordinatorTraced", client, since=injected[0].seq)
    assert lookups, "no new FindCoordinator after NOT_COORDINATOR"
    assert len(member.of("CoordinatorLookupSent")) >= 2


def test_delayed_leader_sync_keeps_the_followers_in_the_generation(
    proxy: ProxyThread, bootstrap: str, topic: Callable[[int], str], members: list[Any]
) -> None:
    name, group = topic(4), f"proxy-delay-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex[:6]
    leader = join(proxy.bootstrap, group, name, f"lead-{tag}", "--session-timeout", "20000")
    members.append(leader)
    leader.wait_event("JoinCompleted", timeout=30)
    # Its next SyncGroup (as the leader of the round the follower starts) waits 8 s,
    # longer than the follower's 6 s session.
    proxy.run_.add_rule(f"SyncGroup:delay=8000:count=1:client=lead-{tag}")
    follower = join(proxy.bootstrap, group, name, f"follow-{tag}")
    members.append(follower)
    done = follower.wait_event("JoinCompleted", timeout=40)
    synced = follower.of("SyncGroupReceived")[-1]
    assert synced["data"]["error"] == "NONE"
    assert synced["data"]["duration_ms"] >= 7000, "the follower did not wait for the leader"
    gen = done["data"]["generation"]
    lead_done = leader.wait(
        lambda: [e for e in leader.of("JoinCompleted") if e["data"]["generation"] == gen],
        20,
        "the leader's completion of the same generation",
    )
    assert lead_done
    snap = described(bootstrap, group)
    assert snap.state == "Stable" and len(snap.members) == 2


def test_dropped_heartbeat_answer_makes_the_member_reconnect_without_rejoining(
    proxy: ProxyThread, topic: Callable[[int], str], members: list[Any]
) -> None:
    name, group, client = (
        topic(2),
        f"proxy-drop-{uuid.uuid4().hex[:8]}",
        f"drop-{uuid.uuid4().hex[:6]}",
    )
    member = join(proxy.bootstrap, group, name, client)
    members.append(member)
    done = member.wait_event("JoinCompleted", timeout=30)
    rule = proxy.run_.add_rule(f"Heartbeat:drop:count=1:client={client}")
    injected = wait_for(
        "the dropped heartbeat",
        lambda: [e for e in traced(proxy, "FaultInjected", client) if e.data["rule"] == rule.id],
        20,
    )
    member.wait(lambda: member.of("CoordinatorLost"), 20, "CoordinatorLost")
    wait_for(
        "a heartbeat answered on a new connection",
        lambda: [
            e
            for e in traced(proxy, "HeartbeatTraced", client, since=injected[0].seq)
            if e.data["error"] == "NONE" and e.data["connection"] != injected[0].data["connection"]
        ],
        30,
    )
    assert [e["data"]["generation"] for e in member.of("JoinCompleted")] == [
        done["data"]["generation"]
    ], "the member rejoined instead of keeping its generation"


def test_hung_heartbeat_times_out_and_the_member_finds_the_coordinator_again(
    proxy: ProxyThread, topic: Callable[[int], str], members: list[Any]
) -> None:
    name, group, client = (
        topic(2),
        f"proxy-hang-{uuid.uuid4().hex[:8]}",
        f"hang-{uuid.uuid4().hex[:6]}",
    )
    member = join(
        proxy.bootstrap, group, name, client,
        "--session-timeout", "15000", "-X", "request.timeout.ms=3000",
    )  # fmt: skip
    members.append(member)
    member.wait_event("JoinCompleted", timeout=30)
    rule = proxy.run_.add_rule(f"Heartbeat:hang:count=1:client={client}")
    injected = wait_for(
        "the hung heartbeat",
        lambda: [e for e in traced(proxy, "FaultInjected", client) if e.data["rule"] == rule.id],
        20,
    )
    failed = member.wait(
        lambda: [e for e in member.of("HeartbeatFailed") if e["data"].get("transport")],
        20,
        "a heartbeat that failed for want of an answer",
    )
    assert failed
    wait_for(
        "a coordinator lookup after the hang",
        lambda: traced(proxy, "FindCoordinatorTraced", client, since=injected[0].seq),
        20,
    )
    # The broker saw the hung heartbeat (hang forwards it): the answer was withheld.
    withheld = wait_for(
        "the withheld answer in the trace",
        lambda: [e for e in traced(proxy, "HeartbeatTraced", client) if e.data.get("withheld")],
        20,
    )
    assert withheld[0].data["error"] == "NONE"


def test_blackholed_heartbeats_get_the_member_removed_at_session_timeout(
    proxy: ProxyThread, bootstrap: str, topic: Callable[[int], str], members: list[Any]
) -> None:
    name, group = topic(4), f"proxy-blackhole-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex[:6]
    cut, kept = f"cut-{tag}", f"kept-{tag}"
    a = join(proxy.bootstrap, group, name, cut, "-X", "request.timeout.ms=30000")
    members.append(a)
    a.wait_event("JoinCompleted", timeout=30)
    b = join(proxy.bootstrap, group, name, kept)
    members.append(b)
    wait_for(
        "both members in one generation",
        lambda: (s := described(bootstrap, group)).state == "Stable" and len(s.members) == 2,
        40,
    )
    # Every request that keeps a classic member alive: an OffsetCommit counts as a
    # heartbeat at the broker.
    for api in ("Heartbeat", "JoinGroup", "SyncGroup", "OffsetCommit"):
        proxy.run_.add_rule(f"{api}:blackhole:client={cut}")
    t0 = time.monotonic()
    # The broker never hears from `cut` again: after its session timeout it is removed
    # and `kept` gets every partition in a new generation.
    everything = b.wait(
        lambda: [
            e
            for e in b.of("JoinCompleted")
            if sorted(e["data"]["assignment"].get(name, [])) == [0, 1, 2, 3]
            and e["data"]["generation"] > 1
        ],
        40,
        "the remaining member taking every partition",
    )
    assert everything
    took = time.monotonic() - t0
    assert SESSION_MS / 1000 - 1.5 <= took <= SESSION_MS / 1000 + 8, took
    snap = described(bootstrap, group)
    assert [m.client_id for m in snap.members] == [kept]


# -- robustness -----------------------------------------------------------------------


def _api_versions_frame(corr: int = 1) -> bytes:
    req = wire.ApiVersionsRequest(client_software_name="t", client_software_version="1")
    req.with_header(correlation_id=corr, client_id="raw")
    return bytes(req.encode(version=3, header=True, framed=True))


def _closed_without_answer(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def _still_serves(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()


def aborted(proxy: ProxyThread, since: int) -> list[Event]:
    return [e for e in proxy.snapshot() if e.type == "ProxyConnectionAborted" and e.seq > since]


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "over the"),  # its first 4 bytes: a huge size
        (struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 64, "over the"),
        (struct.pack(">i", 12) + b"\xff\xff\x00\x00" + b"\x00" * 8, "not a Kafka request"),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 32,
            "TLS from the client is refused",
        ),
    ],
    ids=["http", "oversize", "garbage-header", "tls-client-hello"],
)
def test_a_client_sending_garbage_loses_only_its_own_connection(
    proxy: ProxyThread, payload: bytes, says: str
) -> None:
    since = proxy.snapshot()[-1].seq
    host, port = proxy.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(payload)
        assert _closed_without_answer(sock) == b""
    found = wait_for("the abort event", lambda: aborted(proxy, since), 10)
    assert len(found) == 1 and says in found[0].data["error"] and found[0].data["side"] == "client"
    _still_serves(proxy.bootstrap)


class BadUpstream:
    """A TCP server that misbehaves on the second connection that sends it a request and
    relays every other one to the real broker: the first is the proxy's own check that
    the cluster answers as Kafka, and later ones show the same proxy serving other
    clients. A connection that sends nothing is just closed."""

    def __init__(self, real: str, misbehave: Callable[[socket.socket], None]) -> None:
        self.real = real.rsplit(":", 1)
        self.misbehave = misbehave
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.misbehaved = threading.Lock()
        self.requests = 0  # connections that sent a request
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.socks.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            first = self._first_frame(conn)
        except OSError:
            return
        if not first:
            conn.close()
            return
        with self.misbehaved:
            self.requests += 1
            nth = self.requests
        if nth == 2:
            self.misbehave(conn)
            return
        up = socket.create_connection((self.real[0], int(self.real[1])))
        self.socks.append(up)
        up.sendall(first)
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _first_frame(conn: socket.socket) -> bytes:
        """The whole first request (size prefix and body), or b"" if the peer sent none.

        Read whole: the proxy may send the size and the body in two segments, and a
        socket closed with unread bytes resets the connection instead of ending it, so
        the proxy would see a reset, not the half frame the test is about."""
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        return data

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
        for s in self.socks:
            s.close()


def _half_frame(conn: socket.socket) -> None:
    conn.sendall(struct.pack(">i", 100) + b"\x00\x00\x00\x01" + b"x" * 10)
    conn.close()


def _not_kafka(conn: socket.socket) -> None:
    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\nProtocol mismatch.\r\n")


@pytest.mark.parametrize(
    ("misbehave", "says"),
    [(_half_frame, "closed after 14 of a 100-byte frame"), (_not_kafka, "over the")],
    ids=["closes-mid-frame", "not-kafka"],
)
def test_a_bad_upstream_costs_only_its_own_connection(
    bootstrap: str, misbehave: Callable[[socket.socket], None], says: str
) -> None:
    upstream = BadUpstream(bootstrap, misbehave)
    p = ProxyThread(ClientSettings.from_options(upstream.address, timeout_s=10), ProxyConfig())
    p.start()
    try:
        host, port = p.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(_api_versions_frame())
            assert _closed_without_answer(sock) == b"", "a half frame reached the client"
        found = wait_for("the abort event", lambda: aborted(p, 0), 10)
        assert len(found) == 1 and says in found[0].data["error"]
        assert found[0].data["side"] == "upstream"
        _still_serves(p.bootstrap)
    finally:
        p.close()
        upstream.close()


def test_sasl_frames_are_forwarded_but_never_traced(proxy: ProxyThread) -> None:
    """A SaslHandshake/SaslAuthenticate exchange (PLAIN, a password inside) passes
    through; no event carries any of its bytes."""
    host, port = proxy.bootstrap.rsplit(":", 1)
    secret = f"pw-{uuid.uuid4().hex}"
    with socket.create_connection((host, int(port))) as sock:
        head = struct.pack(">hhih", 17, 1, 5, 3) + b"raw"
        body = struct.pack(">h", 5) + b"PLAIN"
        sock.sendall(struct.pack(">i", len(head + body)) + head + body)
        size = struct.unpack(">i", sock.recv(4))[0]
        assert size > 0
        token = b"\x00user\x00" + secret.encode()
        head = struct.pack(">hhih", 36, 1, 6, 3) + b"raw"
        body = struct.pack(">i", len(token)) + token
        sock.sendall(struct.pack(">i", len(head + body)) + head + body)
        sock.settimeout(10)
        sock.recv(65536)  # the broker's answer (this listener has no SASL: an error)
    assert all(secret not in e.to_json() for e in proxy.snapshot())


# -- the command ----------------------------------------------------------------------


def test_proxy_command_json_record_control_lines_and_sigterm(
    bootstrap: str, topic: Callable[[int], str], members: list[Any], tmp_path: Path
) -> None:
    import json

    record = tmp_path / "proxy.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kgctl",
            "proxy",
            "-b",
            bootstrap,
            "--record",
            str(record),
            "-o",
            "json",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    events: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=lambda: events.extend(json.loads(line) for line in proc.stdout or []), daemon=True
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "ProxyStarted" and first["source"] == "wire"
        reader.start()
        client = f"cli-{uuid.uuid4().hex[:6]}"
        proc.stdin.write('{"op": "add", "rule": "JoinGroup:error=NOPE"}\n')
        proc.stdin.write(
            json.dumps(
                {
                    "op": "add",
                    "rule": f"JoinGroup:error=COORDINATOR_NOT_AVAILABLE:count=1:client={client}",
                }
            )
            + "\n"
        )
        proc.stdin.flush()
        wait_for(
            "the rule in force", lambda: [e for e in events if e["type"] == "FaultRuleAdded"], 10
        )
        rejected = [e for e in events if e["type"] == "ControlRejected"]
        assert rejected and "unknown error 'NOPE'" in rejected[0]["data"]["error"]
        group = f"proxy-cli-{uuid.uuid4().hex[:8]}"
        member = join(first["data"]["bootstrap"], group, topic(2), client)
        members.append(member)
        member.wait_event("JoinCompleted", timeout=30)
        assert member.of("JoinFailed")[0]["data"]["error"] == "COORDINATOR_NOT_AVAILABLE"
        member.stop()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        reader.join(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert events[-1]["type"] == "ProxyStopped" and events[-1]["data"]["why"] == "SIGTERM"
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    assert [e["type"] for e in recorded] == [first["type"]] + [e["type"] for e in events]
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "report", str(record), "-g", group, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # The recording alone (no member events in it) gives the member and its join.
    assert report["group"] == group
    assert [m["member"] for m in report["members"]] == [client]
    assert len(report["rebalances"]) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--fault", "JoinGroup:error=OFFSET_OUT_OF_RANGE"],
            "JoinGroup does not answer OFFSET_OUT_OF_RANGE",
        ),
        (["--fault", "Produce:error=NOT_COORDINATOR"], "error= applies only to"),
        (["--listen", "nowhere"], "--listen 'nowhere': expected HOST:PORT"),
        ([], "cannot reach Kafka at 127.0.0.1:9 (127.0.0.1:9: connection refused)"),
    ],
)
def test_proxy_command_refuses_bad_options_in_one_line(args: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "proxy", "-b", "127.0.0.1:9", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == (3 if not args else 2)  # CANNOT_CONNECT, USAGE
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr


def test_trace_topic_carries_a_foreign_member_s_steps(
    bootstrap: str, topic: Callable[[int], str], tmp_path: Path
) -> None:
    """What `kgctl watch G --trace-topic T` reads: a plain kafka-python consumer (not a
    kgctl member, so it publishes nothing itself) joins through a publishing proxy."""
    from kafka import KafkaConsumer

    from kgctl.adapters.trace import TraceTopicReader
    from kgctl.proxy.sinks import TopicSink

    settings = ClientSettings.from_options(bootstrap)
    trace = f"proxy-trace-{uuid.uuid4().hex[:8]}"
    group = f"proxy-foreign-{uuid.uuid4().hex[:8]}"
    sink = TopicSink(settings, trace)
    p = ProxyThread(settings, sink=sink)
    seen: list[Event] = []
    reader = TraceTopicReader(settings, trace, group, seen.append, lambda _: None)
    reader.start()
    p.start()
    consumer = KafkaConsumer(
        topic(2), bootstrap_servers=p.bootstrap, group_id=group, client_id="foreign-app"
    )
    try:

        def synced() -> list[Event]:
            consumer.poll(timeout_ms=100)  # the consumer joins from its poll loop
            return [e for e in seen if e.type == "SyncGroupTraced" and e.data["error"] == "NONE"]

        wait_for("the join on the trace topic", synced, 30)
    finally:
        consumer.close()
        p.close()
        sink.close()
        reader.stop()
        reader.join(10)
        KafkaAdminClient(bootstrap_servers=bootstrap).delete_topics([trace])
    joins = [e for e in seen if e.type == "JoinGroupTraced"]
    assert joins and all(e.client_id == "foreign-app" and e.source == "wire" for e in joins)


def test_a_kip848_java_member_s_heartbeats_are_traced_with_its_epochs(
    proxy: ProxyThread, bootstrap: str, topic: Callable[[int], str], members: list[Any]
) -> None:
    """ConsumerGroupHeartbeat (kgctl's own schema, kafka-python has none) decoded at the
    version the Java client speaks, both ways."""
    name = topic(2)
    group = f"proxy-848-{uuid.uuid4().hex[:8]}"
    client = f"java848-{uuid.uuid4().hex[:6]}"
    java, props = verifiable_consumer(
        resolve_kafka_tools(),
        proxy.bootstrap,
        group,
        name,
        protocol="consumer",
        properties={"client.id": client},
    )  # fmt: skip
    members.append(java)
    try:

        def assigned() -> list[Event]:
            return [
                e
                for e in traced(proxy, "ConsumerGroupHeartbeatTraced", client)
                if e.data["error"] == "NONE" and e.data["response"]["assignment"]
            ]

        got = wait_for("a heartbeat answer with an assignment", assigned, 60)
    finally:
        props.unlink(missing_ok=True)
    beats = traced(proxy, "ConsumerGroupHeartbeatTraced", client)
    first = beats[0]
    assert first.data["request"]["member_epoch"] == 0  # joining
    assert first.data["request"]["subscription"] == [name]
    assert got[0].generation >= 1 and got[0].member_id  # the epoch the broker gave
    assert sum(len(ps) for ps in got[0].data["response"]["assignment"].values()) == 2
    snap = described(bootstrap, group)
    assert [m.member_id for m in snap.members] == [got[0].member_id]


def test_each_broker_gets_its_own_listener_and_clients_never_see_the_cluster_s_addresses(
    bootstrap: str, topic: Callable[[int], str]
) -> None:
    """Bootstrapped by another name (localhost) than the broker advertises, the proxy
    opens a second listener for the advertised broker and clients only ever connect to
    the proxy."""
    from kafka import KafkaConsumer

    host, port = bootstrap.rsplit(":", 1)
    if host != "127.0.0.1":
        pytest.skip("needs a broker advertised as 127.0.0.1 (reachable as localhost)")
    p = ProxyThread(ClientSettings.from_options(f"localhost:{port}", timeout_s=10))
    p.start()
    name = topic(2)
    try:
        admin = KafkaAdminClient(bootstrap_servers=p.bootstrap)
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        opened = [e for e in p.snapshot() if e.type == "ListenerOpened"]
        assert len(opened) == 1 and opened[0].data["upstream"] == bootstrap
        proxy_port = int(opened[0].data["address"].rsplit(":", 1)[1])
        assert [(b["host"], b["port"]) for b in brokers] == [("127.0.0.1", proxy_port)]
        # A client that knows only the proxy finds the topic's leader through it.
        consumer = KafkaConsumer(bootstrap_servers=p.bootstrap)
        try:
            assert consumer.partitions_for_topic(name) == {0, 1}
        finally:
            consumer.close()
        assert p.run_.proxy is not None and p.run_.proxy.connections >= 3
    finally:
        p.close()


# -- Metadata, when asked ---------------------------------------------------------------


def test_trace_metadata_shows_when_a_client_sees_a_grown_topic(
    bootstrap: str, proxy: ProxyThread, topic: Callable[[int], str]
) -> None:
    """With --trace-metadata a client's Metadata answers are events carrying each
    topic's partition count, before and after the topic grew; without it (the module's
    proxy) the same requests give none."""
    from kafka.admin import NewPartitions

    name = topic(2)
    settings = ClientSettings.from_options(bootstrap, timeout_s=10)
    meta = ProxyThread(settings, ProxyConfig(trace_metadata=True))
    meta.start()
    direct = KafkaAdminClient(bootstrap_servers=bootstrap)
    through = KafkaAdminClient(bootstrap_servers=meta.bootstrap, client_id="meta-watch")
    plain = KafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id="meta-plain")
    try:
        through.describe_topics([name])
        plain.describe_topics([name])
        direct.create_partitions({name: NewPartitions(5)})

        def counts_seen() -> list[int] | None:
            through.describe_topics([name])  # one more Metadata request through the proxy
            counts = [
                e.data["response"]["partitions"].get(name)
                for e in traced(meta, "MetadataTraced", "meta-watch")
                if e.data["request"]["topics"] == [name]
            ]
            return counts if counts and counts[-1] == 5 else None

        counts = wait_for("a Metadata answer with 5 partitions", counts_seen)
        assert counts[0] == 2 and counts[-1] == 5
        sees = traced(meta, "MetadataTraced", "meta-watch")
        assert all(e.group == "" and e.data["error"] == "NONE" for e in sees)
        assert traced(proxy, "MetadataTraced", "meta-plain") == []
    finally:
        for admin in (through, plain, direct):
            admin.close()
        meta.close()
