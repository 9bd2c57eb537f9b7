"""The benchmark's smoke mode against the session broker: it runs and its numbers are sane.

Not a benchmark itself: no timing assertions beyond "finished, positive, bounded".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.kafka
def test_bench_smoke_produces_sane_numbers(bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    # No limit on how long it takes (speed is the benchmark's business, not a test's: a
    # loaded CI machine took 87 s); the timeout only stops a smoke run that hangs.
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--quiet"]
        + ["--bootstrap", bootstrap, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(out.read_text())

    assert res["machine"]["nproc"] >= 1 and res["machine"]["kafka_python"] == "3.0.12"
    # Fold and view: positive rates, the synthetic group has its members.
    for phase in ("first_join", "rebalance", "steady"):
        assert res["fold"][phase]["events_per_s"] > 100
    for view in res["view"]:
        assert view["frames"] >= 1 and view["members"] == 20
    # The live watch on a synthetic stream drew frames in each phase, the rebalance's
    # events all folded.
    watch = res["watch"]
    assert watch["members"] == 20 and watch["rebalance"]["events"] == 20 * 9
    for phase in ("steady", "rebalance", "settling", "after"):
        assert watch[phase]["frames"] >= 1 and watch[phase]["cpu_ms_per_frame"] > 0
    # The live loop through a replayed rebalance drew frames in every phase, and the
    # rebalance's events were there (each member: revoke, join, sync, assign, ...).
    stream = res["watchstream"]
    assert stream["members"] == 20 and stream["stream"]["rebalance_events"] >= 20 * 10
    for phase in ("steady", "rebalance", "settling", "after"):
        assert stream["median"][phase]["frames_per_s"] > 0
        assert 0 < stream["median"][phase]["cpu_s"]
    # Latency: both kinds rebalanced 1 -> 2 members, within a bounded time. Plain
    # kafka-python (the baseline, no kgctl code) now and then loses its second member and
    # the group never completes (seen in one CI run of this test, in one of five 1→30
    # repetitions of the latency bench and in one growth setup, 2026-11-30; its cause in
    # kafka-python 3.0.12 is not established). The bench must then report the case as
    # failed, with no number, which is what is checked for it; kgctl's case must pass.
    rows = {r["kind"]: r for r in res["latency"]}
    assert set(rows) == {"kgctl", "kp"}
    for kind, row in rows.items():
        if kind == "kp" and row["ok"] == 0:
            assert row["latency_ms"] is None, row
            assert any("group never complete" in e for e in row["errors"]), row["errors"]
            continue
        assert row["ok"] == 1, (kind, row["errors"])
        assert 0 < row["latency_ms"] < 30_000
        assert row["unassigned_max_ms"] is not None and row["unassigned_max_ms"] < 10_000
    # Tracing: both members used CPU, the traced one published events.
    trace = res["trace"][0]
    assert trace["ok"] and trace["cpu_pct_without"] > 0 and trace["events_per_s"] > 0
    # Density: the small group held still with several members in one process, then
    # grew by a second process, and both triggers completed.
    packed, grown = res["density"]["steps"]
    assert packed["ok"] and grown["ok"], res["density"]["steps"]
    assert packed["processes"] == 1 and packed["members_after_hold"] == 3
    assert grown["processes"] == 2 and grown["members_after_hold"] == 4
    assert 0 < packed["pss_mb_per_member"] < 100 and packed["threads_per_member"] >= 1
    assert res["density"]["largest_stable"] == 4
    assert [t["trigger"] for t in res["density"]["triggers"]] == ["growth", "kill"]
    assert all(t["ok"] for t in res["density"]["triggers"]), res["density"]["triggers"]
    # Start-up: both kinds joined; CPU seconds are positive.
    startup = res["startup"]
    assert startup["kgctl"]["ok"] == 1 and startup["kp"]["ok"] == 1
    assert startup["kgctl"]["cpu_s_median"] > 0 and startup["kp"]["cpu_s_median"] > 0


@pytest.mark.kafka
def test_monitor_scale_bench_smoke_counts_every_rebalance(bootstrap: str, tmp_path: Path) -> None:
    # bench/monitor_scale.py at a toy size on the session broker: it runs, each provoked
    # rebalance is counted with its cause, and its figures are there (not their values).
    out = tmp_path / "monitor.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.monitor_scale", "--bootstrap", bootstrap,
         "--idle", "20", "--active", "2", "--rate", "1", "--seconds", "6", "--warmup", "1",
         "--modes", "log:1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (mode,) = json.loads(out.read_text())["modes"]
    assert mode["error"] == "" and mode["rebalances"] >= 5, mode
    assert mode["counted"] == mode["rebalances"] and mode["wrong_cause"] == 0, mode
    assert mode["cpu_core_fraction"] > 0 and mode["rss_mb"] > 0 and mode["lag_p99_ms"] >= 0
