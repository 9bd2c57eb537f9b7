"""Member processes of three kinds, one OS process each, and their rebalance reports.

- `kgctl`: `python -m kgctl join ... --output json` (events, docs/events.md)
- `java`: `java -cp <kafka-tools> org.apache.kafka.tools.VerifiableConsumer` (one JVM each)
- `kp`: bench/kp_member.py, a plain kafka-python KafkaConsumer with a rebalance listener

All three get the same session timeout, heartbeat interval, metadata max age, range
assignor and classic protocol. Each report is normalised to `Report(ts_ms, what,
partitions)` with `what` in assigned / revoked / lost / join_sent and completed (kgctl
only, with the generation).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

KINDS = ("kgctl", "java", "kp")
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class MemberConfig:
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    metadata_max_age_ms: int = 1000


@dataclass(frozen=True)
class Report:
    ts_ms: int
    what: str
    partitions: frozenset[tuple[str, int]] = frozenset()
    generation: int = -1  # kgctl's JoinCompleted: the generation it completed


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphans if the bench dies


def _parts_kgctl(raw: dict[str, list[int]] | None) -> frozenset[tuple[str, int]]:
    return frozenset((t, p) for t, ps in (raw or {}).items() for p in ps)


def _parts_list(raw: list[dict[str, Any]] | None) -> frozenset[tuple[str, int]]:
    return frozenset((d["topic"], int(d["partition"])) for d in raw or [])


_KGCTL = {
    "PartitionsAssigned": "assigned",
    "PartitionsRevoked": "revoked",
    "PartitionsLost": "lost",
    "JoinGroupSent": "join_sent",
    "JoinCompleted": "completed",
}
_PLAIN = {"partitions_assigned": "assigned", "partitions_revoked": "revoked"}


@dataclass
class Member:
    kind: str
    name: str
    proc: subprocess.Popen[bytes]
    started_ms: int
    reports: list[Report] = field(default_factory=list)
    lines: int = 0
    _reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self.lines += 1
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            if self.kind == "kgctl":
                what = _KGCTL.get(ev.get("type", ""))
                if what:
                    data = ev.get("data", {})
                    parts = _parts_kgctl(data.get("partitions"))
                    gen = int(data.get("generation", -1)) if what == "completed" else -1
                    self.reports.append(Report(int(ev["ts_ms"]), what, parts, gen))
            else:
                what = _PLAIN.get(ev.get("name", ""))
                if what:
                    parts = _parts_list(ev.get("partitions"))
                    self.reports.append(Report(int(ev["timestamp"]), what, parts))

    def send(self, line: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(line) + "\n").encode())
        self.proc.stdin.flush()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def reap(self, timeout_s: float = 5.0) -> None:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.proc.wait(5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


def java_props(cfg: MemberConfig, workdir: Path, client_id: str) -> Path:
    """The member's --command-config: the shared settings and its own client.id (each
    JVM would otherwise call itself consumer-GROUP-1, and a proxy's trace could not tell
    the members' Metadata requests apart)."""
    path = (
        workdir / f"java-{cfg.session_timeout_ms}-{cfg.heartbeat_interval_ms}-"
        f"{cfg.metadata_max_age_ms}-{client_id}.properties"
    )
    if not path.exists():
        path.write_text(
            f"session.timeout.ms={cfg.session_timeout_ms}\n"
            f"heartbeat.interval.ms={cfg.heartbeat_interval_ms}\n"
            f"metadata.max.age.ms={cfg.metadata_max_age_ms}\n"
            f"client.id={client_id}\n"
        )
    return path


def client_id(kind: str, name: str) -> str:
    """The client id a member of this kind and name sends (kgctl join's default)."""
    return f"kgctl-{name}" if kind == "kgctl" else name


def command(
    kind: str,
    bootstrap: str,
    group: str,
    topics: list[str],
    name: str,
    cfg: MemberConfig,
    workdir: Path,
    java_libs: Path | None = None,
    extra: list[str] | None = None,
) -> list[str]:
    if kind == "kgctl":
        return [
            sys.executable,
            "-m",
            "kgctl",
            "join",
            "-b",
            bootstrap,
            "-g",
            group,
            *topics,
            "--name",
            name,
            "--session-timeout",
            str(cfg.session_timeout_ms),
            "--heartbeat-interval",
            str(cfg.heartbeat_interval_ms),
            "-X",
            f"metadata.max.age.ms={cfg.metadata_max_age_ms}",
            "--output",
            "json",
            *(extra or []),
        ]
    if kind == "kp":
        return [
            sys.executable,
            str(ROOT / "bench" / "kp_member.py"),
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            *[a for t in topics for a in ("--topic", t)],
            "--session-timeout",
            str(cfg.session_timeout_ms),
            "--heartbeat-interval",
            str(cfg.heartbeat_interval_ms),
            "--metadata-max-age",
            str(cfg.metadata_max_age_ms),
            "--client-id",
            client_id(kind, name),
        ]
    if kind == "java":
        assert java_libs is not None and len(topics) == 1
        return [
            "java",
            "-cp",
            f"{java_libs}/*",
            "org.apache.kafka.tools.VerifiableConsumer",
            "--bootstrap-server",
            bootstrap,
            "--group-id",
            group,
            "--topic",
            topics[0],
            "--session-timeout",
            str(cfg.session_timeout_ms),
            "--close-timeout",
            "2000",
            "--command-config",
            str(java_props(cfg, workdir, client_id(kind, name))),
        ]
    raise ValueError(kind)


def spawn(
    kind: str,
    bootstrap: str,
    group: str,
    topics: list[str],
    name: str,
    cfg: MemberConfig,
    workdir: Path,
    java_libs: Path | None = None,
    extra: list[str] | None = None,
    stderr_dir: Path | None = None,
) -> Member:
    cmd = command(kind, bootstrap, group, topics, name, cfg, workdir, java_libs, extra)
    err: Any = subprocess.DEVNULL
    if stderr_dir is not None:
        err = open(stderr_dir / f"{name}.err", "wb")  # noqa: SIM115
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        cwd=str(ROOT),
        env=env,
        preexec_fn=_die_with_parent,  # noqa: PLW1509
    )
    if err is not subprocess.DEVNULL:
        err.close()
    m = Member(kind, name, proc, int(time.time() * 1000))
    assert proc.stdout is not None
    m._reader = threading.Thread(target=m._read, args=(proc.stdout,), daemon=True)
    m._reader.start()
    return m


# -- /proc sampling -----------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_status(pid: int) -> dict[str, int]:
    """RSS (kB) and thread count of a live process; {} when it is gone."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_kb"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    except OSError:
        return {}
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (0.0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK
