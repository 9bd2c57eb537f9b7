"""The consumer-protocol member (`kgctl join --group-protocol consumer`) without a broker:
its options, the regex check, and how its events are folded and shown."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from helpers import mev
from rich.console import Console

from kgctl.adapters.consumer_group import Unsupported, heartbeat_answer, heartbeat_request
from kgctl.adapters.wire import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kgctl.chaos.java import java_event
from kgctl.cli.app import main
from kgctl.cli.common import Env
from kgctl.errors import ExitStatus
from kgctl.member.membership import re2j_problem
from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.state import PHASE_JOINING, PHASE_RECONCILING, PHASE_STABLE, GroupState
from kgctl.render.group_view import render_header, render_members
from kgctl.render.member_lines import MemberHeader, describe, render_line, target_gap


def kgctl(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), env=Env(stdout=out, stderr=err))
    return status, out.getvalue(), err.getvalue()


# -- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--session-timeout", "6000"], "consumer.session.timeout.ms"),
        (["--heartbeat-interval", "500"], "consumer.heartbeat.interval.ms"),
        (["--assignor", "cooperative-sticky"], "--remote-assignor"),
    ],
)
def test_classic_only_settings_are_refused_with_the_consumer_protocol(
    args: list[str], says: str
) -> None:
    # Java refuses them too (a ConfigException): in a consumer group the broker owns them.
    status, out, err = kgctl(
        "join", "-b", "127.0.0.1:1", "-g", "g", "t", "--group-protocol", "consumer", *args
    )
    assert status == int(ExitStatus.USAGE)
    assert out == "" and err.count("\n") == 1 and says in err


def test_remote_assignor_is_only_for_the_consumer_protocol() -> None:
    status, _out, err = kgctl(
        "join", "-b", "127.0.0.1:1", "-g", "g", "t", "--remote-assignor", "range"
    )
    assert status == int(ExitStatus.USAGE)
    assert "--group-protocol consumer" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--client-pattern", "t.*"], "--client-pattern is for --group-protocol consumer"),
        (["--client-pattern", "t.*", "--group-protocol", "consumer", "t"], "exactly one"),
        (["--client-pattern", "t.*", "--pattern", "t.*", "--group-protocol", "consumer"],
         "exactly one"),
        (["--client-pattern", "t(", "--group-protocol", "consumer"], "not a regex"),
    ],
)  # fmt: skip
def test_a_client_side_pattern_is_one_subscription_of_a_consumer_protocol_member(
    args: list[str], says: str
) -> None:
    status, out, err = kgctl("join", "-b", "127.0.0.1:1", "-g", "g", *args)
    assert status == int(ExitStatus.USAGE)
    assert out == "" and err.count("\n") == 1 and says in err, err


def test_a_regex_re2j_cannot_read_is_refused_before_joining() -> None:
    status, _out, err = kgctl(
        "join", "-b", "127.0.0.1:1", "-g", "g", "--pattern", "orders-(?!test).*",
        "--group-protocol", "consumer",
    )  # fmt: skip
    assert status == int(ExitStatus.USAGE)
    assert "lookaround" in err and "RE2J" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("orders-.*", None),
        ("orders-[0-9]+|payments", None),
        ("(?P<name>a)b", None),  # RE2 has Python's named groups
        ("a\\\\1", None),  # an escaped backslash followed by 1: no backreference
        ("(?=orders).*", "lookaround"),
        ("(?<!test-)orders", "lookaround"),
        ("(a)\\1", "backreferences"),
        ("(?P<x>a)(?P=x)", "backreferences"),
        ("(?>a|ab)c", "atomic"),
        ("a*+b", "possessive"),
        ("orders\\Z", "\\Z"),
    ],
)
def test_re2j_problems(pattern: str, problem: str | None) -> None:
    found = re2j_problem(pattern)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


# -- events: folded ----------------------------------------------------------------------

T = "orders"


def consumer_member_history() -> list:
    """Member a joins alone (epoch 1, owns 0-3), b joins (epoch 2): a gives up 2-3."""
    return [
        mev("MemberStarted", 1000, "a", config={"group_protocol": "consumer"}),
        mev("MemberStateChanged", 1001, "a", 0, previous="UNSUBSCRIBED", state="JOINING"),
        mev(
            "GroupHeartbeatAnswered",
            1010,
            "a",
            1,
            error="NONE",
            member_epoch=1,
            sent={"member_epoch": 0, "subscription": [T]},
            assignment={T: [0, 1, 2, 3]},
        ),  # fmt: skip
        mev("TargetAssignmentReceived", 1010, "a", 1, member_epoch=1, target={T: [0, 1, 2, 3]}),
        mev("ReconciliationStarted", 1011, "a", 1, member_epoch=1, assign={T: [0, 1, 2, 3]}),
        mev("MemberStateChanged", 1011, "a", 1, previous="JOINING", state="RECONCILING"),
        mev("PartitionsAssigned", 1020, "a", 1, partitions={T: [0, 1, 2, 3]}),
        mev("ReconciliationCompleted", 1020, "a", 1, member_epoch=1, assignment={T: [0, 1, 2, 3]}),
        mev("MemberStateChanged", 1021, "a", 1, previous="RECONCILING", state="ACKNOWLEDGING"),
        mev("MemberStateChanged", 1030, "a", 1, previous="ACKNOWLEDGING", state="STABLE"),
        mev("MemberStarted", 2000, "b", config={"group_protocol": "consumer"}),
        mev("MemberStateChanged", 2001, "b", 0, previous="UNSUBSCRIBED", state="JOINING"),
        mev(
            "GroupHeartbeatAnswered",
            2010,
            "b",
            2,
            error="NONE",
            member_epoch=2,
            sent={"member_epoch": 0, "subscription": [T]},
            assignment={},
        ),  # fmt: skip
        mev("MemberStateChanged", 2011, "b", 2, previous="JOINING", state="STABLE"),
        mev(
            "GroupHeartbeatAnswered",
            2100,
            "a",
            2,
            error="NONE",
            member_epoch=2,
            sent={"member_epoch": 1},
            assignment={T: [0, 1]},
        ),  # fmt: skip
        mev("TargetAssignmentReceived", 2100, "a", 2, member_epoch=2, target={T: [0, 1]}),
        mev("ReconciliationStarted", 2101, "a", 2, member_epoch=2, revoke={T: [2, 3]}),
        mev("MemberStateChanged", 2101, "a", 2, previous="STABLE", state="RECONCILING"),
    ]


def test_a_reconciling_member_shows_its_target_epoch_and_java_state() -> None:
    s = fold_all(GroupState(group="g"), consumer_member_history(), 2101)
    a, b = s.members["a"], s.members["b"]
    assert (a.protocol, a.epoch, a.member_state, a.phase) == (
        "consumer",
        2,
        "RECONCILING",
        PHASE_RECONCILING,
    )
    assert dict(a.partitions) == {T: (0, 1, 2, 3)} and dict(a.target or {}) == {T: (0, 1)}
    assert a.reconciling
    assert (b.protocol, b.epoch, b.phase) == ("consumer", 2, PHASE_STABLE)
    assert s.generation == 2 and s.rebalancing  # epoch 2's round is not complete yet


def test_the_round_completes_once_the_partitions_given_up_have_their_new_owner() -> None:
    """b is STABLE at epoch 2 with nothing (the broker gives it 2-3 only once a revoked
    them); a revokes and is STABLE at 2: not complete until b owns 2-3."""
    more = [
        mev("PartitionsRevoked", 2110, "a", 2, partitions={T: [2, 3]}),
        mev("ReconciliationCompleted", 2110, "a", 2, member_epoch=2, assignment={T: [0, 1]}),
        mev("MemberStateChanged", 2111, "a", 2, previous="RECONCILING", state="ACKNOWLEDGING"),
        mev("MemberStateChanged", 2111, "a", 2, previous="ACKNOWLEDGING", state="STABLE"),
    ]
    s = fold_all(GroupState(group="g"), consumer_member_history() + more, 2111)
    assert s.rebalancing and s.owners()[(T, 2)] == ()
    assert dict(s.members["a"].partitions) == {T: (0, 1)} and not s.members["a"].reconciling
    b_takes = [
        mev(
            "GroupHeartbeatAnswered",
            2500,
            "b",
            2,
            error="NONE",
            member_epoch=2,
            sent={"member_epoch": 2},
            assignment={T: [2, 3]},
        ),  # fmt: skip
        mev("MemberStateChanged", 2500, "b", 2, previous="STABLE", state="RECONCILING"),
        mev("PartitionsAssigned", 2510, "b", 2, partitions={T: [2, 3]}),
        mev("ReconciliationCompleted", 2510, "b", 2, member_epoch=2, assignment={T: [2, 3]}),
        mev("MemberStateChanged", 2511, "b", 2, previous="RECONCILING", state="ACKNOWLEDGING"),
        mev("MemberStateChanged", 2511, "b", 2, previous="ACKNOWLEDGING", state="STABLE"),
    ]
    s = fold_all(s, b_takes, 2511)
    assert not s.rebalancing and s.current is not None and s.current.stable_ms == 2511
    assert s.owners()[(T, 2)] == ("b",)


def test_partitions_of_a_topic_nobody_subscribes_to_any_more_do_not_hold_the_round() -> None:
    more = [
        mev(
            "GroupHeartbeatAnswered",
            2105,
            "a",
            2,
            error="NONE",
            member_epoch=2,
            sent={"member_epoch": 2, "subscription": ["other"]},
            assignment={},
        ),  # fmt: skip
        mev("PartitionsRevoked", 2110, "a", 2, partitions={T: [0, 1, 2, 3]}),
        mev("ReconciliationCompleted", 2110, "a", 2, member_epoch=2, assignment={}),
        mev("MemberStateChanged", 2111, "a", 2, previous="RECONCILING", state="STABLE"),
        mev(
            "GroupHeartbeatAnswered",
            2112,
            "b",
            2,
            error="NONE",
            member_epoch=2,
            sent={"member_epoch": 2, "subscription": ["other"]},
        ),  # fmt: skip
    ]
    s = fold_all(GroupState(group="g"), consumer_member_history() + more, 2112)
    assert not s.rebalancing


def test_a_member_that_left_on_poll_timeout_lives_again_when_it_joins() -> None:
    more = [
        mev("PollIntervalExceeded", 3000, "b", 2, max_poll_interval_ms=1000),
        mev("LeaveGroupSent", 3000, "b", 2, reason="poll_interval_exceeded", member_epoch=-1),
        mev("MemberStateChanged", 3001, "b", 2, previous="STABLE", state="LEAVING"),
        mev("MemberStateChanged", 3010, "b", 0, previous="STALE", state="JOINING"),
    ]
    s = fold_all(GroupState(group="g"), consumer_member_history() + more, 3010)
    b = s.members["b"]
    assert b.alive and b.member_state == "JOINING" and len(b.lives) == 2


def test_fencing_loses_the_partitions() -> None:
    more = [
        mev("MemberFenced", 3000, "a", 2, error="FENCED_MEMBER_EPOCH", lost={T: [0, 1, 2, 3]}),
        mev("MemberStateChanged", 3000, "a", 2, previous="RECONCILING", state="FENCED"),
        mev("PartitionsLost", 3001, "a", 2, partitions={T: [0, 1, 2, 3]}),
        mev("MemberStateChanged", 3002, "a", 2, previous="FENCED", state="JOINING"),
    ]
    s = fold_all(GroupState(group="g"), consumer_member_history() + more, 3002)
    assert dict(s.members["a"].partitions) == {} and s.rebalancing


# -- events: shown ----------------------------------------------------------------------


def test_member_lines_say_what_a_heartbeat_carried_and_what_reconciling_does() -> None:
    hb = mev(
        "GroupHeartbeatAnswered", 1, "a", 3, error="NONE", member_epoch=3,
        sent={"member_epoch": 2, "owned": {T: [0, 1]}, "rebalance_timeout_ms": None},
        assignment={T: [0, 1, 4]},
    )  # fmt: skip
    assert describe(hb) == "epoch 2 [owned orders[0,1]] -> epoch 3 target orders[0,1,4]"
    join = mev(
        "GroupHeartbeatAnswered", 1, "a", 0, error="UNRELEASED_INSTANCE_ID", member_epoch=0,
        sent={"member_epoch": 0, "rebalance_timeout_ms": 300000, "subscription": [T]},
    )  # fmt: skip
    assert describe(join) == "epoch 0 [full topics=orders] -> UNRELEASED_INSTANCE_ID"
    racked = mev(
        "GroupHeartbeatAnswered", 1, "a", 1, error="NONE", member_epoch=1,
        sent={"member_epoch": 0, "rebalance_timeout_ms": 300000, "subscription": [T],
              "rack_id": "rack-b"},
    )  # fmt: skip
    assert describe(racked) == "epoch 0 [full topics=orders rack=rack-b] -> epoch 1"
    started = mev(
        "MemberStarted", 1, "a",
        config={"group_protocol": "consumer", "client_pattern": "ord.*", "client_rack": "r1"},
    )  # fmt: skip
    assert describe(started) == (
        "group=orders-app protocol=consumer subscribe=ord.* (matched by the member) "
        "assignor=broker default rack=r1"
    )
    start = mev(
        "ReconciliationStarted", 1, "a", 3, member_epoch=3, revoke={T: [2]}, assign={T: [4]}
    )
    assert describe(start) == "epoch 3: revoke orders[2], assign orders[4]"
    state = mev("MemberStateChanged", 1, "a", 3, previous="RECONCILING", state="ACKNOWLEDGING")
    line = render_line(state)
    assert line is not None and "RECONCILING -> ACKNOWLEDGING" in line.plain


def test_the_header_shows_protocol_epoch_and_the_gap_to_the_target() -> None:
    header = MemberHeader()
    for ev in consumer_member_history()[:10] + [
        mev("GroupHeartbeatAnswered", 2100, "a", 2, member_epoch=2, sent={"member_epoch": 1}),
        mev("TargetAssignmentReceived", 2100, "a", 2, member_epoch=2, target={T: [0, 1, 5]}),
    ]:
        header.update(ev)
    text = header.render(now_ms=3000).plain
    assert "consumer protocol, epoch 2" in text
    assert "owns orders[0,1,2,3]" in text and "target +orders[5] -orders[2,3]" in text


def test_target_gap() -> None:
    assert target_gap({T: [0, 1]}, None) == ""
    assert target_gap({T: [0, 1]}, {T: [0, 1]}) == ""
    assert target_gap({T: [0]}, {T: [0, 1], "x": [2]}) == "+orders[1] x[2]"
    assert target_gap({T: [0, 1]}, {}) == "-orders[0,1]"


def test_watch_shows_each_members_protocol_epoch_and_gap() -> None:
    s = fold_all(GroupState(group="g"), consumer_member_history(), 2101)
    console = Console(width=100, record=True, color_system=None)
    console.print(render_members(s, 2101, 100, 10))
    text = console.export_text()
    row_a = next(line for line in text.splitlines() if line.strip().startswith("a "))
    assert "-orders[2,3]" in row_a and "consumer" in row_a and "reconciling" in row_a
    assert row_a.split()[-3] == "2"  # the epoch column


def test_watch_header_knows_a_consumer_group_from_its_members_alone() -> None:
    """Traced consumer-protocol members and no broker snapshot: still epochs, not
    generations, and no leader line."""
    s = fold_all(GroupState(group="g"), consumer_member_history(), 2101)
    console = Console(width=100, record=True, color_system=None)
    console.print(render_header(s, 2101))
    text = console.export_text()
    assert "protocol consumer (KIP-848)" in text
    assert "group epoch 2 (the members' highest epoch)" in text
    assert "reconciling 1 of 2" in text and "leader" not in text


# -- Java members (a chaos fleet's VerifiableConsumer) in the fold ----------------------


def java(line: dict, member: str, ts: int, protocol: str = "consumer") -> Event:
    """A VerifiableConsumer output line, read as chaos reads it."""
    ev = java_event(
        json.dumps({**line, "timestamp": ts}),
        member=member,
        group="g",
        client_id=member,
        pid=1,
        seq=ts,
        now_ms=ts,
        config={"name": member, "group_protocol": protocol, "topics": [T]},
    )
    assert ev is not None and ev.generation == -1  # it reports no generation
    return ev


def started(member: str, ts: int, protocol: str = "consumer") -> Event:
    return java({"name": "startup_complete"}, member, ts, protocol)


def assigned(member: str, ts: int, *ps: int, protocol: str = "consumer") -> Event:
    tps = [{"topic": T, "partition": p} for p in ps]
    return java({"name": "partitions_assigned", "partitions": tps}, member, ts, protocol)


def revoked(member: str, ts: int, *ps: int, protocol: str = "consumer") -> Event:
    tps = [{"topic": T, "partition": p} for p in ps]
    return java({"name": "partitions_revoked", "partitions": tps}, member, ts, protocol)


def test_a_group_of_kgctl_and_java_members_reads_stable_once_all_are_reconciled() -> None:
    """Java members report no generation (-1): the round closes on their callbacks and
    the kgctl members' epoch (it never closed before: -1 never equals the epoch)."""
    history = consumer_member_history()[:10]  # a: epoch 1, owns 0-3, STABLE
    s = fold_all(GroupState(group="g"), history, 1030)
    assert not s.rebalancing
    s = fold_all(s, [started("j", 3000)], 3000)
    a_gives = [
        mev(
            "GroupHeartbeatAnswered", 3100, "a", 2, error="NONE", member_epoch=2,
            sent={"member_epoch": 1}, assignment={T: [0, 1]},
        ),
        mev("ReconciliationStarted", 3101, "a", 2, member_epoch=2, revoke={T: [2, 3]}),
        mev("MemberStateChanged", 3101, "a", 2, previous="STABLE", state="RECONCILING"),
        mev("PartitionsRevoked", 3110, "a", 2, partitions={T: [2, 3]}),
        mev("ReconciliationCompleted", 3110, "a", 2, member_epoch=2, assignment={T: [0, 1]}),
        mev("MemberStateChanged", 3111, "a", 2, previous="RECONCILING", state="ACKNOWLEDGING"),
        mev("MemberStateChanged", 3111, "a", 2, previous="ACKNOWLEDGING", state="STABLE"),
    ]  # fmt: skip
    s = fold_all(s, a_gives, 3111)
    assert s.rebalancing  # 2-3 have no owner yet: j has not taken them
    s = fold_all(s, [assigned("j", 3500, 2, 3)], 3500)
    assert not s.rebalancing
    assert s.current is not None and s.current.generation == 2
    assert s.current.stable_ms == 3500 and s.current.completed_ms == 3500
    assert set(s.current.members) == {"a", "j"}


