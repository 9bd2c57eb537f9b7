"""The plan of a chaos run: its group, its topics, each member's spec and subscription,
and the timings the run waits by. Pure: no I/O, no clock.

The plan starts as the scenario wrote it and changes as the run goes: fitting it to the
cluster's group bounds replaces the scenario (`fit`), and actions add topics, grow
partitions, add members and change subscriptions in its dicts, which the runner, the
judge and the actions' context share, so every part sees one plan. How a member spec
becomes a process (`launch_for`) is here too: a new kind of member is a spec the
scenario declares and a launch this builds for it (`kgctl/chaos/fleet.py` starts it).
"""

from __future__ import annotations

import re

from kgctl.chaos.fit import FittedScenario
from kgctl.chaos.fleet import MemberLaunch
from kgctl.chaos.options import RunOptions
from kgctl.chaos.scenario import MemberSpec, Scenario
from kgctl.errors import SetupError
from kgctl.model.bounds import SOURCE_CLUSTER, GroupBounds
from kgctl.model.state import TopicPartition

# A member's subscription: logical topic names, or a pattern over logical names.
Subscription = tuple[list[str], str | None]


class FleetPlan:
    """What one run means its group, topics and members to be."""

    def __init__(self, scenario: Scenario, group: str, topic_base: str) -> None:
        self.scenario = scenario  # as written until `fit`, then as fitted
        self.fitted: FittedScenario | None = None
        self.group = group
        self.topic_base = topic_base  # every real topic name starts with it
        self.topics: dict[str, str] = {t: topic_base + t for t in scenario.fleet.topics}
        self.partitions: dict[str, int] = dict(scenario.fleet.topics)  # logical -> count
        # The specs as written, before fitting (what member-add and static-conflict copy).
        self.specs: dict[str, MemberSpec] = {m.name: m for m in scenario.fleet.members}
        # Subscriptions changed during the run; a member not here has its spec's.
        self.subscriptions: dict[str, Subscription] = {}

    @classmethod
    def for_run(cls, scenario: Scenario, run_id: str, options: RunOptions) -> FleetPlan:
        """Names of this run's own: topics under `<prefix><scenario>.<run>.`, and a group
        `<prefix>chaos.<scenario>.<run>` unless the options name one."""
        prefix = options.topic_prefix
        group = options.group or f"{prefix}chaos.{scenario.name}.{run_id}"
        return cls(scenario, group, f"{prefix}{scenario.name}.{run_id}.")

    def fit(self, fitted: FittedScenario) -> None:
        self.fitted = fitted
        self.scenario = fitted.scenario

    @property
    def bounds(self) -> GroupBounds | None:
        """The cluster's group bounds, once read (None before the run is fitted)."""
        return self.fitted.bounds if self.fitted is not None else None

    # -- topics -------------------------------------------------------------------------
    def add_topic(self, logical: str, real: str, partitions: int) -> None:
        self.topics[logical], self.partitions[logical] = real, partitions

    def real_pattern(self, pattern: str) -> str:
        """A pattern over logical names as the members subscribe with it: real names."""
        return f"^{re.escape(self.topic_base)}(?:{pattern})$"

    def _matching(self, pattern: str) -> set[str]:
        rx = re.compile(pattern)
        return {t for t in self.partitions if rx.fullmatch(t)}

    def subscription(self, spec: MemberSpec) -> Subscription:
        return self.subscriptions.get(spec.name, (spec.subscribe, spec.pattern))

    def produce_topics(self) -> list[str]:
        """The real topics some member (running or not) subscribes to; every topic when
        none does."""
        subscribed: set[str] = set()
        for spec in self.specs.values():
            topics, pattern = self.subscription(spec)
            if pattern:
                subscribed |= self._matching(pattern)
            subscribed |= set(topics)
        return [self.topics[t] for t in sorted(subscribed or self.partitions)]

    def expected_partitions(self, active: list[str]) -> set[TopicPartition]:
        """Partitions of every topic one of the `active` members subscribes to."""
        wanted: set[str] = set()
        for name in active:
            spec = self.specs.get(name)
            if spec is None:
                continue
            topics, pattern = self.subscription(spec)
            wanted |= self._matching(pattern) if pattern else set(topics)
        return {(self.topics[t], p) for t in wanted for p in range(self.partitions[t])}

    # -- members ------------------------------------------------------------------------
    def launch_for(
        self, spec: MemberSpec, name: str | None = None, instance_id: str | None = None
    ) -> MemberLaunch:
        """How to start the member `spec` describes (as `name`, with `instance_id`: a
        second process for one static identity), with the fleet's timings as fitted."""
        f = self.scenario.fleet
        topics, pattern = self.subscription(spec)
        return MemberLaunch(
            name=name or spec.name,
            group=self.group,
            topics=[self.topics[t] for t in topics],
            pattern=self.real_pattern(pattern) if pattern else None,
            instance_id=instance_id or (f"{spec.name}" if spec.static else None),
            assignors=list(spec.assignors),
            session_timeout_ms=spec.session_timeout_ms or f.session_timeout_ms,
            heartbeat_interval_ms=f.heartbeat_interval_ms,
            max_poll_interval_ms=f.max_poll_interval_ms,
            commit=f.commit,
            processing_ms=spec.processing_ms,
            protocol=spec.protocol,
            client=spec.client,
            remote_assignor=spec.remote_assignor,
            fetch=f.fetch,
            command=list(spec.command),
        )

    def refusal(self, member: str) -> SetupError:
        """The error a run ends with when the cluster refused `member`'s session timeout:
        what kgctl knew of the bounds, and what to do."""
        session = self.scenario.fleet.session_timeout_ms
        head = (
            f"the cluster refused {member}'s session timeout of {session} ms "
            "(INVALID_SESSION_TIMEOUT: outside its group.min/max.session.timeout.ms)"
        )
        bounds = self.bounds
        if bounds is None:
            return SetupError(f"{head}; pass --session-timeout MS within them")
        if bounds.source == SOURCE_CLUSTER:
            # Read from one broker: another (the coordinator) must enforce other values.
            known = f"one broker says {bounds.session_range()}, the coordinator differs"
        else:
            known = f"kgctl assumed {bounds.session_range()} ({bounds.origin()})"
        return SetupError(
            f"{head}; {known}; ask the cluster's admin for the bounds and pass "
            "--session-timeout MS within them"
        )

    def traces_topic_ids(self) -> bool:
        """Whether the wire names this fleet's assignments by topic id: it has
        consumer-protocol app members (ConsumerGroupHeartbeat names topics by id)."""
        return any(s.client == "command" and s.protocol != "classic" for s in self.specs.values())

    # -- timings ------------------------------------------------------------------------
    def consumer_timings(self) -> tuple[int, int] | None:
        """The broker's (session, heartbeat interval) of consumer-protocol members, when
        the fleet has any: on that protocol both are the cluster's, not the member's."""
        if "consumer" not in {spec.protocol for spec in self.specs.values()}:
            return None
        configs = self.bounds.configs if self.bounds is not None else {}
        return (
            int(configs.get("group.consumer.session.timeout.ms", 45000)),
            int(configs.get("group.consumer.heartbeat.interval.ms", 5000)),
        )

    def quiet_ms(self) -> int:
        """How long the group must look stable to count as settled. A consumer-protocol
        member learns a new target only with its next heartbeat, and a partition it gives
        up reaches its new owner with that owner's next one: two intervals can pass
        between steps of one reconciliation while everything looks stable."""
        timings = self.consumer_timings()
        quiet = self.scenario.settle_quiet_ms
        return quiet if timings is None else max(quiet, 2 * timings[1] + 500)

    def settle_timeout(self) -> float:
        """How long the group may take to settle after an action before the step fails."""
        if self.scenario.settle_timeout_s:
            return float(self.scenario.settle_timeout_s)
        f = self.scenario.fleet
        session = f.session_timeout_ms
        timings = self.consumer_timings()
        if timings is not None:
            session = max(session, timings[0])
        return 3 * session / 1000 + f.max_poll_interval_ms / 1000 + 15
