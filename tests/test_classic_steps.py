"""The classic member's rebalance steps (kgctl/adapters/classic_steps.py): Java's
PREPARING_REBALANCE and COMPLETING_REBALANCE, each change checked against a table."""

from __future__ import annotations

import itertools

import pytest

from kgctl.adapters.classic_steps import (
    REBALANCE_PREDECESSORS,
    ClassicPhase,
    IllegalClassicTransition,
    RebalanceStep,
)

P = ClassicPhase
VALID = {
    (P.PREPARING_REBALANCE, P.PREPARING_REBALANCE),  # a JoinGroup sent again
    (P.COMPLETING_REBALANCE, P.PREPARING_REBALANCE),  # the SyncGroup answered or failed
    (P.PREPARING_REBALANCE, P.COMPLETING_REBALANCE),  # the JoinGroup answered
}
STEPS = (P.PREPARING_REBALANCE, P.COMPLETING_REBALANCE)


def test_the_table_lists_the_rebalance_steps_java_takes() -> None:
    assert {(b, a) for a, before in REBALANCE_PREDECESSORS.items() for b in before} == VALID


@pytest.mark.parametrize(("before", "after"), sorted(VALID))
def test_a_valid_step_is_taken(before: ClassicPhase, after: ClassicPhase) -> None:
    step = RebalanceStep(before)
    step.enter(after)
    assert step.phase is after
    assert step.completing is (after is P.COMPLETING_REBALANCE)


@pytest.mark.parametrize(
    ("before", "after"),
    [p for p in itertools.product(STEPS, ClassicPhase) if p not in VALID],
)
def test_an_illegal_step_is_refused_naming_both(before: ClassicPhase, after: ClassicPhase) -> None:
    step = RebalanceStep(before)
    with pytest.raises(IllegalClassicTransition) as info:
        step.enter(after)
    assert f"from {before.value} to {after.value}" in str(info.value)
    assert step.phase is before


def test_a_second_joingroup_answer_without_a_new_join_is_refused() -> None:
    step = RebalanceStep()
    step.enter(P.COMPLETING_REBALANCE)
    with pytest.raises(IllegalClassicTransition, match="COMPLETING_REBALANCE to COMPLETING"):
        step.enter(P.COMPLETING_REBALANCE)
