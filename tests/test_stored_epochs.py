"""A consumer-protocol group's past rebalances from its records in __consumer_offsets
(kgctl/observe/stored_epochs.py), diagnosed as explain does. The records are those Kafka
4.4.0 wrote for three librdkafka members on `group.protocol=consumer` (a scale-out, a
kill, a partition growth, a graceful stop), read back on 12-04; before, explain said of
such a group only that its past rebalances were unknown from the cluster."""

from __future__ import annotations

from kgctl.adapters.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerRecordType,
    GroupEpoch,
    MemberAssignment,
    MemberMetadata,
)
from kgctl.adapters.group_log import AnyGroupRecord
from kgctl.adapters.group_records import GroupMetadata, GroupRecord, MemberRecord
from kgctl.model.bounds import GroupBounds
from kgctl.model.diagnosis import FAILED, INFERRED, BrokerReason, Context
from kgctl.model.diagnosis.types import BROKER_CONFIG
from kgctl.model.explanation import explain
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.observe.infer import Inferrer
from kgctl.observe.stored_epochs import stored_epochs

C1, C2, C3 = "TF2eYdumTGqkJe3RadDkzg", "hVvTMyWUSGOkfYm+JQN9xA", "my0oaJpLQ++opdau1bqi3Q"
HASH_6, HASH_9 = -3728178157957298230, -3124578664879930539  # 6 and 9 partitions


def _member(mid: str, ts: int, client: str | None) -> ConsumerGroupRecord:
    value = (
        None
        if client is None
        else MemberMetadata(client, "/127.0.0.1", None, ("t",), "", 300000, None)
    )
    return ConsumerGroupRecord("g", ConsumerRecordType.MEMBER_METADATA, value, mid, timestamp_ms=ts)


def _epoch(n: int, ts: int, digest: int | None = HASH_6) -> ConsumerGroupRecord:
    value = GroupEpoch(n, digest)
    return ConsumerGroupRecord("g", ConsumerRecordType.GROUP_METADATA, value, timestamp_ms=ts)


def _assigned(mid: str, ts: int, epoch: int, n: int) -> ConsumerGroupRecord:
    value = MemberAssignment(epoch, epoch - 1, 0, n, 0)
    kind = ConsumerRecordType.CURRENT_MEMBER_ASSIGNMENT
    return ConsumerGroupRecord("g", kind, value, mid, timestamp_ms=ts)


# The run's records, in their order (the assignment records abridged).
RUN: list[AnyGroupRecord] = [
    _member(C2, 1000, "c2"), _epoch(2, 1000), _assigned(C2, 1000, 2, 6),
    _member(C1, 1700, "c1"), _epoch(3, 1700), _assigned(C1, 2100, 3, 3),
    _member(C3, 8700, "c3"), _epoch(4, 8700), _assigned(C3, 9200, 4, 2),
    _member(C3, 26200, None), _epoch(5, 26200), _assigned(C1, 26700, 5, 3),
    _epoch(6, 35000, HASH_9), _assigned(C1, 35200, 6, 5),
    _member(C2, 46700, None), _epoch(7, 46700), _assigned(C1, 47200, 7, 9),
]  # fmt: skip


def _by_epoch(records: list[AnyGroupRecord], ctx: Context | None = None) -> dict[int, object]:
    told = stored_epochs("g", records)
    # explain reads the group's description now too: a consumer group.
    c1 = MemberSnapshot(
        member_id=C1, client_id="c1", host="/127.0.0.1", subscription=("t",),
        partitions={"t": list(range(9))}, member_epoch=7, target={"t": list(range(9))},
    )  # fmt: skip
    now = GroupSnapshot(
        group="g", state="Stable", group_type="consumer", group_epoch=7, assignment_epoch=7,
        members=(c1,),
    )  # fmt: skip
    [described] = [e for e in Inferrer("g").observe(now, 59000) if e.type == "GroupObserved"]
    events = [*told.events, described]
    return {d.generation: d for d in explain("g", events, 60000, ctx).generations}


