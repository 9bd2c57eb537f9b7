"""Pure tests of `__consumer_offsets` parsing, on bytes built here field by field."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from kgctl.adapters.group_records import (
    GroupMetadata,
    MemberRecord,
    RecordError,
    consumer_assignment,
    consumer_topics,
    java_string_hash,
    kafka_abs,
    parse_key,
    parse_record,
    parse_value,
    partition_for,
)

# -- an encoder for the test: classic (int16/int32 lengths) or flexible (varints) ------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return uvarint(0) if flexible else struct.pack(">h", -1)
    raw = text.encode("utf-8")
    return (uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw


def blob(raw: bytes, flexible: bool) -> bytes:
    return (uvarint(len(raw) + 1) if flexible else struct.pack(">i", len(raw))) + raw


def tags(flexible: bool, extra: bytes = b"") -> bytes:
    if not flexible:
        return b""
    if not extra:
        return uvarint(0)
    # one unknown tagged field (tag 7): a reader must skip it
    return uvarint(1) + uvarint(7) + uvarint(len(extra)) + extra


def value(version: int, meta: GroupMetadata, unknown_tag: bytes = b"") -> bytes:
    flex = version >= 4
    out = struct.pack(">h", version)
    out += string(meta.protocol_type, flex) + struct.pack(">i", meta.generation)
    out += string(meta.protocol, flex) + string(meta.leader, flex)
    if version >= 2:
        out += struct.pack(">q", meta.state_ts_ms)
    out += uvarint(len(meta.members) + 1) if flex else struct.pack(">i", len(meta.members))
    for m in meta.members:
        out += string(m.member_id, flex)
        if version >= 3:
            out += string(m.instance_id, flex)
        out += string(m.client_id, flex) + string(m.host, flex)
        if version >= 1:
            out += struct.pack(">i", m.rebalance_timeout_ms)
        out += struct.pack(">i", m.session_timeout_ms)
        given = b"\x00\x01assign" if m.assignment is None else assignment(m.assignment)
        out += blob(subscription(m.subscription or ()), flex) + blob(given, flex)
        out += tags(flex, unknown_tag)
    return out + tags(flex, unknown_tag)


def subscription(topics: tuple[str, ...]) -> bytes:
    """A consumer protocol subscription (v1): version, topics, user data, owned partitions."""
    out = struct.pack(">hi", 1, len(topics)) + b"".join(string(t, False) for t in topics)
    return out + struct.pack(">i", -1) + struct.pack(">i", 0)


def assignment(owned: dict[str, tuple[int, ...]]) -> bytes:
    """A consumer protocol assignment (v0): version, each topic's partitions, user data."""
    out = struct.pack(">hi", 0, len(owned))
    for topic, ids in owned.items():
        out += string(topic, False) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    return out + struct.pack(">i", -1)


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + string(group, False)


MEMBERS = (
    MemberRecord("c1-aaa", "c1", "/10.0.0.1", "static-1", 300000, 10000, ("orders",)),
    MemberRecord("c2-bbb", "c2", "/10.0.0.2", None, 300000, 10000, ("orders", "pay")),
)


def expected(version: int) -> GroupMetadata:
    members = tuple(
        MemberRecord(
            m.member_id,
            m.client_id,
            m.host,
            m.instance_id if version >= 3 else None,
            m.rebalance_timeout_ms if version >= 1 else -1,
            m.session_timeout_ms,
            m.subscription,
        )
        for m in MEMBERS
    )
    return GroupMetadata(
        generation=7,
        protocol_type="consumer",
        protocol="range",
        leader="c1-aaa",
        state_ts_ms=1_700_000_000_123 if version >= 2 else -1,
        members=members,
        version=version,
    )


# -- the tests --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_value_version_parses(version: int) -> None:
    meta = expected(version)
    assert parse_value(value(version, meta)) == meta


def test_flexible_value_skips_unknown_tagged_fields() -> None:
    meta = expected(4)
    assert parse_value(value(4, meta, unknown_tag=b"future")) == meta