def test_a_group_of_java_members_only_reads_stable_and_a_revocation_reopens_it() -> None:
    s = fold_all(
        GroupState(group="g"),
        [started("j1", 1000), started("j2", 1001), assigned("j1", 1100, 0, 1, 2, 3)],
        1100,
    )
    assert s.members["j2"].phase != PHASE_STABLE  # started, nothing from its callback yet
    s = fold_all(s, [assigned("j2", 1101)], 1101)  # Java calls back even with nothing
    assert not s.rebalancing
    s = fold_all(s, [revoked("j1", 2000, 2, 3)], 2000)
    assert s.rebalancing and s.members["j1"].phase == PHASE_RECONCILING
    s = fold_all(s, [assigned("j2", 2100, 2, 3)], 2100)
    assert s.rebalancing  # j1 has not said it is done
    s = fold_all(s, [assigned("j1", 2101)], 2101)
    assert not s.rebalancing
    assert s.owners()[(T, 2)] == ("j2",) and s.owners()[(T, 0)] == ("j1",)


def test_a_classic_java_member_is_on_its_way_from_revoke_to_assign() -> None:
    s = fold_all(
        GroupState(group="g"),
        [started("j", 1000, "classic"), assigned("j", 1100, 0, 1, protocol="classic")],
        1100,
    )
    assert not s.rebalancing and s.members["j"].phase == PHASE_STABLE
    s = fold_all(s, [revoked("j", 2000, 0, 1, protocol="classic")], 2000)
    assert s.rebalancing and s.members["j"].phase == PHASE_JOINING
    s = fold_all(s, [assigned("j", 2200, 0, 1, protocol="classic")], 2200)
    assert not s.rebalancing and s.members["j"].phase == PHASE_STABLE