def test_each_stored_epoch_after_the_first_is_a_rebalance_with_its_cause() -> None:
    by = _by_epoch(RUN)
    # The first epoch read is where the story starts, not a rebalance.
    assert sorted(by) == [3, 4, 5, 6, 7]
    said = {
        n: (d.trigger.cause, d.trigger.who, d.trigger.confidence)  # type: ignore[attr-defined]
        for n, d in by.items()
    }
    assert said[4] == ("member_joined", "c3", INFERRED)
    # A killed member's records are deleted as a leaver's are: which it was is not said.
    assert said[5][0] == "member_left" and said[5][2] == INFERRED
    assert "does not say whether it left or its session expired" in (
        by[5].trigger.evidence  # type: ignore[attr-defined]
    )
    # Same members and subscriptions, another hash of the topics' metadata: a growth.
    assert said[6] == ("partitions_changed", "", INFERRED)
    assert "hash of the subscribed topics' metadata" in by[6].trigger.evidence  # type: ignore[attr-defined]
    # c2 joined with the first epoch read, so it was never told as joining: its leave is
    # still named (before: none, as CI's truth table said of java-consumer's stop when
    # the member stopped was the first to join).
    assert said[7] == ("member_left", "c2", INFERRED)
    # Assignments are stored by topic id: nothing moved or revoked is claimed.
    for n in (4, 5, 6, 7):
        d = by[n]
        assert d.partitions_moved is None, n  # type: ignore[attr-defined]
        assert not d.costs, n  # type: ignore[attr-defined]
    # Each began when its epoch was written.
    assert by[4].start_ms == 8700  # type: ignore[attr-defined]


def test_with_the_broker_log_a_removed_members_wait_is_the_clusters_session() -> None:
    line = BrokerReason(
        26200, "g", f"member {C3} has failed (session timeout), removed", kind=FAILED
    )
    bounds = GroupBounds.from_configs({"group.consumer.session.timeout.ms": "10000"})
    d = _by_epoch(RUN, Context(broker_reasons=(line,), bounds=bounds))[5]
    assert (d.trigger.cause, d.trigger.who) == ("timed_out", "c3")  # type: ignore[attr-defined]
    [wait] = d.critical_path  # type: ignore[attr-defined]
    assert (wait.why, wait.ms, wait.member) == ("dead", 10000, "c3")
    # The broker's setting, which a group may override: not exact.
    assert (wait.confidence, wait.session_from) == (INFERRED, BROKER_CONFIG)
    # No client setting shortens a consumer-protocol session: none is advised.
    assert all(a.setting != "session.timeout.ms" for a in d.advice)  # type: ignore[attr-defined]


def test_a_member_back_with_its_member_id_was_fenced() -> None:
    # A consumer-protocol client keeps its member id: its records deleted (fenced, or
    # past max.poll.interval.ms), then written again under the same id.
    records = [*RUN[:9], _member(C3, 20000, None), _epoch(5, 20000),
               _member(C3, 21000, "c3"), _epoch(6, 21000)]  # fmt: skip
    d = _by_epoch(records)[6]
    assert (d.trigger.cause, d.trigger.confidence) == ("timed_out", INFERRED)  # type: ignore[attr-defined]


def test_the_epoch_a_classic_group_was_upgraded_at_is_the_start_not_a_rebalance() -> None:
    classic = GroupRecord(
        "g",
        GroupMetadata(2, "consumer", "range", "a", 400, (
            MemberRecord("a", "c1", "/127.0.0.1", None, 300000, 45000, ("t",), {"t": (0,)}),
        )),
        0, 500,
    )  # fmt: skip
    upgrade = [GroupRecord("g", None, 1, 900), _member("a", 900, "c1"),
               _member(C3, 900, "c3"), _epoch(3, 900)]  # fmt: skip
    told = stored_epochs("g", [classic, *upgrade, _member(C2, 5000, "c2"), _epoch(4, 5000)])
    assert (told.first_epoch, told.after_classic) == (3, True)
    gens = [e.data["group_epoch"] for e in told.events if e.type == "GenerationChanged"]
    assert gens == [4]


