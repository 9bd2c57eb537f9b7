"""`kgctl proxy` without a broker: fault rules (parsing, matching) and the wire codec
(headers, synthesized answers, address rewriting, ApiVersions caps), on frames built
with kafka-python's own classes as a client or a broker would build them."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kgctl.adapters import wire
from kgctl.errors import UsageError
from kgctl.proxy.faults import FaultBook, RuleError, parse_control, parse_rule, parse_version_cap
from kgctl.proxy.server import Proxy
from kgctl.proxy.trace import WireEmitter

# -- rules ---------------------------------------------------------------------------


def test_the_issue_s_example_rule_parses() -> None:
    rule = parse_rule("JoinGroup:error=NOT_COORDINATOR:count=1:client=app-1")
    assert (rule.api, rule.effect, rule.error, rule.error_code) == (
        "JoinGroup",
        "error",
        "NOT_COORDINATOR",
        16,
    )
    assert (rule.count, rule.client, rule.group, rule.after, rule.for_s) == (
        1,
        "app-1",
        None,
        0,
        None,
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "JoinGrup:drop",
            "unknown API 'JoinGrup'; traced APIs: OffsetCommit, FindCoordinator, JoinGroup",
        ),
        ("JoinGroup:error=NOT_A_CODE", "unknown error 'NOT_A_CODE'; JoinGroup defines: "),
        ("Heartbeat:error=OFFSET_OUT_OF_RANGE", "Heartbeat does not answer OFFSET_OUT_OF_RANGE"),
        ("Fetch:error=NOT_COORDINATOR", "error= applies only to"),
        (
            "JoinGroup:explode",
            "unknown effect 'explode'; valid: error, delay, drop, hang, blackhole",
        ),
        ("JoinGroup:delay=soon", "delay= needs a whole number"),
        ("JoinGroup:delay", "delay= needs milliseconds"),
        ("JoinGroup:drop=1", "drop takes no value"),
        ("JoinGroup:drop:colour=red", "unknown selector 'colour'; valid: client=, group="),
        ("Fetch:drop:group=g", "group= applies only to"),
        ("JoinGroup:drop:count=-1", "count= must not be negative"),
        ("ApiVersions:drop", "ApiVersions cannot be faulted"),
        ("SaslAuthenticate:hang", "cannot be faulted"),
        ("JoinGroup", "expected API:EFFECT[:SELECTOR]"),
    ],
)
def test_a_bad_rule_is_refused_in_one_line_that_lists_what_is_valid(text: str, says: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    message = str(info.value)
    assert says in message
    assert "\n" not in message


def test_every_error_a_traced_api_defines_is_a_kafka_error_name() -> None:
    for api, names in wire.API_ERRORS.items():
        assert api in wire.API_KEYS
        for name in names:
            assert name in wire.ERROR_CODES, (api, name)
            parse_rule(f"{api}:error={name}")


def test_selectors_count_after_client_and_group_choose_the_requests() -> None:
    book = FaultBook()
    book.add("Heartbeat:drop:client=app-1:group=g1:after=1:count=2", now=0.0)
    hb = wire.HEARTBEAT
    decisions = [
        book.decide(1.0, hb, "other", "g1"),  # wrong client
        book.decide(1.0, hb, "my-app-1-x", "g2"),  # wrong group
        book.decide(1.0, wire.JOIN_GROUP, "app-1", "g1"),  # wrong API
        book.decide(1.0, hb, "app-1", "g1"),  # skipped by after=1
        book.decide(1.0, hb, "app-1", "g1"),
        book.decide(1.0, hb, "app-1", "g1"),
        book.decide(1.0, hb, "app-1", "g1"),  # count=2 used up
    ]
    assert [d is not None for d in decisions] == [False, False, False, False, True, True, False]
    assert [r.id for r in book.expired(1.0)] == ["r1"]
    assert book.rules == []


def test_for_limits_a_rule_to_seconds_after_it_was_added() -> None:
    book = FaultBook()
    book.add("SyncGroup:delay=100:for=2.5", now=10.0)
    assert book.decide(12.4, wire.SYNC_GROUP, "c", "g") is not None
    assert book.decide(12.5, wire.SYNC_GROUP, "c", "g") is None


def test_the_first_rule_that_applies_wins_and_removal_by_id() -> None:
    book = FaultBook()
    first = book.add("JoinGroup:delay=10:count=1", now=0.0)
    second = book.add("JoinGroup:drop", now=0.0)
    assert book.decide(0.0, wire.JOIN_GROUP, "c", "g") is first
    assert book.decide(0.0, wire.JOIN_GROUP, "c", "g") is second
    assert book.remove(second.id) == [second]
    assert book.remove("r99") == []
    assert book.decide(0.0, wire.JOIN_GROUP, "c", "g") is None


def test_control_lines() -> None:
    op, rule = parse_control('{"op": "add", "rule": "Heartbeat:hang:count=1"}')
    assert op == "add" and rule.effect == "hang"
    assert parse_control('{"op": "remove", "id": "r2"}') == ("remove", "r2")
    assert parse_control('{"op": "clear"}') == ("clear", None)
    for line, says in [
        ("nope", "not JSON"),
        ("[1]", "JSON object"),
        ('{"op": "explode"}', "unknown op 'explode'"),
        ('{"op": "add"}', "add needs"),
        ('{"op": "add", "rule": "X:drop"}', "unknown API 'X'"),
    ]:
        with pytest.raises(RuleError, match=says):
            parse_control(line)


# -- codec -----------------------------------------------------------------------------


def request_frame(req: Any, version: int, corr: int = 7, client_id: str = "app-1") -> bytes:
    req.with_header(correlation_id=corr, client_id=client_id)
    return bytes(req.encode(version=version, header=True))


def response_frame(resp: Any, version: int, corr: int = 7) -> bytes:
    resp._header = None
    head = struct.pack(">i", corr)
    if wire.flexible(resp.API_KEY, version) and resp.API_KEY != wire.API_VERSIONS:
        head += b"\x00"
    return head + bytes(resp.encode(version=version))


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_header_and_body_at_every_version(version: int) -> None:
    from kafka.protocol.consumer.group import JoinGroupRequest

    Protocol = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10000,
        rebalance_timeout_ms=30000,
        member_id="m-1",
        group_instance_id="i-1",
        protocol_type="consumer",
        protocols=[Protocol(name="range", metadata=b"")],
        reason="kgctl: first_join",
    )
    frame = request_frame(req, version)
    header = wire.parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        11,
        version,
        7,
        "app-1",
    )
    fields = wire.request_fields(11, version, wire.decode_request(header, frame))
    assert fields["group"] == "g" and fields["protocols"] == ["range"]
    assert fields["reason"] == ("kgctl: first_join" if version >= 8 else None)
    assert fields["instance_id"] == ("i-1" if version >= 5 else None)
    answer = wire.error_response(header, wire.decode_request(header, frame), 16)
    assert wire.correlation_id(answer) == 7
    out = wire.response_fields(11, version, wire.decode_response(11, version, answer))
    assert out["error"] == "NOT_COORDINATOR" and out["generation"] == -1


@pytest.mark.parametrize(
    ("api", "rule_error"),
    [
        ("FindCoordinator", "COORDINATOR_NOT_AVAILABLE"),
        ("SyncGroup", "REBALANCE_IN_PROGRESS"),
        ("Heartbeat", "FENCED_INSTANCE_ID"),
        ("LeaveGroup", "UNKNOWN_MEMBER_ID"),
        ("OffsetCommit", "REBALANCE_IN_PROGRESS"),
        ("ConsumerGroupHeartbeat", "FENCED_MEMBER_EPOCH"),
    ],
)
def test_a_synthesized_error_answer_decodes_at_every_version(api: str, rule_error: str) -> None:
    key = wire.API_KEYS[api]
    req_cls = wire._CLASSES[key][0]
    code = wire.ERROR_CODES[rule_error]
    for version in range(req_cls.min_version, req_cls.max_version + 1):
        if key == wire.OFFSET_COMMIT and version < 2:
            continue  # kafka-python's OffsetCommit starts at v2
        req = _request(api, req_cls, version)
        frame = request_frame(req, version)
        header = wire.parse_request_header(frame)
        decoded = wire.decode_request(header, frame)
        answer = wire.error_response(header, decoded, code)
        fields = wire.response_fields(key, version, wire.decode_response(key, version, answer))
        assert fields["error"] == rule_error, (api, version)


def _request(api: str, cls: Any, version: int) -> Any:
    import uuid

    if api == "FindCoordinator":
        return cls(key="g", key_type=0, coordinator_keys=["g"])
    if api == "SyncGroup":
        return cls(group_id="g", generation_id=3, member_id="m", assignments=[])
    if api == "Heartbeat":
        return cls(group_id="g", generation_id=3, member_id="m", group_instance_id="i")
    if api == "LeaveGroup":
        Member = cls.MemberIdentity
        return cls(group_id="g", member_id="m", members=[Member(member_id="m", reason="bye")])
    if api == "OffsetCommit":
        Topic = cls.OffsetCommitRequestTopic
        Part = Topic.OffsetCommitRequestPartition
        return cls(
            group_id="g",
            generation_id_or_member_epoch=3,
            member_id="m",
            topics=[
                Topic(
                    name="t",
                    topic_id=uuid.uuid4(),
                    partitions=[Part(partition_index=0, committed_offset=5)],
                )
            ],
        )
    return cls(group_id="g", member_id="m", member_epoch=4, subscribed_topic_names=["t"])


def test_produce_with_acks_0_expects_no_answer() -> None:
    from kafka.protocol.producer import ProduceRequest

    for version in (3, 8, 9):
        for acks, expected in ((0, False), (1, True), (-1, True)):
            req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[])
            frame = request_frame(req, version)
            header = wire.parse_request_header(frame)
            assert wire.expects_response(header, frame) is expected, (version, acks)


def test_metadata_and_find_coordinator_answers_get_the_proxy_s_addresses() -> None:
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorResponse
    from kafka.protocol.metadata.metadata import MetadataResponse

    Broker = MetadataResponse.MetadataResponseBroker
    meta = MetadataResponse(
        brokers=[
            Broker(node_id=1, host="kafka-1", port=9092),
            Broker(node_id=2, host="kafka-2", port=9092),
        ],
        topics=[],
        cluster_id="c",
        controller_id=1,
    )
    ports = {1: 40001, 2: 40002}
    for version in (1, 9, 12, 13):
        frame = response_frame(meta, version)
        out = wire.rewrite_addresses(3, version, frame, lambda n, h, p: ("127.0.0.1", ports[n]))
        brokers = wire.decode_response(3, version, out).brokers
        assert [(b.node_id, b.host, b.port) for b in brokers] == [
            (1, "127.0.0.1", 40001),
            (2, "127.0.0.1", 40002),
        ]
        assert wire.correlation_id(out) == 7
        # Unchanged addresses re-encode to the same bytes: nothing else is touched.
        assert wire.rewrite_addresses(3, version, frame, lambda n, h, p: (h, p)) == frame
    Coord = FindCoordinatorResponse.Coordinator
    for version in (0, 3, 4, 6):
        resp = FindCoordinatorResponse(
            error_code=0,
            node_id=2,
            host="kafka-2",
            port=9092,
            coordinators=[Coord(key="g", node_id=2, host="kafka-2", port=9092, error_code=0)],
        )
        frame = response_frame(resp, version)
        out = wire.rewrite_addresses(10, version, frame, lambda n, h, p: ("127.0.0.1", ports[n]))
        fields = wire.response_fields(10, version, wire.decode_response(10, version, out))
        assert (fields["coordinator"], fields["host"], fields["port"]) == (2, "127.0.0.1", 40002)


def test_api_versions_are_capped_only_where_the_codec_cannot_follow() -> None:
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse

    V = ApiVersionsResponse.ApiVersion
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            V(api_key=0, min_version=3, max_version=13),  # Produce: v10+ names leaders
            V(api_key=2, min_version=0, max_version=11),  # ListOffsets: not decoded
            V(api_key=11, min_version=0, max_version=99),  # JoinGroup beyond kafka-python
            V(api_key=78, min_version=1, max_version=2),  # ShareFetch: dropped
        ],
    )
    frame = response_frame(resp, 3)
    capped, lowered = wire.cap_api_versions(frame, 3, wire.max_versions())
    assert capped is not None
    keys = {
        e.api_key: (e.min_version, e.max_version)
        for e in wire.decode_response(18, 3, capped).api_keys
    }
    assert keys == {0: (3, 9), 2: (0, 11), 11: (0, 9)}
    assert lowered == {"Produce": (13, 9), "JoinGroup": (99, 9), "ShareFetch": (2, -1)}


def test_a_version_cap_makes_the_broker_look_older() -> None:
    """--cap-version ConsumerGroupHeartbeat=0: a 3.7-3.9 broker to consumer-protocol
    members; a cap below a key's minimum removes the key."""
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse

    assert parse_version_cap("ConsumerGroupHeartbeat=0") == (wire.CONSUMER_GROUP_HEARTBEAT, 0)
    for bad in ("ConsumerGroupHeartbeat", "Nope=1", "JoinGroup=x", "ApiVersions=0"):
        with pytest.raises(UsageError, match="--cap-version"):
            parse_version_cap(bad)
    proxy = Proxy([("127.0.0.1", 9)], WireEmitter(lambda e: None), version_caps={68: 0, 11: 3})
    assert proxy.version_caps[68] == 0 and proxy.version_caps[11] == 3
    assert proxy.version_caps[0] == 9  # the codec's own caps stay
    V = ApiVersionsResponse.ApiVersion
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            V(api_key=68, min_version=0, max_version=1),
            V(api_key=11, min_version=4, max_version=9),
        ],
    )
    capped, lowered = wire.cap_api_versions(response_frame(resp, 3), 3, proxy.version_caps)
    assert capped is not None
    keys = {
        e.api_key: (e.min_version, e.max_version)
        for e in wire.decode_response(18, 3, capped).api_keys
    }
    assert keys == {68: (0, 0)}
    assert lowered == {"ConsumerGroupHeartbeat": (1, 0), "JoinGroup": (9, -1)}


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x0b\x00\x05",
        b"\xff\xff\x00\x00\x00\x00\x00\x07\x00\x00",
        b"\x00\x0b\x00\x05\x00\x00\x00\x07\x00\x40ab",  # client id runs past the end
    ],
)
def test_a_header_that_is_not_kafka_s_is_refused(frame: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.parse_request_header(frame)


def test_a_truncated_group_request_is_a_wire_error() -> None:
    from kafka.protocol.consumer.group import HeartbeatRequest

    frame = request_frame(HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), 4)
    header = wire.parse_request_header(frame)
    with pytest.raises(wire.WireError):
        wire.decode_request(header, frame[: header.body_offset + 3])


