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
from kgctl.chaos.java import READ_STAMPED, java_event
from kgctl.chaos.journal import Journal, StepReport
from kgctl.chaos.judge import READ_LATENCY_MS, Judge
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


def batch(member: str, ts: int, partition: int, first: int, last: int) -> Event:
    b = {"topic": "t", "partition": partition, "first": first, "last": last}
    return mev("RecordsConsumed", ts, member, 2, batches=[b])


def commit(member: str, ts: int, partition: int, offset: int, duration_ms: float = 3) -> Event:
    offsets = {"t": {str(partition): offset}}
    return mev("OffsetsCommitted", ts, member, 2, offsets=offsets, duration_ms=duration_ms)


def m2_frozen_then_replaced_by_m1() -> list[Event]:
    """m2 owns t-2 and commits 19; frozen at 6000, its session ends and m1 takes t-2 in
    generation 3 (from 12000)."""
    return [
        *two_member_eager_history(),  # m2 owns t-2 and t-3 from 5450
        batch("m2", 5500, 2, 0, 18),
        commit("m2", 5510, 2, 19),
        batch("m2", 5990, 2, 19, 19),
        mev("JoinGroupSent", 11900, "m1", 2),
        mev("JoinGroupReceived", 11950, "m1", 3, leader="m1-id"),
        mev("PartitionsAssigned", 12000, "m1", 3, partitions={"t": [0, 1, 2, 3]}),
        mev("JoinCompleted", 12000, "m1", 3),
    ]


def commit_rules(run: Run) -> list[tuple[str, str]]:
    run.judge.final_checks(run.events.state, None)
    return [(v.rule, v.message) for v in run.journal.violations]


def test_a_frozen_members_commit_answered_after_its_thaw_counts_when_it_was_sent(
    run: Run,
) -> None:
    """m2 sent its commit of 20 at 5995 and was frozen before the answer came (the broker
    took it then: m1 started t-2 from 20); thawed at 14000, it stamps its commit then,
    long after m1 moved on: a CI run of the pause scenario was failed so, twice."""
    run.judge.excused["m2"] = [(6000, 14000)]
    run.feed(
        *m2_frozen_then_replaced_by_m1(),
        commit("m1", 12100, 2, 20),  # its position: the committed offset it started from
        batch("m1", 12200, 2, 20, 93),
        commit("m1", 12210, 2, 94),
        commit("m2", 14005, 2, 20, duration_ms=8010),  # sent at 5995, before the freeze
    )
    assert commit_rules(run) == []
    assert run.journal.invariants["commit-not-ahead"] == "held"
    assert run.journal.invariants["commits-monotonic"] == "held"


def test_a_commit_ahead_of_what_its_member_consumed_still_fails(run: Run) -> None:
    run.judge.excused["m2"] = [(6000, 14000)]
    run.feed(
        *m2_frozen_then_replaced_by_m1(),
        commit("m1", 12100, 2, 30),  # nobody committed or consumed 20..29
        commit("m2", 14005, 2, 20, duration_ms=8010),
    )
    assert commit_rules(run) == [
        ("commit-not-ahead", "m1 committed t-2 at 30, ahead of its position 20")
    ]


def test_a_commit_sent_after_a_higher_one_landed_still_goes_backwards(run: Run) -> None:
    run.judge.excused["m2"] = [(6000, 14000)]
    run.feed(
        *m2_frozen_then_replaced_by_m1(),
        commit("m2", 5995, 2, 20),  # answered before the freeze
        commit("m1", 12100, 2, 20),
        batch("m1", 12200, 2, 20, 93),
        commit("m1", 12210, 2, 94),
        commit("m2", 14100, 2, 20, duration_ms=50),  # sent after its thaw, and accepted
    )
    [(rule, message)] = commit_rules(run)
    assert (rule, message) == ("commits-monotonic", "m2 committed t-2 at 20, behind 94")
    assert run.journal.violations[0].step == "setup"


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


def read_stamped(ts: int, member: str, partition: int) -> Event:
    """An app's RecordsConsumed line without a "timestamp", stamped when kgctl read it."""
    ev = consumed(ts, member, partition)
    ev.data[READ_STAMPED] = True
    return ev


def test_a_line_read_just_after_a_revoke_was_consumed_before_it(run: Run) -> None:
    """A confluent-kafka app's rolling restart: m2 committed at .778, the proxy saw its
    revoke at .780, and kgctl read its RecordsConsumed line (no timestamp) at .789."""
    run.feed(*two_member_eager_history())  # m1 gave t-2 up at 5200
    run.feed(read_stamped(5211, "m1", 2))
    assert run.journal.violations == []
    assert run.journal.invariants["consumed-outside-assignment"] == "held"


def test_a_read_stamped_line_of_a_partition_never_owned_still_fails(run: Run) -> None:
    run.feed(*two_member_eager_history())  # m2 never owned t-0
    run.feed(read_stamped(5460, "m2", 0))
    [v] = run.journal.violations
    assert (v.rule, v.members, v.partition) == ("consumed-outside-assignment", ["m2"], "t-0")


def test_a_read_stamped_line_long_after_the_revoke_still_fails(run: Run) -> None:
    run.feed(*two_member_eager_history())
    run.feed(read_stamped(5200 + READ_LATENCY_MS + 1, "m1", 2))
    [v] = run.journal.violations
    assert (v.rule, v.members, v.partition) == ("consumed-outside-assignment", ["m1"], "t-2")


def test_an_apps_line_is_stamped_with_its_own_timestamp_or_marked_read() -> None:
    line = '{"name": "records_consumed", "partitions": [], "count": 0'
    kw = {"member": "m1", "group": "g", "client_id": "c", "pid": 1, "seq": 1, "now_ms": 9000}
    own = java_event(line + ', "timestamp": 8990}', **kw)
    read = java_event(line + "}", **kw)
    assert own is not None and read is not None
    assert (own.ts_ms, READ_STAMPED in own.data) == (8990, False)
    assert (read.ts_ms, read.data.get(READ_STAMPED)) == (9000, True)
