"""Pure tests of the chaos judge (kgctl/chaos/verdict.py): a step's events in, its
verdict out, no Kafka; and one recorded run fed to chaos, report and watch.

tests/data/chaos_member_kill.jsonl is `kgctl chaos run member-kill --record` against a
real broker (3 members, m2 SIGKILLed, its partitions 2 and 3 handed to m1 and m3). Its
recorded step facts were edited once, by hand, when heartbeats answered
REBALANCE_IN_PROGRESS stopped counting as errors (m1 and m3 had one each).
"""

from __future__ import annotations

import io
from pathlib import Path

from helpers import FOLD_GROUP as G
from helpers import mev, two_member_eager_history
from rich.console import Console

from kgctl.chaos.scenario import Expect
from kgctl.chaos.verdict import (
    QuietTimer,
    StepFacts,
    cause_line,
    expectation_failures,
    recorded_steps,
    stable_now,
    step_facts,
    step_status,
)
from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.state import GroupState
from kgctl.render.group_view import fmt_ms, render_generations
from kgctl.report.summary import build_report, parse_lines

RECORDING = Path(__file__).parent / "data" / "chaos_member_kill.jsonl"


def cev(type_: str, ts: int, member: str = "", **data: object) -> Event:
    """An event kgctl chaos itself emits (a member's death it saw names the member)."""
    return Event(
        type=type_, ts_ms=ts, mono_ms=float(ts), seq=ts, group=G, member=member,
        source="chaos", data=data,
    )  # fmt: skip


def kill_m2_step() -> tuple[GroupState, list[Event]]:
    """Generation 2 (m1 t[0,1], m2 t[2,3]); at 6000 m2 is killed; m1 takes everything."""
    before = two_member_eager_history()
    step = [
        cev("StepStarted", 6000, step="kill m2", action="member-kill"),
        cev("ActionPerformed", 6000, members=["m2"], error="not a member's"),
        cev("MemberFailed", 6001, "m2", error="SIGKILL"),  # the process ended, seen by chaos
        mev("HeartbeatFailed", 8000, "m1", 2, error="REBALANCE_IN_PROGRESS"),
        mev("RejoinRequested", 8001, "m1", 2, reason="rebalance_in_progress"),
        mev("PartitionsRevoked", 8002, "m1", 2, partitions={"t": [0, 1]}),
        mev("JoinGroupSent", 8003, "m1", 2),
        mev("JoinGroupReceived", 8050, "m1", 3, leader="m1-id"),
        mev("JoinFailed", 8051, "m1", 3, error="MEMBER_ID_REQUIRED"),  # a normal answer
        mev("PartitionsAssigned", 8100, "m1", 3, partitions={"t": [0, 1, 2, 3]}),
        mev("JoinCompleted", 8100, "m1", 3),
    ]
    state = fold_all(GroupState(G), before + step, now_ms=9000)
    return state, step


def test_a_kill_step_says_what_moved_who_waited_and_why() -> None:
    state, events = kill_m2_step()
    facts = step_facts(
        state, events, action_ms=6000, end_ms=9000, baseline_generation=2, acted_on=["m2"]
    )
    assert facts.generations == [3] and facts.rebalances == 1
    assert facts.rejoin_reasons == {"rebalance_in_progress": ["m1"]}
    # MEMBER_ID_REQUIRED is the protocol's normal first answer, and a heartbeat answered
    # REBALANCE_IN_PROGRESS the rebalance's own signal: neither is an error.
    # Chaos's own events are not the group's, except a member's death it saw.
    assert facts.errors == {"m2": {"SIGKILL": 1}}
    assert facts.revoked == {"m1": 2}
    assert (
        facts.moved
        == [
            {"partition": "t-0", "from": ["m1"], "to": ["m1"]},
            {"partition": "t-1", "from": ["m1"], "to": ["m1"]},
            {"partition": "t-2", "from": ["m2"], "to": ["m1"]},
            {"partition": "t-3", "from": ["m2"], "to": ["m1"]},
        ][2:]
    )
    assert facts.affected == ["m1", "m2"]
    # m1 owned nothing from its revocation (8002) to its assignment (8100); m2 lived
    # until 6001 and owned its share all that time.
    assert facts.unassigned_ms == {"m1": 98, "m2": 0}
    assert cause_line("SIGKILL m2", facts.rejoin_reasons) == (
        "SIGKILL m2 → rebalance_in_progress (m1)"
    )


