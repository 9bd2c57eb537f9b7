"""A plain kafka-python consumer, as it ships (no kgctl code), reporting what it itself
saw in the truth suite's JSON lines: the same interface as client_rdkafka.py. Its own
rebalance listener gives the assigned, revoked and lost partitions with wall-clock times;
the partitions it owns after each are kept here from those callbacks (kafka-python
updates its assignment around the listener in an order of its own). kgctl never reads it.

usage: client_kafkapython.py NAME GROUP TOPIC BOOTSTRAP [key=value ...]

The keys are the suite's (librdkafka's names), turned into kafka-python's settings:
`partition.assignment.strategy` (range, cooperative-sticky), `session.timeout.ms`,
`heartbeat.interval.ms`, `max.poll.interval.ms`, `group.instance.id`. Commands on stdin,
one a line: `stall SECONDS` (stop polling that long), `stop` (close: a LeaveGroup).
The harness ends a killed member with SIGKILL, which this program cannot see.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from clientlib import Commands, Out
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor

name, group, topic, bootstrap = sys.argv[1:5]
extra = dict(kv.split("=", 1) for kv in sys.argv[5:])
ASSIGNORS = {"range": RangePartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}
NUMBERS = {
    "session.timeout.ms": "session_timeout_ms",
    "heartbeat.interval.ms": "heartbeat_interval_ms",
    "max.poll.interval.ms": "max_poll_interval_ms",
}
out = Out(name)
report = out.report


config: dict[str, Any] = {
    "bootstrap_servers": bootstrap,
    "group_id": group,
    "client_id": name,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    # The growth situation: the members must see new partitions within seconds.
    "metadata_max_age_ms": 1000,
    "partition_assignment_strategy": (
        ASSIGNORS[extra.pop("partition.assignment.strategy", "range")],
    ),
}
for key, setting in NUMBERS.items():
    if key in extra:
        config[setting] = int(extra.pop(key))
if "group.instance.id" in extra:
    config["group_instance_id"] = extra.pop("group.instance.id")
if extra:
    raise SystemExit(f"client_kafkapython.py: settings it does not take: {sorted(extra)}")

# Cooperative callbacks move partitions one by one; eager ones hand over everything.
INCREMENTAL = config["partition_assignment_strategy"][0] is CooperativeStickyAssignor
owned: set[int] = set()
consumer: KafkaConsumer | None = None


def member_id() -> str | None:
    # (Private, and only to help a reader of a failed run: never part of the truth.)
    try:
        return str(consumer._coordinator._generation.member_id) or None  # type: ignore[union-attr]
    except Exception:
        return None


class Listener(ConsumerRebalanceListener):
    # Runs on kafka-python's I/O thread: only bookkeeping and a line out.
    def on_partitions_assigned(self, assigned: Any) -> None:
        got = {tp.partition for tp in assigned}
        if not INCREMENTAL:  # an eager assignment is the whole of what it owns
            owned.clear()
        owned.update(got)
        report("assigned", partitions=sorted(got), owns=sorted(owned), member_id=member_id())

    def on_partitions_revoked(self, revoked: Any) -> None:
        gone = {tp.partition for tp in revoked}
        owned.difference_update(gone)
        report("revoked", partitions=sorted(gone), owns=sorted(owned), member_id=member_id())

    def on_partitions_lost(self, lost: Any) -> None:
        gone = {tp.partition for tp in lost}
        owned.difference_update(gone)
        report("lost", partitions=sorted(gone), owns=sorted(owned), member_id=member_id())


consumer = KafkaConsumer(**config)
commands = Commands(out)
consumer.subscribe([topic], listener=Listener())
report("started", config={k: str(v) for k, v in config.items()})
last_commit = 0.0
while commands.running:
    commands.take()  # (stop and stall only: this program takes no command of its own)
    if not commands.running:
        break
    try:
        got = consumer.poll(timeout_ms=200)
    except Exception as exc:  # (a failed commit or a group error surfaces here)
        report("error", error=f"{type(exc).__name__}: {exc}")
        continue
    if got and time.time() - last_commit >= 1:
        last_commit = time.time()
        consumer.commit_async()
report("closing")
consumer.close()
report("closed")
