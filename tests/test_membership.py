"""The KIP-848 member's state machine (pure): the steps Java's membership manager takes."""

from __future__ import annotations

from kgctl.member.membership import (
    LEAVE_EPOCH,
    LEAVE_EPOCH_STATIC,
    Answer,
    Backoff,
    CommitKind,
    Membership,
    MemberState,
    Subscription,
    commit_retried,
)

ORDERS = "id-orders"  # a topic id, as assignments carry them
NAMES = {ORDERS: "orders"}


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


def joined(instance_id: str | None = None) -> Membership:
    """A member that joined and owns orders[0,1] at epoch 3, stable."""
    m = Membership("mid-1", instance_id=instance_id)
    m.topics_known(NAMES)
    m.subscribe(Subscription(frozenset({"orders"})))
    m.next_heartbeat(0)
    out = m.on_answer(Answer(member_epoch=3, heartbeat_interval_ms=5000,
                             assignment={ORDERS: fs(0, 1)}), 10)  # fmt: skip
    assert out.reconcile is not None
    m.reconciled()
    m.next_heartbeat(20)
    m.on_answer(Answer(member_epoch=3, heartbeat_interval_ms=5000), 30)
    assert m.state is MemberState.STABLE
    return m


def test_a_join_sends_every_field_with_epoch_0_then_only_what_changed() -> None:
    m = Membership("mid-1", instance_id="app-1", rebalance_timeout_ms=45000)
    m.subscribe(Subscription(frozenset({"orders"}), server_assignor="uniform"))
    assert m.state is MemberState.JOINING
    assert m.heartbeat_due(0)
    first = m.next_heartbeat(0)
    assert first.member_epoch == 0
    assert first.instance_id == "app-1"
    assert first.rebalance_timeout_ms == 45000
    assert first.subscribed_topic_names == ("orders",)
    assert first.server_assignor == "uniform"
    assert first.owned == {}
    assert not m.heartbeat_due(1)  # one request in flight at a time
    # The first answer carries the assignment, here none: the member is STABLE.
    m.on_answer(Answer(member_epoch=1, heartbeat_interval_ms=3000, assignment={}), 50)
    assert m.state is MemberState.STABLE
    assert m.interval_ms == 3000
    assert not m.heartbeat_due(3049)
    assert m.heartbeat_due(3050)  # the interval the broker gave
    second = m.next_heartbeat(3050)
    assert second.member_epoch == 1
    # A static member's instance id goes with every heartbeat, as Java's does (the
    # conformance suite's k848 situations saw it on each of Java's).
    assert (second.instance_id, second.rebalance_timeout_ms) == ("app-1", None)
    assert second.subscribed_topic_names is None and second.server_assignor is None
    assert second.owned is None
    # A new subscription goes out at once, and only it.
    m.on_answer(Answer(member_epoch=1, heartbeat_interval_ms=3000), 3100)
    m.subscribe(Subscription(frozenset({"orders", "audit"}), server_assignor="uniform"))
    assert m.heartbeat_due(3101)
    third = m.next_heartbeat(3101)
    assert third.subscribed_topic_names == ("audit", "orders")
    assert third.server_assignor is None


def test_reconciliation_revokes_then_assigns_then_acknowledges_at_once() -> None:
    m = joined()
    out = m.on_answer(Answer(member_epoch=5, assignment={ORDERS: fs(1, 2)}), 5000)
    assert m.state is MemberState.RECONCILING
    plan = out.reconcile
    assert plan is not None and plan.epoch == 5
    assert plan.revoke == {"orders": fs(0)}
    assert plan.assign == {"orders": fs(2)}
    m.reconciled()
    assert m.state is MemberState.ACKNOWLEDGING
    assert m.owned() == {"orders": fs(1, 2)}
    assert m.heartbeat_due(5001)  # the acknowledgement does not wait for the interval
    ack = m.next_heartbeat(5001)
    assert ack.member_epoch == 5 and ack.owned == {ORDERS: fs(1, 2)}
    assert m.state is MemberState.STABLE  # Java: acknowledged as the request goes out
    m.on_answer(Answer(member_epoch=5), 5010)
    assert m.state is MemberState.STABLE


