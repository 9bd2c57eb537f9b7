"""`kgctl join --group-protocol consumer` (KIP-848) against a real broker.

Each test has its own group and topic. The consumer group's session timeout is the
broker's (a group config, `consumer.session.timeout.ms`), set per group where the broker's
minimum allows it (kgctl's relaxed broker: 1 s); otherwise the broker's own applies and the
kill test simply waits longer.
"""

from __future__ import annotations

import signal
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MemberProc, WatchProcess, event_is, verifiable_consumer

from kgctl.broker.provision import resolve_kafka_tools
from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.snapshot import GroupSnapshot
from kgctl.model.state import GroupState
from kgctl.render.group_view import render_members
from kgctl.settings import ClientSettings

pytestmark = pytest.mark.kafka

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    from kgctl.adapters.admin import GroupAdmin
    from kgctl.adapters.wire import CONSUMER_GROUP_HEARTBEAT
    from kgctl.proxy.runner import ProxyConfig, ProxyThread

SESSION_MS = 3000

Pairs = set[tuple[str, int]]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)  # polling a condition, not waiting out a time
    pytest.fail(f"no {what} within {timeout:.0f} s (last: {last!r})")


def pairs(parts: dict[str, list[int]] | None) -> Pairs:
    return {(t, int(p)) for t, ps in (parts or {}).items() for p in ps}


def owns(member: MemberProc) -> Pairs:
    """What a kgctl consumer-protocol member says it owns, from its own events."""
    owned: Pairs = set()
    for e in list(member.events):
        if e["type"] == "ReconciliationCompleted":
            owned = pairs(e["data"]["assignment"])
        elif e["type"] in ("PartitionsLost", "PartitionsRevoked"):
            owned -= pairs(e["data"]["partitions"])
    return owned


@pytest.fixture(scope="module")
def kafka_tools() -> Path:
    return resolve_kafka_tools()


def set_session(admin: Any, group: str, ms: int) -> None:
    """The group's session timeout, where the broker's minimum allows (else its own)."""
    resource = ConfigResource(
        ConfigResourceType.GROUP, group, {"consumer.session.timeout.ms": str(ms)}
    )
    try:
        admin.alter_configs([resource])
    except Exception:  # noqa: S110 - a broker whose minimum is higher keeps its own
        pass


@pytest.fixture
def group(admin: Any) -> str:
    """A fresh group; its session timeout lowered to SESSION_MS where the broker allows."""
    name = f"kip848m-{uuid.uuid4().hex[:8]}"
    set_session(admin, name, SESSION_MS)
    return name


def session_ms(admin: Any, group: str) -> int:
    """The group's session timeout as the broker applies it."""
    answer = admin.describe_configs(
        [ConfigResource(ConfigResourceType.GROUP, group, ["consumer.session.timeout.ms"])]
    )
    found = answer["group"][group].get("consumer.session.timeout.ms")
    if found is not None:
        return int(found["value"])
    # No group config (the broker refused ours): the broker's default applies.
    node = str(min(b["broker_id"] for b in admin.describe_cluster()["brokers"]))
    answer = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, node, ["group.consumer.session.timeout.ms"])],
        config_filter="all",  # a default too
    )
    return int(answer["broker"][node]["group.consumer.session.timeout.ms"]["value"])


@pytest.fixture
def members() -> Iterator[list[Any]]:
    """Every process a test starts; all are killed when it ends."""
    procs: list[Any] = []
    yield procs
    for p in procs:
        if isinstance(p, MemberProc):
            p.kill()
        else:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def join(bootstrap: str, group: str, name: str, *args: str, procs: list[Any]) -> MemberProc:
    m = MemberProc(bootstrap, group, *args, "--client-id", name, name=name, protocol="consumer")
    procs.append(m)
    return m


def described(bootstrap: str, group: str) -> GroupSnapshot:
    admin = GroupAdmin(ClientSettings.from_options(bootstrap))
    try:
        return admin.describe(group, with_lag=False)
    finally:
        admin.close()


