"""Pure tests of a chaos run's parts without processes or Kafka: the judge reading events
as the pump hands them over (kgctl/chaos/judge.py, pump.py), the actions' context
(context.py) and what cleanup deletes (resources.py).

The fleet is a real `Fleet` that never started a process; the admin client is a
stand-in that records what it was asked to delete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import mev, two_member_eager_history

from kgctl.chaos.context import RunContext
from kgctl.chaos.journal import Journal, StepReport
from kgctl.chaos.judge import Judge
from kgctl.chaos.options import RunOptions
from kgctl.chaos.plan import FleetPlan
from kgctl.chaos.pump import EventPump
from kgctl.chaos.resources import RunResources
from kgctl.chaos.scenario import parse_scenario
from kgctl.errors import SetupError
from kgctl.model.events import Event
from kgctl.settings import ClientSettings

SCENARIO = """
name: tiny
fleet:
  members: 2
  topics: {orders: 4}
steps:
  - action: wait
    seconds: 1
"""


@dataclass
class DeletingAdmin:
    """Records what cleanup deletes (ChaosAdmin's delete_topics, delete_group, close)."""

    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    closed: bool = False

    def delete_topics(self, topics: list[str]) -> None:
        self.topics += topics

    def delete_group(self, group: str) -> None:
        self.groups.append(group)

    def close(self) -> None:
        self.closed = True


@dataclass
class Run:
    plan: FleetPlan
    resources: RunResources
    journal: Journal
    events: EventPump
    judge: Judge
    seen: list[Event]

    def feed(self, *events: Event) -> None:
        """Events as the fleet's readers queue them, handled by the pump."""
        queue = self.resources.fleet.queue
        for ev in events:
            queue.put(("event", ev.member, ev))
        while not queue.empty():
            self.events.pump(0)  # at least one item each time

    def context(self) -> RunContext:
        return RunContext(
            self.plan, self.resources, self.judge, self.events, self.journal, RunOptions()
        )


@pytest.fixture
def run() -> Run:
    options = RunOptions(group="orders-app")  # the group of the helpers' events
    plan = FleetPlan.for_run(parse_scenario(SCENARIO), "r1", options)
    resources = RunResources(ClientSettings(bootstrap="localhost:9092"), options, "r1")
    journal = Journal("tiny", "r1", plan.group, "localhost:9092", topics=dict(plan.topics))
    seen: list[Event] = []
    events = EventPump(plan.group, resources.fleet, [seen.append])
    judge = Judge(journal, plan, resources.fleet, events.emit)
    events.before_fold = judge.read
    yield Run(plan, resources, journal, events, judge, seen)
    resources.close(plan)  # no admin: deletes nothing, removes the working directory


def consumed(ts: int, member: str, partition: int) -> Event:
    batch = {"topic": "t", "partition": partition, "first": 0, "last": 4}
    return mev("RecordsConsumed", ts, member, 2, batches=[batch])


def test_consuming_outside_the_assignment_is_charged_to_the_step_once(run: Run) -> None:
    run.feed(*two_member_eager_history())  # m1 owns t-0 and t-1, m2 t-2 and t-3
    run.judge.step = StepReport(0, "kill m2", "member-kill", started_ms=6000)
    run.feed(consumed(6100, "m1", 0), consumed(6200, "m2", 0), consumed(6300, "m2", 0))
    [v] = run.journal.violations
    assert (v.rule, v.step, v.members, v.partition) == (
        "consumed-outside-assignment",
        "kill m2",
        ["m2"],
        "t-0",
    )
    assert run.journal.invariants["consumed-outside-assignment"] == "violated"
    # The finding is one of the run's events, recorded before the event it judged.
    types = [e.type for e in run.seen[-4:]]
    assert types == ["RecordsConsumed", "InvariantViolated", "RecordsConsumed", "RecordsConsumed"]


def test_consumption_is_judged_at_its_own_time_not_when_its_line_arrived(run: Run) -> None:
    """An app member's lines come from its stdout, later than the proxy's events of the
    same moment: a record m1 consumed at 5100, while it owned t-2, arrives after the
    revocation of 5200 and m2's assignment of t-2 (a Java example run was charged so)."""
    run.feed(*two_member_eager_history())
    run.feed(consumed(5100, "m1", 2))
    assert run.journal.violations == []
    run.feed(consumed(5250, "m1", 2))  # after it gave t-2 up: outside, whenever it arrives
    [v] = run.journal.violations
    assert (v.rule, v.members, v.partition) == ("consumed-outside-assignment", ["m1"], "t-2")


def test_an_excused_member_consumes_its_stale_partitions_without_a_violation(run: Run) -> None:
    run.feed(*two_member_eager_history())
    run.judge.excused["m2"] = [(6000, None)]  # frozen, or cut off from its coordinator
    run.feed(consumed(6200, "m2", 0))
    assert run.journal.violations == []
    assert run.journal.invariants["consumed-outside-assignment"] == "held"


def test_only_a_member_failing_unexpectedly_is_a_violation(run: Run) -> None:
    run.judge.expected_fenced.add("m1")
    run.feed(
        mev("MemberFailed", 7000, "m1", error="FENCED_INSTANCE_ID", message="fenced"),
        mev("MemberFailed", 7100, "m2", error="UNKNOWN", message="boom"),
    )
    [v] = run.journal.violations
    assert (v.rule, v.members, v.step) == ("member-failed", ["m2"], "setup")
    assert v.message == "m2 failed: UNKNOWN: boom"


def test_a_refused_session_timeout_ends_the_wait_with_what_to_do(run: Run) -> None:
    run.feed(mev("JoinFailed", 1000, "m1", error="INVALID_SESSION_TIMEOUT"))
    with pytest.raises(SetupError, match="refused m1's session timeout of 6000 ms") as refused:
        run.context().settle(-1, 30)
    assert str(refused.value).endswith("pass --session-timeout MS within them")


def test_the_context_shares_the_plan_so_cleanup_deletes_a_topic_an_action_added(
    run: Run,
) -> None:
    ctx = run.context()
    late = ctx.topic_base + "late"
    ctx.add_topic("late", late, 2)
    ctx.subscriptions["m1"] = (["late"], None)
    assert run.journal.topics["late"] == late
    assert run.plan.produce_topics() == sorted([run.plan.topics["orders"], late])
    admin = DeletingAdmin()
    run.resources.admin = admin  # type: ignore[assignment]
    run.resources.created_topics = True  # the run made its topics...
    run.resources.owns_group = False  # ...but joined a group it did not create
    run.resources.close(run.plan)
    assert sorted(admin.topics) == sorted([run.plan.topics["orders"], late])
    assert admin.groups == [] and admin.closed
    assert not Path(run.resources.workdir).exists()


def test_cleanup_deletes_the_group_only_when_the_run_created_it(run: Run) -> None:
    admin = DeletingAdmin()
    run.resources.admin = admin  # type: ignore[assignment]
    run.resources.owns_group = True  # created_topics stays False: claim never got there
    run.resources.close(run.plan)
    assert admin.topics == [] and admin.groups == [run.plan.group]


def test_kept_topics_keep_the_group_too(run: Run) -> None:
    admin = DeletingAdmin()
    run.resources.admin = admin  # type: ignore[assignment]
    run.resources.options = RunOptions(keep_topics=True)
    run.resources.created_topics = run.resources.owns_group = True
    run.resources.close(run.plan)
    assert admin.topics == [] and admin.groups == [] and admin.closed
