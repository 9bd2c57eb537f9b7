"""`kgctl explain GROUP`: why each recent rebalance happened, what it waited for, what to
change. Thin: the sources are read by kgctl/explain/sources.py, the diagnosis is
kgctl/model/diagnosis/, the text is kgctl/render/explain_text.py."""

from __future__ import annotations

import re
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
    emit_json,
    make_env,
    make_settings,
    run,
)
from kgctl.cli.completers import complete_groups
from kgctl.errors import ExitStatus, UsageError

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")


def parse_duration(text: str) -> int:
    """`90s`, `15m`, `2h`, `1d` (or `500ms`) in milliseconds."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise UsageError(
            f"--since {text!r}: not a duration; write a number and a unit, e.g. 90s, 15m, 2h, 1d"
        )
    return int(float(m[1]) * _UNITS[m[2]])


def explain_command(
    group: Annotated[
        str,
        typer.Argument(help="The consumer group.", autocompletion=complete_groups),
    ],
    last: Annotated[
        int | None,
        typer.Option("--last", help="Show only the newest N rebalances.", min=0),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only rebalances in the last DURATION (90s, 15m, 2h, 1d); also how far back "
            "__consumer_offsets and the trace topic are read (default 1d).",
            show_default=False,
        ),
    ] = None,
    recording: Annotated[
        list[Path] | None,
        typer.Option(
            "--recording",
            help="Events recorded by --record or --output json, plain or gzipped (repeatable).",
            show_default=False,
        ),
    ] = None,
    trace_topic: Annotated[
        str | None,
        typer.Option(
            "--trace-topic",
            help="Also read the members' (and the proxy's) events from this topic.",
            show_default=False,
        ),
    ] = None,
    broker_log: Annotated[
        list[Path] | None,
        typer.Option(
            "--broker-log",
            help="A broker's log (repeatable): its `Preparing to rebalance … (reason: …)` "
            "lines give every client's own reason. Default: the local kgctl broker's logs "
            "when -b is that cluster.",
            show_default=False,
        ),
    ] = None,
    offsets_topic: Annotated[
        bool,
        typer.Option(
            "--offsets-topic/--no-offsets-topic",
            help="Read the group's stored generations from __consumer_offsets.",
        ),
    ] = True,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Do not contact the cluster (only --recording and --broker-log); implied by "
            "--recording without -b.",
        ),
    ] = False,
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = OutputFormat.text,
    timeout: Timeout = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Explain a group's last rebalances, newest first: trigger, critical path, advice.

    Works after the fact with the sources there are: the group's records in
    __consumer_offsets, a live DescribeGroups, a trace topic, a broker log, a recording.
    Each trigger says whether it is exact (a member's, the wire's or the broker log's own
    words) or inferred (from snapshots or a silence). Exit 0 when the group is healthy
    now, 12 when it is missing, empty or rebalancing.
    """
    env = make_env(output, verbose, quiet)

    def body() -> int:
        from kgctl.broker.local import local_broker_logs
        from kgctl.explain.sources import (
            Gathered,
            read_broker_log,
            read_cluster,
            read_recording,
        )
        from kgctl.model.diagnosis import Context
        from kgctl.model.explanation import explain
        from kgctl.observe.watch import now_ms

        now = now_ms()
        window = parse_duration(since) if since is not None else 86_400_000
        since_ms = now - window
        settings = make_settings(bootstrap, command_config, x, timeout)
        got = Gathered()
        for path in recording or []:
            read_recording(path, group, got)
        cluster = not offline and (bootstrap is not None or not recording)
        if cluster:
            read_cluster(
                settings, group, since_ms, now, got, offsets=offsets_topic,
                trace_topic=trace_topic,
            )  # fmt: skip
        logs = list(broker_log or [])
        if not logs and cluster:
            logs = local_broker_logs(settings.bootstrap)
        for path in logs:
            read_broker_log(path, group, got)
        if not got.events:
            # A group name mistyped against a recording: the names it does hold.
            held = sorted(got.recorded_groups - {group})
            which = "the recordings hold" if len(recording or []) > 1 else "the recording holds"
            named = f" ({which} {', '.join(held)})" if held else ""
            raise UsageError(
                f"nothing known about group {group!r}{named}: give --recording FILE, or -b "
                "for a cluster where it exists"
            )
        from kgctl.adapters.assignors import cooperative_sticky

        ctx = Context(
            bounds=got.bounds,
            broker_reasons=tuple(got.broker_reasons),
            cooperative=cooperative_sticky,
        )
        # Without the cluster, "now" is the end of what was read (a recording's last event).
        if not cluster:
            now = max(e.ts_ms for e in got.events)
            since_ms = now - window
        result = explain(
            group,
            got.events,
            now,
            ctx,
            last=last,
            since_ms=since_ms if since is not None else None,
            sources=got.sources,
            live=got.live,
            notes=got.notes,
        )
        if env.json:
            emit_json(env, result.to_dict())
        else:
            from kgctl.render.explain_text import render_explanation

            assert env.out is not None
            env.out.print(render_explanation(result))
        return int(ExitStatus.OK if result.healthy else ExitStatus.UNHEALTHY)

    status = run(env, body)
    if status:
        raise typer.Exit(status)