def test_every_proxy_event_type_is_documented() -> None:
    from pathlib import Path

    from kgctl.model.events import EVENT_TYPES

    text = (Path(__file__).resolve().parents[1] / "docs" / "events.md").read_text()
    section = text[text.index("## Proxy events") :]
    names = list(EVENT_TYPES)
    proxy_types = names[names.index("ProxyStarted") : names.index("ProxyStopped") + 1]
    assert len(proxy_types) == 18
    for name in proxy_types:
        assert f"| `{name}` |" in section, name


def test_wire_lines_render_every_proxy_event() -> None:
    from kgctl.model.events import Event
    from kgctl.render.proxy_lines import describe_wire, render_line

    join = Event(
        type="JoinGroupTraced", ts_ms=1, mono_ms=0.0, seq=1, group="g", client_id="app-1",
        member_id="m-1", source="wire",
        data={
            "api_version": 9, "connection": "c3", "latency_ms": 2.5, "error": "NONE",
            "request": {"protocols": ["range"], "reason": "kgctl: first_join"},
            "response": {"generation": 4, "is_leader": True}, "fault": "r1", "injected": False,
        },
    )  # fmt: skip
    line = describe_wire(join)
    assert "app-1 JoinGroup v9 group=g" in line and "reason='kgctl: first_join'" in line
    assert "→ NONE gen 4 leader (2.5 ms, c3)" in line
    quiet = Event(type="HeartbeatTraced", ts_ms=1, mono_ms=0.0, seq=2, group="g", source="wire",
                  data={"error": "NONE"})  # fmt: skip
    assert render_line(quiet) is None and render_line(quiet, heartbeats=True)


