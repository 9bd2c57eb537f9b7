"""Monitors sharing a cluster (`--shard-group`): what one does as the shard group gives it
partitions and takes them away. Pure: the sources' messages are applied by hand, no
broker (the real two-monitor run is in tests/test_monitor_kafka.py)."""

from __future__ import annotations

from kgctl.adapters.group_records import GroupMetadata, GroupRecord, MemberRecord, partition_for
from kgctl.monitor.metrics import MonitorMetrics
from kgctl.monitor.service import Monitor, Selection
from kgctl.settings import ClientSettings


def _group_in(partition: int, of: int = 4) -> str:
    return next(g for i in range(1000) if partition_for(g := f"app-{i}", of) == partition)


def _joined(group: str, partition: int, ts: int) -> GroupRecord:
    meta = GroupMetadata(
        generation=1, protocol_type="consumer", protocol="range", leader="a", state_ts_ms=ts,
        members=(MemberRecord("a", client_id="a", session_timeout_ms=6000),),
    )  # fmt: skip
    return GroupRecord(group, meta, offset=ts, timestamp_ms=ts, partition=partition)


def _monitor(now: list[int]) -> Monitor:
    return Monitor(
        ClientSettings(bootstrap="127.0.0.1:9"), Selection(), interval_s=1.0,
        clock=lambda: now[0], shard_group="monitors",
    )  # fmt: skip


def test_a_monitor_follows_only_the_groups_of_the_partitions_it_owns() -> None:
    now = [10_000]
    mon = _monitor(now)
    g0, g1 = _group_in(0), _group_in(1)
    assert not mon.ours(g0)  # nothing owned before the shard group assigns
    mon._apply("owned", (frozenset({0}), 4))
    assert mon.ours(g0) and not mon.ours(g1)
    mon._apply("records", ([_joined(g0, 0, 1000), _joined(g1, 1, 1000)], 2))
    assert set(mon.followers) == {g0}


def test_a_partition_taken_away_takes_its_groups_and_their_series() -> None:
    now = [10_000]
    mon = _monitor(now)
    metrics = MonitorMetrics(mon.view)
    mon.group_listeners.append(metrics.followed)
    mon.forget_listeners.append(metrics.forgotten)
    g0, g1 = _group_in(0), _group_in(1)
    mon._apply("owned", (frozenset({0, 1}), 4))
    mon._apply("records", ([_joined(g0, 0, 1000), _joined(g1, 1, 1000)], 2))
    mon._publish()

    def groups_in_series() -> set[str]:
        return {
            s.labels["group"]
            for family in metrics.registry.collect()
            for s in family.samples
            if "group" in s.labels
        }

    assert groups_in_series() == {g0, g1}
    mon._apply("owned", (frozenset({1}), 4))  # partition 0 went to another monitor
    mon._publish()
    assert set(mon.followers) == {g1} and g0 not in mon.tallies
    assert groups_in_series() == {g1}
    assert mon.view()[1].owned_partitions == (1,)
    # A record of partition 0 read before the change is not this monitor's any more.
    mon._apply("records", ([_joined(g0, 0, 2000)], 1))
    assert g0 not in mon.followers
