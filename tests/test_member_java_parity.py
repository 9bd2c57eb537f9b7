"""The member against Java's classic consumer where rebalances go wrong, driven in-process.

Each test builds a real kgctl member (kafka-python's KafkaConsumer with kgctl's
TracedCoordinator) whose group requests are answered by the test instead of a broker, so
an exact error can be put on an exact request. What the member sends and emits is what
Java's AbstractCoordinator / ConsumerCoordinator 4.4 do on the same answers (the audit in
docs/member.md, rows 1-10). The real-broker versions of these situations, compared with
Java's VerifiableConsumer through `kgctl proxy`, are in tests/conformance/.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as Errors
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
    from kafka.structs import MemberState, OffsetAndMetadata, TopicPartition

from kgctl.adapters.consumer import CooperativeStickyOrEager, build_consumer, subscribe

# Error codes of the Kafka protocol.
NONE = 0
REQUEST_TIMED_OUT = 7
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82

Answer = Any  # a response, an exception to raise, or a callable(request) giving either


def join_ok(
    generation: int, member_id: str = "m-1", leader: str = "leader-0", protocol: str = "range"
) -> Any:
    return SimpleNamespace(
        error_code=NONE, generation_id=generation, member_id=member_id, leader=leader,
        protocol_name=protocol, protocol_type=None, members=[], skip_assignment=False,
    )  # fmt: skip


def join_error(code: int, member_id: str = "") -> Any:
    return SimpleNamespace(
        error_code=code, generation_id=-1, member_id=member_id, leader="",
        protocol_name=None, protocol_type=None, members=[], skip_assignment=False,
    )  # fmt: skip


def sync_ok(partitions: list[int], topic: str = "t1") -> Any:
    assignment = ConsumerProtocolAssignment(
        version=0, assigned_partitions=[(topic, partitions)] if partitions else [], user_data=b""
    )
    return SimpleNamespace(
        error_code=NONE, assignment=assignment.encode(), protocol_type=None, protocol_name=None
    )


def sync_error(code: int) -> Any:
    return SimpleNamespace(error_code=code, assignment=b"", protocol_type=None, protocol_name=None)


def heartbeat(code: int = NONE) -> Any:
    return SimpleNamespace(error_code=code, throttle_time_ms=0)


def commit_answer(request: Any, code: int) -> Any:
    return SimpleNamespace(
        topics=[(t.name, [(p.partition_index, code) for p in t.partitions]) for t in request.topics]
    )


class Member:
    """A kgctl member whose coordinator is the test: every group request it sends is
    recorded (time, API, request) and answered from `script[API]` in order; a request
    with nothing scripted for it fails the test, except Heartbeat and LeaveGroup, which
    succeed unless scripted."""

    def __init__(self, *, cooperative: bool = False, **config: Any) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.sent: list[tuple[float, str, Any]] = []
        self.answered: list[tuple[float, str]] = []
        self.script: dict[str, list[Answer]] = {}
        settings = {
            "group_id": "g",
            "enable_auto_commit": False,
            "session_timeout_ms": 10_000,
            "heartbeat_interval_ms": 1_000,
            "retry_backoff_ms": 100,
            **config,
        }
        self.protocol = "range"
        if cooperative:
            settings["partition_assignment_strategy"] = [CooperativeStickyOrEager]
            self.protocol = "cooperative-sticky"
        self.consumer, self.coord = build_consumer(
            {"bootstrap_servers": ["127.0.0.1:1"], "api_version": (3, 7)}, self._emit, **settings
        )
        subscribe(self.consumer, self._emit, ["t1"], None)
        # A known coordinator (node 0) that this test plays.
        self.coord.coordinator = lambda: 0  # type: ignore[method-assign]
        self.coord.coordinator_id = 0
        manager = self.coord._manager
        # kafka-python's send gives a Future: answer on the member's I/O loop.
        manager.send = lambda request, *a, **k: manager.call_soon(self._answer, request)

    def _emit(self, type_: str, **data: Any) -> None:
        self.events.append((type_, data))

    async def _answer(self, request: Any) -> Any:
        api = type(request).__name__.removesuffix("Request")
        self.sent.append((time.monotonic(), api, request))
        queue = self.script.get(api)
        if queue:
            answer = queue.pop(0)
        elif api == "Heartbeat":
            answer = heartbeat()
        elif api == "LeaveGroup":
            answer = SimpleNamespace(error_code=NONE, members=[])
        else:
            raise AssertionError(f"unscripted {api}")
        if callable(answer) and not isinstance(answer, type):
            answer = answer(request)
        if hasattr(answer, "__await__"):
            answer = await answer
        self.answered.append((time.monotonic(), api))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    # -- driving -------------------------------------------------------------------------
    def poll_until(
        self, pred: Callable[[], Any], timeout: float = 5.0, poll_ms: int = 100
    ) -> list[Any]:
        """Poll the coordinator as KafkaConsumer.poll does until `pred`; returns what each
        poll returned, with the member's state then."""
        seen: list[Any] = []
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline, f"timed out; sent {self.apis()}"
            seen.append((self.coord.poll(timeout_ms=poll_ms), self.coord.state))
        return seen

    def join(self, generation: int = 5, partitions: tuple[int, ...] = (0, 1)) -> None:
        """Join generation `generation` owning t1-`partitions` (as a follower)."""
        self.script["JoinGroup"] = [self.join_ok(generation)]
        self.script["SyncGroup"] = [sync_ok(list(partitions))]
        self.poll_until(lambda: self.joined(generation))
        self.events.clear()
        self.sent.clear()
        self.answered.clear()

    def join_ok(self, generation: int, member_id: str = "m-1") -> Any:
        return join_ok(generation, member_id, protocol=self.protocol)

    def joined(self, generation: int) -> bool:
        return bool(
            self.coord.state is MemberState.STABLE
            and self.coord._generation.generation_id == generation
            and self.coord._join_task is None
            and any(t == "JoinCompleted" and d["generation"] == generation for t, d in self.events)
        )

    def sent_at(self, api: str) -> list[float]:
        return [t for t, a, _ in self.sent if a == api]

    def apis(self, *only: str) -> list[str]:
        return [api for _, api, _ in self.sent if not only or api in only]

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [d for t, d in self.events if t == type_]

    def listener_calls(self) -> list[tuple[str, dict[str, list[int]]]]:
        return [(t, d["partitions"]) for t, d in self.events if t.startswith("Partitions")]

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        try:
            self.consumer.close(autocommit=False, timeout_ms=500)
        except Exception:  # noqa: BLE001 - the test has asserted what it needed
            pass