def test_chaos_plain_lines_show_the_faults_the_proxy_applied() -> None:
    from kgctl.model.events import Event
    from kgctl.render.chaos_view import event_line

    fault = Event(
        type="FaultInjected", ts_ms=1, mono_ms=0.0, seq=3, group="g", client_id="kgctl-m2",
        source="wire",
        data={"rule": "r1", "api": "Heartbeat", "effect": "error", "error": "FENCED_INSTANCE_ID",
              "connection": "c4", "applied": 1},
    )  # fmt: skip
    assert event_line(fault) == "  FAULT r1 Heartbeat error FENCED_INSTANCE_ID → kgctl-m2 (c4, #1)"
    traced = Event(type="HeartbeatTraced", ts_ms=1, mono_ms=0.0, seq=4, group="g", source="wire")
    assert event_line(traced) is None


def _traced(type_: str, ts: int, client: str, gen: int, **data: object) -> object:
    from kgctl.model.events import Event

    return Event(
        type=type_, ts_ms=ts, mono_ms=0.0, seq=ts, group="g", member=client, client_id=client,
        member_id=f"{client}-id", generation=gen, source="wire",
        data={"error": "NONE", "latency_ms": 2.0, **data},
    )  # fmt: skip


def test_a_proxy_recording_alone_gives_report_its_members_and_rebalances() -> None:
    from kgctl.model.events import Event
    from kgctl.report import build_report

    def join(ts: int, client: str, gen: int, members: list[str]) -> object:
        return _traced(
            "JoinGroupTraced", ts, client, gen,
            request={"member_id": f"{client}-id", "protocols": ["range"], "reason": "r"},
            response={"generation": gen, "member_id": f"{client}-id", "leader": "a-id",
                      "protocol": "range", "is_leader": client == "a", "members": members},
        )  # fmt: skip

    def sync(ts: int, client: str, gen: int, parts: list[int]) -> object:
        return _traced(
            "SyncGroupTraced", ts, client, gen,
            request={"generation": gen, "assignments": 0}, response={"assignment": {"t": parts}},
        )  # fmt: skip

    events = [
        join(1000, "a", 1, ["a-id"]),
        sync(1010, "a", 1, [0, 1, 2, 3]),
        join(2000, "a", 2, ["a-id", "b-id"]),
        join(2001, "b", 2, []),
        sync(2010, "a", 2, [0, 1]),
        sync(2011, "b", 2, [2, 3]),
        _traced("LeaveGroupTraced", 3000, "b", 2, request={"members": [{"reason": "bye"}]}),
        join(3100, "a", 3, ["a-id"]),
        sync(3110, "a", 3, [0, 1, 2, 3]),
    ]
    report = build_report([e for e in events if isinstance(e, Event)], "g")
    assert [r.generation for r in report.rebalances] == [1, 2, 3]
    assert sorted(m.key for m in report.members) == ["a", "b"]
    # A client that speaks for itself (a kgctl member) is not counted twice.
    speaking = Event(type="MemberStarted", ts_ms=900, mono_ms=0.0, seq=1, group="g",
                     member="a", client_id="a", source="member")  # fmt: skip
    from kgctl.model.wire import member_steps

    steps = member_steps([speaking, *[e for e in events if isinstance(e, Event)]])
    assert not [e for e in steps if e.client_id == "a" and e.type == "JoinCompleted"]
    assert [e for e in steps if e.client_id == "b" and e.type == "JoinCompleted"]


