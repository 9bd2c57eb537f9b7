"""`kgctl chaos list|show|run`: provoke rebalances with a fleet of real members, judge them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kgctl.cli.common import (
    AllowDestructive,
    Bootstrap,
    CommandConfig,
    HeartbeatInterval,
    MaxPollInterval,
    Output,
    OutputFormat,
    Overrides,
    Quiet,
    SessionTimeout,
    Timeout,
    Verbose,
    emit_json,
    make_env,
    make_settings,
    run,
)
from kgctl.model.events import Event

chaos_app = typer.Typer(
    name="chaos",
    help="Provoke rebalances with a fleet of real members; check invariants; report.",
    no_args_is_help=True,
)


def _complete_scenario(incomplete: str) -> list[str]:
    from kgctl.chaos.scenarios import builtin_names

    return [n for n in builtin_names() if n.startswith(incomplete)]


@chaos_app.command("list")
def list_command(
    output: Output = OutputFormat.text,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """List the built-in scenarios."""
    env = make_env(output, verbose, quiet)

    def body() -> None:
        from kgctl.chaos.scenarios import builtin, builtin_names

        rows: list[dict[str, Any]] = []
        for name in builtin_names():
            sc = builtin(name)
            rows.append(
                {
                    "name": name,
                    "description": " ".join(sc.description.split()),
                    "steps": [s.action for s in sc.steps],
                    "brokers": sc.fleet.brokers,
                    "protocols": sorted(sc.fleet.protocols),
                    "meaningful_on": list(sc.protocols),
                    "compare_protocols": sc.compare_protocols,
                }
            )
        if env.json:
            emit_json(env, rows)
            return
        from kgctl.render.chaos_view import scenario_table

        assert env.out is not None
        env.out.print(scenario_table(rows))

    run(env, body)


@chaos_app.command("show")
def show_command(
    name: Annotated[
        str, typer.Argument(help="A built-in scenario.", autocompletion=_complete_scenario)
    ],
    verbose: Verbose = False,
) -> None:
    """Print a built-in scenario's YAML (a starting point for your own)."""
    env = make_env(OutputFormat.text, verbose, False)

    def body() -> None:

        from kgctl.chaos.scenarios import builtin_text

        env.stdout_stream.write(builtin_text(name))

    run(env, body)


