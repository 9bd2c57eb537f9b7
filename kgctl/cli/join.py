"""`kgctl join`: one real consumer-group member that shows every step of the rebalance."""

from __future__ import annotations

import contextlib
import enum
import io
import os
from typing import Annotated

import typer

from kgctl.cli.common import (
    Bootstrap,
    CommandConfig,
    Env,
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
from kgctl.model.events import Event


class Assignor(str, enum.Enum):
    range = "range"
    roundrobin = "roundrobin"
    sticky = "sticky"
    cooperative_sticky = "cooperative-sticky"


class Commit(str, enum.Enum):
    auto = "auto"
    sync = "sync"
    async_ = "async"
    none = "none"


class GroupProtocol(str, enum.Enum):
    classic = "classic"
    consumer = "consumer"


class RemoteAssignor(str, enum.Enum):
    uniform = "uniform"
    range = "range"


class From(str, enum.Enum):
    earliest = "earliest"
    latest = "latest"


class TextSink:
    """Lines on stdout (with a live header on a terminal, for one member alone); the exit
    summary on stderr."""

    def __init__(self, env: Env, live: bool = True) -> None:
        from kgctl.render.member_lines import MemberHeader

        self.env = env
        self.header = MemberHeader()
        self.previous: Event | None = None
        self.live = None
        assert env.out is not None
        if live and env.out.is_terminal and not env.quiet:
            from rich.live import Live

            self.live = Live(
                self.header.render(),
                console=env.out,
                auto_refresh=True,
                refresh_per_second=4,
                transient=True,
                get_renderable=self.header.render,
            )
            self.live.start()

    def __call__(self, event: Event) -> None:
        from kgctl.render.member_lines import render_line, summary_lines

        self.header.update(event)
        assert self.env.out is not None
        if event.type == "MemberStopped":
            self.close()
            failed = event.data.get("reason") == "failed"
            did_work = bool(event.data.get("records") or event.data.get("committed"))
            # A member that failed before doing anything: the error line says it all
            # (stderr keeps to that one line).
            if (not self.env.quiet or event.data.get("exit_status")) and (did_work or not failed):
                for summary in summary_lines(event):
                    self.env.error_line(summary)
            return
        if self.env.quiet and event.type not in ("MemberFailed",):
            return
        line = render_line(event, self.previous, heartbeats=self.env.verbose)
        if event.type != "HeartbeatSucceeded":
            self.previous = event
        if line is not None:
            console = self.live.console if self.live is not None else self.env.out
            console.print(line, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class JsonSink:
    """Events as JSON lines on stdout, nothing else."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def __call__(self, event: Event) -> None:
        try:
            self.env.line(event.to_json())
        except (BrokenPipeError, ValueError):
            # The reader went away (kgctl chaos died?): keep the member's own shutdown path
            # (SIGTERM from the parent-death signal) rather than dying here mid-protocol.
            stream = self.env.stdout_stream
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())


def join_command(
    topics: Annotated[
        list[str] | None,
        typer.Argument(help="Topics to subscribe to (or use --pattern).", show_default=False),
    ] = None,
    group: Annotated[str, typer.Option("--group", "-g", help="Consumer group id.")] = "",
    pattern: Annotated[
        str | None, typer.Option("--pattern", help="Subscribe to topics matching this regex.")
    ] = None,
    client_pattern: Annotated[
        str | None,
        typer.Option(
            "--client-pattern",
            help="With --group-protocol consumer: match this regex against topic names in "
            "the member (Java's subscribe(Pattern)) and send the names; --pattern is the "
            "broker-side regex.",
            show_default=False,
        ),
    ] = None,
    assignor: Annotated[
        list[Assignor] | None,
        typer.Option("--assignor", help="Partition assignor, repeatable, in preference order."),
    ] = None,
    instance_id: Annotated[
        str | None, typer.Option("--instance-id", help="group.instance.id: a static member.")
    ] = None,
    session_timeout: Annotated[
        int | None, typer.Option("--session-timeout", help="session.timeout.ms.", min=1)
    ] = None,
    heartbeat_interval: Annotated[
        int | None, typer.Option("--heartbeat-interval", help="heartbeat.interval.ms.", min=1)
    ] = None,
    max_poll_interval: Annotated[
        int | None, typer.Option("--max-poll-interval", help="max.poll.interval.ms.", min=1)
    ] = None,
    client_id: Annotated[str | None, typer.Option("--client-id", help="client.id.")] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Label of this member in events and output.")
    ] = None,
    processing_ms: Annotated[
        float, typer.Option("--processing-ms", help="Sleep per polled batch (ms).", min=0)
    ] = 0.0,
    commit: Annotated[Commit, typer.Option("--commit", help="How offsets are committed.")] = (
        Commit.auto
    ),
    from_: Annotated[
        From, typer.Option("--from", help="Where to start without a committed offset.")
    ] = From.earliest,
    max_records: Annotated[
        int | None, typer.Option("--max-records", help="Stop after N records.", min=1)
    ] = None,
    duration: Annotated[
        float | None, typer.Option("--duration", help="Stop after S seconds.", min=0)
    ] = None,
    control_topic: Annotated[
        str | None,
        typer.Option("--control-topic", help="Also read control JSON from this topic."),
    ] = None,
    trace_topic: Annotated[
        str | None, typer.Option("--trace-topic", help="Also publish each event to this topic.")
    ] = None,
    fail_on_missing: Annotated[
        bool,
        typer.Option("--fail-on-missing", help="Exit NOT_FOUND if a topic does not exist."),
    ] = False,
    group_protocol: Annotated[
        GroupProtocol,
        typer.Option(
            "--group-protocol",
            help="group.protocol: classic (JoinGroup/SyncGroup) or consumer (KIP-848, "
            "ConsumerGroupHeartbeat; the broker assigns).",
        ),
    ] = GroupProtocol.classic,
    remote_assignor: Annotated[
        RemoteAssignor | None,
        typer.Option(
            "--remote-assignor",
            help="group.remote.assignor: the broker's assignor for --group-protocol "
            "consumer (default: the broker's first).",
            show_default=False,
        ),
    ] = None,
    client_rack: Annotated[
        str | None,
        typer.Option(
            "--client-rack",
            help="client.rack: sent in Fetch and, with --group-protocol consumer, in the "
            "join heartbeat (the broker's rack-aware assignment reads it).",
            show_default=False,
        ),
    ] = None,
    fetch: Annotated[
        bool,
        typer.Option(
            "--fetch/--no-fetch",
            help="--no-fetch: keep every partition paused and send no Fetch at all (members "
            "that only need to be in the group; MemberStarted says so).",
        ),
    ] = True,
    fetch_max_wait: Annotated[
        int | None,
        typer.Option(
            "--fetch-max-wait",
            help="fetch.max.wait.ms: how long the broker holds an empty fetch (kafka-python's "
            "default 500; longer: fewer wake-ups of an idle member).",
            min=0,
        ),
    ] = None,
    members: Annotated[
        int,
        typer.Option(
            "--members",
            help="Run N members in this one process, each its own consumer, connections, "
            "member id and events, named NAME-1..NAME-N (control lines pick one with "
            '"member": NAME).',
            min=1,
        ),
    ] = 1,
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = OutputFormat.text,
    timeout: Timeout = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Join a consumer group as one real member and show every step of each rebalance.

    Control it live with JSON lines on stdin (see docs/member.md), for example
    {"op":"rejoin"}. Ctrl-C or SIGTERM commits (if configured), leaves and exits. With
    --group-protocol consumer it is a KIP-848 member: the broker assigns, the member
    reconciles through ConsumerGroupHeartbeat.
    """
    env = make_env(output, verbose, quiet)

    def body() -> ExitStatus:
        from kgctl.member.runner import Member, MemberConfig, Sink

        if not group:
            raise UsageError("--group/-g is required")
        if [bool(topics), bool(pattern), bool(client_pattern)].count(True) != 1:
            raise UsageError(
                "give TOPICS..., --pattern REGEX or --client-pattern REGEX (exactly one of them)"
            )
        settings = make_settings(bootstrap, command_config, x, timeout)
        config = MemberConfig(
            group=group,
            topics=list(topics or []),
            pattern=pattern,
            client_pattern=client_pattern,
            assignors=[a.value for a in (assignor or [Assignor.range])],
            instance_id=instance_id,
            session_timeout_ms=session_timeout,
            heartbeat_interval_ms=heartbeat_interval,
            max_poll_interval_ms=max_poll_interval,
            client_id=client_id,
            name=name,
            processing_ms=processing_ms,
            commit=commit.value,
            offset_reset=from_.value,
            max_records=max_records,
            duration_s=duration,
            control_topic=control_topic,
            trace_topic=trace_topic,
            fail_on_missing=fail_on_missing,
            group_protocol=group_protocol.value,
            remote_assignor=remote_assignor.value if remote_assignor is not None else None,
            client_rack=client_rack or None,
            fetch=fetch,
            fetch_max_wait_ms=fetch_max_wait,
        )
        config.validate()
        member_class = Member
        if config.group_protocol == "consumer":
            from kgctl.member.consumer_member import ConsumerProtocolMember

            member_class = ConsumerProtocolMember
        if members > 1:
            from kgctl.member.pack import MemberPack, packed_configs

            configs = packed_configs(config, members, os.getpid())
            json_sink = JsonSink(env)

            def sinks(c: MemberConfig) -> list[Sink]:
                # Every line names its member; one live header cannot speak for N.
                return [json_sink if env.json else TextSink(env, live=False)]

            return MemberPack(configs, settings, sinks, member_class=member_class).run()
        sink = JsonSink(env) if env.json else TextSink(env)
        try:
            return member_class(config, settings, [sink]).run()
        finally:
            if isinstance(sink, TextSink):
                sink.close()

    status = run(env, body)
    if status:
        raise typer.Exit(int(status))
