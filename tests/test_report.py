"""`kgctl report`: the pure summary, the text/JSON/HTML views, and the page in Chromium.

tests/data/two_members_growth.jsonl was recorded from a REAL run against a real broker
(`python tests/recorder.py 127.0.0.1:19092 tests/data/two_members_growth.jsonl`): member
a joins a 4-partition topic, b joins, the topic grows to 6 partitions, b leaves on
SIGTERM, a stops. Every line is exactly what the two `kgctl join --output json` members
printed, merged by time.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgctl.cli.app import app
from kgctl.errors import ExitStatus
from kgctl.model.events import Event
from kgctl.render.html_report import render_html
from kgctl.report import build_report, load_report, parse_lines

DATA = Path(__file__).parent / "data"
RUN = DATA / "two_members_growth.jsonl"


def _events() -> list[Event]:
    events, skipped = parse_lines(RUN.read_text().splitlines())
    assert not skipped
    return events


def test_each_rebalance_has_its_cause_generations_duration_and_moves() -> None:
    report = load_report(RUN)
    rows = report.rebalances
    assert [r.generation for r in rows] == [1, 2, 3, 4]
    assert [r.previous_generation for r in rows] == [None, 1, 2, 3]
    assert [r.cause for r in rows] == [
        "member_joined",
        "member_joined",
        "partitions_changed",
        "member_left",
    ]
    assert not any(r.cause_guess for r in rows)  # the members said why
    assert rows[1].evidence == "b: first_join"
    assert "SIGTERM" in rows[3].evidence
    assert all(r.duration_ms is not None and r.duration_ms >= 0 for r in rows)
    # b waited in JoinGroup until a's next heartbeat told it to rejoin.
    assert rows[1].unassigned_ms["b"] == rows[1].duration_ms
    assert rows[1].join_ms is not None and rows[1].join_ms > 500
    assert rows[1].members == ("a", "b") and rows[3].members == ("a",)
    # 4 -> 6 partitions: a keeps 0,1 and gains 2; b goes 2,3 -> 3,4,5.
    moved = {(m.partition, m.before, m.after) for m in rows[2].moves}
    assert moved == {(2, ("b",), ("a",)), (4, (), ("b",)), (5, (), ("b",))}
    # a's heartbeat answered REBALANCE_IN_PROGRESS is how it learnt of it: not an error.
    assert [e.what for e in rows[1].errors] == []
    assert rows[0].errors == ()  # MEMBER_ID_REQUIRED is a normal step of a first join
    assert report.checks and not report.violations


def test_member_timelines_cover_ownership_and_phases() -> None:
    report = load_report(RUN)
    a, b = report.members
    assert (a.key, b.key) == ("a", "b")
    assert [s.count for s in a.ownership if s.count] == [4, 2, 3, 6]
    assert [s.count for s in b.ownership if s.count] == [2, 3]
    assert b.left_ms is not None and "SIGTERM" in b.left_reason
    assert {s.label for s in a.phases} >= {"JoinGroup", "SyncGroup", "Stable"}
    assert a.unassigned_ms == sum(s.end_ms - s.start_ms for s in a.ownership if s.count == 0)


def test_a_member_that_vanishes_is_a_timed_out_guess() -> None:
    events = _events()
    done = next(e for e in events if e.type == "JoinCompleted" and e.member == "b"
                and e.data["generation"] == 3)  # fmt: skip
    # As if b were SIGKILLed: nothing from b after it completed generation 3.
    cut = [e for e in events if not (e.member == "b" and e.seq > done.seq)]
    last = build_report(cut).rebalances[-1]
    assert (last.cause, last.cause_guess) == ("timed_out", True)
    assert "b stopped without a word" in last.evidence


def _a_also_claims_3(events: list[Event]) -> Event:
    """a's JoinCompleted of generation 3 again, claiming partition 3 too, while b owns it."""
    done = [e for e in events if e.type == "JoinCompleted" and e.generation == 3]
    a3 = next(e for e in done if e.member == "a")
    topic = next(iter(a3.data["assignment"]))
    data = {**a3.data, "assignment": {topic: [0, 1, 2, 3]}}
    return Event.from_dict({**a3.to_dict(), "seq": 999, "ts_ms": a3.ts_ms + 1, "data": data})


def test_double_ownership_is_a_violation() -> None:
    events = _events()
    report = build_report(events + [_a_also_claims_3(events)])
    rules = {v.rule for v in report.violations}
    assert "exclusive-ownership" in rules
    assert any(v.partition == 3 for v in report.violations)


