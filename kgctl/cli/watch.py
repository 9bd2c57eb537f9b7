"""`kgctl watch [GROUP]`: live view of a consumer group, inferred events, guessed causes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    emit_json,
    make_env,
    make_settings,
    run,
)
from kgctl.cli.completers import complete_groups
from kgctl.errors import UsageError
from kgctl.model.events import Event
from kgctl.settings import ClientSettings

if TYPE_CHECKING:
    from kgctl.observe.watch import Watch


def watch_command(
    group: Annotated[
        str | None,
        typer.Argument(
            help="The consumer group; without it, list the groups.",
            show_default=False,
            autocompletion=complete_groups,
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between two DescribeGroups polls.")
    ] = 1.0,
    offsets_topic: Annotated[
        bool,
        typer.Option(
            "--offsets-topic/--no-offsets-topic",
            help="Read the broker's generation ids from __consumer_offsets (classic groups; "
            "inferred when it cannot be read).",
        ),
    ] = True,
    trace_topic: Annotated[
        str | None,
        typer.Option(
            "--trace-topic",
            help="Also read kgctl member events from this topic.",
            show_default=False,
        ),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            help="Show events from a JSON-lines file (or gzipped) instead of a broker.",
            show_default=False,
        ),
    ] = None,
    speed: Annotated[
        float,
        typer.Option(
            "--speed",
            help="With --replay: play at this many times the recorded pace; 0 shows it all "
            "at once.",
        ),
    ] = 1.0,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record", help="Append every event to this JSON-lines file.", show_default=False
        ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    events: Annotated[
        bool,
        typer.Option(
            "--events",
            help="With --once --output json: the snapshot's events, one JSON line each, "
            "instead of one document.",
        ),
    ] = False,
    fail_if_missing: Annotated[
        bool,
        typer.Option(
            "--fail-if-missing", help="Exit 4 if the group does not exist (default: wait)."
        ),
    ] = False,
    hide_commits: Annotated[
        bool,
        typer.Option(
            "--hide-commits",
            help="Leave a proxy's successful OffsetCommit lines out of the live view's "
            "event log (failed ones stay).",
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
    """Watch a consumer group live: members, generations, lag, and why it rebalanced.

    Keys in the live view: q quits, p pauses, e explains the newest generation. Without a
    terminal, or with --output json, prints one JSON event per line; --once --output json
    prints one document (the group now and its recent generations, diagnosed).
    """
    env = make_env(output, verbose, quiet)

    def body() -> None:
        settings = make_settings(bootstrap, command_config, x, timeout)
        if group is None:
            if replay is not None:
                raise UsageError("--replay needs a GROUP: the group whose events to show")
            _list(env, settings)
            return
        _watch(
            env,
            settings,
            group,
            interval,
            trace_topic,
            replay,
            record,
            once,
            fail_if_missing,
            speed=speed,
            offsets_topic=offsets_topic,
            events=events,
            commits=not hide_commits,
        )

    run(env, body)


def _list(env: Env, settings: ClientSettings) -> None:
    from kgctl.observe.watch import list_groups, listing_json

    groups = list_groups(settings)
    if env.json:
        emit_json(env, listing_json(groups))
        return
    from kgctl.render.group_view import render_group_list

    assert env.out is not None
    env.out.print(render_group_list(groups))


def _watch(
    env: Env,
    settings: ClientSettings,
    group: str,
    interval: float,
    trace_topic: str | None,
    replay: Path | None,
    record: Path | None,
    once: bool,
    fail_if_missing: bool,
    speed: float = 1.0,
    offsets_topic: bool = True,
    events: bool = False,
    commits: bool = True,
) -> None:
    from kgctl.observe.watch import Watch

    watch = Watch(
        settings,
        group,
        interval_s=interval,
        trace_topic=trace_topic,
        replay=replay,
        record=record,
        observe=replay is None,
        speed=0.0 if once else speed,  # one snapshot of a recording is all of it
        stored_generations=offsets_topic,
    )
    with watch:
        if replay is None:
            first = watch.first_snapshot(fail_if_missing=fail_if_missing)
            if once:
                watch.stored_generation_now()
            elif any(e.data.get("missing") for e in first):
                env.say(f"group {group!r} does not exist yet; waiting for it (Ctrl-C stops)")
        else:
            watch.start()
        if once:
            drained = watch.drain()
            if env.json and not events:
                emit_json(
                    env,
                    _document(settings, group, drained, watch, trace_topic, offsets_topic),
                )
            elif env.json or not env.stdout_stream.isatty():
                _write_lines(env, drained)
            else:
                from kgctl.render.group_view import render_group

                assert env.out is not None
                env.out.print(render_group(watch.state, now_ms=_now(), commits=commits))
            return
        if replay is None:
            watch.start()
        if env.json or not env.stdout_stream.isatty():
            _stream_json(env, watch, until_drained=replay is not None)
            return
        from kgctl.render.live import run_live

        run_live(watch, console=env.out, commits=commits)


# How far back `watch --once --output json` looks for recent generations.
RECENT_MS = 3_600_000


def _document(
    settings: ClientSettings,
    group: str,
    drained: list[Event],
    watch: Watch,
    trace_topic: str | None,
    offsets_topic: bool,
) -> dict[str, object]:
    """`watch --once --output json`: the group now and its generations of the last hour,
    each diagnosed: the same document as `kgctl explain --since 1h --output json`, from
    the same sources (a replay: the recording alone)."""
    from kgctl.adapters.assignors import cooperative_sticky
    from kgctl.broker.local import local_broker_logs
    from kgctl.explain.sources import (
        Gathered,
        read_broker_log,
        read_cluster,
    )
    from kgctl.model.diagnosis import Context
    from kgctl.model.explanation import explain

    if watch.admin is None:  # a replay: the recording alone
        now = max((e.ts_ms for e in drained), default=0)
        ctx = Context(cooperative=cooperative_sticky)
        return explain(group, drained, now, ctx, sources=["replay"]).to_dict()
    now = _now()
    got = Gathered()
    read_cluster(
        settings, group, now - RECENT_MS, now, got, offsets=offsets_topic,
        trace_topic=trace_topic, admin=watch.admin,
    )  # fmt: skip
    for path in local_broker_logs(settings.bootstrap):
        read_broker_log(path, group, got)
    ctx = Context(
        bounds=got.bounds, broker_reasons=tuple(got.broker_reasons), cooperative=cooperative_sticky
    )
    result = explain(
        group, got.events, now, ctx, since_ms=now - RECENT_MS, sources=got.sources, live=True,
        notes=got.notes,
    )  # fmt: skip
    return result.to_dict()


def _now() -> int:
    from kgctl.observe.watch import now_ms

    return now_ms()


def _write_lines(env: Env, events: list[Event]) -> None:
    from kgctl.observe.watch import event_line

    for ev in events:
        if ev.type == "GroupObserved" and not ev.data.get("changed", True):
            continue  # only its lag moved: not worth a line
        env.line(event_line(ev))


def _stream_json(env: Env, watch: Watch, until_drained: bool) -> None:
    while True:
        events = watch.drain(wait_s=0.25)
        _write_lines(env, events)
        if watch.fatal is not None:
            raise watch.fatal
        if until_drained and not events and watch.queue.empty() and not watch.replaying.is_set():
            return
