"""Pure tests of chaos across protocols: a fleet's protocol and client per member, what
each cannot do (one-line errors), the --group-protocol override, and Java's
VerifiableConsumer output read as kgctl events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kgctl.chaos.fit import fit_scenario
from kgctl.chaos.fleet import Fleet, MemberLaunch
from kgctl.chaos.java import java_command, java_event
from kgctl.chaos.journal import Journal, StepReport
from kgctl.chaos.scenario import ScenarioError, member_specs, parse_scenario, with_protocol
from kgctl.chaos.scenarios import builtin, builtin_names
from kgctl.chaos.showdown import Measure, compare, runs
from kgctl.errors import UsageError
from kgctl.model.bounds import GroupBounds
from kgctl.model.diagnosis import diagnose
from kgctl.model.fold import fold_all
from kgctl.model.state import GroupState
from kgctl.render.chaos_view import showdown_table
from kgctl.settings import ClientSettings

MIXED = """\
name: mixed
fleet:
  members:
    - {name: a}
    - {name: b, protocol: consumer, remote_assignor: range}
    - {name: j, client: java, protocol: consumer}
  topics: {orders: 6}
steps:
  - action: member-kill
    member: a
"""


def test_each_member_speaks_its_own_protocol_through_its_own_client() -> None:
    sc = parse_scenario(MIXED, "mixed.yaml")
    got = [(m.name, m.protocol, m.client, m.remote_assignor) for m in sc.fleet.members]
    assert got == [
        ("a", "classic", "kgctl", None),
        ("b", "consumer", "kgctl", "range"),
        ("j", "consumer", "java", None),
    ]
    assert sc.fleet.protocols == {"classic", "consumer"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("    - {name: b, protocol: kip848}", "expected one of classic, consumer, got 'kip848'"),
        ("    - {name: b, client: rust}", "expected one of kgctl, java, command, got 'rust'"),
        (
            "    - {name: b, remote_assignor: uniform}",
            "the broker-side assignor of the consumer protocol; set protocol: consumer",
        ),
        (
            "    - {name: b, client: java, pattern: 'o.*'}",
            "a java member (VerifiableConsumer) subscribes to exactly one topic, no pattern",
        ),
    ],
)
def test_a_member_that_cannot_be_run_so_is_one_error_at_its_line(change: str, message: str) -> None:
    text = MIXED.replace("    - {name: b, protocol: consumer, remote_assignor: range}", change)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "mixed.yaml")
    [error] = info.value.errors
    assert error.startswith("mixed.yaml:5:") and message in error
    assert "\n" not in str(info.value)


def test_a_fault_on_requests_no_targeted_member_sends_is_refused() -> None:
    text = """\
fleet:
  members: 2
  protocol: consumer
  topics: {orders: 2}
steps:
  - action: fault
    member: m1
    rule: Heartbeat:error=FENCED_INSTANCE_ID:count=1
"""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "f.yaml")
    assert str(info.value) == (
        "invalid scenario: f.yaml:6: steps[0] (fault): a fault on Heartbeat reaches only "
        "classic-protocol members; the members it targets speak consumer"
    )
    # The consumer protocol's own heartbeat is fine.
    parse_scenario(
        text.replace("Heartbeat:error=FENCED_INSTANCE_ID", "ConsumerGroupHeartbeat:delay=100")
    )


def test_control_lines_and_rebalance_counts_need_a_kgctl_member() -> None:
    text = """\
fleet:
  members: 2
  client: java
  topics: {orders: 2}
steps:
  - action: slow-consumer
    member: m1
  - action: member-add
    expect: {min_rebalances: 1}
