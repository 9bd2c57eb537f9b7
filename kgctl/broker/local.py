"""Start, check and stop a local KRaft cluster of one or three combined nodes.

State (pids, ports, data dir, version) lives in `<state dir>/broker.json` so that
`status`, `logs` and `down` work from any shell. A pid is only ever signalled after
checking that its command line is the Kafka node kgctl started with that config file,
so `down` never touches a process it did not start (pids get reused).
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kgctl.broker.provision import (
    DEFAULT_KAFKA_VERSION,
    KafkaDistribution,
    Progress,
    check_java,
    java_executable,
    resolve_kafka,
)
from kgctl.errors import SetupError, UsageError

HEAP = ["-Xms128m", "-Xmx512m"]
# Groups settle in a second and tests can use short session timeouts; Kafka's own
# defaults (3 s initial delay, 6 s minimum session timeout) come back with
# --kafka-defaults.
TEST_FRIENDLY = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
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
    # Kafka's Uuid string form: 16 random bytes, URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# Nodes started by this process, kept so they can be waited on (no zombies, and no
# "subprocess still running" warnings when this process outlives them).
_children: dict[int, subprocess.Popen[bytes]] = {}


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


@dataclass
class BrokerState:
    """What `up` started, as written to the state file."""

    version: str
    data_dir: str
    nodes: list[Node] = field(default_factory=list)
    kafka_defaults: bool = False
    origin: str = ""
    started_at: float = 0.0

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
        nodes = [Node(**n) for n in raw.pop("nodes", [])]  # type: ignore[arg-type, attr-defined]
        return cls(nodes=nodes, **raw)  # type: ignore[arg-type]


def node_is_running(node: Node) -> bool:
    """True when `node.pid` is alive and is the Kafka node started with `node.config`."""
    if node.pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in cmdline and node.config.encode() in cmdline


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
            "running": all(n["running"] for n in nodes),
            "bootstrap": state.bootstrap,
            "version": state.version,
            "data_dir": state.data_dir,
            "nodes": nodes,
            "dead": [n["node_id"] for n in nodes if not n["running"]],
            "state_file": str(self.state_path),
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
        timeout_s: float = 120.0,
        say: Callable[[str], None] = lambda _m: None,
        wait: Callable[[str, Callable[[], bool], float], None] | None = None,
        progress: Progress | None = None,
    ) -> BrokerState:
        """Start the cluster, or return the one already running (idempotent).

        A node that died since the last `up` is restarted on its old port and data.
        `tie_to_parent` makes every node die with this process (test sessions, demos).
        """
        if brokers not in (1, 3):
            raise UsageError(f"--brokers {brokers}: only 1 or 3 are supported")
        existing = self.load()
        if existing and all(node_is_running(n) for n in existing.nodes):
            if len(existing.nodes) != brokers:
                raise UsageError(
                    f"a local cluster of {len(existing.nodes)} node(s) is already running "
                    f"at {existing.bootstrap}; run kgctl broker down first to change its size"
                )
            return existing
        java = java_executable()
        check_java(java)
        dist = resolve_kafka(version, kafka_home, say=say, progress=progress)
        if (
            existing
            and len(existing.nodes) == brokers
            and (data_dir is None or str(data_dir) == existing.data_dir)
        ):
            state = existing  # restart the dead nodes of the cluster we know
        else:
            if existing:
                self.down()
            state = self._plan(dist, brokers, port, data_dir, kafka_defaults)
        state.version, state.origin = dist.version, dist.origin
        self._write_configs(state)
        for node in state.nodes:
            if not node_is_running(node):
                node.pid = self._start_node(java, dist, state, node, tie_to_parent)
        state.started_at = time.time()
        self._save(state)
        self._wait_ready(state, timeout_s, wait)
        return state

    def _plan(
        self,
        dist: KafkaDistribution,
        brokers: int,
        port: int | None,
        data_dir: Path | None,
        kafka_defaults: bool,
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
        self._claim_data_dir(root, brokers, owned=data_dir is None)
        nodes = [
            Node(node_id=i + 1, port=ports[i], controller_port=ports[brokers + i])
            for i in range(brokers)
        ]
        self._remember_ports([n.port for n in nodes])
        return BrokerState(dist.version, str(root), nodes, kafka_defaults)

    @staticmethod
    def _claim_data_dir(root: Path, brokers: int, owned: bool) -> None:
        """Refuse to reuse data formatted for a cluster of another size.

        KRaft storage remembers its voters; a 1-node log under a 3-node quorum (or the
        reverse) fails in confusing ways. kgctl's own default folder is wiped instead.
        """
        shape = root / "kgctl-cluster.json"
        if shape.exists():
            try:
                size = json.loads(shape.read_text()).get("nodes")
            except ValueError:
                size = None
            if size != brokers:
                if not owned:
                    raise UsageError(
                        f"--data-dir {root} holds a {size}-node cluster; use another folder "
                        f"for {brokers} node(s), or remove it"
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
        shape.write_text(json.dumps({"nodes": brokers}))

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
                "offsets.topic.num.partitions": "6" if len(state.nodes) > 1 else "1",
                "transaction.state.log.replication.factor": replication,
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": replication,
                "share.coordinator.state.topic.min.isr": "1",
                "auto.create.topics.enable": "false",
            }
            if not state.kafka_defaults:
                props.update(TEST_FRIENDLY)
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
        if not (home / "kafka-logs" / "meta.properties").exists():
            cluster_id = self._cluster_id(state)
            formatted = subprocess.run(
                [
                    java,
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
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if formatted.returncode != 0:
                tail = (formatted.stdout + formatted.stderr).strip().splitlines()[-1:]
                raise SetupError(
                    f"formatting Kafka storage in {home} failed: {' '.join(tail)}; "
                    "remove that folder or pick another --data-dir"
                )
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
        from kgctl.adapters.cluster import describe_cluster
        from kgctl.settings import ClientSettings

        settings = ClientSettings(bootstrap=state.bootstrap, timeout_s=5)

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
        for node in stopped:
            try:
                os.kill(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while any(node_is_running(n) for n in stopped) and time.monotonic() < deadline:
            time.sleep(0.1)
        for node in stopped:
            if node_is_running(node):
                os.kill(node.pid, signal.SIGKILL)
        for node in stopped:
            _reap(node.pid)
        self.state_path.unlink(missing_ok=True)
        return [n.pid for n in stopped]

    def stop_node(self, node_id: int, sig: int = signal.SIGKILL) -> int:
        """Kill one node (coordinator failover); `up` starts it again."""
        state = self.load()
        node = next((n for n in state.nodes if n.node_id == node_id), None) if state else None
        if node is None or not node_is_running(node):
            raise UsageError(f"node {node_id} is not running")
        os.kill(node.pid, sig)
        while node_is_running(node):
            _reap(node.pid)
            time.sleep(0.05)
        return node.pid


def _reap(pid: int) -> None:
    # Our own children (nodes started in this process) stay zombies until waited on.
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def _last_error(*logs: str | Path) -> str:
    for path in logs:
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
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
