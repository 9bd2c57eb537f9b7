"""A member of a KIP-848 `consumer`-protocol group: `kgctl join --group-protocol consumer`.

The same member as the classic one (`runner.Member`: events, live control, trace topic,
stopping, totals), with the group protocol replaced. Like Java's consumer it has two
threads:

- the **heartbeat thread** (Java's background thread, `ConsumerHeartbeatRequestManager`):
  finds the coordinator, sends ConsumerGroupHeartbeat when `Membership` says one is due
  (on the interval the broker gives, at once after a reconciliation or a change),
  hands every answer to `Membership`, and checks the poll timer (max.poll.interval.ms);
- the **poll thread** (the application): polls records, and carries out what the
  heartbeat thread decided: a reconciliation (commit, revoke, assign: then `Membership`
  acknowledges at once with the next heartbeat), partitions lost to fencing, a fatal
  error.

`Membership` (pure, `membership.py`) decides everything; both threads reach it under one
lock. Records come from a KafkaConsumer built without a group and given its partitions
with `assign()`: kafka-python's fetcher, positions and offset reset are reused as they
are, and the group's offsets are fetched and committed by this member (OffsetFetch,
OffsetCommit v9 with the member epoch) through `kgctl/adapters/consumer_group.py`.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from typing import Any

from kgctl.adapters import clients
from kgctl.adapters.consumer_group import (
    HEARTBEAT_MAX_VERSION,
    GroupChannel,
    HeartbeatAnswer,
    NoCoordinator,
    Unsupported,
    heartbeat_request,
    seek,
    topic_partitions,
)
from kgctl.errors import MemberFailedError
from kgctl.member.membership import (
    Answer,
    Backoff,
    CommitKind,
    Heartbeat,
    Membership,
    MemberState,
    Outcome,
    Partitions,
    Reconcile,
    Subscription,
    commit_retried,
    re2j_problem,
)
from kgctl.member.reasons import fatal_error
from kgctl.member.runner import Member
from kgctl.model.kafka_errors import COMMIT_LOSES_COORDINATOR, is_retriable

# Java's auto.commit.interval.ms default.
AUTO_COMMIT_INTERVAL_MS = 5000
# Java's max.poll.interval.ms default: also the rebalance timeout the member sends.
DEFAULT_MAX_POLL_INTERVAL_MS = 300000
# How often the heartbeat thread wakes when nothing is due (poll timer, stop).
TICK_S = 0.05
# Java's retry.backoff.ms and retry.backoff.max.ms defaults (-X sets either).
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
# How often unresolved topic ids trigger another full Metadata request.
METADATA_RETRY_S = 0.5


def _doc(parts: Partitions) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(parts.items()) if ps}


def _count(parts: Partitions) -> int:
    return sum(len(ps) for ps in parts.values())


def _pairs(parts: Partitions) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in parts.items() for p in ps}


class ConsumerProtocolMember(Member):
    """`kgctl join --group-protocol consumer`: a KIP-848 member."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = self.config
        self.max_poll_interval_ms = cfg.max_poll_interval_ms or DEFAULT_MAX_POLL_INTERVAL_MS
        props = self.settings.properties
        self.retry_backoff_ms = int(props.get("retry.backoff.ms", RETRY_BACKOFF_MS))
        self.retry_backoff_max_ms = int(props.get("retry.backoff.max.ms", RETRY_BACKOFF_MAX_MS))
        self.auto_commit_interval_ms = int(
            props.get("auto.commit.interval.ms", AUTO_COMMIT_INTERVAL_MS)
        )
        self.membership = Membership(
            # ConsumerGroupHeartbeat v1: the client makes its member id, once per process.
            str(uuid.uuid4()),
            instance_id=cfg.instance_id,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            retry_backoff_ms=self.retry_backoff_ms,
            retry_backoff_max_ms=self.retry_backoff_max_ms,
            rack_id=cfg.client_rack,
        )
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._channel: GroupChannel | None = None
        self._coordinator_node: Any = None
        self._coordinator_retry_at = 0.0
        # Java's coordinator manager backs off its failed lookups as its heartbeats do.
        self._lookup_backoff = Backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)
        self._lookup_failures = 0
        self._last_poll = time.monotonic()
        self._pending_plan: Reconcile | None = None
        self._plan_started = 0.0
        self._pending_lost: Partitions | None = None
        self._fatal: tuple[str, str] | None = None
        self._positions: dict[tuple[str, int], int] = {}  # next offset to commit
        self._committed: dict[tuple[str, int], int] = {}
        self._next_auto_commit = 0.0
        self._last_state = self.membership.state
        self._hb_sent_at = 0.0
        self._next_metadata = 0.0
        self._crash: BaseException | None = None
        self.heartbeat_version = HEARTBEAT_MAX_VERSION  # from ApiVersions at start
        # --client-pattern (Java's subscribe(Pattern)): matched here against metadata
        # every metadata.max.age.ms (Java refreshes its metadata on that age too); a
        # `subscribe` control line replaces it.
        self._client_pattern = cfg.client_pattern
        self._pattern_every_s = int(props.get("metadata.max.age.ms", 300000)) / 1000
        self._next_pattern_check = 0.0

    # -- identity: the envelope's generation is the member epoch ------------------------
    def _identity(self) -> tuple[str, int]:
        m = self.membership
        return m.member_id, m.epoch

    # -- start: a group-less fetcher, the channel, the heartbeat thread ------------------
    def _start(self) -> None:
        cfg = self.config
        overrides: dict[str, Any] = {
            "group_id": None,
            "client_id": self.client_id,
            "enable_auto_commit": False,
            "auto_offset_reset": cfg.offset_reset,
            "fetch_max_bytes": 8 * 1024 * 1024,
        }
        if cfg.client_rack:
            overrides["client_rack"] = cfg.client_rack  # Fetch's RackId too, as Java
        if cfg.max_records is not None:
            overrides["max_poll_records"] = max(1, min(500, cfg.max_records))
        self._consumer = clients.consumer(self.settings, self.client_id, **overrides)
        self._channel = GroupChannel(self._consumer, cfg.group, int(self.settings.timeout_s * 1000))
        self._negotiate_version()
        self.emitter.identity = self._identity
        names = self._channel.topic_names()
        self.membership.names.update(names)
        if cfg.topics:
            self.topics_missing(sorted(set(cfg.topics) - set(names.values())))
        topics = self._matching(names) if self._client_pattern else cfg.topics
        self._next_pattern_check = time.monotonic() + self._pattern_every_s
        self._subscribe(topics, cfg.pattern, first=True)
        self._hb_thread = threading.Thread(
            target=self._heartbeat_loop, name="kgctl-consumer-heartbeat", daemon=True
        )
        self._hb_thread.start()

    def _negotiate_version(self) -> None:
        """ConsumerGroupHeartbeat's version, from the brokers' ApiVersions: v1 where served
        (Apache Kafka 4.0+), else v0 (3.7-3.9), on which the broker makes the member id (the
        join carries "") and no regex can be sent."""
        assert self._channel is not None
        cfg = self.config
        try:
            self.heartbeat_version = self._channel.heartbeat_version()
        except Unsupported:
            raise fatal_error(
                "UNSUPPORTED_VERSION",
                cfg.group,
                "the brokers do not serve ConsumerGroupHeartbeat: --group-protocol consumer "
                "needs Apache Kafka 3.7 or later with the consumer protocol enabled (or use "
                "--group-protocol classic)",
            ) from None
        if self.heartbeat_version >= 1:
            return
        if cfg.pattern is not None:
            raise fatal_error(
                "UNSUPPORTED_VERSION",
                cfg.group,
                "the brokers serve ConsumerGroupHeartbeat v0 only, which has no broker-side "
                "regex: --pattern needs v1 (Apache Kafka 4.0 or later); subscribe by topic "
                "names",
            )
        with self._lock:
            self.membership.member_id = ""  # v0: the broker's answer names the member

    def _subscribe(self, topics: list[str], pattern: str | None, *, first: bool = False) -> None:
        sub = Subscription(
            topics=frozenset(topics),
            regex=pattern,
            server_assignor=self.config.remote_assignor,
        )
        with self._lock:
            before = self.membership.state
            joined = self.membership.subscription
            self.membership.subscribe(sub)
            if first:
                self.emit("RejoinRequested", reason="first_join")
            else:
                self.emit(
                    "RejoinRequested",
                    reason="subscription_changed",
                    subscription=sorted(topics) if pattern is None else [],
                    joined_subscription=sorted(joined.topics),
                    pattern=pattern,
                    joined_pattern=joined.regex,
                )
            self._state_changed(before, "subscribed")
        self._wake.set()

    # -- the heartbeat thread (Java's background thread) ---------------------------------
    def _heartbeat_loop(self) -> None:
        while not self._hb_stop.is_set():
            try:
                self._heartbeat_tick()
            except Exception as exc:  # a bug: the poll thread ends the member with it
                self._crash = exc
                return
            self._wake.wait(TICK_S)
            self._wake.clear()

    def _matching(self, names: dict[str, str]) -> list[str]:
        """The topics --client-pattern matches, whole names as Java's Pattern.matches,
        internal topics left out."""
        assert self._client_pattern is not None and self._channel is not None
        regex = re.compile(self._client_pattern)
        internal = self._channel.internal
        return sorted(
            {n for n in names.values() if n not in internal and regex.fullmatch(n) is not None}
        )

    def _topic_names(self) -> dict[str, str] | None:
        """The cluster's topic names by id, from a metadata request (None: it failed,
        said as a heartbeat-side failure; the caller tries again later)."""
        assert self._channel is not None
        try:
            return self._channel.topic_names()
        except Exception as exc:
            self.emit(
                "HeartbeatFailed", error=clients.error_name(exc), transport=True, metadata=True
            )
            return None

    def _rematch_pattern(self, now: float) -> None:
        """Java's client-side pattern: on fresh metadata, the matching names; a change
        is a new subscription, sent with the next heartbeat."""
        self._next_pattern_check = now + self._pattern_every_s
        names = self._topic_names()
        if names is None:
            return
        with self._lock:
            self.membership.names.update(names)
            if self._client_pattern is None:
                return
            matched = self._matching(names)
            if frozenset(matched) != self.membership.subscription.topics:
                self._subscribe(matched, None)

    def _heartbeat_tick(self) -> None:
        m = self.membership
        now = time.monotonic()
        if self._client_pattern is not None and now >= self._next_pattern_check:
            self._rematch_pattern(now)
        with self._lock:
            self._check_poll_timer(now)
            unknown = [t for t in (m.target_ids or {}) if t not in m.names]
        if unknown and now >= self._next_metadata:
            self._resolve_topics(now)
        with self._lock:
            if not m.heartbeat_due(_ms(now)):
                return
        node = self._coordinator_for(now)
        if node is None:
            return
        with self._lock:
            if not m.heartbeat_due(_ms(time.monotonic())):
                return
            before = m.state
            sent_epoch = m.epoch
            hb = m.next_heartbeat(_ms(time.monotonic()))
            # Java leaves ACKNOWLEDGING and LEAVING as the request goes out.
            self._state_changed(
                before,
                "acknowledgement sent"
                if before is MemberState.ACKNOWLEDGING
                else "leave heartbeat sent",
            )
        self._hb_sent_at = time.monotonic()
        try:
            answer = self._send(node, hb)
        except Unsupported:
            with self._lock:
                self._fatal = (
                    "UNSUPPORTED_VERSION",
                    f"the coordinator does not serve ConsumerGroupHeartbeat v"
                    f"{self.heartbeat_version}, which the brokers announced; --group-protocol "
                    "consumer needs Apache Kafka 3.7 or later (or use --group-protocol classic)",
                )
            return
        except Exception as exc:
            with self._lock:
                outcome = m.send_failed(_ms(time.monotonic()))
                self.emit(
                    "HeartbeatFailed",
                    error=clients.error_name(exc),
                    transport=True,
                    member_epoch=sent_epoch,
                    retry_in_ms=outcome.retry_after_ms,
                )
                self._lose_coordinator(clients.error_name(exc))
                self._after(outcome, before)
            return
        rtt = round((time.monotonic() - self._hb_sent_at) * 1000, 1)
        with self._lock:
            self._on_answer(hb, answer, rtt, before)

    def _resolve_topics(self, now: float) -> None:
        """Java's membership manager asks for metadata when the target names topic ids it
        does not know (a topic created after the member started, a regex match): until
        then that part of the assignment stays pending and the rest is reconciled."""
        self._next_metadata = now + METADATA_RETRY_S
        names = self._topic_names()
        if names is None:
            return
        m = self.membership
        with self._lock:
            before = m.state
            fresh = {t: n for t, n in names.items() if t not in m.names}
            outcome = m.topics_known(names)
            if fresh and any(t in (m.target_ids or {}) for t in fresh):
                self.emit(
                    "TargetAssignmentReceived",
                    member_epoch=m.epoch,
                    target=_doc(
                        m.named({t: ps for t, ps in (m.target_ids or {}).items() if t in m.names})
                    ),
                    owned=_doc(m.owned()),
                    pending=sorted(t for t in (m.target_ids or {}) if t not in m.names),
                    resolved=sorted(n for t, n in fresh.items() if t in (m.target_ids or {})),
                )
            self._after(outcome, before)

    def _send(self, node: Any, hb: Heartbeat) -> HeartbeatAnswer:
        assert self._channel is not None
        request = heartbeat_request(
            self._channel.group,
            self.heartbeat_version,
            member_id=hb.member_id,
            member_epoch=hb.member_epoch,
            instance_id=hb.instance_id,
            rebalance_timeout_ms=hb.rebalance_timeout_ms,
            topics=hb.subscribed_topic_names,
            regex=hb.subscribed_topic_regex,
            assignor=hb.server_assignor,
            owned=hb.owned,
            rack_id=hb.rack_id,
        )
        return self._channel.heartbeat(node, request, self.heartbeat_version)

    def _coordinator_for(self, now: float) -> Any:
        """The coordinator's node, found first if unknown (Java: CoordinatorRequestManager)."""
        if self._coordinator_node is not None:
            return self._coordinator_node
        if now < self._coordinator_retry_at:
            return None
        assert self._channel is not None
        started = time.monotonic()
        self.emit("CoordinatorLookupSent", node="least_loaded")
        try:
            found = self._channel.find_coordinator()
        except (NoCoordinator, Exception) as exc:
            error = exc.error if isinstance(exc, NoCoordinator) else clients.error_name(exc)
            # Java's retry.backoff.ms, doubled per failure up to retry.backoff.max.ms,
            # with jitter.
            wait_ms = self._lookup_backoff.wait_ms(self._lookup_failures)
            self._lookup_failures += 1
            self.emit("CoordinatorLost", coordinator=None, error=error, retry_in_ms=wait_ms)
            self._coordinator_retry_at = time.monotonic() + wait_ms / 1000
            return None
        self._lookup_failures = 0
        self._coordinator_node = found.connection
        self.emit(
            "CoordinatorFound",
            coordinator=found.node,
            host=found.host,
            port=found.port,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
        return found.node

    def _lose_coordinator(self, error: str) -> None:
        if self._coordinator_node is not None:
            self.emit("CoordinatorLost", coordinator=self._coordinator_node, error=error)
        self._coordinator_node = None

    def _on_answer(
        self, hb: Heartbeat, got: HeartbeatAnswer, rtt: float, before: MemberState
    ) -> None:
        m = self.membership
        epoch_before = m.epoch
        answer = Answer(
            error=got.error,
            member_id=got.member_id,
            member_epoch=got.member_epoch,
            heartbeat_interval_ms=got.heartbeat_interval_ms,
            assignment=got.assignment,
            message=got.message,
        )
        leaving = before is MemberState.LEAVING
        outcome = m.on_answer(answer, _ms(time.monotonic()))
        plain = (
            got.error == "NONE"
            and got.assignment is None
            and got.member_epoch == epoch_before
            and hb.owned is None
            and hb.subscribed_topic_names is None
            and hb.subscribed_topic_regex is None
            and hb.rebalance_timeout_ms is None
            and not leaving
        )
        if plain:
            self.emit(
                "HeartbeatSucceeded",
                rtt_ms=rtt,
                throttle_time_ms=got.throttle_time_ms,
                member_epoch=got.member_epoch,
            )
        else:
            self.emit(
                "GroupHeartbeatAnswered",
                sent=_sent_doc(hb, m),
                error=got.error,
                message=got.message,
                member_epoch=got.member_epoch,
                previous_epoch=epoch_before if not leaving else hb.member_epoch,
                heartbeat_interval_ms=got.heartbeat_interval_ms,
                assignment=None if got.assignment is None else _doc(m.named(got.assignment)),
                rtt_ms=rtt,
                api_version=got.api_version,
            )
        if got.error != "NONE":
            self.emit(
                "HeartbeatFailed",
                error=got.error,
                rtt_ms=rtt,
                transport=False,
                member_epoch=hb.member_epoch,
                retry_in_ms=outcome.retry_after_ms,
            )
        if got.assignment is not None and got.error == "NONE":
            self._target_received()
        self._after(outcome, before)

    def _target_received(self) -> None:
        m = self.membership
        target = m.target_ids or {}
        pending = frozenset(t for t in target if t not in m.names)
        self.emit(
            "TargetAssignmentReceived",
            member_epoch=m.epoch,
            target=_doc(m.named({t: ps for t, ps in target.items() if t in m.names})),
            owned=_doc(m.owned()),
            pending=sorted(pending),
        )

    def _after(self, outcome: Outcome, before: MemberState) -> None:
        """Act on what `Membership` decided (under the lock, on either thread)."""
        m = self.membership
        if outcome.fatal is not None:
            self._fatal = (outcome.fatal, outcome.note)
            if outcome.lost:
                self._pending_lost = outcome.lost
        elif outcome.lost or m.state is MemberState.FENCED:
            if m.state is MemberState.FENCED and before is not MemberState.FENCED:
                self.emit(
                    "MemberFenced",
                    error=outcome.note,
                    member_epoch=m.epoch,
                    lost=_doc(outcome.lost),
                )
            self._pending_lost = outcome.lost
        if outcome.find_coordinator:
            self._lose_coordinator(outcome.note or "coordinator error")
        if outcome.reconcile is not None:
            self._pending_plan = outcome.reconcile
            self._plan_started = time.monotonic()
            plan = outcome.reconcile
            self.emit(
                "ReconciliationStarted",
                member_epoch=plan.epoch,
                revoke=_doc(plan.revoke),
                assign=_doc(plan.assign),
                pending=sorted(plan.pending),
                owned=_doc(m.owned()),
            )
        self._state_changed(before, outcome.note)

    def _state_changed(self, before: MemberState, why: str = "") -> None:
        state = self.membership.state
        if state is not self._last_state:
            self.emit(
                "MemberStateChanged",
                previous=self._last_state.value,
                state=state.value,
                member_epoch=self.membership.epoch,
                reason=why,
            )
            self._last_state = state

    def _check_poll_timer(self, now: float) -> None:
        """Java's heartbeat manager: a poll timer that ran out leaves the group (epoch -1)
        and drops the partitions; the next poll joins again."""
        m = self.membership
        if m.state in (
            MemberState.UNSUBSCRIBED,
            MemberState.STALE,
            MemberState.FATAL,
            MemberState.LEAVING,
            MemberState.PREPARE_LEAVING,
            MemberState.FENCED,
        ):
            return
        if (now - self._last_poll) * 1000 < self.max_poll_interval_ms:
            return
        before = m.state
        self.emit(
            "PollIntervalExceeded",
            max_poll_interval_ms=self.max_poll_interval_ms,
            static=self.config.instance_id is not None,
        )
        lost = m.poll_timer_expired()
        self._pending_plan = None
        self.emit(
            "LeaveGroupSent",
            reason="poll_interval_exceeded",
            member_id=m.member_id,
            member_epoch=m.epoch,
        )
        if lost:
            self._pending_lost = lost
        self._state_changed(before, "poll_interval_exceeded")
        self._wake.set()

    # -- the poll thread -------------------------------------------------------------
    def _loop(self) -> None:
        consumer = self._consumer
        while True:
            self.flush()
            for command in self.control.drain():
                self._apply(command)
            if self._should_stop():
                return
            self._poll_events()
            max_records = None
            if self.config.max_records is not None:
                max_records = max(1, self.config.max_records - self.stats.records)
            try:
                batches = consumer.poll(timeout_ms=self._poll_timeout_ms(), max_records=max_records)
            except Exception as exc:
                if clients.retriable(exc):
                    time.sleep(0.1)  # kafka-python's own backoff is per request; keep it short
                    continue
                raise
            if batches:
                for tp, records in batches.items():
                    if records:
                        self._positions[(tp.topic, tp.partition)] = records[-1].offset + 1
                self._consumed_batches(batches)

    def _poll_timeout_ms(self) -> int:
        with self._lock:
            busy = self._pending_plan is not None or self._pending_lost is not None
        return 10 if busy else 200

    def _consumed_batches(self, batches: dict[Any, list[Any]]) -> None:
        super()._consumed(batches)

    def _poll_events(self) -> None:
        """What Java's poll does before fetching: the poll timer, callbacks, reconciling."""
        m = self.membership
        with self._lock:
            self._last_poll = time.monotonic()
            fatal = self._fatal
            lost = self._pending_lost
            self._pending_lost = None
        if self._crash is not None:
            raise self._crash
        if lost is not None:
            self._lose(lost)  # onPartitionsLost runs before anything else in this poll
        with self._lock:
            before = m.state
            m.polled()  # a STALE member (left after max.poll.interval.ms) joins again
            if m.state is not before:
                self.emit("RejoinRequested", reason="poll_interval_exceeded")
                self._state_changed(before, "polled after leaving")
                self._wake.set()
            plan = self._pending_plan
        if fatal is not None:
            error, note = fatal
            err = fatal_error(error, self.config.group, note, principal=self.settings.principal)
            err.protocol_error = error  # type: ignore[attr-defined]
            raise err
        if plan is not None:
            self._reconcile(plan)
        if self.config.commit == "auto" and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
            if self._commit_owned(CommitKind.INTERVAL, self.retry_backoff_ms) is not None:
                # Java: a retriable failure brings the next auto-commit to retry.backoff.ms.
                self._next_auto_commit = time.monotonic() + self.retry_backoff_ms / 1000

    def _lose(self, lost: Partitions) -> None:
        """onPartitionsLost: drop them with no commit (another member may own them now)."""
        m = self.membership
        if lost:
            self.emit("PartitionsLost", partitions=_doc(lost))
        # What was consumed of them is no longer this member's to commit: kept, it would
        # be committed if they came back before a new record did, putting the group's
        # offset back to where it was lost (tests/test_consumer_member_offsets.py).
        for pair in _pairs(lost):
            self._positions.pop(pair, None)
        self._assign(m.owned())
        with self._lock:
            before = m.state
            m.lost_handled()  # FENCED: join again with epoch 0, same member id
            self._state_changed(before, "lost partitions handled; rejoining")
        self._wake.set()

    def _reconcile(self, plan: Reconcile) -> None:
        """Java's reconciliation: commit, revoke, assign, then acknowledge at once."""
        m = self.membership
        if plan.revoke:
            # The rebalance timeout bounds the retries, as Java's reconciliation does.
            # With auto-commit every consumed position goes, committed already or not,
            # as Java's (seen in the conformance suite's
            # k848-second-member-joins-autocommit); --commit sync commits what changed.
            self._commit_before_rebalance(self.max_poll_interval_ms / 1000)
        if plan.revoke:
            self.emit("PartitionsRevoked", partitions=_doc(plan.revoke))
            for pair in _pairs(plan.revoke):
                self._positions.pop(pair, None)
        with self._lock:
            if self._pending_plan is not plan or m.state is not MemberState.RECONCILING:
                # Fenced or left meanwhile (Java: the reconciliation is discarded when the
                # member epoch changed or the member left).
                self._pending_plan = None if self._pending_plan is plan else self._pending_plan
                self.emit("ReconciliationAborted", member_epoch=plan.epoch, state=m.state.value)
                self._assign(m.owned())
                return
        before_owned = m.owned()
        new_owned = {
            t: (before_owned.get(t, frozenset()) - plan.revoke.get(t, frozenset()))
            | plan.assign.get(t, frozenset())
            for t in set(before_owned) | set(plan.assign)
        }
        self._assign(new_owned)
        if plan.assign:
            self._seek_committed(plan.assign)
        # Java calls onPartitionsAssigned at the end of every reconciliation, with an
        # empty set when it only revoked (seen in the conformance suite's
        # k848-second-member-joins).
        self.emit("PartitionsAssigned", partitions=_doc(plan.assign))
        with self._lock:
            before = m.state
            if self._pending_plan is plan:
                self._pending_plan = None
            if m.state is not MemberState.RECONCILING:
                # Fenced, failed or left while the partitions were assigned (the lock is
                # not held across the assignment): discarded, as Java discards a
                # reconciliation whose member moved on; acknowledging it would be an
                # illegal transition.
                self.emit("ReconciliationAborted", member_epoch=plan.epoch, state=m.state.value)
                self._assign(m.owned())
                return
            m.reconciled()
            self.emit(
                "ReconciliationCompleted",
                member_epoch=m.epoch,
                assignment=_doc(m.owned()),
                added=_doc(plan.assign),
                removed=_doc(plan.revoke),
                pending=sorted(plan.pending),
                duration_ms=round((time.monotonic() - self._plan_started) * 1000, 1),
            )
            self._state_changed(before, "reconciled; acknowledging")
        self._wake.set()

    def _assign(self, owned: Partitions) -> None:
        tps = topic_partitions(owned)
        self._consumer.assign(tps)
        if self.paused and tps:
            self._consumer.pause(*tps)

    def _seek_committed(self, assigned: Partitions) -> None:
        """Start newly assigned partitions at the group's committed offsets (Java fetches
        them before it fetches records, retrying what is retriable: a coordinator being
        found again, offsets of a transaction not yet complete). A partition without a
        committed offset starts where --from says."""
        assert self._channel is not None
        wanted = {t: sorted(ps) for t, ps in assigned.items()}
        deadline = time.monotonic() + self.settings.timeout_s
        while True:
            node = self._coordinator_node
            try:
                if node is None:
                    raise NoCoordinator("COORDINATOR_NOT_AVAILABLE")
                committed = self._channel.committed(node, wanted)
                break
            except Exception as exc:
                retry = isinstance(exc, NoCoordinator) or clients.retriable(exc)
                if not retry or time.monotonic() >= deadline or self._stop is not None:
                    if isinstance(exc, NoCoordinator):
                        raise MemberFailedError(
                            f"group {self.config.group!r}: no coordinator answered for "
                            f"{self.settings.timeout_s:g}s ({exc.error}); check the cluster "
                            "or raise --timeout"
                        ) from None
                    raise
                time.sleep(0.05)  # the heartbeat thread finds the coordinator meanwhile
                self.flush()
        seek(self._consumer, committed)

    # -- offsets ---------------------------------------------------------------------
    def _commit_before_rebalance(self, budget_s: float, *, closing: bool = False) -> None:
        """The commit before a revocation or a leave. With auto-commit it is Java's
        maybeAutoCommitSyncBeforeRebalance: retried (after the backoff) while Java would,
        STALE_MEMBER_EPOCH included while the member is in the group, each time with the
        latest offsets and epoch, until `budget_s` runs out. With --commit sync it is the
        listener's commitSync; with async one attempt."""
        kind = {
            "auto": CommitKind.BEFORE_REBALANCE,
            "sync": CommitKind.SYNC,
            "async": CommitKind.ASYNC,
        }.get(self.config.commit)
        if kind is not None:
            self._commit_retrying(kind, budget_s, closing=closing)

    def _commit_retrying(self, kind: CommitKind, budget_s: float, *, closing: bool = False) -> None:
        deadline = time.monotonic() + budget_s
        backoff = Backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)
        attempts = 0
        while True:
            wait_ms = backoff.wait_ms(attempts)
            # No time left, or the member is asked to stop (its close commits again).
            stopping = self._crash is not None or (self._stop is not None and not closing)
            if stopping or time.monotonic() + wait_ms / 1000 >= deadline:
                wait_ms = -1  # not retried
            if self._commit_owned(kind, retry_in_ms=wait_ms) is None:
                return
            attempts += 1
            time.sleep(wait_ms / 1000)  # the backoff between attempts (Java's RequestState)
            self.flush()

    def _commit_owned(self, kind: CommitKind, retry_in_ms: int = -1) -> str | None:
        """Commit what the member consumed of what it owns (nothing new: nothing sent;
        the auto-commit before a rebalance sends every consumed position, as Java's).
        Returns the error when Java would send the commit again (and `retry_in_ms` >= 0
        allows it), else None."""
        owned = _pairs(self.membership.owned())
        every = kind is CommitKind.BEFORE_REBALANCE
        offsets = {
            tp: o
            for tp, o in self._positions.items()
            if tp in owned and (every or self._committed.get(tp) != o)
        }
        if not offsets:
            return None
        return self._commit_offsets(offsets, kind, retry_in_ms)

    def _commit_offsets(
        self, offsets: dict[tuple[str, int], int], kind: CommitKind, retry_in_ms: int
    ) -> str | None:
        node = self._coordinator_node
        doc: dict[str, dict[str, int]] = {}
        for (t, p), o in sorted(offsets.items()):
            doc.setdefault(t, {})[str(p)] = o
        with self._lock:
            m = self.membership
            member_id, epoch, in_group = m.member_id, m.epoch, m.in_group
        started = time.monotonic()
        error, retriable = "COORDINATOR_NOT_AVAILABLE", True
        if node is not None and self._channel is not None:
            try:
                error = self._channel.commit(
                    node,
                    offsets,
                    member_id=member_id,
                    member_epoch=epoch,
                    instance_id=self.config.instance_id,
                )
                retriable = is_retriable(error)  # Java's RetriableException ones
            except Exception as exc:
                error, retriable = clients.error_name(exc), clients.retriable(exc)
        if error == "NONE":
            self._committed.update(offsets)
            self.emit(
                "OffsetsCommitted",
                offsets=doc,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
                member_epoch=epoch,
            )
            return None
        if error in COMMIT_LOSES_COORDINATOR and node is not None:
            with self._lock:
                self._lose_coordinator(error)  # Java looks the coordinator up again
        retried = retry_in_ms >= 0 and commit_retried(kind, error, retriable, in_group)
        self.emit(
            "OffsetCommitFailed",
            error=error,
            retriable=retriable or error == "STALE_MEMBER_EPOCH",
            offsets=doc,
            member_epoch=epoch,
            kind=kind.value,
            **({"retry_in_ms": retry_in_ms} if retried else {}),
        )
        return error if retried else None

    def _commit(self, mode: str, timeout_s: float | None = None) -> None:
        # After each batch: --commit sync is Java's commitSync (retried within --timeout),
        # async one attempt; auto commits on its interval in `_poll_events` and before a
        # revocation.
        if mode == "sync":
            self._commit_retrying(CommitKind.SYNC, timeout_s or self.settings.timeout_s)
        elif mode == "async":
            self._commit_owned(CommitKind.ASYNC)

    # -- control ---------------------------------------------------------------------
    def _change_subscription(self, topics: list[str], pattern: str | None) -> None:
        problem = re2j_problem(pattern) if pattern else None
        if pattern and self.heartbeat_version < 1:
            problem = "the brokers serve ConsumerGroupHeartbeat v0 only: no broker-side regex"
        if problem is not None:
            raise ValueError(problem)
        with self._lock:
            self._client_pattern = None  # the control line's subscription replaces it
        self._subscribe(topics, pattern)

    def _rejoin(self) -> None:
        # The consumer protocol has no "rejoin": the closest is Java's
        # unsubscribe + subscribe, a leave (epoch -1) and a join with epoch 0.
        raise ValueError(
            "rejoin is a classic-protocol request; a consumer-protocol member "
            "rejoins only when fenced or after leaving (use leave, then start it again)"
        )

    # -- closing -----------------------------------------------------------------------
    def _close(self, leave: bool) -> None:
        m = self.membership
        # The classic member's budget for its last commit and leave together. It was 3 s
        # here: in a loaded CI run a static member's restart then met UNRELEASED_INSTANCE_ID
        # (the old process gone before its leave heartbeat's answer, as far as the run
        # shows), which Java, whose close waits up to its api timeout, would not.
        deadline = self._close_deadline()
        # Java's leaveGroup does nothing for a member that is not in the group.
        in_group = m.state not in (
            MemberState.UNSUBSCRIBED,
            MemberState.FENCED,
            MemberState.FATAL,
            MemberState.STALE,
            MemberState.LEAVING,
        )
        if leave and in_group and self._consumer is not None and self._fatal is None:
            # Java's close: commit (auto-commit), revoke, then the leave heartbeat
            # (epoch -1, or -2 for a static member: the broker keeps its partitions for
            # it until its session times out).
            with contextlib.suppress(Exception):
                self._commit_before_rebalance(
                    max(0.0, deadline - time.monotonic()) / 2, closing=True
                )
            with self._lock:
                before = m.state
                revoke = m.leave()
                self._state_changed(before, f"stopping ({self._stop or 'failed'})")
            if revoke:
                self.emit("PartitionsRevoked", partitions=_doc(revoke))
            with self._lock:
                m.revoked_for_leave()
                self._pending_plan = None
                self.emit(
                    "LeaveGroupSent",
                    reason=f"kgctl: member stopping ({self._stop or 'failed'})",
                    member_id=m.member_id,
                    member_epoch=m.epoch,
                )
                self._state_changed(MemberState.PREPARE_LEAVING, "leaving")
            self._wake.set()
            while time.monotonic() < deadline and m.leave_pending:
                time.sleep(0.02)  # the heartbeat thread sends the leave; wait for its answer
        self._hb_stop.set()
        self._wake.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=max(0.1, deadline - time.monotonic()) + 1)
            self._hb_thread = None
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close(timeout_ms=1000)
            self._consumer = None
        if self._control_reader is not None:
            self._control_reader.close()
            self._control_reader = None


def _ms(t: float) -> int:
    return int(t * 1000)


def _sent_doc(hb: Heartbeat, m: Membership) -> dict[str, Any]:
    """The heartbeat as sent: None fields were left out (unchanged for the broker)."""
    return {
        "member_epoch": hb.member_epoch,
        "instance_id": hb.instance_id,
        "rebalance_timeout_ms": hb.rebalance_timeout_ms,
        "subscription": list(hb.subscribed_topic_names)
        if hb.subscribed_topic_names is not None
        else None,
        "regex": hb.subscribed_topic_regex,
        "server_assignor": hb.server_assignor,
        "owned": None if hb.owned is None else _doc(m.named(hb.owned)),
        "rack_id": hb.rack_id,
    }
