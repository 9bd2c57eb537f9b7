"""`kgctl monitor`'s group list on a broker whose ListGroups sends no group type (Kafka
3.7): the type is found out by describing, never taken as classic. The broker is a fake
answering as 3.7.2 with KIP-848 on did (by hand: ListGroups v4 listed the consumer
group with protocol type "consumer" and no type, DescribeGroups answered it
GROUP_ID_NOT_FOUND, ConsumerGroupDescribe was not advertised), or with
ConsumerGroupDescribe (its unstable APIs on); the real 3.7.2 with its defaults is in
tests/compat/test_versions_wire_kafka.py."""

from __future__ import annotations

import asyncio
import warnings
from types import SimpleNamespace
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as Errors
    from kafka.protocol.admin import DescribeGroupsRequest

    from kgctl.adapters.admin import _describe_batches, _listed_type

GROUP_ID_NOT_FOUND = 69


def classic(name: str) -> Any:
    member = SimpleNamespace(
        member_id="m-1", client_id="c", client_host="/h", group_instance_id=None,
        member_metadata=b"", member_assignment=b"",
    )  # fmt: skip
    return SimpleNamespace(
        group_id=name, error_code=0, error_message=None, group_state="Stable",
        protocol_type="consumer", protocol_data="range", members=[member],
    )  # fmt: skip


def consumer(name: str) -> Any:
    return SimpleNamespace(
        group_id=name, error_code=0, error_message=None, group_state="Stable",
        group_epoch=3, assignment_epoch=3, assignor_name="uniform", members=[],
    )  # fmt: skip


def not_found(name: str) -> Any:
    return SimpleNamespace(
        group_id=name, error_code=GROUP_ID_NOT_FOUND, error_message=None,
        group_state="Dead", members=[],
    )  # fmt: skip


class Broker37:
    """The answers of a 3.7 broker with KIP-848 on: `old` classic, `new` a consumer group."""

    def __init__(self, consumer_group_describe: bool) -> None:
        self.consumer_group_describe = consumer_group_describe
        self.cluster = SimpleNamespace(broker_metadata=lambda node: None, _coordinators={})
        self.asked: list[tuple[str, list[str]]] = []

    async def send(self, req: Any, node_id: int) -> Any:
        if isinstance(req, DescribeGroupsRequest):
            names = list(req.groups)
            self.asked.append(("DescribeGroups", names))
            answers = [classic(n) if n == "old" else not_found(n) for n in names]
        elif not self.consumer_group_describe:
            raise Errors.IncompatibleBrokerVersion("ConsumerGroupDescribe")
        else:
            names = list(req.group_ids)
            self.asked.append(("ConsumerGroupDescribe", names))
            answers = [consumer(n) if n == "new" else not_found(n) for n in names]
        return SimpleNamespace(groups=answers)

    def run(self, fn: Any, *args: Any) -> Any:
        return asyncio.run(fn(*args))


def admin(consumer_group_describe: bool = True) -> Any:
    manager = Broker37(consumer_group_describe)

    async def coordinators(names: list[str]) -> dict[str, int]:
        return {n: 1 for n in names}

    return SimpleNamespace(_manager=manager, _find_coordinator_ids=coordinators)


def test_a_group_listed_without_a_type_is_of_unknown_type() -> None:
    # Before: every group ListGroups gave no type for was "classic".
    assert _listed_type(None) == "unknown"
    assert _listed_type("") == "unknown"
    assert (_listed_type("classic"), _listed_type("consumer")) == ("classic", "consumer")


def test_untyped_groups_are_described_as_what_the_broker_knows_them_as() -> None:
    a = admin()
    snaps, undescribed = _describe_batches(a, {"old": "unknown", "new": "unknown"})
    # Before: "new", asked only with DescribeGroups, was described missing (deleted).
    assert snaps["new"].group_type == "consumer" and not snaps["new"].missing
    assert snaps["new"].group_epoch == 3
    assert snaps["old"].group_type == "classic" and len(snaps["old"].members) == 1
    assert not undescribed
    assert a._manager.asked == [
        ("DescribeGroups", ["new", "old"]),
        ("ConsumerGroupDescribe", ["new"]),
    ]


def test_a_listed_untyped_group_neither_request_knows_is_left_out_not_deleted() -> None:
    snaps, undescribed = _describe_batches(admin(), {"gone": "unknown", "typed-gone": "classic"})
    assert "gone" not in snaps  # listed: the next listing says whether it is gone
    assert undescribed == {"gone"}  # the monitor notes it, once
    assert snaps["typed-gone"].missing


def test_without_consumer_group_describe_a_consumer_group_is_named_not_deleted() -> None:
    # As 3.7.2 with KIP-848 on answered: no request describes the consumer group.
    snaps, undescribed = _describe_batches(admin(False), {"old": "unknown", "new": "unknown"})
    assert set(snaps) == {"old"} and undescribed == {"new"}
