"""`RunContext`: the `ActionContext` (kgctl/chaos/actions.py) of a real run.

Built once the run is set up, so everything an action may use exists: the fleet and
the clients from `RunResources`, the plan's dicts (the same objects: a topic an action
adds or a subscription it changes is the run's), the judge's excuses and findings, and
waiting, which keeps the event pump going and the state folded. Waiting for the group
to settle is here because actions wait for it too (a rolling restart, one member at a
time) and the runner's steps and setup wait for it the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kgctl.adapters.chaos import ChaosAdmin, NumberedProducer
from kgctl.chaos import verdict
from kgctl.chaos.fleet import Fleet, MemberLaunch
from kgctl.chaos.journal import Journal
from kgctl.chaos.judge import Judge
from kgctl.chaos.options import RunOptions
from kgctl.chaos.plan import FleetPlan, Subscription
from kgctl.chaos.pump import EventPump, now_ms
from kgctl.chaos.resources import RunResources
from kgctl.chaos.scenario import MemberSpec, Scenario
from kgctl.model.state import GroupState
from kgctl.proxy.runner import ProxyThread


class RunContext:
    """What an action may use of a run, and how the run waits for its group."""

    def __init__(
        self,
        plan: FleetPlan,
        resources: RunResources,
        judge: Judge,
        events: EventPump,
        journal: Journal,
        options: RunOptions,
    ) -> None:
        self._plan, self._judge, self._events, self._journal = plan, judge, events, journal
        self._resources = resources
        self.scenario: Scenario = plan.scenario
        self.group = plan.group
        self.topic_base = plan.topic_base
        self.topics: dict[str, str] = plan.topics
        self.partitions: dict[str, int] = plan.partitions
        self.specs: dict[str, MemberSpec] = plan.specs
        self.subscriptions: dict[str, Subscription] = plan.subscriptions
        self.fleet: Fleet = resources.fleet
        self.admin: ChaosAdmin | None = resources.admin
        self.producer: NumberedProducer | None = resources.producer
        self.proxy: ProxyThread | None = resources.proxy
        self.replication = resources.replication
        self.excused: dict[str, list[tuple[int, int | None]]] = judge.excused
        self.expected_fenced: set[str] = judge.expected_fenced
        self.cut_off: dict[str, str] = {}  # fault id -> the member whose heartbeats it swallows
        self.bootstrap = resources.settings.bootstrap
        # How long a member waits for any answer before it gives up on it (--timeout).
        self.request_timeout_s = resources.settings.timeout_s
        self.broker_state: Path | None = options.broker_state
        self.tie_nodes_to_parent = options.tie_nodes_to_parent

    @property
    def state(self) -> GroupState:
        """The group as folded so far (a new object after every event)."""
        return self._events.state

    # -- the plan -----------------------------------------------------------------------
    def add_topic(self, logical: str, real: str, partitions: int) -> None:
        self._plan.add_topic(logical, real, partitions)
        self._journal.topics[logical] = real
        if self._plan.traces_topic_ids():
            self._resources.learn_topic_ids([real])

    def launch_for(
        self, spec: MemberSpec, name: str | None = None, instance_id: str | None = None
    ) -> MemberLaunch:
        return self._plan.launch_for(spec, name, instance_id)

    def real_pattern(self, pattern: str) -> str:
        return self._plan.real_pattern(pattern)

    def produce_topics(self) -> list[str]:
        return self._plan.produce_topics()

    def consumer_timings(self) -> tuple[int, int] | None:
        return self._plan.consumer_timings()

    def settle_timeout(self) -> float:
        return self._plan.settle_timeout()

    # -- the judge ----------------------------------------------------------------------
    def violation(
        self,
        rule: str,
        message: str,
        at_ms: int | None = None,
        members: list[str] | None = None,
        partition: str = "",
        step: str | None = None,
    ) -> None:
        self._judge.violation(rule, message, at_ms, members, partition, step)

    def held(self, rule: str) -> None:
        self._judge.held(rule)

    # -- waiting ------------------------------------------------------------------------
    def pump(self, timeout_s: float = 0.1) -> None:
        self._events.pump(timeout_s)

    def wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        return self._events.wait_for(pred, timeout_s)

    def sleep(self, seconds: float) -> None:
        self._events.sleep(seconds)

    def settle(
        self, baseline_gen: int | None, timeout_s: float, extra: Callable[[], bool] | None = None
    ) -> int | None:
        """Wait until the group is stable (past `baseline_gen` if given) for the quiet
        time; when it settled, or None when it did not within `timeout_s`."""
        timer = verdict.QuietTimer(self._plan.quiet_ms())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._judge.refused is not None:
                raise self._judge.refused
            if not self.fleet.running():
                self.pump(0.2)  # the exits' events
                return None  # every member ended: nothing can settle
            ok = self._judge.group_stable(self.state, baseline_gen) and (extra is None or extra())
            last_ts = max(self._events.last_ts, 0) or now_ms()
            settled = timer.update(ok, time.monotonic() * 1000, last_ts)
            if settled is not None and self._broker_rebalancing():
                timer.update(False, time.monotonic() * 1000, last_ts)  # not settled: again
                settled = None
            if settled is not None:
                return settled
            self.pump(0.1)
        return None

    def _broker_rebalancing(self) -> bool:
        """Whether the coordinator is in a rebalance the run's events cannot show yet.
        A Java or app member's JoinGroup is seen only when its answer passes the proxy
        (or, for Java, when its listener prints), so a join held by the broker looked
        settled and its rebalance was put on the next step. kgctl's own members say
        JoinGroupSent when they send it; only fleets with others on the classic
        protocol ask."""
        if self.admin is None or self._plan.consumer_timings() is not None:
            return False
        if all(spec.client == "kgctl" for spec in self.specs.values()):
            return False
        return self.admin.group_rebalancing(self.group)