def settled(bootstrap: str, group: str, count: int, partitions: Pairs) -> GroupSnapshot | None:
    """The broker's view once `count` members each own their (non-empty) targets, disjoint
    and complete."""
    snap = described(bootstrap, group)
    if len(snap.members) != count or any(m.reconciling or not m.partitions for m in snap.members):
        return None
    owned = [pairs(m.partitions) for m in snap.members]
    union: Pairs = set().union(*owned)
    if union != partitions or sum(len(o) for o in owned) != len(partitions):
        return None
    return snap


def by_client(snap: GroupSnapshot) -> dict[str, Pairs]:
    return {m.client_id: pairs(m.partitions) for m in snap.members}


def all_of(topic: str, n: int) -> Pairs:
    return {(topic, p) for p in range(n)}


# -- tests -------------------------------------------------------------------------------


def test_two_kgctl_members_and_java_share_partitions(
    bootstrap: str, topic: Any, group: str, kafka_tools: Path, members: list[Any]
) -> None:
    """Single owner, every partition covered; kgctl's members own what the broker says."""
    t = topic(6, prefix="kip848m")
    a = join(bootstrap, group, "kg-a", t, procs=members)
    b = join(bootstrap, group, "kg-b", t, procs=members)
    java, props = verifiable_consumer(
        kafka_tools, bootstrap, group, t, protocol="consumer", properties={"client.id": "java-1"}
    )
    members.append(java)
    try:
        snap = wait_for(
            "three members sharing six partitions",
            lambda: settled(bootstrap, group, 3, all_of(t, 6)),
            timeout=90,
        )
    finally:
        props.unlink(missing_ok=True)
    owned = by_client(snap)
    assert all(owned[c] for c in ("kg-a", "kg-b", "java-1")), owned
    wait_for("kgctl members' own view to match the broker's", lambda: (
        owns(a) == owned["kg-a"] and owns(b) == owned["kg-b"]
    ))  # fmt: skip
    # Every kgctl member joined with epoch 0 and a member id of its own (v1: a UUID).
    for m in (a, b):
        first = m.of("GroupHeartbeatAnswered")[0]
        assert first["data"]["sent"]["member_epoch"] == 0
        assert uuid.UUID(first["member_id"])
        assert first["data"]["sent"]["rebalance_timeout_ms"] is not None  # a full request
        states = [e["data"]["state"] for e in m.of("MemberStateChanged")]
        assert states[:1] == ["JOINING"] and "STABLE" in states


def test_kill_moves_partitions_only_after_session_and_survivors_keep_theirs(
    bootstrap: str, topic: Any, group: str, admin: Any, members: list[Any]
) -> None:
    t = topic(6, prefix="kip848m")
    session = session_ms(admin, group)
    a = join(bootstrap, group, "kg-a", t, procs=members)
    b = join(bootstrap, group, "kg-b", t, procs=members)
    c = join(bootstrap, group, "kg-c", t, procs=members)
    snap = wait_for(
        "three members settled", lambda: settled(bootstrap, group, 3, all_of(t, 6)), timeout=60
    )
    before = by_client(snap)
    wait_for("members' own views", lambda: owns(a) == before["kg-a"] and owns(b) == before["kg-b"])
    seq = {m.name: m.events[-1]["seq"] for m in (a, b)}
    c.proc.send_signal(signal.SIGKILL)
    killed_ms = time.time() * 1000
    c.kill()
    wait_for(
        "the survivors to take the dead member's partitions",
        lambda: owns(a) | owns(b) == all_of(t, 6),
        timeout=session / 1000 + 30,
    )
    moved = [
        e
        for m in (a, b)
        for e in m.of("PartitionsAssigned")
        if e["seq"] > seq[m.name] and pairs(e["data"]["partitions"]) & before["kg-c"]
    ]
    assert moved, "no survivor was assigned the dead member's partitions"
    # The broker hands them over only once the session expired: the last heartbeat was
    # at most one interval before the kill.
    interval = max(
        e["data"].get("heartbeat_interval_ms", 0) for e in a.of("GroupHeartbeatAnswered")
    )
    earliest = min(e["ts_ms"] for e in moved)
    assert earliest - killed_ms >= session - interval - 200, (earliest - killed_ms, session)
    # No revocation on the survivors: they only gained.
    for m, name in ((a, "kg-a"), (b, "kg-b")):
        after = [e for e in m.events if e["seq"] > seq[name]]
        assert not [e for e in after if e["type"] in ("PartitionsRevoked", "PartitionsLost")]
        assert before[name] <= owns(m)


