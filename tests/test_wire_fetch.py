"""The proxy's Fetch tracing (pure): batch ranges read from record batch headers only."""

from __future__ import annotations

import struct

import pytest

from kgctl.adapters import wire


def batch(base: int, count: int, *, control: bool = False) -> bytes:
    """A real v2 record batch (kafka-python's builder) moved to `base`, as a broker sends."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(count):
        b.append(timestamp=None, key=None, value=b"v%d" % i)
    b.close()
    out = bytearray(b.buffer())
    struct.pack_into(">q", out, 0, base)  # the base offset is outside the CRC
    if control:
        attrs = struct.unpack_from(">h", out, 21)[0] | 0x20
        struct.pack_into(">h", out, 21, attrs)
    return bytes(out)


def fetch_frame(version: int, partitions: dict[int, tuple[int, bytes | None]]) -> bytes:
    from kafka.protocol.consumer.fetch import FetchResponse

    Topic = FetchResponse.FetchableTopicResponse
    Part = Topic.PartitionData
    parts = [
        Part(partition_index=p, error_code=0, high_watermark=hw, last_stable_offset=hw,
             log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
             records=records)
        for p, (hw, records) in partitions.items()
    ]  # fmt: skip
    resp = FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=0,
        responses=[Topic(topic="orders", partitions=parts)],
    )  # fmt: skip
    head = struct.pack(">i", 9) + (b"\x00" if version >= 12 else b"")
    return head + bytes(resp.encode(version=version))


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_each_partition_s_batches_are_read_from_their_headers(version: int) -> None:
    records = batch(40, 5) + batch(45, 3)
    cut = batch(48, 10)[:30]  # a broker may end an answer inside a batch
    frame = fetch_frame(version, {0: (60, records + cut), 1: (7, None), 2: (3, batch(2, 1))})
    got = wire.fetch_response_fields(version, frame)
    assert got["error"] == "NONE"
    assert got["partitions"] == {
        "orders": {
            "0": {"hw": 60, "batches": [[40, 44], [45, 47]]},
            "1": {"hw": 7, "batches": []},
            "2": {"hw": 3, "batches": [[2, 2]]},
        }
    }


def test_a_transaction_marker_gives_no_records() -> None:
    frame = fetch_frame(12, {0: (12, batch(0, 10) + batch(10, 1, control=True))})
    assert wire.fetch_response_fields(12, frame)["partitions"]["orders"]["0"]["batches"] == [[0, 9]]


def test_a_truncated_answer_is_an_error_not_a_guess() -> None:
    frame = fetch_frame(12, {0: (12, batch(0, 10))})
    with pytest.raises(wire.WireError):
        wire.fetch_response_fields(12, frame[:20])
    with pytest.raises(wire.WireError):
        wire.fetch_response_fields(3, frame)
