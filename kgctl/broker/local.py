"""Start, check and stop a local Kafka cluster of one or three nodes: KRaft (combined
broker and controller nodes), or on Kafka 3.x ZooKeeper mode (one ZooKeeper server run
from the same jars, then the brokers with `zookeeper.connect`).

State (pids, ports, data dir, version) lives in `<state dir>/broker.json` so that
`status`, `logs` and `down` work from any shell. A pid is only ever signalled after
checking that its command line is the Kafka node kgctl started with that config file,
so `down` never touches a process it did not start (pids get reused).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgctl.adapters.cluster import describe_cluster
from kgctl.broker.provision import (
    DEFAULT_KAFKA_VERSION,
    KafkaDistribution,
    Progress,
    check_java,
    java_executable,
    major_version,
    resolve_kafka,
)
from kgctl.errors import MissingDependencyError, SetupError, UsageError
from kgctl.settings import ClientSettings

HEAP = ["-Xms128m", "-Xmx512m"]
# Groups settle in a second and tests can use short session timeouts; Kafka's own
# defaults (3 s initial delay, 6 s minimum session timeout) come back with
# --kafka-defaults. For `consumer`-protocol groups (KIP-848) the session and the
# heartbeat interval are the broker's, not the member's: Kafka's 45 s session and 5 s
# interval would make a member learn a new assignment up to 5 s late and a killed member
# hold its partitions for 45 s; here they are 10 s and 500 ms, and the minima let a
# group config (consumer.session.timeout.ms) go down to 1 s.
TEST_FRIENDLY = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "500",
}

LOG4J2 = """\
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=FILE
appender.file.type=File
appender.file.name=FILE
appender.file.fileName={log}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.apache.name=org.apache.kafka
logger.apache.level=INFO
"""


# --security: the client listener's protocol; the controller listener stays PLAINTEXT.
SECURITY_PROTOCOLS = {
    "none": "PLAINTEXT",
    "scram": "SASL_PLAINTEXT",
    "tls": "SSL",
    "scram+tls": "SASL_SSL",
}
ADMIN_USER = "kgctl"
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"

KAFKA_MAIN = "kafka.Kafka"
# ZooKeeper's own server entry point (what Kafka 3.x's zookeeper-server-start.sh runs):
# with no `server.N` lines in its config it serves standalone.
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
METADATA_MODES = ("kraft", "zookeeper")
# KIP-848's consumer protocol before Kafka 4.0 (early access in 3.7, preview in 3.8 and
# 3.9, KRaft only): off unless the broker lists it among its rebalance protocols; 3.7
# also needs the new group coordinator switched on by name.
CONSUMER_PROTOCOL_3X = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.coordinator.new.enable": "true",
}


def state_dir() -> Path:
    base = os.environ.get("KGCTL_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "kgctl"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kraft_cluster_id() -> str:
    """Kafka's Uuid string form: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's own Uuid.randomUuid, never one that starts with a dash: the storage
    tool would read it as an option (1 run in 64 failed to format before this)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# Nodes started by this process, kept so they can be waited on (no zombies, and no
# "subprocess still running" warnings when this process outlives them).
_children: dict[int, subprocess.Popen[bytes]] = {}
# Each node log's size when this process last started a node with it.
_log_sizes_at_start: dict[str, int] = {}


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel sends SIGTERM to the node
    # when the process that started it dies (only for brokers owned by one run).
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Node:
    node_id: int
    port: int
    controller_port: int
    pid: int = 0
    config: str = ""
    log: str = ""
    main: str = KAFKA_MAIN  # the Java main class, checked in /proc before any signal


