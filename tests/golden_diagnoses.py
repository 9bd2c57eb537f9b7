"""The diagnoses of every recording in tests/data/, as `kgctl explain --recording` makes
them, written to tests/data/diagnoses/<recording>.json so a change to the diagnosis that
nobody meant shows up as a diff (tests/test_diagnosis_golden.py compares them).

Regenerate, after a change that means to alter what users see (and say why in the commit):

    .venv/bin/python tests/golden_diagnoses.py
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from kgctl.adapters.assignors import cooperative_sticky
from kgctl.model.diagnosis import Context
from kgctl.model.events import groups_in
from kgctl.model.explanation import explain
from kgctl.recordings import recording_lines
from kgctl.render.explain_text import render_explanation
from kgctl.report.summary import parse_lines

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "diagnoses"


def recordings() -> list[Path]:
    """Every recording checked in, plain or gzipped."""
    return sorted(p for p in DATA.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))


def golden_path(recording: Path) -> Path:
    return GOLDEN / (recording.name.split(".jsonl")[0] + ".json")


def _text(renderable: Any) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=120, color_system=None, force_terminal=False).print(renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def diagnoses_of(recording: Path) -> dict[str, Any]:
    """Per group: each generation's diagnosis JSON and words, the restarts and the
    replaced static members, and explain's text, as `kgctl explain --recording` (offline:
    now is the recording's last event; the cooperative-sticky assignor known)."""
    events, _ = parse_lines(recording_lines(recording))
    now = max(e.ts_ms for e in events)
    ctx = Context(cooperative=cooperative_sticky)
    out: dict[str, Any] = {}
    for group in groups_in(events):
        x = explain(group, events, now, ctx)
        whole = x.to_dict()
        out[group] = {
            "generations": {
                str(d.generation): {
                    "json": d.to_dict(),
                    "label": d.label,
                    "short": d.short(reasons=True),
                    "trigger": d.trigger.text(),
                    "also": [t.text() for t in d.also],
                    "critical_path": [w.text() for w in d.critical_path],
                    "advice": [a.shown() for a in d.advice],
                }
                for d in x.generations
            },
            "restarts": whole["restarts"],
            "restarts_text": [r.text() for r in x.restarts],
            "replaced": whole["replaced"],
            "replaced_text": [r.text() for r in x.replaced],
            "text": _text(render_explanation(x)),
        }
    return out


def main() -> int:
    GOLDEN.mkdir(exist_ok=True)
    for rec in recordings():
        path = golden_path(rec)
        path.write_text(json.dumps(diagnoses_of(rec), indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(DATA.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent.parent))
    sys.exit(main())