# -- Metadata (kgctl proxy --trace-metadata) --------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 4, 9, 10, 12, 13])
def test_a_metadata_request_says_which_topics_it_asks_for(version: int) -> None:
    from kafka.protocol.metadata.metadata import MetadataRequest

    Topic = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(
        topics=[Topic(name="orders"), Topic(name="audit")], allow_auto_topic_creation=False
    )
    frame = request_frame(req, version, client_id="kgctl-m0")
    header = wire.parse_request_header(frame)
    assert (header.api_key, header.client_id) == (wire.METADATA, "kgctl-m0")
    decoded = wire.decode_request(header, frame)
    assert wire.request_fields(wire.METADATA, version, decoded) == {"topics": ["audit", "orders"]}
    assert wire.request_group(wire.METADATA, version, decoded) == ""
    # Every topic: an empty list in v0, null from v1.
    every = MetadataRequest(topics=[] if version == 0 else None, allow_auto_topic_creation=False)
    frame = request_frame(every, version)
    decoded = wire.decode_request(wire.parse_request_header(frame), frame)
    assert wire.request_fields(wire.METADATA, version, decoded) == {"topics": None}


def _metadata_answer(orders_partitions: int) -> Any:
    from kafka.protocol.metadata.metadata import MetadataResponse

    Topic = MetadataResponse.MetadataResponseTopic
    Partition = Topic.MetadataResponsePartition
    Broker = MetadataResponse.MetadataResponseBroker

    def partitions(n: int) -> list[Any]:
        return [
            Partition(
                error_code=0, partition_index=i, leader_id=1, replica_nodes=[1], isr_nodes=[1]
            )
            for i in range(n)
        ]

    return MetadataResponse(
        brokers=[Broker(node_id=1, host="kafka-1", port=9092)],
        cluster_id="c",
        controller_id=1,
        topics=[
            Topic(error_code=0, name="orders", partitions=partitions(orders_partitions)),
            Topic(error_code=0, name="audit", partitions=partitions(2)),
            Topic(error_code=3, name="gone", partitions=[]),
        ],
    )


