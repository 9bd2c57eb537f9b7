"""App members (pure): the scenario's `client: command`, --app, placeholders, JUnit XML."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from types import SimpleNamespace
from typing import Any

import pytest

from kgctl.chaos import app_checks
from kgctl.chaos.app import expand, parse_app, placeholders, wire_member_events
from kgctl.chaos.journal import Journal, StepReport, ViolationRecord
from kgctl.chaos.junit import junit_xml
from kgctl.chaos.scenario import ScenarioError, parse_scenario, with_app
from kgctl.errors import UsageError
from kgctl.model.events import Event
from kgctl.model.state import GroupState

APP = """\
fleet:
  members:
    - name: a
    - name: b
      command: [./other, "{name}"]
  client: command
  command: [python, app.py, "{bootstrap}", "{group}", "{topics}", "{name}"]
  topics: {orders: 2, audit: 1}
steps:
  - action: member-kill
    member: a
"""


def test_a_command_fleet_runs_through_the_proxy_with_each_member_s_program() -> None:
    sc = parse_scenario(APP, "app.yaml")
    a, b = sc.fleet.members
    assert (a.client, a.command[:2], b.command) == (
        "command",
        ["python", "app.py"],
        ["./other", "{name}"],
    )
    assert sc.uses_proxy  # every step of the program is read from the wire


def test_placeholders_fill_the_command_and_unknown_ones_are_refused_with_their_line() -> None:
    values = placeholders(
        bootstrap="127.0.0.1:1", group="g", topics=["t1", "t2"], name="a", instance_id=None,
        client_id="kgctl-a",
    )  # fmt: skip
    assert expand(["x", "{bootstrap}", "{topics}", "--id={client_id}"], values) == [
        "x", "127.0.0.1:1", "t1,t2", "--id=kgctl-a",
    ]  # fmt: skip
    bad = APP.replace('"{name}"]\n  topics', '"{member}"]\n  topics')
    with pytest.raises(ScenarioError) as info:
        parse_scenario(bad, "app.yaml")
    assert str(info.value).startswith(
        "invalid scenario: app.yaml:7:12: fleet.command: unknown placeholder {member}"
    )


def test_a_command_without_client_command_is_refused_an_app_on_the_consumer_protocol_not() -> None:
    consumer = APP.replace("    - name: a\n", "    - name: a\n      protocol: consumer\n")
    assert parse_scenario(consumer, "app.yaml").fleet.members[0].protocol == "consumer"
    text = consumer.replace("  client: command\n", "").replace(
        "      protocol: consumer\n", "      protocol: consumer\n      client: command\n"
    )
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "app.yaml")
    errors = info.value.errors
    assert any("fleet: command is for client: command members" in e for e in errors)
    assert not any("protocol" in e for e in errors), errors


def test_a_consumer_protocol_app_s_topic_ids_are_named_by_the_run_s_topics() -> None:
    """Two topics: the one-subscribed-topic rule cannot name the ids; the run's own map
    does (it describes the topics it made)."""
    from kgctl.chaos.app import AppWire

    names = {"id-orders": "orders", "id-audit": "audit"}
    hb = Event(
        "ConsumerGroupHeartbeatTraced", 100, 0.0, 1, group="g", member="kgctl-a",
        client_id="kgctl-a", member_id="a-1", source="wire",
        data={"error": "NONE", "latency_ms": 2,
              "request": {"member_epoch": 0, "subscription": ["orders", "audit"], "owned": {}},
              "response": {"member_epoch": 1, "heartbeat_interval_ms": 500,
                           "assignment": {"id-orders": [0, 1], "id-audit": [0]}}},
    )  # fmt: skip
    wire = AppWire(lambda cid: "a" if cid == "kgctl-a" else None, names)
    [answered] = [e for e in wire.events(hb) if e.type == "GroupHeartbeatAnswered"]
    assert answered.member == "a"
    assert answered.data["assignment"] == {"audit": [0], "orders": [0, 1]}
    unnamed = AppWire(lambda cid: "a")
    [raw] = [e for e in unnamed.events(hb) if e.type == "GroupHeartbeatAnswered"]
    assert raw.data["assignment"] == {"id-audit": [0], "id-orders": [0, 1]}  # ids, not a guess


def test_app_replaces_every_command_member_s_program_or_makes_every_member_one() -> None:
    sc = parse_scenario(APP, "app.yaml")
    mine = with_app(sc, parse_app("java -jar my.jar {bootstrap}"))
    assert [m.command for m in mine.fleet.members] == [
        ["java", "-jar", "my.jar", "{bootstrap}"]
    ] * 2
    plain = parse_scenario(
        "fleet: {members: 2, topics: {t: 1}}\nsteps:\n  - {action: wait, seconds: 1}\n", "p.yaml"
    )
    assert {m.client for m in with_app(plain, ["./app"]).fleet.members} == {"command"}
    bare = parse_scenario(
        APP.replace(
            '  command: [python, app.py, "{bootstrap}", "{group}", "{topics}", "{name}"]\n', ""
        ),
        "app.yaml",
    )
    with pytest.raises(UsageError, match="members a are client: command without a command"):
        with_app(bare, None)
    with pytest.raises(UsageError, match="unknown placeholder"):
        parse_app("./app {bootstrp}")


def test_an_app_member_s_traced_steps_are_named_as_the_member() -> None:
    sync = Event(
        "SyncGroupTraced", 100, 0.0, 1, group="g", member="kgctl-a", client_id="kgctl-a",
        member_id="a-1", source="wire",
        data={"error": "NONE", "request": {"generation": 3},
              "response": {"assignment": {"t": [0]}}},
    )  # fmt: skip
    named = wire_member_events(sync, lambda cid: "a" if cid == "kgctl-a" else None)
    assert [(e.type, e.member) for e in named] == [("SyncGroupTraced", "a"), ("JoinCompleted", "a")]
    assert named[1].data["assignment"] == {"t": [0]}
    assert wire_member_events(sync, lambda cid: None) == [sync]  # not an app member: as is


def test_junit_has_a_case_per_step_and_per_invariant_with_the_failures() -> None:
    j = Journal("s", "r", "g", "b", started_ms=0, finished_ms=5000)
    j.steps = [
        StepReport(0, "kill", "member-kill", 0, finished_ms=2000, status="failed"),
        StepReport(1, "grow", "partition-growth", 2000, status="skipped"),
    ]
    j.add_violation(ViolationRecord("at-least-once", "3 records never consumed", 4000, "end"))
    j.add_violation(ViolationRecord("settled", "not stable", 1500, "kill", ["m1"]))
    j.held("exclusive-ownership")
    root = ET.fromstring(junit_xml(j))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == ["1. kill", "2. grow", "at-least-once", "exclusive-ownership", "settled"]
    assert cases["1. kill"].find("failure").get("message") == "not stable"  # type: ignore[union-attr]
    assert cases["2. grow"].find("skipped") is not None
    assert cases["exclusive-ownership"].find("failure") is None
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("5", "3", "1")


def test_an_eager_member_s_join_gives_up_what_its_last_sync_gave_it() -> None:
    from kgctl.chaos.app import AppWire

    def traced(type_: str, ts: int, **data: Any) -> Event:
        return Event(type_, ts, 0.0, ts, group="g", member="kgctl-a", client_id="kgctl-a",
                     source="wire", data={"error": "NONE", **data})  # fmt: skip

    sync = traced("SyncGroupTraced", 1, request={"generation": 1},
                  response={"assignment": {"t": [0, 1]}})  # fmt: skip
    namer = AppWire(lambda cid: "a")
    namer.events(sync)
    eager = namer.events(
        traced("JoinGroupTraced", 2, request={"protocols": ["range"]}, response={})
    )
    assert [e.type for e in eager] == ["JoinGroupTraced", "PartitionsRevoked", "JoinGroupSent"]
    assert eager[1].data == {"partitions": {"t": [0, 1]}}
    namer.events(sync)
    coop = namer.events(
        traced("JoinGroupTraced", 3, request={"protocols": ["cooperative-sticky"]}, response={})
    )
    assert "PartitionsRevoked" not in [e.type for e in coop]  # it keeps what does not move


def test_a_java_member_listing_cooperative_second_is_eager() -> None:
    """Java's default assignors are `range, cooperative-sticky`: the group chooses range,
    so its members give up everything at JoinGroup (a run of examples/apps/java showed a
    false exclusive-ownership violation while only listed protocols were looked at)."""
    from kgctl.chaos.app import AppWire

    def traced(type_: str, ts: int, **data: Any) -> Event:
        return Event(type_, ts, 0.0, ts, group="g", member="kgctl-a", client_id="kgctl-a",
                     source="wire", data={"error": "NONE", **data})  # fmt: skip

    sync = traced("SyncGroupTraced", 1, request={"generation": 1},
                  response={"assignment": {"t": [0, 1]}})  # fmt: skip
    java = {"protocols": ["range", "cooperative-sticky"]}
    for response in ({"protocol": "range"}, {}):  # answered, or not (MEMBER_ID_REQUIRED)
        namer = AppWire(lambda cid: "a")
        namer.events(sync)
        out = namer.events(traced("JoinGroupTraced", 2, request=java, response=response))
        assert "PartitionsRevoked" in [e.type for e in out]
    namer = AppWire(lambda cid: "a")
    namer.events(sync)
    chosen = namer.events(
        traced("JoinGroupTraced", 2, request=java, response={"protocol": "cooperative-sticky"})
    )
    assert "PartitionsRevoked" not in [e.type for e in chosen]


def wire(type_: str, member: str, ts: int, **data: Any) -> Event:
    return Event(type_, ts, 0.0, ts, group="g", member=member, source="wire", data=data)


def fetch(member: str, ts: int, first: int, last: int) -> Event:
    batches = {"t": {"0": {"hw": 20, "batches": [[first, last]]}}}
    return wire("FetchTraced", member, ts, partitions=batches)


def committed(member: str, ts: int, offset: int) -> Event:
    request = {"offsets": {"t": {"0": offset}}}
    return wire("OffsetCommitTraced", member, ts, error="NONE", request=request)


def judged(events: list[Event], produced: int) -> Journal:
    """A run of two app members, a and b, judged by app_checks.judge from `events`."""
    journal = Journal("s", "r", "g", "b", started_ms=0)
    apps = [
        SimpleNamespace(name=n, launch=SimpleNamespace(client="command"), proc=None, started_ms=0)
        for n in ("a", "b")
    ]
    run = SimpleNamespace(
        journal=journal,
        judge=SimpleNamespace(violation=lambda *a, **k: None, step_at=lambda ts: "setup"),
        events=SimpleNamespace(history=events),
        resources=SimpleNamespace(
            fleet=SimpleNamespace(history=apps), producer=SimpleNamespace(failed=0)
        ),
        state=GroupState("g"),
    )
    app_checks.judge(run, [("t", 0, o) for o in range(produced)])
    return journal


def summary_text(journal: Journal) -> str:
    from rich.console import Console

    from kgctl.render.chaos_view import summary

    console = Console(record=True, width=400, color_system=None, file=io.StringIO())
    console.print(summary(journal))
    return console.export_text()


def test_a_wire_judged_run_says_what_the_wire_fetched_not_that_nothing_was_consumed() -> None:
    """No records_consumed lines: what the programs processed is unknown; the Fetch
    answers say what reached them (b re-read 5..9 after a's kill: counted once)."""
    events = [
        fetch("a", 10, 0, 9), committed("a", 11, 5),
        fetch("b", 20, 5, 17), committed("b", 21, 18),
    ]  # fmt: skip
    journal = judged(events, produced=20)
    text = summary_text(journal)
    assert "0 consumed" not in text
    assert (
        "records: 20 produced, 18 fetched per the wire (distinct offsets in Fetch answers), "
        "2 never committed; consumed, missing and duplicates unknown (no records_consumed lines)"
    ) in text
    assert journal.setup["judge"] == app_checks.JUDGE_WIRE
    assert journal.records["fetched"] == 18 and journal.records["given"] == 23
    assert "consumed" not in journal.records  # unknown, not 0


def test_a_run_judged_by_the_apps_lines_says_its_consumed_count_comes_from_them() -> None:
    journal = Journal("s", "r", "g", "b", started_ms=0)
    journal.setup["judge"] = app_checks.JUDGE_RECORDS
    journal.records = {"produced": 20, "consumed": 22, "missing": 0, "duplicates": 2}
    assert (
        "records: 20 produced, 22 consumed per the members' VerifiableConsumer lines, "
        "0 missing, 2 duplicates"
    ) in summary_text(journal)


def test_a_program_chaos_stopped_is_no_error_one_that_died_or_was_killed_is() -> None:
    from kgctl.chaos.pump import silent_end
    from kgctl.model.timeline import counted_errors

    def ended(code: int | None, asked: bool) -> Event:
        return Event(type="MemberFailed", ts_ms=1, mono_ms=1, seq=1, group="g", member="m1",
                     source="chaos",
                     data=silent_end(code, asked))  # fmt: skip

    # A restart's SIGTERM: librdkafka's app closed and exited 0, or Python's default
    # handler ended it (-15): stopped as asked either way.
    for code in (0, -15, 1):
        assert list(counted_errors([ended(code, True)])) == [], code
        assert ended(code, True).data["stopped_as_asked"] is True
    # Escalated to SIGKILL after the grace, or an exit nobody asked for: an error.
    assert [e for _, e in counted_errors([ended(-9, True)])] == ["SIGKILL"]
    assert [e for _, e in counted_errors([ended(0, False)])] == ["exit 0"]
    assert [e for _, e in counted_errors([ended(-9, False)])] == ["SIGKILL"]
