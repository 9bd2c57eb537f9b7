"""`kgctl demo`: the first thing a new user runs, end to end on a real local Kafka."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.kafka
def test_demo_starts_its_own_kafka_runs_the_tour_reports_and_cleans_up(
    tmp_path: Path, bootstrap: str
) -> None:
    del bootstrap  # the session broker has put Kafka's jars in the cache
    env = dict(os.environ, KGCTL_STATE_DIR=str(tmp_path / "state"))
    env.pop("KGCTL_BOOTSTRAP_SERVER", None)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "demo", "--out-dir", str(out)],
        capture_output=True, text=True, env=env, timeout=400, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Without a terminal: plain lines, no live view escape codes, then the summary.
    assert "\x1b[" not in done.stdout
    words = " ".join(done.stdout.split())  # the tables wrap at the pipe's 80 columns
    assert "verdict: passed" in words
    assert (
        "invariants: all 11 checks passed (exclusive-ownership, complete-ownership ×5, "
        "single-generation ×5)" in words
    )
    # It says where the recording and the report are, and they are there.
    (recording,) = out.glob("tour-*.jsonl")
    (html,) = out.glob("tour-*.html")
    actions = [
        json.loads(line)["data"]["action"]
        for line in recording.read_text().splitlines()
        if '"type":"ActionPerformed"' in line
    ]
    assert actions == ["member-add", "partition-growth", "member-kill", "member-stop"]
    assert str(html) in done.stderr and str(recording) in done.stderr
    page = html.read_text()
    assert "<svg" in page and "Invariants" in page and "http://" not in page.split("<svg")[0]
    # The broker it started for the run is gone, and so is its state.
    assert "starting a local Apache Kafka" in done.stderr
    assert not (tmp_path / "state" / "broker.json").exists()
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == "", "demo left a process behind"
    report = subprocess.run(
        [sys.executable, "-m", "kgctl", "report", str(recording), "--output", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    causes = [r["cause"] for r in json.loads(report.stdout)["rebalances"]]
    assert {"member_joined", "partitions_changed", "member_failed", "member_left"} <= set(causes)