def test_an_empty_generation_has_no_protocol_leader_or_members() -> None:
    for version in (3, 4):
        meta = GroupMetadata(generation=3, protocol_type="consumer", state_ts_ms=5, version=version)
        assert parse_value(value(version, meta)) == meta


def test_a_subscription_that_is_not_the_consumer_protocol_is_left_unknown() -> None:
    assert consumer_topics(subscription(("b", "a"))) == ("a", "b")
    assert consumer_topics(b"\x00") is None
    connect = GroupMetadata(generation=1, protocol_type="connect", members=(MEMBERS[1],))
    parsed = parse_value(value(3, connect))
    assert parsed.members[0].subscription is None  # not decoded for other protocols


def test_unknown_versions_and_truncated_values_are_errors() -> None:
    with pytest.raises(RecordError, match="version 5"):
        parse_value(struct.pack(">h", 5) + b"\x00" * 20)
    whole = value(3, expected(3))
    for cut in (1, 5, len(whole) // 2, len(whole) - 1):
        with pytest.raises(RecordError):
            parse_value(whole[:cut])


def test_keys_other_than_group_metadata_are_skipped() -> None:
    assert parse_key(group_key("orders-app")) == "orders-app"
    # an offset commit key (v1): group, topic, partition
    commit = struct.pack(">h", 1) + string("orders-app", False) + string("t", False) + b"\0" * 4
    assert parse_key(commit) is None
    # a KIP-848 consumer group metadata key (record type 3)
    assert parse_key(struct.pack(">h", 3) + string("orders-app", False)) is None
    assert parse_key(b"") is None and parse_key(None) is None


def test_a_record_of_this_group_a_tombstone_and_another_group() -> None:
    raw = value(3, expected(3))
    rec = parse_record(group_key("g"), raw, "g", offset=42, timestamp_ms=9, partition=4)
    assert rec is not None and rec.metadata == expected(3)
    assert (rec.offset, rec.timestamp_ms, rec.partition) == (42, 9, 4)
    tomb = parse_record(group_key("g"), None, "g")
    assert tomb is not None and tomb.metadata is None
    assert parse_record(group_key("other"), raw, "g") is None


def test_java_string_hash_and_the_partition_of_a_group() -> None:
    # Values printed by the JVM's String.hashCode (jshell).
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("orders-app") == 772757305
    assert java_string_hash("console-consumer-40813") == 161171197
    # Non-ASCII: hashed over UTF-16 code units, a surrogate pair counts twice.
    assert java_string_hash("gr\u00fcppe-\U0001f600") == -1039948164
    assert java_string_hash("") == 0
    # The one string famous for hashing to Integer.MIN_VALUE: Utils.abs makes it 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(-(2**31)) == 0 and kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("orders-app", 50) == 772757305 % 50
    assert partition_for("gr\u00fcppe-\U0001f600", 50) == 1039948164 % 50
    assert partition_for("anything", 1) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)


@pytest.mark.parametrize("version", [0, 3, 4])
def test_each_members_stored_assignment_is_read(version: int) -> None:
    # What the leader's SyncGroup gave each member is stored with the generation: the
    # cluster alone then knows who owned what in every generation (moves, revocations).
    meta = replace(
        expected(version),
        members=(
            replace(expected(version).members[0], assignment={"orders": (0, 1, 2)}),
            replace(expected(version).members[1], assignment={}),
        ),
    )
    got = parse_value(value(version, meta))
    assert [m.assignment for m in got.members] == [{"orders": (0, 1, 2)}, {}]


def test_an_assignment_that_does_not_parse_is_left_unknown() -> None:
    assert consumer_assignment(b"") is None  # a generation not synced yet stores none
    assert consumer_assignment(b"\x00\x01assign") is None
    assert consumer_assignment(assignment({"pay": (3,), "orders": (1, 0)})) == {
        "orders": (0, 1),
        "pay": (3,),
    }
