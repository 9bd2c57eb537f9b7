"""Hostile input, table-driven over every command the CLI has (read from the typer
application, so a new command fails the matrix until it has its cases).

Each case: exactly one line (`kgctl: error: ...` on stderr saying what is wrong and what
to do; a plain status line for `broker status`/`broker down`), its documented exit
status, no traceback, done within --timeout (plus process start-up), and nothing left
running in the command's session.
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
from typing import Any

import pytest

from kgctl.cli.app import app

GRACE_S = 20.0  # interpreter and kafka-python start-up on a (very) loaded machine


def cli_commands() -> dict[str, set[str]]:
    """Every command of the CLI (`broker up`, `chaos run`, ...) with its option names,
    read from the typer application itself."""
    import typer.main

    found: dict[str, set[str]] = {}

    def walk(command: Any, path: str) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{path} {name}".strip())
            return
        found[path] = {opt for p in command.params for opt in p.opts}

    walk(typer.main.get_command(app), "")
    return found


COMMANDS = cli_commands()

# How each command is called: every command of the CLI must be here (a test checks it),
# so a new command joins the matrix or fails it.
CALLS: dict[str, list[str]] = {
    # member-kill: the tour grows partitions, refused off loopback before any connection.
    "demo": ["demo", "--scenario", "member-kill", "--out-dir", "demo-out"],
    "join": ["join", "-g", "hostile-g", "hostile-t"],
    "report": ["report", "REPORT_FILE"],
    "watch": ["watch", "hostile-g", "--once"],
    "broker up": ["broker", "up"],
    "broker down": ["broker", "down"],
    "broker status": ["broker", "status"],
    "broker logs": ["broker", "logs"],
    "chaos list": ["chaos", "list"],
    "chaos show": ["chaos", "show", "tour"],
    "chaos run": ["chaos", "run", "member-kill"],
    "proxy": ["proxy", "--listen", "127.0.0.1:0"],
    "explain": ["explain", "hostile-g"],
    # A long-running service: it retries an unreachable cluster (a metric says so), so it
    # is not in CONNECTS; its bad options fail before it connects.
    "monitor": ["monitor"],
}
# Commands that connect to the cluster given with -b ("watch list" is `watch` without
# a group).
CONNECTS = {"demo", "join", "watch", "watch list", "chaos run", "proxy", "explain"}
# Input that only one command takes: (command, its arguments, exit status, hint, where
# the line goes, id). The broker commands run with an empty state dir: no broker.
OWN: list[tuple[str, list[str], int, str, str, str]] = [
    ("demo", ["demo", "--scenario", "no-such-scenario"], 4, "no such scenario", "stderr",
     "demo-unknown-scenario"),
    ("demo", ["demo", "--out-dir", "A_FILE/out"], 2, "cannot create it", "stderr",
     "demo-out-dir-under-a-file"),
    ("report", ["report", "REPORT_FILE"], 2, "no kgctl events", "stderr", "report-empty-file"),
    ("report", ["report", "MISSING"], 4, "no such file", "stderr", "report-missing-file"),
    ("broker up", ["broker", "up", "--brokers", "2"], 2, "only 1 or 3", "stderr",
     "broker-up-2-brokers"),
    ("broker down", ["broker", "down"], 0, "no local Kafka was running", "stderr",
     "broker-down-none-running"),
    ("broker status", ["broker", "status"], 1, "not running (start it with: kgctl broker up)",
     "stdout", "broker-status-none-running"),
    ("broker logs", ["broker", "logs"], 6, "no local Kafka was started", "stderr",
     "broker-logs-none-running"),
    ("chaos show", ["chaos", "show", "no-such-scenario"], 4, "no built-in scenario", "stderr",
     "chaos-show-unknown"),
    ("chaos run", ["chaos", "run", "BAD_YAML"], 2, "not valid YAML", "stderr",
     "chaos-run-invalid-yaml"),
    ("chaos run", ["chaos", "run", "no-such-scenario"], 4, "no such scenario", "stderr",
     "chaos-run-unknown-scenario"),
    ("proxy", ["proxy", "--listen", "nonsense", "-b", "127.0.0.1:1"], 2, "expected HOST:PORT",
     "stderr", "proxy-listen-not-an-address"),
    ("proxy", ["proxy", "--fault", "bogus", "-b", "127.0.0.1:1"], 2, "expected API:EFFECT",
     "stderr", "proxy-fault-rule-malformed"),
    ("watch", ["watch", "hostile-g", "--replay", "MISSING"], 4, "no such file", "stderr",
     "watch-replay-missing-file"),
    ("explain", ["explain", "hostile-g", "--recording", "MISSING"], 4, "no such file",
     "stderr", "explain-missing-recording"),
    ("join", ["join", "-g", "hostile-g", "bad topic!"], 2, "not a legal Kafka topic name",
     "stderr", "join-topic-space"),
    ("join", ["join", "-g", "hostile-g", "t" * 300], 2, "not a legal Kafka topic name",
     "stderr", "join-topic-long"),
    ("monitor", ["monitor", "--groups", "("], 2, "not a regular expression", "stderr",
     "monitor-groups-not-a-regex"),
]  # fmt: skip


def network_cases(label: str, argv: list[str]) -> Iterator[object]:
    """A cluster that refuses, one that is not Kafka, a host that does not resolve."""
    network = [
        ("unreachable", "127.0.0.1:1", "refused"),
        ("not-kafka", "NOT_KAFKA", "not answer as Kafka"),
        ("unresolvable", "no-such-host.invalid:9092", "unknown host"),
    ]
    for kind, server, hint in network:
        yield pytest.param(
            [*argv, "-b", server, "--timeout", "3"], 3, hint, "stderr", 3.0,
            id=f"{label}-{kind}",
        )  # fmt: skip


def cases() -> Iterator[object]:
    for name, options in sorted(COMMANDS.items()):
        if name not in CALLS:
            continue  # test_every_command_of_the_cli_is_in_the_matrix says so
        used = options
        calls = [(name, CALLS[name])]
        if name == "watch":
            calls.append(("watch list", ["watch"]))
        for label, argv in calls:
            if label in CONNECTS and "--bootstrap-server" in used:
                yield from network_cases(label, argv)
        if "-X" in used:
            yield pytest.param(
                [*CALLS[name], "-X", "foo"], 2, "expected key=value", "stderr", 30.0,
                id=f"{name}-X",
            )  # fmt: skip
        if "--command-config" in used:
            for what, value, hint in (
                ("malformed", "MALFORMED", "expected key=value"),
                ("unreadable", "UNREADABLE", "cannot read it"),
            ):
                yield pytest.param(
                    [*CALLS[name], "--command-config", value], 2, hint, "stderr", 30.0,
                    id=f"{name}-{what}-config",
                )  # fmt: skip
        if "--timeout" in used:
            # broker down's --timeout is a grace before SIGKILL: 0 is "at once".
            for value in ("-1", "1e9") if name == "broker down" else ("0", "-1", "1e9"):
                yield pytest.param(
                    [*CALLS[name], "--timeout", value], 2, "--timeout", "stderr", 30.0,
                    id=f"{name}-timeout{value}",
                )  # fmt: skip
    for _name, argv, status, hint, stream, case_id in OWN:
        yield pytest.param(argv, status, hint, stream, 30.0, id=case_id)
    # A value the option parser (click) rejects: exit 2 and kgctl's one line naming it.
    for name, options in sorted(COMMANDS.items()):
        if "--output" in options and name in CALLS:
            yield pytest.param(
                [*CALLS[name], "--output", "yaml"], 2, "'yaml' is not one of", "stderr", 30.0,
                id=f"{name}-output-yaml",
            )  # fmt: skip


def test_every_command_of_the_cli_is_in_the_matrix() -> None:
    assert set(CALLS) == set(COMMANDS), set(CALLS) ^ set(COMMANDS)
    # ... and each has at least one case of its own or of the shared options.
    ids = {p.id for p in cases()}  # type: ignore[attr-defined]
    for name in COMMANDS:
        own = {case_id for command, *_, case_id in OWN if command == name}
        shared = {i for i in ids if i.startswith(f"{name}-")}
        assert own | shared, f"{name} has no hostile-input case"


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
    # Children tied to the command (PR_SET_PDEATHSIG) are signalled as it exits and need
    # a moment to go; one still there after two seconds was left running.
    deadline = time.monotonic() + 2
    while (left := _session_members(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.returncode, out, err, elapsed, left


@pytest.mark.parametrize(("argv", "status", "hint", "stream", "timeout_s"), list(cases()))
def test_hostile_input(
    argv: list[str],
    status: int,
    hint: str,
    stream: str,
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
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    placeholders = {
        "NOT_KAFKA": not_kafka,
        "MALFORMED": str(malformed),
        "UNREADABLE": str(unreadable),
        "REPORT_FILE": str(events),
        "MISSING": str(tmp_path / "missing.jsonl"),
        "BAD_YAML": str(bad_yaml),
    }
    argv = [placeholders.get(a, a).replace("A_FILE", str(a_file)) for a in argv]
    env = dict(os.environ, KGCTL_STATE_DIR=str(tmp_path / "state"))
    env.pop("KGCTL_BOOTSTRAP_SERVER", None)
    code, out, err, elapsed, left = run_hostile(argv, env, tmp_path, timeout_s)
    said = out if stream == "stdout" else err
    lines = said.strip().splitlines()
    assert len(lines) == 1, f"{argv}: {stream} is not one line:\n{said}"
    if stream == "stderr" and status != 0:
        assert lines[0].startswith("kgctl: error: "), lines[0]
    if stream == "stdout":
        assert not err.strip(), err
    assert "Traceback" not in out + err
    assert hint in lines[0], lines[0]
    assert code == status, f"{argv}: exit {code}, expected {status}: {lines[0]}"
    assert elapsed <= timeout_s + GRACE_S, f"{argv} took {elapsed:.1f} s"
    assert not left, f"{argv} left processes running: {left}"
    assert not (tmp_path / "state" / "broker.json").exists(), "a broker was started"


@pytest.mark.kafka
def test_session_timeout_outside_the_broker_bounds(bootstrap: str, tmp_path: Path) -> None:
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
