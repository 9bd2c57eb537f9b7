"""Hostile input, table-driven over every command the CLI has.

Each case: exactly one line on stderr (`kgctl: error: ...` saying what is wrong and what
to do), its documented exit status, no traceback, done within --timeout (plus process
start-up), and nothing left running in the command's session. A command joins the table
by existing in the CLI: there is no skip.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgctl.cli.app import app

GRACE_S = 20.0  # interpreter and kafka-python start-up on a (very) loaded machine


def _commands() -> set[str]:
    names = {c.name for c in app.registered_commands}
    for group in app.registered_groups:
        sub = {c.name for c in group.typer_instance.registered_commands}
        names |= {f"{group.name} {s}" for s in sub}
    return names


COMMANDS = _commands()

# How each command is called with connection options (the "target" part of the line).
TARGETS: dict[str, list[str]] = {
    "join": ["join", "-g", "hostile-g", "hostile-t"],
    "watch": ["watch", "hostile-g", "--once"],
    "watch list": ["watch"],
    "chaos run": ["chaos", "run", "member-kill"],
}
# Commands whose input is local (broker up checks the shared options all the same).
LOCAL = {
    **TARGETS,
    "broker up": ["broker", "up"],
    "report": ["report", "REPORT_FILE"],
}


def available(name: str) -> bool:
    """In the CLI now ("watch list" is `watch` without a group)."""
    return (name.removesuffix(" list") if name == "watch list" else name) in COMMANDS


def cases() -> Iterator[object]:
    net = [n for n in ("join", "watch", "watch list", "chaos run") if available(n)]
    # `report` reads a file: it has no connection options.
    local = [*net, *(n for n in ("broker up",) if available(n))]
    for name in net:
        for label, server in (
            ("unreachable", "127.0.0.1:1"),
            ("not-kafka", "NOT_KAFKA"),
            ("unresolvable", "no-such-host.invalid:9092"),
        ):
            hint = {"unreachable": "refused", "not-kafka": "not answer as Kafka",
                    "unresolvable": "unknown host"}[label]  # fmt: skip
            yield pytest.param(
                name, ["-b", server, "--timeout", "3"], 3, hint, 3.0, id=f"{name}-{label}"
            )
    for name in local:
        yield pytest.param(name, ["-X", "foo"], 2, "expected key=value", 30.0, id=f"{name}-X")
        yield pytest.param(
            name, ["--command-config", "MALFORMED"], 2, "expected key=value", 30.0,
            id=f"{name}-malformed-config",
        )  # fmt: skip
        yield pytest.param(
            name, ["--command-config", "UNREADABLE"], 2, "cannot read it", 30.0,
            id=f"{name}-unreadable-config",
        )  # fmt: skip
        for value in ("0", "-1", "1e9"):
            yield pytest.param(
                name, ["--timeout", value], 2, "--timeout", 30.0, id=f"{name}-timeout{value}"
            )
    if available("chaos run"):
        yield pytest.param(
            "chaos run yaml", [], 2, "not valid YAML", 30.0, id="chaos-run-invalid-yaml"
        )
        yield pytest.param(
            "chaos run unknown", [], 4, "no such scenario", 30.0, id="chaos-run-unknown-scenario"
        )
    if available("report"):
        yield pytest.param("report", [], 2, "no kgctl events", 30.0, id="report-empty-file")
        yield pytest.param("report missing", [], 4, "no such file", 30.0, id="report-missing-file")
    if available("join"):
        for label, topic in (("space", "bad topic!"), ("long", "t" * 300)):
            yield pytest.param(
                f"join topic {topic}", [], 2, "not a legal Kafka topic name", 30.0,
                id=f"join-topic-{label}",
            )  # fmt: skip


@pytest.fixture(scope="module")
def not_kafka() -> Iterator[str]:
    """A local HTTP server: a port that accepts connections and does not speak Kafka."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _session_members(sid: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # the session id, not a zombie
            found.append(f"{entry.name} {cmd[:100]}")
    return found


def run_hostile(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> tuple:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgctl", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s + GRACE_S + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        pytest.fail(f"{argv} still running after {timeout_s + GRACE_S + 30:.0f} s: {err[-500:]}")
    elapsed = time.monotonic() - started
    time.sleep(0.2)
    left = _session_members(proc.pid)
    return proc.returncode, out, err, elapsed, left


@pytest.mark.parametrize(("command", "extra", "status", "hint", "timeout_s"), list(cases()))
def test_hostile_input(
    command: str,
    extra: list[str],
    status: int,
    hint: str,
    timeout_s: float,
    tmp_path: Path,
    not_kafka: str,
) -> None:
    malformed = tmp_path / "malformed.properties"
    malformed.write_text("security.protocol=SASL_SSL\nthis-line-has-no-value\n=\n")
    unreadable = tmp_path / "a-directory.properties"
    unreadable.mkdir()
    events = tmp_path / "events.jsonl"
    events.write_text("")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: [unclosed\n")
    if command == "chaos run yaml":
        argv = ["chaos", "run", str(bad_yaml)]
    elif command == "chaos run unknown":
        argv = ["chaos", "run", "no-such-scenario"]
    elif command == "report missing":
        argv = ["report", str(tmp_path / "missing.jsonl")]
    elif command.startswith("join topic "):
        argv = ["join", "-g", "hostile-g", command.removeprefix("join topic ")]
    else:
        argv = [*LOCAL[command]]
    argv = [a.replace("REPORT_FILE", str(events)) for a in argv]
    argv += [
        {"NOT_KAFKA": not_kafka, "MALFORMED": str(malformed), "UNREADABLE": str(unreadable)}.get(
            a, a
        )
        for a in extra
    ]
    env = dict(os.environ, KGCTL_STATE_DIR=str(tmp_path / "state"))
    env.pop("KGCTL_BOOTSTRAP_SERVER", None)
    code, out, err, elapsed, left = run_hostile(argv, env, tmp_path, timeout_s)
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{argv}: stderr is not one line:\n{err}"
    assert lines[0].startswith("kgctl: error: ") and "Traceback" not in err
    assert hint in lines[0], lines[0]
    assert code == status, f"{argv}: exit {code}, expected {status}: {lines[0]}"
    assert elapsed <= timeout_s + GRACE_S, f"{argv} took {elapsed:.1f} s"
    assert not left, f"{argv} left processes running: {left}"
    assert not (tmp_path / "state" / "broker.json").exists(), "a broker was started"


@pytest.mark.kafka
def test_session_timeout_outside_the_broker_bounds(bootstrap: str, tmp_path: Path) -> None:
    if not available("join"):
        return
    argv = ["join", "-g", "hostile-g", "hostile-t", "-b", bootstrap, "--session-timeout",
            "999999999", "--timeout", "10"]  # fmt: skip
    code, _out, err, elapsed, left = run_hostile(argv, dict(os.environ), tmp_path, 10)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "INVALID_SESSION_TIMEOUT" in lines[0], err
    assert "--session-timeout" in lines[0]
    assert code == 10 and elapsed <= 10 + GRACE_S and not left


@pytest.mark.kafka
def test_a_group_id_of_300_characters_works_or_fails_in_one_line(
    bootstrap: str, tmp_path: Path
) -> None:
    argv = ["watch", "g" * 300, "--once", "-b", bootstrap, "--timeout", "10"]
    code, _out, err, elapsed, left = run_hostile(argv, dict(os.environ), tmp_path, 10)
    assert code == 0 or len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and not left
