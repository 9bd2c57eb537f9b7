"""The Kafka wire codec the proxy uses: headers, the group APIs, address rewriting.

`kgctl proxy` forwards frames byte for byte and decodes only what it must: the request
header of every frame (api key, version, correlation id, client id), the group APIs it
traces (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
ConsumerGroupHeartbeat; Metadata when asked), the answers that carry broker addresses (Metadata,
FindCoordinator, DescribeCluster), which it re-encodes with the proxy's own addresses,
and ApiVersions, whose advertised ranges it caps where this codec cannot follow.

Bodies are decoded and encoded with kafka-python's schema classes at the version on the
wire; ConsumerGroupHeartbeat, which kafka-python lacks, from the schemas in
`kgctl/adapters/messages/`. SASL frames are never decoded here. Everything in this
module is pure (bytes in, bytes or dicts out); `kgctl/proxy/` owns the sockets.
"""

from __future__ import annotations

import struct
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

with warnings.catch_warnings():
    # kafka-python 3.0.12 reads its schemas with importlib.resources' legacy API.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as _errors
    from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
    )
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.metadata.find_coordinator import (
        FindCoordinatorRequest,
        FindCoordinatorResponse,
    )
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.producer import ProduceRequest

    class ConsumerGroupHeartbeatRequest(ApiMessage, load_json="kgctl.adapters.messages"):  # type: ignore[call-arg]
        """KIP-848 heartbeat: group, member id and epoch, subscription, owned partitions."""

    class ConsumerGroupHeartbeatResponse(ApiMessage, load_json="kgctl.adapters.messages"):  # type: ignore[call-arg]
        """KIP-848 heartbeat answer: error, member id and epoch, interval, assignment."""


class WireError(Exception):
    """A frame that is not what the Kafka protocol says it must be."""


# --- api keys ------------------------------------------------------------------------

API_KEYS: dict[str, int] = {k.name: int(k.value) for k in ApiKey}
API_NAMES: dict[int, str] = {v: k for k, v in API_KEYS.items()}

PRODUCE = 0
FETCH = 1
METADATA = 3
OFFSET_COMMIT = 8
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
DESCRIBE_CLUSTER = 60
CONSUMER_GROUP_HEARTBEAT = 68

# api key -> (request class, response class), for every key this module decodes.
_CLASSES: dict[int, tuple[Any, Any]] = {
    METADATA: (MetadataRequest, MetadataResponse),
    OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    DESCRIBE_CLUSTER: (DescribeClusterRequest, DescribeClusterResponse),
    CONSUMER_GROUP_HEARTBEAT: (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
}

# The group APIs the wire trace turns into events.
API_VERSIONS_MAX: int = int(ApiVersionsRequest.max_version)

TRACED: frozenset[int] = frozenset(
    {
        FIND_COORDINATOR,
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        OFFSET_COMMIT,
        CONSUMER_GROUP_HEARTBEAT,
    }
)
# Traced only when asked (`kgctl proxy --trace-metadata`): every client sends it, often.
TRACED_ON_REQUEST: frozenset[int] = frozenset({METADATA})
# Answers that carry broker addresses the proxy must replace with its own.
REWRITTEN: frozenset[int] = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
# Never decoded or logged: they carry credentials.
SASL: frozenset[int] = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})

# Answers that carry addresses in versions this proxy does not rewrite: Produce v10+ and
# Fetch v16+ name the new leader's endpoint (KIP-951), and decoding every data frame
# would cost the throughput the proxy must keep. Share-group data APIs do the same.
_ADDRESS_CAPS: dict[int, int | None] = {PRODUCE: 9, FETCH: 15, 78: None, 79: None}


def max_versions() -> dict[int, int]:
    """The highest version of each key that this codec must follow (decode or rewrite):
    ApiVersions advertises no more than these (None in _ADDRESS_CAPS drops the key)."""
    caps = {key: int(classes[0].max_version) for key, classes in _CLASSES.items()}
    caps.update({k: v for k, v in _ADDRESS_CAPS.items() if v is not None})
    return caps


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"ApiKey{key}")


# --- errors --------------------------------------------------------------------------


