"""`kgctl watch` reads the broker's own generation ids from `__consumer_offsets`.

Members report the generation their JoinGroup response carried; watch must report the
same ids (not numbers counted from its start), for kgctl members and for a plain
kafka-python group.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

import pytest
from helpers import MemberProc, PlainConsumer, WatchProcess, event_is

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(topic: Any) -> str:
    """One 4-partition topic per test, from conftest's factory (which deletes it)."""
    return str(topic(4, prefix="watch-gen"))


def stored(watch: WatchProcess) -> list[dict[str, Any]]:
    with watch.lock:
        return [
            e
            for e in watch.events
            if e["type"] == "GenerationChanged" and not e["data"]["inferred"]
        ]


def completed(member: MemberProc) -> set[int]:
    return {int(e["data"]["generation"]) for e in member.of("JoinCompleted")}


def test_kgctl_members_generations_are_the_ones_watch_reports(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = MemberProc(bootstrap, group, topic, name="a")
    b: MemberProc | None = None
    watch: WatchProcess | None = None
    try:
        first = a.wait_event("JoinCompleted", timeout=30)["data"]["generation"]
        watch = WatchProcess([group, "-b", bootstrap, "--output", "json", "--interval", "1"])
        source = watch.wait_for("the generation source", event_is("GenerationSourceChanged"))
        assert source["data"]["source"] == "__consumer_offsets", source
        # The look-back found the generation the group was in when the watch started.
        initial = watch.wait_for("the current generation", event_is("GenerationChanged"))
        assert initial["generation"] == first and initial["data"]["initial"] is True
        assert initial["data"]["inferred"] is False

        # Rebalance 1: a second member joins.
        b = MemberProc(bootstrap, group, topic, name="b")
        second = b.wait_event("JoinCompleted", timeout=30)["data"]["generation"]
        a.wait_event("JoinCompleted", generation=second, timeout=30)
        changed = watch.wait_for(
            "the join's generation", event_is("GenerationChanged", generation=second)
        )
        assert changed["data"]["previous"] == first
        assert changed["data"]["leader"] in {
            a.of("JoinCompleted")[-1]["member_id"],
            b.of("JoinCompleted")[-1]["member_id"],
        }
        assert sorted(m["client_id"] for m in changed["data"]["members"]) == sorted(
            {a.of("JoinCompleted")[-1]["client_id"], b.of("JoinCompleted")[-1]["client_id"]}
        )

        # Rebalance 2: it leaves again (LeaveGroup on SIGTERM).
        assert b.stop(signal.SIGTERM) == 0
        third = a.wait(
            lambda: max(completed(a)) if max(completed(a)) > second else None,
            timeout=30,
            what="a's JoinCompleted after b left",
        )
        watch.wait_for("the leave's generation", event_is("GenerationChanged", generation=third))
        cause = watch.wait_for(
            "the leave's cause", event_is("RebalanceAttributed", generation=third)
        )
        assert cause["data"]["cause"] == "member_left", cause

        reported = [e["generation"] for e in stored(watch)]
        assert reported == sorted(set(reported)), reported  # each once, in order
        assert set(reported) == completed(a) | completed(b), (reported, completed(a), completed(b))
        with watch.lock:
            assert not [
                e
                for e in watch.events
                if e["type"] == "GenerationChanged" and e["data"]["inferred"]
            ]
    finally:
        for m in (a, b):
            if m is not None:
                m.kill()
        if watch is not None:
            watch.kill()


def test_a_plain_kafka_python_group_gets_its_real_generation(bootstrap: str, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = PlainConsumer(bootstrap, topic, group, f"first-{group}")
    second = PlainConsumer(bootstrap, topic, group, f"second-{group}")
    watch: WatchProcess | None = None
    try:
        first.start()
        watch = WatchProcess([group, "-b", bootstrap, "--output", "json", "--interval", "1"])
        gen = watch.wait_for("the first generation", event_is("GenerationChanged"), timeout=45)
        assert gen["data"]["inferred"] is False
        since = gen["generation"]
        second.start()
        # The first consumer's own join may be attributed too (a cluster with an initial
        # rebalance delay completes it after watch started): the second's comes later.
        is_join = event_is("RebalanceAttributed", cause="member_joined")
        joined = watch.wait_for(
            "the join's cause", lambda ev: is_join(ev) and ev["generation"] > since
        )
        assert second.client_id in joined["data"]["evidence"]
        # Both consumers settle on the generation watch reported last.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            last = stored(watch)[-1]["generation"]
            if first.generations[-1:] == [last] and second.generations[-1:] == [last]:
                break
            time.sleep(0.2)
        reported = [e["generation"] for e in stored(watch)]
        assert first.generations[-1] == second.generations[-1] == reported[-1], (
            reported,
            first.generations,
            second.generations,
        )
        # Every generation a consumer got since the watch started is one watch reported.
        got = {g for g in first.generations + second.generations if g >= since}
        assert got <= set(reported), (reported, first.generations, second.generations)
        assert reported == sorted(set(reported))
    finally:
        first.stop()
        second.stop()
        if watch is not None:
            watch.kill()
    assert first.error is None and second.error is None


def test_watch_reads_a_trace_topic_the_members_create_after_it_started(
    bootstrap: str, topic: str
) -> None:
    """`watch --trace-topic` on a topic that does not exist yet waits for it; the first
    member creates it, and the member's own steps reach the watch from its first one."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    trace = f"kgctl-test-trace-{uuid.uuid4().hex[:8]}"
    watch = WatchProcess(
        [group, "-b", bootstrap, "--output", "json", "--interval", "0.5", "--trace-topic", trace]
    )
    member: MemberProc | None = None
    try:
        watch.wait_for("a first snapshot", event_is("GroupObserved"))
        member = MemberProc(bootstrap, group, topic, "--trace-topic", trace, name="traced")
        member.wait_event("JoinCompleted", timeout=30)
        for step in ("MemberStarted", "JoinGroupSent", "JoinCompleted"):
            seen = watch.wait_for(
                f"the member's {step}",
                lambda e, step=step: e["type"] == step and e.get("member") == "traced",
            )
            assert seen["source"] == "member"
        # A watch started once the topic exists shows what happens from its start on:
        # a member joining now, and nothing of the one that started before it.
        later = WatchProcess(
            [
                group,
                "-b",
                bootstrap,
                "--output",
                "json",
                "--interval",
                "0.5",
                "--trace-topic",
                trace,
            ]
        )
        try:
            later.wait_for("a first snapshot", event_is("GroupObserved"))
            late = MemberProc(bootstrap, group, topic, "--trace-topic", trace, name="late")
            try:
                late.wait_event("JoinCompleted", timeout=30)
                later.wait_for(
                    "the late member's JoinGroupSent",
                    lambda e: e["type"] == "JoinGroupSent" and e.get("member") == "late",
                )
                with later.lock:
                    assert not [
                        e
                        for e in later.events
                        if e["type"] == "MemberStarted" and e.get("member") == "traced"
                    ]
            finally:
                late.kill()
        finally:
            later.kill()
    finally:
        if member is not None:
            member.kill()
        watch.kill()
