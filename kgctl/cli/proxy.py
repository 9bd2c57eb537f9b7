"""`kgctl proxy`: a Kafka-aware TCP proxy that traces group APIs and injects faults."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

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
from kgctl.errors import ExitStatus
from kgctl.model.events import Event


def proxy_command(
    listen: Annotated[
        str,
        typer.Option("--listen", help="HOST:PORT of the bootstrap listener (port 0: any free)."),
    ] = "127.0.0.1:0",
    fault: Annotated[
        list[str] | None,
        typer.Option(
            "--fault",
            help="A fault rule API:EFFECT[:SELECTOR]..., repeatable "
            "(e.g. JoinGroup:error=NOT_COORDINATOR:count=1:client=app-1).",
            show_default=False,
        ),
    ] = None,
    cap_version: Annotated[
        list[str] | None,
        typer.Option(
            "--cap-version",
            help="API=MAX: advertise no version of API above MAX in ApiVersions, as an older "
            "broker would (e.g. ConsumerGroupHeartbeat=0); repeatable.",
            show_default=False,
        ),
    ] = None,
    trace_metadata: Annotated[
        bool,
        typer.Option(
            "--trace-metadata",
            help="Also trace Metadata requests and answers (the partition count of each "
            "topic an answer lists): when each client learns of new partitions.",
        ),
    ] = False,
    trace_topic: Annotated[
        str | None,
        typer.Option("--trace-topic", help="Also publish the group events to this topic."),
    ] = None,
    hide_commits: Annotated[
        bool,
        typer.Option(
            "--hide-commits",
            help="Leave successful OffsetCommit lines out of the text (failed ones stay; "
            "JSON, the recording and the trace topic keep them all).",
        ),
    ] = False,
    record: Annotated[
        Path | None,
        typer.Option("--record", help="Write every event to this file (for kgctl report)."),
    ] = None,
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = OutputFormat.text,
    timeout: Timeout = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Stand between clients and a Kafka cluster: trace each client's group protocol
    steps on the wire and break them on purpose.

    The first line (or ProxyStarted event) gives the bootstrap address for clients. Each
    broker gets its own local port. Add or remove fault rules live with JSON lines on
    stdin, e.g. {"op":"add","rule":"Heartbeat:hang:count=1"}; see docs/proxy.md.
    Security settings apply to the upstream side. Ctrl-C or SIGTERM stops it.
    """
    env = make_env(output, verbose, quiet)

    def body() -> ExitStatus:
        from kgctl.proxy.faults import parse_rule, parse_version_cap
        from kgctl.proxy.runner import ProxyConfig, ProxyRun, parse_listen
        from kgctl.proxy.sinks import RecordSink, TopicSink
        from kgctl.render.proxy_lines import render_line

        config = ProxyConfig(
            listen=parse_listen(listen),
            rules=[parse_rule(r) for r in fault or []],
            version_caps=dict(parse_version_cap(c) for c in cap_version or []),
            trace_metadata=trace_metadata,
        )
        settings = make_settings(bootstrap, command_config, x, timeout)
        closers: list[Callable[[], None]] = []
        sinks: list[Callable[[Event], None]] = []
        if record is not None:
            rec = RecordSink(record)
            sinks.append(rec)
            closers.append(rec.close)
        if trace_topic:
            topic = TopicSink(settings, trace_topic)
            sinks.append(topic)
            closers.append(topic.close)

        def show(event: Event) -> None:
            if env.json:
                env.line(event.to_json())
                return
            line = render_line(event, heartbeats=env.verbose, commits=not hide_commits)
            if line is not None and (not env.quiet or event.type == "ProxyStarted"):
                env.line(line)

        def sink(event: Event) -> None:
            for each in sinks:
                each(event)
            show(event)

        proxy = ProxyRun(settings, config, sink, control=sys.stdin, handle_signals=True)
        try:
            proxy.serve()
        finally:
            for close in reversed(closers):
                close()
        # Ctrl-C ends it as it ends every kgctl command; SIGTERM and SIGHUP are a stop.
        return ExitStatus.INTERRUPTED if proxy.stopped_by == "SIGINT" else ExitStatus.OK

    status = run(env, body)
    if status:
        raise typer.Exit(int(status))