def test_only_the_resolvable_part_of_an_assignment_is_taken_until_its_topic_is_known() -> None:
    m = joined()
    audit = "id-audit"
    out = m.on_answer(Answer(member_epoch=6, assignment={ORDERS: fs(0, 1), audit: fs(0)}), 1)
    assert out.reconcile is None and m.state is MemberState.STABLE  # nothing it can name
    out = m.topics_known({audit: "audit"})
    assert out.reconcile is not None
    assert out.reconcile.assign == {"audit": fs(0)} and out.reconcile.revoke == {}


def test_fenced_loses_its_partitions_and_rejoins_with_epoch_0_and_the_same_id() -> None:
    for error in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
        m = joined()
        m.next_heartbeat(6000)
        out = m.on_answer(Answer(error=error), 6010)
        assert out.state is MemberState.FENCED
        assert out.lost == {"orders": fs(0, 1)}
        assert m.owned() == {}
        assert not m.heartbeat_due(6011)  # not before onPartitionsLost returned
        m.lost_handled()
        assert m.state is MemberState.JOINING
        hb = m.next_heartbeat(6012)
        assert (hb.member_id, hb.member_epoch) == ("mid-1", 0)
        assert hb.subscribed_topic_names == ("orders",)  # a join carries every field


def test_errors_java_treats_as_fatal_end_the_member() -> None:
    for error in ("UNRELEASED_INSTANCE_ID", "FENCED_INSTANCE_ID", "UNSUPPORTED_ASSIGNOR",
                  "GROUP_MAX_SIZE_REACHED", "INVALID_REQUEST"):  # fmt: skip
        m = joined()
        m.next_heartbeat(6000)
        out = m.on_answer(Answer(error=error, message="why"), 6010)
        assert (out.state, out.fatal) == (MemberState.FATAL, error)
        assert out.lost == {"orders": fs(0, 1)}
        assert not m.heartbeat_due(10**9)


def test_a_coordinator_error_finds_the_coordinator_again_and_resends_every_field() -> None:
    m = joined()
    m.next_heartbeat(6000)
    out = m.on_answer(Answer(error="NOT_COORDINATOR"), 6010)
    assert out.find_coordinator and m.state is MemberState.STABLE
    assert m.heartbeat_due(6011)  # at once (once found), not an interval later
    hb = m.next_heartbeat(6020)
    assert hb.subscribed_topic_names == ("orders",) and hb.owned == {ORDERS: fs(0, 1)}
    m.on_answer(Answer(member_epoch=3), 6030)
    assert not m.heartbeat_due(6031)
    m.next_heartbeat(11030)
    out = m.send_failed(16020)
    # No answer: Java backs off retry.backoff.ms (+/-20 %) before the next heartbeat.
    assert out.find_coordinator and 80 <= out.retry_after_ms <= 120
    assert not m.heartbeat_due(16020 + out.retry_after_ms - 1)
    due = 16020 + out.retry_after_ms
    assert m.heartbeat_due(due) and m.next_heartbeat(due).rebalance_timeout_ms is not None


def test_leaving_revokes_first_then_sends_epoch_minus_1_or_minus_2_when_static() -> None:
    for instance_id, epoch in ((None, LEAVE_EPOCH), ("app-1", LEAVE_EPOCH_STATIC)):
        m = joined(instance_id)
        assert m.leave() == {"orders": fs(0, 1)}
        assert m.state is MemberState.PREPARE_LEAVING
        assert not m.heartbeat_due(10**9)  # the leave waits for the revocation
        m.revoked_for_leave()
        hb = m.next_heartbeat(7000)
        assert (hb.member_epoch, hb.instance_id) == (epoch, instance_id)
        # Java leaves as the request goes out, and ignores the answer, even an error.
        assert m.state is MemberState.UNSUBSCRIBED and m.leave_pending
        out = m.on_answer(Answer(error="UNKNOWN_MEMBER_ID"), 7010)
        assert m.state is MemberState.UNSUBSCRIBED and not m.leave_pending
        assert out.lost == {} and out.fatal is None


