"""`kgctl chaos` against a real broker: every built-in scenario runs green, a broken
expectation exits 5, and no member process outlives the chaos process.

Run with KGCTL_TEST_BOOTSTRAP=127.0.0.1:19092 (or the session broker fixture).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kgctl.broker.local import LocalBroker
from kgctl.chaos.scenarios import builtin_names
from kgctl.errors import ExitStatus

pytestmark = pytest.mark.kafka

SINGLE_NODE = [n for n in builtin_names() if n != "coordinator-failover"]


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(
    name: str, bootstrap: str, tmp_path: Path, *extra: str, timeout: float = 240
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """`kgctl chaos run NAME --output json` as a user runs it: a separate process, so a
    killed broker's half-closed client sockets never reach this one. Returns the JSON
    journal, the recorded events and the exit status."""
    record = tmp_path / "events.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "kgctl", "chaos", "run", name, "-b", bootstrap,
         "--timeout", "15", "--record", str(record), "--output", "json", *extra],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    try:
        journal = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"exit {proc.returncode}, no JSON journal\nstdout: {proc.stdout[-2000:]}\n"
            f"stderr: {proc.stderr[-4000:]}"
        ) from None
    return journal, _events(record), proc.returncode


def _explain(journal: dict[str, Any]) -> str:
    return json.dumps(
        {k: journal.get(k) for k in ("verdict", "error", "violations", "members")}
        | {"steps": [
            {k: s.get(k) for k in ("name", "status", "generations", "settle_ms", "cause",
                                   "rejoin_reasons", "expect")}
            for s in journal.get("steps", [])
        ]},
        indent=1,
    )  # fmt: skip


@pytest.mark.parametrize("name", SINGLE_NODE)
def test_builtin_scenario_runs_green(name: str, bootstrap: str, tmp_path: Path) -> None:
    journal, events, status = _run(name, bootstrap, tmp_path)
    _assert_green(name, journal, events, status)


def _assert_green(
    name: str, journal: dict[str, Any], events: list[dict[str, Any]], status: int
) -> None:
    assert journal["verdict"] == "passed", _explain(journal)
    assert status == journal["exit_status"] == ExitStatus.OK
    steps = journal["steps"]
    assert all(s["status"] == "ok" for s in steps)
    # Every step says when the group was stable again; a rebalance names who it touched.
    assert all(s["settle_ms"] is not None for s in steps)
    assert all(s["affected"] for s in steps if s["generations"])
    # The record holds the members' own events and chaos's, in one envelope.
    types = {e["type"] for e in events}
    assert {"MemberStarted", "JoinCompleted", "RecordsConsumed"} <= types
    assert {"ScenarioStarted", "StepStarted", "ActionPerformed", "GroupSettled"} <= types
    assert events[-1]["type"] == "ScenarioFinished"
    assert events[-1]["data"]["verdict"] == "passed"
    assert {e["v"] for e in events} == {1}
    # At-least-once: records were produced and none went missing.
    assert journal["records"]["produced"] > 0
    assert journal["records"]["missing"] == 0
    assert journal["invariants"]["at-least-once"] == "held"
    assert journal["invariants"]["exclusive-ownership"] == "held"
    step = steps[0]
    if name == "rolling-restart-static":
        assert step["generations"] == []  # static members back within the session timeout
        assert len(step["details"]["restarts"]) == 3
    if name == "rolling-restart-dynamic":
        assert len(step["generations"]) >= 3
    if name == "member-kill":
        assert {mv["from"][0] for mv in step["moved"]} == {"m2"}
        assert journal["invariants"]["kill-handover"] == "held"
    if name == "static-conflict":
        assert step["fenced"] == ["m1"]
    if name == "slow-consumer":
        assert "poll_interval_exceeded" in step["rejoin_reasons"]
    if name == "partition-growth":
        assert len(step["moved"]) >= 3  # the three new partitions got owners
    if name == "subscription-change":
        # The last steps switch every member to a pattern, then create a topic it
        # matches: the new topic's partitions end up assigned.
        new_topic = journal["topics"]["events-2"]
        last = {
            e["member"]: e["data"]["assignment"]
            for e in events
            if e["type"] == "JoinCompleted" and e["source"] == "member"
        }
        assert sorted(p for a in last.values() for p in a.get(new_topic, [])) == [0, 1], last


def test_coordinator_failover_on_three_brokers(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path / "broker.json")
    state = broker.up(brokers=3, tie_to_parent=True, timeout_s=180)
    try:
        journal, events, status = _run(
            "coordinator-failover",
            state.bootstrap,
            tmp_path,
            "--broker-state",
            str(tmp_path / "broker.json"),
        )
        _assert_green("coordinator-failover", journal, events, status)
        step = journal["steps"][0]
        killed = step["details"]["coordinator"]
        found = [
            e["data"]["coordinator"]
            for e in events
            if e["type"] == "CoordinatorFound" and e["ts_ms"] >= step["action_ms"]
        ]
        assert found and killed not in found[-1:]
        assert broker.status()["running"]  # restarted after the step
    finally:
        broker.down()


BROKEN = """\
name: broken-expectation
fleet:
  members: 1
  session_timeout_ms: 3000
  heartbeat_interval_ms: 300
  topics: {orders: 2}
  produce_rate: 10
