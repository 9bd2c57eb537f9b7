"""`kgctl report` on a run recorded from real members against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from recorder import record_two_members

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]


def test_report_on_two_real_members(bootstrap: str, tmp_path: Path) -> None:
    run = tmp_path / "run.jsonl"
    group = record_two_members(bootstrap, run, grow=False)  # a joins, b joins, b leaves
    page = tmp_path / "run.html"
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "report", str(run), "-o", "json", "--html", str(page)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["group"] == group
    causes = [r["cause"] for r in doc["rebalances"]]
    assert causes == ["member_joined", "member_joined", "member_left"], causes
    gens = doc["generations"]
    assert gens == sorted(gens) and len(set(gens)) == 3
    assert all(r["duration_ms"] is not None for r in doc["rebalances"])
    assert doc["invariants"]["passed"] is True
    assert [m["member"] for m in doc["members"]] == ["a", "b"]
    html = page.read_text()
    assert 'id="timeline-svg"' in html and 'id="events-table"' in html


def test_watch_completes_group_names_from_the_cluster(bootstrap: str, tmp_path: Path) -> None:
    group = record_two_members(bootstrap, tmp_path / "run.jsonl", grow=False)
    words = f"kgctl watch -b {bootstrap} {group[:-2]}"
    env = {"_KGCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": "4",
           "PATH": str(Path(sys.executable).parent)}  # fmt: skip
    done = subprocess.run(
        [str(Path(sys.executable).with_name("kgctl"))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    assert group in done.stdout.split()