@chaos_app.command("run")
def run_command(
    scenario: Annotated[
        str,
        typer.Argument(
            help="A built-in scenario name or a scenario YAML file.",
            autocompletion=_complete_scenario,
        ),
    ],
    record: Annotated[
        Path | None,
        typer.Option("--record", help="Write every event (members and chaos) as JSON lines."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="With --output json: every event as a JSON line.")
    ] = False,
    allow_destructive: AllowDestructive = False,
    topic_prefix: Annotated[
        str, typer.Option("--topic-prefix", help="Prefix of the topics and group chaos creates.")
    ] = "kgctl.",
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", help="Use this group id (default: a new one per run)."),
    ] = None,
    keep_topics: Annotated[
        bool, typer.Option("--keep-topics", help="Do not delete the run's topics and group.")
    ] = False,
    broker_state: Annotated[
        Path | None,
        typer.Option(
            "--broker-state",
            help="State file of the local cluster (coordinator-failover); default: kgctl's.",
        ),
    ] = None,
    group_protocol: Annotated[
        str | None,
        typer.Option(
            "--group-protocol",
            help="Run every member on this group protocol: classic, consumer (KIP-848), or "
            "mixed (every second member on consumer); default: the scenario's.",
        ),
    ] = None,
    app: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="Your program as every member (docs/your-app.md): a command line with "
            "placeholders {bootstrap} {group} {topics} {name} {instance_id} {client_id}, "
            "started once per member through the run's proxy and judged from the wire.",
        ),
    ] = None,
    junit_xml: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml",
            help="Also write the verdict as JUnit XML (a test case per step and per "
            "invariant) for CI.",
        ),
    ] = None,
    session_timeout: SessionTimeout = None,
    heartbeat_interval: HeartbeatInterval = None,
    max_poll_interval: MaxPollInterval = None,
    bootstrap: Bootstrap = None,
    command_config: CommandConfig = None,
    x: Overrides = None,
    output: Output = OutputFormat.text,
    timeout: Timeout = 30.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Run a scenario: start the fleet, act step by step, wait for the group, check.

    Exit 0 when every invariant and expectation held, 5 when one failed, 6 when the
    fleet or the cluster could not be set up, 2 for an invalid scenario or options.
    The scenario's timings are fitted to the cluster's group settings first (shown).
    """
    env = make_env(output, verbose, quiet)

    def body() -> int:
        from kgctl.chaos.fit import TimingOverrides
        from kgctl.chaos.runner import RunOptions, resolve_scenario, run_scenario
        from kgctl.render.chaos_view import ChaosDisplay

        sc = resolve_scenario(scenario)
        if group_protocol is not None:
            from kgctl.chaos.scenario import with_protocol

            sc = with_protocol(sc, group_protocol)
        from kgctl.chaos.app import parse_app
        from kgctl.chaos.scenario import with_app

        sc = with_app(sc, parse_app(app) if app is not None else None)
        settings = make_settings(bootstrap, command_config, x, timeout)
        from kgctl.chaos.preflight import check

        check(sc, settings)  # before any topic, member or proxy: exit 6 in seconds
        options = RunOptions(
            topic_prefix=topic_prefix,
            group=group,
            allow_destructive=allow_destructive,
            keep_topics=keep_topics,
            broker_state=broker_state,
            timings=TimingOverrides(session_timeout, heartbeat_interval, max_poll_interval),
        )
        on_event = None
        if env.json and follow:

            def on_event(event: Event) -> None:
                env.line(event.to_json())

        view = "none" if env.json or quiet else "auto"
        if sc.compare_protocols:
            return _showdown(env, sc, settings, options, view, record)
        journal = run_scenario(
            sc, settings, options=options, display=ChaosDisplay.make(env.out, view),
            record=record, on_event=on_event,
        )  # fmt: skip
        if env.json:
            if not follow:
                emit_json(env, journal.to_dict())
        else:
            from kgctl.chaos.app_checks import judge_line
            from kgctl.render.chaos_view import summary

            assert env.out is not None
            env.out.print(summary(journal))
            line = judge_line(journal)
            if line:
                env.out.print(line)
        if junit_xml is not None:
            from kgctl.chaos.junit import write_junit

            write_junit(journal, junit_xml)
        if journal.error:
            env.say(f"kgctl: error: {journal.error}")
        return int(journal.exit_status)

    status = run(env, body)
    if status:
        raise typer.Exit(status)


def _showdown(
    env: Any, sc: Any, settings: Any, options: Any, view: str, record: Path | None
) -> int:
    """A scenario that compares protocols: run once per protocol, then the table."""
    from kgctl.chaos.showdown import compare, exit_status, run_showdown
    from kgctl.render.chaos_view import ChaosDisplay, showdown_table, summary

    journals = run_showdown(
        sc, settings, options=options, display=ChaosDisplay.make(env.out, view),
        record=str(record) if record else None,
    )  # fmt: skip
    rows = compare(journals)
    if env.json:
        emit_json(
            env,
            {
                "scenario": sc.name,
                "rows": [r.to_dict() for r in rows],
                "journals": {p: j.to_dict() for p, j in journals.items()},
            },
        )
    else:
        assert env.out is not None
        for journal in journals.values():
            env.out.print(summary(journal))
        env.out.print(showdown_table(rows, list(journals)))
    for journal in journals.values():
        if journal.error:
            env.say(f"kgctl: error: {journal.scenario}: {journal.error}")
    return exit_status(journals)
