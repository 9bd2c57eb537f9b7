"""The shard group's consumer against kafka-python 3.0.12's dropped join, on a real
broker: the leader's rejoin for a metadata change, left unanswered by a poll that ran out
of time, is never taken by kafka-python (the member keeps no partitions and stops its
heartbeat); `rejoin_dropped_join` brings it back. The steps are ordered by the test, one
consumer polled at a time, so the drop happens every run."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.structs import MemberState

from kgctl.adapters.offsets_log import rejoin_dropped_join

pytestmark = pytest.mark.kafka


def _poll_until(what: str, cond: Callable[[], bool], *consumers: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        for c in consumers:
            c.poll(timeout_ms=100)


def _stable(c: Any) -> bool:
    return c._coordinator.state is MemberState.STABLE


def _dropped(c: Any) -> bool:
    """A join kafka-python finished that no poll took (one taken is let go)."""
    task = c._coordinator._join_task
    return not _stable(c) and task is not None and task.is_done


def test_a_join_dropped_by_kafka_python_is_asked_for_again(bootstrap: str) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"rejoin-drop-{run}", f"rejoin-drop-{run}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    consumers = [
        KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )  # fmt: skip
        for _ in "ab"
    ]
    try:
        for c in consumers:
            c.subscribe([topic])

        def settled() -> bool:
            # A member whose first join came before the topic's metadata rejoins for it,
            # the same drop that may happen here; the test makes it happen below.
            for c in consumers:
                rejoin_dropped_join(c)
            return all(_stable(c) for c in consumers) and (
                len({c._coordinator._generation.generation_id for c in consumers}) == 1
            )

        _poll_until("both members stable", settled, *consumers)
        # Only the leader assigns, so only it rejoins when the topic's metadata changes.
        leader, follower = sorted(
            consumers, key=lambda c: c._coordinator._assignment_snapshot is None
        )
        assert follower._coordinator._assignment_snapshot is None
        assert leader._coordinator._assignment_snapshot == {topic: {0}}
        generation = follower._coordinator._generation.generation_id

        admin.create_partitions({topic: NewPartitions(2)})

        def rejoining() -> bool:
            # Metadata asked for again until it has the new partition (the broker's
            # cache may answer the first request with the topic as it was).
            leader._client.cluster.request_update()
            return not _stable(leader)

        # The leader's JoinGroup is held by the broker until the follower rejoins, which
        # it does only when polled: this poll runs out of time with the join in flight.
        _poll_until("the leader rejoining", rejoining, leader)
        _poll_until(
            "the follower in the next generation",
            lambda: (
                _stable(follower) and follower._coordinator._generation.generation_id > generation
            ),
            follower,
        )
        # kafka-python finished the leader's join (the follower could sync only after
        # the leader's SyncGroup), but no poll takes it.
        _poll_until("the leader's join done", lambda: _dropped(leader))
        for _ in range(10):
            leader.poll(timeout_ms=100)
        assert _dropped(leader)

        # Now each polled by its own thread as a monitor polls its consumer: a join
        # that ends between two polls is one kafka-python throws away and sends again
        # (and a leader's sends the group into another rebalance), so polls taking
        # turns on one thread would keep the group rebalancing.
        rescues: list[bool] = []
        done = threading.Event()

        def poll(c: Any) -> None:
            while not done.is_set():
                c.poll(timeout_ms=100)
                if c is leader:
                    rescues.append(rejoin_dropped_join(c))

        threads = [threading.Thread(target=poll, args=(c,)) for c in consumers]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 30
            while not (
                all(_stable(c) for c in consumers)
                and leader.assignment() | follower.assignment()
                == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
            ):
                assert time.monotonic() < deadline, "the two partitions not given in 30 s"
                time.sleep(0.1)
        finally:
            done.set()
            for t in threads:
                t.join()
        # Asked again once, and a stable member left alone.
        assert rescues.count(True) == 1 and not rejoin_dropped_join(leader)
    finally:
        for c in consumers:
            c.close()
        admin.delete_topics([topic])
        admin.close()
