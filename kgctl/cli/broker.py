"""`kgctl broker up|down|status|logs`: a real local Apache Kafka."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TransferSpeedColumn

from kgctl.broker.provision import DEFAULT_KAFKA_VERSION
from kgctl.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    OutputFormat,
    Overrides,
    Quiet,
    Verbose,
    emit_json,
    make_env,
    make_settings,
    run,
    spinner,
)
from kgctl.errors import ExitStatus, SetupError, UsageError

if TYPE_CHECKING:
    from kgctl.broker.local import BrokerState

broker_app = typer.Typer(
    help="Run a real local Apache Kafka (KRaft, or ZooKeeper on 3.x) for trying kgctl "
    "without a cluster.",
    no_args_is_help=True,
)

KafkaHome = Annotated[
    Path | None,
    typer.Option(
        "--kafka-home",
        envvar="KAFKA_HOME",
        help="An unpacked Apache Kafka distribution to run instead of fetching one.",
        show_default=False,
    ),
]


class Metadata(str, enum.Enum):
    kraft = "kraft"
    zookeeper = "zookeeper"


class Security(str, enum.Enum):
    none = "none"
    scram = "scram"
    tls = "tls"
    scram_tls = "scram+tls"


def _security_note(state: BrokerState) -> str:
    what = {
        "scram": "SASL_PLAINTEXT with SCRAM-SHA-512 (user kgctl)",
        "tls": "SSL (certificates of a throwaway local CA)",
        "scram+tls": "SASL_SSL with SCRAM-SHA-512 (user kgctl)",
    }[state.security]
    acls = "; ACLs enforced (kgctl is a super user)" if state.acls else ""
    return (
        f"clients connect with {what}{acls}; the settings (password included, mode 0600) "
        f"are in {state.client_config}\n"
        f"  pass them to kgctl: --command-config {state.client_config}\n"
        f"  (Java tools take the same file: --command-config / --consumer.config)"
    )


@broker_app.command("up")
def up(
    port: Annotated[
        int | None,
        typer.Option(help="Client port of the first node (default: a free port, remembered)."),
    ] = None,
    brokers: Annotated[
        int, typer.Option(help="Nodes: 1, or 3 (each its own process, for failover).")
    ] = 1,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where Kafka keeps its data and logs.", show_default=False)
    ] = None,
    kafka_defaults: Annotated[
        bool,
        typer.Option(
            "--kafka-defaults",
            help="Keep Kafka's own group settings (no 0 ms initial rebalance delay, no "
            "low minimum session timeout).",
        ),
    ] = False,
    kafka_version: Annotated[
        str, typer.Option(help="Apache Kafka version to fetch and run.")
    ] = DEFAULT_KAFKA_VERSION,
    kafka_home: KafkaHome = None,
    metadata: Annotated[
        Metadata,
        typer.Option(
            "--metadata",
            help="kraft, or zookeeper (Kafka 3.x only: a ZooKeeper server from the same "
            "jars, stopped with the broker by kgctl broker down).",
        ),
    ] = Metadata.kraft,
    consumer_protocol: Annotated[
        bool,
        typer.Option(
            "--consumer-protocol",
            help="Serve KIP-848's consumer protocol on a 3.x KRaft broker "
            "(group.coordinator.rebalance.protocols=classic,consumer); Kafka 4 serves it "
            "already.",
        ),
    ] = False,
    security: Annotated[
        Security,
        typer.Option(
            "--security",
            help="Client listener: none (PLAINTEXT), scram (SASL_PLAINTEXT, SCRAM-SHA-512/256), "
            "tls (SSL, a throwaway CA) or scram+tls (SASL_SSL). Prints the client settings.",
        ),
    ] = Security.none,
    acls: Annotated[
        bool,
        typer.Option(
            "--acls",
            help="Enforce ACLs (StandardAuthorizer, deny when no ACL matches); the generated "
            "admin user kgctl is a super user. Needs --security scram or scram+tls.",
        ),
    ] = False,
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = OutputFormat.text,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the broker to answer.")
    ] = 120.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Start a local Kafka in the background (idempotent) and print its bootstrap address."""
    env = make_env(output, verbose, quiet)

    def body() -> None:
        from kgctl.broker.local import LocalBroker

        broker = LocalBroker()
        progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=env.err,
            transient=True,
        )
        tasks: dict[str, TaskID] = {}

        def on_progress(label: str, done: int, total: int | None) -> None:
            if label not in tasks:
                progress.start()
                tasks[label] = progress.add_task(label, total=total)
            progress.update(tasks[label], completed=done)

        if not 0 < timeout <= 3600:
            raise UsageError(f"--timeout {timeout}: must be more than 0 and at most 3600 seconds")
        # Not used by `up` (the broker is local), but a malformed one is still an error.
        make_settings(bootstrap, command_config, x, 30.0)
        state = broker.up(
            port=port,
            brokers=brokers,
            data_dir=data_dir,
            kafka_defaults=kafka_defaults,
            version=kafka_version,
            kafka_home=kafka_home,
            timeout_s=timeout,
            security=security.value,
            acls=acls,
            metadata=metadata.value,
            consumer_protocol=consumer_protocol,
            say=env.say,
            wait=spinner(env),
            progress=on_progress,
        )
        progress.stop()
        if env.json:
            emit_json(
                env,
                {
                    "bootstrap": state.bootstrap,
                    "pids": state.pids,
                    "data_dir": state.data_dir,
                    "version": state.version,
                    "metadata": state.metadata,
                    "consumer_protocol": state.consumer_protocol,
                    "security": state.security,
                    "acls": state.acls,
                    "client_config": state.client_config or None,
                },
            )
        else:
            zk = (
                f", ZooKeeper pid {state.zookeeper.pid} on 127.0.0.1:{state.zookeeper.port}"
                if state.zookeeper
                else ""
            )
            env.say(
                f"Apache {state.label} is up ({len(state.nodes)} node(s), "
                f"pids {' '.join(map(str, state.pids))}{zk}, data in {state.data_dir})"
            )
            if state.client_config:
                env.say(_security_note(state))
            env.line(state.bootstrap)

    run(env, body)


