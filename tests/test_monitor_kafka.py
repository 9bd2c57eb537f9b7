"""`kgctl monitor` as a real process against a real broker: rebalances made by real
members are counted by cause, explained, exported; a killed and restarted monitor counts
the same, with the broker restarted under it."""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import MemberProc, wait_converged
from kafka.errors import CoordinatorNotAvailableError
from monitor_procs import MonitorProc

from kgctl.adapters.group_records import partition_for
from kgctl.broker.local import LocalBroker

pytestmark = pytest.mark.kafka


def _total(mon: MonitorProc, group: str, n: int, timeout: float = 40) -> dict[str, float]:
    try:
        return mon.wait(
            lambda: (c := mon.rebalances_of(group)) and sum(c.values()) >= n and c, timeout,
            f"{n} rebalances of {group} in the metrics",
        )  # fmt: skip
    except AssertionError as exc:
        said = [(r["generation"], r["trigger"]["cause"]) for r in mon.rebalances]
        raise AssertionError(f"{exc}; counted {mon.rebalances_of(group)}, lines {said}") from None


def _lines(mon: MonitorProc, group: str) -> list[tuple[int, str]]:
    """(generation, cause) of each rebalance of `group` the monitor said, in order."""
    return [(r["generation"], r["trigger"]["cause"]) for r in mon.rebalances if r["group"] == group]


def _diagnosed(mon: MonitorProc, group: str, generation: int) -> bool:
    return any(g == generation for g, _ in _lines(mon, group))


def test_monitor_counts_explains_and_exports_each_rebalance(bootstrap: str, topic) -> None:  # type: ignore[no-untyped-def]
    t = topic(4)
    run = uuid.uuid4().hex[:8]
    group, skipped = f"mon-{run}-app", f"mon-{run}-skip"
    mon = MonitorProc(bootstrap, "--groups", f"^mon-{run}-", "--exclude", "-skip$")
    members: list[MemberProc] = []
    try:
        other = MemberProc(bootstrap, skipped, t, name="other")
        members.append(other)
        a = MemberProc(bootstrap, group, t, name="a")
        members.append(a)
        wait_converged([a], t, 4)
        # a frozen, b's join holds the group in PreparingRebalance until a is back: the
        # monitor's descriptions see the rebalance begin, so b's time without partitions
        # is observed (a rebalance of half a second falls between two 1 s descriptions:
        # then the monitor knows no such time, and must not make one up).
        a.proc.send_signal(signal.SIGSTOP)
        b = MemberProc(bootstrap, group, t, name="b")
        members.append(b)
        try:
            mon.wait(
                lambda: mon.sample("kgctl_group_rebalancing", group=group) == 1, 20,
                "the rebalance b's join began",
            )  # fmt: skip
        finally:
            a.proc.send_signal(signal.SIGCONT)
        wait_converged([a, b], t, 4)
        b.stop()  # a LeaveGroup
        wait_converged([a], t, 4)

        counts = _total(mon, group, 3)
        assert counts == {"member_joined": 2.0, "member_left": 1.0}
        mon.wait(lambda: mon.sample("kgctl_group_members", group=group) == 1, 10, "1 member")
        assert mon.sample("kgctl_group_generation", group=group) == 3
        assert mon.sample("kgctl_group_state", group=group, kgctl_group_state="Stable") == 1
        assert mon.sample("kgctl_group_rebalancing", group=group) == 0
        assert mon.sample("kgctl_monitor_cluster_reachable") == 1
        assert mon.sample("kgctl_monitor_offsets_topic_readable") == 1
        # b's time without partitions in the rebalance its join made, observed.
        assert (mon.sample("kgctl_group_member_unassigned_seconds_count", group=group) or 0) >= 1
        assert not [k for k in mon.scrape() if ("group", skipped) in k[1]]
        # One JSON line per rebalance, the diagnosis explain gives.
        lines = [r for r in mon.rebalances if r["group"] == group]
        assert [(r["generation"], r["trigger"]["cause"]) for r in lines] == [
            (1, "member_joined"), (2, "member_joined"), (3, "member_left"),
        ]  # fmt: skip
        assert all(r["protocol"] == "classic" and "critical_path" in r for r in lines)
    finally:
        for m in members:
            m.kill()
        assert mon.stop() == 0


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    home: Path = tmp_path_factory.mktemp("kgctl-monitor-broker")
    broker = LocalBroker(home / "broker.json")
    # Four __consumer_offsets partitions (the session broker has one): monitors sharing
    # the cluster in a shard group split them.
    broker.up(tie_to_parent=True, timeout_s=180, offsets_partitions=4)
    try:
        yield broker
    finally:
        broker.down()