def test_an_overlap_the_chaos_run_excused_is_not_reported_as_a_violation() -> None:
    # A chaos run that froze or cut off a member knows its ownership was stale and says
    # so in its ScenarioFinished; the report judges that recording as the run did.
    events = _events()
    forged = _a_also_claims_3(events)
    finished = Event(
        type="ScenarioFinished", ts_ms=events[-1].ts_ms + 10, mono_ms=0.0, seq=1,
        group=forged.group, source="chaos", data={"verdict": "passed", "excused": {}},
    )  # fmt: skip
    b_start = min(e.ts_ms for e in events if e.member == "b")

    def violations(excused: dict[str, list[list[int | None]]]) -> list[tuple[str, int | None]]:
        end = Event.from_dict({**finished.to_dict(), "data": {"excused": excused}})
        report = build_report([*events, forged, end])
        return [(v.rule, v.partition) for v in report.violations]

    assert ("exclusive-ownership", 3) in violations({})
    # b held partition 3 in its stale view from before a took it: excused, as chaos did.
    assert ("exclusive-ownership", 3) not in violations({"b": [[b_start, None]]})
    # Excused over another time, or another member: still a violation.
    assert ("exclusive-ownership", 3) in violations({"b": [[0, b_start - 1]]})
    assert ("exclusive-ownership", 3) in violations({"c": [[b_start, None]]})


def test_lines_that_are_not_events_are_skipped_and_counted() -> None:
    events, skipped = parse_lines(["not json", '{"type":"Nope"}', "", RUN.read_text()[:0]])
    assert events == [] and len(skipped) == 2


runner = CliRunner()


