"""`kgctl demo`: the first ten minutes: a local Kafka, the `tour` scenario, a report."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

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
    spinner,
)


def demo_command(
    scenario: Annotated[
        str, typer.Option("--scenario", help="The built-in scenario (or YAML file) to run.")
    ] = "tour",
    out_dir: Annotated[
        Path,
        typer.Option("--out-dir", help="Where to write the recording and the HTML report."),
    ] = Path("kgctl-demo"),
    keep_broker: Annotated[
        bool,
        typer.Option(
            "--keep-broker",
            help="Leave a local Kafka the demo started running afterwards (stop it with "
            "kgctl broker down), as kgctl broker up would.",
        ),
    ] = False,
    allow_destructive: AllowDestructive = False,
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
    """Run the built-in tour on a local Kafka (or -b CLUSTER), then summarise and report.

    Without -b it uses the local Kafka of kgctl broker up, or starts one for this run.
    With -b it acts on kgctl's own topics and group only. Without a terminal it prints
    plain lines instead of the live view.
    """
    env = make_env(output, verbose, quiet)

    def body() -> int:
        from kgctl.broker.local import LocalBroker
        from kgctl.chaos.fit import TimingOverrides
        from kgctl.chaos.runner import RunOptions, resolve_scenario, run_scenario
        from kgctl.render.chaos_view import ChaosDisplay
        from kgctl.render.html_report import render_html
        from kgctl.render.report_text import render_report
        from kgctl.report import load_report

        # Check every input before anything starts: nothing is left behind on bad input.
        sc = resolve_scenario(scenario)
        settings = make_settings(bootstrap or "127.0.0.1:9092", command_config, x, timeout)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            from kgctl.errors import UsageError

            raise UsageError(f"--out-dir {out_dir}: cannot create it ({exc.strerror})") from None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        record = out_dir / f"{sc.name}-{stamp}.jsonl"
        html = out_dir / f"{sc.name}-{stamp}.html"
        started: LocalBroker | None = None
        try:
            if bootstrap is None:
                local = LocalBroker()
                existing = local.load()
                if existing is None or local.status()["dead"]:
                    env.say("starting a local Apache Kafka (kgctl broker up)")
                    started = local
                state = local.up(
                    say=env.say,
                    wait=spinner(env),
                    tie_to_parent=not keep_broker,
                    timeout_s=max(timeout, 120),
                )
                settings = replace(settings, bootstrap=state.bootstrap)
                env.say(f"local Kafka at {state.bootstrap}")
            journal = run_scenario(
                sc,
                settings,
                options=RunOptions(
                    timings=TimingOverrides(session_timeout, heartbeat_interval, max_poll_interval),
                    allow_destructive=allow_destructive,
                ),
                display=ChaosDisplay.make(
                    env.err if env.json else env.out, "none" if quiet else "auto"
                ),
                record=record,
            )
        finally:
            # A broker this run started (and was not asked to keep) ends with the run,
            # also when it is interrupted while the broker is still starting.
            if started is not None and not keep_broker:
                started.down()
        if journal.verdict == "setup failed":
            # Nothing ran (the cluster unreachable, the fleet never formed): there is no
            # run to summarise or report, only why, with its own exit status.
            from kgctl.errors import ExitStatus, KgctlError

            raise KgctlError(journal.error, ExitStatus(journal.exit_status))
        report = load_report(record, journal.group)
        html.write_text(render_html(report), encoding="utf-8")
        if env.json:
            emit_json(
                env,
                {"journal": journal.to_dict(), "record": str(record), "html": str(html)},
            )
        else:
            from kgctl.render.chaos_view import summary

            assert env.out is not None
            env.out.print(summary(journal))
            env.out.print(render_report(report))
            env.say(f"recording: {record}")
            env.say(f"HTML report: {html}  (open it in a browser)")
            env.say(f"again from the recording: kgctl report {record} --html {html}")
        if journal.error:
            env.say(f"kgctl: error: {journal.error}")
        return int(journal.exit_status)

    status = run(env, body)
    if status:
        raise typer.Exit(status)