@pytest.fixture
def member() -> Iterator[Callable[..., Member]]:
    made: list[Member] = []

    def make(**config: Any) -> Member:
        m = Member(**config)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


def gap_to_retry(m: Member) -> float:
    """Seconds from the first JoinGroup's answer to the second JoinGroup."""
    answered = next(t for t, api in m.answered if api == "JoinGroup")
    second = m.sent_at("JoinGroup")[1]
    return second - answered


# -- audit rows 1-2: a failed join is retried (a lasting rejoin flag) ----------------------

BACKOFF_MS = 400
JOIN_FAILURES = [
    pytest.param(REBALANCE_IN_PROGRESS, "immediate", id="REBALANCE_IN_PROGRESS"),
    pytest.param(UNKNOWN_MEMBER_ID, "immediate", id="UNKNOWN_MEMBER_ID"),
    pytest.param(NOT_COORDINATOR, "backoff", id="NOT_COORDINATOR"),
    pytest.param(COORDINATOR_NOT_AVAILABLE, "backoff", id="COORDINATOR_NOT_AVAILABLE"),
    pytest.param(COORDINATOR_LOAD_IN_PROGRESS, "backoff", id="COORDINATOR_LOAD_IN_PROGRESS"),
    pytest.param("disconnect", "backoff", id="disconnect"),
]


def failed_join(error: int | str) -> Answer:
    if error == "disconnect":
        return Errors.KafkaConnectionError("connection to the coordinator lost")
    return join_error(error)


