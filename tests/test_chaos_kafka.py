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
from helpers import recorded_events, run_chaos

from kgctl.broker.local import LocalBroker
from kgctl.chaos.scenarios import builtin_names
from kgctl.errors import ExitStatus

pytestmark = pytest.mark.kafka

# The protocol built-ins have their own module (tests/test_chaos_protocols_kafka.py);
# protocol-showdown is a measurement of minutes with thirty members (bench/showdown.py).
PROTOCOL_BUILTINS = ("migrate-online", "fencing-loop", "protocol-showdown")
SINGLE_NODE = [
    n for n in builtin_names() if n != "coordinator-failover" and n not in PROTOCOL_BUILTINS
]


def _run(
    name: str, bootstrap: str, tmp_path: Path, *extra: str
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    # A 15 s settle timeout: the single-node built-ins settle well within it.
    return run_chaos(name, bootstrap, tmp_path, "--timeout", "15", *extra, timeout=240)


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
    _assert_fault_scenario(name, journal, events)
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


# -- a cluster on Kafka's own group settings -------------------------------------------
# Every built-in that makes sense on one node, and the demo, run side by side on the
# stock broker, each in its own group and topics: together they take about as long as
# the slowest one, not the sum.
# The static restart goes first: it is the one most sensitive to a loaded machine.
STOCK_RUNS = sorted([*SINGLE_NODE, "demo"], key=lambda n: n != "rolling-restart-static")


@pytest.fixture(scope="module")
def stock_runs(
    stock_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]], int, str]]:
    """name -> (journal, recorded events, exit status, stderr) of each run on the stock broker."""
    base = tmp_path_factory.mktemp("stock-runs")
    pending = list(STOCK_RUNS)
    running: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    results = {}
    started: dict[str, float] = {}
    while pending or running:
        # At most STOCK_SIDE_BY_SIDE at once: each run is 3-4 processes that spend their
        # first second importing, and on two cores ten runs started together delay a
        # restarted static member past its session timeout (seen: 9 s to restart).
        while pending and len(running) < STOCK_SIDE_BY_SIDE:
            name = pending.pop(0)
            running[name] = _start_stock_run(name, stock_bootstrap, base / name)
            started[name] = time.monotonic()
        finished = [n for n, (proc, _out) in running.items() if proc.poll() is not None]
        if not finished:
            for name, (proc, _out) in running.items():
                if time.monotonic() - started[name] > 400:
                    proc.kill()
                    raise AssertionError(f"{name} still running after 400 s")
            time.sleep(0.2)  # several processes and nothing to wait on in common: poll
            continue
        for name in finished:
            proc, out = running.pop(name)
            results[name] = _stock_result(name, proc, out)
    return results


STOCK_SIDE_BY_SIDE = 4


