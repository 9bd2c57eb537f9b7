"""A plain kafka-python KafkaConsumer member for the benchmark (no kgctl code).

Prints JSON lines like VerifiableConsumer: {"timestamp": ms, "name":
"partitions_assigned"|"partitions_revoked", "partitions": [{"topic", "partition"}]}.
Reads `{"op":"subscribe","topics":[...]}` lines on stdin (applied on the poll thread).
SIGTERM closes the consumer (LeaveGroup). The loop polls with `timeout_ms=100` so that
stdin commands are applied promptly (kgctl's member polls with 200 ms; Java's
VerifiableConsumer with `Long.MAX_VALUE`).

Known kafka-python 3.0.12 behaviour this member shows (docs/benchmarks.md, section 1):
after `subscribe()` changes the topics, `need_rejoin()` turns False as soon as the
JoinGroup is built (`group_protocols()` records the joined subscription). If that poll's
100 ms run out before the SyncGroup answer (the broker waits for the other members), the
next poll sees no rejoin needed and never awaits the join: the answer is not applied,
heartbeats stay disabled, the coordinator drops the member at its session timeout, and
it never rejoins. `KP_MEMBER_DEBUG=1` (kafka-python's DEBUG log on stderr; see
`python -m bench.run --member-logs`) shows it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import sys
import threading
import time

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener


def emit(name: str, partitions: object = None) -> None:
    line: dict[str, object] = {"timestamp": int(time.time() * 1000), "name": name}
    if partitions is not None:
        line["partitions"] = [
            {"topic": tp.topic, "partition": tp.partition}
            for tp in sorted(partitions)  # type: ignore[call-overload]
        ]
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked: object) -> None:
        emit("partitions_revoked", revoked)

    def on_partitions_assigned(self, assigned: object) -> None:
        emit("partitions_assigned", assigned)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", action="append", required=True)
    ap.add_argument("--session-timeout", type=int, default=6000)
    ap.add_argument("--heartbeat-interval", type=int, default=1000)
    ap.add_argument("--metadata-max-age", type=int, default=1000)
    ap.add_argument("--client-id", help="client.id (default: kafka-python's)")
    args = ap.parse_args()
    if os.environ.get("KP_MEMBER_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        session_timeout_ms=args.session_timeout,
        heartbeat_interval_ms=args.heartbeat_interval,
        metadata_max_age_ms=args.metadata_max_age,
        auto_offset_reset="earliest",
        **({"client_id": args.client_id} if args.client_id else {}),
    )
    listener = Listener()
    consumer.subscribe(args.topic, listener=listener)
    commands: queue.Queue[dict[str, object]] = queue.Queue()

    def read_stdin() -> None:
        for raw in sys.stdin:
            try:
                commands.put(json.loads(raw))
            except ValueError:
                pass

    threading.Thread(target=read_stdin, daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    emit("startup_complete")
    try:
        while not stop.is_set():
            while not commands.empty():
                cmd = commands.get()
                if cmd.get("op") == "subscribe":
                    topics = list(cmd["topics"])  # type: ignore[call-overload]
                    consumer.subscribe(topics, listener=listener)
                    emit("subscribed", None)
            consumer.poll(timeout_ms=100)
    finally:
        consumer.close()
        emit("shutdown_complete")


if __name__ == "__main__":
    main()
