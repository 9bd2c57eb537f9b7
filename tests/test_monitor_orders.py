"""One group followed by the monitor, its two sources interleaved as they are in a real
run: the records of `__consumer_offsets` and the descriptions polled each interval reach
the `GroupFollower` in any order (the log reader ahead of the polls or behind them, the
group first listed after some of its generations were stored). Pure, no broker.

The group is the one tests/test_monitor_kafka.py makes: a joins (generation 1), b joins
(2), b leaves (3). Whatever the order, each generation's cause is that one, or an honest
`unknown`: never a member that was there all along seen "new" or "missing".
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kgctl.adapters.admin import ListedGroup
from kgctl.adapters.group_records import GroupMetadata, GroupRecord, MemberRecord
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.monitor.follower import Diagnosed, GroupFollower
from kgctl.monitor.service import Monitor, Selection
from kgctl.settings import ClientSettings

G = "mon-app"
A, B, X = "kgctl-a-644d", "kgctl-b-5db0", "kgctl-x-77aa"
CLIENT = {A: "kgctl-a", B: "kgctl-b", X: "kgctl-x"}
SETTLE_MS = 3000  # the monitor's for --interval 1


def _record(gen: int, members: list[str], ts: int) -> GroupRecord:
    meta = GroupMetadata(
        generation=gen, protocol_type="consumer", protocol="range" if members else None,
        leader=members[0] if members else None, state_ts_ms=ts - 30 if members else ts,
        members=tuple(
            MemberRecord(m, client_id=CLIENT[m], host="/127.0.0.1", session_timeout_ms=10000,
                         rebalance_timeout_ms=300000, subscription=("t",))
            for m in members
        ),
    )  # fmt: skip
    return GroupRecord(G, meta, offset=gen, timestamp_ms=ts, partition=7)


def _member(mid: str, parts: list[int] | None) -> MemberSnapshot:
    return MemberSnapshot(
        member_id=mid, client_id=CLIENT[mid], host="/127.0.0.1",
        subscription=None if parts is None else ("t",),
        partitions=None if parts is None else {"t": parts},
    )  # fmt: skip


def _described(state: str, *members: MemberSnapshot) -> GroupSnapshot:
    return GroupSnapshot(
        group=G, state=state, protocol_type="consumer",
        protocol="range" if state == "Stable" else "", coordinator="1 127.0.0.1:9092",
        members=members,
    )  # fmt: skip


# The broker's writes at the pace of a real run of that test (ms after the group was
# created): b's join and leave each take a few hundred milliseconds, less than a poll.
R0, R1 = _record(0, [], 0), _record(1, [A], 185)
R2, R3 = _record(2, [A, B], 1201), _record(3, [A], 1716)
ONLY_A = _described("Stable", _member(A, [0, 1, 2, 3]))
B_JOINING = _described("PreparingRebalance", _member(A, None), _member(B, None))
BOTH = _described("Stable", _member(A, [0, 1]), _member(B, [2, 3]))
B_LEAVING = _described("PreparingRebalance", _member(A, None))
# service.py's stand-in for a group first listed after the first poll, and for one no
# longer listed; DescribeGroups' answer for a group it does not know.
ABSENT = GONE = GroupSnapshot(group=G, state="Dead", missing=True)
CAUGHT_UP = "caught up"  # the log reader reached the end it had at its start


@dataclass(frozen=True)
class At:
    """What reaches the follower at `ms`: a record, a description or the reader's
    catch-up (a flush)."""

    ms: int
    what: GroupRecord | GroupSnapshot | str


def _follow(steps: list[At]) -> list[Diagnosed]:
    f = GroupFollower(G, SETTLE_MS, stored_source=True)
    out: list[Diagnosed] = []
    for s in steps:
        if isinstance(s.what, GroupRecord):
            out += f.record(s.what, s.ms)
        elif isinstance(s.what, GroupSnapshot):
            out += f.observed(s.what, s.ms)
        else:
            out += f.tick(s.ms, flush=True)
        out += f.tick(s.ms)
    out += f.tick(steps[-1].ms + 10 * SETTLE_MS)
    return out


ORDERS = {
    # The group created between the first and the second poll; the reader, fast, has
    # read generations 1 and 2 before the second poll describes the group at all.
    "first listed after generation 2 was stored": [
        At(300, R0), At(300, R1), At(1000, CAUGHT_UP), At(1250, R2),
        At(1400, ABSENT), At(1400, BOTH), At(1750, R3), At(2400, ONLY_A), At(3400, ONLY_A),
    ],
    # The same, first described while b's leave was under way.
    "first listed while b left": [
        At(300, R0), At(300, R1), At(1250, R2), At(1700, ABSENT), At(1700, B_LEAVING),
        At(1750, R3), At(2700, ONLY_A),
    ],
    # A real run's order: first described as b joined, its record read after.
    "first listed as b joined": [
        At(300, R0), At(300, R1), At(300, CAUGHT_UP), At(880, ABSENT), At(880, B_JOINING),
        At(1210, R2), At(1720, R3), At(1880, ONLY_A), At(2880, ONLY_A),
    ],
    # Already there at the first poll; the descriptions a poll behind the records: b is
    # described only after its generation was stored, and gone after the next one.
    "the descriptions a poll behind the records": [
        At(100, ONLY_A), At(150, R0), At(200, R1), At(1100, ONLY_A), At(1210, R2),
        At(1300, CAUGHT_UP), At(2100, BOTH), At(2200, R3), At(3100, ONLY_A),
    ],
    # __consumer_offsets did not exist when the monitor started: every generation was
    # described before any record could be read, then the history came at once.
    "the records read after every description": [
        At(100, ONLY_A), At(1100, B_JOINING), At(1300, BOTH), At(1800, ONLY_A),
        At(2500, R0), At(2500, R1), At(2500, R2), At(2500, R3), At(2600, CAUGHT_UP),
        At(2800, ONLY_A),
    ],
    # The same, the records read between the descriptions of b's leave.
    "the records read while b left": [
        At(100, ONLY_A), At(1100, B_JOINING), At(1300, BOTH), At(1700, B_LEAVING),
        At(1750, R0), At(1750, R1), At(1750, R2), At(1750, R3), At(1750, CAUGHT_UP),
        At(2700, ONLY_A),
    ],
    # The reader a poll and a half behind: b's join described after its generation was
    # stored (its record not read yet), the record of b's leave read after it was
    # described.
    "the records behind the descriptions": [
        At(250, ABSENT), At(250, ONLY_A), At(1250, BOTH), At(1500, R0), At(1685, R1),
        At(2250, ONLY_A), At(2700, R2), At(3200, R3), At(3250, ONLY_A),
    ],
    # Not listed for one poll while b was a member (a ListGroups without it, as while
    # its coordinator moves): no deletion, since no tombstone was read.
    "not listed for a poll": [
        At(100, ONLY_A), At(150, R0), At(200, R1), At(1210, B_JOINING), At(1220, R2),
        At(1400, GONE), At(1500, BOTH), At(1720, R3), At(2500, ONLY_A),
    ],
    # Described Dead for a poll as b left, its record read after.
    "described missing as b left": [
        At(100, ONLY_A), At(150, R0), At(200, R1), At(1220, R2), At(1300, BOTH),
        At(1700, GONE), At(1800, R3), At(2700, ONLY_A),
    ],
    # The healthy order of the issue: a first described, each record read before the
    # description that shows it.
    "each record before its description": [
        At(100, ONLY_A), At(150, R0), At(200, R1), At(1000, CAUGHT_UP), At(1100, ONLY_A),
        At(1210, B_JOINING), At(1220, R2), At(1500, BOTH), At(1720, R3), At(2500, ONLY_A),
    ],
}  # fmt: skip

EXPECTED = [
    (1, "member_joined", "kgctl-a", "kgctl-b"),
    (2, "member_joined", "kgctl-b", "kgctl-a"),
    (3, "member_left", "kgctl-b", "kgctl-a"),
]


@pytest.mark.parametrize("order", list(ORDERS), ids=list(ORDERS))
def test_each_generation_has_its_own_cause_whatever_the_order(order: str) -> None:
    out = _follow(ORDERS[order])
    got = [(d.rebalance.generation, d.rebalance.cause) for d in out]
    assert got == [(g, c) for g, c, _, _ in EXPECTED]
    for d, (gen, _, who, not_who) in zip(out, EXPECTED, strict=True):
        t = d.diagnosis.trigger
        # The member that made it is named, and the other one, there all along, is not.
        assert who in t.evidence and not_who not in t.evidence, (gen, t.evidence)
        assert t.who in ("", who), (gen, t.who)


def test_a_group_described_missing_is_deleted_by_its_tombstone() -> None:
    # Deleted: described missing, then its tombstone read; created again, x joins it.
    f = GroupFollower(G, SETTLE_MS, stored_source=True)
    out = f.record(R0, 100) + f.record(R1, 200) + f.observed(ONLY_A, 300)
    out += f.observed(GONE, 5000)
    assert f.snapshot == ONLY_A  # the records say it exists until its tombstone
    out += f.record(GroupRecord(G, None, offset=9, timestamp_ms=5100), 5100)
    assert f.snapshot == GONE and f.state.generation < 0
    again = _described("Stable", _member(X, [0, 1, 2, 3]))
    out += f.observed(again, 7000) + f.record(R0, 7050)
    out += f.record(_record(1, [X], 7100), 7100) + f.tick(20_000)
    assert [(d.rebalance.generation, d.rebalance.cause) for d in out] == [
        (1, "member_joined"), (1, "member_joined"),
    ]  # fmt: skip
    assert "kgctl-x" in out[-1].diagnosis.trigger.evidence


def test_the_monitor_counts_a_deletion_once_by_the_tombstone_not_a_round_unlisted() -> None:
    # What the sources' threads put in the service's inbox, applied by `step` (nothing
    # started, no broker): a round without the group is not a deletion while its records
    # say it exists; its tombstone is.
    clock = iter(range(0, 10**6, 100))
    mon = Monitor(ClientSettings(), Selection(), interval_s=1.0, clock=lambda: next(clock))

    def apply(kind: str, payload: object) -> None:
        mon.inbox.put((kind, payload))
        mon.step(timeout_s=0)

    listed = {G: ListedGroup("classic", "Stable")}
    apply("records", ([R0, R1], 2))
    apply("caught_up", None)
    apply("described", (listed, {G: ONLY_A}, set(), 0.01, 0))
    apply("described", ({}, {}, set(), 0.01, 0))  # not listed this round
    apply("described", (listed, {G: ONLY_A}, set(), 0.01, 0))
    assert mon.tallies[G].total == 1 and mon.tallies[G].deletions == 0
    apply("described", ({}, {}, set(), 0.01, 0))
    apply("records", ([GroupRecord(G, None, offset=9, timestamp_ms=5000)], 1))
    assert mon.tallies[G].deletions == 1 and mon.followers[G].snapshot == GONE


def test_a_group_the_first_listing_missed_has_no_new_members() -> None:
    # Made before the monitor started (its first record read is generation 7, written
    # before), left out of the first ListGroups, first described during a rebalance:
    # service.py's "absent" stand-in is wrong, and a and b were there all along. What
    # started generation 7 was not seen.
    r7 = _record(7, [A, B], 10_200)
    f = GroupFollower(G, SETTLE_MS, stored_source=True)
    out = f.observed(ABSENT, 10_000) + f.observed(B_JOINING, 10_000)
    out += f.record(r7, 10_300) + f.observed(BOTH, 11_000) + f.tick(30_000)
    assert [(d.rebalance.generation, d.rebalance.cause) for d in out] == [(7, "unknown")]
    assert "new in the broker's description" not in out[0].diagnosis.trigger.evidence