def test_counts_survive_a_broker_restart_and_a_killed_monitor(own_broker: LocalBroker) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    state = own_broker.load()
    assert state is not None
    bootstrap = state.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("mon-restart", 4, 1)])
    admin.close()
    group = "mon-restart-g"
    first = MonitorProc(bootstrap, "--groups", "^mon-restart-")
    second: MonitorProc | None = None
    members: list[MemberProc] = []
    try:
        a = MemberProc(bootstrap, group, "mon-restart", name="a")
        members.append(a)
        wait_converged([a], "mon-restart", 4, timeout=60)
        b = MemberProc(bootstrap, group, "mon-restart", name="b")
        members.append(b)
        wait_converged([a, b], "mon-restart", 4)
        assert _total(first, group, 2) == {"member_joined": 2.0}

        own_broker.stop_node(1)
        first.wait(lambda: first.sample("kgctl_monitor_cluster_reachable") == 0, 40, "unreachable")
        own_broker.up(tie_to_parent=True, timeout_s=180)
        first.wait(
            lambda: first.sample("kgctl_monitor_cluster_reachable") == 1, 60, "reachable again"
        )
        # The members rejoin the restarted coordinator (new generations, or not): the
        # first monitor must have counted every generation they completed.
        generation = wait_converged([a, b], "mon-restart", 4, timeout=60)
        first.wait(
            lambda: first.sample("kgctl_group_generation", group=group) == generation, 40,
            f"generation {generation} seen",
        )  # fmt: skip
        first.wait(lambda: _diagnosed(first, group, generation), 40, f"generation {generation}")
        said = _lines(first, group)
        first.proc.send_signal(signal.SIGKILL)
        first.kill()

        b.stop()  # while no monitor runs
        last = wait_converged([a], "mon-restart", 4, timeout=60)
        second = MonitorProc(bootstrap, "--groups", "^mon-restart-")
        second.wait(lambda: _diagnosed(second, group, last), 40, f"generation {last}")
        again = _lines(second, group)
        # The same history counted the same, generation by generation, and what it
        # missed counted too, up to the generation the members are in now. (What b's
        # leave made depends on the restart: a leave; or, when the restart outlasted a's
        # session, a group left Empty, not a rebalance, then a's return as a new member.)
        assert again[: len(said)] == said, (said, again)
        assert again[-1][0] == last and len(again) > len(said), (said, again)
        assert second.rebalances_of(group) == dict(Counter(cause for _, cause in again))
        assert second.sample("kgctl_monitor_offsets_caught_up") == 1
    finally:
        for m in members:
            m.kill()
        first.kill()
        if second is not None:
            assert second.stop() == 0


def test_a_monitor_started_while_the_cluster_is_down_reads_the_log_once_it_is_up(
    own_broker: LocalBroker,
) -> None:
    """A monitor that began while the cluster was down (a deploy before the brokers, a
    network cut) waits for it; it does not settle for descriptions only, which is for a
    principal that may not read the topic."""
    from kafka.admin import KafkaAdminClient, NewTopic

    state = own_broker.load()
    assert state is not None
    bootstrap = state.bootstrap
    own_broker.stop_node(1)
    mon = MonitorProc(bootstrap, "--groups", "^mon-down-")
    member: MemberProc | None = None
    try:
        mon.wait(lambda: mon.sample("kgctl_monitor_cluster_reachable") == 0, 40, "unreachable")
        own_broker.up(tie_to_parent=True, timeout_s=180)
        mon.wait(lambda: mon.sample("kgctl_monitor_offsets_caught_up") == 1, 90, "the log read")
        assert mon.sample("kgctl_monitor_offsets_topic_readable") == 1
        said = "".join(mon.stderr_lines)
        assert "descriptions only" not in said, said
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("mon-down", 2, 1)])
        admin.close()
        member = MemberProc(bootstrap, "mon-down-g", "mon-down", name="a")
        generation = wait_converged([member], "mon-down", 2, timeout=60)
        mon.wait(lambda: _diagnosed(mon, "mon-down-g", generation), 40, "the join diagnosed")
        assert mon.rebalances_of("mon-down-g") == {"member_joined": 1.0}
    finally:
        if member is not None:
            member.kill()
        assert mon.stop() == 0


def _exported(mon: MonitorProc, groups: list[str]) -> set[str]:
    """The groups among `groups` whose rebalances `mon` exports now."""
    return {g for g in groups if mon.rebalances_of(g)}


