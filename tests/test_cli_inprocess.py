"""Commands run in-process with their own streams (`main(argv, env=Env(...))`): every byte
a command writes goes through its environment object, so nothing here touches the
process's stdout or stderr."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path

import pytest

from kgctl.cli.app import main
from kgctl.cli.common import Env
from kgctl.errors import ExitStatus

RUN = Path(__file__).parent / "data" / "two_members_growth.jsonl"


def kgctl(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), env=Env(stdout=out, stderr=err))
    return status, out.getvalue(), err.getvalue()


def test_report_writes_text_and_json_to_the_given_streams(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # the width of a console that is not a terminal
    status, out, err = kgctl("report", str(RUN))
    assert status == 0, err
    assert "partitions changed" in out and "invariants: all" in out
    # rich pads table cells to the width: a file or a pipe gets no trailing blanks.
    assert [line for line in out.splitlines() if line.endswith(" ")] == []
    assert err == ""
    status, out, err = kgctl("report", str(RUN), "--output", "json")
    assert status == 0, err
    assert json.loads(out)["generations"] == [1, 2, 3, 4]
    # Nothing reached the process's own streams.
    assert capfd.readouterr() == ("", "")


def test_a_file_of_random_bytes_is_not_a_recording(tmp_path: Path) -> None:
    junk = tmp_path / "random.bin"
    junk.write_bytes(os.urandom(4096) + b"\xff\xfe\x00")
    status, out, err = kgctl("report", str(junk))
    assert status == int(ExitStatus.USAGE)
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"kgctl: error: {junk}: not a kgctl recording")


def test_a_gzipped_recording_reads_as_the_plain_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    packed = tmp_path / "run.jsonl.gz"
    packed.write_bytes(gzip.compress(RUN.read_bytes()))
    group = json.loads(RUN.read_text(encoding="utf-8").splitlines()[0])["group"]
    for argv in (
        ("report", "--output", "json"),
        ("explain", group, "--output", "json", "--recording"),
        ("watch", group, "--once", "--output", "json", "--speed", "0", "--replay"),
    ):
        plain = kgctl(*argv, str(RUN))
        assert plain[0] in (0, int(ExitStatus.UNHEALTHY)) and plain[1], (argv, plain)
        status, out, err = kgctl(*argv, str(packed))
        # (explain names its sources: the file's path)
        assert (status, out.replace(str(packed), str(RUN)), err) == plain, argv


def test_a_damaged_gzipped_recording_is_one_line_saying_so(tmp_path: Path) -> None:
    cut = tmp_path / "run.jsonl.gz"
    cut.write_bytes(gzip.compress(RUN.read_bytes())[:200])
    for argv in (("report",), ("watch", "g", "--speed", "0", "--replay")):
        status, out, err = kgctl(*argv, str(cut))
        assert status == int(ExitStatus.USAGE), (argv, err)
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert "a damaged gzip file" in err and "gzip -dc" in err


def test_report_has_no_connection_options(capfd: pytest.CaptureFixture[str]) -> None:
    # It reads a file: the options it used to accept "for symmetry" are gone.
    status, out, err = kgctl("report", str(RUN), "-b", "127.0.0.1:9092")
    assert status == int(ExitStatus.USAGE)
    # The usage error goes to the command's own stream, as every other error does.
    assert (
        out == ""
        and err == "kgctl: error: -b is not an option of kgctl report; see 'kgctl report -h'\n"
    )
    assert capfd.readouterr() == ("", "")


def test_broker_status_without_a_broker_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGCTL_STATE_DIR", str(tmp_path / "state"))
    status, out, err = kgctl("broker", "status")
    assert status == int(ExitStatus.ERROR)
    assert out == "not running (start it with: kgctl broker up)\n"
    assert err == ""
    status, out, _err = kgctl("broker", "status", "--output", "json")
    assert status == int(ExitStatus.ERROR) and json.loads(out)["running"] is False


def test_lines_written_in_pieces_lose_only_their_trailing_spaces() -> None:
    from kgctl.cli.base import _trimmed

    sink = io.StringIO()
    stream = _trimmed(sink)
    for piece in ("a  b   ", "  ", "c   \n", "   \n", "  d", "  \ne  "):
        stream.write(piece)
    assert sink.getvalue() == "a  b     c\n\n  d\ne"


def test_names_are_printed_as_given_not_read_as_markup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's names are its users' (client ids and group ids may hold any character):
    rich read "[/x]" in one as a closing tag and the command failed, "[bold]" and
    ":fire:" as styling. The report and the live view print them as they are."""
    from rich.console import Console

    from kgctl.model.events import Event
    from kgctl.model.fold import fold_many
    from kgctl.model.state import GroupState
    from kgctl.render import plain_console
    from kgctl.render.group_view import render_group

    monkeypatch.setenv("COLUMNS", "200")
    text = RUN.read_text(encoding="utf-8")
    text = text.replace('"member": "a"', '"member": "a[/x]"')
    text = text.replace('"member": "b"', '"member": "[bold]b:fire:"')
    odd = tmp_path / "odd_names.jsonl"
    odd.write_text(text, encoding="utf-8")
    status, out, err = kgctl("report", str(odd))
    assert status == 0, err
    assert "a[/x]: member joined" in out and "[bold]b:fire:: member joined" in out

    events = [Event.from_json(line) for line in text.splitlines() if line.strip()]
    state = fold_many(GroupState(events[0].group), ((e, e.ts_ms) for e in events))
    console = plain_console(record=True, width=160, height=50, file=io.StringIO())
    assert isinstance(console, Console)
    console.print(render_group(state, events[-1].ts_ms, width=160, height=50))
    shown = console.export_text()
    assert "a[/x]" in shown and "[bold]b:fire:" in shown