def test_expectations_name_what_did_not_hold() -> None:
    facts = StepFacts(generations=[3, 4], revoked={"m1": 2}, fenced=[])
    expect = Expect(
        rebalances=1, max_rebalances=1, max_seconds=2, no_revokes_for=["m1"], fenced=["m2"]
    )
    failures = expectation_failures(expect, facts, settle_ms=2500)
    assert [f.message for f in failures] == [
        "expected 1 rebalance(s), saw 2 (generations [3, 4])",
        "expected at most 1 rebalance(s), saw 2",
        "expected the group stable within 2s of the action, took 2.5s",
        "expected no revocation for m1, it lost 2 partition(s)",
        "expected m2 to be fenced (FENCED_INSTANCE_ID); it was not",
    ]
    assert failures[3].members == ("m1",)
    assert expectation_failures(Expect(min_rebalances=1), facts, settle_ms=None) == []
    never = expectation_failures(Expect(max_seconds=5), facts, settle_ms=None)
    assert [f.message for f in never] == [
        "expected the group stable within 5s of the action, took never"
    ]


def test_stable_needs_every_active_member_in_the_groups_newest_generation() -> None:
    state, _ = kill_m2_step()
    assert stable_now(state, ["m1"])
    assert stable_now(state, ["m1"], baseline_gen=2)
    assert not stable_now(state, ["m1"], baseline_gen=3)  # no generation after 3 yet
    assert not stable_now(state, ["m1", "m2"])  # m2 is dead
    assert not stable_now(state, [])


def test_settled_after_a_quiet_stretch_dated_from_its_start() -> None:
    timer = QuietTimer(quiet_ms=1000)
    assert timer.update(True, 0, ts_ms=500) is None
    assert timer.update(False, 400, ts_ms=600) is None  # a break starts it over
    assert timer.update(True, 500, ts_ms=700) is None
    assert timer.update(True, 1400, ts_ms=900) is None
    assert timer.update(True, 1500, ts_ms=950) == 700
    assert step_status(settled=True, failed=False) == "ok"
    assert step_status(settled=True, failed=True) == "failed"
    assert step_status(settled=False, failed=True) == "not settled"


def test_a_recorded_run_judged_again_gives_the_facts_it_recorded() -> None:
    events, skipped = parse_lines(RECORDING.read_text(encoding="utf-8").splitlines())
    assert not skipped
    (step,) = recorded_steps(events)
    assert step.name == "kill m2"
    for key in ("generations", "rejoin_reasons", "errors", "revoked", "moved", "affected"):
        assert getattr(step.facts, key) == step.recorded[key], key
    assert step.facts.unassigned_ms == step.recorded["unassigned_ms"]


def test_chaos_report_and_watch_agree_on_one_recording() -> None:
    """The kill step's rebalance: the same time without partitions in chaos's step, the
    report's row and watch's generations table, and the same moves in chaos and report."""
    events, _ = parse_lines(RECORDING.read_text(encoding="utf-8").splitlines())
    (step,) = recorded_steps(events)
    (generation,) = step.facts.generations

    report = build_report(events)
    (row,) = [r for r in report.rebalances if r.generation == generation]
    chaos_waited = {m: ms for m, ms in step.facts.unassigned_ms.items() if ms}
    assert chaos_waited and dict(row.unassigned_ms) == chaos_waited
    assert [
        {"partition": f"{m.topic}-{m.partition}", "from": list(m.before), "to": list(m.after)}
        for m in row.moves
    ] == step.facts.moved
    assert [mv["from"] for mv in step.facts.moved] == [["m2"], ["m2"]]  # the killed member

    # watch --replay: the group's events folded in file order, its generations table.
    group = report.group
    state = fold_all(GroupState(group), [e for e in events if e.group == group], report.last_ms)
    console = Console(record=True, width=200, color_system=None, file=io.StringIO())
    console.print(render_generations(state, report.last_ms, width=200, rows=10))
    text = console.export_text()
    (line,) = [ln for ln in text.splitlines() if ln.split()[:1] == [str(generation)]]
    shown = ", ".join(f"{m} {fmt_ms(ms)}" for m, ms in sorted(chaos_waited.items()))
    assert shown in line


