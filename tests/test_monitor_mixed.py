"""A classic group the monitor follows moved to the consumer protocol online (KIP-848's
upgrade: a member joins with group.protocol=consumer) and back. The upgrade writes the
classic group's tombstone, then the consumer group's records; only a tombstone with no
consumer group after it is a deletion. Pure, no broker: what the sources' threads put in
the service's inbox, applied by `step`.

The group is tests/test_monitor_orders.py's: a joins (generation 1), b joins (2); then
x joins on the consumer protocol. Kafka makes the consumer group at epoch 2 (the classic
generation) with a and b, and x's join bumps it to 3.
"""

from __future__ import annotations

from dataclasses import replace

from test_monitor_orders import BOTH, CLIENT, R0, R1, R2, A, B, G, _record
from test_monitor_rounds import _monitor

from kgctl.adapters.admin import ListedGroup
from kgctl.adapters.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerRecordType,
    GroupEpoch,
    MemberAssignment,
    MemberMetadata,
)
from kgctl.adapters.group_records import GroupRecord
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.monitor.accounting import Protocol, Rebalance, tally
from kgctl.monitor.follower import Diagnosed

X = "Zp602+XvRQ62afZMqpzXHw"  # the broker's own id for a consumer-protocol member
CLIENTS = {**CLIENT, X: "kgctl-x"}
CLASSIC = {G: ListedGroup("classic", "Stable")}
CONSUMER = {G: ListedGroup("consumer", "Stable")}


def _joined(member: str, ts: int) -> ConsumerGroupRecord:
    value = MemberMetadata(CLIENTS[member], "/127.0.0.1", None, ("t",), None, 300000, None)
    return ConsumerGroupRecord(
        G, ConsumerRecordType.MEMBER_METADATA, value, member, timestamp_ms=ts, partition=7
    )


def _epoch(n: int, ts: int) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(
        G, ConsumerRecordType.GROUP_METADATA, GroupEpoch(n), timestamp_ms=ts, partition=7
    )


def _assigned(member: str, epoch: int, ts: int) -> ConsumerGroupRecord:
    value = MemberAssignment(epoch, epoch - 1, 0, 1, 0)
    return ConsumerGroupRecord(
        G, ConsumerRecordType.CURRENT_MEMBER_ASSIGNMENT, value, member, timestamp_ms=ts,
        partition=7,
    )  # fmt: skip


def _tombstone(ts: int) -> GroupRecord:
    return GroupRecord(G, None, offset=9, timestamp_ms=ts, partition=7)


# What Kafka 4 writes as x joins: the classic group's tombstone, then the consumer group
# made of a and b at the classic generation, then x's join (epoch 3), at once.
UPGRADE = [
    _tombstone(5000),
    _joined(A, 5000), _joined(B, 5000), _epoch(2, 5000),
    _assigned(A, 2, 5000), _assigned(B, 2, 5000),
    _joined(X, 5001), _epoch(3, 5001), _assigned(X, 3, 5001),
]  # fmt: skip


def _cmember(mid: str, epoch: int, parts: list[int], kind: str) -> MemberSnapshot:
    return MemberSnapshot(
        member_id=mid, client_id=CLIENTS[mid], host="/127.0.0.1", subscription=("t",),
        partitions={"t": parts}, member_epoch=epoch, target={"t": parts}, member_type=kind,
    )  # fmt: skip


# ConsumerGroupDescribe's answer once x has its partition: a and b go on as classic members.
MIXED = GroupSnapshot(
    group=G, state="Stable", protocol_type="consumer", protocol="uniform",
    coordinator="1 127.0.0.1:9092", group_type="consumer", group_epoch=3, assignment_epoch=3,
    members=(
        _cmember(A, 3, [0], "classic"), _cmember(B, 3, [2, 3], "classic"),
        _cmember(X, 3, [1], "consumer"),
    ),
)  # fmt: skip


def _counted_classic_group():  # type: ignore[no-untyped-def]
    """The monitor with the group's two classic rebalances counted."""
    mon, apply = _monitor()
    apply("records", ([R0, R1, R2], 3))
    apply("caught_up", None)
    apply("described", (CLASSIC, {G: BOTH}, set(), 0.01, 0))
    assert mon.tallies[G].counts == {("member_joined", "classic"): 2}
    return mon, apply


