"""A plain kafka-python consumer (KafkaConsumer and a ConsumerRebalanceListener, the
classic protocol) reporting what it itself saw: the same interface and JSON lines as
client_rdkafka.py (its listener's assigned, revoked and lost, with wall-clock times).
kgctl never reads it.

usage: client_kafka_python.py NAME GROUP TOPIC BOOTSTRAP [key=value ...]

The keys are the suite's (librdkafka's dotted names: `session.timeout.ms=3000`), read as
KafkaConsumer's arguments (`session_timeout_ms=3000`); `partition.assignment.strategy`
is `range`, the only assignor this client kind runs. Commands on stdin, one a line:
`stall SECONDS` (stop polling that long), `stop` (close gracefully, a LeaveGroup).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import warnings
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

name, group, topic, bootstrap = sys.argv[1:5]
extra = dict(kv.split("=", 1) for kv in sys.argv[5:])
if extra.pop("partition.assignment.strategy", "range") != "range":
    raise SystemExit("client_kafka_python.py runs the range assignor only")
out_lock = threading.Lock()


def report(event: str, **fields: Any) -> None:
    line = json.dumps({"ts_ms": int(time.time() * 1000), "client": name, "event": event, **fields})
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def setting(value: str) -> Any:
    return int(value) if value.isdigit() else value


conf: dict[str, Any] = {
    "bootstrap_servers": bootstrap,
    "group_id": group,
    "client_id": name,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "partition_assignment_strategy": [RangePartitionAssignor],
    # The growth situation: the members must see new partitions within seconds.
    "metadata_max_age_ms": 1000,
    **{k.replace(".", "_"): setting(v) for k, v in extra.items()},
}
try:
    consumer = KafkaConsumer(**conf)
except Exception as exc:  # no broker answered in time: say so, the harness shows it
    report("error", error=f"KafkaConsumer: {exc!r}")
    raise SystemExit(1) from exc


def parts(tps: Any) -> list[int]:
    return sorted(tp.partition for tp in tps if tp.topic == topic)


def owned() -> list[int]:
    return parts(consumer.assignment())


class Listener(ConsumerRebalanceListener):
    """The member's own word on each change of its assignment."""

    def on_partitions_revoked(self, revoked: Any) -> None:
        # kafka-python's eager protocol: the assignment is cleared after this returns.
        report(
            "revoked", partitions=parts(revoked), owns=sorted(set(owned()) - set(parts(revoked)))
        )

    def on_partitions_assigned(self, assigned: Any) -> None:
        report("assigned", partitions=parts(assigned), owns=owned())

    def on_partitions_lost(self, lost: Any) -> None:
        report("lost", partitions=parts(lost), owns=sorted(set(owned()) - set(parts(lost))))


commands: list[str] = []
commands_lock = threading.Lock()


def read_commands() -> None:
    for line in sys.stdin:
        with commands_lock:
            commands.append(line.strip())
    with commands_lock:  # the harness went away: stop too, never outlive it
        commands.append("stop")


threading.Thread(target=read_commands, daemon=True).start()
consumer.subscribe([topic], listener=Listener())
report("started", config={k: v for k, v in conf.items() if isinstance(v, (int, str, bool))})
running = True
last_commit = 0.0
while running:
    with commands_lock:
        todo, commands[:] = list(commands), []
    for command in todo:
        if command == "stop":
            running = False
        elif command.startswith("stall "):
            seconds = float(command.split()[1])
            report("stalled", seconds=seconds)
            time.sleep(seconds)
            report("resumed")
    if not running:
        break
    batches = consumer.poll(timeout_ms=200)
    if batches and time.time() - last_commit >= 1:
        last_commit = time.time()
        try:
            consumer.commit_async()
        except Exception as exc:  # a commit refused mid-rebalance: said, not fatal
            report("error", error=str(exc))
report("closing")
consumer.close()
report("closed")
