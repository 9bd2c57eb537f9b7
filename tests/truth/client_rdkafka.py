"""A plain librdkafka consumer (confluent-kafka) that reports what it itself saw, as JSON
lines on stdout: its assignment callbacks (assigned, revoked, lost) with wall-clock times,
its errors, and what it was told to do. This is the ground truth the suite holds kgctl's
answers to; kgctl never reads it.

usage: client_rdkafka.py NAME GROUP TOPIC BOOTSTRAP [key=value ...]

Commands on stdin, one a line: `stall SECONDS` (stop polling that long, as a member whose
processing outlives max.poll.interval.ms), `subscribe TOPIC,...` (a new subscription),
`stop` (close gracefully, a LeaveGroup). The partitions it reports are TOPIC's only (the
one the suite counts), whatever else it subscribes to.
The harness ends a killed member with SIGKILL, which this program cannot see.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from clientlib import Commands, Out
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

name, group, topic, bootstrap = sys.argv[1:5]
extra = dict(kv.split("=", 1) for kv in sys.argv[5:])
# Incremental callbacks for the protocols that move partitions one by one: the
# cooperative assignor and the consumer protocol (KIP-848), which is always incremental.
INCREMENTAL = (
    "cooperative" in extra.get("partition.assignment.strategy", "")
    or extra.get("group.protocol") == "consumer"
)
out = Out(name)
report = out.report


def parts(tps: list[TopicPartition]) -> list[int]:
    return sorted(tp.partition for tp in tps if tp.topic == topic)


def on_error(e: Any) -> None:
    # (error_cb's error is code _FATAL with fatal() false: the code says it.)
    fatal = bool(e.fatal()) or e.code() == KafkaError._FATAL
    report("error", error=str(e), fatal=fatal)
    if fatal:
        # A fatal error (a static member fenced by another with its group.instance.id)
        # ends the consumer for good, and after it librdkafka's poll and close block
        # (confluent-kafka 2.x, seen here): the program ends, as such an application does.
        report("ended", reason="fatal error")
        os._exit(1)


conf: dict[str, Any] = {
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "client.id": name,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    # The growth situation: the members must see new partitions within seconds.
    "topic.metadata.refresh.interval.ms": 1000,
    "error_cb": lambda e: on_error(e),
}
conf.update(extra)
consumer = Consumer(conf)


def member_id(c: Consumer) -> str | None:
    try:
        return c.memberid() or None
    except Exception:  # not in a group yet
        return None


def on_assign(c: Consumer, tps: list[TopicPartition]) -> None:
    if INCREMENTAL:
        c.incremental_assign(tps)
    else:
        c.assign(tps)
    report("assigned", partitions=parts(tps), owns=parts(c.assignment()), member_id=member_id(c))


def on_revoke(c: Consumer, tps: list[TopicPartition]) -> None:
    if INCREMENTAL:
        c.incremental_unassign(tps)
    else:
        c.unassign()
    report("revoked", partitions=parts(tps), owns=parts(c.assignment()), member_id=member_id(c))


def on_lost(c: Consumer, tps: list[TopicPartition]) -> None:
    if INCREMENTAL:
        c.incremental_unassign(tps)
    else:
        c.unassign()
    report("lost", partitions=parts(tps), owns=parts(c.assignment()), member_id=member_id(c))


commands = Commands(out)
consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
report("started", config={k: v for k, v in conf.items() if not callable(v)})
last_commit = 0.0
while commands.running:
    for command in commands.take():
        if command.startswith("subscribe "):
            topics = command.split()[1].split(",")
            consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
            report("subscribed", topics=topics)
    if not commands.running:
        break
    msg = consumer.poll(0.2)
    if msg is not None and msg.error() is not None:
        on_error(msg.error())  # (a fatal error comes this way, not through error_cb)
        continue
    if msg is not None and not msg.error() and time.time() - last_commit >= 1:
        last_commit = time.time()
        try:
            consumer.commit(asynchronous=True)
        except KafkaException as exc:
            report("error", error=str(exc))
report("closing")
consumer.close()
report("closed")
