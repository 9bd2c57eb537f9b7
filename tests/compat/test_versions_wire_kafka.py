"""What kgctl reads from the wire and the log on Kafka 3.7.2, 3.9.1 ZooKeeper and 3.9.1
KIP-848: a group traced through `kgctl proxy`, its generations read from
`__consumer_offsets`, and `kgctl monitor`'s group list (docs/broker.md's matrix cites
these). Brokers are the tier's shared ones (conftest.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from compat_broker import Compat
from helpers import MemberProc, WatchProcess, event_is
from monitor_procs import MonitorProc

pytestmark = pytest.mark.kafka


def group() -> str:
    return f"compat-{uuid.uuid4().hex[:10]}"


def answered(type_: str, g: str, generation: int) -> Any:
    """A traced exchange of group `g` the broker answered without error, in `generation`."""

    def match(ev: dict[str, Any]) -> bool:
        return (
            ev["type"] == type_
            and ev["group"] == g
            and ev["data"].get("error") == "NONE"
            and ev["data"].get("response") is not None
            and ev["generation"] == generation
        )

    return match


def test_a_group_through_the_proxy_is_traced_step_by_step(any_broker: Compat) -> None:
    topic, g = any_broker.topic(2), group()
    proxy = WatchProcess(["-b", any_broker.bootstrap, "-o", "json"], command="proxy")
    member: MemberProc | None = None
    try:
        started = proxy.wait_for("the proxy's address", event_is("ProxyStarted"))
        member = MemberProc(started["data"]["bootstrap"], g, topic, name="a")
        joined = member.wait_event("JoinCompleted", timeout=60)
        generation = int(joined["data"]["generation"])
        # The member works through the proxy: it is given both partitions.
        assert sorted(joined["data"]["assignment"].get(topic, [])) == [0, 1], joined
        # The trace shows the steps of that generation, as the broker answered them.
        join = proxy.wait_for("its JoinGroup", answered("JoinGroupTraced", g, generation))
        assert join["data"]["response"]["is_leader"] is True
        sync = proxy.wait_for("its SyncGroup", answered("SyncGroupTraced", g, generation))
        assert sorted(sync["data"]["response"]["assignment"][topic]) == [0, 1], sync
        proxy.wait_for("a heartbeat", answered("HeartbeatTraced", g, generation))
    finally:
        if member is not None:
            member.kill()
        proxy.kill()


def test_generations_are_read_from_consumer_offsets(any_broker: Compat) -> None:
    topic, g = any_broker.topic(2), group()
    a = MemberProc(any_broker.bootstrap, g, topic, name="a")
    b: MemberProc | None = None
    watch: WatchProcess | None = None
    try:
        first = int(a.wait_event("JoinCompleted", timeout=60)["data"]["generation"])
        watch = WatchProcess([g, "-b", any_broker.bootstrap, "-o", "json", "--interval", "1"])
        source = watch.wait_for("the generation source", event_is("GenerationSourceChanged"))
        assert source["data"]["source"] == "__consumer_offsets", source
        # The generation the group was in when the watch began, from its stored record.
        initial = watch.wait_for("the stored generation", event_is("GenerationChanged"))
        assert initial["generation"] == first, initial
        assert initial["data"]["inferred"] is False, initial
        # A second member: the broker's next generation, read from its record too.
        b = MemberProc(any_broker.bootstrap, g, topic, name="b")
        second = int(b.wait_event("JoinCompleted", timeout=60)["data"]["generation"])
        changed = watch.wait_for(
            "the join's generation", event_is("GenerationChanged", generation=second)
        )
        assert changed["data"]["inferred"] is False, changed
    finally:
        for proc in (a, b, watch):
            if proc is not None:
                proc.kill()


def test_the_monitor_follows_a_3_7_group_listed_without_a_type(k37: Compat) -> None:
    # 3.7's ListGroups sends no group type; the monitor's list took every such group as
    # classic. Now it is described to find out: DescribeGroups knows it, so classic.
    topic, g = k37.topic(2), group()
    member = MemberProc(k37.bootstrap, g, topic, name="a")
    monitor: MonitorProc | None = None
    try:
        member.wait_event("JoinCompleted", timeout=60)
        monitor = MonitorProc(k37.bootstrap, "--groups", f"^{g}$")

        def info() -> dict[str, str] | None:
            for (name, labels), _ in monitor.scrape().items():
                if name == "kgctl_group_info" and dict(labels).get("group") == g:
                    return dict(labels)
            return None

        labels = monitor.wait(info, 60, "the group's info series")
        assert labels["protocol"] == "classic", labels
        assert monitor.wait(lambda: monitor.sample("kgctl_group_members", group=g), 30,
                            "one member") == 1  # fmt: skip
        assert not [ln for ln in monitor.stderr_lines if "WARNING" in ln or "error" in ln]
    finally:
        member.kill()
        if monitor is not None:
            monitor.kill()
