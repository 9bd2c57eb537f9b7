"""The judge from the wire (pure): given from Fetch answers, committed from OffsetCommit."""

from __future__ import annotations

from typing import Any

from kgctl.model.events import Event
from kgctl.model.wire_judge import judge_wire

T = "orders"


def ev(type_: str, member: str, ts: int, **data: Any) -> Event:
    return Event(type_, ts, 0.0, ts, group="g", member=member, source="wire", data=data)


def fetched(member: str, ts: int, p: int, first: int, last: int, hw: int) -> Event:
    return ev(
        "FetchTraced", member, ts, partitions={T: {str(p): {"hw": hw, "batches": [[first, last]]}}}
    )


def commit(member: str, ts: int, p: int, offset: int, error: str = "NONE") -> Event:
    return ev(
        "OffsetCommitTraced", member, ts, error=error, request={"offsets": {T: {str(p): offset}}}
    )


def rules(found: Any) -> list[tuple[str, str]]:
    return [(f.rule, f.member) for f in found.findings]


def test_a_member_that_commits_what_it_was_given_passes() -> None:
    events = [
        fetched("a", 1, 0, 0, 9, 10), commit("a", 2, 0, 10),
        fetched("b", 3, 0, 10, 19, 20), commit("b", 4, 0, 20),
    ]  # fmt: skip
    found = judge_wire(events, members={"a", "b"}, produced_ends={(T, 0): 20})
    assert found.findings == []
    assert found.members["a"].given == 10 and found.members["b"].committed == {(T, 0): 20}
    assert found.committed == {(T, 0): 20}


def test_a_commit_past_what_the_member_was_given_is_named() -> None:
    events = [fetched("a", 1, 0, 0, 9, 30), commit("a", 2, 0, 25)]
    found = judge_wire(events, members={"a"})
    assert rules(found) == [("commit-not-ahead", "a")]
    assert "given up to 9" in found.findings[0].message


def test_a_committed_offset_moved_back_is_named_and_refused_commits_count_for_nothing() -> None:
    events = [
        fetched("a", 1, 0, 0, 19, 20), commit("a", 2, 0, 20),
        fetched("b", 3, 0, 0, 9, 20),
        commit("b", 4, 0, 5, error="ILLEGAL_GENERATION"),  # refused: moved nothing
        commit("b", 5, 0, 10),  # accepted: back from 20 to 10
    ]  # fmt: skip
    found = judge_wire(events, members={"a", "b"})
    assert rules(found) == [("commits-monotonic", "b")]
    assert found.members["b"].commits == 1


def test_records_waiting_when_a_step_began_must_be_committed_later() -> None:
    events = [fetched("a", 1, 0, 0, 9, 10), commit("a", 2, 0, 5), fetched("a", 20, 0, 10, 10, 11)]
    stuck = judge_wire(events, members={"a"}, steps=[("kill", 10)])
    assert rules(stuck) == [("committed-progress", "")]
    moved = judge_wire([*events, commit("a", 30, 0, 11)], members={"a"}, steps=[("kill", 10)])
    assert moved.findings == []


def test_produced_records_above_the_final_commit_break_at_least_once() -> None:
    events = [fetched("a", 1, 0, 0, 9, 10), commit("a", 2, 0, 10)]
    found = judge_wire(events, members={"a"}, produced_ends={(T, 0): 14, (T, 1): 3})
    assert rules(found) == [("at-least-once", "")]
    assert found.not_committed == {(T, 0): 4, (T, 1): 3}


def test_other_clients_on_the_wire_are_not_judged() -> None:
    events = [fetched("x", 1, 0, 0, 9, 10), commit("x", 2, 0, 99)]
    assert judge_wire(events, members={"a"}).findings == []