@pytest.mark.parametrize("error, retry", JOIN_FAILURES)
@pytest.mark.parametrize("trigger", ["subscription", "explicit"])
def test_a_failed_join_is_sent_again_with_javas_backoff_until_joined(
    member: Callable[..., Member], error: int | str, retry: str, trigger: str
) -> None:
    m = member(retry_backoff_ms=BACKOFF_MS)
    m.join(generation=5, partitions=(0, 1))
    m.script["JoinGroup"] = [failed_join(error), m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0])]
    if trigger == "subscription":
        subscribe(m.consumer, m._emit, ["t1", "t2"], None)
    else:
        m.coord.request_rejoin("explicit_request")
    # Polls longer than the backoff: Java sleeps min(retry.backoff.ms, what is left of
    # the poll), as kgctl does.
    polls = m.poll_until(lambda: m.joined(6), poll_ms=2 * BACKOFF_MS)
    assert m.apis("JoinGroup", "SyncGroup") == ["JoinGroup", "JoinGroup", "SyncGroup"]
    # Java's joinGroupIfNeeded: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and
    # REBALANCE_IN_PROGRESS at once, any other retriable failure after retry.backoff.ms.
    gap = gap_to_retry(m)
    if retry == "backoff":
        assert gap >= BACKOFF_MS / 1000, gap
    else:
        assert gap < BACKOFF_MS / 1000, gap
    assert [d["retry"] for d in m.of("JoinFailed")] == [retry]
    # Never "joined" while still rebalancing.
    assert all(state is MemberState.STABLE for ok, state in polls if ok), polls
    assert m.assignment() == [0]


@pytest.mark.parametrize(
    "api, code, error",
    [
        ("JoinGroup", ILLEGAL_GENERATION, Errors.IllegalGenerationError),
        ("SyncGroup", MEMBER_ID_REQUIRED, Errors.MemberIdRequiredError),
        ("SyncGroup", COORDINATOR_LOAD_IN_PROGRESS, Errors.CoordinatorLoadInProgressError),
    ],
)
def test_an_answer_java_does_not_expect_fails_the_poll_without_a_retry(
    member: Callable[..., Member], api: str, code: int, error: type
) -> None:
    m = member()
    m.join()
    if api == "JoinGroup":
        m.script["JoinGroup"] = [join_error(code)]
    else:
        m.script["JoinGroup"] = [m.join_ok(6)]
        m.script["SyncGroup"] = [sync_error(code)]
    m.coord.request_rejoin("explicit_request")
    # Java's handlers raise KafkaException("Unexpected error ...") for these: not
    # retried, thrown from poll.
    with pytest.raises(error):
        m.poll_until(lambda: False)
    assert m.apis("JoinGroup") == ["JoinGroup"]
    assert [(d["error"], d["retry"]) for d in m.of("JoinFailed")] == [
        (Errors.for_code(code).message, "fatal")
    ]


def test_a_join_that_fails_fatally_fails_the_poll(member: Callable[..., Member]) -> None:
    m = member()
    m.join()
    m.script["JoinGroup"] = [join_error(INVALID_SESSION_TIMEOUT)]
    m.coord.request_rejoin("explicit_request")
    with pytest.raises(Errors.InvalidSessionTimeoutError):
        m.poll_until(lambda: False)
    assert m.apis("JoinGroup") == ["JoinGroup"]
    assert [d["retry"] for d in m.of("JoinFailed")] == ["fatal"]


# -- audit row 7: heartbeats from the JoinGroup answer on ----------------------------------


def later(m: Member, seconds: float, answer: Any) -> Answer:
    """An answer the coordinator holds back for `seconds` (the member's I/O loop runs)."""

    async def hold(request: Any) -> Any:
        await m.coord._net.sleep(seconds)
        return answer

    return lambda request: hold(request)


def test_heartbeats_start_at_the_joingroup_answer_and_rebalancing_answers_are_expected(
    member: Callable[..., Member],
) -> None:
    m = member(heartbeat_interval_ms=300)
    m.join(generation=5)
    m.script["JoinGroup"] = [m.join_ok(6)]
    # A slow leader: the SyncGroup answer comes 2 s after the JoinGroup answer, and the
    # coordinator answers the heartbeats in between REBALANCE_IN_PROGRESS.
    m.script["SyncGroup"] = [later(m, 2.0, sync_ok([0]))]
    m.script["Heartbeat"] = [heartbeat(REBALANCE_IN_PROGRESS)] * 3
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    between = [r for _, api, r in m.sent if api == "Heartbeat"]
    sync_sent = next(t for t, api, _ in m.sent if api == "SyncGroup")
    sync_answered = next(t for t, api in m.answered if api == "SyncGroup")
    heartbeats = [t for t, api, _ in m.sent if api == "Heartbeat" and t < sync_answered]
    # Java's JoinGroupResponseHandler enables the heartbeat thread in COMPLETING_REBALANCE.
    assert len(heartbeats) >= 3, m.apis()
    assert all(t >= sync_sent - 0.1 for t in heartbeats)
    assert {(r.generation_id, r.member_id) for r in between[:3]} == {(6, "m-1")}
    # REBALANCE_IN_PROGRESS on those heartbeats is expected, not a new rebalance.
    m.poll_until(lambda: len(m.apis("Heartbeat")) >= 5)
    assert m.apis("JoinGroup") == ["JoinGroup"]
    assert not m.coord.need_rejoin()