@pytest.mark.parametrize("version", [1, 4, 9, 12, 13])
def test_a_metadata_answer_gives_each_topic_s_partition_count(version: int) -> None:
    """What the growth benchmark reads: the count the answer lists for a topic, before
    and after the topic grew; a topic answered with an error has no count."""
    before = response_frame(_metadata_answer(12), version)
    after = response_frame(_metadata_answer(18), version)
    for frame, count in ((before, 12), (after, 18)):
        fields = wire.response_fields(
            wire.METADATA, version, wire.decode_response(wire.METADATA, version, frame)
        )
        assert fields == {
            "error": "UNKNOWN_TOPIC_OR_PARTITION",
            "brokers": 1,
            "partitions": {"audit": 2, "orders": count},
            "errors": {"gone": "UNKNOWN_TOPIC_OR_PARTITION"},
        }


def test_metadata_is_traced_only_when_asked() -> None:
    from kgctl.proxy.server import Proxy
    from kgctl.proxy.trace import WireEmitter

    plain = Proxy([("127.0.0.1", 9092)], WireEmitter(lambda e: None))
    asked = Proxy([("127.0.0.1", 9092)], WireEmitter(lambda e: None), trace_metadata=True)
    assert wire.METADATA not in plain.traced
    assert plain.traced == wire.TRACED
    assert asked.traced == wire.TRACED | {wire.METADATA}


