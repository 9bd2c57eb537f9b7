"""What each of the monitor's rounds describes, and when a stored generation is counted:
the listing's states and the log's records say which groups may have changed, so an idle
cluster is not described group by group each interval, and a rebalance is counted at the
first description after its record instead of a fixed settling time. Pure, no broker."""

from __future__ import annotations

from collections.abc import Callable

from test_monitor_orders import BOTH, ONLY_A, R0, R1, R2, SETTLE_MS, G

from kgctl.adapters.admin import ListedGroup
from kgctl.adapters.group_records import GroupRecord
from kgctl.model.snapshot import GroupSnapshot
from kgctl.monitor.follower import GroupFollower
from kgctl.monitor.rounds import DescribeRounds
from kgctl.monitor.service import Monitor, Selection
from kgctl.settings import ClientSettings

STABLE = ListedGroup("classic", "Stable")
EMPTY = ListedGroup("classic", "Empty")


def _swept(rounds: DescribeRounds, listed: dict[str, ListedGroup]) -> None:
    assert rounds.due(listed, 0) == sorted(listed)  # the first round describes every group
    rounds.described({g: listing.state or "" for g, listing in listed.items()}, 0)


def test_an_idle_group_is_described_again_once_a_sweep_a_share_each_round() -> None:
    rounds = DescribeRounds(log_read=True, interval_ms=1000, sweep_ms=30_000)
    listed = {f"idle-{i:02d}": EMPTY for i in range(60)} | {"steady": STABLE}
    _swept(rounds, listed)
    assert rounds.due(listed, 1000) == []
    assert rounds.due(listed, 29_000) == []
    # 61 groups, a round a second, a sweep of 30 s: 3 a round, those described longest ago.
    first = rounds.due(listed, 30_000)
    assert first == ["idle-00", "idle-01", "idle-02"]
    rounds.described(dict.fromkeys(first, "Empty"), 30_000)
    assert rounds.due(listed, 31_000) == ["idle-03", "idle-04", "idle-05"]


def test_a_group_listed_in_another_state_or_rebalancing_is_described() -> None:
    rounds = DescribeRounds(log_read=True, interval_ms=1000)
    _swept(rounds, {"a": STABLE, "b": STABLE, "c": EMPTY})
    listed = {
        "a": ListedGroup("classic", "PreparingRebalance"),
        "b": STABLE,
        "c": STABLE,  # Empty when last described: members came
        "new": EMPTY,  # never described
    }
    assert rounds.due(listed, 1000) == ["a", "c", "new"]
    rounds.described({"a": "PreparingRebalance", "c": "Stable", "new": "Empty"}, 1000)
    # Still rebalancing: what its members wait for is only in its description.
    assert rounds.due(listed, 2000) == ["a"]


def test_a_group_with_a_record_read_is_described_next_round_once() -> None:
    # A rebalance that began and ended between two listings: Stable both times, but
    # its record was read.
    rounds = DescribeRounds(log_read=True, interval_ms=1000)
    _swept(rounds, {"a": STABLE, "b": STABLE})
    rounds.touched("b")
    assert rounds.due({"a": STABLE, "b": STABLE}, 1000) == ["b"]
    rounds.described({"b": "Stable"}, 1000)
    assert rounds.due({"a": STABLE, "b": STABLE}, 2000) == []


def test_what_the_log_does_not_carry_is_described_every_round() -> None:
    consumer = ListedGroup("consumer", "Stable")  # its KIP-848 records are read
    untyped = ListedGroup("unknown", "Stable")  # Kafka 3.7: classic or consumer?
    stateless = ListedGroup("classic", None)  # ListGroups before v4
    listed = {"k": consumer, "u": untyped, "s": stateless, "c": STABLE}
    rounds = DescribeRounds(log_read=True, interval_ms=1000)
    _swept(rounds, listed)
    assert rounds.due(listed, 1000) == ["s", "u"]
    # A consumer group's record read: described at the next round, as a consumer group
    # even in a round between two listings.
    rounds.touched("k", "consumer")
    assert rounds.take_touched() == {"k": "consumer"}
    rounds.touched("k", "consumer")
    assert rounds.due(listed, 1500) == ["k", "s", "u"]
    # Without the log (no read access), every group every round, as a poller would.
    rounds.stop_reading_log()
    assert rounds.due(listed, 2000) == ["c", "k", "s", "u"]