@pytest.mark.parametrize("error", ["FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"])
def test_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero(
    bootstrap: str, topic: Any, group: str, members: list[Any], error: str
) -> None:
    t = topic(3, prefix="kip848m")
    proxy = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    proxy.start()
    try:
        a = join(proxy.bootstrap, group, "kg-fenced", t, procs=members)
        wait_for("the member to own everything", lambda: owns(a) == all_of(t, 3))
        proxy.run_.add_rule(f"ConsumerGroupHeartbeat:error={error}:count=1:client=kg-fenced")
        fenced = a.wait_event("MemberFenced", timeout=30, error=error)
        member_id = fenced["member_id"]
        lost = a.wait_event("PartitionsLost")
        assert pairs(lost["data"]["partitions"]) == all_of(t, 3)
        rejoin = a.wait(
            lambda: [
                e
                for e in a.of("GroupHeartbeatAnswered")
                if e["seq"] > fenced["seq"] and e["data"]["sent"]["member_epoch"] == 0
            ],
            20,
            "a heartbeat with epoch 0 after fencing",
        )[0]
        # Java keeps its member id across a rejoin; the join carries every field again.
        assert rejoin["member_id"] == member_id
        assert rejoin["data"]["sent"]["rebalance_timeout_ms"] is not None
        assert rejoin["data"]["sent"]["subscription"] == [t]
        wait_for("the partitions back", lambda: owns(a) == all_of(t, 3))
        states = [
            e["data"]["state"] for e in a.of("MemberStateChanged") if e["seq"] > fenced["seq"] - 5
        ]
        assert "FENCED" in states and states.index("FENCED") < states.index(
            "JOINING", states.index("FENCED")
        )
    finally:
        proxy.close()


def test_static_member_restarted_within_session_gets_its_partitions_back(
    bootstrap: str, topic: Any, group: str, admin: Any, members: list[Any]
) -> None:
    t = topic(4, prefix="kip848m")
    # Long enough for a new Python process to start and join on a busy machine.
    set_session(admin, group, 15000)
    session = session_ms(admin, group)
    s1 = join(bootstrap, group, "kg-static", t, "--instance-id", "static-1", procs=members)
    other = join(bootstrap, group, "kg-other", t, procs=members)
    snap = wait_for(
        "two members settled", lambda: settled(bootstrap, group, 2, all_of(t, 4)), timeout=60
    )
    before = by_client(snap)
    wait_for(
        "members' own views",
        lambda: owns(s1) == before["kg-static"] and owns(other) == before["kg-other"],
    )
    answers = wait_for("the other member's epoch", lambda: other.of("GroupHeartbeatAnswered"))
    epoch_of_other = answers[-1]["generation"]
    mark = other.events[-1]["seq"]
    assert s1.stop() == 0
    leave = [e for e in s1.of("LeaveGroupSent")][-1]
    assert leave["data"]["member_epoch"] == -2  # a static member's leave keeps its place
    s2 = join(bootstrap, group, "kg-static", t, "--instance-id", "static-1", procs=members)
    wait_for(
        "the restarted static member's partitions",
        lambda: owns(s2) == before["kg-static"],
        timeout=session / 1000,
    )
    rejoined = s2.of("GroupHeartbeatAnswered")[0]
    late = "restarted after its session ended"
    assert rejoined["ts_ms"] - leave["ts_ms"] < session, late

    # Let the other member heartbeat a few times more: its epoch did not move.
    def more_heartbeats() -> list[dict[str, Any]]:
        return [e for e in other.events if e["seq"] > mark and e["type"] == "HeartbeatSucceeded"]

    seen = other.wait(lambda: more_heartbeats()[3:], 20, "more heartbeats of the other member")
    later = [e for e in other.events if e["seq"] > mark]
    assert {e["generation"] for e in later if e["generation"] >= 0} == {epoch_of_other}, seen
    assert not [e for e in later if e["type"].startswith("Reconciliation")]