steps:
  - name: add a member yet expect nothing to happen
    action: member-add
    expect: {rebalances: 0}
"""


def test_a_violated_expectation_exits_5_and_names_it(bootstrap: str, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    proc = subprocess.run(
        [sys.executable, "-m", "kgctl", "chaos", "run", str(path), "-b", bootstrap, "-o", "json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == ExitStatus.INVARIANT_FAILED, proc.stderr
    journal = json.loads(proc.stdout)
    assert journal["verdict"] == "failed"
    [violation] = journal["violations"]
    assert violation["rule"] == "expectation"
    assert violation["step"] == "add a member yet expect nothing to happen"
    assert "expected 0 rebalance(s), saw" in violation["message"]


def test_an_invalid_scenario_exits_2_with_every_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("fleet: {members: 0, topics: {}}\nsteps:\n  - action: nope\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kgctl", "chaos", "run", str(path), "-b", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == ExitStatus.USAGE
    assert f"{path}:1:18: fleet.members: between 1 and 20 members" in proc.stderr
    assert f"{path}:3:13: steps[0].action: unknown action 'nope'" in proc.stderr


def _member_pids(record: Path, want: int, timeout: float = 40.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if record.exists():
            pids = [
                e["pid"]
                for e in _events_tolerant(record)
                if e["type"] == "JoinCompleted" and e["source"] == "member"
            ]
            pids = sorted(set(pids))
            if len(pids) >= want:
                return pids
        time.sleep(0.2)
    raise AssertionError(f"fewer than {want} members joined within {timeout}s")


def _events_tolerant(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # the last line may be half written
    return out


def _is_member(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state != "Z" and b"join" in cmdline and b"kgctl" in cmdline


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _is_member(p)]
        if not alive:
            return []
        time.sleep(0.2)
    return [p for p in pids if _is_member(p)]


def _start_chaos(bootstrap: str, record: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kgctl", "chaos", "run", "rolling-restart-static",
         "-b", bootstrap, "--record", str(record), "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_ctrl_c_ends_every_member_and_prints_the_partial_journal(
    bootstrap: str, tmp_path: Path
) -> None:
    record = tmp_path / "events.jsonl"
    chaos = _start_chaos(bootstrap, record)
    try:
        pids = _member_pids(record, 3)
        assert all(_is_member(p) for p in pids)
        chaos.send_signal(signal.SIGINT)
        out, err = chaos.communicate(timeout=40)
    finally:
        if chaos.poll() is None:
            chaos.kill()
    assert chaos.returncode == ExitStatus.INTERRUPTED, err
    assert _wait_gone(pids, 5) == []
    journal = json.loads(out)
    assert journal["verdict"] == "interrupted"
    assert journal["scenario"] == "rolling-restart-static"


def test_sigkill_of_chaos_leaves_no_member_behind(bootstrap: str, tmp_path: Path) -> None:
    record = tmp_path / "events.jsonl"
    chaos = _start_chaos(bootstrap, record)
    try:
        pids = _member_pids(record, 3)
        os.kill(chaos.pid, signal.SIGKILL)
        chaos.communicate(timeout=10)  # reaps it and closes its pipes
    finally:
        if chaos.poll() is None:
            chaos.kill()
            chaos.communicate(timeout=10)
    # PR_SET_PDEATHSIG: each member gets SIGTERM and leaves within seconds.
    assert _wait_gone(pids, 20) == []
