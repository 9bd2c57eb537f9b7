"""Shell-completion callbacks: live group names from the cluster, groups in a report file.

A completer runs inside the user's shell on every Tab: it must answer fast and never
print an error, so each one catches everything and returns nothing instead.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import typer

# Tab must not hang: give the cluster this long, then complete nothing.
GROUP_LOOKUP_S = 3.5


def complete_groups(ctx: typer.Context, incomplete: str) -> list[str]:
    """Consumer groups on the cluster of -b / KGCTL_BOOTSTRAP_SERVER (and --command-config)."""
    try:
        params: dict[str, Any] = dict(ctx.params or {})
        bootstrap = params.get("bootstrap") or os.environ.get("KGCTL_BOOTSTRAP_SERVER")
        if not bootstrap:
            return []
        names = _list_group_names(bootstrap, params.get("command_config"), params.get("x"))
        return [n for n in names if n.startswith(incomplete)]
    except Exception:  # completion must fail silently
        return []


def _list_group_names(bootstrap: str, command_config: Any, overrides: Any) -> list[str]:
    found: list[str] = []

    def lookup() -> None:
        import logging

        from kgctl.observe.watch import list_groups
        from kgctl.settings import ClientSettings

        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        settings = ClientSettings.from_options(
            bootstrap, command_config, overrides, timeout_s=GROUP_LOOKUP_S
        )
        found.extend(sorted(g.group for g in list_groups(settings)))

    # A daemon thread: if the cluster does not answer in time, the shell gets nothing and
    # the process exits without waiting for it.
    worker = threading.Thread(target=_quietly, args=(lookup,), daemon=True)
    worker.start()
    worker.join(GROUP_LOOKUP_S)
    return list(found) if not worker.is_alive() else []


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:
        pass


def complete_file_groups(ctx: typer.Context, incomplete: str) -> list[str]:
    """Groups named in the events file given as FILE (for `kgctl report --group`)."""
    try:
        path = (ctx.params or {}).get("file")
        if not path:
            # `--group` still lacks its value, so click left FILE unparsed in ctx.args.
            path = next((a for a in ctx.args if Path(a).is_file()), None)
        if not path:
            return []
        from kgctl.recordings import recording_lines
        from kgctl.report import groups_in, parse_lines

        events, _ = parse_lines(recording_lines(Path(path)))
        return [g for g in groups_in(events) if g.startswith(incomplete)]
    except Exception:
        return []


def complete_scenarios(incomplete: str) -> list[str]:
    """Built-in chaos scenario names (nothing if the chaos package is unavailable)."""
    try:
        from kgctl.chaos.scenarios import builtin_names

        return [n for n in builtin_names() if n.startswith(incomplete)]
    except Exception:
        return []
