"""kafka-python's departures from the Java client that kgctl's member corrects, provoked
on a real broker.

The member under test runs in this process so the test decides exactly when it polls
(the windows are otherwise races); the other members are `kgctl join` processes, frozen
with SIGSTOP where the broker must be kept waiting. Each scenario also runs on plain
kafka-python 3.0.12, where it shows the departure: that is the proof the scenario
reaches the window the correction is about.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import MemberProc

from kgctl.settings import ClientSettings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka.structs import MemberState

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]

KINDS = ["kgctl", "kafka-python"]


class InProcessMember:
    """A consumer driven by the test, with every group request it sends recorded."""

    def __init__(
        self,
        kind: str,
        bootstrap: str,
        group: str,
        topic: str,
        max_poll_interval_ms: int = 30_000,
        cooperative: bool = False,
        metadata_max_age_ms: int = 1000,
    ) -> None:
        self.kind = kind
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[str] = []
        self.metadata_requests = 0
        # The owned partitions each JoinGroup claimed (its first protocol's metadata).
        self.claimed: list[dict[str, list[int]]] = []
        config: dict[str, Any] = {
            "group_id": group,
            "client_id": f"departure-{kind}",
            "session_timeout_ms": 10_000,
            "heartbeat_interval_ms": 500,
            "max_poll_interval_ms": max_poll_interval_ms,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "metadata_max_age_ms": metadata_max_age_ms,
        }
        if cooperative:
            from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

            from kgctl.adapters.consumer import CooperativeStickyOrEager

            strategy = CooperativeStickyOrEager if kind == "kgctl" else CooperativeStickyAssignor
            config["partition_assignment_strategy"] = [strategy]
        if kind == "kgctl":
            from kgctl.adapters.consumer import build_consumer, subscribe

            def emit(type_: str, **data: Any) -> None:
                self.events.append((type_, data))

            settings = ClientSettings(bootstrap=bootstrap)
            self.consumer, _ = build_consumer(settings, emit, **config)
            subscribe(self.consumer, emit, [topic], None)
        else:
            self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, **config)
        self.coordinator = self.consumer._coordinator
        # The group's first join waits until the member's metadata knows the topic's
        # partitions. Joined before, the leader assigns nothing, the next metadata refresh
        # asks for a second join, and plain kafka-python can strand that one (departure
        # (h) in docs/member.md: a poll that returns between the leader's assignment and
        # the SyncGroup answer never applies it; seen in CI as "timed out waiting for the
        # first join"). The tests are about what comes after that join.
        wait_for(
            lambda: self.coordinator._metadata_snapshot.get(topic),
            30,
            f"{kind}'s metadata for {topic}",
        )
        manager = self.coordinator._manager
        send = manager.send

        def recording_send(request: Any, *args: Any, **kwargs: Any) -> Any:
            name = type(request).__name__.split("_")[0].removesuffix("Request")
            if name in ("JoinGroup", "SyncGroup", "LeaveGroup", "Heartbeat"):
                self.requests.append(name)
            self.metadata_requests += name == "Metadata"
            if name == "JoinGroup":
                owned = getattr(request.protocols[0][1], "owned_partitions", None) or ()
                self.claimed.append({tp.topic: sorted(tp.partitions) for tp in owned})
            return send(request, *args, **kwargs)

        manager.send = recording_send

    @property
    def generation(self) -> int:
        return int(self.coordinator._generation.generation_id)

    def join_in_flight(self) -> bool:
        task = self.coordinator._join_task
        return task is not None and not task.is_done

    def join_finished_unseen(self) -> bool:
        task = self.coordinator._join_task
        return task is not None and task.is_done

    def poll_until(self, pred: Callable[[], Any], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline, f"{self.kind}: timed out waiting for {what}"
            self.consumer.poll(timeout_ms=50)

    def poll_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.consumer.poll(timeout_ms=100)

    def close(self) -> None:
        self.consumer.close()


def wait_for(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = pred()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def topic(topic: Any) -> str:
    """One 4-partition topic per test, from conftest's factory (which deletes it)."""
    return str(topic(4, prefix="kgctl-departure"))