def test_monitors_in_a_shard_group_split_the_groups_and_take_over_a_dead_one(
    own_broker: LocalBroker,
) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    state = own_broker.load()
    assert state is not None
    bootstrap = state.bootstrap
    run = uuid.uuid4().hex[:8]
    topic = f"mon-shard-{run}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    # One group in each of the four partitions of __consumer_offsets.
    groups: dict[int, str] = {}
    for i in range(1000):
        name = f"mon-shard-{run}-{i}"
        groups.setdefault(partition_for(name, 4), name)
        if len(groups) == 4:
            break
    names = [groups[p] for p in range(4)]
    shard = ["--groups", f"^mon-shard-{run}-", "--shard-group", f"kgctl-monitors-{run}"]
    monitors = [MonitorProc(bootstrap, *shard, "--shard-session-timeout", "6") for _ in "ab"]
    members: list[MemberProc] = []
    try:
        for m in monitors:
            try:
                m.wait(
                    lambda m=m: m.sample("kgctl_monitor_shard_partitions") == 2, 60,
                    "two partitions of four",
                )  # fmt: skip
            except AssertionError as exc:
                # What each said of its partitions (its notes), to read a failure by.
                said = ["".join(x.stderr_lines)[-1500:] for x in monitors]
                raise AssertionError(f"{exc}; the monitors said: {said}") from None
        for g in names:
            members.append(MemberProc(bootstrap, g, topic, name=g[-1]))
        for member in members:
            wait_converged([member], topic, 2, timeout=60)
        first, second = monitors
        # Each exports the groups of its two partitions, no group twice.
        for m in monitors:
            m.wait(lambda m=m: len(_exported(m, names)) == 2, 30, "its two groups")
        mine, theirs = _exported(first, names), _exported(second, names)
        assert mine | theirs == set(names) and not mine & theirs
        assert all(first.rebalances_of(g) == {"member_joined": 1.0} for g in mine)

        first.kill()  # no LeaveGroup: the shard group waits out its session
        second.wait(lambda: second.sample("kgctl_monitor_shard_partitions") == 4, 40, "all four")
        # The dead monitor's groups, counted again from their records by the survivor.
        second.wait(lambda: _exported(second, names) == set(names), 30, "every group")
        assert all(second.rebalances_of(g) == {"member_joined": 1.0} for g in names)
    finally:
        for member in members:
            member.kill()
        monitors[0].kill()
        assert monitors[1].stop() == 0


def test_the_kubernetes_example_runs_as_written(bootstrap: str) -> None:
    """examples/kubernetes/monitor.yaml's command line, but for where the cluster is, the
    client properties and the listening address (this machine's, not a pod's)."""
    import yaml

    example = Path(__file__).resolve().parents[1] / "examples" / "kubernetes" / "monitor.yaml"
    deployment = next(
        d for d in yaml.safe_load_all(example.read_text()) if d["kind"] == "Deployment"
    )
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "monitor"
    local = ("--bootstrap-server=", "--command-config=", "--metrics-listen=")
    mon = MonitorProc(bootstrap, *[a for a in args[1:] if not a.startswith(local)])
    try:
        # The session broker's __consumer_offsets has one partition: this pod owns it.
        mon.wait(lambda: mon.sample("kgctl_monitor_shard_partitions") == 1, 60, "the partition")
        assert mon.sample("kgctl_monitor_offsets_topic_readable") == 1
    finally:
        assert mon.stop() == 0


def test_without_the_offsets_topic_it_counts_from_descriptions_and_says_so(
    bootstrap: str,
    topic,  # type: ignore[no-untyped-def]
) -> None:
    t = topic(4)
    group = f"mon-{uuid.uuid4().hex[:8]}-polled"
    mon = MonitorProc(bootstrap, "--groups", f"^{group}$", "--no-offsets-topic")
    members: list[MemberProc] = []
    try:
        mon.wait(lambda: mon.sample("kgctl_monitor_polls_total"), 30, "a first poll")
        a = MemberProc(bootstrap, group, t, name="a")
        members.append(a)
        wait_converged([a], t, 4, timeout=60)
        # Described only, two joins between two polls would be one change (seen once: the
        # group first listed with a and b): b joins once the polls have seen a alone.
        mon.wait(lambda: mon.sample("kgctl_group_members", group=group) == 1, 20, "a seen")
        b = MemberProc(bootstrap, group, t, name="b")
        members.append(b)
        wait_converged([a, b], t, 4)
        # The same for a join and a leave: the leave waits until the polls have seen the
        # join.
        assert _total(mon, group, 2) == {"member_joined": 2.0}
        b.stop()
        wait_converged([a], t, 4)
        assert _total(mon, group, 3) == {"member_joined": 2.0, "member_left": 1.0}
        assert mon.sample("kgctl_monitor_offsets_topic_readable") == 0
        said = [line for line in mon.stderr_lines if "descriptions only" in line]
        assert len(said) == 1, mon.stderr_lines
    finally:
        for m in members:
            m.kill()
        assert mon.stop() == 0