@broker_app.command("down")
def down(
    output: Output = OutputFormat.text,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", help="Seconds the nodes get to stop cleanly before they are killed."
        ),
    ] = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Stop every Kafka node kgctl started, and nothing else."""
    env = make_env(output, verbose, quiet)

    def body() -> None:
        from kgctl.broker.local import LocalBroker

        if not 0 <= timeout <= 3600:  # checked before anything is stopped
            raise UsageError(
                f"--timeout {timeout}: must be 0 (kill at once) to 3600 seconds of grace"
            )
        stopped = LocalBroker().down(timeout_s=timeout)
        if env.json:
            emit_json(env, {"stopped_pids": stopped})
        else:
            env.say(
                f"stopped {len(stopped)} process(es) kgctl started"
                if stopped
                else "no local Kafka was running"
            )

    run(env, body)


@broker_app.command("status")
def status(
    output: Output = OutputFormat.text,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Say whether the local Kafka runs; exit 1 when a node is dead or none was started."""
    env = make_env(output, verbose, quiet)

    def body() -> None:
        from kgctl.broker.local import LocalBroker

        info = LocalBroker().status()
        if env.json:
            emit_json(env, info)
        elif not info["nodes"]:
            env.line("not running (start it with: kgctl broker up)")
        else:
            for node in info["nodes"]:  # type: ignore[attr-defined]
                word = "running" if node["running"] else "DEAD (restart with: kgctl broker up)"
                env.line(
                    f"node {node['node_id']}  127.0.0.1:{node['port']}  pid {node['pid']}  {word}"
                )
            zk = info.get("zookeeper")
            if isinstance(zk, dict):
                word = "running" if zk["running"] else "DEAD (restart with: kgctl broker up)"
                env.line(f"zookeeper  127.0.0.1:{zk['port']}  pid {zk['pid']}  {word}")
            env.line(
                f"bootstrap {info['bootstrap']}  version {info['version']}  "
                f"metadata {info['metadata']}  data {info['data_dir']}"
            )
            if info.get("client_config"):
                env.line(
                    f"security {info['security']}{'  acls' if info['acls'] else ''}  "
                    f"--command-config {info['client_config']}"
                )
        if not info["running"]:
            raise typer.Exit(int(ExitStatus.ERROR))

    run(env, body)


@broker_app.command("logs")
def logs(
    lines: Annotated[int, typer.Option("--lines", "-n", help="How many last lines.")] = 50,
    node: Annotated[int | None, typer.Option(help="Only this node id.")] = None,
    output: Output = OutputFormat.text,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Print the last lines of each local Kafka node's log."""
    env = make_env(output, verbose, quiet)

    def body() -> None:
        from kgctl.broker.local import LocalBroker, tail

        state = LocalBroker().load()
        if state is None:
            raise SetupError("no local Kafka was started; start one with: kgctl broker up")
        for n in state.nodes:
            if node is not None and n.node_id != node:
                continue
            text = tail(n.log, lines)
            if env.json:
                emit_json(env, {"node_id": n.node_id, "log": n.log, "lines": text})
            else:
                if len(state.nodes) > 1:
                    env.line(f"==> node {n.node_id}: {n.log} <==")
                env.line("\n".join(text))

    run(env, body)
