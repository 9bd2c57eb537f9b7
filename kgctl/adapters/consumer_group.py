"""The requests of a KIP-848 `consumer`-protocol member, on kafka-python's network layer.

kafka-python 3.0.12 speaks only the classic protocol. The consumer-protocol member
(`kgctl/member/consumer_member.py`) therefore uses a KafkaConsumer built without a group
(`group_id=None`) only as a fetcher for the partitions it assigns itself (`assign()`),
and sends the group's requests itself through the same connection manager:
FindCoordinator, ConsumerGroupHeartbeat (api key 68, its schema in `messages/`, defined
in `wire.py`), OffsetFetch for the committed offsets of newly assigned partitions, and
OffsetCommit v9, the first version that carries a member epoch (the broker refuses an
older one from a consumer-protocol member). Every call blocks the calling thread while
kafka-python's I/O thread does the work (`manager.run`), so the member's heartbeat thread
and its poll thread can both use it.

Topic ids are kept as strings (the UUID's text) outside this module.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import kafka.errors as Errors
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.structs import TopicPartition

from kgctl.adapters.clients import error_name
from kgctl.adapters.wire import ConsumerGroupHeartbeatRequest

Owned = dict[str, frozenset[int]]  # topic id (text) -> partitions

# ConsumerGroupHeartbeat v1: the member id is the client's (a UUID), and the
# subscription may be a broker-side regular expression (KIP-848's SubscribedTopicRegex).
# v0 (the brokers of Apache Kafka 3.7-3.9 serve only it): the broker makes the member id
# when the join carries none, and there is no regex.
HEARTBEAT_MAX_VERSION = 1
HEARTBEAT_MIN_VERSION = 0
# OffsetCommit v9 carries the member epoch; v10 names topics by id (not needed here).
OFFSET_COMMIT_VERSION = 9


class Unsupported(Exception):
    """The broker does not serve ConsumerGroupHeartbeat (Apache Kafka before 3.7, or a
    broker with the consumer protocol disabled), or not the version a request needs."""


class NoCoordinator(Exception):
    """FindCoordinator answered with an error (the coordinator is not available yet)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class Coordinator:
    node: int
    host: str
    port: int
    connection: Any  # the node id to send to: the coordinator's own connection


@dataclass(frozen=True)
class HeartbeatAnswer:
    """A ConsumerGroupHeartbeat answer: `assignment` None means unchanged."""

    error: str
    message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Owned | None
    throttle_time_ms: int
    api_version: int


