"""Every recording in tests/data/ gives the diagnoses checked in beside it
(tests/data/diagnoses/, written by tests/golden_diagnoses.py): a refactor of the diagnosis
changes nothing a user sees, and a meant change is a named diff in the commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from golden_diagnoses import diagnoses_of, golden_path, recordings


def _differences(path: str, want: Any, got: Any) -> list[str]:
    """Where `got` differs from `want`, each as `path: want != got`."""
    if isinstance(want, dict) and isinstance(got, dict):
        out: list[str] = []
        for key in sorted(set(want) | set(got)):
            where = f"{path}.{key}"
            if key not in got:
                out.append(f"{where}: missing (was {want[key]!r})")
            elif key not in want:
                out.append(f"{where}: new ({got[key]!r})")
            else:
                out += _differences(where, want[key], got[key])
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        pairs = enumerate(zip(want, got, strict=True))
        return [d for i, (w, g) in pairs for d in _differences(f"{path}[{i}]", w, g)]
    return [] if want == got else [f"{path}: {want!r} != {got!r}"]


def test_every_recording_has_its_golden_diagnoses() -> None:
    assert recordings(), "no recordings found in tests/data/"
    missing = [r.name for r in recordings() if not golden_path(r).exists()]
    assert not missing, f"run tests/golden_diagnoses.py: no golden diagnoses for {missing}"


@pytest.mark.parametrize("recording", recordings(), ids=lambda p: p.name)
def test_recording_gives_the_checked_in_diagnoses(recording: Path) -> None:
    want = json.loads(golden_path(recording).read_text())
    # Through JSON, as the golden file was: tuples become lists, keys strings.
    got = json.loads(json.dumps(diagnoses_of(recording)))
    diffs = _differences(recording.name, want, got)
    assert not diffs, "diagnoses changed:\n" + "\n".join(diffs[:40])