def _assert_fault_scenario(
    name: str, journal: dict[str, Any], events: list[dict[str, Any]]
) -> None:
    """The fault scenarios: the proxy applied its rules, and each client did what the
    scenario is about."""
    injected = [e for e in events if e["type"] == "FaultInjected"]
    steps = journal["steps"]

    def of(type_: str, member: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in events
            if e["type"] == type_ and e["source"] == "member" and member in (None, e["member"])
        ]

    if name == "coordinator-flap":
        assert len(injected) == 5
        joined = steps[2]["errors"]
        assert any("NOT_COORDINATOR" in per for per in joined.values()), joined
        # NOT_COORDINATOR sends a member back to FindCoordinator.
        lost = [e for e in of("CoordinatorLost") if e["data"]["error"] == "NOT_COORDINATOR"]
        assert lost
    elif name == "slow-sync":
        (held,) = injected
        assert held["data"]["effect"] == "delay" and held["client_id"] == "kgctl-m1"
        assert len(steps[2]["generations"]) == 1  # nobody was removed while m1 synced
        slow = [e for e in of("SyncGroupReceived", "m2") if e["ts_ms"] >= held["ts_ms"]]
        assert slow[0]["data"]["duration_ms"] >= held["data"]["delay_ms"] * 0.8
    elif name == "fenced-heartbeat":
        assert steps[0]["fenced"] == ["m2"]
        assert of("MemberFailed", "m2")[0]["data"]["error"] == "FENCED_INSTANCE_ID"
    elif name == "commit-during-rebalance":
        assert len(injected) == 4
        refused = of("OffsetCommitFailed")
        assert refused and journal["invariants"]["at-least-once"] == "held"
    elif name == "coordinator-partition":
        cut, healed = steps[0]["action_ms"], steps[-1]["action_ms"]
        # The coordinator removed m3 at its session timeout: a generation without it.
        without = [
            e for e in of("JoinCompleted") if cut < e["ts_ms"] < healed and e["member"] != "m3"
        ]
        assert without, "the others never rebalanced without m3"
        removed_at = min(e["ts_ms"] for e in without)
        # m3 saw its session pass without an answer and looked the coordinator up again,
        # but, like Java's classic consumer, kept its partitions and went on consuming
        # them while the others owned them: the zombie window this scenario shows.
        expired = [e for e in of("CoordinatorLost", "m3") if cut < e["ts_ms"] < healed]
        assert any("session expired" in str(e["data"]["error"]) for e in expired), expired
        gave_up = [
            e for e in of("PartitionsLost", "m3") + of("GenerationReset", "m3")
            if cut < e["ts_ms"] < healed
        ]  # fmt: skip
        assert not gave_up, gave_up
        zombie = [
            e for e in of("RecordsConsumed", "m3") if removed_at < e["ts_ms"] < healed
        ]  # fmt: skip
        assert zombie, "m3 consumed nothing after it was removed"
        assert steps[0]["details"]["cut_off"] == "m3"
        assert journal["invariants"]["exclusive-ownership"] == "held"  # the window is excused
        # After the heal the coordinator's answer tells m3; it loses its partitions and
        # joins again.
        assert [e for e in of("PartitionsLost", "m3") if e["ts_ms"] > healed]
        assert steps[-1]["generations"], "m3 did not rejoin after the heal"


def _start_stock_run(name: str, bootstrap: str, out: Path) -> tuple[subprocess.Popen[str], Path]:
    out.mkdir()
    if name == "demo":
        cmd = ["demo", "-b", bootstrap, "--out-dir", str(out), "--output", "json"]
    else:
        cmd = ["chaos", "run", name, "-b", bootstrap, "--timeout", "15",
               "--record", str(out / "events.jsonl"), "--output", "json"]  # fmt: skip
    # Output goes to files: a pipe nobody reads while the others run could fill and block.
    with (out / "stdout").open("w") as stdout, (out / "stderr").open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kgctl", *cmd], stdout=stdout, stderr=stderr, text=True
        )
    return proc, out


def _stock_result(
    name: str, proc: subprocess.Popen[str], out: Path
) -> tuple[dict[str, Any], list[dict[str, Any]], int, str]:
    stdout, stderr = (out / "stdout").read_text(), (out / "stderr").read_text()
    try:
        doc = json.loads(stdout)
    except ValueError:
        raise AssertionError(
            f"{name}: exit {proc.returncode}, no JSON\n{stdout[-2000:]}\n{stderr[-3000:]}"
        ) from None
    if name == "demo":
        journal, record = doc["journal"], Path(doc["record"])
    else:
        journal, record = doc, out / "events.jsonl"
    return journal, recorded_events(record), int(proc.returncode), stderr


