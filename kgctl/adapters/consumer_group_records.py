"""Consumer-protocol (KIP-848) groups' records in `__consumer_offsets`, parsed from bytes:
pure, no kafka-python.

The new group coordinator (Kafka 4.x; 3.7-3.9 with KIP-848 enabled) stores a consumer
group as several kinds of record in the partition its group id hashes to. A key is an
int16 record type and the key's fields in the classic encoding; a value is an int16
version and its fields in the flexible encoding (compact strings and arrays, tagged
fields last). A null value is a tombstone. The three kgctl reads:

- type 3, ConsumerGroupMetadata (key: group id; value v0: the group epoch, and from
  Kafka 4.1 a hash of the subscribed topics' metadata as tagged field 0): written when
  the group epoch is bumped, i.e. when a rebalance begins; a tombstone when the group is
  deleted;
- type 5, ConsumerGroupMemberMetadata (key: group id, member id; value v0: instance id,
  rack, client id, client host, subscribed topic names, subscribed regex, rebalance
  timeout, server assignor; a tagged field for members of a mixed group, not read):
  written when a member joins or changes what it sends; a tombstone when it leaves or
  is removed;
- type 8, ConsumerGroupCurrentMemberAssignment (key: group id, member id; value v0:
  member epoch, previous member epoch, state, assigned partitions and partitions pending
  revocation, each by topic id): written as the member's epoch and assignment move. The
  state codes as Kafka 4.4.0 wrote them for two librdkafka members: 0 when the member
  is at its epoch with nothing to give up, 1 while it must still revoke partitions, 2
  while it waits for partitions another member still holds.

The other types (offset commits 0-1, classic metadata 2, target assignments 4, 6, 7,
share and streams groups) are not read here. The schemas are Apache Kafka's
group-coordinator/src/main/resources/common/message/ConsumerGroup*.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from kgctl.adapters.group_records import FieldReader, RecordError


class ConsumerRecordType(IntEnum):
    """The key's record type of the consumer-group records kgctl reads."""

    GROUP_METADATA = 3
    MEMBER_METADATA = 5
    CURRENT_MEMBER_ASSIGNMENT = 8


KEY_PREFIXES = frozenset(t.to_bytes(2, "big") for t in ConsumerRecordType)
METADATA_HASH_TAG = 0  # ConsumerGroupMetadataValue's tagged field (Kafka 4.1+)


@dataclass(frozen=True)
class GroupEpoch:
    """A consumer group's epoch as stored when it was bumped."""

    epoch: int
    metadata_hash: int | None = None  # None when not written (before Kafka 4.1)


@dataclass(frozen=True)
class MemberMetadata:
    """A consumer group's member as stored when it joined or changed."""

    client_id: str
    host: str
    instance_id: str | None
    subscribed_topics: tuple[str, ...]
    subscribed_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True)
class MemberAssignment:
    """A member's epoch and partitions as stored when they moved; partitions are counted,
    not named (the record names topics by id)."""

    member_epoch: int
    previous_member_epoch: int
    state: int  # the coordinator's MemberState code, as stored
    assigned: int  # partitions assigned to (or owned by) the member
    pending_revocation: int  # partitions it must still give up


Value = GroupEpoch | MemberMetadata | MemberAssignment


@dataclass(frozen=True)
class ConsumerGroupRecord:
    """One consumer-group record read from the topic; `value` None is a tombstone (the
    group deleted, for GROUP_METADATA; the member gone, for the member records)."""

    group: str
    kind: ConsumerRecordType
    value: Value | None
    member_id: str | None = None
    offset: int = -1
    timestamp_ms: int = -1  # when the broker appended it
    partition: int = -1


def parse_consumer_key(key: bytes | None) -> tuple[ConsumerRecordType, str, str | None] | None:
    """(type, group id, member id) of a consumer-group record's key; None for any other."""
    if not key or key[:2] not in KEY_PREFIXES:
        return None
    r = FieldReader(key)
    kind = ConsumerRecordType(r.int16())
    group = r.string()
    member = None if kind is ConsumerRecordType.GROUP_METADATA else r.string()
    return kind, group, member


def _value_reader(value: bytes, name: str) -> FieldReader:
    if len(value) < 2:
        raise RecordError(f"{name} shorter than its version")
    r = FieldReader(value, flexible=True)
    version = r.int16()
    if version != 0:
        raise RecordError(f"{name} version {version} is not known (0)")
    return r


def parse_group_epoch(value: bytes) -> GroupEpoch:
    r = _value_reader(value, "ConsumerGroupMetadataValue")
    epoch = r.int32()
    tags = r.tags()
    raw = tags.get(METADATA_HASH_TAG)
    digest = FieldReader(raw).int64() if raw is not None and len(raw) == 8 else None
    return GroupEpoch(epoch, digest)


def parse_member_metadata(value: bytes) -> MemberMetadata:
    r = _value_reader(value, "ConsumerGroupMemberMetadataValue")
    instance_id = r.nullable_string()
    r.nullable_string()  # rack
    client_id = r.string()
    host = r.string()
    topics = tuple(sorted(r.string() for _ in range(r.array_length())))
    regex = r.nullable_string()
    rebalance_timeout = r.int32()
    assignor = r.nullable_string()
    r.tags()
    return MemberMetadata(
        client_id=client_id,
        host=host,
        instance_id=instance_id,
        subscribed_topics=topics,
        subscribed_regex=regex,
        rebalance_timeout_ms=rebalance_timeout,
        server_assignor=assignor,
    )


def _count_partitions(r: FieldReader) -> int:
    total = 0
    for _ in range(r.array_length()):
        r.take(16)  # the topic id
        n = r.array_length()
        r.take(4 * n)
        total += n
        r.tags()
    return total


def parse_member_assignment(value: bytes) -> MemberAssignment:
    r = _value_reader(value, "ConsumerGroupCurrentMemberAssignmentValue")
    epoch = r.int32()
    previous = r.int32()
    state = r.int8()
    assigned = _count_partitions(r)
    pending = _count_partitions(r)
    r.tags()
    return MemberAssignment(epoch, previous, state, assigned, pending)


_PARSERS: dict[ConsumerRecordType, Callable[[bytes], Value]] = {
    ConsumerRecordType.GROUP_METADATA: parse_group_epoch,
    ConsumerRecordType.MEMBER_METADATA: parse_member_metadata,
    ConsumerRecordType.CURRENT_MEMBER_ASSIGNMENT: parse_member_assignment,
}


def parse_consumer_record(
    key: bytes | None,
    value: bytes | None,
    offset: int = -1,
    timestamp_ms: int = -1,
    partition: int = -1,
    wanted: Callable[[str], bool] = lambda _group: True,
) -> ConsumerGroupRecord | None:
    """A consumer-group record of the kinds above, of a group `wanted` accepts, from a
    raw key and value; None for any other record (its value is then not parsed). Raises
    RecordError on bytes that do not parse."""
    found = parse_consumer_key(key)
    if found is None or not wanted(found[1]):
        return None
    kind, group, member = found
    parsed = None if value is None else _PARSERS[kind](value)
    return ConsumerGroupRecord(group, kind, parsed, member, offset, timestamp_ms, partition)