def test_a_group_forgotten_is_described_as_new() -> None:
    rounds = DescribeRounds(log_read=True, interval_ms=1000)
    _swept(rounds, {"a": STABLE})
    rounds.forget("a")  # deleted, or its partition given to another monitor
    assert rounds.due({"a": STABLE}, 1000) == ["a"]


def test_a_stored_generation_counts_at_the_first_description_after_its_record() -> None:
    f = GroupFollower(G, SETTLE_MS, stored_source=True)
    assert f.observed(ONLY_A, 100, taken_ms=100) == []
    assert f.record(R0, 150) + f.record(R1, 200) == []
    assert f.tick(900) == []  # described before the record: its record is not all yet
    # The round started before the record was read does not count it either.
    assert f.observed(ONLY_A, 1050, taken_ms=190) == []
    done = f.observed(ONLY_A, 1200, taken_ms=1100)
    assert [(d.rebalance.generation, d.rebalance.cause) for d in done] == [(1, "member_joined")]
    assert 1200 - 200 < SETTLE_MS  # counted before the settling time a description needs


def test_a_generation_known_only_from_descriptions_waits_its_settling_time() -> None:
    f = GroupFollower(G, SETTLE_MS, stored_source=False)
    f.observed(ONLY_A.__class__(group=G, state="Empty"), 0, taken_ms=0)
    assert f.observed(ONLY_A, 1000, taken_ms=1000) == []
    assert f.observed(ONLY_A, 2000, taken_ms=2000) == []
    done = f.tick(1000 + SETTLE_MS)
    assert [d.rebalance.generation for d in done] == [f.state.generations[-1].generation]


def _monitor() -> tuple[Monitor, Callable[[str, object], None]]:
    clock = iter(range(0, 10**7, 100))
    mon = Monitor(ClientSettings(), Selection(), interval_s=1.0, clock=lambda: next(clock))

    def apply(kind: str, payload: object) -> None:
        mon.inbox.put((kind, payload))
        mon.step(timeout_s=0)

    return mon, apply


def test_the_rows_follow_each_group_made_again_only_when_it_changed() -> None:
    mon, apply = _monitor()
    other = GroupSnapshot(group="other", state="Empty", protocol_type="consumer")
    apply("records", ([R0, R1], 2))
    apply("caught_up", None)
    apply("described", ({G: STABLE, "other": EMPTY}, {G: ONLY_A, "other": other}, set(), 0.01, 0))
    rows, _ = mon.view()
    assert (rows[G].members, rows[G].tally.total, rows["other"].state) == (1, 1, "Empty")
    untouched = rows["other"]
    # A round for records read between two listings: the group described, the others
    # neither made again nor taken for deleted because no listing came with it.
    apply("records", ([R2], 1))
    apply("described", (None, {G: BOTH}, set(), 0.01, 10**6))
    rows, _ = mon.view()
    assert rows[G].members == 2 and rows[G].tally.total == 2
    assert rows["other"] is untouched
    # Deleted (its tombstone): its row goes.
    apply("records", ([GroupRecord("other", None, offset=9, timestamp_ms=5000)], 1))
    apply("described", ({G: STABLE}, {G: BOTH}, set(), 0.01, 2 * 10**6))
    rows, _ = mon.view()
    assert "other" not in rows and rows[G].tally.total == 2


class _Cluster:
    """The poll thread's admin: one classic group, every call counted."""

    undescribed: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.listings = 0
        self.described: list[list[str]] = []

    def list_all(self) -> dict[str, ListedGroup]:
        self.listings += 1
        return {G: STABLE}

    def describe_all(self, groups: dict[str, str]) -> dict[str, GroupSnapshot]:
        self.described.append(sorted(groups))
        return {g: ONLY_A for g in groups}

    def close(self) -> None:
        pass


