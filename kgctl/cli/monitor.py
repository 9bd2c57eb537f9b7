"""`kgctl monitor`: follow every group of a cluster, count and explain each rebalance, and
serve the counts to Prometheus. Thin: the monitor is kgctl/monitor/, its views are
kgctl/render/monitor_table.py."""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgctl.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    OutputFormat,
    Overrides,
    Quiet,
    Timeout,
    Verbose,
    make_env,
    make_settings,
    run,
)
from kgctl.errors import ExitStatus, UsageError

if TYPE_CHECKING:
    from kgctl.cli.base import Env
    from kgctl.monitor.service import Monitor

DEFAULT_HOST = "127.0.0.1"


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT` (host 127.0.0.1)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(
            f"--metrics-listen {text!r}: not HOST:PORT; write e.g. 9308 or 0.0.0.0:9308"
        )
    return host, int(port)


def parse_regex(option: str, text: str | None) -> re.Pattern[str] | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"{option} {text!r}: not a regular expression ({exc})") from None


def monitor_command(
    groups: Annotated[
        str | None,
        typer.Option(
            "--groups",
            help="Follow only the groups this regular expression finds.",
            show_default=False,
        ),
    ] = None,
    exclude: Annotated[
        str | None,
        typer.Option(
            "--exclude",
            help="Leave out the groups this regular expression finds.",
            show_default=False,
        ),
    ] = None,
    metrics_listen: Annotated[
        str | None,
        typer.Option(
            "--metrics-listen",
            help="Serve Prometheus/OpenMetrics metrics at HOST:PORT (host 127.0.0.1 when "
            "only a port is given), path /metrics.",
            show_default=False,
        ),
    ] = None,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", help="Seconds between two rounds of ListGroups and describes.", min=0.1
        ),
    ] = 10.0,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Count the rebalances stored since DURATION ago (90s, 15m, 2h, 1d); default: "
            "all the history __consumer_offsets keeps.",
            show_default=False,
        ),
    ] = None,
    offsets_topic: Annotated[
        bool,
        typer.Option(
            "--offsets-topic/--no-offsets-topic",
            help="Read the groups' stored generations from __consumer_offsets (else only "
            "describe them at each interval).",
        ),
    ] = True,
    member_labels: Annotated[
        bool,
        typer.Option(
            "--member-labels",
            help="Also export per-member series (a label per member: mind the cardinality).",
        ),
    ] = False,
    shard_group: Annotated[
        str | None,
        typer.Option(
            "--shard-group",
            help="Share the cluster with the other monitors started with this NAME: one "
            "Kafka consumer group over __consumer_offsets's partitions; each monitor "
            "follows and exports only the groups of its partitions, and takes over a dead "
            "one's after its session timeout.",
            show_default=False,
        ),
    ] = None,
    shard_session_timeout: Annotated[
        float,
        typer.Option(
            "--shard-session-timeout",
            help="Seconds after which the other monitors of --shard-group take over the "
            "partitions of one that stopped answering (its session timeout).",
            min=1.0,
        ),
    ] = 45.0,
    table: Annotated[
        bool | None,
        typer.Option(
            "--table/--no-table",
            help="Show the live groups table (default: when stdout is a terminal and the "
            "output is text).",
            show_default=False,
        ),
    ] = None,
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = OutputFormat.text,
    timeout: Timeout = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Follow every group of the cluster: each completed rebalance counted, timed and
    explained (the diagnosis `kgctl explain` gives), served to Prometheus.

    Runs until interrupted (Ctrl-C, SIGTERM: exit 0). With a terminal: a live table of the
    groups, most churn first. `-o json`: one JSON line per diagnosed rebalance. Metrics,
    their sources and the ACLs they need: docs/monitor.md.
    """
    env = make_env(output, verbose, quiet)

    def body() -> int:
        from kgctl.cli.explain import parse_duration
        from kgctl.monitor.service import Monitor, Selection, wall_ms

        selection = Selection(parse_regex("--groups", groups), parse_regex("--exclude", exclude))
        if shard_group is not None and not offsets_topic:
            raise UsageError(
                "--shard-group shares __consumer_offsets's partitions between monitors: "
                "it cannot go with --no-offsets-topic; leave one of them out"
            )
        listen = parse_listen(metrics_listen) if metrics_listen is not None else None
        since_ms = wall_ms() - parse_duration(since) if since is not None else None
        settings = make_settings(bootstrap, command_config, x, timeout)
        live = table if table is not None else (not env.json and sys.stdout.isatty())
        monitor = Monitor(
            settings, selection, interval_s=interval, since_ms=since_ms,
            offsets_topic=offsets_topic, shard_group=shard_group,
            shard_session_ms=int(shard_session_timeout * 1000),
        )  # fmt: skip
        if listen is not None:
            _serve(env, monitor, listen, member_labels)
        return _run(
            env, monitor, live, _watch_options(bootstrap, command_config, x, timeout, offsets_topic)
        )

    status = run(env, body)
    if status:
        raise typer.Exit(status)


def _watch_options(
    bootstrap: str | None,
    command_config: Path | None,
    x: list[str] | None,
    timeout: float,
    offsets_topic: bool,
) -> list[str]:
    """The monitor's own connection options and sources, for `kgctl watch` of one of its
    groups."""
    options = ["-b", bootstrap] if bootstrap else []
    options += [] if offsets_topic else ["--no-offsets-topic"]
    options += ["--command-config", str(command_config)] if command_config else []
    for kv in x or []:
        options += ["-X", kv]
    return [*options, "--timeout", str(timeout)]


def _serve(env: Env, monitor: Monitor, listen: tuple[str, int], member_labels: bool) -> None:
    from prometheus_client import start_http_server

    from kgctl.monitor.metrics import MonitorMetrics

    metrics = MonitorMetrics(monitor.view, member_labels=member_labels)
    monitor.listeners.append(metrics.rebalanced)
    monitor.group_listeners.append(metrics.followed)
    monitor.forget_listeners.append(metrics.forgotten)
    monitor.on_poll = metrics.polled
    host, port = listen
    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise UsageError(
            f"--metrics-listen {host}:{port}: cannot listen there ({exc.strerror}); "
            "choose another port"
        ) from None
    env.say(f"metrics at http://{host}:{server.server_port}/metrics")


def _run(env: Env, monitor: Monitor, live: bool, watch: list[str]) -> int:
    from kgctl.render.monitor_table import rebalance_line

    stopping = threading.Event()

    def on_term(_sig: int, _frame: Any) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    shown = 0

    def show(d: Any) -> None:
        if env.json:
            env.line(json.dumps(
                {"group": d.rebalance.group, "protocol": d.rebalance.protocol,
                 **d.diagnosis.to_dict()}, sort_keys=True,
            ))  # fmt: skip
        elif not live:
            env.line(rebalance_line(d.rebalance))

    monitor.listeners.append(show)
    monitor.start()
    try:
        if live:
            _live(env, monitor, stopping, watch)
        else:
            while not stopping.is_set():
                monitor.step(0.5)
                shown = _notes(env, monitor, shown)
    except KeyboardInterrupt:
        return int(ExitStatus.INTERRUPTED)
    finally:
        monitor.stop()
    return int(ExitStatus.OK)


def _notes(env: Env, monitor: Monitor, shown: int) -> int:
    """The monitor's notes (the log not readable, the cluster away and back), once each."""
    _rows, health = monitor.view()
    for note in health.notes[shown:] if len(health.notes) >= shown else health.notes:
        env.say(f"kgctl monitor: {note}")
    return len(health.notes)


def _live(env: Env, monitor: Monitor, stopping: threading.Event, watch: list[str]) -> None:
    """The table until q, Ctrl-C or SIGTERM; enter opens the chosen group in `kgctl watch`
    (with the options `watch`), and its q comes back here."""
    from kgctl.render.keys import single_keys

    chosen: str | None = None
    while not stopping.is_set():
        with single_keys() as keys:
            chosen, opened = _table(env, monitor, stopping, keys, chosen)
        if opened is None:
            return
        _watch_group(monitor, stopping, [sys.executable, "-m", "kgctl", "watch", opened, *watch])


def _table(
    env: Env, monitor: Monitor, stopping: threading.Event, keys: bool, chosen: str | None
) -> tuple[str | None, str | None]:
    """Draw the table until a group is opened (it is returned second) or the view ends."""
    from rich.live import Live

    from kgctl.monitor.service import wall_ms
    from kgctl.render.keys import read_key
    from kgctl.render.monitor_table import monitor_table, move_cursor, table_order

    console = env.out
    with Live(console=console, auto_refresh=False, screen=False, transient=False) as screen:
        while not stopping.is_set():
            monitor.step(0.1)
            rows, health = monitor.view()
            now = wall_ms()
            key = read_key(keys, 0.3)
            if key in ("q", "Q"):
                break
            if key in ("up", "down"):
                chosen = move_cursor(table_order(rows, now), chosen, key)
            if key == "enter" and chosen in rows:
                return chosen, chosen
            screen.update(
                monitor_table(
                    rows, health, now, height=console.size.height, selected=chosen, keys=keys
                ),
                refresh=True,
            )
    return chosen, None


def _watch_group(monitor: Monitor, stopping: threading.Event, argv: list[str]) -> None:
    """`kgctl watch` of one group in this terminal, the monitor counting meanwhile (its
    metrics stay current); Ctrl-C is the watch's, not the monitor's, while it runs."""
    import subprocess

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = subprocess.Popen(argv)
        try:
            while child.poll() is None:
                if stopping.is_set():
                    child.terminate()
                monitor.step(0.5)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