def test_a_generation_reset_before_the_syncgroup_answer_fails_the_join_and_retries(
    member: Callable[..., Member],
) -> None:
    m = member(heartbeat_interval_ms=200)
    m.join(generation=5)
    m.script["JoinGroup"] = [m.join_ok(6), m.join_ok(7)]
    m.script["SyncGroup"] = [later(m, 1.0, sync_ok([0])), sync_ok([1])]
    m.script["Heartbeat"] = [heartbeat(ILLEGAL_GENERATION)]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(7))
    # Java's SyncGroupResponseHandler: the heartbeat reset the generation, so the
    # SyncGroup answer fails the join (ILLEGAL_GENERATION) and the member joins again.
    assert m.apis("JoinGroup", "SyncGroup", "Heartbeat")[:4] == [
        "JoinGroup", "Heartbeat", "SyncGroup", "JoinGroup",
    ] or m.apis("JoinGroup", "SyncGroup", "Heartbeat")[:4] == [
        "JoinGroup", "SyncGroup", "Heartbeat", "JoinGroup",
    ]  # fmt: skip
    assert [d["error"] for d in m.of("JoinFailed")] == ["ILLEGAL_GENERATION"]
    assert m.assignment() == [1]
    assert [d["generation"] for d in m.of("JoinCompleted")] == [7]


# -- audit row 5: eager onJoinPrepare empties the assignment; close mid-rebalance ----------


def hold_join(m: Member) -> None:
    """Rejoin; the coordinator holds the JoinGroup (for 30 s) and the test polls until it
    was sent."""
    m.script["JoinGroup"] = [later(m, 30.0, m.join_ok(6))]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.apis("JoinGroup"))


def test_an_eager_member_gives_its_partitions_up_before_joingroup_and_close_calls_no_listener(
    member: Callable[..., Member],
) -> None:
    m = member()
    m.join(generation=5, partitions=(0, 1))
    hold_join(m)
    assert m.listener_calls() == [("PartitionsRevoked", {"t1": [0, 1]})]
    assert m.assignment() == []  # Java: assignFromSubscribed(empty) in onJoinPrepare
    m.close()
    # Java's onLeavePrepare finds nothing owned: no second revocation.
    assert m.listener_calls() == [("PartitionsRevoked", {"t1": [0, 1]})]


def test_a_cooperative_member_closed_mid_rebalance_reports_its_partitions_lost(
    member: Callable[..., Member],
) -> None:
    m = member(cooperative=True)
    m.join(generation=5, partitions=(0, 1))
    hold_join(m)
    assert m.listener_calls() == []  # cooperative: nothing revoked before JoinGroup
    assert m.assignment() == [0, 1]
    m.close()
    # Java's onLeavePrepare: rebalanceInProgress() -> onPartitionsLost.
    assert m.listener_calls() == [("PartitionsLost", {"t1": [0, 1]})]


def test_joincompleted_compares_with_what_was_owned_before_the_rebalance(
    member: Callable[..., Member],
) -> None:
    m = member()
    m.join(generation=5, partitions=(0, 1))
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([1, 2])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    done = m.of("JoinCompleted")[-1]
    assert (done["added"], done["removed"]) == ({"t1": [2]}, {"t1": [0]})


# -- audit row 3: a generation reset in the middle of a join prepares the join again ------


