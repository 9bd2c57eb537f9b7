"""Pure tests of KIP-848 (`consumer` protocol) groups in `kgctl watch`: the
ConsumerGroupDescribe wire format, the version fallback, inference and the fold."""

from __future__ import annotations

import struct
import uuid
import warnings
from typing import Any

import pytest
from helpers import KIP848_GROUP, cmember, csnap, infer

from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.snapshot import GroupSnapshot
from kgctl.model.state import GroupState

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kgctl.adapters import kip848

G = KIP848_GROUP
TOPIC_ID = uuid.UUID("5a6b1c2d-0000-4000-8000-00000000002a")

# -- a small encoder of Kafka's flexible-version wire format, independent of the schemas --


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def cstring(s: str | None) -> bytes:
    """COMPACT_NULLABLE_STRING: length + 1 as an unsigned varint, 0 for null."""
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


NO_TAGS = uvarint(0)


def assignment(parts: dict[str, list[int]]) -> bytes:
    topics = [
        TOPIC_ID.bytes + cstring(name) + carray([i32(p) for p in ids]) + NO_TAGS
        for name, ids in parts.items()
    ]
    return carray(topics) + NO_TAGS


def member_bytes(
    mid: str,
    epoch: int,
    current: dict[str, list[int]],
    target: dict[str, list[int]],
    version: int,
    instance: str | None = None,
) -> bytes:
    body = (
        cstring(mid)
        + cstring(instance)
        + cstring(None)  # rack
        + i32(epoch)
        + cstring(f"client-{mid}")
        + cstring("/10.0.0.7")
        + carray([cstring("t")])
        + cstring(None)  # regex
        + assignment(current)
        + assignment(target)
    )
    if version >= 1:
        body += i8(1)  # MemberType: consumer
    return body + NO_TAGS


def response_bytes(version: int, error: int = 0, members: list[bytes] | None = None) -> bytes:
    group = (
        i16(error)
        + cstring(None if error == 0 else "Group orders not found.")
        + cstring(G)
        + cstring("Reconciling" if error == 0 else "")
        + i32(7)  # group epoch
        + i32(7)  # assignment epoch
        + cstring("uniform" if error == 0 else "")
        + carray(members or [])
        + i32(-(2**31))
        + NO_TAGS
    )
    return i32(0) + carray([group]) + NO_TAGS


@pytest.mark.parametrize("version", [0, 1])
def test_a_consumer_group_describe_response_decodes_into_a_snapshot(version: int) -> None:
    members = [
        member_bytes("m-a", 7, {"t": [0, 1]}, {"t": [0, 1]}, version, instance="pod-a"),
        member_bytes("m-b", 6, {"t": [2, 3]}, {"t": [2]}, version),
    ]
    raw = response_bytes(version, members=members)
    decoded = kip848.ConsumerGroupDescribeResponse.decode(raw, version=version)
    snap = kip848.snapshot(decoded.groups[0], "1 h:9092")
    assert (snap.state, snap.group_type, snap.group_epoch, snap.assignment_epoch) == (
        "Reconciling",
        "consumer",
        7,
        7,
    )
    assert snap.protocol == "uniform" and snap.coordinator == "1 h:9092"
    a, b = snap.members
    assert (a.member_id, a.member_epoch, a.instance_id, a.host) == ("m-a", 7, "pod-a", "/10.0.0.7")
    assert a.partitions == {"t": [0, 1]} and not a.reconciling
    assert b.partitions == {"t": [2, 3]} and b.target == {"t": [2]} and b.reconciling
    assert a.subscription == ("t",) and a.regex is None
    assert a.member_type == ("consumer" if version >= 1 else None)


def test_the_request_is_what_the_protocol_guide_says() -> None:
    req = kip848.request(G)
    # GroupIds: compact array of one compact string; IncludeAuthorizedOperations false;
    # no tagged fields.
    assert bytes(req.encode(version=0)) == carray([cstring(G)]) + b"\x00" + NO_TAGS
    assert req.API_KEY == 69


def test_an_unknown_group_decodes_with_its_error() -> None:
    decoded = kip848.ConsumerGroupDescribeResponse.decode(response_bytes(0, error=69), version=0)
    assert decoded.groups[0].error_code == 69 and decoded.groups[0].members == []


# -- the admin adapter: consumer groups first once known, and a broker without api 69 --


class FakeAdmin:
    """GroupAdmin's calls answered from tables, counting what was asked."""

    def __init__(self, classic: dict[str, GroupSnapshot], consumer: Any) -> None:
        from kgctl.adapters.admin import GroupAdmin
        from kgctl.settings import ClientSettings

        self.admin = GroupAdmin(ClientSettings(bootstrap="h:9092"))
        self.asked: list[str] = []

        def call(fn: Any, group: str) -> Any:
            self.asked.append(fn.__name__)
            if fn.__name__ == "_describe":
                return classic.get(group) or GroupSnapshot(group, "Dead", missing=True)
            if isinstance(consumer, Exception):
                raise consumer
            return consumer.get(group)

        self.admin._call = call  # type: ignore[method-assign]


