"""What `kgctl proxy` adds: latency per request, and producer/consumer throughput.

The proxy runs as its own process (`kgctl proxy -o json`), as a user would run it, so
its CPU is not shared with the measuring client's interpreter.

Latency: one raw-socket client sends one request at a time and times each round trip,
directly to the broker and through the proxy, in alternating blocks (the order of the
two flipped every block, so drifting machine load hits both alike). Three requests: a
Metadata without topics (its answer decoded and re-encoded with the proxy's addresses:
the proxy's most expensive path), a Heartbeat of an unknown group (request and answer
decoded for the trace), and a ListOffsets of one partition (forwarded untouched).

Throughput: Apache Kafka's own ProducerPerformance and ConsumerPerformance (kafka-tools
jars, Java clients: fast enough that the proxy, not the client, is what is measured),
1 KiB records, `reps` runs each direct and through the proxy, alternating.

    .venv/bin/python -m bench.proxy --bootstrap 127.0.0.1:39887 --out bench/results/proxy.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
import uuid
import warnings
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.protocol.consumer.group import HeartbeatRequest
    from kafka.protocol.consumer.offsets import ListOffsetsRequest
    from kafka.protocol.metadata.metadata import MetadataRequest

from kgctl.broker.provision import java_executable, resolve_kafka_tools


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _frames(topic: str) -> dict[str, bytes]:
    out = {}
    meta = MetadataRequest(topics=[], allow_auto_topic_creation=False)
    hb = HeartbeatRequest(
        group_id=f"bench-none-{uuid.uuid4().hex[:6]}", generation_id=1, member_id="m"
    )
    Topic = ListOffsetsRequest.ListOffsetsTopic
    Part = Topic.ListOffsetsPartition
    lo = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[Topic(name=topic, partitions=[Part(partition_index=0, timestamp=-1)])],
    )
    for name, req, version in (
        ("metadata", meta, 12),
        ("heartbeat", hb, 4),
        ("list_offsets", lo, 7),
    ):
        req.with_header(correlation_id=1, client_id="bench-proxy")
        out[name] = bytes(req.encode(version=version, header=True, framed=True))
    return out


def _round_trips(address: str, frame: bytes, n: int) -> list[float]:
    times = []
    with socket.create_connection(_addr(address)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            t0 = time.perf_counter()
            sock.sendall(frame)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            _recv(sock, size)
            times.append((time.perf_counter() - t0) * 1000)
    return times


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def latency(direct: str, proxied: str, topic: str, blocks: int, per_block: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, frame in _frames(topic).items():
        got: dict[str, list[float]] = {"direct": [], "proxy": []}
        for block in range(blocks):
            order = [("direct", direct), ("proxy", proxied)]
            if block % 2:
                order.reverse()
            for kind, address in order:
                got[kind] += _round_trips(address, frame, per_block)
        d, p = statistics.median(got["direct"]), statistics.median(got["proxy"])
        out[name] = {
            "requests_each": len(got["direct"]),
            "direct_median_ms": round(d, 4),
            "proxy_median_ms": round(p, 4),
            "added_median_ms": round(p - d, 4),
            "direct_p99_ms": round(statistics.quantiles(got["direct"], n=100)[98], 4),
            "proxy_p99_ms": round(statistics.quantiles(got["proxy"], n=100)[98], 4),
        }
    return out


def _java(main: str, *args: str) -> str:
    libs = resolve_kafka_tools()
    done = subprocess.run(
        [java_executable(), "-cp", f"{libs}/*", f"org.apache.kafka.tools.{main}", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{main} failed: {done.stderr[-2000:]}")
    return done.stdout


def produce(bootstrap: str, topic: str, records: int) -> float:
    out = _java(
        "ProducerPerformance", "--topic", topic, "--num-records", str(records),
        "--record-size", "1024", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1", "linger.ms=5",
    )  # fmt: skip
    found = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", out)
    return float(found[-1][1])


def consume(bootstrap: str, topic: str, records: int) -> float:
    out = _java(
        "ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
        "--messages", str(records), "--timeout", "60000",
        "--group", f"bench-proxy-{uuid.uuid4().hex[:8]}",
        "--reporting-interval", "100000",
    )  # fmt: skip
    # CSV: start, end, MB consumed, MB/s, records, records/s, rebalance ms, fetch ms,
    # fetch MB/s, fetch records/s. The fetch columns leave out the group join.
    row = [line for line in out.splitlines() if re.match(r"^\d{4}-", line)][-1].split(",")
    return float(row[9])


def throughput(direct: str, proxied: str, records: int, reps: int) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=direct)
    topics = []
    got: dict[str, dict[str, list[float]]] = {
        "producer": {"direct": [], "proxy": []},
        "consumer": {"direct": [], "proxy": []},
    }
    try:
        for rep in range(reps):
            order = [("direct", direct), ("proxy", proxied)]
            if rep % 2:
                order.reverse()
            for kind, address in order:
                topic = f"bench-proxy-{uuid.uuid4().hex[:8]}"
                admin.create_topics([NewTopic(topic, 3, 1)])
                topics.append(topic)
                got["producer"][kind].append(produce(address, topic, records))
                got["consumer"][kind].append(consume(address, topic, records))
    finally:
        if topics:
            admin.delete_topics(topics)
        admin.close()
    out: dict[str, Any] = {"records": records, "record_bytes": 1024, "reps": reps}
    for side, kinds in got.items():
        d, p = statistics.median(kinds["direct"]), statistics.median(kinds["proxy"])
        out[side] = {
            "direct_records_s": kinds["direct"],
            "proxy_records_s": kinds["proxy"],
            "direct_median": round(d, 1),
            "proxy_median": round(p, 1),
            "ratio": round(p / d, 3),
        }
    return out


def start_proxy(bootstrap: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgctl", "proxy", "-b", bootstrap, "-o", "json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    # Its events are not read from here on: send them nowhere so a full pipe never
    # stalls it (the latency requests are not traced; the heartbeats are, once each).
    return proc, str(first["data"]["bootstrap"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--per-block", type=int, default=200)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--smoke", action="store_true", help="seconds: 2x50 requests, 2000 records, 1 rep"
    )
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.smoke:
        args.blocks, args.per_block, args.records, args.reps = 2, 50, 2000, 1
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_start": os.getloadavg()[0],
        "args": vars(args),
    }
    proc, proxied = start_proxy(args.bootstrap)
    # The proxy writes an event per traced request to its stdout: drain it on a thread.
    import threading

    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    topic = f"bench-proxy-lat-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    try:
        result["latency"] = latency(args.bootstrap, proxied, topic, args.blocks, args.per_block)
        print(json.dumps(result["latency"], indent=1), file=sys.stderr)
        result["throughput"] = throughput(args.bootstrap, proxied, args.records, args.reps)
        print(json.dumps(result["throughput"], indent=1), file=sys.stderr)
    finally:
        admin.delete_topics([topic])
        admin.close()
        proc.terminate()
        proc.wait(15)
    result["load_end"] = os.getloadavg()[0]
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