@dataclass
class BrokerState:
    """What `up` started, as written to the state file."""

    version: str
    data_dir: str
    nodes: list[Node] = field(default_factory=list)
    kafka_defaults: bool = False
    origin: str = ""
    started_at: float = 0.0
    security: str = "none"
    acls: bool = False
    client_config: str = ""  # the client.properties (0600) of a secured cluster
    metadata: str = "kraft"  # kraft | zookeeper
    consumer_protocol: bool = False  # KIP-848 switched on for a 3.x KRaft broker
    zookeeper: Node | None = None  # the ZooKeeper server of zookeeper mode
    # __consumer_offsets's partitions when it is created (0: 1, or 6 for a cluster); the
    # tests of monitors sharing that topic need several on one node.
    offsets_partitions: int = 0

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, object]) -> BrokerState:
        nodes = [Node(**n) for n in raw.pop("nodes", [])]  # type: ignore[attr-defined]
        zk = raw.pop("zookeeper", None)
        zookeeper = Node(**zk) if isinstance(zk, dict) else None
        return cls(nodes=nodes, zookeeper=zookeeper, **raw)  # type: ignore[arg-type]

    @property
    def processes(self) -> list[Node]:
        """Every process of this cluster: ZooKeeper (if any) first, then the nodes."""
        return ([self.zookeeper] if self.zookeeper else []) + self.nodes

    @property
    def label(self) -> str:
        """ "Kafka 3.9.1 (ZooKeeper)": the version and mode, as the refusals name them."""
        mode = " (ZooKeeper)" if self.metadata == "zookeeper" else ""
        kip848 = " with the consumer protocol on" if self.consumer_protocol else ""
        return f"Kafka {self.version}{mode}{kip848}"


def _reap_exited() -> None:
    """Wait on nodes this process started that have died since, e.g. killed by another
    process (chaos's coordinator failover): no zombie until this process exits."""
    for pid, child in list(_children.items()):
        if child.poll() is not None:
            del _children[pid]


def node_is_running(node: Node) -> bool:
    """True when `node.pid` is alive and is the Kafka node started with `node.config`."""
    if node.pid <= 0:
        return False
    _reap_exited()
    if node.pid in _children:
        # Started by this process and not exited: ours for sure. Its /proc cmdline can
        # read empty for a moment after the start (the java launcher execs again), which
        # made `up` report a live node as "exited while starting".
        return True
    try:
        cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return node.main.encode() in cmdline and node.config.encode() in cmdline