def test_a_poll_interval_expiry_leaves_loses_and_rejoins_on_the_next_poll() -> None:
    m = joined()
    assert m.poll_timer_expired() == {"orders": fs(0, 1)}
    hb = m.next_heartbeat(8000)
    assert hb.member_epoch == LEAVE_EPOCH
    assert m.state is MemberState.STALE  # as the leave goes out
    m.on_answer(Answer(member_epoch=LEAVE_EPOCH), 8010)
    assert m.state is MemberState.STALE
    assert not m.heartbeat_due(10**9)
    m.polled()
    assert m.state is MemberState.JOINING
    assert m.next_heartbeat(9000).member_epoch == 0


def test_a_static_member_leaves_with_epoch_minus_2_on_a_poll_timeout_too() -> None:
    m = joined("app-1")
    m.poll_timer_expired()
    assert m.next_heartbeat(8000).member_epoch == LEAVE_EPOCH_STATIC


def test_switching_between_names_and_a_regex_clears_the_other() -> None:
    # The broker subscribes a member to the names and the regex it was last sent.
    m = joined()
    m.subscribe(Subscription(regex="orders-.*"))
    hb = m.next_heartbeat(6000)
    assert hb.subscribed_topic_regex == "orders-.*" and hb.subscribed_topic_names == ()
    m.on_answer(Answer(member_epoch=4), 6010)
    assert m.next_heartbeat(12000).subscribed_topic_regex is None  # unchanged: not sent
    m.on_answer(Answer(member_epoch=4), 12010)
    m.subscribe(Subscription(frozenset({"audit"})))
    hb = m.next_heartbeat(12020)
    assert hb.subscribed_topic_names == ("audit",) and hb.subscribed_topic_regex == ""


# -- retries: Java's exponential backoff with jitter ---------------------------------------


def test_backoff_doubles_from_retry_backoff_to_its_maximum() -> None:
    # No jitter drawn (rand at the middle of its range): the bare sequence.
    middle = Backoff(100, 1000, rand=lambda: 0.5)
    assert [middle.wait_ms(n) for n in range(7)] == [100, 200, 400, 800, 1000, 1000, 1000]
    # The jitter spreads each wait by +/-20 % and never passes the maximum.
    low, high = Backoff(100, 1000, rand=lambda: 0.0), Backoff(100, 1000, rand=lambda: 0.999999)
    assert [low.wait_ms(n) for n in range(5)] == [80, 160, 320, 640, 800]
    assert [high.wait_ms(n) for n in range(5)] == [119, 239, 479, 959, 1000]
    # A maximum at or below the first wait: every wait is the maximum, unjittered.
    assert [Backoff(500, 200).wait_ms(n) for n in range(3)] == [200, 200, 200]


def test_backoff_jitter_is_drawn_per_wait() -> None:
    draws = iter([0.0, 1.0 - 1e-9, 0.25])
    b = Backoff(100, 10000, rand=lambda: next(draws))
    assert [b.wait_ms(0), b.wait_ms(0), b.wait_ms(2)] == [80, 119, 360]