def test_a_metadata_line_names_the_topics_and_their_counts() -> None:
    from kgctl.proxy.trace import WireEmitter
    from kgctl.render.proxy_lines import describe_wire

    seen: list[Any] = []
    WireEmitter(seen.append).emit(
        "MetadataTraced",
        _envelope={"client_id": "kgctl-m0"},
        api_version=12,
        connection="c3",
        latency_ms=1.1,
        request={"topics": ["orders"]},
        error="NONE",
        response={"error": "NONE", "brokers": 1, "partitions": {"orders": 18}, "errors": {}},
    )
    assert describe_wire(seen[0]) == (
        "kgctl-m0 Metadata v12 topics=orders → NONE partitions orders=18 (1.1 ms, c3)"
    )


def _cgh(sent: int, answered: int, assignment: Any = None, error: str = "NONE") -> Any:
    from kgctl.model.events import Event

    return Event(
        type="ConsumerGroupHeartbeatTraced", ts_ms=1, mono_ms=0.0, seq=3, group="g",
        client_id="rdkafka-1", member_id="m-1", source="wire",
        data={"api_version": 0, "connection": "c4", "latency_ms": 1.0, "error": error,
              "request": {"member_epoch": sent}, "response": {"member_epoch": answered,
                                                               "assignment": assignment}},
    )  # fmt: skip