@pytest.fixture
def others(bootstrap: str) -> Iterator[Callable[..., MemberProc]]:
    started: list[MemberProc] = []

    def start(group: str, topic: str, name: str) -> MemberProc:
        member = MemberProc(bootstrap, group, topic, "--max-poll-interval", "30000", name=name)
        started.append(member)
        return member

    yield start
    for member in started:
        if member.proc.poll() is None:
            member.proc.send_signal(signal.SIGCONT)
        member.kill()


def completed_generations(member: MemberProc) -> list[int]:
    return [e["data"]["generation"] for e in member.of("JoinCompleted")]


def finish_a_join_outside_poll(
    leader: InProcessMember, group: str, topic: str, others: Callable[..., MemberProc]
) -> tuple[MemberProc, MemberProc, int]:
    """The leader alone, then with a; a is frozen and c joins, so the leader's JoinGroup
    waits; the test stops polling and unfreezes a: the join finishes on kafka-python's
    I/O thread, outside poll(). Returns a, c and the generation that join completed."""
    leader.poll_until(lambda: len(leader.consumer.assignment()) == 4, 30, "first join")
    a = others(group, topic, "a")
    leader.poll_until(lambda: a.of("JoinCompleted"), 30, "a joined")
    a.proc.send_signal(signal.SIGSTOP)
    c = others(group, topic, "c")
    # c's JoinGroup with its member id is the one the broker holds in the rebalance (the
    # first, without one, is answered MEMBER_ID_REQUIRED at once). Waiting for the
    # leader's JoinGroup alone raced: plain kafka-python may rejoin by itself before c's
    # process is up, and that rebalance then completed without c (seen in CI: c's first
    # generation was the one after).
    c.wait(
        lambda: any(e["data"].get("member_id") for e in c.of("JoinGroupSent")), 30,
        "c's JoinGroup with its member id",
    )  # fmt: skip
    leader.poll_until(leader.join_in_flight, 30, "the leader's JoinGroup in flight")
    before = leader.generation
    a.proc.send_signal(signal.SIGCONT)
    wait_for(leader.join_finished_unseen, 30, "the join to finish outside poll")
    joined = int(c.wait_event("JoinCompleted", timeout=30)["data"]["generation"])
    assert joined == before + 1
    return a, c, joined


@pytest.mark.parametrize("kind", KINDS)
def test_a_join_that_finished_outside_poll_is_used_not_sent_again(
    kind: str, bootstrap: str, topic: str, others: Callable[..., MemberProc]
) -> None:
    group = f"departure-c-{uuid.uuid4().hex[:8]}"
    leader = InProcessMember(kind, bootstrap, group, topic)
    try:
        a, c, joined = finish_a_join_outside_poll(leader, group, topic, others)
        joins_sent = leader.requests.count("JoinGroup")  # the finished join's included
        leader.poll_for(3.0)
        # The window in which a thrown-away join would show as one more JoinGroup: the
        # requests are counted after it (an absence cannot be waited for as an event).
        time.sleep(2.0)
        extra_joins = leader.requests.count("JoinGroup") - joins_sent
        if kind == "kgctl":
            # Java reuses its finished joinFuture: no JoinGroup, no new generation.
            assert extra_joins == 0, leader.requests
            assert leader.generation == joined
            assert completed_generations(c) == [joined]
            assert completed_generations(a)[-1] == joined
            assert len(leader.consumer.assignment()) > 0
        else:
            # kafka-python throws the finished join away and joins again; as the leader
            # its JoinGroup makes the whole group rebalance once more.
            assert extra_joins >= 1, leader.requests
            wait_for(lambda: max(completed_generations(c)) > joined, 15, "another rebalance")
    finally:
        leader.close()


