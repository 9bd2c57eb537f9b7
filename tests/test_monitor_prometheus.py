"""The shipped alert rules and Grafana dashboard, evaluated by a real Prometheus (Debian's
`prometheus`, `make system-deps`) scraping a real `kgctl monitor` while real members
rebalance a group: each expression must return what happened, and `promtool check rules`
must pass."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MemberProc, wait_converged
from monitor_procs import MonitorProc

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "prometheus" / "kgctl-monitor-rules.yml"
DASHBOARD = ROOT / "examples" / "grafana" / "kgctl-monitor.json"

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="Debian's prometheus is not installed (make system-deps installs it)",
)


@needs_prometheus
def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """A Prometheus of the test's own: its own directory and port, a 1 s scrape."""

    def __init__(self, home: Path, target_port: int) -> None:
        self.port = _free_port()
        config = home / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{RULES}']\n"
            "scrape_configs:\n"
            "  - job_name: kgctl-monitor\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        )
        self.log = (home / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )

    def api(self, path: str, **params: Any) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> dict[str, float]:
        """An instant query: each series' `group` label (or '') -> its value."""
        data = self.api("query", query=expr)
        return {r["metric"].get("group", ""): float(r["value"][1]) for r in data["result"]}

    def query_range(self, expr: str, start: float, end: float) -> dict[str, list[float]]:
        data = self.api("query_range", query=expr, start=start, end=end, step="1s")
        return {
            r["metric"].get("group", ""): [float(v) for _t, v in r["values"]]
            for r in data["result"]
        }

    def wait(self, expr: str, pred: Any, timeout: float, what: str) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        got: dict[str, float] = {}
        while time.monotonic() < deadline:
            try:
                got = self.query(expr)
            except OSError:  # not listening yet
                got = {}
            if pred(got):
                return got
            assert self.proc.poll() is None, "prometheus exited"
            time.sleep(0.5)
        raise AssertionError(f"prometheus: timed out waiting for {what}; last {got}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator[Any]:
    started: list[Prometheus] = []

    def start(port: int) -> Prometheus:
        started.append(Prometheus(tmp_path, port))
        return started[-1]

    yield start
    for p in started:
        p.stop()


def _rules() -> dict[str, str]:
    import yaml

    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def _panels() -> dict[str, str]:
    """Each dashboard panel's expression, its variables as a whole-range view sets them."""
    doc = json.loads(DASHBOARD.read_text())
    out = {}
    for p in doc["panels"]:
        (target,) = p["targets"]
        expr = target["expr"].replace("$group", ".*").replace("$__rate_interval", "2m")
        out[p["title"]] = expr.replace("$__range", "10m")
    return out


@needs_prometheus
def test_rules_and_dashboard_return_what_happened(  # type: ignore[no-untyped-def]
    bootstrap: str, topic, prometheus_for
) -> None:
    t = topic(4)
    run = uuid.uuid4().hex[:8]
    busy, quiet = f"prom-{run}-busy", f"prom-{run}-quiet"
    started = time.monotonic()
    members: list[MemberProc] = []
    mon = MonitorProc(bootstrap, "--groups", f"^prom-{run}-")
    prom = prometheus_for(mon.port)
    try:
        q = MemberProc(bootstrap, quiet, t, name="q")
        members.append(q)
        a = MemberProc(bootstrap, busy, t, name="a")
        members.append(a)
        wait_converged([q], t, 4, timeout=60)
        wait_converged([a], t, 4, timeout=60)
        # Prometheus has the busy group's first rebalance before the ones provoked.
        prom.wait(
            f'kgctl_group_generations_total{{group="{busy}"}}',
            lambda got: got.get(busy) == 1, 60, "the busy group's first generation",
        )  # fmt: skip
        t0 = time.time()
        b = MemberProc(bootstrap, busy, t, "--session-timeout", "15000", name="b")
        members.append(b)
        wait_converged([a, b], t, 4)
        b.kill()  # dead, silent: its session runs out 15 s later
        c = MemberProc(bootstrap, busy, t, name="c")  # joins while the group waits for b
        members.append(c)
        wait_converged([a, c], t, 4, timeout=60)
        c.stop()  # leaves
        wait_converged([a], t, 4)
        mon.wait(lambda: sum(mon.rebalances_of(busy).values()) == 4, 30, "4 rebalances")
        lines = [r for r in mon.rebalances if r["group"] == busy]
        slow = [r for r in lines if (r["duration_ms"] or 0) > 10_000]
        dead_waits = sum(1 for r in lines for w in r["critical_path"] if w["why"] == "dead")
        prom.wait(
            f'kgctl_group_generations_total{{group="{busy}"}}',
            lambda got: got.get(busy) == 4, 30, "the 4 generations scraped",
        )  # fmt: skip
        t1 = time.time()
        rules = _rules()

        often = prom.query(rules["KafkaGroupRebalancingOften"])
        # 3 rebalances after the first (increase() extrapolates a little past the samples).
        assert set(often) == {busy} and 3 <= often[busy] < 4.5, often
        slow_found = prom.query(rules["KafkaGroupRebalanceSlow"])
        assert len(slow) == 1, [(r["generation"], r["duration_ms"]) for r in lines]
        assert set(slow_found) == {busy} and 1 <= slow_found[busy] < 1.5, slow_found
        not_stable = prom.query_range(rules["KafkaGroupNotStable"], t0, t1)
        assert set(not_stable) == {busy}, not_stable  # while it waited for b, only
        assert prom.query(rules["KafkaGroupNotStable"]) == {}  # stable at the end
        waited = prom.query(rules["KafkaGroupWaitedForSessionTimeout"])
        # What the diagnosis said of the waits (from the broker's view alone), no more.
        assert set(waited) == ({busy} if dead_waits else set()), (waited, dead_waits)
        assert prom.query(rules["KgctlMonitorClusterUnreachable"]) == {}

        panels = _panels()
        by_cause = prom.api("query", query=panels[
            "Rebalances by cause (since the history kgctl monitor read)"])["result"]  # fmt: skip
        got = {(r["metric"]["group"], r["metric"]["cause"]): float(r["value"][1]) for r in by_cause}
        expected: dict[tuple[str, str], float] = {}
        for r in [*lines, *(x for x in mon.rebalances if x["group"] == quiet)]:
            key = (r["group"], r["trigger"]["cause"])
            expected[key] = expected.get(key, 0) + 1
        assert got == expected
        assert expected[(busy, "member_left")] == 1
        assert prom.query(panels["Rebalances per hour"]).get(busy, 0) > 0
        mean = prom.query(panels["Mean rebalance duration (s)"])[busy]
        timed = [r["duration_ms"] / 1000 for r in lines if r["duration_ms"] is not None]
        assert mean == pytest.approx(sum(timed) / len(timed), abs=0.01)
        unassigned = prom.query(
            panels["Time without partitions, per member and rebalance (s, mean)"]
        )
        costs = [c["unassigned_ms"] / 1000 for r in lines for c in r["cost"]]
        assert unassigned[busy] == pytest.approx(sum(costs) / len(costs), abs=0.01)
        assert prom.query(panels["Waits for a dead member (session timeout)"])[busy] == dead_waits
        assert prom.query(panels["Members"]) == {busy: 1.0, quiet: 1.0}
        rebalancing = prom.query_range(panels["Rebalancing"], t0, t1)
        assert max(rebalancing[busy]) == 1 and max(rebalancing[quiet]) == 0
        assert prom.query(panels["Generation"])[busy] == 4
        since = prom.query(panels["Seconds since the last rebalance"])[busy]
        assert 0 <= since < time.time() - t0
        assert prom.query(panels["Monitor: cluster reachable"]) == {"": 1.0}
        assert 0 < prom.query(panels["Monitor: poll duration p99 (s)"])[""] < 5
        assert prom.query(panels["Monitor: __consumer_offsets records read per second"])[""] > 0
    finally:
        for m in members:
            m.kill()
        assert mon.stop() == 0
        print(f"prometheus test took {time.monotonic() - started:.0f} s")