"""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "j.yaml")
    first, second = info.value.errors
    assert "slow-consumer needs kgctl members" in first and "m1 run Java's" in first
    assert "rebalances are counted from the generations kgctl members report" in second


def test_the_override_puts_every_member_on_one_protocol_or_alternates_them() -> None:
    sc = builtin("member-kill")
    assert {m.protocol for m in sc.fleet.members} == {"classic"}
    assert {m.protocol for m in with_protocol(sc, "consumer").fleet.members} == {"consumer"}
    mixed = with_protocol(sc, "mixed").fleet.members
    assert [m.protocol for m in mixed] == ["classic", "consumer", "classic"]
    with pytest.raises(UsageError, match="expected one of classic, consumer, mixed"):
        with_protocol(sc, "new")


# Which built-ins cannot run on the consumer protocol, and why (docs/scenarios.md).
CLASSIC_ONLY = {
    "commit-during-rebalance": "runs on the classic protocol only",
    "static-conflict": "runs on the classic protocol only",
    "coordinator-flap": "a fault on JoinGroup reaches only classic-protocol members",
    "coordinator-partition": "a fault on Heartbeat reaches only classic-protocol members",
    "fenced-heartbeat": "a fault on Heartbeat reaches only classic-protocol members",
    "slow-sync": "a fault on SyncGroup reaches only classic-protocol members",
}


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_runs_on_consumer_unless_it_says_why_not(name: str) -> None:
    sc = builtin(name)
    if name in CLASSIC_ONLY:
        with pytest.raises(UsageError) as info:
            with_protocol(sc, "consumer")
        assert CLASSIC_ONLY[name] in str(info.value)
    else:
        assert {m.protocol for m in with_protocol(sc, "consumer").fleet.members} == {"consumer"}


def test_a_kgctl_member_is_told_its_protocol_and_a_java_one_gets_verifiable_consumer(
    tmp_path: Path,
) -> None:
    fleet = Fleet(ClientSettings(bootstrap="127.0.0.1:9092"), tmp_path)
    classic = fleet.command(MemberLaunch("m1", "g", topics=["t"]))
    assert "--group-protocol" not in classic  # classic stays kgctl join's default
    consumer = fleet.command(
        MemberLaunch("m2", "g", topics=["t"], protocol="consumer", remote_assignor="range")
    )
    i = consumer.index("--group-protocol")
    assert consumer[i : i + 4] == ["--group-protocol", "consumer", "--remote-assignor", "range"]
    cmd = java_command(
        "java",
        tmp_path,
        bootstrap="b:1",
        group="g",
        topic="t",
        protocol="consumer",
        properties=tmp_path / "p",
        assignors=["range"],
        session_timeout_ms=3000,
    )
    assert cmd[cmd.index("--group-protocol") + 1] == "CONSUMER"
    # The consumer protocol's session and assignor are the broker's: Java refuses them.
    assert "--session-timeout" not in cmd and "--assignment-strategy" not in cmd


def _line(name: str, **fields: object) -> str:
    return json.dumps({"name": name, "timestamp": 1000 + len(fields), **fields})


def test_verifiable_consumer_output_folds_like_a_kgctl_member() -> None:
    t0, t1 = {"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}
    batch = {"topic": "t", "partition": 1, "count": 5, "minOffset": 10, "maxOffset": 14}
    lines = [
        _line("startup_complete"),
        _line("partitions_assigned", partitions=[t0, t1]),
        _line("records_consumed", count=5, partitions=[batch]),
        _line("offsets_committed", success=True, offsets=[{**t1, "offset": 15}]),
        _line("partitions_revoked", partitions=[t0]),
        "not json: a log line",
        _line("shutdown_complete"),
    ]  # fmt: skip
    config = {"name": "j", "group": "g", "topics": ["t"], "group_protocol": "consumer"}
    events = [
        java_event(
            line, member="j", group="g", client_id="kgctl-j", pid=7, seq=i, now_ms=5, config=config
        )
        for i, line in enumerate(lines)
    ]
    assert [e.type if e else None for e in events] == [
        "MemberStarted",
        "PartitionsAssigned",
        "RecordsConsumed",
        "OffsetsCommitted",
        "PartitionsRevoked",
        None,
        "MemberStopped",
    ]
    consumed = events[2]
    assert consumed is not None
    assert consumed.data["batches"] == [
        {"topic": "t", "partition": 1, "first": 10, "last": 14, "count": 5}
    ]
    assert all(e.generation == -1 for e in events if e)  # it reports none; none is claimed
    # Its MemberStarted reads like a kgctl member's (`config`, `client`): the diagnosis
    # chaos runs on every step takes it.
    # It says it reports no generation: the fold does not wait for one.
    assert events[0] is not None
    assert events[0].data == {"config": config, "client": {}, "reports_generation": False}
    folded = [e for e in events[:4] if e]
    state = fold_all(GroupState("g"), folded, now_ms=2000)
    assert dict(state.members["j"].partitions) == {"t": (0, 1)}
    # A consumer-protocol member that reports no state of its own is Stable once its
    # assignment callback ran (chaos settles on that), and so is its group.
    assert (state.members["j"].protocol, state.members["j"].phase) == ("consumer", "Stable")
    assert not state.rebalancing
    # From a revocation to its next assignment callback it is on its way.
    state = fold_all(state, [events[4]] if events[4] else [], now_ms=2000)
    assert dict(state.members["j"].partitions) == {"t": (1,)}
    assert state.members["j"].phase == "Reconciling"
    assert list(diagnose(state, folded, 2000)) == []  # no generation reported, none judged


def _step(
    name: str,
    settle: int | None,
    unassigned: dict[str, int],
    moved: list[dict[str, Any]],
    status: str = "ok",
) -> StepReport:
    return StepReport(index=0, name=name, action="member-add", started_ms=0, settle_ms=settle,
                      unassigned_ms=unassigned, moved=moved, status=status)  # fmt: skip


def test_the_showdown_compares_each_step_on_each_protocol() -> None:
    classic = Journal("s", "r1", "g1", "b")
    consumer = Journal("s", "r2", "g2", "b")
    move = {"partition": "t-0", "from": ["m1"], "to": ["m2"]}
    new = {"partition": "t-9", "from": [], "to": ["m2"]}
    classic.steps = [_step("grow", 103_000, {"m1": 90_000, "m2": 100_000, "m3": 0}, [move, new])]
    consumer.steps = [_step("grow", 5_000, {"m1": 0, "m2": 0, "m3": 0}, [new])]
    [row] = compare({"classic": classic, "consumer": consumer})
    assert row.by_protocol["classic"] == Measure("ok", 103_000, 190_000, 100_000, 2, 1, 1)
    assert row.by_protocol["consumer"] == Measure("ok", 5_000, 0, 0, 0, 0, 1)
    console = Console(width=160, record=True)
    console.print(showdown_table([row], ["classic", "consumer"]))
    text = console.export_text()
    assert "1m43s" in text and "3m10s / 1m40s / 2" in text and "5.0s" in text and "1 +1" in text


def test_a_step_one_run_never_reached_is_shown_as_not_run() -> None:
    classic = Journal("s", "r1", "g1", "b")
    consumer = Journal("s", "r2", "g2", "b")
    classic.steps = [_step("a", 1000, {}, []), _step("b", 2000, {}, [])]
    consumer.steps = [_step("a", None, {}, [], status="not settled")]
    rows = compare({"classic": classic, "consumer": consumer})
    assert [r.step for r in rows] == ["a", "b"] and "consumer" not in rows[1].by_protocol
    console = Console(width=160, record=True)
    console.print(showdown_table(rows, ["classic", "consumer"]))
    text = console.export_text()
    assert "not settled" in text and "not run" in text


def test_the_showdown_builtin_runs_once_per_protocol_with_kgctl_and_java_members() -> None:
    sc = builtin("protocol-showdown")
    assert sc.compare_protocols
    both = runs(sc)
    assert list(both) == ["classic", "consumer"]
    assert all(not one.compare_protocols for one in both.values())
    specs = member_specs(both["consumer"])
    assert len(specs) == 30 and {s.client for s in specs.values()} == {"kgctl", "java"}


def test_a_consumer_fleet_stretches_its_limits_to_the_brokers_consumer_session() -> None:
    # member-kill allows 11 s for a 3 s session; a consumer group's session is the
    # broker's (Kafka's default 45 s), so its limit stretches in proportion.
    sc = with_protocol(builtin("member-kill"), "consumer")
    configs = {"group.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": 45000}
    fitted = fit_scenario(sc, GroupBounds.from_configs(configs))
    assert fitted.scenario.steps[0].expect.max_seconds == 165.0
    [change] = [a for a in fitted.adjustments if "max_seconds" in a.setting]
    assert "×15" in change.why
    # The classic fleet keeps its own session and limit.
    classic = fit_scenario(builtin("member-kill"), GroupBounds.from_configs(configs))
    assert classic.scenario.steps[0].expect.max_seconds == 11


def test_an_app_line_listing_a_partition_at_no_offset_commits_nothing_there() -> None:
    # A confluent-kafka program printing commit()'s result as it is: librdkafka lists
    # the partitions it had nothing to commit for at -1001, and sends none of them.
    line = json.dumps({
        "name": "offsets_committed", "success": True,
        "offsets": [{"topic": "t", "partition": 0, "offset": 215},
                    {"topic": "t", "partition": 5, "offset": -1001}],
    })  # fmt: skip
    event = java_event(line, member="m1", group="g", client_id="kgctl-m1", pid=7, seq=1, now_ms=5)
    assert event is not None and event.type == "OffsetsCommitted"
    assert event.data["offsets"] == {"t": {"0": 215}}