def _settled(apply, listed, snap) -> None:  # type: ignore[no-untyped-def]
    # Rounds until the last generation described has settled (the settling time is
    # 3 s at --interval 1; the test's clock moves 100 ms a call).
    for _ in range(40):
        apply("described", (listed, {G: snap}, set(), 0.01, 10**6))


def test_the_online_upgrade_s_tombstone_is_no_deletion() -> None:
    # Before: the tombstone reset the group (a deletion counted, its counted generation
    # and its follower started over), and x's join, the upgrade's rebalance, was the new
    # group's first description: not counted.
    mon, apply = _counted_classic_group()
    counted: list[Diagnosed] = []
    mon.listeners.append(counted.append)
    apply("records", (UPGRADE, len(UPGRADE)))
    t = mon.tallies[G]
    assert (t.deletions, t.counted_generation) == (0, 2)
    assert mon.followers[G].state.generation == 2  # the classic group's, not a new one's
    _settled(apply, CONSUMER, MIXED)
    t = mon.tallies[G]
    assert t.deletions == 0
    assert t.counts == {("member_joined", "classic"): 2, ("member_joined", "consumer"): 1}
    [d] = counted
    assert (d.rebalance.generation, d.rebalance.protocol) == (3, "consumer")
    assert "kgctl-x" in d.diagnosis.trigger.evidence  # x's join, a and b there all along
    assert "kgctl-a" not in d.diagnosis.trigger.evidence
    rows, _ = mon.view()
    assert (rows[G].protocol, rows[G].generation, rows[G].tally.total) == ("consumer", 3, 3)


def test_the_upgrade_read_over_two_polls_while_listed_as_a_consumer_group() -> None:
    # The tombstone the last record of one poll, the consumer group's records in the
    # next: the listing says the group is a consumer group, so the tombstone waits.
    mon, apply = _counted_classic_group()
    apply("described", (CONSUMER, {}, set(), 0.01, 0))  # listed after the upgrade
    apply("records", (UPGRADE[:1], 1))
    assert mon.tallies[G].deletions == 0
    apply("records", (UPGRADE[1:], len(UPGRADE) - 1))
    _settled(apply, CONSUMER, MIXED)
    t = mon.tallies[G]
    assert t.deletions == 0 and t.total == 3


def test_a_tombstone_no_consumer_group_follows_is_a_deletion() -> None:
    mon, apply = _counted_classic_group()
    apply("records", ([_tombstone(5000)], 1))
    t = mon.tallies[G]
    assert (t.deletions, t.counted_generation) == (1, -1)
    assert mon.followers[G].state.generation < 0  # the group starts over
    # Made again: its generation 1 is counted, added to the same counts.
    apply("records", ([_record(0, [], 9000), _record(1, [A], 9100)], 2))
    _settled(apply, CLASSIC, BOTH)
    t = mon.tallies[G]
    assert t.deletions == 1 and t.counts == {("member_joined", "classic"): 3}


def test_a_consumer_group_made_long_after_the_tombstone_is_a_new_group() -> None:
    # Read in one poll (the history at start), but written a minute apart: a deletion,
    # then a new consumer group of the same name (the same rule as explain's, infer.py).
    mon, apply = _counted_classic_group()
    late = [_tombstone(5000), _joined(X, 65_000), _epoch(1, 65_000)]
    apply("records", (late, len(late)))
    t = mon.tallies[G]
    assert (t.deletions, t.counted_generation) == (1, -1)


def test_a_tombstone_the_listing_had_not_listed_is_a_deletion_at_once() -> None:
    # Not listed at the last round (its records said it existed): its tombstone, read
    # with nothing after it, deletes it in the same step.
    mon, apply = _counted_classic_group()
    apply("described", ({}, {}, set(), 0.01, 0))
    assert mon.tallies[G].deletions == 0
    apply("records", ([_tombstone(5000)], 1))
    assert mon.tallies[G].deletions == 1