@pytest.mark.parametrize(
    "where, code",
    [
        ("JoinGroup", UNKNOWN_MEMBER_ID),
        ("SyncGroup", UNKNOWN_MEMBER_ID),
        ("SyncGroup", ILLEGAL_GENERATION),
    ],
)
def test_a_cooperative_member_reset_mid_join_reports_its_partitions_lost_and_claims_none(
    member: Callable[..., Member], where: str, code: int
) -> None:
    m = member(cooperative=True)
    m.join(generation=5, partitions=(0, 1))
    if where == "JoinGroup":
        m.script["JoinGroup"] = [join_error(code), m.join_ok(6, "m-2")]
        m.script["SyncGroup"] = [sync_ok([2])]
    else:
        m.script["JoinGroup"] = [m.join_ok(6), m.join_ok(7, "m-2")]
        m.script["SyncGroup"] = [sync_error(code), sync_ok([2])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(7 if where == "SyncGroup" else 6))
    joins = [r for _, api, r in m.sent if api == "JoinGroup"]
    claims = [{tp.topic: sorted(tp.partitions) for tp in r.protocols[0][1].owned_partitions}
              for r in joins]  # fmt: skip
    # Java: resetStateAndRejoin -> needsJoinPrepare -> onJoinPrepare without a
    # generation -> onPartitionsLost(owned); the next JoinGroup claims nothing.
    assert claims == [{"t1": [0, 1]}, {}]
    assert m.listener_calls() == [
        ("PartitionsLost", {"t1": [0, 1]}),
        ("PartitionsAssigned", {"t1": [2]}),
    ]
    assert [d["lost"] for d in m.of("JoinPrepared")] == [False, True]
    expected_member = "" if code == UNKNOWN_MEMBER_ID else "m-1"
    assert joins[1].member_id == expected_member


def test_an_eager_member_reset_mid_join_calls_no_listener_twice(
    member: Callable[..., Member],
) -> None:
    m = member()
    m.join(generation=5, partitions=(0, 1))
    m.script["JoinGroup"] = [join_error(UNKNOWN_MEMBER_ID), m.join_ok(6, "m-2")]
    m.script["SyncGroup"] = [sync_ok([2])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    # The first prepare revoked and gave everything up; the second has nothing to lose.
    assert m.listener_calls() == [
        ("PartitionsRevoked", {"t1": [0, 1]}),
        ("PartitionsAssigned", {"t1": [2]}),
    ]
    assert len(m.of("JoinPrepared")) == 2


def test_member_id_required_is_no_reset_and_prepares_nothing_again(
    member: Callable[..., Member],
) -> None:
    m = member(cooperative=True)
    m.script["JoinGroup"] = [join_error(MEMBER_ID_REQUIRED, "m-9"), m.join_ok(1, "m-9")]
    m.script["SyncGroup"] = [sync_ok([0])]
    m.poll_until(lambda: m.joined(1))
    assert [r.member_id for _, api, r in m.sent if api == "JoinGroup"] == ["", "m-9"]
    assert len(m.of("JoinPrepared")) == 1


# -- audit row 4: FENCED_INSTANCE_ID on a heartbeat resets the generation ------------------


def test_a_static_member_fenced_on_a_heartbeat_fails_the_poll_and_reports_its_partitions_lost(
    member: Callable[..., Member],
) -> None:
    m = member(group_instance_id="i-1", heartbeat_interval_ms=200)
    m.join(generation=5, partitions=(0, 1))
    m.script["Heartbeat"] = [heartbeat(FENCED_INSTANCE_ID)]
    # Were a JoinGroup sent, the coordinator would answer it as a broker does.
    m.script["JoinGroup"] = [join_error(FENCED_INSTANCE_ID)]
    joins = len(m.apis("JoinGroup"))
    with pytest.raises(Errors.FencedInstanceIdError):
        m.poll_until(lambda: False)
    # Java's next step throws the heartbeat thread's failure: no JoinGroup after the
    # fencing, also from a poll that was past its first check when it was answered
    # (the conformance suite saw kgctl rejoin there, now and then).
    assert len(m.apis("JoinGroup")) == joins
    # Java: resetStateOnResponseError(HEARTBEAT, FENCED_INSTANCE_ID, true).
    assert (m.coord._generation.generation_id, m.coord._generation.member_id) == (-1, "")
    resets = m.of("GenerationReset")
    assert [(d["previous_generation"], d["cause"]) for d in resets] == [
        (5, "heartbeat:FENCED_INSTANCE_ID")
    ]
    m.coord._kg_closing = True  # as the runner closes a fenced member (no LeaveGroup)
    m.close()
    assert m.listener_calls() == [("PartitionsLost", {"t1": [0, 1]})]
    assert "LeaveGroup" not in m.apis()


# -- audit row 9: a commit answered REBALANCE_IN_PROGRESS ----------------------------------


def test_a_commit_refused_with_rebalance_in_progress_asks_to_rejoin_and_says_so(
    member: Callable[..., Member],
) -> None:
    m = member()
    m.join(generation=5, partitions=(0, 1))
    m.script["OffsetCommit"] = [lambda request: commit_answer(request, REBALANCE_IN_PROGRESS)]
    offsets = {TopicPartition("t1", 0): OffsetAndMetadata(42, "", -1)}
    # Java: RebalanceInProgressException (finish the rebalance with poll(), commit
    # again), not CommitFailedException (the member was dropped).
    with pytest.raises(Errors.RebalanceInProgressError):
        m.consumer.commit(offsets=offsets)
    assert m.apis("OffsetCommit") == ["OffsetCommit"]  # not retried
    assert [d["error"] for d in m.of("OffsetCommitFailed")] == ["REBALANCE_IN_PROGRESS"]
    # ... and requestRejoin: the next poll rejoins, the generation kept.
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    m.poll_until(lambda: m.joined(6))
    assert [d["reason"] for d in m.of("RejoinRequested")] == ["rebalance_in_progress"]
    assert [r.member_id for _, api, r in m.sent if api == "JoinGroup"] == ["m-1"]


# -- audit row 8: answers about an earlier generation are ignored --------------------------


def test_a_late_heartbeat_answer_about_the_previous_generation_is_ignored(
    member: Callable[..., Member],
) -> None:
    m = member(heartbeat_interval_ms=200)
    m.join(generation=5, partitions=(0, 1))
    m.script["Heartbeat"] = [later(m, 1.0, heartbeat(ILLEGAL_GENERATION))]
    m.poll_until(lambda: m.apis("Heartbeat"))  # sent with generation 5, answer held
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    m.poll_until(lambda: "Heartbeat" in [api for _, api in m.answered])
    m.poll_until(lambda: len(m.apis("Heartbeat")) >= 3)
    # Java's generationUnchanged(): the answer was about generation 5; generation 6 stands.
    assert m.of("GenerationReset") == []
    assert (m.coord._generation.generation_id, m.coord.state) == (6, MemberState.STABLE)
    assert m.apis("JoinGroup") == ["JoinGroup"]


def test_a_late_commit_answer_about_the_previous_generation_resets_nothing_mid_rebalance(
    member: Callable[..., Member],
) -> None:
    m = member()
    m.join(generation=5, partitions=(0, 1))
    # The commit carries generation 5; its answer comes after the member joined
    # generation 6 and sent the JoinGroup of the next rebalance.
    m.script["OffsetCommit"] = [
        lambda request: later(m, 1.0, commit_answer(request, ILLEGAL_GENERATION))(request)
    ]
    results: list[Any] = []
    m.consumer.commit_async(
        offsets={TopicPartition("t1", 0): OffsetAndMetadata(42, "", -1)},
        callback=lambda offsets, result: results.append(result),
    )
    m.poll_until(lambda: m.apis("OffsetCommit"))
    m.script["JoinGroup"] = [m.join_ok(6), later(m, 30.0, m.join_ok(7))]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: results)
    # Java: not generationUnchanged() and PREPARING_REBALANCE -> RebalanceInProgressException,
    # no reset: the join in flight goes on.
    assert isinstance(results[0], Errors.RebalanceInProgressError), results
    assert m.of("GenerationReset") == []
    assert m.coord._generation.generation_id == 6


