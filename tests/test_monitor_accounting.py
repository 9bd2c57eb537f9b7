"""The monitor's per-group accounting and one group followed from its stored records:
pure, no broker (kgctl/monitor/accounting.py, follower.py)."""

from __future__ import annotations

from kgctl.adapters.group_records import GroupMetadata, GroupRecord, MemberRecord
from kgctl.monitor.accounting import (
    HOUR_MS,
    GroupDeleted,
    GroupTally,
    Rebalance,
    WaitSeen,
    by_churn,
    tally,
    within,
)
from kgctl.monitor.follower import GroupFollower
from kgctl.monitor.service import GroupRow, Health, Selection
from kgctl.render.monitor_table import monitor_table, rebalance_line


def rebalance(gen: int, ended: int, cause: str = "member_joined", **kw: object) -> Rebalance:
    return Rebalance(
        group="g", generation=gen, protocol="classic", cause=cause, confidence="inferred",
        ended_ms=ended, duration_ms=kw.pop("duration_ms", 1000), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def fold_all(events: list[Rebalance | GroupDeleted], now: int) -> GroupTally:
    t: GroupTally | None = None
    for e in events:
        t = tally(t, e, now)
    assert t is not None
    return t


def test_each_generation_is_counted_once_by_cause_and_protocol() -> None:
    t = fold_all(
        [rebalance(1, 1000), rebalance(2, 2000, "member_left"), rebalance(2, 2000, "member_left")],
        3000,
    )
    assert t.counts == {("member_joined", "classic"): 1, ("member_left", "classic"): 1}
    assert t.total == 2
    assert t.last is not None and t.last.generation == 2


def test_a_group_deleted_and_created_again_counts_its_new_generations() -> None:
    t = fold_all(
        [rebalance(1, 1000), rebalance(2, 2000), GroupDeleted("g", 2500), rebalance(1, 3000)],
        4000,
    )
    assert t.total == 3
    assert t.deletions == 1


def test_windows_count_the_last_five_minutes_and_hour() -> None:
    now = 10 * HOUR_MS
    t = fold_all(
        [
            rebalance(1, now - 2 * HOUR_MS),
            rebalance(2, now - 30 * 60_000),
            rebalance(3, now - 1000),
        ],
        now,
    )
    assert within(t, now, 300_000) == 1
    assert within(t, now, HOUR_MS) == 2
    assert t.total == 3
    assert len(t.recent) == 2  # older end times are not kept


def test_session_timeout_waits_and_the_longest_wait_are_kept() -> None:
    waits = (WaitSeen("b", 6000, "dead"), WaitSeen("c", 200, "late_join"))
    t = fold_all([rebalance(1, 1000, waits=waits), rebalance(2, 2000)], 3000)
    assert t.session_timeout_waits == 1
    assert t.longest_wait_ms == 6000


def test_churn_puts_the_busiest_group_first() -> None:
    now = HOUR_MS
    quiet = fold_all([rebalance(1, now - 50 * 60_000)], now)
    busy = GroupTally("busy")
    for gen in range(1, 4):
        one = Rebalance("busy", gen, "classic", "member_joined", "exact", now - gen, 1)
        busy = tally(busy, one, now)
    assert [t.group for t in by_churn([quiet, busy], now)] == ["busy", "g"]


def test_selection_applies_groups_then_exclude() -> None:
    import re

    sel = Selection(re.compile("^app-"), re.compile("-test$"))
    assert sel("app-orders") and not sel("app-orders-test") and not sel("other")


def _record(gen: int, members: list[str], ts: int) -> GroupRecord:
    meta = GroupMetadata(
        generation=gen, protocol_type="consumer", protocol="range" if members else None,
        leader=members[0] if members else None, state_ts_ms=ts - 50,
        members=tuple(MemberRecord(m, client_id=m, session_timeout_ms=6000) for m in members),
    )  # fmt: skip
    return GroupRecord("g", meta, offset=gen, timestamp_ms=ts, partition=0)


def test_stored_generations_are_diagnosed_once_each_with_their_cause() -> None:
    f = GroupFollower("g", settle_ms=3000, stored_source=True)
    history = [
        _record(0, [], 1000),
        _record(1, ["a"], 5000),
        _record(2, ["a", "b"], 12000),
        _record(3, ["a"], 30000),
        _record(4, [], 40000),  # everyone left: the group emptied, no rebalance among members
    ]
    out = []
    for r in history:
        out += f.record(r, r.timestamp_ms)
    out += f.tick(50_000, flush=True)
    out += f.tick(60_000, flush=True)  # said once
    got = [(d.rebalance.generation, d.rebalance.cause) for d in out]
    assert got == [(1, "member_joined"), (2, "member_joined"), (3, "member_left")]
    assert all(d.diagnosis.generation == d.rebalance.generation for d in out)


def test_a_tombstone_starts_the_group_over() -> None:
    f = GroupFollower("g", settle_ms=3000, stored_source=True)
    out = []
    for r in [_record(0, [], 1000), _record(1, ["a"], 2000)]:
        out += f.record(r, r.timestamp_ms)
    out += f.record(GroupRecord("g", None, offset=9, timestamp_ms=3000), 3000)
    for r in [_record(0, [], 4000), _record(1, ["x"], 5000)]:
        out += f.record(r, r.timestamp_ms)
    out += f.tick(9000, flush=True)
    assert [d.rebalance.generation for d in out] == [1, 1]


def test_the_table_lists_groups_by_churn_and_the_line_says_the_cause() -> None:
    from rich.console import Console

    now = HOUR_MS
    quiet = fold_all([rebalance(1, now - 50 * 60_000)], now)
    left = Rebalance(
        "busy", 7, "classic", "member_left", "exact", now - 10, 2500,
        waits=(WaitSeen("b", 6100, "dead"),), trigger="b: member left",
    )  # fmt: skip
    busy = tally(None, left, now)
    rows = {
        "g": GroupRow("g", "Stable", "classic", "range", 2, 1, quiet),
        "busy": GroupRow("busy", "PreparingRebalance", "classic", "range", 3, 7, busy),
    }
    console = Console(width=120, record=True)
    console.print(monitor_table(rows, Health(offsets_caught_up=True), now))
    text = console.export_text()
    assert text.index("busy") < text.index("\ng ")
    assert "b: member left" in text and "6.1s" in text
    assert "2 groups" in text
    assert rebalance_line(busy.last).startswith("busy generation 7 (classic): member left")  # type: ignore[arg-type]
