"""The consumer-protocol member's offsets across a lost and re-assigned partition, driven
in-process: its decisions are `Membership`'s (pure), its I/O a fake consumer and group
channel that record what the member asked for, so no broker is needed to see which
offsets it commits."""

from __future__ import annotations

from typing import Any

from kgctl.member.consumer_member import ConsumerProtocolMember
from kgctl.member.membership import Answer, CommitKind
from kgctl.member.runner import MemberConfig
from kgctl.settings import ClientSettings

TOPIC, TOPIC_ID = "orders", "id-orders"


class FakeConsumer:
    """kafka-python's KafkaConsumer as far as reconciliation uses it."""

    def __init__(self) -> None:
        self.assigned: list[Any] = []
        self.seeks: dict[tuple[str, int], int] = {}

    def assign(self, tps: list[Any]) -> None:
        self.assigned = list(tps)

    def pause(self, *tps: Any) -> None:
        pass

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks[(tp.topic, tp.partition)] = offset


class FakeChannel:
    """The group's offsets as the coordinator holds them; records every commit."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.commits: list[dict[tuple[str, int], int]] = []

    def committed(self, node: Any, wanted: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        return {(t, p): self.offsets[(t, p)] for t, ps in wanted.items() for p in ps
                if (t, p) in self.offsets}  # fmt: skip

    def commit(self, node: Any, offsets: dict[tuple[str, int], int], **_: Any) -> str:
        self.commits.append(dict(offsets))
        self.offsets.update(offsets)
        return "NONE"


def member() -> tuple[ConsumerProtocolMember, FakeConsumer, FakeChannel]:
    config = MemberConfig(group="g", topics=[TOPIC], commit="auto", group_protocol="consumer",
                          read_stdin=False)  # fmt: skip
    m = ConsumerProtocolMember(config, ClientSettings.from_options("127.0.0.1:1"), [])
    consumer, channel = FakeConsumer(), FakeChannel()
    m._consumer, m._channel, m._coordinator_node = consumer, channel, 1
    m.membership.names[TOPIC_ID] = TOPIC
    m._subscribe([TOPIC], None, first=True)
    return m, consumer, channel


def answer(m: ConsumerProtocolMember, epoch: int, partitions: set[int] | None = None,
           error: str = "NONE") -> None:  # fmt: skip
    """The heartbeat thread's part: send the due heartbeat, hand over its answer."""
    ms = m.membership
    before = ms.state
    ms.next_heartbeat(0)
    assignment = None if partitions is None else {TOPIC_ID: frozenset(partitions)}
    got = Answer(error=error, member_epoch=epoch, heartbeat_interval_ms=500, assignment=assignment)
    m._after(ms.on_answer(got, 0), before)


def test_a_partition_that_comes_back_is_not_committed_at_the_position_it_was_lost_at() -> None:
    m, consumer, channel = member()
    answer(m, 1, {0})
    m._poll_events()  # reconciles: assigned orders[0], starting from the group's offset
    m._positions[(TOPIC, 0)] = 10  # consumed up to 10 (the poll loop's bookkeeping)
    m._commit_owned(CommitKind.INTERVAL)  # the auto-commit interval
    assert channel.commits == [{(TOPIC, 0): 10}]
    # Fenced: the partition is lost (no commit); meanwhile its new owner consumed and
    # committed up to 25.
    answer(m, 1, error="FENCED_MEMBER_EPOCH")
    m._poll_events()
    channel.offsets[(TOPIC, 0)] = 25
    # Back to this member, which starts at 25 and has consumed nothing since.
    answer(m, 3, {0})
    m._poll_events()
    assert consumer.seeks[(TOPIC, 0)] == 25
    # Taken away again before a record came: the revocation's auto-commit must not put
    # the group back to 10 (records 10-24 would be consumed a second time).
    answer(m, 4, set())
    m._poll_events()
    assert channel.offsets[(TOPIC, 0)] == 25, channel.commits
