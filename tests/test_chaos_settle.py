"""Pure tests of how a chaos run decides its group settled (kgctl/chaos/context.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kgctl.chaos.context import RunContext
from kgctl.model.state import GroupState


class Coordinator:
    """The broker's answers to "is the group rebalancing?", one per question."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers, self.asked = answers, 0

    def group_rebalancing(self, group: str) -> bool:
        self.asked += 1
        return self.answers.pop(0) if self.answers else False


def context(clients: list[str], coordinator: Coordinator) -> RunContext:
    specs = {f"m{i}": SimpleNamespace(client=c) for i, c in enumerate(clients, 1)}
    plan: Any = SimpleNamespace(
        scenario=None, group="g", topic_base="t", topics={}, partitions={}, specs=specs,
        subscriptions={}, quiet_ms=lambda: 0, consumer_timings=lambda: None,
    )  # fmt: skip
    resources: Any = SimpleNamespace(
        fleet=SimpleNamespace(running=lambda: True), admin=coordinator, producer=None,
        proxy=None, replication=1, settings=SimpleNamespace(bootstrap="b", timeout_s=30.0),
    )  # fmt: skip
    judge: Any = SimpleNamespace(
        excused={}, expected_fenced=set(), refused=None, group_stable=lambda state, gen: True
    )
    events: Any = SimpleNamespace(state=GroupState(group="g"), last_ts=1000, pump=lambda s: None)
    options: Any = SimpleNamespace(broker_state=None, tie_nodes_to_parent=False)
    return RunContext(plan, resources, judge, events, SimpleNamespace(), options)  # type: ignore[arg-type]


def test_an_app_fleet_is_not_settled_while_the_coordinator_still_rebalances() -> None:
    # An app member's JoinGroup is seen only when its answer passes the proxy: the
    # run's own view looked stable while the broker held that join (a by-hand run put
    # the rebalance on the next step). The coordinator is asked before settling.
    coordinator = Coordinator([True, True])
    assert context(["command", "command"], coordinator).settle(None, 5.0) == 1000
    assert coordinator.asked == 3


def test_a_fleet_of_kgctl_members_is_judged_from_their_own_events() -> None:
    coordinator = Coordinator([True])
    assert context(["kgctl", "kgctl"], coordinator).settle(None, 5.0) == 1000
    assert coordinator.asked == 0
