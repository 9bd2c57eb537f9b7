"""`kgctl monitor` as a real OS process for the real-broker tests, and reading its
metrics endpoint (tests/test_monitor_kafka.py, tests/test_monitor_prometheus.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


class MonitorProc:
    """`python -m kgctl monitor -o json --metrics-listen 127.0.0.1:0 ...`: its JSON lines
    (one per diagnosed rebalance) collected, its metrics address read from stderr."""

    def __init__(self, bootstrap: str, *args: str) -> None:
        cmd = [
            sys.executable, "-m", "kgctl", "monitor", "-b", bootstrap, "-o", "json",
            "--metrics-listen", "127.0.0.1:0", "--interval", "1", "--timeout", "5", *args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.rebalances: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self.url: str | None = None
        self._readers = [
            threading.Thread(target=self._out, daemon=True),
            threading.Thread(target=self._err, daemon=True),
        ]
        for r in self._readers:
            r.start()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.rebalances.append(json.loads(line))

    def _err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            m = re.search(r"metrics at (http://\S+)", line)
            if m:
                self.url = m[1]

    @property
    def port(self) -> int:
        self.wait(lambda: self.url, 30, "the metrics address")
        assert self.url is not None
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def wait(self, pred: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = pred()
            if got:
                return got
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"kgctl monitor exited {self.proc.returncode} before {what}: "
                    + "".join(self.stderr_lines)[-2000:]
                )
            time.sleep(0.2)
        raise AssertionError(
            f"kgctl monitor: timed out waiting for {what}; its stderr: "
            + "".join(self.stderr_lines)[-2000:]
        )

    def scrape(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of the endpoint now: (name, sorted labels) -> value."""
        self.wait(lambda: self.url, 30, "the metrics address")
        assert self.url is not None
        with urllib.request.urlopen(self.url, timeout=5) as answer:
            text = answer.read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def sample(self, name: str, **labels: str) -> float | None:
        return self.scrape().get((name, tuple(sorted(labels.items()))))

    def rebalances_of(self, group: str) -> dict[str, float]:
        """cause -> kgctl_group_rebalances_total, for one group."""
        out = {}
        for (name, labels), value in self.scrape().items():
            d = dict(labels)
            if name == "kgctl_group_rebalances_total" and d.get("group") == group:
                out[d["cause"]] = value
        return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=20)
        self._close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        for r in self._readers:
            r.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
