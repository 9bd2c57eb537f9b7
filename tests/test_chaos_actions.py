"""Pure tests of chaos actions (kgctl/chaos/actions.py): each one's checks, and what it
does and expects, performed against a stand-in for the run (no processes, no Kafka).

The stand-in holds only what `ActionContext` lists; a step that reached for more of the
run would fail here with an AttributeError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgctl.chaos.actions import ACTIONS, Arg, StepCheck
from kgctl.chaos.scenario import MemberSpec, Scenario, parse_scenario
from kgctl.model.state import GroupState


@dataclass
class FakeProducer:
    topics: list[str] = field(default_factory=list)

    def set_topics(self, topics: list[str]) -> None:
        self.topics = topics


@dataclass
class FakeProcess:
    name: str
    paused_since_ms: int | None = None


@dataclass
class FakeFleet:
    names: list[str]
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)

    def active(self) -> list[FakeProcess]:
        return [FakeProcess(n) for n in self.names]

    def send(self, name: str, command: dict[str, Any]) -> None:
        self.sent.append((name, command))

    @property
    def members(self) -> dict[str, FakeProcess]:
        return {n: FakeProcess(n, paused_since_ms=1) for n in self.names}

    def resume(self, name: str) -> None:
        self.resumed.append(name)


@dataclass
class FakeRun:
    """The parts of a run an action may use (actions.ActionContext), in memory."""

    scenario: Scenario
    fleet: FakeFleet
    producer: FakeProducer = field(default_factory=FakeProducer)
    group: str = "g"
    state: GroupState = field(default_factory=lambda: GroupState("g"))
    topic_base: str = "kgctl.x.1."
    topics: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, int] = field(default_factory=dict)
    specs: dict[str, MemberSpec] = field(default_factory=dict)
    subscriptions: dict[str, tuple[list[str], str | None]] = field(default_factory=dict)
    excused: dict[str, list[tuple[int, int | None]]] = field(default_factory=dict)

    def real_pattern(self, pattern: str) -> str:
        return f"^kgctl\\.x\\.1\\.(?:{pattern})$"

    def produce_topics(self) -> list[str]:
        return sorted(self.topics.values())

    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)  # a run keeps folding events meanwhile; nothing to fold here


def run_of(text: str) -> FakeRun:
    sc = parse_scenario(text)
    return FakeRun(
        scenario=sc,
        fleet=FakeFleet([m.name for m in sc.fleet.members]),
        topics={t: f"kgctl.x.1.{t}" for t in sc.fleet.topics},
        partitions=dict(sc.fleet.topics),
        specs={m.name: m for m in sc.fleet.members},
    )


SCENARIO = """
fleet:
  members: 2
  topics: {orders: 4, payments: 2}
  subscribe: [orders]
steps:
  - action: wait
    seconds: 1
"""


def test_a_subscription_change_expects_a_rebalance_only_when_topics_change() -> None:
    run = run_of(SCENARIO)
    change = ACTIONS["subscription-change"]
    same = change.perform(run, {"members": ["m1"], "topics": ["orders"]})  # type: ignore[arg-type]
    assert not same.expect_rebalance
    grown = change.perform(run, {"members": "all", "pattern": "orders|payments"})  # type: ignore[arg-type]
    assert grown.expect_rebalance and grown.members == ["m1", "m2"]
    assert run.fleet.sent[-1] == (
        "m2",
        {"op": "subscribe", "pattern": "^kgctl\\.x\\.1\\.(?:orders|payments)$"},
    )
    assert run.producer.topics == ["kgctl.x.1.orders", "kgctl.x.1.payments"]


def test_a_wait_settles_only_when_asked_to() -> None:
    run = run_of(SCENARIO)
    wait = ACTIONS["wait"]
    assert wait.perform(run, {"until": "stable"}).settle  # type: ignore[arg-type]
    timed = wait.perform(run, {"seconds": 2.5})  # type: ignore[arg-type]
    assert not timed.settle and not timed.expect_rebalance
    assert run.slept == [2.5] and timed.description == "waited 2.5s"


def test_each_action_checks_its_own_arguments() -> None:
    errors: list[tuple[str | None, str]] = []
    check = StepCheck(["m1", "m2"], {"orders": 4}, lambda key, msg: errors.append((key, msg)))
    args: dict[str, Any] = {"count": 2}
    ACTIONS["member-add"].validate(args, check)
    assert args["names"] == ["m3", "m4"] and check.names == ["m1", "m2", "m3", "m4"]
    ACTIONS["partition-growth"].validate({"topic": "orders", "to": 3}, check)
    ACTIONS["wait"].validate({}, check)
    ACTIONS["subscription-change"].validate({"pattern": "("}, check)
    assert [key for key, _ in errors] == ["to", None, "pattern"]
    assert errors[0][1] == "must be more than 4 (partitions can only grow)"
    assert errors[2][1].startswith("not a regular expression")


def test_every_action_declares_typed_arguments() -> None:
    kinds = {"str", "int", "num", "bool", "member", "members", "topic", "topics", "str_list"}
    kinds.add("protocol")  # classic | consumer (rolling-restart onto the other protocol)
    for name, action in ACTIONS.items():
        assert action.name == name
        assert all(isinstance(a, Arg) and a.kind in kinds for a in action.args.values()), name