@pytest.mark.parametrize("name", STOCK_RUNS)
def test_builtin_scenario_runs_green_on_kafkas_default_group_settings(
    name: str, stock_runs: dict[str, tuple[dict[str, Any], list[dict[str, Any]], int, str]]
) -> None:
    journal, events, status, _stderr = stock_runs[name]
    scenario = journal["scenario"]
    _assert_green(scenario, journal, events, status)
    # The run read the cluster's bounds and moved what did not fit into them.
    bounds = journal["cluster"]["bounds"]
    assert bounds["source"] == "cluster"
    minimum = bounds["configs"]["group.min.session.timeout.ms"]
    delay = bounds["configs"]["group.initial.rebalance.delay.ms"]
    if not (os.environ.get("KGCTL_TEST_STOCK_BOOTSTRAP") or os.environ.get("KGCTL_TEST_BOOTSTRAP")):
        assert (minimum, delay) == (6000, 3000)  # the session's own stock broker
    fitted = {t["setting"]: t for t in journal["cluster"]["timings"]}
    assert ("setup wait" in fitted) == (delay > 0)
    # The first member the fleet started with the fleet's session (a scenario may give
    # a member its own, slow-sync's leader for one).
    from kgctl.chaos.scenarios import builtin as _builtin

    own = {m.name for m in _builtin(scenario).fleet.members if m.session_timeout_ms}
    started = next(e for e in events if e["type"] == "MemberStarted" and e["member"] not in own)
    from kgctl.chaos.scenarios import builtin

    written = builtin(scenario).fleet.session_timeout_ms
    if written < minimum:
        assert fitted["session"]["before"] == written
        assert fitted["session"]["after"] == minimum
        assert "the cluster's minimum" in fitted["session"]["text"]
        assert started["data"]["config"]["session_timeout_ms"] == minimum
    else:
        assert "session" not in fitted
        assert started["data"]["config"]["session_timeout_ms"] == written
    # The scaling is announced where the user looks: the first chaos event.
    first = next(e for e in events if e["type"] == "ScenarioStarted")
    assert [t["text"] for t in first["data"]["timings"]] == [
        t["text"] for t in journal["cluster"]["timings"]
    ]


def test_a_session_timeout_the_cluster_refuses_fails_before_anything_starts(
    stock_bootstrap: str, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kgctl", "chaos", "run", "member-kill", "-b", stock_bootstrap,
         "--session-timeout", "100", "--record", str(tmp_path / "e.jsonl")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == ExitStatus.USAGE, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "--session-timeout 100" in line
    assert "group.min.session.timeout.ms=" in line
    assert "read from the cluster" in line
    assert "MemberStarted" not in (tmp_path / "e.jsonl").read_text()


def test_a_member_refused_for_its_session_timeout_ends_the_run_at_once(
    stock_bootstrap: str, tmp_path: Path
) -> None:
    # A principal that may not describe the cluster's configs: kgctl assumes bounds that
    # are wrong for this cluster (a 100 ms minimum, below any broker's here), lets a
    # 200 ms session through, the members are refused, and the run must say so at once
    # rather than wait for a group to form.
    wrong = (
        "import kgctl.adapters.chaos as c;"
        "from kgctl.model.bounds import GroupBounds, SOURCE_DEFAULTS, KAFKA_DEFAULTS;"
        "cfg = dict(KAFKA_DEFAULTS, **{'group.min.session.timeout.ms': 100});"
        "c.ChaosAdmin.group_bounds = lambda self: GroupBounds(cfg, SOURCE_DEFAULTS, "
        "'the cluster refused DescribeConfigs (test)');"
        "from kgctl.cli.app import main; main()"
    )
    record = tmp_path / "e.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", wrong, "chaos", "run", "member-kill", "-b", stock_bootstrap,
         "--session-timeout", "200", "--record", str(record), "--output", "json"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    journal = json.loads(proc.stdout)
    assert proc.returncode == ExitStatus.SETUP_FAILED, proc.stderr
    assert journal["verdict"] == "setup failed"
    error = journal["error"]
    assert "\n" not in error
    assert "session timeout of 200 ms (INVALID_SESSION_TIMEOUT" in error
    assert "kgctl assumed group.min.session.timeout.ms=100" in error
    assert "the cluster refused DescribeConfigs" in error
    assert "--session-timeout MS" in error
    # At once: the run ended on the first refusal, long before the setup's settle
    # timeout (3 × session + max.poll.interval + 15 s, 45 s here) could have run out.
    events = recorded_events(record)
    refused = min(
        e["ts_ms"]
        for e in events
        if e["source"] == "member" and e["data"].get("error") == "INVALID_SESSION_TIMEOUT"
    )
    finished = next(e for e in events if e["type"] == "ScenarioFinished")
    assert finished["ts_ms"] - refused < 15000
    leftovers = subprocess.run(
        ["pgrep", "-f", journal["group"]], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == "", "members outlived the failed run"