@pytest.mark.parametrize("kind", KINDS)
def test_close_during_a_join_sends_no_sync_group_after_leaving(
    kind: str, bootstrap: str, topic: str, others: Callable[..., MemberProc]
) -> None:
    group = f"departure-e-{uuid.uuid4().hex[:8]}"
    a = others(group, topic, "a")
    a.wait_event("JoinCompleted", timeout=30)
    a.proc.send_signal(signal.SIGSTOP)
    member = InProcessMember(kind, bootstrap, group, topic)
    closing: threading.Thread | None = None
    try:
        member.poll_until(member.join_in_flight, 30, "JoinGroup in flight")
        # Close while the broker holds the JoinGroup (it waits for the frozen member).
        # The broker reads one request per connection at a time, so the LeaveGroup is
        # only read after it answers the JoinGroup, which it does once a rejoins.
        closing = threading.Thread(target=member.close, daemon=True)
        closing.start()
        wait_for(lambda: "LeaveGroup" in member.requests, 10, "LeaveGroup sent")
        a.proc.send_signal(signal.SIGCONT)
        closing.join(timeout=30)
        assert not closing.is_alive(), "close() did not return"
        after_leave = [
            r
            for r in member.requests[member.requests.index("LeaveGroup") + 1 :]
            if r != "Heartbeat"
        ]
        if kind == "kgctl":
            # Java's close cancels the join: nothing after the LeaveGroup.
            assert after_leave == [], member.requests
            abandoned = [d for t, d in member.events if t == "JoinFailed"]
            assert abandoned and abandoned[-1]["retry"] == "abandoned"
        else:
            # kafka-python goes on with the join it had started: SyncGroup after leaving.
            assert "SyncGroup" in after_leave, member.requests
        # Either way the group ends with a alone, owning everything.
        wait_for(
            lambda: (
                a.last_completed() and len(a.last_completed()["data"]["assignment"][topic]) == 4
            ),
            30,
            "a alone with every partition",
        )
    finally:
        if closing is None:
            member.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_join_finished_outside_poll_heartbeats_and_is_not_completed_once_stale(
    kind: str, bootstrap: str, topic: str, others: Callable[..., MemberProc]
) -> None:
    group = f"departure-d-{uuid.uuid4().hex[:8]}"
    leader = InProcessMember(kind, bootstrap, group, topic, max_poll_interval_ms=8_000)
    try:
        _, _, stale = finish_a_join_outside_poll(leader, group, topic, others)
        finished = len(leader.requests)
        # The application stays away from poll() for longer than max.poll.interval.ms.
        time.sleep(12.0)
        meanwhile = leader.requests[finished:]
        if kind == "kafka-python":
            # kafka-python sends nothing until the next poll: no heartbeat, and no
            # poll-timeout check, after a join that finished outside poll.
            assert meanwhile == [], meanwhile
            return
        # Java: heartbeats from the SyncGroup answer on, then the poll timeout is noticed
        # and the member leaves, which resets its generation.
        assert "Heartbeat" in meanwhile and "LeaveGroup" in meanwhile, meanwhile
        exceeded = [t for t, _ in leader.events if t == "PollIntervalExceeded"]
        assert exceeded
        # Back in poll(): the finished join is stale; it is not completed (no assignment
        # for a generation the member left), and the member joins again.
        leader.poll_until(
            lambda: any(t == "JoinCompleted" and d["generation"] > stale for t, d in leader.events),
            30,
            "a fresh join",
        )
        reset = [d for t, d in leader.events if t == "JoinFailed"]
        assert any(d["error"] == "GENERATION_RESET" for d in reset), reset
        assert all(d["generation"] != stale for t, d in leader.events if t == "JoinCompleted")
    finally:
        leader.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_heartbeat_loop_that_died_fails_the_next_poll_as_in_java(
    kind: str, bootstrap: str, topic: str
) -> None:
    """The design notes (item 8) say kafka-python never restarts a heartbeat coroutine
    that died while STABLE. 3.0.12 does what Java's pollHeartbeat does: the next poll
    raises the failure and the next join starts a new loop. kgctl's member keeps that
    (its runner reports MemberFailed and exits 1); this pins both."""
    group = f"departure-8-{uuid.uuid4().hex[:8]}"
    member = InProcessMember(kind, bootstrap, group, topic)
    try:
        member.poll_until(lambda: len(member.consumer.assignment()) == 4, 30, "the first join")
        coordinator = member.coordinator

        def crash(*args: Any) -> Any:
            # Once: a bug in a response handler kills the heartbeat coroutine.
            del coordinator._handle_heartbeat_response
            raise RuntimeError("injected heartbeat handler failure")

        coordinator._handle_heartbeat_response = crash
        wait_for(lambda: coordinator._heartbeat_loop_future.failed(), 10, "the loop to die")
        with pytest.raises(RuntimeError, match="injected heartbeat handler failure"):
            member.poll_for(2.0)
        # Raised once: the poll after it goes on, and a rejoin would start a new loop.
        member.consumer.poll(timeout_ms=100)
        assert coordinator._heartbeat_loop_future is None
    finally:
        member.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_cooperative_member_that_lost_its_partitions_claims_none(
    kind: str, bootstrap: str, topic: str
) -> None:
    group = f"departure-m-{uuid.uuid4().hex[:8]}"
    member = InProcessMember(
        kind, bootstrap, group, topic, max_poll_interval_ms=6_000, cooperative=True
    )
    try:
        member.poll_until(lambda: len(member.consumer.assignment()) == 4, 30, "the first join")
        assert all(claim == {} for claim in member.claimed)  # nothing owned before
        first = len(member.claimed)
        # Away from poll() past max.poll.interval.ms: the member leaves the group, and
        # its partitions are lost (Java's onLeavePrepare); then it polls and joins again.
        wait_for(lambda: "LeaveGroup" in member.requests, 20, "the poll-timeout LeaveGroup")
        member.poll_until(lambda: len(member.claimed) > first, 30, "the JoinGroup after leaving")
        if kind == "kgctl":
            # Java: ownedPartitions is what the member owns now, nothing.
            assert member.claimed[first] == {}, member.claimed
            # JoinGroupSent says what each JoinGroup claimed.
            sent = [d["owned"] for t, d in member.events if t == "JoinGroupSent"]
            assert sent == member.claimed
        else:
            # kafka-python's assignor claims the assignment it remembers.
            assert member.claimed[first] == {topic: [0, 1, 2, 3]}, member.claimed
    finally:
        member.close()