def consumer_snap(group: str = G) -> GroupSnapshot:
    return GroupSnapshot(group, "Stable", group_type="consumer", group_epoch=3, assignment_epoch=3)


def test_a_group_describegroups_does_not_find_is_asked_with_consumergroupdescribe() -> None:
    fake = FakeAdmin({}, {G: consumer_snap()})
    assert fake.admin.describe(G, with_lag=False).group_epoch == 3
    assert fake.admin.describe(G, with_lag=False).group_epoch == 3
    # Once known as a consumer group it is asked that way first, and only that way.
    assert fake.asked == ["_describe", "_describe_consumer", "_describe_consumer"]


def test_a_broker_without_consumergroupdescribe_is_said_once_then_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeAdmin({}, kip848.Unsupported("no api 69"))
    assert fake.admin.describe(G, with_lag=False).missing
    assert fake.admin.describe(G, with_lag=False).missing
    assert fake.asked == ["_describe", "_describe_consumer", "_describe"]
    warned = [r for r in caplog.records if "ConsumerGroupDescribe" in r.getMessage()]
    assert len(warned) == 1 and fake.admin.kip848 is False


# -- inference and fold ---------------------------------------------------------------


def kinds(events: list[Event]) -> list[str]:
    return [e.type for e in events if e.type != "GroupObserved"]


def joined_then_reconciled() -> list[Event]:
    return infer(
        csnap("Stable", 2, cmember("a", 2, [0, 1, 2, 3])),
        # b joined: epoch 3, a must give up 2 and 3 first.
        csnap("Reconciling", 3, cmember("a", 2, [0, 1, 2, 3], [0, 1]), cmember("b", 3, [], [2, 3])),
        csnap("Reconciling", 3, cmember("a", 3, [0, 1]), cmember("b", 3, [], [2, 3])),
        csnap("Stable", 3, cmember("a", 3, [0, 1]), cmember("b", 3, [2, 3])),
    )


def test_a_member_joining_changes_the_epoch_with_its_cause_then_partitions_move() -> None:
    events = joined_then_reconciled()
    assert kinds(events) == [
        "GroupStateChanged",
        "MemberJoinedGroup",
        "GenerationChanged",
        "RebalanceAttributed",
        "GroupStateChanged",
        "PartitionsMoved",
    ]
    gen = next(e for e in events if e.type == "GenerationChanged")
    assert gen.generation == 3 and gen.data["inferred"] is False
    assert gen.data["previous"] == 2
    assert (gen.data["cause"], gen.data["guess"]) == ("member_joined", False)
    moved = next(e for e in events if e.type == "PartitionsMoved")
    assert [(m["partition"], m["from"], m["to"]) for m in moved.data["moves"]] == [
        (2, "a", "b"),
        (3, "a", "b"),
    ]
    assert moved.generation == 3


def test_the_fold_shows_epochs_and_who_is_reconciling() -> None:
    events = joined_then_reconciled()
    s = fold_all(GroupState(G), events, now_ms=4000)
    assert (s.group_epoch, s.assignment_epoch, s.generation, s.generation_inferred) == (
        3,
        3,
        3,
        False,
    )
    rec = s.current
    assert rec is not None and rec.cause == "member_joined" and rec.stable_ms == 4000
    a, b = s.members["a"], s.members["b"]
    assert (a.epoch, b.epoch) == (3, 3) and not a.reconciling and not b.reconciling
    assert dict(b.partitions) == {"t": (2, 3)}
    # In the second snapshot a still held 2 and 3 while its target no longer had them.
    second = fold_all(GroupState(G), infer(*_first_two()), now_ms=2000)
    assert second.members["a"].reconciling and second.members["b"].reconciling
    assert second.rebalancing and second.state == "Reconciling"
    assert second.members["a"].phase == "Reconciling" and second.members["a"].epoch == 2


def _first_two() -> list[GroupSnapshot]:
    return [
        csnap("Stable", 2, cmember("a", 2, [0, 1, 2, 3])),
        csnap("Reconciling", 3, cmember("a", 2, [0, 1, 2, 3], [0, 1]), cmember("b", 3, [], [2, 3])),
    ]