def error_name(code: int) -> str:
    if code == 0:
        return "NONE"
    cls = _errors.kafka_errors.get(code)
    return str(cls.message) if cls is not None else f"UNKNOWN_ERROR_{code}"


ERROR_CODES: dict[str, int] = {
    str(cls.message): int(code)
    for code, cls in _errors.kafka_errors.items()
    if code  # 0 is NONE; None marks base classes
}

# The error codes each traced API defines (what its answer may carry), from the Kafka
# protocol guide: a fault rule that answers with anything else is refused.
_COORD = ("COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")
API_ERRORS: dict[str, tuple[str, ...]] = {
    "FindCoordinator": (
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "GROUP_AUTHORIZATION_FAILED",
        "INVALID_REQUEST",
    ),
    "JoinGroup": _COORD
    + (
        "GROUP_AUTHORIZATION_FAILED",
        "INCONSISTENT_GROUP_PROTOCOL",
        "INVALID_SESSION_TIMEOUT",
        "UNKNOWN_MEMBER_ID",
        "FENCED_INSTANCE_ID",
        "GROUP_MAX_SIZE_REACHED",
        "INVALID_GROUP_ID",
        "REBALANCE_IN_PROGRESS",
    ),
    "SyncGroup": _COORD
    + (
        "GROUP_AUTHORIZATION_FAILED",
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
        "REBALANCE_IN_PROGRESS",
        "FENCED_INSTANCE_ID",
        "INCONSISTENT_GROUP_PROTOCOL",
    ),
    "Heartbeat": _COORD
    + (
        "GROUP_AUTHORIZATION_FAILED",
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
        "REBALANCE_IN_PROGRESS",
        "FENCED_INSTANCE_ID",
    ),
    "LeaveGroup": _COORD
    + ("GROUP_AUTHORIZATION_FAILED", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"),
    "OffsetCommit": _COORD
    + (
        "GROUP_AUTHORIZATION_FAILED",
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
        "REBALANCE_IN_PROGRESS",
        "FENCED_INSTANCE_ID",
        "STALE_MEMBER_EPOCH",
        "OFFSET_METADATA_TOO_LARGE",
        "INVALID_COMMIT_OFFSET_SIZE",
        "TOPIC_AUTHORIZATION_FAILED",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "REQUEST_TIMED_OUT",
    ),
    "ConsumerGroupHeartbeat": _COORD
    + (
        "GROUP_AUTHORIZATION_FAILED",
        "INVALID_REQUEST",
        "UNKNOWN_MEMBER_ID",
        "FENCED_MEMBER_EPOCH",
        "UNSUPPORTED_ASSIGNOR",
        "UNRELEASED_INSTANCE_ID",
        "GROUP_MAX_SIZE_REACHED",
        "FENCED_INSTANCE_ID",
    ),
}


# --- headers -------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body_offset: int  # -1 when the key's header version is unknown to this codec


def _skip_tagged(data: bytes | memoryview, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise WireError("tagged fields run past the end of the frame")
    return pos


def _uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise WireError("bad varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def flexible(api_key: int, version: int) -> bool | None:
    """Whether this key's version uses flexible (v2 request / v1 response) headers;
    None when the key is not one this codec knows."""
    classes = _CLASSES.get(api_key)
    if classes is not None:
        return bool(classes[0].flexible_version_q(version))
    if api_key == PRODUCE:  # only its acks are read (an acks=0 produce has no answer)
        return bool(ProduceRequest.flexible_version_q(version))
    return None


def parse_request_header(frame: bytes | memoryview) -> RequestHeader:
    """The header of one request frame (without its 4-byte size)."""
    if len(frame) < 10:
        raise WireError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, version, corr, id_len = struct.unpack_from(">hhih", frame, 0)
    if api_key < 0 or version < 0:
        raise WireError(f"api key {api_key} version {version} is not a Kafka request")
    pos = 10
    client_id = ""
    if id_len >= 0:
        if pos + id_len > len(frame):
            raise WireError("client id runs past the end of the frame")
        client_id = bytes(frame[pos : pos + id_len]).decode("utf-8", "replace")
        pos += id_len
    flex = flexible(api_key, version)
    if flex is None:
        pos = -1
    elif flex:
        pos = _skip_tagged(frame, pos)
    return RequestHeader(api_key, version, corr, client_id, pos)


def response_body_offset(frame: bytes | memoryview, api_key: int, version: int) -> int:
    """Where the body of a response frame starts (after the correlation id and, for
    flexible versions other than ApiVersions, the header's tagged fields)."""
    if api_key != API_VERSIONS and flexible(api_key, version):
        return _skip_tagged(frame, 4)
    return 4


def correlation_id(frame: bytes | memoryview) -> int:
    if len(frame) < 4:
        raise WireError("response shorter than a correlation id")
    return int(struct.unpack_from(">i", frame, 0)[0])


def expects_response(header: RequestHeader, frame: bytes | memoryview) -> bool:
    """False only for a Produce with acks=0, which the broker never answers."""
    if header.api_key != PRODUCE or header.body_offset < 0:
        return True
    pos = header.body_offset
    try:
        if header.api_version >= 3:  # transactional id (nullable, compact from v9) first
            if header.api_version >= 9:
                n, pos = _uvarint(frame, pos)
                pos += max(n - 1, 0)
            else:
                (n,) = struct.unpack_from(">h", frame, pos)
                pos += 2 + max(n, 0)
        (acks,) = struct.unpack_from(">h", frame, pos)
    except (struct.error, WireError):
        return True
    return bool(acks != 0)


# --- bodies --------------------------------------------------------------------------


def decode_request(header: RequestHeader, frame: bytes | memoryview) -> Any:
    cls = _CLASSES[header.api_key][0]
    try:
        return cls.decode(memoryview(frame)[header.body_offset :], version=header.api_version)
    except Exception as exc:  # kafka-python raises many kinds on a short or bad body
        raise WireError(f"{api_name(header.api_key)} v{header.api_version} request: {exc}") from exc


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> Any:
    cls = _CLASSES[api_key][1]
    offset = response_body_offset(frame, api_key, version)
    try:
        return cls.decode(memoryview(frame)[offset:], version=version)
    except Exception as exc:
        raise WireError(f"{api_name(api_key)} v{version} response: {exc}") from exc


def _reframe(frame: bytes | memoryview, api_key: int, version: int, body: Any) -> bytes:
    offset = response_body_offset(frame, api_key, version)
    body._header = None  # decoded without a header: encode() reads the slot
    return bytes(frame[:offset]) + bytes(body.encode(version=version))


Address = tuple[str, int]
AddressMap = Callable[[int, str, int], Address]  # (node id, host, port) -> proxy's address


def rewrite_addresses(
    api_key: int, version: int, frame: bytes | memoryview, mapper: AddressMap
) -> bytes:
    """The same answer with every broker address replaced by mapper's."""
    body = decode_response(api_key, version, frame)
    if api_key == FIND_COORDINATOR:
        if version < 4:
            if body.node_id >= 0:
                body.host, body.port = mapper(body.node_id, body.host, body.port)
        else:
            for c in body.coordinators:
                if c.node_id >= 0:
                    c.host, c.port = mapper(c.node_id, c.host, c.port)
    elif api_key == METADATA:
        for b in body.brokers:
            b.host, b.port = mapper(b.node_id, b.host, b.port)
    elif api_key == DESCRIBE_CLUSTER:
        for b in body.brokers:
            b.host, b.port = mapper(b.broker_id, b.host, b.port)
    else:
        raise ValueError(f"{api_name(api_key)} carries no addresses")
    return _reframe(frame, api_key, version, body)


def cap_api_versions(
    frame: bytes | memoryview, version: int, caps: dict[int, int]
) -> tuple[bytes | None, dict[str, tuple[int, int]]]:
    """The ApiVersions answer with each capped key's max lowered to what the proxy can
    follow, and keys it must not let through removed; (None, {}) when nothing changes.
    The second value says what was lowered: {api name: (broker's max, advertised)}."""
    body = decode_response(API_VERSIONS, version, frame)
    if body.error_code != 0:
        return None, {}
    kept = []
    lowered: dict[str, tuple[int, int]] = {}
    for entry in body.api_keys:
        key = int(entry.api_key)
        if key in _ADDRESS_CAPS and _ADDRESS_CAPS[key] is None:
            lowered[api_name(key)] = (int(entry.max_version), -1)
            continue
        cap = caps.get(key)
        if cap is not None and entry.max_version > cap:
            if entry.min_version > cap:
                lowered[api_name(key)] = (int(entry.max_version), -1)
                continue
            lowered[api_name(key)] = (int(entry.max_version), cap)
            entry.max_version = cap
        kept.append(entry)
    if not lowered:
        return None, {}
    body.api_keys = kept
    return _reframe(frame, API_VERSIONS, version, body), lowered


def unsupported_api_versions(header: RequestHeader) -> bytes:
    """The answer a broker gives an ApiVersions request newer than it knows: v0 body,
    UNSUPPORTED_VERSION, and the range it does know, so the client retries within it."""
    cls = _CLASSES[API_VERSIONS][1]
    entry = cls.ApiVersion(api_key=API_VERSIONS, min_version=0, max_version=cls.max_version)
    body = cls(error_code=ERROR_CODES["UNSUPPORTED_VERSION"], api_keys=[entry])
    body._header = None
    return struct.pack(">i", header.correlation_id) + bytes(body.encode(version=0))


# --- synthesized answers (fault rules) -----------------------------------------------


def error_response(header: RequestHeader, request: Any, error_code: int) -> bytes:
    """An answer to `request` carrying `error_code`, as the broker would encode it at
    the request's version (the frame without its size)."""
    key, version = header.api_key, header.api_version
    cls = _CLASSES[key][1]
    if key == FIND_COORDINATOR:
        if version < 4:
            body = cls(error_code=error_code, node_id=-1, host="", port=-1)
        else:
            keys = list(request.coordinator_keys or [])
            Coordinator = cls.Coordinator
            body = cls(
                coordinators=[
                    Coordinator(key=k, node_id=-1, host="", port=-1, error_code=error_code)
                    for k in keys
                ]
            )
    elif key == JOIN_GROUP:
        body = cls(
            error_code=error_code,
            generation_id=-1,
            protocol_name="" if version < 7 else None,
            leader="",
            member_id=request.member_id,
            members=[],
        )
    elif key == SYNC_GROUP:
        body = cls(error_code=error_code, assignment=b"")
    elif key in (HEARTBEAT,):
        body = cls(error_code=error_code)
    elif key == LEAVE_GROUP:
        members = []
        if version >= 3:
            Member = cls.MemberResponse
            members = [
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    error_code=error_code,
                )
                for m in request.members
            ]
        body = cls(error_code=error_code, members=members)
    elif key == OFFSET_COMMIT:
        Topic = cls.OffsetCommitResponseTopic
        Partition = Topic.OffsetCommitResponsePartition
        topics = []
        for t in request.topics:
            fields: dict[str, Any] = {
                "partitions": [
                    Partition(partition_index=p.partition_index, error_code=error_code)
                    for p in t.partitions
                ]
            }
            if version >= 10:
                fields["topic_id"] = t.topic_id
            else:
                fields["name"] = t.name
            topics.append(Topic(**fields))
        body = cls(topics=topics)
    elif key == CONSUMER_GROUP_HEARTBEAT:
        body = cls(
            error_code=error_code,
            error_message=f"injected by kgctl proxy: {error_name(error_code)}",
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=0,
        )
    else:
        raise ValueError(f"cannot answer {api_name(key)} with an error")
    body._header = None
    head = struct.pack(">i", header.correlation_id)
    if flexible(key, version):
        head += b"\x00"  # no tagged fields in the response header
    return head + bytes(body.encode(version=version))


# --- what the trace shows ------------------------------------------------------------


def _s(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _subscription_owned(raw: Any) -> dict[str, list[int]] | None:
    """The partitions a consumer-protocol subscription (JoinGroup metadata, v1+) claims as
    owned, as {topic: [ids]} ({} when it claims none); None if v0 (no such field) or not
    the consumer protocol. What a cooperative member's claim is checked by."""
    if not raw:
        return None
    try:
        decoded = ConsumerProtocolSubscription.decode(bytes(raw))
        if decoded.version < 1:
            return None
        out: dict[str, list[int]] = {}
        for tp in decoded.owned_partitions or []:
            out[str(tp.topic)] = sorted(int(p) for p in tp.partitions)
        return dict(sorted(out.items()))
    except Exception:  # a non-consumer protocol (Connect, Streams' own) carries other bytes
        return None


def _assignment_partitions(raw: Any) -> dict[str, list[int]] | None:
    """A consumer-protocol assignment (SyncGroup) as {topic: [ids]}; None if empty or
    not the consumer protocol."""
    if not raw:
        return None
    try:
        decoded = ConsumerProtocolAssignment.decode(bytes(raw))
        out = {}
        for tp in decoded.assigned_partitions:
            out[str(tp.topic)] = sorted(int(p) for p in tp.partitions)
        return dict(sorted(out.items()))
    except Exception:  # a non-consumer protocol (Connect, Streams' own) carries other bytes
        return None


def request_fields(api_key: int, version: int, req: Any) -> dict[str, Any]:
    """The traced facts of one group request; keys documented in docs/events.md."""
    if api_key == FIND_COORDINATOR:
        keys = [req.key] if version < 4 else list(req.coordinator_keys or [])
        return {"key_type": int(getattr(req, "key_type", 0) or 0), "keys": keys}
    if api_key == JOIN_GROUP:
        return {
            "group": req.group_id,
            "member_id": req.member_id,
            "instance_id": getattr(req, "group_instance_id", None),
            "session_timeout_ms": req.session_timeout_ms,
            "rebalance_timeout_ms": getattr(req, "rebalance_timeout_ms", req.session_timeout_ms),
            "protocol_type": req.protocol_type,
            "protocols": [p.name for p in req.protocols],
            "reason": getattr(req, "reason", None),
            "owned": _subscription_owned(req.protocols[0].metadata) if req.protocols else None,
        }
    if api_key == SYNC_GROUP:
        return {
            "group": req.group_id,
            "member_id": req.member_id,
            "instance_id": getattr(req, "group_instance_id", None),
            "generation": req.generation_id,
            "protocol_name": getattr(req, "protocol_name", None),
            "assignments": len(req.assignments or []),
        }
    if api_key == HEARTBEAT:
        return {
            "group": req.group_id,
            "member_id": req.member_id,
            "instance_id": getattr(req, "group_instance_id", None),
            "generation": req.generation_id,
        }
    if api_key == LEAVE_GROUP:
        if version < 3:
            members = [{"member_id": req.member_id, "instance_id": None, "reason": None}]
        else:
            members = [
                {
                    "member_id": m.member_id,
                    "instance_id": m.group_instance_id,
                    "reason": getattr(m, "reason", None),
                }
                for m in req.members
            ]
        return {"group": req.group_id, "members": members}
    if api_key == OFFSET_COMMIT:
        offsets: dict[str, dict[str, int]] = {}
        for t in req.topics:
            name = str(t.name) if version < 10 else str(t.topic_id)
            offsets[name] = {str(p.partition_index): int(p.committed_offset) for p in t.partitions}
        return {
            "group": req.group_id,
            "member_id": getattr(req, "member_id", ""),
            "instance_id": getattr(req, "group_instance_id", None),
            "generation": getattr(req, "generation_id_or_member_epoch", -1),
            "offsets": offsets,
        }
    if api_key == CONSUMER_GROUP_HEARTBEAT:
        owned = None
        if req.topic_partitions is not None:
            owned = {str(t.topic_id): sorted(t.partitions) for t in req.topic_partitions}
        return {
            "group": req.group_id,
            "member_id": req.member_id,
            "instance_id": req.instance_id,
            "member_epoch": req.member_epoch,
            "rebalance_timeout_ms": req.rebalance_timeout_ms,
            "subscription": req.subscribed_topic_names,
            "regex": getattr(req, "subscribed_topic_regex", None),
            "server_assignor": req.server_assignor,
            "owned": owned,
        }
    if api_key == METADATA:
        return metadata_request_fields(version, req)
    raise ValueError(f"{api_name(api_key)} is not traced")


def metadata_request_fields(version: int, req: Any) -> dict[str, Any]:
    """The topics a Metadata request asks for, by name, sorted; None for every topic
    (a null list from v1, an empty one in v0). Topics asked by id only (v10+) are
    named by their id."""
    topics = req.topics
    if topics is None or (version == 0 and not topics):
        return {"topics": None}
    names = [str(t.name) if t.name is not None else str(t.topic_id) for t in topics]
    return {"topics": sorted(names)}


def metadata_response_fields(version: int, resp: Any) -> dict[str, Any]:
    """What a Metadata answer says about the topics: `partitions` {topic: how many
    partitions it lists} (a topic answered with an error is left out), `errors`
    {topic: error} for those, `brokers` (how many); `error` is the answer's top-level
    error (v13+), else the first topic error."""
    partitions: dict[str, int] = {}
    errors: dict[str, str] = {}
    for t in resp.topics or []:
        name = str(t.name) if t.name is not None else str(t.topic_id)
        if t.error_code:
            errors[name] = error_name(t.error_code)
        else:
            partitions[name] = len(t.partitions or [])
    top = int(getattr(resp, "error_code", 0) or 0) if version >= 13 else 0
    first = error_name(top) if top else next(iter(errors.values()), "NONE")
    return {
        "error": first,
        "brokers": len(resp.brokers or []),
        "partitions": dict(sorted(partitions.items())),
        "errors": dict(sorted(errors.items())),
    }


def request_group(api_key: int, version: int, req: Any) -> str:
    if api_key == METADATA:
        return ""  # about topics, not a group
    if api_key == FIND_COORDINATOR:
        if int(getattr(req, "key_type", 0) or 0) != 0:
            return ""
        keys = [req.key] if version < 4 else list(req.coordinator_keys or [])
        return str(keys[0]) if keys else ""
    return str(req.group_id)


def response_fields(api_key: int, version: int, resp: Any) -> dict[str, Any]:
    """The traced facts of one group answer; `error` is the first error it carries."""
    if api_key == FIND_COORDINATOR:
        if version < 4:
            coords = [(resp.error_code, resp.node_id, resp.host, resp.port)]
        else:
            coords = [(c.error_code, c.node_id, c.host, c.port) for c in resp.coordinators]
        code = next((c[0] for c in coords if c[0]), 0)
        first = coords[0] if coords else (0, -1, "", -1)
        return {
            "error": error_name(code),
            "coordinator": first[1],
            "host": first[2],
            "port": first[3],
        }
    if api_key == JOIN_GROUP:
        out = {
            "error": error_name(resp.error_code),
            "generation": resp.generation_id,
            "member_id": resp.member_id,
            "leader": resp.leader,
            "protocol": resp.protocol_name,
            "is_leader": bool(resp.member_id) and resp.member_id == resp.leader,
            "skip_assignment": bool(getattr(resp, "skip_assignment", False)),
            "members": [m.member_id for m in resp.members or []],
        }
        return out
    if api_key == SYNC_GROUP:
        return {
            "error": error_name(resp.error_code),
            "assignment": _assignment_partitions(resp.assignment),
        }
    if api_key == HEARTBEAT:
        return {"error": error_name(resp.error_code)}
    if api_key == LEAVE_GROUP:
        codes = [resp.error_code] + [m.error_code for m in getattr(resp, "members", None) or []]
        return {"error": error_name(next((c for c in codes if c), 0))}
    if api_key == OFFSET_COMMIT:
        codes = [p.error_code for t in resp.topics for p in t.partitions]
        return {"error": error_name(next((c for c in codes if c), 0))}
    if api_key == CONSUMER_GROUP_HEARTBEAT:
        assignment = None
        if resp.assignment is not None:
            assignment = {
                str(t.topic_id): sorted(t.partitions) for t in resp.assignment.topic_partitions
            }
        return {
            "error": error_name(resp.error_code),
            "member_id": resp.member_id,
            "member_epoch": resp.member_epoch,
            "heartbeat_interval_ms": resp.heartbeat_interval_ms,
            "assignment": assignment,
        }
    if api_key == METADATA:
        return metadata_response_fields(version, resp)
    raise ValueError(f"{api_name(api_key)} is not traced")


# -- Fetch answers: batch ranges only (kgctl proxy's --trace-fetch) ------------------------
# The proxy must keep its throughput, so a Fetch answer is never decoded as objects: its
# bytes are walked for each partition's high watermark and, in the records, only the
# record batch headers (baseOffset at 0, batchLength at 8, magic at 16, attributes at
# 21, lastOffsetDelta at 23), skipping each batch whole. Records are never decoded.
FETCH_TRACED_MAX = 15
_CONTROL_BATCH = 0x20


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int, flex: bool) -> None:
        self.data, self.pos, self.flex = memoryview(data), pos, flex

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.data):
            raise WireError("Fetch answer ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def num(self, fmt: str, n: int) -> int:
        return int(struct.unpack(fmt, self.take(n))[0])

    def length(self) -> int:
        """An array's or bytes' length (-1: null), compact or not."""
        if self.flex:
            n, self.pos = _uvarint(self.data, self.pos)
            return n - 1
        return self.num(">i", 4)

    def string(self) -> str:
        n = self.length() if self.flex else self.num(">h", 2)
        return "" if n < 0 else bytes(self.take(n)).decode("utf-8", "replace")

    def tagged(self) -> None:
        if self.flex:
            self.pos = _skip_tagged(self.data, self.pos)


def _batch_ranges(records: memoryview) -> list[list[int]]:
    """[first, last] offsets of each whole data batch in a partition's records (a batch
    cut off at the end of the answer, as brokers may send, is left out; so are
    transaction markers and the old message formats)."""
    out: list[list[int]] = []
    pos = 0
    while pos + 27 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        end = pos + 12 + length
        if length <= 0 or end > len(records):
            break
        magic = records[pos + 16]
        if magic >= 2:
            attributes, delta = struct.unpack_from(">hi", records, pos + 21)
            if not attributes & _CONTROL_BATCH:
                out.append([int(base), int(base) + int(delta)])
        pos = end
    return out


def fetch_response_fields(version: int, frame: bytes | memoryview) -> dict[str, Any]:
    """What a Fetch answer gave, by partition: `partitions` {topic: {"p": {"hw":
    high watermark, "batches": [[first, last], ...]}}} (topics by name up to v12, by
    topic id from v13); `error` is the answer's first error."""
    if not 4 <= version <= FETCH_TRACED_MAX:
        raise WireError(f"Fetch v{version} is not traced (v4..v{FETCH_TRACED_MAX})")
    flex = version >= 12
    # (Fetch is not in the decoded classes: its header's tagged fields are skipped here.)
    r = _Reader(frame, _skip_tagged(frame, 4) if flex else 4, flex)
    r.num(">i", 4)  # throttle_time_ms
    first_error = 0
    if version >= 7:
        first_error = r.num(">h", 2)
        r.num(">i", 4)  # session id
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for _t in range(max(r.length(), 0)):
        topic = str(uuid.UUID(bytes=bytes(r.take(16)))) if version >= 13 else r.string()
        parts = out.setdefault(topic, {})
        for _p in range(max(r.length(), 0)):
            partition, error, hw = r.num(">i", 4), r.num(">h", 2), r.num(">q", 8)
            r.take(16 if version >= 5 else 8)  # last stable offset, log start offset
            for _a in range(max(r.length(), 0)):  # aborted transactions
                r.take(16)
                r.tagged()
            if version >= 11:
                r.take(4)  # preferred read replica
            size = r.length()
            records = r.take(size) if size > 0 else memoryview(b"")
            r.tagged()
            first_error = first_error or error
            entry: dict[str, Any] = {"hw": hw, "batches": _batch_ranges(records)}
            if error:
                entry["error"] = error_name(error)
            parts[str(partition)] = entry
        r.tagged()
    return {"error": error_name(first_error), "partitions": out}