def _reconciled(members: list[MemberProc], topic: str, partitions: int = 4) -> None:
    """Until the consumer-protocol members' own reconciliations own each partition once."""

    def owned() -> list[int] | None:
        out: list[int] = []
        for m in members:
            last = m.of("ReconciliationCompleted")
            if not last or not last[-1]["data"]["assignment"].get(topic):
                return None  # each member owns a share
            out += last[-1]["data"]["assignment"][topic]
        return sorted(out)

    members[0].wait(lambda: owned() == list(range(partitions)), 30, "the reconciliations")


def test_a_consumer_group_s_rebalances_begin_when_its_epoch_record_was_written(
    bootstrap: str,
    admin,  # type: ignore[no-untyped-def]
    topic,
) -> None:
    # At a 10 s interval: a consumer group is described when its records are read, not
    # every round, and each rebalance begins when the broker wrote its epoch (between
    # the joining or leaving member's ConsumerGroupHeartbeat and its answer), not at
    # the description that first showed it (anywhere in the 10 s after).
    t = topic(4)
    group = f"mon-{uuid.uuid4().hex[:8]}-kip848"
    # A coordinator asked for: __consumer_offsets exists (a fresh broker has none), so
    # the monitor has read the log before the group begins. Its epochs between two
    # listings are known from the log only.
    with contextlib.suppress(CoordinatorNotAvailableError):  # the topic being created
        admin.list_group_offsets(f"{group}-probe")
    mon = MonitorProc(bootstrap, "--groups", f"^{group}$", "--interval", "10")
    members: list[MemberProc] = []
    try:
        mon.wait(lambda: mon.sample("kgctl_monitor_offsets_caught_up") == 1, 60, "the log read")
        a = MemberProc(bootstrap, group, t, name="a", protocol="consumer")
        members.append(a)
        _reconciled([a], t)
        b = MemberProc(bootstrap, group, t, name="b", protocol="consumer")
        members.append(b)
        _reconciled([a, b], t)
        b.stop()  # a ConsumerGroupHeartbeat with member epoch -1
        _reconciled([a], t)
        _total(mon, group, 3)

        def bumped(m: MemberProc, sent_epoch: int) -> tuple[int, int, int]:
            """(answered epoch, earliest and latest write time) of the member's heartbeat
            that sent `sent_epoch`: the group epoch was written between send and answer."""
            e = next(
                e for e in m.of("GroupHeartbeatAnswered")
                if e["data"]["sent"]["member_epoch"] == sent_epoch
            )  # fmt: skip
            return e["data"]["member_epoch"], e["ts_ms"] - e["data"]["rtt_ms"] - 5, e["ts_ms"] + 5

        lines = [r for r in mon.rebalances if r["group"] == group]
        assert [(r["protocol"], r["trigger"]["cause"]) for r in lines] == [
            ("consumer", "member_joined"), ("consumer", "member_joined"),
            ("consumer", "member_left"),
        ], lines  # fmt: skip
        a_epoch, a_from, a_to = bumped(a, 0)
        _, b_from, b_to = bumped(b, 0)
        _, left_from, left_to = bumped(b, -1)
        # The epochs a itself was given, one per rebalance (b's first answer may carry
        # the epoch before its join's).
        a_epochs = sorted({e["data"]["member_epoch"] for e in a.of("GroupHeartbeatAnswered")})
        assert [r["generation"] for r in lines] == [a_epoch, a_epoch + 1, a_epoch + 2]
        assert {a_epoch + 1, a_epoch + 2} <= set(a_epochs), a_epochs
        assert a_from <= lines[0]["start_ms"] <= a_to, (lines[0]["start_ms"], a_from, a_to)
        assert b_from <= lines[1]["start_ms"] <= b_to, (lines[1]["start_ms"], b_from, b_to)
        assert left_from <= lines[2]["start_ms"] <= left_to, (lines[2]["start_ms"], left_from)
        assert mon.sample("kgctl_group_generation", group=group) == a_epoch + 2
    finally:
        for m in members:
            m.kill()
        assert mon.stop() == 0