def test_a_recorded_steps_cause_is_its_generations_diagnosis() -> None:
    """The kill step: its generation's trigger is the killed member's session timing out
    (exact: chaos itself sent the SIGKILL), and the group waited for it until then."""
    events, _ = parse_lines(RECORDING.read_text(encoding="utf-8").splitlines())
    (step,) = recorded_steps(events)
    (d,) = step.facts.diagnoses
    assert (d.trigger.who, d.trigger.cause, d.trigger.confidence) == ("m2", "timed_out", "exact")
    (wait,) = d.critical_path
    assert (wait.phase, wait.member) == ("detect", "m2") and 2000 <= wait.ms <= 3500
    line = cause_line("SIGKILL m2", step.facts.rejoin_reasons, step.facts.diagnoses)
    assert line.startswith("SIGKILL m2 → gen 3: m2: timed out; detect waited")


MIGRATION = Path(__file__).parent / "data" / "chaos_migrate_online.jsonl.gz"


def test_a_migrating_steps_report_says_where_the_group_changed_protocol() -> None:
    """Recorded: `kgctl chaos run migrate-online` (kgctl k1, k2 and Java j1, j2 rolled
    classic → consumer → classic, each restarted under its name). The step that rolled
    them onto the consumer protocol says the group became a consumer-protocol group when
    k1 came back on it (generation 5: k2 had led generation 4); the step back says it was
    classic again once j2, the last, left (generation 18: k1's JoinGroup answer named a
    leader). The steps that only produced say nothing of it. As explain says it."""
    import gzip

    from kgctl.chaos.journal import Journal
    from kgctl.model.diagnosis import diagnose
    from kgctl.render.chaos_view import event_line, summary

    events, _ = parse_lines(gzip.decompress(MIGRATION.read_bytes()).decode().splitlines())
    steps = recorded_steps(events)
    changes = {s.name: s.facts.protocol_changes for s in steps}
    [onto] = changes["roll every member onto the consumer protocol"]
    assert onto.startswith("generation 5: the group became a consumer-protocol group: k1 joined")
    [back] = changes["roll every member back onto classic"]
    assert back.startswith("generation 18: the group went back to the classic protocol: j2 was")
    assert "k1's JoinGroup answer named" in back
    assert changes["records on the consumer protocol"] == []
    assert changes["records on the classic protocol again"] == []
    # The same words as explain's, from the one diagnosis.
    report = build_report(events)
    explained = [d.protocol_change for d in diagnose(report.state, events, report.last_ms)]
    assert [c for c in explained if c] == [onto.split(": ", 1)[1], back.split(": ", 1)[1]]

    # The step report: the summary and the plain line of its StepFinished say it.
    (finished,) = [e for e in events if e.type == "ScenarioFinished"]
    journal = Journal.from_dict(finished.data["journal"])
    for step, s in zip(journal.steps, steps, strict=True):
        step.protocol_changes = s.facts.protocol_changes
    console = Console(record=True, width=100, color_system=None, file=io.StringIO())
    console.print(summary(journal))
    text = " ".join(console.export_text().split())
    assert "protocol changed at generation 5: the group became a consumer-protocol group" in text
    assert "protocol changed at generation 18: the group went back to the classic protocol" in text
    assert text.count("protocol changed at") == 2
    line = event_line(cev("StepFinished", 1, status="ok", protocol_changes=[onto]))
    assert line is not None and f"protocol changed at {onto}" in line