def test_the_way_back_to_classic_is_no_deletion() -> None:
    # x leaves: Kafka deletes the consumer group's records and writes the classic group
    # again at the group's epoch (3) with a and b, who then rejoin (4). Neither the
    # consumer records' tombstones nor the upgrade's before them start the group over.
    mon, apply = _counted_classic_group()
    apply("records", (UPGRADE, len(UPGRADE)))
    _settled(apply, CONSUMER, MIXED)
    gone = [
        ConsumerGroupRecord(G, kind, None, member, timestamp_ms=9000, partition=7)
        for kind, member in [
            (ConsumerRecordType.MEMBER_METADATA, X), (ConsumerRecordType.MEMBER_METADATA, A),
            (ConsumerRecordType.MEMBER_METADATA, B), (ConsumerRecordType.GROUP_METADATA, None),
        ]
    ]  # fmt: skip
    back = [*gone, _record(3, [A, B], 9000), _record(4, [A, B], 9300)]
    apply("records", (back, len(back)))
    _settled(apply, CLASSIC, BOTH)
    t = mon.tallies[G]
    assert t.deletions == 0 and t.counted_generation == 4
    assert t.counts[("member_joined", "classic")] == 2 and t.total > 3
    rows, _ = mon.view()
    assert (rows[G].protocol, rows[G].generation) == ("classic", 4)


# -- the way back: the classic record at the consumer group's last epoch ------------------

# x leaves: Kafka deletes the consumer group's records and writes the classic group again
# with a and b at the consumer group's last epoch (3, ClassicGroup.fromConsumerGroup): the
# record that stores x's leave. Then the rebalance the downgrade asks for ("Downgrade
# group … from consumer to classic for member leaving", Kafka's log) makes generation 4.
GONE = [
    ConsumerGroupRecord(G, kind, None, member, timestamp_ms=9000, partition=7)
    for kind, member in [
        (ConsumerRecordType.MEMBER_METADATA, X), (ConsumerRecordType.MEMBER_METADATA, A),
        (ConsumerRecordType.MEMBER_METADATA, B), (ConsumerRecordType.GROUP_METADATA, None),
    ]
]  # fmt: skip
WAY_BACK = [*GONE, _record(3, [A, B], 9002), _record(4, [A, B], 10200)]
# DescribeGroups' answer once the group is classic again (the adapter says it is classic).
BACK = replace(BOTH, group_type="classic")


def _rounds(apply, listed, snap, taken: int) -> None:  # type: ignore[no-untyped-def]
    # As _settled, with the rounds' own time: taken before a record is read, a round
    # does not describe what the record stored.
    for _ in range(40):
        apply("described", (listed, {G: snap}, set(), 0.01, taken))


def _upgraded_group():  # type: ignore[no-untyped-def]
    """The group counted through its upgrade (x's join, epoch 3), its rounds taken
    before the way back is read."""
    mon, apply = _counted_classic_group()
    apply("records", (UPGRADE, len(UPGRADE)))
    _rounds(apply, CONSUMER, MIXED, 0)
    assert mon.tallies[G].counts[("member_joined", "consumer")] == 1
    counted: list[Diagnosed] = []
    mon.listeners.append(counted.append)
    return mon, apply, counted


def _said(counted: list[Diagnosed]) -> list[tuple[int, str, str]]:
    return [(d.rebalance.generation, d.rebalance.protocol, d.rebalance.cause) for d in counted]


def test_the_way_back_counts_the_leave_its_classic_record_stores() -> None:
    # Before: generation 3 (classic) had the number of epoch 3 (x's join, counted), so it
    # was not counted, and generation 4 was counted as rejoin_requested on the consumer
    # protocol: counted [(4, 'consumer', 'rejoin_requested')].
    mon, apply, counted = _upgraded_group()
    apply("records", (WAY_BACK, len(WAY_BACK)))
    _rounds(apply, CLASSIC, BACK, 10**6)  # described after the records were read
    said = _said(counted)
    assert said[0] == (3, "classic", "member_left")
    assert "kgctl-x" in counted[0].diagnosis.trigger.evidence
    assert [g for g, _, _ in said] == [3, 4]  # each once
    assert said[1][1:] == ("classic", "member_left")  # the leave's, as explain's
    t = mon.tallies[G]
    assert t.deletions == 0
    assert t.counts == {
        ("member_joined", "classic"): 2,
        ("member_joined", "consumer"): 1,
        ("member_left", "classic"): 2,
    }
    rows, _ = mon.view()
    assert (rows[G].protocol, rows[G].generation, rows[G].tally.total) == ("classic", 4, 5)


