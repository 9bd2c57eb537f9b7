"""Scenario validation (pure): typed model, every error at once with file:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgctl.chaos.scenario import ScenarioError, parse_scenario
from kgctl.chaos.scenarios import builtin, builtin_names, builtin_text
from kgctl.errors import ExitStatus, NotFoundError

GOOD = """\
name: mine
fleet:
  members: 3
  session_timeout_ms: 4000
  heartbeat_interval_ms: 400
  topics: {orders: 4}
steps:
  - action: member-kill
    member: m2
    expect: {rebalances: 1, max_seconds: 10, no_revokes_for: [m1]}
  - action: member-add
    count: 2
  - action: member-stop
    member: m5
"""


def test_a_valid_scenario_becomes_typed_steps() -> None:
    sc = parse_scenario(GOOD, "mine.yaml")
    assert [m.name for m in sc.fleet.members] == ["m1", "m2", "m3"]
    assert sc.fleet.topics == {"orders": 4}
    assert [s.action for s in sc.steps] == ["member-kill", "member-add", "member-stop"]
    assert sc.steps[0].expect.rebalances == 1
    assert sc.steps[0].expect.no_revokes_for == ["m1"]
    assert sc.steps[1].args["names"] == ["m4", "m5"]  # m5 exists for the later step


def test_every_error_is_reported_at_once_with_its_location() -> None:
    text = """\
fleet:
  members: 2
  session_timeout_ms: 3000
  heartbeat_interval_ms: 2000
  topics: {orders: 0}
  asignors: [range]
steps:
  - action: member-kil
    member: m1
  - action: partition-growth
    topic: payments
    to: 3
  - action: member-stop
    member: m9
    expect: {rebalances: many, max_secs: 3}
"""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "bad.yaml")
    errors = info.value.errors
    joined = "\n".join(errors)
    assert info.value.status == ExitStatus.USAGE
    assert "bad.yaml:4:26: fleet.heartbeat_interval_ms" in joined
    assert "bad.yaml:5:20: fleet.topics.orders: a topic needs at least 1 partition" in joined
    assert "bad.yaml:6:3: fleet: unknown key 'asignors'; did you mean 'assignors'?" in joined
    assert "bad.yaml:8:13: steps[0].action: unknown action 'member-kil'; did you mean" in joined
    assert "bad.yaml:11:12: steps[1].topic: unknown topic 'payments'" in joined
    assert "bad.yaml:14:13: steps[2].member: unknown member 'm9'" in joined
    assert "bad.yaml:15:26: steps[2].expect.rebalances: expected a whole number" in joined
    assert "bad.yaml:15:32: steps[2].expect: unknown key 'max_secs'" in joined
    assert len(errors) == 8
    # The message itself lists them all, one per line, for the CLI's one error.
    assert str(info.value).startswith("8 errors in the scenario:")


def test_partitions_only_grow_and_names_must_exist_in_order() -> None:
    text = """\
fleet: {members: 1, topics: {orders: 4}}
steps:
  - {action: partition-growth, topic: orders, to: 4}
  - {action: member-kill, member: m2}
  - {action: member-add}
  - {action: member-kill, member: m2}
  - {action: subscription-change, topics: [orders], pattern: "o.*"}
  - {action: wait}