# -- audit row 6: with auto-commit, onJoinPrepare waits for the pre-rebalance commit -------


def consumed(m: Member, offset: int = 42) -> None:
    """The member has consumed t1-0 up to `offset` (what auto-commit commits)."""
    m.consumer._subscription.assignment[TopicPartition("t1", 0)].seek(offset)


def first(m: Member, api: str, answered: bool = False) -> float:
    times = [t for t, a in m.answered if a == api] if answered else m.sent_at(api)
    return times[0]


def test_auto_commit_is_awaited_over_polls_before_revoking_and_joining(
    member: Callable[..., Member],
) -> None:
    m = member(enable_auto_commit=True, auto_commit_interval_ms=60_000)
    m.join(generation=5, partitions=(0, 1))
    consumed(m)
    m.script["OffsetCommit"] = [
        lambda request: later(m, 0.6, commit_answer(request, NONE))(request)
    ]
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    m.coord.request_rejoin("explicit_request")
    # Polls of 200 ms: the commit's answer comes during the third.
    polls = m.poll_until(lambda: m.joined(6), poll_ms=200)
    assert m.apis("OffsetCommit", "JoinGroup") == ["OffsetCommit", "JoinGroup"]
    assert first(m, "JoinGroup") >= first(m, "OffsetCommit", answered=True)
    assert polls[0] == (False, MemberState.STABLE)  # the first poll only waited
    types = [t for t, _ in m.events]
    assert types.index("OffsetsCommitted") < types.index("PartitionsRevoked")
    assert types.index("PartitionsRevoked") < types.index("JoinGroupSent")
    assert m.of("OffsetsCommitted")[0]["offsets"] == {"t1": {"0": 42}}


