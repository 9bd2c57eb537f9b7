"""The consumer-protocol member's state changes go through one checked function: each
move in Java's MemberState table is taken, every other is refused, naming both states."""

from __future__ import annotations

import itertools

import pytest

from kgctl.member.membership import (
    KGCTL_PREDECESSORS,
    PREDECESSORS,
    IllegalTransition,
    Membership,
    MemberState,
    may_follow,
)

S = MemberState

# Java's MemberState, written out again as the pairs (from, to) a member may take.
JAVA_MOVES = {
    (S.FENCED, S.JOINING), (S.UNSUBSCRIBED, S.JOINING), (S.STALE, S.JOINING),
    (S.STABLE, S.RECONCILING), (S.JOINING, S.RECONCILING), (S.ACKNOWLEDGING, S.RECONCILING),
    (S.RECONCILING, S.ACKNOWLEDGING),
    (S.JOINING, S.STABLE), (S.ACKNOWLEDGING, S.STABLE), (S.RECONCILING, S.STABLE),
    *((s, S.FENCED) for s in (S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                              S.PREPARE_LEAVING, S.LEAVING)),
    *((s, S.FATAL) for s in (S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                             S.PREPARE_LEAVING, S.LEAVING, S.UNSUBSCRIBED)),
    *((s, S.PREPARE_LEAVING) for s in (S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                                       S.UNSUBSCRIBED)),
    (S.PREPARE_LEAVING, S.LEAVING),
    (S.PREPARE_LEAVING, S.UNSUBSCRIBED), (S.LEAVING, S.UNSUBSCRIBED), (S.FENCED, S.UNSUBSCRIBED),
    (S.LEAVING, S.STALE),
}  # fmt: skip
# kgctl's own moves: the poll timer's leave goes at once; an answer in flight at a leave.
KGCTL_MOVES = {
    *((s, S.LEAVING) for s in (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE)),
    (S.PREPARE_LEAVING, S.RECONCILING),
}
ALL_PAIRS = list(itertools.permutations(MemberState, 2))


def _member_in(state: MemberState) -> Membership:
    m = Membership("m1")
    m._state = state  # the starting point of one move, set past the check on purpose
    return m


def test_the_table_is_javas_and_kgctls_own_moves_are_listed_apart() -> None:
    table = {(b, a) for a, before in PREDECESSORS.items() for b in before}
    assert table == JAVA_MOVES
    extra = {(b, a) for a, before in KGCTL_PREDECESSORS.items() for b in before}
    assert extra == KGCTL_MOVES
    assert not extra & table


@pytest.mark.parametrize(("before", "after"), sorted(JAVA_MOVES | KGCTL_MOVES))
def test_a_valid_move_is_taken(before: MemberState, after: MemberState) -> None:
    m = _member_in(before)
    m._become(after)
    assert m.state is after


@pytest.mark.parametrize(
    ("before", "after"), [p for p in ALL_PAIRS if p not in JAVA_MOVES | KGCTL_MOVES]
)
def test_an_illegal_move_is_refused_naming_both_states(
    before: MemberState, after: MemberState
) -> None:
    m = _member_in(before)
    with pytest.raises(IllegalTransition) as info:
        m._become(after)
    assert f"from {before.value} to {after.value}" in str(info.value)
    assert m.state is before  # refused: nothing changed
    assert before not in may_follow(after)


def test_a_fatal_member_moves_nowhere() -> None:
    for after in MemberState:
        if after is not S.FATAL:
            assert S.FATAL not in may_follow(after)


def test_a_member_acknowledges_only_what_it_was_reconciling() -> None:
    # A fenced member that is told its reconciliation finished does not acknowledge it.
    m = _member_in(S.FENCED)
    with pytest.raises(IllegalTransition, match="from FENCED to ACKNOWLEDGING"):
        m.reconciled()