def test_a_member_that_fails_unexpectedly_says_so_and_leaves(bootstrap: str, topic: str) -> None:
    """`kgctl join`'s runner, in-process: a failure nobody expected (here the heartbeat
    loop's, raised by the next poll) ends the member with MemberFailed and a LeaveGroup."""
    from kgctl.member.runner import Member, MemberConfig
    from kgctl.model.events import Event

    events: list[Event] = []
    config = MemberConfig(
        group=f"departure-fail-{uuid.uuid4().hex[:8]}",
        topics=[topic],
        heartbeat_interval_ms=500,
        name="doomed",
        read_stdin=False,
    )
    member = Member(config, ClientSettings(bootstrap=bootstrap, timeout_s=10), [events.append])
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            member.run()
        except BaseException as exc:  # what the CLI would turn into one line and exit 1
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    wait_for(lambda: any(e.type == "JoinCompleted" for e in events), 30, "the first join")
    coordinator = member._coordinator

    def crash(*args: Any) -> Any:
        del coordinator._handle_heartbeat_response
        raise RuntimeError("injected heartbeat handler failure")

    coordinator._handle_heartbeat_response = crash
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert [type(exc) for exc in outcome] == [RuntimeError]
    failed = [e for e in events if e.type == "MemberFailed"]
    assert [(e.data["error"], e.data["exit_status"]) for e in failed] == [("RuntimeError", 1)]
    types = [e.type for e in events]
    assert types.index("LeaveGroupSent") > types.index("MemberFailed")
    assert types[-1] == "MemberStopped"