def test_regex_subscription_picks_up_a_topic_created_later(
    bootstrap: str, topic: Any, group: str, admin: Any, members: list[Any]
) -> None:
    prefix = f"kip848re{uuid.uuid4().hex[:6]}"
    first = topic.adopt(f"{prefix}-one")
    admin.create_topics([NewTopic(first, 2, 1)])
    a = join(bootstrap, group, "kg-regex", "--pattern", f"{prefix}-.*", procs=members)
    wait_for("the first topic's partitions", lambda: owns(a) == all_of(first, 2))
    sent = a.of("GroupHeartbeatAnswered")[0]["data"]["sent"]
    assert sent["regex"] == f"{prefix}-.*" and sent["subscription"] == []
    second = topic.adopt(f"{prefix}-two")
    admin.create_topics([NewTopic(second, 2, 1)])
    wait_for(
        "the topic created later",
        lambda: owns(a) == all_of(first, 2) | all_of(second, 2),
        timeout=60,
    )
    # Its topic id came before its name: pending at first, assigned once metadata named it.
    targets = a.of("TargetAssignmentReceived")
    pending = next(e for e in targets if e["data"]["pending"])
    resolved = next(e for e in targets if e["data"].get("resolved"))
    assert pending["seq"] < resolved["seq"] and resolved["data"]["resolved"] == [second]


