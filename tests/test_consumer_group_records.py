"""A consumer-protocol group's records in `__consumer_offsets`, parsed from the bytes a
real Kafka 4.4.0 wrote for two librdkafka members (`group.protocol=consumer`) of group
`cap-g` on topic `cap-t` (4 partitions): member b joined (epoch 3), a revoked two
partitions, b left (epoch 4). Pure, no broker."""

from __future__ import annotations

import pytest

from kgctl.adapters.consumer_group_records import (
    ConsumerRecordType,
    GroupEpoch,
    MemberAssignment,
    MemberMetadata,
    parse_consumer_record,
)
from kgctl.adapters.group_records import RecordError

B = "DPLFKxCtS+GtJ2gWWLgtNg"
A = "tJb58TCIQsCg5o1kLzTZPA"
B_KEY = "000500056361702d67001644504c464b784374532b47744a326757574c67744e67"
B_JOINED = "0000000002620b2f3132372e302e302e3102066361702d7401000493e00001000100"
EPOCH_KEY = "000300056361702d67"
EPOCH_3 = "0000000000030100087ef354d71ca0c46a"
EPOCH_5 = "00000000000500"  # the group empty: no metadata hash written
A_KEY = "000800056361702d670016744a62353854434951734367356f316b4c7a545a5041"
A_REVOKING = (
    "000000000002000000020102f13e2ff1314647c080a0102edd42afd303000000000000000101000903"
    "000000020000000202f13e2ff1314647c080a0102edd42afd303000000020000000301000903000000"
    "020000000200"
)
A_AT_3 = (
    "000000000003000000020002f13e2ff1314647c080a0102edd42afd303000000000000000101000903"
    "00000002000000020100"
)


def parse(key: str, value: str | None) -> object:
    return parse_consumer_record(
        bytes.fromhex(key), None if value is None else bytes.fromhex(value), offset=7
    )


def test_a_member_s_metadata_says_who_joined_and_what_it_subscribed() -> None:
    rec = parse(B_KEY, B_JOINED)
    assert rec is not None
    assert (rec.group, rec.kind, rec.member_id, rec.offset) == (
        "cap-g", ConsumerRecordType.MEMBER_METADATA, B, 7
    )  # fmt: skip
    assert rec.value == MemberMetadata(
        client_id="b", host="/127.0.0.1", instance_id=None, subscribed_topics=("cap-t",),
        subscribed_regex="", rebalance_timeout_ms=300_000, server_assignor=None,
    )  # fmt: skip


def test_the_group_epoch_and_its_metadata_hash() -> None:
    rec = parse(EPOCH_KEY, EPOCH_3)
    assert rec is not None and rec.kind is ConsumerRecordType.GROUP_METADATA
    assert rec.member_id is None
    assert rec.value == GroupEpoch(3, 0x7EF354D71CA0C46A)
    later = parse(EPOCH_KEY, EPOCH_5)
    assert later is not None and later.value == GroupEpoch(5, None)


def test_a_member_s_assignment_counts_partitions_and_those_to_revoke() -> None:
    revoking = parse(A_KEY, A_REVOKING)
    assert revoking is not None and revoking.member_id == A
    assert revoking.value == MemberAssignment(
        member_epoch=2, previous_member_epoch=2, state=1, assigned=2, pending_revocation=2
    )
    done = parse(A_KEY, A_AT_3)
    assert done is not None
    assert done.value == MemberAssignment(
        member_epoch=3, previous_member_epoch=2, state=0, assigned=2, pending_revocation=0
    )


def test_a_tombstone_is_the_member_gone_and_other_records_are_not_read() -> None:
    gone = parse(B_KEY, None)
    assert gone is not None and gone.value is None and gone.member_id == B
    # A target assignment (type 6) and a classic group's metadata (type 2): not these.
    assert parse("000600056361702d67", "00000000000500") is None
    assert parse("000200056361702d67", "0003") is None


def test_bytes_that_do_not_parse_say_so() -> None:
    with pytest.raises(RecordError, match="version 9"):
        parse(EPOCH_KEY, "0009" + EPOCH_3[4:])
    with pytest.raises(RecordError, match="truncated"):
        parse(A_KEY, A_AT_3[:30])


def test_a_classic_groups_follower_hands_on_its_consumer_records_as_between() -> None:
    """`kgctl watch` of a classic group follows its classic records; the consumer-group
    records the online upgrade writes go to `on_between` (the Inferrer's time between),
    where before they were dropped."""
    from types import SimpleNamespace

    from kgctl.adapters.group_log import GroupLogReader
    from kgctl.settings import ClientSettings

    between: list[object] = []
    classic: list[object] = []
    reader = GroupLogReader(
        ClientSettings(), "cap-g", on_record=classic.append, on_between=between.append
    )
    raw = SimpleNamespace(
        key=bytes.fromhex(B_KEY), value=bytes.fromhex(B_JOINED), offset=9, timestamp=1, partition=0
    )
    reader._hand_on(raw, 0)
    assert [getattr(r, "member_id", None) for r in between] == [B] and classic == []