def test_between_listings_the_poll_thread_waits_and_describes_only_records_groups() -> None:
    import threading
    import time

    mon = Monitor(ClientSettings(), Selection(), interval_s=30.0)
    cluster = _Cluster()
    mon.admin = cluster  # type: ignore[assignment]
    mon.rounds.caught_up = True
    asked = []
    take = mon.rounds.take_touched
    mon.rounds.take_touched = lambda: asked.append(1) or take()  # type: ignore[method-assign]
    poller = threading.Thread(target=mon._poll_loop, daemon=True)
    poller.start()
    try:
        deadline = time.monotonic() + 5
        while not cluster.described and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cluster.described == [[G]]  # the first listing's round
        mon.rounds.wake.set()  # woken with nothing to describe: it waits again
        time.sleep(0.6)
        assert len(asked) <= 2 and cluster.described == [[G]], (len(asked), cluster.described)
        mon.rounds.touched(G)  # a record read: a round of its own, without a listing
        while len(cluster.described) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cluster.described == [[G], [G]] and cluster.listings == 1
    finally:
        mon.stopping.set()
        mon.rounds.wake.set()
        poller.join(timeout=5)


def test_a_described_generation_is_counted_by_a_later_step_with_nothing_new() -> None:
    # Described only (no log): the generation waits its settling time, and the steps
    # after it, which bring nothing, still count it.
    now = [0]
    mon = Monitor(
        ClientSettings(), Selection(), interval_s=1.0, offsets_topic=False, clock=lambda: now[0]
    )

    def apply(kind: str, payload: object) -> None:
        mon.inbox.put((kind, payload))
        mon.step(timeout_s=0)

    empty = GroupSnapshot(group=G, state="Empty", protocol_type="consumer")
    apply("described", ({G: EMPTY}, {G: empty}, set(), 0.01, 0))
    now[0] = 1000
    apply("described", ({G: STABLE}, {G: ONLY_A}, set(), 0.01, 1000))
    assert G not in mon.tallies or mon.tallies[G].total == 0
    now[0] = 1000 + mon.settle_ms
    mon.step(timeout_s=0)
    assert mon.tallies[G].total == 1


class _ClusterReadingMeanwhile(_Cluster):
    """A listing during which the state thread applies records (done here, in line, so
    the order is certain): the log's latency is shorter than a listing of many groups."""

    def __init__(self, mon: Monitor, records: list[GroupRecord]) -> None:
        super().__init__()
        self.mon, self.records = mon, records

    def list_all(self) -> dict[str, ListedGroup]:
        if self.records:
            self.mon.inbox.put(("records", (self.records, len(self.records))))
            self.records = []
            self.mon.step(timeout_s=0)
        return super().list_all()


def test_a_record_read_during_a_listing_counts_at_that_round_s_description() -> None:
    # The round's descriptions are asked after the records' groups were taken, so they
    # are newer than those records: stamped at the round's start instead, the rebalance
    # was taken by this round, counted by none, and waited for the settling time (the
    # benchmark's p99 lag of 11 s at --interval 10).
    import threading

    clock = iter(range(0, 10**7, 100))
    mon = Monitor(ClientSettings(), Selection(), interval_s=30.0, clock=lambda: next(clock))
    mon.admin = _ClusterReadingMeanwhile(mon, [R0, R1])  # type: ignore[assignment]
    poller = threading.Thread(target=mon._poll_loop, daemon=True)
    poller.start()
    try:
        kind, payload = mon.inbox.get(timeout=5)  # the first round's descriptions
        assert kind == "described"
        mon.inbox.put((kind, payload))
        done = mon.step(timeout_s=0)
        assert [(d.rebalance.generation, d.rebalance.cause) for d in done] == [(1, "member_joined")]
    finally:
        mon.stopping.set()
        mon.rounds.wake.set()
        poller.join(timeout=5)