def test_a_deleted_consumer_group_made_again_starts_over() -> None:
    deleted = ConsumerGroupRecord("g", ConsumerRecordType.GROUP_METADATA, None, timestamp_ms=50000)
    again = [_member(C2, 60000, "c2"), _epoch(1, 60000), _assigned(C2, 60100, 1, 6),
             _member(C1, 61000, "c1"), _epoch(2, 61000), _assigned(C2, 61200, 2, 3),
             _assigned(C1, 61300, 2, 3)]  # fmt: skip
    told = stored_epochs("g", [*RUN, deleted, *again])
    # Epoch 1 of the new group is its start; nothing of the old one is compared with it.
    assert told.first_epoch == 1
    changed = [e.data for e in told.events if e.type == "GenerationChanged"]
    assert [d["group_epoch"] for d in changed] == [3, 4, 5, 6, 7, 2]
    # Each group's epochs are dated by its own records (the new group's epoch 2 is not
    # the old one's, reconciled at 1000), the old group's epoch 7 by its own.
    stable = {d["group_epoch"]: d.get("stable_ms") for d in changed}
    assert stable[2] == 61300 and stable[7] == 47200


def _first_member_goes(at: int) -> list[AnyGroupRecord]:
    """c3 joins first (epoch 2, where the story starts), c1 and c2 after it; c3's record
    is deleted at `at` (epoch 5)."""
    return [
        _member(C3, 18103, "c3"), _epoch(2, 18103), _assigned(C3, 18103, 2, 6),
        _member(C1, 18275, "c1"), _epoch(3, 18275),
        _member(C2, 18326, "c2"), _epoch(4, 18326),
        _assigned(C1, 19853, 4, 2), _assigned(C2, 19865, 4, 2), _assigned(C3, 19710, 4, 2),
        _member(C3, at, None), _epoch(5, at),
        _assigned(C1, at + 353, 5, 3), _assigned(C2, at + 368, 5, 3),
    ]  # fmt: skip


def test_the_first_members_leave_is_named_as_any_others() -> None:
    # CI's truth run of java-consumer's stop (12-04): c3 joined first (epoch 2, where the
    # story starts), c1 and c2 after it; c3 stopped (epoch 5). Its join was never told,
    # so its leave was not news for the rebalance: "member left", nobody named, which the
    # docs table's cell said only when the member stopped happened to join first.
    told = stored_epochs("g", _first_member_goes(22639))
    [d] = [d for d in explain("g", list(told.events), 30000, None).generations if d.generation == 5]
    assert (d.trigger.cause, d.trigger.who, d.trigger.confidence) == ("member_left", "c3", INFERRED)


def test_the_broker_logs_removal_of_a_first_member_names_it() -> None:
    # A truth run of java-consumer's kill (12-04): c3 joined first (the story's start),
    # was killed, and the broker's log named it by its member id alone as it removed it.
    # The trigger and the wait said that id ("timed out by my0oa…", "waited for my0oa…
    # dead"): nobody of that name was in the group.
    line = BrokerReason(
        32639, "g", f"member {C3} has failed (session timeout), removed", kind=FAILED
    )
    bounds = GroupBounds.from_configs({"group.consumer.session.timeout.ms": "10000"})
    told = stored_epochs("g", _first_member_goes(32639))
    members = tuple(
        MemberSnapshot(
            member_id=mid, client_id=name, host="/127.0.0.1", subscription=("t",),
            partitions={"t": parts}, member_epoch=5, target={"t": parts},
        )
        for mid, name, parts in ((C1, "c1", [0, 1, 2]), (C2, "c2", [3, 4, 5]))
    )  # fmt: skip
    now = GroupSnapshot(
        group="g", state="Stable", group_type="consumer", group_epoch=5, assignment_epoch=5,
        members=members,
    )  # fmt: skip
    [described] = [e for e in Inferrer("g").observe(now, 39000) if e.type == "GroupObserved"]
    ctx = Context(broker_reasons=(line,), bounds=bounds)
    found = explain("g", [*told.events, described], 40000, ctx)
    [d] = [d for d in found.generations if d.generation == 5]
    assert (d.trigger.cause, d.trigger.who) == ("timed_out", "c3")
    assert [(w.why, w.member) for w in d.critical_path] == [("dead", "c3")]