def test_unreleased_instance_id_is_fatal_with_one_line(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """A second live member with the same --instance-id: the broker refuses it
    (UNRELEASED_INSTANCE_ID); it ends with one line and exit status 10."""
    t = topic(2, prefix="kip848m")
    first = join(bootstrap, group, "kg-first", t, "--instance-id", "dup", procs=members)
    wait_for("the first member's partitions", lambda: owns(first) == all_of(t, 2))
    second = join(bootstrap, group, "kg-second", t, "--instance-id", "dup", procs=members)
    code = second.proc.wait(timeout=30)
    stderr = second.stderr
    second.kill()
    assert code == 10
    failed = second.of("MemberFailed")[-1]["data"]
    assert failed["error"] == "UNRELEASED_INSTANCE_ID"
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "UNRELEASED_INSTANCE_ID" in lines[0], lines
    assert "Traceback" not in stderr
    assert owns(first) == all_of(t, 2)  # the first one is untouched


def test_poll_interval_expiry_leaves_with_epoch_minus_1_and_rejoins_on_the_next_poll(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """Java's behaviour: the background thread sees the poll timer run out, sends the
    leave heartbeat (epoch -1) and the partitions are lost; the next poll joins again."""
    t = topic(2, prefix="kip848m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        producer.send(t, f"r{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    a = join(
        bootstrap, group, "kg-slow", t, "--max-poll-interval", "1500", "--processing-ms", "4000",
        procs=members,
    )  # fmt: skip
    exceeded = a.wait_event("PollIntervalExceeded", timeout=30, max_poll_interval_ms=1500)
    leave = a.wait_event("LeaveGroupSent", reason="poll_interval_exceeded")
    assert leave["data"]["member_epoch"] == -1 and leave["seq"] > exceeded["seq"]
    lost = a.wait_event("PartitionsLost")
    assert pairs(lost["data"]["partitions"]) == all_of(t, 2)
    rejoin = a.wait(
        lambda: [
            e
            for e in a.of("GroupHeartbeatAnswered")
            if e["seq"] > lost["seq"] and e["data"]["sent"]["member_epoch"] == 0
        ],
        30,
        "a join with epoch 0 after the poll",
    )[0]
    assert rejoin["data"]["error"] == "NONE"
    states = [e["data"]["state"] for e in a.of("MemberStateChanged") if e["seq"] > exceeded["seq"]]
    assert states[:3] == ["LEAVING", "STALE", "JOINING"], states


def test_a_coordinator_error_finds_the_coordinator_again_and_sends_every_field(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    t = topic(2, prefix="kip848m")
    proxy = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    proxy.start()
    try:
        a = join(proxy.bootstrap, group, "kg-moved", t, procs=members)
        wait_for("the member to own everything", lambda: owns(a) == all_of(t, 2))
        found = len(a.of("CoordinatorFound"))
        proxy.run_.add_rule("ConsumerGroupHeartbeat:error=NOT_COORDINATOR:count=1:client=kg-moved")
        failed = a.wait_event("HeartbeatFailed", timeout=30, error="NOT_COORDINATOR")
        a.wait(lambda: len(a.of("CoordinatorFound")) > found, 20, "the coordinator found again")
        resent = a.wait(
            lambda: [
                e
                for e in a.of("GroupHeartbeatAnswered")
                if e["seq"] > failed["seq"] and e["data"]["error"] == "NONE"
            ],
            20,
            "a heartbeat after the coordinator was found again",
        )[0]
        sent = resent["data"]["sent"]
        # Java resets the sent fields: the broker may be a new coordinator.
        assert sent["rebalance_timeout_ms"] is not None and sent["subscription"] == [t]
        assert pairs(sent["owned"]) == all_of(t, 2)
        assert sent["member_epoch"] > 0  # not fenced: the same epoch goes on
        assert not a.of("PartitionsLost") and owns(a) == all_of(t, 2)
    finally:
        proxy.close()


def test_watch_shows_a_traced_consumer_member_with_protocol_epoch_and_state(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """The member's own events reach `watch --trace-topic`; folded with the broker's
    snapshots they give its protocol, epoch and Java state."""
    t = topic(2, prefix="kip848m")
    trace = topic.adopt(f"kgctl-test-trace-{uuid.uuid4().hex[:8]}")
    watch = WatchProcess(
        [group, "-b", bootstrap, "--output", "json", "--interval", "0.5", "--trace-topic", trace]
    )
    try:
        watch.wait_for("a first snapshot", event_is("GroupObserved"))
        join(bootstrap, group, "kg-traced", t, "--trace-topic", trace, procs=members)
        watch.wait_for(
            "the member's STABLE",
            lambda e: (
                e["type"] == "MemberStateChanged"
                and e.get("member") == "kg-traced"
                and e["data"]["state"] == "STABLE"
            ),
        )
        watch.wait_for(
            "a snapshot with the member's epoch",
            lambda e: (
                e["type"] == "GroupObserved"
                and any((m.get("member_epoch") or 0) > 0 for m in e["data"].get("members", []))
            ),
        )
        with watch.lock:
            events = [Event.from_dict(e) for e in watch.events]
    finally:
        watch.kill()
    s = fold_all(GroupState(group=group), events, events[-1].ts_ms)
    m = s.members["kg-traced"]
    assert (m.protocol, m.member_state) == ("consumer", "STABLE") and m.epoch > 0
    assert {tp for tp, _ in pairs({k: list(v) for k, v in m.partitions.items()})} == {t}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from rich.console import Console
    console = Console(width=100, record=True, color_system=None)
    console.print(render_members(s, events[-1].ts_ms, 100, 10))
    row = next(line for line in console.export_text().splitlines() if "kg-traced" in line)
    assert "consumer" in row and "stable" in row and str(m.epoch) in row.split()


def test_offsets_committed_with_the_member_epoch_are_where_the_next_member_starts(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """OffsetCommit v9 (member id and epoch) and OffsetFetch: a second member of the group
    starts after what the first one committed."""
    t = topic(2, prefix="kip848m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap)

    def produce(n: int) -> None:
        for i in range(n):
            producer.send(t, f"r{i}".encode(), partition=i % 2)
        producer.flush()

    produce(20)
    first = join(
        bootstrap, group, "kg-first", t, "--max-records", "20", "--commit", "sync", procs=members
    )
    assert first.proc.wait(timeout=60) == 0
    first.kill()
    stopped = first.of("MemberStopped")[-1]["data"]
    assert stopped["records"] == 20
    assert stopped["committed"] == stopped["consumed_up_to"] == {t: {"0": 10, "1": 10}}
    commits = first.of("OffsetsCommitted")
    assert commits and all(c["data"]["member_epoch"] > 0 for c in commits)
    produce(6)
    second = join(bootstrap, group, "kg-second", t, "--max-records", "6", procs=members)
    assert second.proc.wait(timeout=60) == 0
    second.kill()
    batches = [b for e in second.of("RecordsConsumed") for b in e["data"]["batches"]]
    starts: dict[int, int] = {}
    for b in batches:
        starts[b["partition"]] = min(b["first"], starts.get(b["partition"], b["first"]))
    assert starts == {0: 10, 1: 10}  # from the committed offsets, not --from earliest
    assert second.of("MemberStopped")[-1]["data"]["records"] == 6
    producer.close()


def test_a_live_switch_from_topic_names_to_a_regex_replaces_the_subscription(
    bootstrap: str, topic: Any, group: str, admin: Any, members: list[Any]
) -> None:
    """A `subscribe` control line: names → regex. The broker keeps both fields it was
    last sent, so the member clears the names; it ends up with the regex's topics only."""
    prefix = f"kip848sw{uuid.uuid4().hex[:6]}"
    first = topic.adopt(f"{prefix}-names")
    second = topic.adopt(f"{prefix}-regex")
    admin.create_topics([NewTopic(first, 2, 1), NewTopic(second, 2, 1)])
    a = join(bootstrap, group, "kg-switch", first, procs=members)
    wait_for("the named topic's partitions", lambda: owns(a) == all_of(first, 2))
    a.send({"op": "subscribe", "pattern": f"{prefix}-reg.*"})
    wait_for("only the regex's topic", lambda: owns(a) == all_of(second, 2), timeout=60)
    sent = [e["data"]["sent"] for e in a.of("GroupHeartbeatAnswered") if e["data"]["sent"]["regex"]]
    assert sent and sent[0]["subscription"] == []
    # The classic `rejoin` request has no meaning here: refused, said why, member goes on.
    a.send({"op": "rejoin"})
    wait_for(
        "the refusal", lambda: [e for e in a.of("ControlReceived") if e["data"]["op"] == "rejoin"]
    )
    refused = [e["data"] for e in a.of("ControlReceived") if e["data"]["op"] == "rejoin"][-1]
    assert refused["applied"] is False and "classic-protocol request" in refused["error"]
    assert a.proc.poll() is None and owns(a) == all_of(second, 2)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ("FENCED_INSTANCE_ID", 7),
        ("UNSUPPORTED_ASSIGNOR", 10),
        ("INVALID_REQUEST", 10),
        ("GROUP_MAX_SIZE_REACHED", 10),
    ],
)
def test_errors_java_treats_as_fatal_end_the_member_with_one_line(
    bootstrap: str, topic: Any, group: str, members: list[Any], error: str, status: int
) -> None:
    t = topic(2, prefix="kip848m")
    proxy = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    proxy.start()
    try:
        a = join(proxy.bootstrap, group, "kg-fatal", t, procs=members)
        wait_for("the member to own everything", lambda: owns(a) == all_of(t, 2))
        proxy.run_.add_rule(f"ConsumerGroupHeartbeat:error={error}:count=1:client=kg-fatal")
        code = a.proc.wait(timeout=30)
        stderr = a.stderr
        a.kill()
    finally:
        proxy.close()
    assert code == status
    assert a.of("MemberFailed")[-1]["data"]["error"] == error
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and error in lines[0] and "Traceback" not in stderr, lines
    # Java's transitionToFatal sends no leave heartbeat.
    assert not a.of("LeaveGroupSent")
    assert "FATAL" in [e["data"]["state"] for e in a.of("MemberStateChanged")]


def test_client_rack_reaches_the_broker_with_the_join(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """--client-rack is Java's client.rack: the join heartbeat carries it and the broker
    keeps it for the member (ConsumerGroupDescribe's RackId)."""
    t = topic(2, prefix="kip848m")
    a = join(bootstrap, group, "kg-rack", t, "--client-rack", "rack-b", procs=members)
    wait_for("the member to own everything", lambda: owns(a) == all_of(t, 2))
    sent = [e["data"]["sent"] for e in a.of("GroupHeartbeatAnswered")]
    assert sent[0]["member_epoch"] == 0 and sent[0]["rack_id"] == "rack-b"
    assert all(s["rack_id"] is None for s in sent[1:])  # Java sends it with a join only
    snap = wait_for("the member described", lambda: described(bootstrap, group).members)
    assert [(m.client_id, m.rack) for m in snap] == [("kg-rack", "rack-b")]


def test_the_commit_before_a_revocation_is_retried_after_a_stale_member_epoch(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """Java's auto-commit before a revocation sends a commit refused with
    STALE_MEMBER_EPOCH again (the member is still in the group), so the partition's next
    owner starts where this member stopped, not at --from earliest."""
    t = topic(2, prefix="kip848m")
    other = topic(1, prefix="kip848m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    proxy = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    proxy.start()
    try:
        # No commit on the interval: the one before the revocation is the one that counts.
        quiet = ("-X", "auto.commit.interval.ms=600000")
        a = join(proxy.bootstrap, group, "kg-stale-a", t, *quiet, procs=members)
        b = join(proxy.bootstrap, group, "kg-stale-b", other, *quiet, procs=members)
        wait_for("a to own the topic", lambda: owns(a) == all_of(t, 2))
        wait_for("b to own the other topic", lambda: owns(b) == all_of(other, 1))
        for i in range(20):
            producer.send(t, f"r{i}".encode(), partition=i % 2)
        producer.flush()
        wait_for("a to consume the 20 records", lambda: sum(
            e["data"]["count"] for e in a.of("RecordsConsumed")
        ) == 20)  # fmt: skip
        proxy.run_.add_rule("OffsetCommit:error=STALE_MEMBER_EPOCH:count=1:client=kg-stale-a")
        b.send({"op": "subscribe", "topics": [t]})
        revoked = a.wait_event("PartitionsRevoked", timeout=30)
        moved = pairs(revoked["data"]["partitions"])
        assert len(moved) == 1
        ((_, p),) = moved
        # What a user checks: the new owner goes on from offset 10, nothing read twice.
        wait_for("b to own the moved partition", lambda: (t, p) in owns(b))
        for i in range(2):
            producer.send(t, f"late{i}".encode(), partition=p)
        producer.flush()
        batches = b.wait(
            lambda: [x for e in b.of("RecordsConsumed") for x in e["data"]["batches"]
                     if x["topic"] == t],
            30,
            "b to read the moved partition",
        )  # fmt: skip
        assert min(x["first"] for x in batches) == 10
        before = [e for e in a.events if e["seq"] < revoked["seq"]]
        failed = [e for e in before if e["type"] == "OffsetCommitFailed"]
        assert [(e["data"]["error"], e["data"]["kind"]) for e in failed] == [
            ("STALE_MEMBER_EPOCH", "before_rebalance")
        ]
        assert failed[0]["data"]["retry_in_ms"] >= 0
        committed = [
            e for e in before if e["type"] == "OffsetsCommitted" and e["seq"] > failed[0]["seq"]
        ]
        assert committed and committed[-1]["data"]["offsets"][t][str(p)] == 10
    finally:
        proxy.close()
        producer.close()


def test_a_broker_serving_heartbeat_v0_only_names_the_member_and_gets_no_regex(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """Through a proxy whose ApiVersions says ConsumerGroupHeartbeat 0-0 (a 3.7-3.9
    broker): the member speaks v0, joins with no member id and goes on with the one the
    broker gave; --pattern, which v0 cannot carry, is refused with one line."""
    t = topic(2, prefix="kip848m")
    settings = ClientSettings.from_options(bootstrap, timeout_s=10)
    proxy = ProxyThread(settings, ProxyConfig(version_caps={CONSUMER_GROUP_HEARTBEAT: 0}))
    proxy.start()
    try:
        a = join(proxy.bootstrap, group, "kg-v0", t, procs=members)
        wait_for("the member to own everything", lambda: owns(a) == all_of(t, 2))
        beats = [
            e for e in proxy.snapshot()
            if e.type == "ConsumerGroupHeartbeatTraced" and e.client_id == "kg-v0"
        ]  # fmt: skip
        assert beats and all(e.data["api_version"] == 0 for e in beats)
        given = beats[0].data["response"]["member_id"]
        assert beats[0].data["request"]["member_id"] == "" and given
        assert all(e.data["request"]["member_id"] == given for e in beats[1:])
        answered = a.of("GroupHeartbeatAnswered")
        assert answered[0]["data"]["api_version"] == 0 and answered[0]["member_id"] == given
        assert [m.member_id for m in described(bootstrap, group).members] == [given]
        b = join(proxy.bootstrap, group, "kg-v0-re", "--pattern", f"{t}.*", procs=members)
        code = b.proc.wait(timeout=60)
        stderr = b.stderr
        b.kill()
    finally:
        proxy.close()
    assert code == 10
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "v0" in lines[0] and "--pattern" in lines[0], lines


def test_a_client_side_pattern_sends_the_topic_names_it_matches(
    bootstrap: str, topic: Any, group: str, admin: Any, members: list[Any]
) -> None:
    """--client-pattern is Java's subscribe(Pattern) on the consumer protocol: the member
    matches names in its metadata (whole names) and sends them, no regex; a topic
    created later that matches joins the subscription when metadata is refreshed
    (metadata.max.age.ms, 1 s in these tests)."""
    prefix = f"kip848cp{uuid.uuid4().hex[:6]}"
    first = topic.adopt(f"{prefix}-one")
    elsewhere = topic.adopt(f"x{prefix}-one")  # found by a search, not by a whole match
    admin.create_topics([NewTopic(first, 2, 1), NewTopic(elsewhere, 1, 1)])
    a = join(bootstrap, group, "kg-cpat", "--client-pattern", f"{prefix}-.*", procs=members)
    wait_for("the first topic's partitions", lambda: owns(a) == all_of(first, 2))
    sent = a.of("GroupHeartbeatAnswered")[0]["data"]["sent"]
    assert sent["subscription"] == [first] and sent["regex"] is None
    second = topic.adopt(f"{prefix}-two")
    admin.create_topics([NewTopic(second, 2, 1)])
    wait_for(
        "the topic created later",
        lambda: owns(a) == all_of(first, 2) | all_of(second, 2),
        timeout=60,
    )
    sent = [e["data"]["sent"] for e in a.of("GroupHeartbeatAnswered")]
    assert [first, second] in [s["subscription"] for s in sent]
    assert all(s["regex"] is None for s in sent)
    changed = a.of("RejoinRequested")[-1]["data"]
    assert changed["reason"] == "subscription_changed" and changed["subscription"] == [
        first,
        second,
    ]


def test_a_heartbeat_refused_as_retriable_is_retried_after_a_growing_jittered_backoff(
    bootstrap: str, topic: Any, group: str, members: list[Any]
) -> None:
    """COORDINATOR_LOAD_IN_PROGRESS four times in a row: Java waits retry.backoff.ms
    (100 ms) doubled per failure, each ±20 %, not the heartbeat interval."""
    t = topic(1, prefix="kip848m")
    proxy = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    proxy.start()
    try:
        a = join(proxy.bootstrap, group, "kg-backoff", t, procs=members)
        wait_for("the member to own everything", lambda: owns(a) == all_of(t, 1))
        rule = proxy.run_.add_rule(
            "ConsumerGroupHeartbeat:error=COORDINATOR_LOAD_IN_PROGRESS:count=4:client=kg-backoff"
        )
        failed = a.wait(
            lambda: [e for e in a.of("HeartbeatFailed") if not e["data"]["transport"]][3:],
            30,
            "four refused heartbeats",
        )
        beats = [
            e for e in proxy.snapshot()
            if e.type == "ConsumerGroupHeartbeatTraced" and e.client_id == "kg-backoff"
            and e.data.get("fault") == rule.id
        ]  # fmt: skip
        after = a.wait(
            lambda: [e for e in a.of("GroupHeartbeatAnswered") + a.of("HeartbeatSucceeded")
                     if e["seq"] > failed[-1]["seq"]],
            30,
            "a heartbeat after the last refusal",
        )  # fmt: skip
    finally:
        proxy.close()
    waits = [e["data"]["retry_in_ms"] for e in a.of("HeartbeatFailed")[-4:]]
    for n, wait in enumerate(waits):
        base = 100 * 2**n
        assert int(base * 0.8) <= wait <= min(int(base * 1.2), 1000), waits
    # On the wire: each retry went out no sooner than the wait said (the clock can only
    # add to it on a busy machine).
    sent = sorted(e.ts_ms for e in beats)
    assert len(sent) == 4
    gaps = [b - a_ for a_, b in zip(sent, sent[1:], strict=False)]
    assert all(gap >= wait - 5 for gap, wait in zip(gaps, waits, strict=False)), (gaps, waits)
    assert after[0]["ts_ms"] - failed[-1]["ts_ms"] >= waits[-1] - 5
