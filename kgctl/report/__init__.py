"""`kgctl report`: a recorded run (JSON-lines events) summarised rebalance by rebalance.

`build_report(events)` is pure; `load_report(path)` reads the file and calls it.
"""

from __future__ import annotations

from pathlib import Path

from kgctl.errors import NotFoundError, UsageError
from kgctl.model.diagnosis import Context
from kgctl.model.events import groups_in
from kgctl.model.timeline import Move
from kgctl.recordings import recording_lines
from kgctl.report.summary import (
    ErrorCount,
    InvariantCheck,
    MemberTimeline,
    Rebalance,
    Report,
    Segment,
    build_report,
    parse_lines,
)

__all__ = [
    "ErrorCount",
    "InvariantCheck",
    "MemberTimeline",
    "Move",
    "Rebalance",
    "Report",
    "Segment",
    "build_report",
    "groups_in",
    "load_report",
    "parse_lines",
]


def load_report(path: Path, group: str | None = None, context: Context | None = None) -> Report:
    """Read a JSON-lines events file (`--record`, `--output json`; plain or gzip) and
    build its report."""
    # Undecodable bytes do not end the read: a recording with a damaged line still
    # reports its other events, and a file of something else has no events at all.
    events, skipped = parse_lines(recording_lines(path))
    if not events:
        raise UsageError(
            f"{path}: not a kgctl recording (no kgctl events in it); pass a file written by "
            "--record or --output json"
        )
    names = groups_in(events)
    if group is not None and group not in names:
        raise NotFoundError(f"{path}: no events of group {group!r} (groups: {', '.join(names)})")
    if group is None and len(names) > 1:
        raise UsageError(f"{path} holds several groups; pick one with --group: {', '.join(names)}")
    return build_report(events, group, skipped, context)