def test_a_pre_rebalance_commit_that_failed_retriably_is_sent_again_before_joining(
    member: Callable[..., Member],
) -> None:
    m = member(enable_auto_commit=True, auto_commit_interval_ms=60_000)
    m.join(generation=5, partitions=(0, 1))
    consumed(m)
    m.script["OffsetCommit"] = [
        lambda request: commit_answer(request, COORDINATOR_LOAD_IN_PROGRESS),
        lambda request: commit_answer(request, NONE),
    ]
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6), poll_ms=200)
    assert m.apis("OffsetCommit", "JoinGroup") == ["OffsetCommit", "OffsetCommit", "JoinGroup"]


def test_the_pre_rebalance_commit_is_awaited_no_longer_than_the_rebalance_timeout(
    member: Callable[..., Member],
) -> None:
    m = member(enable_auto_commit=True, auto_commit_interval_ms=60_000, max_poll_interval_ms=1000)
    m.join(generation=5, partitions=(0, 1))
    consumed(m)
    m.script["OffsetCommit"] = [
        lambda request: later(m, 5.0, commit_answer(request, NONE))(request)
    ]
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6), poll_ms=200)
    waited = first(m, "JoinGroup") - first(m, "OffsetCommit")
    # Java's joinPrepareTimer: max.poll.interval.ms (the rebalance timeout), then it joins.
    assert 1.0 <= waited < 4.0, waited
    assert "OffsetCommit" not in [api for _, api in m.answered]


def test_a_member_polling_through_a_long_rebalance_is_not_taken_for_one_that_stopped(
    member: Callable[..., Member],
) -> None:
    m = member(heartbeat_interval_ms=200, max_poll_interval_ms=1000)
    m.join(generation=5)
    m.script["JoinGroup"] = [m.join_ok(6)]
    m.script["SyncGroup"] = [later(m, 2.5, sync_ok([0]))]  # a slow leader
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    # Java's poll records the poll time before anything else (pollHeartbeat): the member
    # polled all along, so its heartbeat thread does not leave the group.
    assert "LeaveGroup" not in m.apis()
    assert m.of("PollIntervalExceeded") == []
    assert m.apis("JoinGroup", "SyncGroup") == ["JoinGroup", "SyncGroup"]


# -- audit row 10: the KIP-800 reasons on the wire are Java's ------------------------------


def wire_reasons(m: Member) -> list[str]:
    return [r.reason for _, api, r in m.sent if api == "JoinGroup"]