class LocalBroker:
    """One local Kafka cluster, identified by its state directory."""

    def __init__(self, state_path: Path | None = None) -> None:
        self.state_path = state_path or state_dir() / "broker.json"

    # -- state -------------------------------------------------------------------------
    def load(self) -> BrokerState | None:
        try:
            return BrokerState.from_dict(json.loads(self.state_path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise SetupError(
                f"{self.state_path} is not a kgctl broker state file ({exc}); "
                "remove it and run kgctl broker up again"
            ) from None

    def _save(self, state: BrokerState) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state.to_dict(), indent=2))
        tmp.replace(self.state_path)

    def status(self) -> dict[str, object]:
        state = self.load()
        if state is None:
            return {"running": False, "nodes": [], "state_file": str(self.state_path)}
        nodes = [
            {
                "node_id": n.node_id,
                "pid": n.pid,
                "port": n.port,
                "running": node_is_running(n),
                "log": n.log,
            }
            for n in state.nodes
        ]
        return {
            "running": all(n["running"] for n in nodes)
            and (state.zookeeper is None or node_is_running(state.zookeeper)),
            "bootstrap": state.bootstrap,
            "version": state.version,
            "data_dir": state.data_dir,
            "nodes": nodes,
            "dead": [n["node_id"] for n in nodes if not n["running"]],
            "state_file": str(self.state_path),
            "security": state.security,
            "acls": state.acls,
            "client_config": state.client_config or None,
            "metadata": state.metadata,
            "consumer_protocol": state.consumer_protocol,
            "zookeeper": (
                {
                    "pid": state.zookeeper.pid,
                    "port": state.zookeeper.port,
                    "running": node_is_running(state.zookeeper),
                }
                if state.zookeeper
                else None
            ),
        }

    # -- up ----------------------------------------------------------------------------
    def up(
        self,
        *,
        port: int | None = None,
        brokers: int = 1,
        data_dir: Path | None = None,
        kafka_defaults: bool = False,
        version: str = DEFAULT_KAFKA_VERSION,
        kafka_home: Path | None = None,
        tie_to_parent: bool = False,
        security: str = "none",
        acls: bool = False,
        metadata: str = "kraft",
        consumer_protocol: bool = False,
        offsets_partitions: int | None = None,
        timeout_s: float = 120.0,
        say: Callable[[str], None] = lambda _m: None,
        wait: Callable[[str, Callable[[], bool], float], None] | None = None,
        progress: Progress | None = None,
    ) -> BrokerState:
        """Start the cluster, or return the one already running (idempotent).

        A node that died since the last `up` is restarted on its old port and data.
        `tie_to_parent` makes every node die with this process (test sessions, demos).
        `metadata="zookeeper"` (Kafka 3.x) starts a ZooKeeper server first;
        `consumer_protocol` switches KIP-848 on for a 3.x KRaft broker (4.x serves it).
        """
        _check_options(brokers, security, acls, metadata, consumer_protocol, version, kafka_home)
        existing = self.load()
        wanted = BrokerState(
            version, "", metadata=metadata, consumer_protocol=consumer_protocol
        ).label
        if (
            existing
            and kafka_home is None
            and existing.label != wanted
            and all(node_is_running(n) for n in existing.processes)
        ):
            # Not a silent success with the other cluster's address (seen: `up
            # --kafka-version 3.9.1 -q` printed the running 3.7.2's bootstrap, exit 0).
            raise UsageError(
                f"{existing.label} is already running at {existing.bootstrap}, not "
                f"{wanted}; run kgctl broker down first to change it"
            )
        if existing and all(node_is_running(n) for n in existing.processes):
            if len(existing.nodes) != brokers:
                raise UsageError(
                    f"a local cluster of {len(existing.nodes)} node(s) is already running "
                    f"at {existing.bootstrap}; run kgctl broker down first to change its size"
                )
            if (existing.security, existing.acls) != (security, acls):
                raise UsageError(
                    f"a local cluster with --security {existing.security}"
                    f"{' --acls' if existing.acls else ''} is already running at "
                    f"{existing.bootstrap}; run kgctl broker down first to change it"
                )
            return existing
        java = java_executable()
        dist = resolve_kafka(version, kafka_home, say=say, progress=progress)
        check_java(java, dist.version)
        if (
            existing
            and len(existing.nodes) == brokers
            and (data_dir is None or str(data_dir) == existing.data_dir)
            and (existing.security, existing.acls) == (security, acls)
            and existing.version == dist.version
            and (existing.metadata, existing.consumer_protocol) == (metadata, consumer_protocol)
        ):
            state = existing  # restart the dead nodes of the cluster we know
        else:
            if existing:
                self.down()
            state = self._plan(
                dist, brokers, port, data_dir, kafka_defaults, security, acls, metadata
            )
        state.version, state.origin = dist.version, dist.origin
        state.consumer_protocol = consumer_protocol
        if offsets_partitions is not None:
            state.offsets_partitions = offsets_partitions
        self._write_security(state)
        self._write_configs(state)
        started: list[Node] = []
        try:
            if state.zookeeper is not None and not node_is_running(state.zookeeper):
                state.zookeeper.pid = self._start_zookeeper(
                    java, dist, state.zookeeper, tie_to_parent
                )
                started.append(state.zookeeper)
                self._wait_zookeeper(state.zookeeper, timeout_s)
            for node in state.nodes:
                if not node_is_running(node):
                    node.pid = self._start_node(java, dist, state, node, tie_to_parent)
                    started.append(node)
            state.started_at = time.time()
            self._save(state)
            self._wait_ready(state, timeout_s, wait)
        except BaseException:
            # A failed start (a node not answering within the timeout, Ctrl-C while it
            # starts) stops what this call started before it is reported: nothing is
            # left running that no state describes. Nodes that were up before stay up.
            self._stop(started[::-1], timeout_s=10.0)
            if state is not existing:
                self.state_path.unlink(missing_ok=True)
            raise
        return state

    def _plan(
        self,
        dist: KafkaDistribution,
        brokers: int,
        port: int | None,
        data_dir: Path | None,
        kafka_defaults: bool,
        security: str = "none",
        acls: bool = False,
        metadata: str = "kraft",
    ) -> BrokerState:
        remembered = self._remembered_ports()
        first = port or (remembered[0] if remembered and port_is_free(remembered[0]) else None)
        ports: list[int] = []
        if first is not None:
            if not port_is_free(first):
                raise UsageError(f"--port {first}: the port is in use; pick another or omit --port")
            ports.append(first)
        while len(ports) < brokers * 2:
            candidate = free_port()
            if candidate not in ports:
                ports.append(candidate)
        root = (Path(data_dir) if data_dir else self.state_path.parent / "data").resolve()
        # SCRAM users are written into the metadata log when storage is formatted, so a
        # new password (or another --security) needs freshly formatted storage.
        shape_security = f"{security}:{self._password_id(security)}"
        self._claim_data_dir(
            root,
            brokers,
            owned=data_dir is None,
            security=shape_security,
            kind=f"{dist.version}:{metadata}",
        )
        nodes = [
            Node(node_id=i + 1, port=ports[i], controller_port=ports[brokers + i])
            for i in range(brokers)
        ]
        zookeeper = None
        if metadata == "zookeeper":
            # The spare controller port of node 1 is ZooKeeper's client port.
            zookeeper = Node(
                node_id=0,
                port=nodes[0].controller_port,
                controller_port=0,
                config=str(root / "zookeeper" / "zoo.cfg"),
                log=str(root / "zookeeper" / "zookeeper.log"),
                main=ZOOKEEPER_MAIN,
            )
        self._remember_ports([n.port for n in nodes])
        return BrokerState(
            dist.version,
            str(root),
            nodes,
            kafka_defaults,
            security=security,
            acls=acls,
            metadata=metadata,
            zookeeper=zookeeper,
        )

    @staticmethod
    def _claim_data_dir(
        root: Path, brokers: int, owned: bool, security: str = "none:", kind: str = ""
    ) -> None:
        """Refuse to reuse data formatted for a cluster of another size or security.

        KRaft storage remembers its voters; a 1-node log under a 3-node quorum (or the
        reverse) fails in confusing ways, and SCRAM users live in the formatted metadata.
        kgctl's own default folder is wiped instead.
        """
        shape = root / "kgctl-cluster.json"
        if shape.exists():
            try:
                recorded = json.loads(shape.read_text())
            except ValueError:
                recorded = {}
            size = recorded.get("nodes")
            # Storage of another version or metadata mode does not start (a 4.4 metadata
            # log under a 3.7 broker, KRaft logs under ZooKeeper).
            if (
                size != brokers
                or recorded.get("security", "none:") != security
                or recorded.get("kind", kind) != kind
            ):
                if not owned:
                    raise UsageError(
                        f"--data-dir {root} holds a {size}-node cluster formatted for "
                        f"--security {recorded.get('security', 'none:').split(':')[0]} "
                        f"({recorded.get('kind', kind) or 'Kafka 4.x:kraft'}); use "
                        f"another folder for this one, or remove it"
                    )
                shutil.rmtree(root)
        elif root.exists() and any(root.iterdir()):
            if not owned:
                raise UsageError(
                    f"--data-dir {root} is not empty and was not made by kgctl; "
                    "pick an empty or new folder"
                )
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
        shape.write_text(json.dumps({"nodes": brokers, "security": security, "kind": kind}))

    def client_settings(self, state: BrokerState | None = None, timeout_s: float = 30.0) -> Any:
        """ClientSettings that reach this cluster as its admin user (with --security)."""

        state = state or self.load()
        if state is None:
            raise SetupError("no local Kafka was started; start one with: kgctl broker up")
        if not state.client_config:
            return ClientSettings(bootstrap=state.bootstrap, timeout_s=timeout_s)
        return ClientSettings.from_options(
            state.bootstrap, Path(state.client_config), timeout_s=timeout_s
        )

    # -- security -----------------------------------------------------------------------
    @property
    def security_dir(self) -> Path:
        return self.state_path.parent / "security"

    def _password(self) -> str:
        """The admin user's password: generated once, kept only in the 0600 secrets file."""
        path = self.security_dir / "password"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            pass
        _private_dir(self.security_dir)
        password = secrets.token_urlsafe(24)
        _write_private(path, password + "\n")
        return password

    def _password_id(self, security: str) -> str:
        """A non-secret fingerprint of the password the storage was formatted with."""
        if security == "none":
            return ""

        return hashlib.sha256(self._password().encode()).hexdigest()[:12]

    def _write_security(self, state: BrokerState) -> None:
        """CA, broker certificate, broker secrets and client.properties for --security."""
        if state.security == "none":
            state.client_config = ""
            return
        folder = self.security_dir
        _private_dir(folder)
        protocol = SECURITY_PROTOCOLS[state.security]
        password = self._password()
        jaas = f'{SCRAM_MODULE} required username="{ADMIN_USER}" password="{password}";'
        # Read by Kafka's FileConfigProvider, so server.properties holds no secret.
        _write_private(folder / "broker-secrets.properties", f"jaas={_escape_prop(jaas)}\n")
        client = {"bootstrap.servers": state.bootstrap, "security.protocol": protocol}
        if "scram" in state.security:
            client["sasl.mechanism"] = SCRAM_MECHANISMS[0]
            client["sasl.jaas.config"] = jaas
        if "tls" in state.security:
            _make_certificates(folder)
            client["ssl.truststore.type"] = "PEM"
            client["ssl.truststore.location"] = str(folder / "ca.pem")
        lines = [
            "# kgctl broker up --security " + state.security + " (secret: keep it 0600)\n",
            *(f"{k}={_escape_prop(v)}\n" for k, v in client.items()),
        ]
        config = folder / "client.properties"
        _write_private(config, "".join(lines))
        state.client_config = str(config)

    def _security_props(self, state: BrokerState, node: Node) -> dict[str, str]:
        protocol = SECURITY_PROTOCOLS[state.security]
        if protocol == "PLAINTEXT":
            return {}
        folder = self.security_dir
        props = {
            "listeners": f"CLIENT://127.0.0.1:{node.port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{node.port}",
            "inter.broker.listener.name": "CLIENT",
            "listener.security.protocol.map": f"CLIENT:{protocol},CONTROLLER:PLAINTEXT",
            "config.providers": "file",
            "config.providers.file.class": FILE_PROVIDER,
        }
        if "scram" in state.security:
            secret = f"${{file:{folder / 'broker-secrets.properties'}:jaas}}"
            props["sasl.enabled.mechanisms"] = ",".join(SCRAM_MECHANISMS)
            props["sasl.mechanism.inter.broker.protocol"] = SCRAM_MECHANISMS[0]
            for mechanism in SCRAM_MECHANISMS:
                props[f"listener.name.client.{mechanism.lower()}.sasl.jaas.config"] = secret
        if "tls" in state.security:
            props.update(
                {
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": str(folder / "broker.pem"),
                    "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": str(folder / "ca.pem"),
                }
            )
        if state.acls:
            props.update(
                {
                    "authorizer.class.name": AUTHORIZER,
                    # The admin user, and the brokers on the PLAINTEXT controller listener.
                    "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
                    "allow.everyone.if.no.acl.found": "false",
                }
            )
        return props

    def _remembered_ports(self) -> list[int]:
        try:
            return list(json.loads((self.state_path.parent / "ports.json").read_text()))
        except (OSError, ValueError):
            return []

    def _remember_ports(self, ports: list[int]) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        (self.state_path.parent / "ports.json").write_text(json.dumps(ports))

    def _write_configs(self, state: BrokerState) -> None:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in state.nodes)
        replication = str(len(state.nodes))
        if state.zookeeper is not None:
            zk_home = Path(state.zookeeper.config).parent
            (zk_home / "data").mkdir(parents=True, exist_ok=True)
            zk_props = {
                "dataDir": str(zk_home / "data"),
                "clientPort": str(state.zookeeper.port),
                "clientPortAddress": "127.0.0.1",
                "maxClientCnxns": "0",
                "admin.enableServer": "false",  # its Jetty would take port 8080
            }
            Path(state.zookeeper.config).write_text(
                "".join(f"{k}={v}\n" for k, v in zk_props.items())
            )
            (zk_home / "log4j2.properties").write_text(LOG4J2.format(log=state.zookeeper.log))
        for node in state.nodes:
            home = Path(state.data_dir) / f"node-{node.node_id}"
            (home / "logs").mkdir(parents=True, exist_ok=True)
            props = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                f"CONTROLLER://127.0.0.1:{node.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": str(home / "kafka-logs"),
                "num.partitions": "1",
                "offsets.topic.replication.factor": replication,
                "offsets.topic.num.partitions": str(
                    state.offsets_partitions or (6 if len(state.nodes) > 1 else 1)
                ),
                "transaction.state.log.replication.factor": replication,
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": replication,
                "share.coordinator.state.topic.min.isr": "1",
                "auto.create.topics.enable": "false",
            }
            if state.zookeeper is not None:
                for kraft_only in (
                    "process.roles",
                    "node.id",
                    "controller.quorum.voters",
                    "controller.listener.names",
                ):
                    del props[kraft_only]
                props.update(
                    {
                        "broker.id": str(node.node_id),
                        "zookeeper.connect": f"127.0.0.1:{state.zookeeper.port}",
                        "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                    }
                )
            if not state.kafka_defaults:
                props.update(TEST_FRIENDLY)
            if state.consumer_protocol and major_version(state.version) < 4:
                props.update(CONSUMER_PROTOCOL_3X)
            props.update(self._security_props(state, node))
            config = home / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            node.log = str(home / "logs" / "server.log")
            (home / "log4j2.properties").write_text(LOG4J2.format(log=node.log))
            node.config = str(config)

    def _start_node(
        self,
        java: str,
        dist: KafkaDistribution,
        state: BrokerState,
        node: Node,
        tie_to_parent: bool,
    ) -> int:
        home = Path(node.config).parent
        log4j = f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}"
        if state.zookeeper is None and not (home / "kafka-logs" / "meta.properties").exists():
            cluster_id = self._cluster_id(state)
            args = [
                *HEAP,
                "-cp",
                dist.classpath,
                log4j,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                node.config,
                "--ignore-formatted",
            ]
            if "scram" in state.security:
                password = self._password()
                for mechanism in SCRAM_MECHANISMS:
                    args += ["--add-scram", f"{mechanism}=[name={ADMIN_USER},password={password}]"]
            # Through a 0600 @argfile, so the password never shows in a process listing.
            argfile = self.security_dir / f"format-{node.node_id}.args"
            if state.security != "none":
                _private_dir(self.security_dir)
                _write_private(argfile, "".join(_argfile_quote(a) + "\n" for a in args))
                command = [java, f"@{argfile}"]
            else:
                command = [java, *args]
            try:
                formatted = subprocess.run(command, capture_output=True, text=True, check=False)
            finally:
                argfile.unlink(missing_ok=True)
            if formatted.returncode != 0:
                tail = (formatted.stdout + formatted.stderr).strip().splitlines()[-1:]
                raise SetupError(
                    f"formatting Kafka storage in {home} failed: {' '.join(tail)}; "
                    "remove that folder or pick another --data-dir"
                )
        for log in (Path(node.log), home / "logs" / "console.log"):
            _log_sizes_at_start[str(log)] = log.stat().st_size if log.exists() else 0
        console = open(home / "logs" / "console.log", "ab")
        try:
            process = subprocess.Popen(
                [
                    java,
                    *HEAP,
                    "-XX:+UseG1GC",
                    "-Djava.awt.headless=true",
                    log4j,
                    "-cp",
                    dist.classpath,
                    "kafka.Kafka",
                    node.config,
                ],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=home,
                # A broker of its own session: Ctrl-C in the shell that ran `up` must
                # not reach it; it lives until `down` unless tied to its parent.
                start_new_session=True,
                preexec_fn=_die_with_parent if tie_to_parent else None,
            )
        finally:
            console.close()
        _children[process.pid] = process
        return process.pid

    @staticmethod
    def _start_zookeeper(
        java: str, dist: KafkaDistribution, zookeeper: Node, tie_to_parent: bool
    ) -> int:
        """ZooKeeper from the Kafka 3.x jars (they carry it), on 127.0.0.1 only; it logs
        through the same SLF4J-to-Log4j 2 binding as the broker."""
        home = Path(zookeeper.config).parent
        _log_sizes_at_start[zookeeper.log] = (
            Path(zookeeper.log).stat().st_size if Path(zookeeper.log).exists() else 0
        )
        with open(home / "console.log", "ab") as console:
            process = subprocess.Popen(
                [
                    java,
                    "-Xms64m",
                    "-Xmx256m",
                    f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
                    "-Dzookeeper.4lw.commands.whitelist=ruok",
                    "-cp",
                    dist.classpath,
                    ZOOKEEPER_MAIN,
                    zookeeper.config,
                ],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=home,
                start_new_session=True,
                preexec_fn=_die_with_parent if tie_to_parent else None,
            )
        _children[process.pid] = process
        return process.pid

    @staticmethod
    def _wait_zookeeper(zookeeper: Node, timeout_s: float) -> None:
        """Until ZooKeeper answers `ruok` with `imok` (a broker started before would
        spend its zookeeper.connection.timeout retrying)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if not node_is_running(zookeeper):
                raise SetupError(
                    f"ZooKeeper exited while starting: {_last_error(zookeeper.log)}; "
                    f"see {zookeeper.log}"
                )
            try:
                with socket.create_connection(("127.0.0.1", zookeeper.port), timeout=1) as sock:
                    sock.sendall(b"ruok")
                    if sock.recv(4) == b"imok":
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise SetupError(
            f"ZooKeeper on 127.0.0.1:{zookeeper.port} did not answer within "
            f"{time.monotonic() - started:.0f} s; see {zookeeper.log}"
        )

    def _cluster_id(self, state: BrokerState) -> str:
        marker = Path(state.data_dir) / "cluster.id"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(_kraft_cluster_id())
        return marker.read_text().strip()

    def _wait_ready(
        self,
        state: BrokerState,
        timeout_s: float,
        wait: Callable[[str, Callable[[], bool], float], None] | None,
    ) -> None:
        settings = self.client_settings(state, timeout_s=5)

        last_error: list[str] = ["no answer yet"]

        def ready() -> bool:
            for node in state.nodes:
                if not node_is_running(node):
                    raise SetupError(
                        f"Kafka node {node.node_id} exited while starting: "
                        f"{_last_error(node.log, Path(node.log).parent / 'console.log')}; "
                        f"see kgctl broker logs"
                    )
            for node in state.nodes:
                # A plain TCP probe first: kafka-python leaks a socket on each refused
                # connection, and the JVM takes seconds to listen.
                try:
                    socket.create_connection(("127.0.0.1", node.port), timeout=1).close()
                except OSError:
                    return False
            try:
                brokers = describe_cluster(settings)["brokers"]
            except Exception as exc:  # not answering yet: keep waiting
                last_error[0] = f"{type(exc).__name__}: {exc}"
                return False
            return len(brokers) == len(state.nodes)

        label = f"waiting for Kafka at {state.bootstrap}"
        if wait is not None:
            wait(label, ready, timeout_s)
            return
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                raise SetupError(
                    f"Kafka at {state.bootstrap} did not answer within {timeout_s:.0f} s "
                    f"(last: {last_error[0][:200]}); see kgctl broker logs"
                )
            time.sleep(0.3)

    # -- down --------------------------------------------------------------------------
    def down(self, timeout_s: float = 30.0) -> list[int]:
        """Stop every node kgctl started (and nothing else); return the pids stopped."""
        state = self.load()
        if state is None:
            return []
        stopped = [n for n in state.nodes if node_is_running(n)]
        self._stop(stopped, timeout_s)
        # ZooKeeper last: a broker's controlled shutdown goes through it.
        if state.zookeeper is not None and node_is_running(state.zookeeper):
            self._stop([state.zookeeper], timeout_s)
            stopped.append(state.zookeeper)
        self.state_path.unlink(missing_ok=True)
        return [n.pid for n in stopped]

    @staticmethod
    def _stop(nodes: list[Node], timeout_s: float) -> None:
        """SIGTERM, then SIGKILL after `timeout_s` for the nodes that did not exit; reaped."""
        for node in nodes:
            try:
                os.kill(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while any(node_is_running(n) for n in nodes) and time.monotonic() < deadline:
            time.sleep(0.1)  # polled: a JVM's exit is not an event this process can wait on
        for node in nodes:
            if node_is_running(node):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.pid, signal.SIGKILL)
        for node in nodes:
            _reap(node.pid)

    def stop_node(self, node_id: int, sig: int = signal.SIGKILL) -> int:
        """Kill one node (coordinator failover); `up` starts it again."""
        state = self.load()
        node = next((n for n in state.nodes if n.node_id == node_id), None) if state else None
        if node is None or not node_is_running(node):
            raise UsageError(f"node {node_id} is not running")
        os.kill(node.pid, sig)
        while node_is_running(node):
            time.sleep(0.05)
        _reap(node.pid)
        return node.pid


def local_broker_logs(bootstrap: str) -> list[Path]:
    """The logs of the local `kgctl broker` cluster, when `bootstrap` is one of its nodes."""
    try:
        state = LocalBroker().load()
    except Exception:  # no local broker, or an unreadable state file: no log to offer
        return []
    if state is None:
        return []
    ports = {str(n.port) for n in state.nodes}
    wanted = {addr.rsplit(":", 1)[-1] for addr in bootstrap.split(",")}
    if not wanted & ports:
        return []
    return [Path(n.log) for n in state.nodes if Path(n.log).exists()]


def logged_setting(logs: list[Path], name: str) -> str | None:
    """The value a broker logged for setting `name` when it last started (the
    "KafkaConfig values:" block lists every setting, internal ones too, which
    DescribeConfigs leaves out), or None when no log has it."""
    prefix = f"{name} = "
    found: str | None = None
    for path in logs:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.strip().startswith(prefix):
                found = line.strip()[len(prefix) :].strip()  # the latest start wins
    return found


def _check_options(
    brokers: int,
    security: str,
    acls: bool,
    metadata: str,
    consumer_protocol: bool,
    version: str,
    kafka_home: Path | None,
) -> None:
    """`up`'s options that cannot go together, refused before anything starts."""
    if brokers not in (1, 3):
        raise UsageError(f"--brokers {brokers}: only 1 or 3 are supported")
    if security not in SECURITY_PROTOCOLS:
        raise UsageError(
            f"--security {security!r}: expected one of {', '.join(SECURITY_PROTOCOLS)}"
        )
    if acls and "scram" not in security:
        raise UsageError(
            "--acls needs --security scram or scram+tls: without SCRAM every client is "
            "User:ANONYMOUS, so ACLs could not tell users apart"
        )
    if metadata not in METADATA_MODES:
        raise UsageError(f"--metadata {metadata!r}: expected one of {', '.join(METADATA_MODES)}")
    if metadata == "zookeeper" and kafka_home is None and major_version(version) >= 4:
        raise UsageError(
            f"--metadata zookeeper with Kafka {version}: ZooKeeper mode ended with Kafka "
            "3.9; pass --kafka-version 3.9.1 (or another 3.x), or drop --metadata"
        )
    if metadata == "zookeeper" and (security != "none" or consumer_protocol):
        raise UsageError(
            "--metadata zookeeper runs PLAINTEXT and the classic protocol only (the "
            "consumer protocol needs KRaft); drop --security / --consumer-protocol"
        )


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (created 0600, never world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    path.chmod(0o600)


def _escape_prop(value: str) -> str:
    """A value as Java .properties text (backslashes; no newlines in kgctl's values)."""
    return value.replace("\\", "\\\\")


def _argfile_quote(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _make_certificates(folder: Path) -> None:
    """A throwaway CA and a broker certificate for 127.0.0.1/localhost (PEM, openssl)."""
    ca_key, ca, broker = folder / "ca.key", folder / "ca.pem", folder / "broker.pem"
    if ca.exists() and broker.exists():
        return
    openssl = shutil.which("openssl")
    if openssl is None:
        raise MissingDependencyError(
            "--security tls needs openssl to make the local CA and certificate; install it "
            "(Debian: apt-get install openssl)"
        )
    key, csr, crt, ext = (folder / n for n in ("broker.key", "broker.csr", "broker.crt", "ext"))
    ext.write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "basicConstraints=CA:FALSE\n"
    )
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
         "-days", "30", "-subj", "/CN=kgctl local CA (throwaway)"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", "/CN=kgctl-broker"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
         "-out", crt, "-days", "30", "-extfile", ext],
    ]  # fmt: skip
    old_umask = os.umask(0o077)
    try:
        for step in steps:
            done = subprocess.run(
                [openssl, *map(str, step)], capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise SetupError(
                    f"openssl {step[0]} failed making the local certificates: "
                    f"{done.stderr.strip().splitlines()[-1:]}; see {folder}"
                )
    finally:
        os.umask(old_umask)
    # Kafka's PEM keystore: the PKCS#8 key, then the certificate chain, in one file.
    _write_private(broker, key.read_text() + crt.read_text() + ca.read_text())
    for leftover in (key, csr, crt, ext, folder / "ca.srl"):
        leftover.unlink(missing_ok=True)
    ca.chmod(0o644)


def _reap(pid: int, timeout_s: float = 10.0) -> None:
    # Our own children (nodes started in this process) stay zombies until waited on. A
    # dying JVM loses its command line before it can be waited on, so wait for it.
    child = _children.get(pid)
    if child is None:
        return
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return
    del _children[pid]


def _last_error(*logs: str | Path) -> str:
    """The last error line each log got since this process last started a node with it
    (the logs are appended to: an older run's errors are not this start's)."""
    for path in logs:
        try:
            with open(path, "rb") as log:
                log.seek(_log_sizes_at_start.get(str(path), 0))
                lines = log.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
        if errors:
            return errors[-1].strip()[:300]
    return "no error in its log"


def tail(path: str | Path, lines: int) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:] if lines > 0 else text.splitlines()


__all__ = ["BrokerState", "LocalBroker", "Node", "node_is_running", "state_dir", "tail"]