class GroupChannel:
    """One member's group requests, sent through a KafkaConsumer's connections."""

    def __init__(self, consumer: Any, group: str, request_timeout_ms: int) -> None:
        self._consumer = consumer
        self._manager = consumer._manager
        self.group = group
        self.request_timeout_ms = request_timeout_ms
        # Internal topics seen in metadata (a client-side pattern leaves them out, as
        # Java's exclude.internal.topics does).
        self.internal: set[str] = set()

    # -- the coordinator -------------------------------------------------------------
    def find_coordinator(self) -> Coordinator:
        """FindCoordinator to the least loaded broker; raises NoCoordinator on an error."""
        return self._manager.run(self._find_coordinator)  # type: ignore[no-any-return]

    async def _find_coordinator(self) -> Coordinator:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group], min_version=4)
        response = await self._manager.wait_for(
            self._manager.send(request), self.request_timeout_ms
        )
        found = response.coordinators[0]
        error = Errors.for_code(found.error_code)
        if error is not Errors.NoError:
            raise NoCoordinator(error_name(error))
        # Its own connection (a node id of its own, as Java's coordinator manager does):
        # on the broker's connection used for fetching, a heartbeat would wait behind a
        # fetch held for fetch.max.wait.ms, since the broker answers one connection's
        # requests in order.
        conn = self._manager.cluster.add_coordinator(found, 0, self.group, synthesize_node_id=True)
        return Coordinator(int(found.node_id), str(found.host), int(found.port), conn)

    # -- ConsumerGroupHeartbeat --------------------------------------------------------
    def heartbeat_version(self) -> int:
        """The ConsumerGroupHeartbeat version this member and the brokers share (from the
        brokers' ApiVersions); raises Unsupported when they share none."""
        data = self._manager.broker_version_data
        try:
            if data is None:
                raise Errors.IncompatibleBrokerVersion("no ApiVersions answer yet")
            return int(
                data.api_version(
                    ConsumerGroupHeartbeatRequest,
                    min_version=HEARTBEAT_MIN_VERSION,
                    max_version=HEARTBEAT_MAX_VERSION,
                )
            )
        except Errors.IncompatibleBrokerVersion as exc:
            raise Unsupported(str(exc)) from None

    def heartbeat(self, node: Any, request: Any, version: int) -> HeartbeatAnswer:
        """Send one heartbeat built by `heartbeat_request` at `version` and read its
        answer. Raises kafka-python's errors when the request got no answer."""
        try:
            response = self._manager.run(self._send, request, node)
        except Errors.IncompatibleBrokerVersion as exc:
            raise Unsupported(str(exc)) from None
        return heartbeat_answer(response, version)

    async def _send(self, request: Any, node: Any) -> Any:
        return await self._manager.wait_for(
            self._manager.send(request, node_id=node), self.request_timeout_ms
        )

    # -- topics ------------------------------------------------------------------------
    def topic_names(self) -> dict[str, str]:
        """Every topic the member may describe, by id: a Metadata request of its own
        (v10+, which carries topic ids), so the fetcher's metadata is left alone (the
        heartbeat thread calls this while the poll thread fetches)."""
        return self._manager.run(self._topic_names)  # type: ignore[no-any-return]

    async def _topic_names(self) -> dict[str, str]:
        request = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, min_version=10, max_version=12
        )
        response = await self._manager.wait_for(
            self._manager.send(request), self.request_timeout_ms
        )
        out: dict[str, str] = {}
        for topic in response.topics:
            if topic.error_code == 0 and topic.name and topic.topic_id is not None:
                out[str(topic.topic_id)] = str(topic.name)
                if topic.is_internal:
                    self.internal.add(str(topic.name))
        return out

    # -- offsets -----------------------------------------------------------------------
    def committed(self, node: Any, partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        """The group's committed offsets for these partitions (none: not in the answer)."""
        if not partitions:
            return {}
        _Topic = OffsetFetchRequest.OffsetFetchRequestTopic
        request = OffsetFetchRequest(
            group_id=self.group,
            topics=[_Topic(name=t, partition_indexes=sorted(ps)) for t, ps in partitions.items()],
            require_stable=True,
            min_version=7,
            max_version=7,
        )
        response = self._manager.run(self._send, request, node)
        error = Errors.for_code(response.error_code)
        if error is not Errors.NoError:
            raise error(f"OffsetFetch {self.group}")
        out: dict[tuple[str, int], int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                perror = Errors.for_code(p.error_code)
                if perror is not Errors.NoError:
                    raise perror(f"OffsetFetch {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(str(topic.name), int(p.partition_index))] = int(p.committed_offset)
        return out

    def commit(
        self,
        node: Any,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
    ) -> str:
        """OffsetCommit v9 with the member's epoch; the first error's name, or NONE."""
        _Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        _Partition = _Topic.OffsetCommitRequestPartition
        by_topic: dict[str, dict[int, int]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, {})[partition] = offset
        request = OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=member_epoch,
            member_id=member_id,
            group_instance_id=instance_id,
            topics=[
                _Topic(
                    name=topic,
                    partitions=[
                        _Partition(partition_index=p, committed_offset=o, committed_metadata="")
                        for p, o in sorted(ps.items())
                    ],
                )
                for topic, ps in sorted(by_topic.items())
            ],
            min_version=OFFSET_COMMIT_VERSION,
            max_version=OFFSET_COMMIT_VERSION,
        )
        response = self._manager.run(self._send, request, node)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code:
                    return error_name(Errors.for_code(p.error_code))
        return "NONE"


# -- ConsumerGroupHeartbeat at a version (pure) --------------------------------------------


def heartbeat_request(
    group: str,
    version: int,
    *,
    member_id: str,
    member_epoch: int,
    instance_id: str | None,
    rebalance_timeout_ms: int | None,
    topics: tuple[str, ...] | None,
    regex: str | None,
    assignor: str | None,
    owned: Owned | None,
    rack_id: str | None = None,
) -> Any:
    """The request, pinned to `version`. v0 has no SubscribedTopicRegex: a regex there
    raises Unsupported (its encoding would drop it without a word), as Java's request
    builder refuses one."""
    if version < 1 and regex:
        raise Unsupported(
            "ConsumerGroupHeartbeat v0 has no broker-side regex (v1, Apache Kafka 4.0 and later)"
        )
    _Topic = ConsumerGroupHeartbeatRequest.TopicPartitions
    return ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=member_epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=-1 if rebalance_timeout_ms is None else rebalance_timeout_ms,
        subscribed_topic_names=list(topics) if topics is not None else None,
        subscribed_topic_regex=regex if version >= 1 else None,
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else [
            _Topic(topic_id=uuid.UUID(t), partitions=sorted(ps)) for t, ps in sorted(owned.items())
        ],
        min_version=version,
        max_version=version,
    )


def heartbeat_answer(response: Any, version: int) -> HeartbeatAnswer:
    """A decoded ConsumerGroupHeartbeat answer (either version) as the member reads it."""
    assignment: Owned | None = None
    if response.assignment is not None:
        assignment = {}
        for tp in response.assignment.topic_partitions or []:
            key = str(tp.topic_id)
            assignment[key] = assignment.get(key, frozenset()) | frozenset(
                int(p) for p in tp.partitions or []
            )
    return HeartbeatAnswer(
        error=error_name(Errors.for_code(response.error_code)),
        message=response.error_message,
        member_id=response.member_id,
        member_epoch=int(response.member_epoch),
        heartbeat_interval_ms=int(response.heartbeat_interval_ms),
        assignment=assignment,
        throttle_time_ms=int(response.throttle_time_ms or 0),
        api_version=int(getattr(response, "API_VERSION", None) or version),
    )


# -- the fetcher's partitions ------------------------------------------------------------


def topic_partitions(owned: dict[str, frozenset[int]]) -> list[TopicPartition]:
    """kafka-python's TopicPartitions for {topic name: partitions}."""
    return [TopicPartition(t, p) for t, ps in sorted(owned.items()) for p in sorted(ps)]


def seek(consumer: Any, committed: dict[tuple[str, int], int]) -> None:
    """Start the fetcher at the group's committed offsets; partitions without one start
    where the consumer's auto_offset_reset (--from) says."""
    for (topic, partition), offset in committed.items():
        consumer.seek(TopicPartition(topic, partition), offset)
