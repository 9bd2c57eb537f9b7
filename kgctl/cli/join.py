"""`kgctl join`: its options, declared once, for typer (help, docs/cli.md, completions, and
the generated table `kgctl.cli.fastparse` reads); what it does is `kgctl.cli.join_run`."""

from __future__ import annotations

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
    end_as_typer,
)
from kgctl.cli.join_run import Assignor, Commit, From, GroupProtocol, RemoteAssignor, run_join

__all__ = ["Assignor", "Commit", "From", "GroupProtocol", "RemoteAssignor", "join_command"]


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
    # The parameters, exactly as declared: `run_join` takes the same names.
    options = dict(locals())
    end_as_typer(lambda: run_join(**options))