def test_cli_text_json_and_errors(tmp_path: Path) -> None:
    text = runner.invoke(app, ["report", str(RUN)], env={"COLUMNS": "160"})
    assert text.exit_code == 0, text.output
    assert "partitions changed" in text.output and "invariants: all" in text.output
    js = runner.invoke(app, ["report", str(RUN), "-o", "json"])
    assert js.exit_code == 0
    doc = json.loads(js.stdout)
    assert doc["generations"] == [1, 2, 3, 4]
    assert doc["rebalances"][3]["cause"] == "member_left"
    assert doc["invariants"]["passed"] is True
    missing = runner.invoke(app, ["report", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == int(ExitStatus.NOT_FOUND)
    junk = tmp_path / "junk.jsonl"
    junk.write_text("hello\n")
    assert runner.invoke(app, ["report", str(junk)]).exit_code == int(ExitStatus.USAGE)
    other = runner.invoke(app, ["report", str(RUN), "--group", "nope"])
    assert other.exit_code == int(ExitStatus.NOT_FOUND)


def test_html_is_self_contained() -> None:
    page = render_html(load_report(RUN))
    for marker in ('id="timeline-svg"', 'id="invariants"', 'id="events-table"'):
        assert marker in page
    # Nothing fetched: no scripts, stylesheets, images or fonts from anywhere.
    for needle in ("<script", "<link", "<img", "@import", "url(", "src="):
        assert needle not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


# -- the page in a real browser ---------------------------------------------------------

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture
def chromium() -> str:
    """Headless Chromium: `make test` installs it and sets KGCTL_REQUIRE_CHROMIUM=1, so
    there a missing browser fails; elsewhere (`make test-fast` on a laptop) it skips."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        if os.environ.get("KGCTL_REQUIRE_CHROMIUM") == "1":
            pytest.fail("headless Chromium is needed: apt-get install -y chromium")
        pytest.skip("no Chromium on this machine (apt-get install -y chromium; make test does)")
    return found


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) pixels of an 8-bit, non-interlaced PNG (stdlib)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


@pytest.mark.chromium
def test_html_renders_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    browser = chromium
    page = tmp_path / "report.html"
    page.write_text(render_html(load_report(RUN)), encoding="utf-8")
    png = tmp_path / "report.png"
    common = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    shot = subprocess.run(
        [*common, f"--screenshot={png}", "--window-size=1280,900", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.returncode == 0 and png.exists(), shot.stderr.decode(errors="replace")[-2000:]
    width, height, rows = _png_pixels(png.read_bytes())
    assert (width, height) == (1280, 900)
    bpp = len(rows[0]) // width
    colours: set[bytes] = set()
    coloured = 0
    for row in rows[::3]:
        for x in range(0, width * bpp, bpp * 3):
            px = row[x : x + 3]
            colours.add(px)
            coloured += px != b"\xff\xff\xff"
    sampled = len(rows[::3]) * len(range(0, width * bpp, bpp * 3))
    assert len(colours) > 20, "the screenshot is (nearly) one colour"
    assert coloured / sampled > 0.03, "the screenshot is nearly blank"
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()], capture_output=True, timeout=120, text=True
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert '<svg id="timeline-svg"' in html
    assert html.count('<g class="member-row"') == 2
    assert 'id="invariants"' in html and "All 9 checks passed." in html
    assert html.count("<tr class=") == 88 + 9  # every event, every invariant check


def test_a_rebalance_overtaken_by_the_next_reads_superseded_not_unstable() -> None:
    """In the recorded chaos member-kill run, generation 1 never settled: m2 joined and
    generation 2 began first. The run went on, so "not stable" (as if the recording ended
    mid-rebalance) would be untrue."""
    path = DATA / "chaos_member_kill.jsonl"
    report = load_report(path)
    first = report.rebalances[0]
    assert first.duration_ms is None and len(report.rebalances) > 1
    text = runner.invoke(app, ["report", str(path)], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    row = next(line for line in text.output.splitlines() if line.split()[:2] == ["1", "1"])
    assert "superseded" in row and "not stable" not in row
    assert "the next rebalance began before it was stable" in text.output
    assert "superseded" in render_html(report)


def test_a_watch_recording_of_librdkafka_clients_raises_no_false_ownership_violation() -> None:
    """`kgctl watch --record` of three cooperative librdkafka consumers (a fourth joins,
    then one is SIGKILLed), no kgctl member: the stored record says a generation stable
    a poll before a description shows who owns what. The audit's report said
    'complete-ownership: … has no live owner in a stable group' where every client's own
    callbacks and the next description showed every partition owned."""
    from kgctl.report.summary import build_report, parse_lines

    # Kept with the truth suite (tests/data holds kgctl's own recordings): librdkafka
    # members watched from the cluster alone; its gens 3, 5 and 7 are cooperative second
    # rounds (tests/test_wire_truth.py).
    path = Path(__file__).parent / "truth" / "data" / "watch_rdkafka_cooperative.jsonl"
    events, _ = parse_lines(path.read_text().splitlines())
    report = build_report(events)
    assert report.violations == ()
    judged = [c for c in report.checks if c.rule == "complete-ownership"]
    assert judged  # the stable generations were judged, once their owners were described
    # Who went without partitions, named as the other views name them (the audit: whole
    # member ids, a client id and a UUID each, over eight lines).
    named = {k for r in report.rebalances for k in r.unassigned_ms}
    assert named and named <= {"c1", "c2", "c3", "c4"}


def _renamed(events: list[Event], kind: str, key: str, old: str, new: str) -> list[Event]:
    """The events with `kind`'s data[key] == old said as `new`, as a newer kgctl or a
    newer member might name it."""
    return [
        Event.from_dict({**e.to_dict(), "data": {**e.data, key: new}})
        if e.type == kind and e.data.get(key) == old
        else e
        for e in events
    ]


def test_a_rejoin_reason_kgctl_does_not_know_is_the_rows_cause_by_its_own_name() -> None:
    """A newer member's rejoin reason names its cause as itself: the row's cause is
    `unknown` to the type, but the JSON and the text say the member's word."""
    said = "topic_grew_in_a_newer_client"
    events = _renamed(_events(), "RejoinRequested", "reason", "metadata_changed", said)
    report = build_report(events)
    row = report.rebalances[2]
    assert (row.cause.value, row.other_cause) == ("unknown", said)
    data = json.loads(json.dumps(report.to_dict()))
    assert [r["cause"] for r in data["rebalances"]] == [
        "member_joined",
        "member_joined",
        said,
        "member_left",
    ]
    assert data["rebalances"][2]["cause_guess"] is False
    assert f"a: {said}" in data["rebalances"][2]["evidence"]


def test_a_watch_recordings_cause_kgctl_does_not_know_reads_back_unchanged() -> None:
    """A recording of a newer `kgctl watch` may name a cause this kgctl does not list; its
    report writes that name back, and says no member named `unknown`."""
    path = Path(__file__).parent / "truth" / "data" / "watch_rdkafka_cooperative.jsonl"
    events, _ = parse_lines(path.read_text().splitlines())
    newer = "a_cause_from_a_newer_watch"
    before = build_report(events).to_dict()["rebalances"]
    for kind in ("GenerationChanged", "RebalanceAttributed"):
        events = _renamed(events, kind, "cause", "member_joined", newer)
    after = build_report(events).to_dict()["rebalances"]
    causes = [r["cause"] for r in before]
    assert "member_joined" in causes
    assert [r["cause"] for r in after] == [newer if c == "member_joined" else c for c in causes]
    assert "unknown" not in {r["cause"] for r in after} - {r["cause"] for r in before}
