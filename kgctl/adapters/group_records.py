"""Classic groups' records in `__consumer_offsets`, parsed from bytes: pure, no kafka-python.

The coordinator persists each classic group's metadata in the internal topic, in the
partition its group id hashes to (`partition_for`). A record's key starts with an int16
record type: 0 and 1 are offset commits, 2 is a group's metadata (the group id follows),
higher ones are the records of KIP-848 groups (Kafka 4.x). The value starts with an
int16 version of GroupMetadataValue:

- v0: protocol type, generation, protocol (nullable), leader (nullable), members
  [member id, client id, client host, session timeout, subscription, assignment]; the
  subscription of a "consumer" group is its topics (only those are decoded here)
- v1: adds each member's rebalance timeout (after the client host)
- v2: adds the current state timestamp (after the leader)
- v3: adds each member's group instance id (after the member id)
- v4: the same fields in the flexible encoding (compact strings, arrays and bytes as
  unsigned varints, a tagged-field section after each member and after the whole value)

A null value is a tombstone: the group was deleted. Kafka 4.4 writes v3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"
GROUP_METADATA_KEY = 2  # the key's record type for a classic group's metadata
MAX_VALUE_VERSION = 4


class RecordError(ValueError):
    """Bytes that do not parse as the record they claim to be."""


@dataclass(frozen=True)
class MemberRecord:
    """One member as the coordinator stored it with its generation."""

    member_id: str
    client_id: str = ""
    host: str = ""
    instance_id: str | None = None
    rebalance_timeout_ms: int = -1
    session_timeout_ms: int = -1
    subscription: tuple[str, ...] | None = None  # topics, when the protocol is "consumer"
    # The partitions the leader gave it for this generation, when the protocol is
    # "consumer" (None when not: an Empty generation's members have none stored).
    assignment: dict[str, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class GroupMetadata:
    """A classic group's stored metadata: what it looked like once a generation began."""

    generation: int
    protocol_type: str = ""
    protocol: str | None = None  # the agreed assignor; None in an Empty generation
    leader: str | None = None
    state_ts_ms: int = -1  # currentStateTimestamp (v2+), -1 when absent
    members: tuple[MemberRecord, ...] = ()
    version: int = 0  # the value's own version


@dataclass(frozen=True)
class GroupRecord:
    """One group-metadata record read from the topic; `metadata` None means deleted."""

    group: str
    metadata: GroupMetadata | None
    offset: int = -1
    timestamp_ms: int = -1  # when the broker appended it
    partition: int = -1


def java_string_hash(text: str) -> int:
    """String.hashCode() of the JVM: over UTF-16 code units, wrapped to a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: the absolute value, except that the int32 minimum maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition that holds `group`'s records (and coordinator)."""
    if partitions <= 0:
        raise ValueError(f"{OFFSETS_TOPIC} has {partitions} partitions")
    return kafka_abs(java_string_hash(group)) % partitions


class FieldReader:
    """Big-endian fields off a byte string, classic or flexible (compact) encoding."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data, self.pos, self.flexible = data, 0, flexible

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordError(f"truncated at byte {self.pos} (wanted {n} more)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordError(f"varint too long at byte {self.pos}")

    def _length(self, fixed: str) -> int:
        """A length; -1 for null. Flexible: unsigned varint of length + 1; else int16/32."""
        if self.flexible:
            return self.uvarint() - 1
        return self.int16() if fixed == "int16" else self.int32()

    def nullable_string(self) -> str | None:
        n = self._length("int16")
        if n < 0:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(f"string is not UTF-8 at byte {self.pos}") from exc

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordError(f"null where a string is required, at byte {self.pos}")
        return text

    def bytes_(self) -> bytes:
        n = self._length("int32")
        return self.take(n) if n > 0 else b""

    def skip_bytes(self) -> None:
        self.bytes_()

    def array_length(self) -> int:
        return max(self._length("int32"), 0)

    def skip_tags(self) -> None:
        self.tags()

    def tags(self) -> dict[int, bytes]:
        """A tagged-field section (flexible encoding only): each tag's raw bytes."""
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


def consumer_topics(subscription: bytes) -> tuple[str, ...] | None:
    """The topics of a consumer's subscription (the "consumer" protocol's metadata: int16
    version, then the topic names in every version); None when it does not parse."""
    try:
        r = FieldReader(subscription)
        r.int16()
        return tuple(sorted(r.string() for _ in range(r.array_length())))
    except RecordError:
        return None


def consumer_assignment(assignment: bytes) -> dict[str, tuple[int, ...]] | None:
    """The partitions of a consumer's assignment (the "consumer" protocol's: int16
    version, then each topic with its partition ids, in every version; user data after);
    None when it does not parse or is empty (a generation not yet synced stores none)."""
    if not assignment:
        return None
    try:
        r = FieldReader(assignment)
        r.int16()
        out: dict[str, tuple[int, ...]] = {}
        for _ in range(r.array_length()):
            topic = r.string()
            ids = tuple(sorted(r.int32() for _ in range(r.array_length())))
            if ids:
                out[topic] = ids
        return dict(sorted(out.items()))
    except RecordError:
        return None


def parse_key(key: bytes | None) -> str | None:
    """The group id of a group-metadata key; None for every other kind of record."""
    if not key or len(key) < 2:
        return None
    r = FieldReader(key)
    if r.int16() != GROUP_METADATA_KEY:
        return None
    return r.string()


def parse_value(value: bytes) -> GroupMetadata:
    """A GroupMetadataValue (versions 0 to 4); raises RecordError on anything else."""
    if len(value) < 2:
        raise RecordError("value shorter than its version")
    version = FieldReader(value).int16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordError(f"GroupMetadataValue version {version} is not known (0-4)")
    r = FieldReader(value, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            MemberRecord(
                member_id=member_id,
                client_id=client_id,
                host=host,
                instance_id=instance_id,
                rebalance_timeout_ms=rebalance_timeout,
                session_timeout_ms=session_timeout,
                subscription=consumer_topics(subscription) if protocol_type == "consumer" else None,
                assignment=consumer_assignment(assignment) if protocol_type == "consumer" else None,
            )
        )
    r.skip_tags()
    return GroupMetadata(
        generation=generation,
        protocol_type=protocol_type,
        protocol=protocol,
        leader=leader,
        state_ts_ms=state_ts,
        members=tuple(members),
        version=version,
    )


def parse_record(
    key: bytes | None,
    value: bytes | None,
    group: str,
    offset: int = -1,
    timestamp_ms: int = -1,
    partition: int = -1,
) -> GroupRecord | None:
    """`group`'s metadata record (or tombstone) from a raw key and value; None for any
    other record (offset commits, other groups, KIP-848 records)."""
    if parse_key(key) != group:
        return None
    metadata = None if value is None else parse_value(value)
    return GroupRecord(group, metadata, offset, timestamp_ms, partition)