@pytest.mark.parametrize("kind", KINDS)
def test_a_leader_refreshes_metadata_only_when_due_not_at_every_assignment(
    kind: str, bootstrap: str, topic: str, others: Callable[..., MemberProc]
) -> None:
    """Departure (q): kafka-python's leader asks for metadata at every assignment, which
    restarts its metadata.max.age.ms period at the moment the followers' heartbeat
    periods restart; Java refreshes only what is due. A second member joins a leader
    whose metadata is fresh (max age 60 s): kgctl's leader sends no Metadata request."""
    group = f"departure-q-{uuid.uuid4().hex[:8]}"
    leader = InProcessMember(kind, bootstrap, group, topic, metadata_max_age_ms=60_000)
    try:
        leader.poll_until(lambda: len(leader.consumer.assignment()) == 4, 30, "the first join")
        leader.poll_for(0.5)  # the first join's own refreshes are answered
        before, generation = leader.metadata_requests, leader.generation
        a = others(group, topic, "a")
        leader.poll_until(lambda: leader.generation > generation, 30, "the second generation")
        leader.poll_until(lambda: len(leader.consumer.assignment()) == 2, 30, "the split")
        refreshed = leader.metadata_requests - before
        if kind == "kgctl":
            assert refreshed == 0
        else:
            assert refreshed >= 1  # the forced refresh the correction removes
        assert a.wait_event("JoinCompleted", timeout=30)
    finally:
        leader.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_subscription_s_metadata_is_asked_for_at_once(
    kind: str, bootstrap: str, topic: str
) -> None:
    """Departure (x): Java's subscribe asks for the new topics' metadata at once
    (requestUpdateForNewTopics lifts the refresh backoff); kafka-python waits
    retry.backoff.ms after its previous refresh. A member that has just refreshed (its
    topic check, as kgctl join does) subscribes and joins alone: kgctl's Metadata for the
    topic goes out before its JoinGroup, so the leader assigns with metadata it already
    has; kafka-python's goes out after the JoinGroup answer (the backoff is 5 s here, so
    the order cannot depend on the machine's speed)."""
    config: dict[str, Any] = {
        "group_id": f"departure-x-{uuid.uuid4().hex[:8]}",
        "client_id": f"departure-x-{kind}",
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 500,
        "enable_auto_commit": False,
        "retry_backoff_ms": 5000,
    }
    events: list[tuple[str, dict[str, Any]]] = []
    if kind == "kgctl":
        from kgctl.adapters.consumer import build_consumer

        consumer, _ = build_consumer(
            ClientSettings(bootstrap=bootstrap), lambda t, **d: events.append((t, d)), **config
        )
    else:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, **config)
    sent: list[tuple[str, Any]] = []
    manager = consumer._coordinator._manager
    send = manager.send

    def recording_send(request: Any, *args: Any, **kwargs: Any) -> Any:
        name = type(request).__name__.split("_")[0].removesuffix("Request")
        topics = getattr(request, "topics", None) if name == "Metadata" else None
        sent.append((name, [t.name for t in topics] if topics else None))
        return send(request, *args, **kwargs)

    manager.send = recording_send
    try:
        assert topic in consumer.topics()  # a refresh just done: the backoff runs
        if kind == "kgctl":
            from kgctl.adapters.consumer import subscribe

            subscribe(consumer, lambda t, **d: events.append((t, d)), [topic], None)
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 4:
            assert time.monotonic() < deadline, "the member never got its 4 partitions"
            consumer.poll(timeout_ms=50)
        names = [n for n, _ in sent]
        joined = names.index("JoinGroup")
        asked_first = any(n == "Metadata" and ts == [topic] for n, ts in sent[:joined])
        # kafka-python: the topic's own Metadata waits out the backoff, after the join
        # (the leader assigned from the topic check's answer and asked for an update).
        assert asked_first is (kind == "kgctl"), sent
    finally:
        consumer.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_member_waiting_for_fetches_wakes_when_told_to_rejoin(
    kind: str, bootstrap: str, topic: str, others: Callable[..., MemberProc]
) -> None:
    """Departure (y): Java's poll returns from the network on every answer and checks
    rejoinNeededOrPending at once; kafka-python's poll thread went on waiting for a fetch
    answer (or its timeout) after a heartbeat answered REBALANCE_IN_PROGRESS. A follower's
    poll thread waits for a long fetch (8 s long poll, nothing to read) when a third
    member joins: kgctl's wait ends with the heartbeat's answer (interval 500 ms);
    plain kafka-python's is still waiting 4 s later."""
    group = f"departure-y-{uuid.uuid4().hex[:8]}"
    leader = others(group, topic, "lead")
    assert leader.wait_event("JoinCompleted", timeout=30)
    member = InProcessMember(kind, bootstrap, group, topic)
    member.consumer.config["fetch_max_wait_ms"] = 8000
    member.consumer._fetcher.config["fetch_max_wait_ms"] = 8000
    try:
        member.poll_until(
            lambda: (
                len(member.consumer.assignment()) == 2
                and member.consumer._fetcher.in_flight_fetches()
                and member.coordinator.state is MemberState.STABLE
            ),
            30,
            "a follower of 2 partitions, fetching",
        )
        waiting = threading.Thread(
            target=member.consumer._fetcher.fetch_records,
            kwargs={"timeout_ms": 30_000},
            daemon=True,
        )
        waiting.start()
        others(group, topic, "c")
        waiting.join(4.0)
        if kind == "kgctl":
            assert not waiting.is_alive(), "the poll thread slept through the rebalance"
        else:
            assert waiting.is_alive()  # the departure: it waits for the fetch answer
            waiting.join(30)
        assert member.coordinator.need_rejoin()
    finally:
        member.close()
