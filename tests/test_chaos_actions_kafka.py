"""Chaos against a real broker, run in this process through the library entry point:
`member-pause` / `member-resume` (SIGSTOP past the session timeout, then SIGCONT), and
records lost on purpose, which the at-least-once invariant must call VIOLATED."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import pytest

from kgctl.chaos.journal import Journal
from kgctl.chaos.runner import RunOptions, run_scenario
from kgctl.chaos.scenario import parse_scenario
from kgctl.errors import ExitStatus
from kgctl.model.events import Event
from kgctl.settings import ClientSettings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, TopicPartition

pytestmark = pytest.mark.kafka

# m2 frozen longer than its session timeout: the broker gives its partition to m1; once
# thawed, m2 finds itself out of the group and joins again.
PAUSE_RESUME = """\
name: pause-resume
description: m2 frozen past its session timeout, then thawed
fleet:
  members: 2
  assignors: [range]
  session_timeout_ms: 6000
  heartbeat_interval_ms: 500
  topics: {orders: 2}
  produce_rate: 20
  commit: sync
steps:
  - name: freeze m2
    action: member-pause
    member: m2
    expect: {min_rebalances: 1, max_seconds: 20}
  - name: thaw m2
    action: member-resume
    member: m2
    expect: {min_rebalances: 1, max_seconds: 20}
"""


def run(text: str, bootstrap: str, sink: Any = None) -> tuple[Journal, list[Event]]:
    seen: list[Event] = []

    def on_event(event: Event) -> None:
        seen.append(event)
        if sink is not None:
            sink(event)

    journal = run_scenario(
        parse_scenario(text),
        ClientSettings(bootstrap=bootstrap, timeout_s=15),
        # Records that will never come need no 20 s of waiting for them.
        options=RunOptions(drain_timeout_s=3),
        on_event=on_event,
    )
    return journal, seen


def explain(journal: Journal) -> str:
    return repr({"verdict": journal.verdict, "error": journal.error,
                 "violations": journal.violations, "records": journal.records})  # fmt: skip


def test_a_member_frozen_past_its_session_is_replaced_then_rejoins(bootstrap: str) -> None:
    journal, events = run(PAUSE_RESUME, bootstrap)
    assert journal.verdict == "passed", explain(journal)
    assert journal.exit_status == ExitStatus.OK
    freeze, thaw = journal.steps
    assert freeze.cause.startswith("SIGSTOP m2") and thaw.cause.startswith("SIGCONT m2 after")
    assert freeze.status == thaw.status == "ok"
    # Frozen: m1 took both partitions in a new generation.
    assert freeze.generations and thaw.generations
    assert any(mv["to"] == ["m1"] and mv["from"] == ["m2"] for mv in freeze.moved), freeze.moved
    # Thawed: m2 learnt it was out of the group and joined again, owning a partition.
    m2 = [e for e in events if e.member == "m2" and e.ts_ms >= thaw.action_ms]
    assert any(e.type == "JoinGroupSent" for e in m2)
    assert any(e.type == "JoinCompleted" and e.data.get("assignment") for e in m2)
    paused_ms = thaw.details["paused_ms"]
    assert paused_ms >= 6000, thaw.details
    # Nothing produced was lost and m1's overlap with frozen m2 was excused, not a
    # double owner.
    assert journal.records["missing"] == 0 and journal.records["consumed"] > 0
    assert journal.invariants["exclusive-ownership"] == journal.invariants["at-least-once"]
    assert journal.invariants["at-least-once"] == "held"


def test_records_deleted_before_anyone_consumed_them_violate_at_least_once(
    bootstrap: str, admin: Any
) -> None:
    owned: dict[str, list[int]] = {}
    deleted: dict[int, int] = {}
    topic: list[str] = []
    timers: list[threading.Timer] = []

    def delete_unconsumed() -> None:
        tps = [TopicPartition(topic[0], p) for p in owned["m2"]]
        reader = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            ends = reader.end_offsets(tps)
        finally:
            reader.close()
        admin.delete_records(ends)
        deleted.update({tp.partition: end for tp, end in ends.items()})

    def sabotage(event: Event) -> None:
        if event.type == "ScenarioStarted":
            topic.append(event.data["topics"]["orders"])
        if event.type == "JoinCompleted":
            owned[event.member] = event.data.get("assignment", {}).get(topic[0], [])
        if event.type == "ActionPerformed" and event.data["action"] == "member-pause":
            # m2 is frozen: nobody consumes its partition until the broker hands it to m1,
            # which cannot happen before m2's 6 s session expires. Half-way there, the
            # records produced since the freeze are deleted: m1 starts after them.
            # (A timer, not an event: the runner sees m1's rebalance events only after m1
            # acted on them, too late to delete anything before it fetched.)
            timer = threading.Timer(3.0, delete_unconsumed)
            timers.append(timer)
            timer.start()

    try:
        journal, _ = run(PAUSE_RESUME, bootstrap, sabotage)
    finally:
        for timer in timers:
            timer.cancel()
            timer.join()
    assert deleted, "the sabotage never ran"
    assert journal.verdict == "failed" and journal.exit_status == ExitStatus.INVARIANT_FAILED
    # Records were lost, and that is all that went wrong. m1 resumed the partition at
    # the new log start: if it committed there before it consumed a record of it, the
    # commit check sees the same jump (a commit ahead of what was processed).
    rules = {v.rule for v in journal.violations}
    assert "at-least-once" in rules and rules <= {"at-least-once", "commit-not-ahead"}, explain(
        journal
    )
    deleted_partitions = {f"{topic[0]}-{p}" for p in deleted}
    assert all(v.partition in deleted_partitions for v in journal.violations), explain(journal)
    [lost] = [v for v in journal.violations if v.rule == "at-least-once"]
    assert lost.step == "end"
    assert "produced record(s) never consumed" in lost.message
    assert journal.records["missing"] > 0
    assert journal.invariants["at-least-once"] == "violated"