def test_the_way_back_described_before_its_records_are_read() -> None:
    # The polls saw the group classic again before the log reader read the records: x's
    # leave is still the record's, and the downgrade's rebalance (the same members) is
    # the leave's, by the diagnosis explain runs. Before: counted
    # [(4, 'classic', 'rejoin_requested')], generation 3 not at all.
    mon, apply, counted = _upgraded_group()
    _rounds(apply, CLASSIC, BACK, 0)
    apply("records", (WAY_BACK, len(WAY_BACK)))
    _rounds(apply, CLASSIC, BACK, 10**6)
    assert _said(counted) == [(3, "classic", "member_left"), (4, "classic", "member_left")]
    assert "back to the classic protocol as kgctl-x" in counted[1].diagnosis.trigger.evidence
    t = mon.tallies[G]
    assert t.total == 5 and t.counts[("member_left", "classic")] == 2


def test_a_classic_generation_and_a_consumer_epoch_of_one_number_are_two() -> None:
    # The tally's own de-duplication: by protocol and generation. A record read again
    # (the history replayed, a later poll) is still counted once.
    def rebalance(gen: int, protocol: Protocol, cause: str) -> Rebalance:
        return Rebalance(G, gen, protocol, cause, "inferred", 1000 * gen, None)

    t = None
    for r in [
        rebalance(2, "classic", "member_joined"),
        rebalance(3, "consumer", "member_joined"),
        rebalance(3, "classic", "member_left"),
        rebalance(3, "consumer", "member_joined"),  # read again
        rebalance(3, "classic", "member_left"),  # read again
        rebalance(4, "classic", "member_left"),
    ]:
        t = tally(t, r, 10_000)
    assert t is not None and t.total == 4 and t.counted_generation == 4
    assert t.counts[("member_left", "classic")] == 2


def test_a_group_that_stays_upgraded_keeps_only_the_members_it_has() -> None:
    # Consumer-protocol processes started again and again: each joins under a new member
    # id and leaves (its record deleted, the epoch bumped). Before: every id stayed in the
    # inferrer until a classic record came (one more per restart, for months), and one
    # epoch more per rebalance. The way back still reads x's leave alone.
    from kgctl.observe.infer import EPOCHS_KEPT

    mon, apply, counted = _upgraded_group()
    epoch, ts, churn = 3, 6000, []
    for i in range(300):
        mid = f"churn-{i}"
        value = MemberMetadata(f"kgctl-{mid}", "/127.0.0.1", None, ("t",), None, 300000, None)
        churn += [
            ConsumerGroupRecord(G, ConsumerRecordType.MEMBER_METADATA, value, mid,
                                timestamp_ms=ts, partition=7),
            _epoch(epoch + 1, ts),
            ConsumerGroupRecord(G, ConsumerRecordType.MEMBER_METADATA, None, mid,
                                timestamp_ms=ts + 10, partition=7),
            _epoch(epoch + 2, ts + 10),
        ]  # fmt: skip
        epoch, ts = epoch + 2, ts + 20
    apply("records", (churn, len(churn)))
    inferrer = mon.followers[G].inferrer
    assert set(inferrer.stored_members or {}) == {A, B, X}
    assert len(inferrer.consumer_epochs_between) <= EPOCHS_KEPT
    # The way back, at the consumer group's last epoch: x's leave, and only x's.
    gone = [replace(r, timestamp_ms=ts) for r in GONE]
    back = [*gone, _record(epoch, [A, B], ts + 2)]
    apply("records", (back, len(back)))
    _rounds(apply, CLASSIC, BACK, 10**6)
    said = _said(counted)
    assert said[-1] == (epoch, "classic", "member_left")
    evidence = counted[-1].diagnosis.trigger.evidence
    assert "kgctl-x" in evidence and "churn" not in evidence