# -- ConsumerGroupHeartbeat v0 and v1 on the wire ----------------------------------------


def _request(version: int, **over: object) -> object:
    fields: dict = dict(
        member_id="", member_epoch=0, instance_id=None, rebalance_timeout_ms=45000,
        topics=(T,), regex=None, assignor="uniform", owned={}, rack_id="rack-a",
    )  # fmt: skip
    fields.update(over)
    return heartbeat_request("g", version, **fields)


def test_a_v0_join_encodes_without_a_member_id_and_decodes_as_the_broker_reads_it() -> None:
    request = _request(0)
    sent = ConsumerGroupHeartbeatRequest.decode(request.encode(version=0), version=0)
    assert (sent.group_id, sent.member_id, sent.member_epoch) == ("g", "", 0)
    assert (sent.rack_id, sent.rebalance_timeout_ms) == ("rack-a", 45000)
    assert (sent.subscribed_topic_names, sent.server_assignor) == ([T], "uniform")
    assert sent.topic_partitions == []


def test_v0_cannot_carry_a_regex_and_v1_does() -> None:
    with pytest.raises(Unsupported, match="v0 has no broker-side regex"):
        _request(0, topics=(), regex="orders-.*")
    # Clearing a regex ("") is no regex: a v0 request may go without it.
    _request(0, regex="")
    request = _request(1, member_id="mid-1", topics=(), regex="orders-.*")
    sent = ConsumerGroupHeartbeatRequest.decode(request.encode(version=1), version=1)
    assert (sent.member_id, sent.subscribed_topic_regex) == ("mid-1", "orders-.*")


def test_a_v0_answer_names_the_member() -> None:
    topic_id = uuid.uuid4()
    answer = ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=0, error_message=None, member_id="broker-made",
        member_epoch=4, heartbeat_interval_ms=500,
        assignment=ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions(
                    topic_id=topic_id, partitions=[0, 2]
                )
            ]
        ),
    )  # fmt: skip
    got = heartbeat_answer(
        ConsumerGroupHeartbeatResponse.decode(answer.encode(version=0), version=0), 0
    )
    assert (got.error, got.member_id, got.member_epoch, got.api_version) == (
        "NONE", "broker-made", 4, 0,
    )  # fmt: skip
    assert got.assignment == {str(topic_id): frozenset({0, 2})}
