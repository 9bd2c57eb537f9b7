"""A confluent-kafka (librdkafka) consumer to run as a kgctl chaos fleet (docs/your-app.md).

    python consumer.py BOOTSTRAP GROUP TOPICS NAME [--verifiable] [--commit-first]
        [--processing-ms MS]

It polls batches, "processes" each record (sleeps --processing-ms), then commits the
batch's next offsets synchronously: at-least-once. `--verifiable` also prints Kafka's
VerifiableConsumer JSON lines (records_consumed after processing, offsets_committed,
partitions_assigned/revoked) so kgctl judges at-least-once and duplicates exactly.
`--commit-first` is the deliberate bug: it commits a batch *before* processing it, so a
member killed mid-batch loses the rest of that batch (kgctl must say at-least-once
VIOLATED).

The client id (KGCTL_CLIENT_ID) and, for a static member, the instance id
(KGCTL_INSTANCE_ID) are the ones kgctl gives: they name this process on the wire. A
member the scenario puts on the consumer protocol (KGCTL_GROUP_PROTOCOL=consumer) sets
group.protocol=consumer.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def say(name: str, **fields: object) -> None:
    print(json.dumps({"name": name, "timestamp": int(time.time() * 1000), **fields}), flush=True)


def parts(tps: list[TopicPartition]) -> list[dict[str, object]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("group")
    ap.add_argument("topics")
    ap.add_argument("name")
    ap.add_argument("--verifiable", action="store_true")
    ap.add_argument("--commit-first", action="store_true")
    ap.add_argument("--processing-ms", type=int, default=0)
    args = ap.parse_args()
    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": os.environ.get("KGCTL_CLIENT_ID", args.name),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        # The scenario's timings (its checks' limits are computed from them).
        "session.timeout.ms": int(os.environ.get("KGCTL_SESSION_TIMEOUT_MS", 6000)),
        "heartbeat.interval.ms": int(os.environ.get("KGCTL_HEARTBEAT_INTERVAL_MS", 500)),
        "max.poll.interval.ms": int(os.environ.get("KGCTL_MAX_POLL_INTERVAL_MS", 30000)),
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if os.environ.get("KGCTL_GROUP_PROTOCOL") == "consumer":
        # KIP-848: the broker owns the session and the heartbeat interval (librdkafka
        # refuses them client-side), and assigns with its own assignor.
        config["group.protocol"] = "consumer"
        del config["session.timeout.ms"], config["heartbeat.interval.ms"]
        if os.environ.get("KGCTL_REMOTE_ASSIGNOR"):
            config["group.remote.assignor"] = os.environ["KGCTL_REMOTE_ASSIGNOR"]
    if os.environ.get("KGCTL_INSTANCE_ID"):
        config["group.instance.id"] = os.environ["KGCTL_INSTANCE_ID"]
    stopping = False

    def stop(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)

    def assigned(_c: Consumer, tps: list[TopicPartition]) -> None:
        if args.verifiable:
            say("partitions_assigned", partitions=parts(tps))

    def revoked(_c: Consumer, tps: list[TopicPartition]) -> None:
        if args.verifiable:
            say("partitions_revoked", partitions=parts(tps))

    consumer = Consumer(config)
    # A pattern subscriber (the scenario's `pattern:`) gets the regex in KGCTL_PATTERN;
    # librdkafka reads a topic name that starts with ^ as one; its regex engine has no
    # non-capturing groups, which kgctl's pattern uses.
    pattern = os.environ.get("KGCTL_PATTERN", "").replace("(?:", "(")
    topics = [pattern] if pattern else args.topics.split(",")
    consumer.subscribe(topics, on_assign=assigned, on_revoke=revoked)
    try:
        while not stopping:
            batch = consumer.consume(num_messages=50, timeout=0.2)
            records = [m for m in batch if m.error() is None]
            if not records:
                continue
            ends: dict[tuple[str, int], int] = {}
            for m in records:
                ends[(m.topic(), m.partition())] = m.offset() + 1
            offsets = [TopicPartition(t, p, o) for (t, p), o in ends.items()]
            if args.commit_first:
                commit(consumer, offsets, args.verifiable)
            for m in records:
                if args.processing_ms:
                    time.sleep(args.processing_ms / 1000)
                if args.verifiable:
                    # One line per record processed: a kill mid-batch shows exactly where.
                    say(
                        "records_consumed",
                        count=1,
                        partitions=[
                            {
                                "topic": m.topic(),
                                "partition": m.partition(),
                                "count": 1,
                                "minOffset": m.offset(),
                                "maxOffset": m.offset(),
                            }
                        ],
                    )
            if not args.commit_first:
                commit(consumer, offsets, args.verifiable)
    finally:
        consumer.close()  # leaves the group (a static member keeps its place)
    return 0


def commit(consumer: Consumer, offsets: list[TopicPartition], verifiable: bool) -> None:
    try:
        done = consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:  # a rebalance took the partitions: the next owner re-reads
        if verifiable:
            say("offsets_committed", success=False, error=str(exc), offsets=[])
        return
    if verifiable:
        say(
            "offsets_committed",
            success=True,
            offsets=[
                {"topic": tp.topic, "partition": tp.partition, "offset": tp.offset}
                for tp in done or []
            ],
        )


if __name__ == "__main__":
    sys.exit(main())
