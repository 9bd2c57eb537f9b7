"""`kgctl report FILE`: a recorded run summarised rebalance by rebalance (text, JSON, HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgctl.cli.common import (
    Output,
    OutputFormat,
    Quiet,
    Verbose,
    emit_json,
    make_env,
    run,
)
from kgctl.cli.completers import complete_file_groups


def report_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="Events as JSON lines, plain or gzipped: --record, or join --output json.",
            show_default=False,
        ),
    ],
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            "-g",
            help="The group to report on, when the file holds several.",
            autocompletion=complete_file_groups,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write one self-contained HTML page (timeline, invariants, events).",
            show_default=False,
        ),
    ] = None,
    output: Output = OutputFormat.text,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Summarise a recorded run of a group, rebalance by rebalance.

    For each rebalance: its cause, generations, duration, each member's time without
    partitions, partitions moved and errors; then the invariants. --html adds a timeline.
    """
    env = make_env(output, verbose, quiet)

    def body() -> None:
        from kgctl.adapters.assignors import cooperative_sticky
        from kgctl.model.diagnosis import Context
        from kgctl.report import load_report

        report = load_report(file, group, Context(cooperative=cooperative_sticky))
        if html is not None:
            from kgctl.render.html_report import render_html

            try:
                html.write_text(render_html(report), encoding="utf-8")
            except OSError as exc:
                from kgctl.errors import UsageError

                raise UsageError(f"--html {html}: cannot write it ({exc.strerror})") from None
            env.say(f"wrote {html}")
        if env.json:
            emit_json(env, report.to_dict())
            return
        from kgctl.render.report_text import render_report

        assert env.out is not None
        env.out.print(render_report(report))

    run(env, body)
