"""`kgctl join --members N` and `--no-fetch` against a real broker: several real members in
one process, each with its own consumer, member id and events; members that do not fetch.
"""

from __future__ import annotations

import signal
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import MemberProc

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]


@pytest.fixture
def spawn(bootstrap: str, topic: Any) -> Iterator[Callable[..., MemberProc]]:
    procs: list[MemberProc] = []

    def start(group: str, *args: str, name: str) -> MemberProc:
        proc = MemberProc(bootstrap, group, *args, name=name)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()


def by_member(proc: MemberProc, type_: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in proc.of(type_):
        out.setdefault(e["member"], []).append(e)
    return out


def test_three_members_in_one_process_are_three_members_of_the_group(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str]
) -> None:
    t = topic(6)
    group = f"kgctl-test-pack-{uuid.uuid4().hex[:8]}"
    pack = spawn(group, t, "--members", "3", name="p")
    names = {"p-1", "p-2", "p-3"}

    def settled() -> int | None:
        # One generation in which all three completed, with 2 partitions each.
        done = by_member(pack, "JoinCompleted")
        if set(done) != names:
            return None
        last = {m: es[-1] for m, es in done.items()}
        gens = {e["generation"] for e in last.values()}
        sizes = [sum(len(ps) for ps in e["data"]["assignment"].values()) for e in last.values()]
        return gens.pop() if len(gens) == 1 and sorted(sizes) == [2, 2, 2] else None

    generation = pack.wait(settled, 60, "three members in one generation")
    assert generation >= 1
    started = by_member(pack, "MemberStarted")
    assert set(started) == names
    assert len({e["pid"] for es in started.values() for e in es}) == 1  # one process
    member_ids = {es[-1]["member_id"] for es in by_member(pack, "JoinCompleted").values()}
    assert len(member_ids) == 3 and "" not in member_ids

    # A control line naming one member reaches that member only: each gets its own value
    # (a member applies its lines in order, so a misrouted one shows before its own).
    values = {"p-1": 5, "p-2": 6, "p-3": 7}
    for name, value in values.items():
        pack.send({"op": "processing_ms", "value": value, "member": name})
    for name in values:
        pack.wait(lambda n=name: by_member(pack, "ControlReceived").get(n), 20, f"{name}'s line")
    received = by_member(pack, "ControlReceived")
    assert {m: [e["data"]["args"]["value"] for e in es] for m, es in received.items()} == {
        m: [v] for m, v in values.items()
    }

    # SIGTERM: every member leaves the group and says so; the process exits 0.
    assert pack.stop(signal.SIGTERM, timeout=30) == 0
    stopped = by_member(pack, "MemberStopped")
    assert set(stopped) == names
    assert all(es[-1]["data"]["reason"] == "SIGTERM" for es in stopped.values())
    assert set(by_member(pack, "LeaveGroupSent")) == names


def test_a_member_that_does_not_fetch_holds_its_partitions_and_reads_nothing(
    spawn: Callable[..., MemberProc], topic: Callable[[int], str], bootstrap: str
) -> None:
    t = topic(2)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(20):
        producer.send(t, f"r{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    group = f"kgctl-test-nofetch-{uuid.uuid4().hex[:8]}"
    idle = spawn(group, t, "--no-fetch", name="idle")
    done = idle.wait_event("JoinCompleted", 30)
    assert sum(len(ps) for ps in done["data"]["assignment"].values()) == 2
    assert idle.of("MemberStarted")[0]["data"]["config"]["fetch"] is False
    # A fetching member in another group reads the same 20 records meanwhile.
    reader = spawn(f"{group}-reader", t, name="reader")
    reader.wait(
        lambda: sum(e["data"]["count"] for e in reader.of("RecordsConsumed")) >= 20,
        30,
        "20 records read by a fetching member",
    )
    assert idle.of("RecordsConsumed") == []
    idle.send({"op": "resume"})
    refused = idle.wait_event("ControlReceived", op="resume")
    assert refused["data"]["applied"] is False and "--no-fetch" in refused["data"]["error"]
    assert idle.stop() == 0
    assert idle.of("RecordsConsumed") == []
