"""The monitor's Prometheus metrics (docs/monitor.md lists them, their sources and ACLs).

Counters and histograms are observed as each rebalance is counted; the per-group gauges
(members, state, generation, seconds since the last rebalance) and the monitor's health
are read from the monitor's view at each scrape by a collector, so a group that is gone
leaves no stale series behind. Per-member series only with `member_labels` (their
cardinality is the number of members ever seen).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily as CounterFamily
from prometheus_client.core import GaugeMetricFamily, StateSetMetricFamily
from prometheus_client.registry import Collector

from kgctl.monitor.accounting import WAIT_DEAD
from kgctl.monitor.follower import Diagnosed
from kgctl.monitor.service import GroupRow, Health

# A rebalance of a few hundred milliseconds to one that waited out a 5-minute poll
# interval; the buckets an alert on "longer than N" can use without interpolation.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 45, 60, 120, 300, 600)
POLL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Every broker state a group can be in (classic and consumer protocol).
STATES = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Assigning",
    "Reconciling",
    "Dead",
    "Unknown",
)
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


class MonitorMetrics:
    """One registry holding every metric of the monitor."""

    def __init__(
        self,
        view: Callable[[], tuple[dict[str, GroupRow], Health]],
        member_labels: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = CollectorRegistry()
        self.member_labels = member_labels
        r = self.registry
        self.rebalances = Counter(
            "kgctl_group_rebalances",
            "Completed rebalances of the group, by the cause kgctl explain names and the "
            "group protocol.",
            ["group", "cause", "protocol"],
            registry=r,
        )
        self.duration = Histogram(
            "kgctl_group_rebalance_duration_seconds",
            "How long each rebalance took, from its first sign to the group stable again "
            "(only rebalances whose start was seen).",
            ["group"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.unassigned = Histogram(
            "kgctl_group_member_unassigned_seconds",
            "Each member's time without partitions in a rebalance.",
            ["group"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.waits = Counter(
            "kgctl_group_rebalance_waits",
            "Members a rebalance waited for, by why (dead: until its session timed out).",
            ["group", "why"],
            registry=r,
        )
        self.longest_wait = Histogram(
            "kgctl_group_rebalance_longest_wait_seconds",
            "The longest wait for one member in each rebalance that waited for one.",
            ["group"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.generations = Counter(
            "kgctl_group_generations",
            "Completed rebalances of the group, any cause (the sum of "
            "kgctl_group_rebalances_total's, created at 0 when the group is first followed so "
            "that increase() and rate() count its first rebalance).",
            ["group"],
            registry=r,
        )
        self.member_unassigned = (
            Counter(
                "kgctl_member_unassigned_seconds",
                "Time each member spent without partitions in rebalances (--member-labels).",
                ["group", "member"],
                registry=r,
            )
            if member_labels
            else None
        )
        self.poll = Histogram(
            "kgctl_monitor_poll_duration_seconds",
            "How long one round of ListGroups and batched describes took.",
            buckets=POLL_BUCKETS,
            registry=r,
        )
        r.register(_Gauges(view, clock))
        # Each group's label sets, so that a group given to another monitor (a shard
        # group's rebalance) takes all its series away with it.
        self._series: dict[str, set[tuple[Any, tuple[str, ...]]]] = {}

    def _of(self, metric: Any, group: str, *labels: str) -> Any:
        self._series.setdefault(group, set()).add((metric, (group, *labels)))
        return metric.labels(group, *labels)

    def followed(self, group: str) -> None:
        """A group newly followed: its series an alert reads with increase() start at 0
        (a series born at 1 would hide its first increment from increase() and rate())."""
        self._of(self.generations, group)
        self._of(self.waits, group, WAIT_DEAD)
        self._of(self.duration, group)
        self._of(self.unassigned, group)

    def forgotten(self, group: str) -> None:
        """A group no longer this monitor's: its series go (the monitor that owns it now
        exports them, counted from the same records)."""
        for metric, labels in self._series.pop(group, ()):
            metric.remove(*labels)

    def rebalanced(self, d: Diagnosed) -> None:
        rb = d.rebalance
        g = rb.group
        self._of(self.rebalances, g, rb.cause, rb.protocol).inc()
        self._of(self.generations, g).inc()
        if rb.duration_ms is not None:
            self._of(self.duration, g).observe(rb.duration_ms / 1000)
        for ms in rb.unassigned_ms:
            self._of(self.unassigned, g).observe(ms / 1000)
        for w in rb.waits:
            self._of(self.waits, g, w.why).inc()
        if rb.waits:
            self._of(self.longest_wait, g).observe(rb.longest_wait_ms / 1000)
        if self.member_unassigned is not None:
            for c in d.diagnosis.costs:
                self._of(self.member_unassigned, g, c.member).inc(c.unassigned_ms / 1000)

    def polled(self, seconds: float) -> None:
        self.poll.observe(seconds)


class _Gauges(Collector):
    """The gauges read from the monitor's view at each scrape."""

    def __init__(
        self, view: Callable[[], tuple[dict[str, GroupRow], Health]], clock: Callable[[], float]
    ) -> None:
        self.view, self.clock = view, clock

    def describe(self) -> list[Any]:
        return []  # computed at each scrape: nothing to check at registration

    def collect(self) -> Iterator[Any]:
        rows, health = self.view()
        now = self.clock()
        members = GaugeMetricFamily(
            "kgctl_group_members", "Members of the group now.", labels=["group"]
        )
        generation = GaugeMetricFamily(
            "kgctl_group_generation",
            "The group's generation (a consumer-protocol group's epoch).",
            labels=["group"],
        )
        rebalancing = GaugeMetricFamily(
            "kgctl_group_rebalancing", "1 while the group rebalances, else 0.", labels=["group"]
        )
        since = GaugeMetricFamily(
            "kgctl_group_seconds_since_last_rebalance",
            "Seconds since the group's last completed rebalance ended.",
            labels=["group"],
        )
        last = GaugeMetricFamily(
            "kgctl_group_last_rebalance_timestamp_seconds",
            "When the group's last completed rebalance ended (Unix time).",
            labels=["group"],
        )
        info = GaugeMetricFamily(
            "kgctl_group_info",
            "The group's protocol and assignor (always 1).",
            labels=["group", "protocol", "assignor"],
        )
        state = StateSetMetricFamily(
            "kgctl_group_state", "The group's state as its coordinator describes it.",
            labels=["group"],
        )  # fmt: skip
        for g, row in sorted(rows.items()):
            members.add_metric([g], row.members)
            generation.add_metric([g], row.generation)
            rebalancing.add_metric([g], 1 if row.state in REBALANCING else 0)
            info.add_metric([g, row.protocol, row.assignor], 1)
            current = row.state if row.state in STATES else "Unknown"
            state.add_metric([g], {s: s == current for s in STATES})
            if row.tally.last is not None:
                ended = row.tally.last.ended_ms / 1000
                last.add_metric([g], ended)
                since.add_metric([g], max(0.0, now - ended))
        yield from (members, generation, rebalancing, since, last, info, state)
        yield from _health(health, len(rows))