def test_a_retriable_error_retries_after_a_growing_backoff_not_an_interval() -> None:
    m = Membership("mid-1", rand=lambda: 0.5)
    m.topics_known(NAMES)
    m.subscribe(Subscription(frozenset({"orders"})))
    m.next_heartbeat(0)
    m.on_answer(Answer(member_epoch=3, heartbeat_interval_ms=5000, assignment={}), 10)
    assert m.state is MemberState.STABLE
    now, waits = 5010, []
    for _ in range(6):
        assert m.heartbeat_due(now)
        m.next_heartbeat(now)
        out = m.on_answer(Answer(error="COORDINATOR_LOAD_IN_PROGRESS"), now + 5)
        assert out.fatal is None and out.state is MemberState.STABLE
        waits.append(out.retry_after_ms)
        assert not m.heartbeat_due(now + 5 + out.retry_after_ms - 1)
        now += 5 + out.retry_after_ms
    assert waits == [100, 200, 400, 800, 1000, 1000]
    # A success starts the sequence again, and the interval governs once more.
    m.next_heartbeat(now)
    m.on_answer(Answer(member_epoch=3, heartbeat_interval_ms=5000), now + 5)
    assert not m.heartbeat_due(now + 5 + 4999) and m.heartbeat_due(now + 5 + 5000)
    m.next_heartbeat(now + 5005)
    out = m.on_answer(Answer(error="COORDINATOR_LOAD_IN_PROGRESS"), now + 5010)
    assert out.retry_after_ms == 100


def test_a_join_an_acknowledgement_and_a_leave_do_not_wait_for_the_backoff() -> None:
    # Java's shouldHeartbeatNow: these go as soon as nothing is in flight.
    m = Membership("mid-1", rand=lambda: 0.5)
    m.topics_known(NAMES)
    m.subscribe(Subscription(frozenset({"orders"})))
    m.next_heartbeat(0)
    out = m.send_failed(10)
    assert out.retry_after_ms == 100 and m.state is MemberState.JOINING
    assert m.heartbeat_due(11)
    m = joined()
    m.next_heartbeat(6000)
    assert m.send_failed(6010).retry_after_ms > 0
    m.leave()
    m.revoked_for_leave()
    assert m.heartbeat_due(6011)


def test_fencing_and_coordinator_errors_retry_at_once_and_restart_the_backoff() -> None:
    for error in ("NOT_COORDINATOR", "FENCED_MEMBER_EPOCH"):
        m = joined()
        m.next_heartbeat(6000)
        m.on_answer(Answer(error="COORDINATOR_LOAD_IN_PROGRESS"), 6010)
        m.next_heartbeat(6200)
        out = m.on_answer(Answer(error=error), 6210)
        assert out.retry_after_ms == 0
        m.lost_handled()
        assert m.heartbeat_due(6211)
        m.next_heartbeat(6211)
        assert m.on_answer(Answer(error="COORDINATOR_LOAD_IN_PROGRESS"), 6220).retry_after_ms in (
            range(80, 121)
        )


# -- the rack (client.rack) -----------------------------------------------------------------


def test_the_rack_goes_with_every_join_and_with_nothing_else() -> None:
    m = Membership("mid-1", rack_id="eu-west-1a")
    m.topics_known(NAMES)
    m.subscribe(Subscription(frozenset({"orders"})))
    assert m.next_heartbeat(0).rack_id == "eu-west-1a"
    m.on_answer(Answer(member_epoch=1, heartbeat_interval_ms=3000, assignment={}), 10)
    assert m.next_heartbeat(3010).rack_id is None
    # A lost request resends the other fields; Java leaves the rack to the join.
    m.send_failed(3020)
    assert m.next_heartbeat(3200).rack_id is None
    m.on_answer(Answer(error="UNKNOWN_MEMBER_ID"), 3210)
    m.lost_handled()
    assert m.next_heartbeat(3211).rack_id == "eu-west-1a"  # the rejoin is a join
    plain = Membership("mid-2")
    plain.subscribe(Subscription(frozenset({"orders"})))
    assert plain.next_heartbeat(0).rack_id is None  # no --client-rack: null, as Java


# -- commits: what Java sends again ---------------------------------------------------------


