"""App members (pure): the scenario's `client: command`, --app, placeholders, JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from kgctl.chaos.app import expand, parse_app, placeholders, wire_member_events
from kgctl.chaos.journal import Journal, StepReport, ViolationRecord
from kgctl.chaos.junit import junit_xml
from kgctl.chaos.scenario import ScenarioError, parse_scenario, with_app
from kgctl.errors import UsageError
from kgctl.model.events import Event

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


def test_a_command_without_client_command_and_an_app_on_the_consumer_protocol_are_refused() -> None:
    text = APP.replace("  client: command\n", "").replace(
        "    - name: a\n", "    - name: a\n      protocol: consumer\n      client: command\n"
    )
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "app.yaml")
    errors = info.value.errors
    assert any("fleet: command is for client: command members" in e for e in errors)
    assert any("fleet.members[0]: a command member is judged from the classic" in e for e in errors)


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