"""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "order.yaml")
    joined = "\n".join(info.value.errors)
    assert "order.yaml:3:51: steps[0].to: must be more than 4" in joined
    assert "order.yaml:4:35: steps[1].member: unknown member 'm2'" in joined
    assert "steps[3]" not in joined  # m2 was added by the step before
    assert "order.yaml:7:5: steps[4]: subscription-change needs exactly one of" in joined
    assert "order.yaml:8:5: steps[5]: wait needs 'seconds' or 'until: stable'" in joined


def test_broken_yaml_and_missing_sections() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario("fleet: [unclosed\n", "x.yaml")
    assert info.value.errors[0].startswith("x.yaml:2:1: not valid YAML")
    with pytest.raises(ScenarioError) as info:
        parse_scenario("name: x\n", "y.yaml")
    assert info.value.errors == [
        "y.yaml:1:1: missing key 'fleet' (members, topics, timeouts)",
        "y.yaml:1:1: missing key 'steps' (a list of actions)",
    ]


def test_builtins_cover_the_issue_and_all_validate() -> None:
    names = builtin_names()
    for required in (
        "subscription-change partition-growth member-kill scale-out rolling-restart-static "
        "rolling-restart-dynamic slow-consumer coordinator-failover static-conflict tour"
    ).split():
        assert required in names
    for name in names:
        sc = builtin(name)
        assert sc.name == name
        assert sc.steps
        assert builtin_text(name).startswith(f"name: {name}\n")
    assert builtin("tour").fleet.brokers == 1
    assert builtin("coordinator-failover").fleet.brokers == 3


def test_unknown_builtin_is_not_found() -> None:
    with pytest.raises(NotFoundError, match="no built-in scenario 'nope'; built-ins: "):
        builtin_text("nope")


def test_commits_are_judged_in_time_order_not_arrival_order() -> None:
    from kgctl.chaos.checks import commit_violations

    tp = ("orders", 2)
    # m3 consumed to 34 and committed it at t=100 on revocation; m1, given the partition,
    # starts at 34 and commits 34 at t=150, but m1's event arrived first.
    arrived = [(150, "m1", tp, 34, 0), (100, "m3", tp, 34, 34)]
    assert commit_violations(arrived) == []
    # A commit past anything consumed or committed before it is still named.
    ahead = commit_violations([*arrived, (200, "m1", tp, 40, 0)])
    assert [(v[0], v[2], v[3]) for v in ahead] == [("commit-not-ahead", 200, "m1")]
    back = commit_violations([*arrived, (300, "m3", tp, 20, 34)])
    assert [(v[0], v[2]) for v in back] == [("commits-monotonic", 300)]


def test_a_fleet_that_does_not_fetch_is_said_and_cannot_produce() -> None:
    sc = parse_scenario(GOOD.replace("  topics:", "  fetch: false\n  topics:"), "mine.yaml")
    assert sc.fleet.fetch is False
    assert parse_scenario(GOOD, "mine.yaml").fleet.fetch is True
    with pytest.raises(ScenarioError) as err:
        parse_scenario(
            GOOD.replace("  topics:", "  fetch: false\n  produce_rate: 5\n  topics:"), "x.yaml"
        )
    assert "x.yaml:6" in str(err.value) and "fleet.fetch" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(
            GOOD.replace("  topics:", "  fetch: false\n  protocol: consumer\n  topics:"), "y.yaml"
        )
    assert "kgctl members of the classic protocol" in str(err.value)


def test_members_of_a_fleet_that_does_not_fetch_are_started_with_no_fetch(
    tmp_path: Path,
) -> None:
    from kgctl.chaos.fleet import Fleet, MemberLaunch
    from kgctl.settings import ClientSettings

    fleet = Fleet(ClientSettings(bootstrap="127.0.0.1:9092"), tmp_path)
    assert "--no-fetch" in fleet.command(MemberLaunch("m1", "g", ["t"], fetch=False))
    assert "--no-fetch" not in fleet.command(MemberLaunch("m1", "g", ["t"]))


def test_the_live_view_and_the_plain_lines_say_members_do_not_fetch() -> None:
    import io

    from rich.console import Console

    from kgctl.chaos.journal import Journal
    from kgctl.model.events import Event
    from kgctl.model.state import GroupState
    from kgctl.render.chaos_view import event_line, render_chaos, summary

    def screen(journal: Journal) -> str:
        console = Console(record=True, width=120, color_system=None, file=io.StringIO())
        console.print(render_chaos(journal, GroupState("g"), 0))
        return console.export_text()

    journal = Journal(scenario="mine", run_id="r", group="g", bootstrap="b:1")
    assert "do not fetch" not in screen(journal)
    journal.setup = {"fetch": False}
    assert "members do not fetch (fleet.fetch: false)" in screen(journal)
    started = Event(
        type="ScenarioStarted", ts_ms=1, mono_ms=1.0, seq=1, group="g", source="chaos",
        data={"scenario": "mine", "run_id": "r", "fetch": False},
    )  # fmt: skip
    assert "members do not fetch" in (event_line(started) or "")
    console = Console(record=True, width=120, color_system=None, file=io.StringIO())
    console.print(summary(journal))
    assert "members do not fetch" in console.export_text()