def wait_unpolled(pred: Callable[[], Any], timeout: float = 5.0) -> None:
    """Wait for `pred` without polling the member (its I/O thread runs on)."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def rejoin_once(m: Member, provoke: Callable[[], Any], generation: int = 6) -> None:
    m.script["JoinGroup"] = [m.join_ok(generation, m.coord._generation.member_id or "m-1")]
    m.script["SyncGroup"] = [sync_ok([0, 1])]
    provoke()
    m.poll_until(lambda: m.joined(generation))


def test_a_first_join_sends_no_reason_and_member_id_required_says_why(
    member: Callable[..., Member],
) -> None:
    m = member()
    m.script["JoinGroup"] = [join_error(MEMBER_ID_REQUIRED, "m-9"), m.join_ok(1, "m-9")]
    m.script["SyncGroup"] = [sync_ok([0])]
    m.poll_until(lambda: m.joined(1))
    assert wire_reasons(m) == ["", "need to re-join with the given member-id: m-9"]
    assert [d["reason"] for d in m.of("JoinGroupSent")] == ["first_join", "first_join"]


@pytest.mark.parametrize(
    "situation, wire, reason",
    [
        ("explicit", "rebalance enforced by user", "explicit_request"),
        ("subscription", "subscription has changed", "subscription_changed"),
        ("metadata", "cached metadata has changed", "metadata_changed"),
        ("heartbeat-rebalancing", "group is already rebalancing", "rebalance_in_progress"),
        (
            "heartbeat-unknown-member",
            "encountered UNKNOWN_MEMBER_ID from HEARTBEAT response",
            "generation_reset",
        ),
        (
            "commit-rebalancing",
            "offset commit failed since group is already rebalancing",
            "rebalance_in_progress",
        ),
        (
            "commit-illegal-generation",
            "encountered ILLEGAL_GENERATION from OFFSET_COMMIT response",
            "generation_reset",
        ),
        ("poll-timeout", "consumer pro-actively leaving the group", "poll_interval_exceeded"),
    ],
)
def test_a_rejoin_tells_the_broker_javas_reason_and_the_event_keeps_kgctls(
    member: Callable[..., Member], situation: str, wire: str, reason: str
) -> None:
    m = member(heartbeat_interval_ms=200, max_poll_interval_ms=1000)
    m.join(generation=5, partitions=(0, 1))

    def provoke() -> None:
        if situation == "explicit":
            m.coord.request_rejoin("explicit_request")
        elif situation == "subscription":
            subscribe(m.consumer, m._emit, ["t1", "t2"], None)
        elif situation == "metadata":
            # What a leader sees when a topic it assigned grew a partition.
            m.coord._assignment_snapshot = {"t1": {0, 1}}
            m.coord._metadata_snapshot = {"t1": {0, 1, 2}}
        elif situation.startswith("heartbeat"):
            code = REBALANCE_IN_PROGRESS if situation.endswith("rebalancing") else UNKNOWN_MEMBER_ID
            m.script["Heartbeat"] = [heartbeat(code)]
            wait_unpolled(lambda: m.of("HeartbeatFailed"))
        elif situation.startswith("commit"):
            code = (
                REBALANCE_IN_PROGRESS if situation.endswith("rebalancing") else ILLEGAL_GENERATION
            )
            m.script["OffsetCommit"] = [lambda request: commit_answer(request, code)]
            with pytest.raises(Errors.KafkaError):
                m.consumer.commit(offsets={TopicPartition("t1", 0): OffsetAndMetadata(1, "", -1)})
        elif situation == "poll-timeout":
            wait_unpolled(lambda: m.of("PollIntervalExceeded"))

    rejoin_once(m, provoke)
    assert wire_reasons(m) == [wire]
    assert [d["reason"] for d in m.of("JoinGroupSent")] == [reason]
    assert [d["wire_reason"] for d in m.of("JoinGroupSent")] == [wire]


@pytest.mark.parametrize(
    "failure, wire",
    [
        (join_error(REBALANCE_IN_PROGRESS), "rebalance failed due to RebalanceInProgressException"),
        (join_error(NOT_COORDINATOR), "rebalance failed due to NotCoordinatorException"),
        (
            join_error(COORDINATOR_LOAD_IN_PROGRESS),
            "rebalance failed due to CoordinatorLoadInProgressException",
        ),
        (join_error(UNKNOWN_MEMBER_ID), "rebalance failed due to UnknownMemberIdException"),
        (Errors.KafkaConnectionError("lost"), "rebalance failed due to DisconnectException"),
    ],
)
def test_a_join_sent_again_after_a_failure_says_so_in_javas_words(
    member: Callable[..., Member], failure: Any, wire: str
) -> None:
    m = member(retry_backoff_ms=10)
    m.join(generation=5)
    m.script["JoinGroup"] = [failure, m.join_ok(6)]
    m.script["SyncGroup"] = [sync_ok([0])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(6))
    assert wire_reasons(m) == ["rebalance enforced by user", wire]
    # The event keeps the reason the rebalance started for.
    assert [d["reason"] for d in m.of("JoinGroupSent")] == ["explicit_request"] * 2


def test_a_cooperative_member_that_gave_partitions_up_rejoins_saying_so(
    member: Callable[..., Member],
) -> None:
    m = member(cooperative=True)
    m.join(generation=5, partitions=(0, 1))
    m.script["JoinGroup"] = [m.join_ok(6), m.join_ok(7)]
    m.script["SyncGroup"] = [sync_ok([0]), sync_ok([0])]
    m.coord.request_rejoin("explicit_request")
    m.poll_until(lambda: m.joined(7))
    assert wire_reasons(m) == [
        "rebalance enforced by user",
        "need to revoke partitions and re-join",
    ]