def test_a_member_leaving_between_polls_is_member_left_and_the_group_stays_stable() -> None:
    events = infer(
        csnap("Stable", 3, cmember("a", 3, [0, 1]), cmember("b", 3, [2, 3])),
        csnap("Stable", 4, cmember("a", 4, [0, 1, 2, 3])),
    )
    assert kinds(events) == [
        "MemberLeftGroup",
        "GenerationChanged",
        "RebalanceAttributed",
        "PartitionsMoved",
    ]
    gen = next(e for e in events if e.type == "GenerationChanged")
    assert (gen.generation, gen.data["cause"], gen.data["settled"]) == (4, "member_left", True)
    s = fold_all(GroupState(G), events, now_ms=2000)
    assert s.current is not None and s.current.stable_ms == 2000 and not s.rebalancing


def test_a_member_epoch_going_back_is_a_fenced_member_rejoining() -> None:
    events = infer(
        csnap("Stable", 5, cmember("a", 5, [0, 1]), cmember("b", 5, [2, 3])),
        csnap("Reconciling", 7, cmember("a", 5, [0, 1]), cmember("b", 0, [], [2, 3])),
    )
    cause = next(e for e in events if e.type == "RebalanceAttributed").data
    assert (cause["cause"], cause["guess"]) == ("timed_out", True)
    assert "fenced" in cause["evidence"]


def test_a_topic_growing_is_partitions_changed_from_the_targets() -> None:
    events = infer(
        csnap("Stable", 5, cmember("a", 5, [0, 1])),
        csnap("Reconciling", 6, cmember("a", 5, [0, 1], [0, 1, 2])),
    )
    cause = next(e for e in events if e.type == "RebalanceAttributed").data
    assert (cause["cause"], cause["guess"]) == ("partitions_changed", True)


def test_the_epoch_is_not_a_change_on_the_first_snapshot_and_state_names_are_kept() -> None:
    events = infer(
        csnap("Assigning", 9, cmember("a", 8, [0, 1], [])),
        csnap("Reconciling", 9, cmember("a", 8, [0, 1], [0])),
        csnap("Stable", 9, cmember("a", 9, [0])),
        csnap("Empty", 10),
    )
    states = [(e.data["from"], e.data["to"]) for e in events if e.type == "GroupStateChanged"]
    assert states == [("Assigning", "Reconciling"), ("Reconciling", "Stable"), ("Stable", "Empty")]
    gens = [e for e in events if e.type == "GenerationChanged"]
    assert [(e.generation, e.data["cause"]) for e in gens] == [(10, "member_left")]
    observed = [e for e in events if e.type == "GroupObserved"]
    assert observed[0].data["group_epoch"] == 9 and observed[0].data["group_type"] == "consumer"
    assert observed[0].data["members"][0]["reconciling"] is True


def test_a_member_id_coming_back_is_a_fenced_member_rejoining() -> None:
    # Seen on a real broker: a stopped JVM was fenced after the session timeout, then
    # resumed and rejoined with the same member id.
    events = infer(
        csnap("Stable", 3, cmember("a", 3, [0, 1]), cmember("b", 3, [2, 3])),
        csnap("Stable", 4, cmember("a", 4, [0, 1, 2, 3])),
        csnap("Reconciling", 5, cmember("a", 4, [0, 1, 2, 3], [0, 1]), cmember("b", 5, [], [2, 3])),
    )
    causes = [e.data for e in events if e.type == "RebalanceAttributed"]
    assert [c["cause"] for c in causes] == ["member_left", "timed_out"]
    assert causes[1]["guess"] is True and "same member id" in causes[1]["evidence"]
    assert any(e.type == "MemberJoinedGroup" and e.member_id == "b" for e in events)


def test_a_consumer_group_run_for_months_keeps_only_the_newest_ids_that_left() -> None:
    # Each process started again joins under a new member id: the ids that left were all
    # kept (one more per restart, for the life of the watch or the monitor). The newest
    # GONE_KEPT are, and a member fenced and back is still told apart from a newcomer.
    from kgctl.observe.infer import GONE_KEPT, Inferrer

    inf = Inferrer(KIP848_GROUP)
    epoch, t = 1, 1000
    inf.observe(csnap("Stable", epoch, cmember("a", epoch, [0, 1])), t)
    for i in range(GONE_KEPT + 200):
        joined = cmember(f"r{i}", epoch + 1, [1])
        for snap in (
            csnap("Stable", epoch + 1, cmember("a", epoch + 1, [0]), joined),
            csnap("Stable", epoch + 2, cmember("a", epoch + 2, [0, 1])),
        ):
            t += 1000
            inf.observe(snap, t)
        epoch += 2
    assert len(inf.gone) == GONE_KEPT
    last = f"r{GONE_KEPT + 199}"
    events = inf.observe(
        csnap("Stable", epoch + 1, cmember("a", epoch + 1, [0]), cmember(last, epoch + 1, [1])),
        t + 1000,
    )
    [cause] = [e.data for e in events if e.type == "RebalanceAttributed"]
    assert cause["cause"] == "timed_out" and "same member id" in cause["evidence"]
    assert last not in inf.gone  # back: no longer among those that left