def _health(h: Health, groups: int) -> Iterator[Any]:
    def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(name, text)
        g.add_metric([], value)
        return g

    yield gauge("kgctl_monitor_groups", "Groups followed.", groups)
    yield gauge(
        "kgctl_monitor_cluster_reachable",
        "1 when the last ListGroups and describes were answered, 0 while retrying.",
        1 if h.reachable else 0,
    )
    yield gauge(
        "kgctl_monitor_offsets_topic_readable",
        "1 when __consumer_offsets is read, 0 when groups are followed by descriptions only.",
        1 if h.offsets_readable else 0,
    )
    yield gauge(
        "kgctl_monitor_offsets_caught_up",
        "1 once the history in __consumer_offsets has been read to its end.",
        1 if h.offsets_caught_up else 0,
    )
    records = CounterFamily(
        "kgctl_monitor_offsets_records_read", "Records read from __consumer_offsets."
    )
    records.add_metric([], h.records_read)
    yield records
    meta = CounterFamily(
        "kgctl_monitor_group_metadata_records",
        "Group records of followed groups: classic generations and tombstones, consumer "
        "groups' epoch, member and assignment records.",
    )
    meta.add_metric([], h.metadata_records)
    yield meta
    if h.owned_partitions is not None:
        yield gauge(
            "kgctl_monitor_shard_partitions",
            "With --shard-group: the __consumer_offsets partitions this monitor owns now.",
            len(h.owned_partitions),
        )
    polls = CounterFamily("kgctl_monitor_polls", "Rounds of ListGroups and describes done.")
    polls.add_metric([], h.polls)
    yield polls
    errors = CounterFamily(
        "kgctl_monitor_errors", "Errors met, by where (poll, offsets_log).", labels=["kind"]
    )
    for kind in ("poll", "offsets_log"):
        errors.add_metric([kind], h.errors.get(kind, 0))
    yield errors