def test_a_consumer_group_heartbeat_that_changed_nothing_is_hidden_as_a_classic_one_is() -> None:
    # The audit: every answered ConsumerGroupHeartbeat of a librdkafka member was printed
    # (a line a second per member), while the docs say successful heartbeats are hidden.
    from kgctl.render.proxy_lines import render_line

    assert render_line(_cgh(5, 5)) is None
    assert render_line(_cgh(5, 5), heartbeats=True)
    # The group's steps stay: a join, a new epoch, an assignment, a leave, an error.
    assert render_line(_cgh(0, 1)) and "epoch 1" in (render_line(_cgh(0, 1)) or "")
    assert render_line(_cgh(5, 6))
    assert render_line(_cgh(5, 5, assignment={"t": [0, 1]}))
    assert render_line(_cgh(-1, -1))
    assert render_line(_cgh(5, 5, error="FENCED_MEMBER_EPOCH"))


def test_successful_commits_can_be_hidden_and_failed_ones_never_are() -> None:
    from kgctl.model.events import Event
    from kgctl.render.proxy_lines import render_line

    def commit(error: str) -> Event:
        return Event(
            type="OffsetCommitTraced", ts_ms=1, mono_ms=0.0, seq=4, group="g",
            client_id="rdkafka-1", member_id="m-1", source="wire",
            data={"api_version": 8, "connection": "c4", "latency_ms": 1.0, "error": error,
                  "request": {"offsets": {"t": {"0": 5}}}, "response": {}},
        )  # fmt: skip

    assert render_line(commit("NONE"))  # shown by default, as before
    assert render_line(commit("NONE"), commits=False) is None
    assert render_line(commit("ILLEGAL_GENERATION"), commits=False)


def test_clients_connecting_as_the_proxy_closes_leave_no_writer_unclosed() -> None:
    # A client that connects just as the proxy closes (kafka-python reconnects at once):
    # whatever asyncio accepted is closed by the proxy, not left for the collector (the
    # ResourceWarning "unclosed StreamWriter" CI saw twice). Local sockets only.
    import asyncio
    import gc
    import warnings

    async def one_round(turns: int) -> None:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # the "broker": holds the connection until it closes
            writer.close()

        broker = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = broker.sockets[0].getsockname()[1]
        proxy = Proxy([("127.0.0.1", port)], WireEmitter(lambda e: None))
        listen = (await proxy.start()).rpartition(":")[2]
        clients = [
            asyncio.ensure_future(asyncio.open_connection("127.0.0.1", int(listen)))
            for _ in range(8)
        ]
        for _ in range(turns):  # some accepted, some on their way
            await asyncio.sleep(0)
        await proxy.close()
        for c in await asyncio.gather(*clients, return_exceptions=True):
            if isinstance(c, tuple):
                c[1].close()
        broker.close()
        await broker.wait_closed()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        for turns in range(60):
            asyncio.run(one_round(turns % 20))
            gc.collect()
    unclosed = [str(w.message) for w in seen if "StreamWriter" in str(w.message)]
    assert unclosed == []


def test_a_connection_ending_as_the_proxy_closes_leaves_no_writer_unclosed() -> None:
    # A client hangs up and, a few turns later, the proxy closes: close() cancels the
    # session while it may already be cleaning up (the ResourceWarning "unclosed
    # StreamWriter" of test_a_bad_upstream_costs_only_its_own_connection in CI, where
    # kafka-python's admin client closed its connections just before the proxy). The
    # collector runs while the loop still does, as on the proxy's thread; an unclosed
    # writer then warns (after the loop, it would say "loop is closed").
    import asyncio
    import gc
    import warnings

    async def one_round(turns: int) -> None:
        accepted, ended = asyncio.Event(), asyncio.Event()

        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set()
            await reader.read()  # the "broker": holds the connection until it closes
            writer.close()
            ended.set()

        broker = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = broker.sockets[0].getsockname()[1]
        proxy = Proxy([("127.0.0.1", port)], WireEmitter(lambda e: None))
        listen = (await proxy.start()).rpartition(":")[2]
        _, client = await asyncio.open_connection("127.0.0.1", int(listen))
        await accepted.wait()  # the proxy's upstream connection is made
        client.close()  # the client hangs up: its session ends
        for _ in range(turns):  # the session somewhere in its ending
            await asyncio.sleep(0)
        await proxy.close()
        gc.collect()
        await asyncio.wait_for(ended.wait(), 5)  # the broker saw its connection closed
        broker.close()
        await broker.wait_closed()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        for turns in range(30):
            asyncio.run(one_round(turns))
    unclosed = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