def test_a_stale_epoch_is_retried_only_by_the_auto_commit_before_a_rebalance() -> None:
    before = CommitKind.BEFORE_REBALANCE
    assert commit_retried(before, "STALE_MEMBER_EPOCH", False, in_group=True)
    assert not commit_retried(before, "STALE_MEMBER_EPOCH", False, in_group=False)
    for kind in (CommitKind.INTERVAL, CommitKind.SYNC, CommitKind.ASYNC):
        assert not commit_retried(kind, "STALE_MEMBER_EPOCH", False, in_group=True)


def test_retriable_commit_errors_are_retried_except_by_commit_async() -> None:
    for kind in (CommitKind.BEFORE_REBALANCE, CommitKind.INTERVAL, CommitKind.SYNC):
        assert commit_retried(kind, "COORDINATOR_LOAD_IN_PROGRESS", True, in_group=True)
        assert commit_retried(kind, "KafkaConnectionError", True, in_group=False)
        assert not commit_retried(kind, "UNKNOWN_MEMBER_ID", False, in_group=True)
    assert not commit_retried(CommitKind.ASYNC, "COORDINATOR_LOAD_IN_PROGRESS", True, True)
    # A deleted topic would hold the revocation forever: not retried before a rebalance.
    before = CommitKind.BEFORE_REBALANCE
    assert not commit_retried(before, "UNKNOWN_TOPIC_OR_PARTITION", True, in_group=True)
    assert commit_retried(CommitKind.SYNC, "UNKNOWN_TOPIC_OR_PARTITION", True, in_group=True)


def test_a_member_is_in_the_group_while_it_has_an_epoch_and_is_not_leaving() -> None:
    m = joined()
    assert m.in_group
    m.next_heartbeat(6000)
    m.on_answer(Answer(error="FENCED_MEMBER_EPOCH"), 6010)
    assert not m.in_group  # fenced: Java's commit manager has no epoch to retry with
    m = joined()
    m.leave()
    assert not m.in_group


def test_a_retriable_error_answer_makes_the_next_heartbeat_carry_every_field() -> None:
    # Java resets its sent fields on an error answer; seen in the conformance suite's
    # k848-heartbeat-coordinator-load-in-progress: Java's retry carried the rebalance
    # timeout, the topics and the owned partitions.
    m = joined()
    m.next_heartbeat(6000)
    out = m.on_answer(Answer(error="COORDINATOR_LOAD_IN_PROGRESS"), 6010)
    assert out.fatal is None and m.state is MemberState.STABLE
    hb = m.next_heartbeat(12000)
    assert hb.rebalance_timeout_ms == 300000
    assert hb.subscribed_topic_names == ("orders",) and hb.owned == {ORDERS: fs(0, 1)}


def test_a_leave_says_what_changed_no_partitions_and_for_good_no_topics() -> None:
    # Java's close unsubscribes, then its leave heartbeat carries what changed since the
    # last one: an empty topic list and an empty owned list (k848-first-join).
    for instance_id, epoch in ((None, LEAVE_EPOCH), ("app-1", LEAVE_EPOCH_STATIC)):
        m = joined(instance_id)
        m.leave()
        m.revoked_for_leave()
        hb = m.next_heartbeat(7000)
        assert (hb.member_epoch, hb.instance_id) == (epoch, instance_id)
        assert hb.subscribed_topic_names == () and hb.owned == {}
        assert hb.rebalance_timeout_ms is None and hb.server_assignor is None  # unchanged


def test_a_leave_on_a_poll_timeout_keeps_the_subscription_and_drops_the_partitions() -> None:
    m = joined()
    m.poll_timer_expired()
    hb = m.next_heartbeat(8000)
    assert hb.subscribed_topic_names is None  # still subscribed: unchanged, not sent
    assert hb.owned == {}


def test_a_leave_after_a_failed_request_carries_every_field() -> None:
    m = joined()
    m.next_heartbeat(6000)
    m.send_failed(6010)  # nothing is known as sent any more
    m.leave()
    m.revoked_for_leave()
    hb = m.next_heartbeat(7000)
    assert hb.rebalance_timeout_ms == 300000
    assert hb.subscribed_topic_names == () and hb.owned == {}
