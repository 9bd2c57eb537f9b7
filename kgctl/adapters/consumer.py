"""kafka-python's KafkaConsumer with kgctl's coordinator: every rebalance step is an event.

Pinned to kafka-python 3.0.12. `TracedCoordinator` subclasses its ConsumerCoordinator
(the documented seam, private API) and `build_consumer` makes KafkaConsumer use it by
swapping the `ConsumerCoordinator` name that `kafka/consumer/group.py` looks up, only for
the duration of the constructor and under a lock. The subclass also fixes the departures
from the Java client listed in docs/member.md, (a) to (y); each fix says its letter. Its
hooks run on kafka-python's I/O thread: they only read state and call `emit`, which
queues.

The member's other clients live elsewhere: its trace producer in `trace.py` (next to the
trace reader), its control-topic reader in `control.py`; all are built in `clients.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import kafka.errors as Errors
from kafka import KafkaConsumer
from kafka.consumer.fetcher import Fetcher
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.consumer import ConsumerCoordinator
from kafka.future import Future
from kafka.protocol.consumer import (
    DEFAULT_GENERATION_ID,
    UNKNOWN_MEMBER_ID,
    JoinGroupRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.structs import MemberState, OffsetAndMetadata
from kafka.util import Timer

from kgctl.adapters import clients
from kgctl.adapters.classic_steps import (
    ClassicPhase,
    HeartbeatStep,
    PrepareStep,
    RebalanceStep,
    RejoinWhy,
)
from kgctl.adapters.clients import (
    error_name,
    java_exception_name,
    join_retry,
    retriable,
)
from kgctl.model.events import partitions_of
from kgctl.model.kafka_errors import ENDS_MEMBER
from kgctl.model.reasons import (
    WIRE_COMMIT_REBALANCING,
    WIRE_LEFT_GROUP,
    WIRE_REASONS,
    partitions_changed,
    rejoin_reason,
    wire_failed_join,
    wire_member_id,
    wire_reset,
    wire_stale_join,
)
from kgctl.settings import ClientSettings

Emit = Callable[..., Any]


class CooperativeStickyOrEager(CooperativeStickyAssignor):
    """Departure (l): cooperative-sticky as in Java, it also runs under the eager protocol,
    which is what a member gets when it lists it with an eager assignor. That is Java's
    upgrade path:
    roll every member to `[cooperative-sticky, range]` (still eager), then to
    `cooperative-sticky` alone. kafka-python's assignor is cooperative only, so it
    refused such a list. Under eager the member revoked everything before JoinGroup
    (Java's onJoinPrepare empties the assignment), so it advertises no owned partitions,
    and the leader holds back only partitions that cooperative members still own."""

    eager = False  # set by the coordinator from the protocol all its assignors support
    # What the member owns now, set by the coordinator (its subscription state).
    owned_now: Callable[[], Any] | None = None

    def supported_protocols(self) -> list[Any]:
        return [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]

    def metadata(self, topics: Any) -> Any:
        if self.eager:
            return ConsumerProtocolSubscription(
                version=self.version, topics=sorted(topics), user_data=b"", owned_partitions=[]
            )
        if self.owned_now is not None:
            # Departure (m): Java advertises subscriptions.assignedPartitions(); kafka-python
            # advertised its last assignment, so a member that had lost its partitions
            # (dropped, or left after max.poll.interval.ms) still claimed them in its next
            # JoinGroup.
            self.member_assignment = sorted(self.owned_now())
        return super().metadata(topics)


ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyOrEager,
}

# Departure (f): the highest JoinGroup version kgctl asks for; v8 carries the rebalance
# reason (KIP-800), kafka-python capped it at v7.
JOIN_GROUP_MAX_VERSION = 9


def _advertised_owned(protocols: list[tuple[str, Any]]) -> dict[str, list[int]]:
    """The owned partitions a JoinGroup claims (cooperative members; eager: none)."""
    if not protocols:
        return {}
    owned = getattr(protocols[0][1], "owned_partitions", None) or ()
    return {tp.topic: sorted(tp.partitions) for tp in owned}


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 1)


def _offsets_doc(offsets: dict[Any, Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, meta in sorted(offsets.items()):
        value = meta.offset if isinstance(meta, OffsetAndMetadata) else int(meta)
        out.setdefault(tp.topic, {})[str(tp.partition)] = value
    return out


def _assignment_of(assignment: Any) -> dict[str, list[int]]:
    if isinstance(assignment, bytes | bytearray | memoryview):
        assignment = ConsumerProtocolAssignment.decode(bytes(assignment))
    return partitions_of((tp.topic, tp.partition) for tp in assignment.partitions())


class TracedCoordinator(ConsumerCoordinator):
    """ConsumerCoordinator that emits an event at every step and behaves like Java's."""

    _kg_emit: Emit = staticmethod(lambda type_, **data: None)

    def __init__(self, client: Any, subscription: Any, **configs: Any) -> None:
        self._kg_ready = False
        self._kg_why = RejoinWhy()
        self._kg_fatal: BaseException | None = None
        self._kg_closing = False
        self._kg_heartbeat = HeartbeatStep()
        # Java's COMPLETING_REBALANCE: JoinGroup answered, SyncGroup not yet. kafka-python
        # has no such state (the member stays REBALANCING); heartbeats run in it.
        self._kg_step = RebalanceStep()
        self._kg_commit_generations: dict[int, Any] = {}
        self._kg_prepare = PrepareStep()
        # Departure (y): what the poll thread's fetch wait also ends on.
        self._kg_wake: Any = None
        super().__init__(client, subscription, **configs)
        eager = self._rebalance_protocol == RebalanceProtocol.EAGER
        for assignor in self._assignors.values():
            if isinstance(assignor, CooperativeStickyOrEager):
                assignor.eager = eager
                assignor.owned_now = self._subscription.assigned_partitions
        self._kg_ready = True

    def _kg(self, type_: str, **data: Any) -> None:
        self._kg_emit(type_, **data)

    # -- identity, read by the emitter from any thread --------------------------------
    def kg_identity(self) -> tuple[str, int]:
        gen = self._generation
        return gen.member_id, gen.generation_id

    @property
    def kg_is_leader(self) -> bool:
        return bool(self._is_leader)

    @property
    def kg_protocol(self) -> str:
        proto = self._rebalance_protocol or RebalanceProtocol.EAGER
        return "cooperative" if proto == RebalanceProtocol.COOPERATIVE else "eager"

    def _kg_java_state(self, state: Any) -> str:
        """A kafka-python member state as Java names it (REBALANCING is two of Java's)."""
        if state is MemberState.STABLE:
            return ClassicPhase.STABLE.value
        if state is MemberState.REBALANCING:
            return self._kg_step.phase.value
        return ClassicPhase.UNJOINED.value

    def stable(self) -> bool:
        """Whether the heartbeat loop runs: STABLE, and, as Java's heartbeat thread, also
        between the JoinGroup answer and the SyncGroup answer (departure (d))."""
        return self.state is MemberState.STABLE or (
            self.state is MemberState.REBALANCING and self._kg_step.completing
        )

    # -- poll: fail fast on a fatal error seen on the I/O thread (departure (b)) --------
    def poll(self, timeout_ms: Any = None) -> Any:
        if self._kg_fatal is not None:
            raise self._kg_fatal
        if (
            self.stable()
            and self._generation.generation_id != DEFAULT_GENERATION_ID
            and self.heartbeat.session_timeout_expired()
        ):
            # Java's heartbeat thread marks the coordinator unknown once a whole session
            # passed without an answered heartbeat, even with one still in flight;
            # kafka-python's loop waits for that answer up to request.timeout.ms first.
            # Like Java, the member keeps its partitions: it learns it was removed only
            # from the coordinator's next answer (UNKNOWN_MEMBER_ID).
            self.coordinator_dead(SESSION_EXPIRED)
        if self._subscription.partitions_auto_assigned():
            # Departure (w): Java's poll records the poll first (pollHeartbeat), so a
            # member that keeps polling while its rebalance waits (a JoinGroup held by the
            # broker, a slow leader's SyncGroup with heartbeats on, the pre-rebalance
            # commit) is never taken for one that stopped polling. kafka-python records
            # it only once joined, and its heartbeat loop then left the group after
            # max.poll.interval.ms of such waiting.
            self.poll_heartbeat()
        return super().poll(timeout_ms=timeout_ms)

    # -- metadata: Java's poll throws TopicAuthorizationException for subscribed topics;
    # kafka-python raises it inside a metadata listener, where it is lost.
    def _handle_metadata_update(self, cluster: Any) -> Any:
        denied = set(cluster.unauthorized_topics) & set(self._subscription.subscription or ())
        if denied and self._kg_fatal is None:
            self._kg_fatal = Errors.TopicAuthorizationFailedError(denied)
        before = self._metadata_snapshot
        try:
            return super()._handle_metadata_update(cluster)
        except Errors.TopicAuthorizationFailedError:
            return None
        finally:
            if (
                self._metadata_snapshot != before
                and self._assignment_snapshot is not None
                and self._assignment_snapshot != self._metadata_snapshot
            ):
                self.kg_wake_poll()  # the leader must rejoin: Java's poll sees it now

    # -- departure (y): the poll thread wakes when a rejoin is asked for ----------------
    def kg_poll_wake(self) -> Any:
        """A new future for the poll thread's next fetch wait to also end on (called on
        it); new each time, so no callbacks pile up on one while nothing happens."""
        wake = self._kg_wake = Future()
        return wake

    def kg_wake_poll(self) -> None:
        """End the poll thread's fetch wait (any thread): a rejoin was asked for."""
        wake = self._kg_wake
        if wake is not None and not wake.is_done:
            wake.success(None)

    # -- rejoinNeededOrPending, with its reason (departure (h)) ----------------------
    def need_rejoin(self) -> bool:
        metadata_changed = (
            self._assignment_snapshot is not None
            and self._assignment_snapshot != self._metadata_snapshot
        )
        subscription_changed = (
            self._joined_subscription is not None
            and self._joined_subscription != self._subscription.subscription
        )
        # The rejoin's reason: a partition count that changed, not a topic that only
        # came (or went) with the subscription (departure (z)); any difference still
        # sets the flag below.
        grew = metadata_changed and partitions_changed(
            _partition_counts(self._assignment_snapshot),
            _partition_counts(self._metadata_snapshot),
            set(self._joined_subscription or ()) ^ set(self._subscription.subscription or ())
            if subscription_changed
            else (),
        )
        # Java's rejoinNeededOrPending: a JoinGroup/SyncGroup still in flight counts.
        # kafka-python's need_rejoin forgets it as soon as the request is built:
        # group_protocols() records the joined subscription and the leader's
        # _perform_assignment the assignment snapshot, so a rejoin caused only by a
        # subscription or metadata change looks done once JoinGroup is sent. When that
        # join outlived one poll(timeout) (the broker waits for the other members),
        # the next poll skipped ensure_active_group: the SyncGroup answer was never
        # applied (no onJoinComplete, heartbeats still disabled) and the member was
        # dropped at its session timeout, stuck in REBALANCING.
        pending = self._join_task is not None and not self._kg_closing
        if (metadata_changed or subscription_changed) and not self.rejoin_needed:
            # Java's requestRejoinIfNecessary: the change sets the lasting rejoin flag,
            # cleared only by a successful SyncGroup. kafka-python recomputed it on each
            # call, and building JoinGroup makes both checks false: a JoinGroup that then
            # failed was never sent again (departure (h), audit rows 1-2).
            self.rejoin_needed = True
            self._kg_why.wire = WIRE_REASONS["metadata_changed" if grew else "subscription_changed"]
        needed = bool(super().need_rejoin()) or pending
        if needed and not self._kg_why.reported and not self._kg_closing:
            reason = rejoin_reason(
                joined_before=self._kg_why.joined_before,
                metadata_changed=grew,
                subscription_changed=subscription_changed,
                pending=self._kg_why.pending,
            ).value
            self._kg_why.reported = True
            self._kg_why.reason = reason
            self._kg_why.started = time.monotonic()
            data: dict[str, Any] = {"reason": reason}
            if reason == "metadata_changed":
                data["partition_counts"] = _partition_counts(self._metadata_snapshot)
                data["assigned_with"] = _partition_counts(self._assignment_snapshot)
            elif reason == "subscription_changed":
                data["subscription"] = sorted(self._subscription.subscription or ())
                data["joined_subscription"] = sorted(self._joined_subscription or ())
            self._kg("RejoinRequested", **data)
        return needed

    def request_rejoin(self, reason: str | None = None) -> None:
        why = reason or self._kg_why.context or "requested"
        if self._kg_why.pending is None:
            self._kg_why.pending = why
        # Java's requestRejoin overwrites the reason; a request kgctl cannot name (a
        # SyncGroup error: the join loop names the failure) leaves it as it was.
        wire = self._kg_why.wire_context or WIRE_REASONS.get(why)
        if wire is not None:
            self._kg_why.wire = wire
        super().request_rejoin()
        self.kg_wake_poll()

    def reset_generation(self, member_id: str = UNKNOWN_MEMBER_ID) -> None:
        old = self._generation
        super().reset_generation(member_id)
        if not getattr(self, "_kg_ready", False):
            return
        if self._kg_why.cause != "join:MEMBER_ID_REQUIRED":
            # Java's resetStateAndRejoin sets needsJoinPrepare (kafka-python's inverted
            # `rejoining`): the next join runs onJoinPrepare again, now without a
            # generation, so what is still owned is reported lost and a cooperative
            # member claims nothing. kafka-python ran prepare once per rebalance, so a
            # reset in the middle of a join kept the partitions (departure (a), audit row 3). The
            # member id a MEMBER_ID_REQUIRED answer gives is no reset in Java.
            self.rejoining = False
        if self._kg_why.pending is None:
            self._kg_why.pending = "generation_reset"
        self._kg_why.wire = self._kg_wire_of_reset(member_id)
        if old.generation_id != DEFAULT_GENERATION_ID or (old.member_id and not member_id):
            self._kg(
                "GenerationReset",
                previous_generation=old.generation_id,
                previous_member_id=old.member_id,
                member_id_kept=bool(member_id),
                cause=self._kg_why.cause or "unknown",
            )

    def _kg_wire_of_reset(self, member_id: str) -> str:
        """Java's reason for the rejoin that follows a reset (`_kg_why.cause` says why)."""
        cause = self._kg_why.cause
        api, _, error = cause.partition(":")
        if cause == "join:MEMBER_ID_REQUIRED":
            return wire_member_id(member_id)
        if api in _RESET_APIS and error:
            return wire_reset(error, _RESET_APIS[api])
        if cause in ("poll_interval_exceeded", "left_group"):
            return WIRE_LEFT_GROUP
        return self._kg_why.wire

    # -- 1. find the coordinator -------------------------------------------------------
    async def _send_group_coordinator_request(self) -> Any:
        node_id = self._client.least_loaded_node()
        if node_id is not None:
            self._kg("CoordinatorLookupSent", node=str(node_id))
            self._kg_lookup_started = time.monotonic()
        return await super()._send_group_coordinator_request()

    def _handle_find_coordinator_response(self, response: Any) -> Any:
        try:
            node = super()._handle_find_coordinator_response(response)
        except Errors.KafkaError as exc:
            if isinstance(exc, Errors.GroupAuthorizationFailedError):
                self._kg_fatal = exc
            raise
        broker = self._cluster.broker_metadata(node)
        self._kg(
            "CoordinatorFound",
            coordinator=str(node),
            host=getattr(broker, "host", None),
            port=getattr(broker, "port", None),
            duration_ms=_ms(getattr(self, "_kg_lookup_started", time.monotonic())),
        )
        return node

    def coordinator_dead(self, error: Any) -> None:
        if self.coordinator_id is not None:
            name = error_name(error) if isinstance(error, BaseException | type) else str(error)
            self._kg("CoordinatorLost", coordinator=str(self.coordinator_id), error=name)
        super().coordinator_dead(error)

    # -- onJoinPrepare (departure (a): no revoked(set()) on a join without generation) --
    async def _on_join_prepare_async(
        self, generation: int, member_id: str, timeout_ms: Any = None
    ) -> bool:
        """Java's onJoinPrepare: False while the pre-rebalance auto-commit is awaited
        (the join loop returns and the next poll calls it again), True once prepared."""
        if self._kg_prepare.started is None:
            self._kg_prepare.started = time.monotonic()
        owned = partitions_of(
            (tp.topic, tp.partition) for tp in self._subscription.assigned_partitions()
        )
        if self._kg_prepare.owned_before is None:
            self._kg_prepare.owned_before = owned  # what JoinCompleted's added/removed compare to
        lost = self._generation.is_lost()
        if not lost and not await self._kg_prepare_commit_done(timeout_ms):
            return False
        self._kg_prepare.timer = None  # Java's joinPrepareTimer: one per prepare
        started, self._kg_prepare.started = self._kg_prepare.started, None
        if lost and not owned:
            # Java's onJoinPrepare without a generation: nothing to lose, nothing to
            # revoke, no listener call at all (kafka-python calls revoked(set())).
            self._is_leader = False
            self._subscription.reset_group_subscription()
        else:
            self._kg_prepare.running = True  # the pre-rebalance commit is done (or given up)
            try:
                await super()._on_join_prepare_async(generation, member_id, timeout_ms=timeout_ms)
            finally:
                self._kg_prepare.running = False
                if self._rebalance_protocol == RebalanceProtocol.EAGER:
                    # Departure (s): Java's eager onJoinPrepare empties the assignment
                    # once the listener has run; kafka-python kept it until the join
                    # completed, so a close in between revoked the same partitions again.
                    self._subscription.assign_from_subscribed([])
        self._kg(
            "JoinPrepared",
            previous_generation=generation,
            previous_member_id=member_id,
            owned=owned,
            lost=bool(lost and owned),
            protocol=self.kg_protocol,
            auto_commit=bool(self.config["enable_auto_commit"]),
            duration_ms=_ms(started),
        )
        return True

    async def _kg_prepare_commit_done(self, timeout_ms: Any) -> bool:
        """Java's onJoinPrepare with auto-commit: commit what was consumed
        (asynchronously) and wait for the answer, over as many polls as it takes but no
        longer than the rebalance timeout; a retriable failure commits again. Only then
        are the partitions revoked and JoinGroup sent. kafka-python committed
        synchronously within the one poll's timeout and went on when that ran out,
        JoinGroup leaving with the commit still in flight (departure (t), audit row 6)."""
        if not self.config["enable_auto_commit"]:
            return True
        if self._kg_prepare.timer is None:
            self._kg_prepare.timer = Timer(self.config["max_poll_interval_ms"])
        prepare_timer = self._kg_prepare.timer
        if self._kg_prepare.commit is None:
            if self._rebalance_protocol == RebalanceProtocol.EAGER:
                # No more records from partitions about to be revoked (Java's
                # maybeMarkPartitionsPendingRevocation).
                self._subscription.mark_pending_revocation(
                    set(self._subscription.assigned_partitions())
                )
            offsets = self._subscription.all_consumed_offsets()
            if not offsets:
                self._kg_prepare.timer = None
                return True
            self._kg_prepare.commit = self._manager.call_soon(
                self._send_offset_commit_request, offsets
            )
        future = self._kg_prepare.commit
        poll_timer = Timer(timeout_ms)
        wait_ms = prepare_timer.timeout_ms
        if poll_timer.timeout_ms is not None:
            wait_ms = min(wait_ms, poll_timer.timeout_ms)
        try:
            await self._manager.wait_for(future, wait_ms)
        except Exception:  # noqa: BLE001 - the future says how it ended, read below
            pass
        done = True
        if prepare_timer.expired:
            done = True  # Java goes on joining: the member must not miss the rebalance
        elif not future.is_done or (future.failed() and future.retriable()):
            done = False
        if future.is_done:
            self._kg_prepare.commit = None
        if done:
            self._kg_prepare.timer = None
            return True
        backoff_ms = self.config["retry_backoff_ms"]
        if poll_timer.timeout_ms is not None:
            backoff_ms = min(backoff_ms, poll_timer.timeout_ms)
        if backoff_ms > 0:
            await self._manager._net.sleep(backoff_ms / 1000)
        return False

    async def _commit_offsets_sync_async(self, offsets: Any, timeout_ms: Any = None) -> Any:
        if self._kg_prepare.running:
            return None  # kafka-python's onJoinPrepare commit: done (and awaited) already
        return await super()._commit_offsets_sync_async(offsets, timeout_ms=timeout_ms)

    # -- joinGroupIfNeeded (departures (c), (d), (e), (i)) -------------------------------
    async def join_group_async(self, timeout_ms: Any = None) -> bool:
        timer = Timer(timeout_ms)
        while self.need_rejoin():
            if self._kg_closing:
                return False
            if self._kg_fatal is not None:
                # A fencing answered on the I/O thread after this poll checked (poll's
                # first step) also reset the generation, which asks for a join: Java's
                # next step throws the heartbeat thread's failure instead of joining.
                raise self._kg_fatal
            if not await self.ensure_coordinator_ready_async(timeout_ms=timer.timeout_ms):
                return False
            # Departure (c): a join that finished while the caller was outside poll() is
            # reused (Java keeps its joinFuture), not discarded for a new JoinGroup.
            if self._join_task is None:
                if not self.rejoining:
                    # Java's needsJoinPrepare, cleared before the call: a listener that
                    # throws is not called again on the next poll.
                    self.rejoining = True
                    prepared = await self._on_join_prepare_async(
                        self._generation.generation_id,
                        self._generation.member_id,
                        timeout_ms=timer.timeout_ms,
                    )
                    if not prepared:  # waiting for the pre-rebalance commit
                        self.rejoining = False
                        return False
                    self._disable_heartbeat()
                self._join_task = self._manager.call_soon(self._do_join_and_sync_async)
            task = self._join_task
            failure: BaseException | None = None
            try:
                assignment_bytes = await self._manager.wait_for(task, timer.timeout_ms)
            except Exception as exc:
                if not isinstance(exc, Errors.KafkaError):
                    # Not a Kafka error (an assignor or a listener raised): Java's join
                    # future fails, the loop asks to rejoin and throws.
                    self._join_task = None
                    self._kg_join_failed(exc, "fatal")
                    self.rejoin_needed = True
                    self._kg_why.wire = wire_failed_join(java_exception_name(exc))
                    raise
                if isinstance(exc, Errors.KafkaTimeoutError) and not task.is_done:
                    return False  # still in flight: the next poll awaits the same join
                if task.is_done and task.succeeded():
                    # Departure (i): poll's timer ran out as the join finished. The join
                    # succeeded (SyncGroup answered): complete it. kafka-python-style
                    # "timeout and task done" was taken for a join that timed out, so
                    # the assignment was dropped and a new JoinGroup started one more
                    # generation for the whole group.
                    assignment_bytes = task.value
                else:
                    failure = task.exception if task.is_done and task.exception else exc
            if failure is not None:
                self._join_task = None
                if await self._kg_retry_join(failure, timer):
                    continue
                return False
            self._join_task = None
            # Departure (d): Java's hasGenerationReset check. Another path may have reset
            # the generation while the join was finishing; do not complete a stale join.
            with self._lock:
                generation = self._generation
                state = self.state
            if generation.generation_id == DEFAULT_GENERATION_ID or state is not MemberState.STABLE:
                self._kg(
                    "JoinFailed",
                    error="GENERATION_RESET",
                    retry="immediate",
                    detail=(
                        f"generation/state became {generation.generation_id}/{state} "
                        "before onJoinComplete"
                    ),
                )
                self._kg_why.cause = "generation_reset_during_join"
                self.reset_generation()  # Java's resetStateAndRejoin(reason, true)
                self._kg_why.wire = wire_stale_join(
                    generation.generation_id,
                    generation.member_id,
                    generation.protocol,
                    self._kg_java_state(state),
                )
                continue
            with self._lock:
                # STABLE, heartbeats on and rejoin_needed cleared came with the SyncGroup
                # answer; a rejoin requested since (a heartbeat saw a new rebalance) stands.
                self.rejoining = False
            await self._on_join_complete_async(
                generation.generation_id,
                generation.member_id,
                generation.protocol,
                assignment_bytes,
            )
            return True
        return True

    async def _kg_retry_join(self, failure: BaseException, timer: Any) -> bool:
        """After a failed join: True to join again now, False to give up until the next
        poll; raises a fatal error (joinGroupIfNeeded's retry rules, `join_retry`)."""
        if self._kg_closing:
            return False  # the join that stopped for close() said so itself
        retry = join_retry(error_name(failure), retriable(failure))
        if getattr(failure, "kg_unexpected", False):
            retry = "fatal"
        self._kg_join_failed(failure, retry)
        if not isinstance(failure, Errors.MemberIdRequiredError):
            # Java's joinGroupIfNeeded asks to rejoin after every failed join (the
            # MEMBER_ID_REQUIRED handler already did): the flag outlives this poll, so a
            # join that failed after a subscription or metadata change is sent again
            # (after the backoff) instead of leaving the member REBALANCING with nothing
            # in flight (departure (h), audit rows 1-2).
            self.rejoin_needed = True
            unexpected = getattr(failure, "kg_unexpected", False)
            self._kg_why.wire = wire_failed_join(
                "KafkaException" if unexpected else java_exception_name(failure)
            )
        if retry == "immediate":
            return True
        if retry != "backoff":
            raise failure
        if timer.expired:
            return False
        backoff_ms = self.config["retry_backoff_ms"]
        if timer.timeout_ms is not None:
            backoff_ms = min(backoff_ms, timer.timeout_ms)
        if backoff_ms > 0:
            await self._manager._net.sleep(backoff_ms / 1000)
        return True

    def _kg_join_failed(self, exc: BaseException, retry: str) -> None:
        name = error_name(exc)
        self._kg("JoinFailed", error=name, retry=retry, detail=str(exc)[:200])
        if retry == "fatal" and name in ENDS_MEMBER:
            self._kg_fatal = exc

    # -- JoinGroup -> SyncGroup, one attempt (departures (d), (e), (f), (j)) ------------
    async def _do_join_and_sync_async(self) -> Any:
        if self.coordinator_unknown():
            raise Errors.CoordinatorNotAvailableError(self.coordinator_id)
        with self._lock:
            self.state = MemberState.REBALANCING
            self._kg_step.enter(ClassicPhase.PREPARING_REBALANCE)
        protocols = self.group_protocols()
        reason = self._kg_why.reason
        wire_reason = self._kg_why.wire
        join_request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.config["session_timeout_ms"],
            rebalance_timeout_ms=self.config["max_poll_interval_ms"],
            member_id=self._generation.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=self.protocol_type(),
            protocols=protocols,
            reason=wire_reason[:255],
            max_version=JOIN_GROUP_MAX_VERSION,
        )
        self._kg(
            "JoinGroupSent",
            reason=reason,
            wire_reason=wire_reason[:255],
            protocols=[name for name, _ in protocols],
            owned=_advertised_owned(protocols),
            member_id=self._generation.member_id,
            session_timeout_ms=self.config["session_timeout_ms"],
            rebalance_timeout_ms=self.config["max_poll_interval_ms"],
            coordinator=str(self.coordinator_id),
        )
        sent = time.monotonic()
        join_timeout_ms = max(
            self.config["request_timeout_ms"], self.config["max_poll_interval_ms"] + 5000
        )
        join_response = await self._manager.send(
            join_request, node_id=self.coordinator_id, request_timeout_ms=join_timeout_ms
        )
        is_leader = bool(join_response.leader) and join_response.leader == join_response.member_id
        skip_assignment = bool(getattr(join_response, "skip_assignment", False))
        received: dict[str, Any] = {
            "error": error_name(Errors.for_code(join_response.error_code)),
            "generation": join_response.generation_id,
            "member_id": join_response.member_id,
            "leader": join_response.leader,
            "protocol": join_response.protocol_name,
            "is_leader": is_leader,
            "skip_assignment": skip_assignment,
            "api_version": getattr(join_request, "API_VERSION", None),
            "duration_ms": _ms(sent),
        }
        if is_leader:
            members = []
            for m in join_response.members:
                try:
                    sub = ConsumerProtocolSubscription.decode(bytes(m.metadata))
                    topics = sorted(sub.topics or [])
                    owned = {tp.topic: sorted(tp.partitions) for tp in (sub.owned_partitions or [])}
                except Exception:  # a foreign member's metadata: report it undecoded
                    topics, owned = [], {}
                members.append(
                    {
                        "member_id": m.member_id,
                        "instance_id": m.group_instance_id,
                        "topics": topics,
                        "owned": owned,
                    }
                )
            received["members"] = members
        self._kg_why.cause = f"join:{received['error']}"
        self._kg("JoinGroupReceived", **received)
        _raise_unexpected(join_response.error_code, _JAVA_JOIN_ERRORS, "JoinGroup")
        self._process_join_group_response(join_response, sent)  # raises on error
        if self._kg_closing:
            # Departure (e): close() after LeaveGroup must not let this join go on to a
            # SyncGroup for a member that has left. Reported here: close() awaits no join.
            abandoned = Errors.KafkaError("member closing: join abandoned before SyncGroup")
            self._kg_join_failed(abandoned, "abandoned")
            raise abandoned
        with self._lock:
            if self.state is MemberState.REBALANCING:
                # Java's JoinGroupResponseHandler: COMPLETING_REBALANCE, and heartbeats on
                # (with the new generation) until the SyncGroup answer, so a member that
                # waits on a slow leader keeps its session. kafka-python (and kgctl
                # before) started them only with the SyncGroup answer (departure (d), audit row 7).
                self._kg_step.enter(ClassicPhase.COMPLETING_REBALANCE)
                self._enable_heartbeat()

        assignments: list[Any] = []
        if is_leader and skip_assignment:
            # KIP-814 (JoinGroup v9): a static leader rejoined a stable group; like Java,
            # only take up the leader's metadata watch and send no assignment.
            self._perform_assignment(
                join_response.leader, join_response.protocol_name, join_response.members
            )
        elif is_leader:
            await self._kg_fresh_metadata(
                {t for m in received.get("members", []) for t in m["topics"]}
            )
            started = time.monotonic()
            group_assignment = self._perform_assignment(
                join_response.leader, join_response.protocol_name, join_response.members
            )
            self._kg(
                "AssignmentComputed",
                assignor=join_response.protocol_name,
                plan={mid: _assignment_of(a) for mid, a in sorted(group_assignment.items())},
                duration_ms=_ms(started),
            )
            assignments = list(group_assignment.items())
        sync_request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self._generation.generation_id,
            member_id=self._generation.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=self.protocol_type(),
            protocol_name=self._generation.protocol,
            assignments=assignments,
            max_version=5,
        )
        self._kg("SyncGroupSent", is_leader=is_leader, assignments=len(assignments))
        sent = time.monotonic()
        sync_response = await self._manager.send(sync_request, node_id=self.coordinator_id)
        sync_error = error_name(Errors.for_code(sync_response.error_code))
        synced: dict[str, Any] = {"error": sync_error, "duration_ms": _ms(sent)}
        if sync_error == "NONE":
            try:
                synced["assignment"] = _assignment_of(sync_response.assignment)
            except Exception:
                synced["assignment"] = {}
        self._kg("SyncGroupReceived", **synced)
        self._kg_why.cause = f"sync:{sync_error}"
        completing = self._kg_step.completing
        self._kg_step.enter(ClassicPhase.PREPARING_REBALANCE)  # the SyncGroup is answered
        _raise_unexpected(sync_response.error_code, _JAVA_SYNC_ERRORS, "SyncGroup")
        assignment = self._process_sync_group_response(sync_response, sent)  # raises on error
        # Java's SyncGroupResponseHandler: the member is STABLE as soon as SyncGroup
        # succeeds, also when the caller is outside poll() (kafka-python waited for the
        # next poll). If the generation was reset since the JoinGroup answer (a heartbeat
        # error, the poll timeout), the join failed: ILLEGAL_GENERATION, retried at once.
        # The join loop checks once more before completing (departure (d)).
        with self._lock:
            if not (
                completing
                and self._generation.generation_id == sync_request.generation_id
                and self.state is MemberState.REBALANCING
            ):
                raise Errors.IllegalGenerationError(
                    f"generation/state became {self._generation.generation_id}/"
                    f"{self.state} before the SyncGroup answer"
                )
            self.state = MemberState.STABLE
            self.rejoin_needed = False
            self._kg_why.wire = ""  # Java clears rejoinReason with the flag
            if not self._heartbeat_enabled:
                self._enable_heartbeat()
        return assignment

    async def _kg_fresh_metadata(self, topics: set[str]) -> None:
        """Departure (j), Java's updateGroupSubscription before the leader assigns: watch
        every topic the group subscribes to and wait for fresh metadata
        (ensureFreshMetadata) when some is missing or an update is pending. kafka-python
        assigned with what it had, so a member that had just subscribed to a topic got
        none of its partitions and the group rebalanced again once the metadata arrived
        (metadata_changed)."""
        grew = bool(topics - self._subscription.group_subscription())
        if grew:
            self._subscription.group_subscribe(topics)
            self._cluster.set_topics(self._subscription.group_subscription())
        missing = [t for t in topics if self._cluster.partitions_for_topic(t) is None]
        if not (grew or missing or self._cluster.need_update):
            return
        # Like Java's ensureFreshMetadata, an answer to a request sent before the new
        # topics were asked for does not count: wait for at most two updates, until
        # every topic is known. Bounded, because a topic may not exist (yet): the
        # assignment then uses what is known and the metadata watch rebalances later.
        deadline = time.monotonic() + self.config["request_timeout_ms"] / 1000
        for _ in range(2):
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                return
            try:
                await self._manager.wait_for(self._cluster.request_update(), left_ms)
            except Errors.KafkaError:
                return
            if all(self._cluster.partitions_for_topic(t) is not None for t in topics):
                return

    def _perform_assignment(self, leader_id: str, protocol_name: str, members: Any) -> Any:
        pending = self._cluster.need_update
        assignments = super()._perform_assignment(leader_id, protocol_name, members)
        # Departure (q): kafka-python forces a metadata refresh at every assignment,
        # restarting the leader's metadata.max.age.ms period at the JoinGroup answer.
        # Java only waits for what is due (ensureFreshMetadata, done above by (j)).
        if not pending:
            with self._cluster._lock:
                self._cluster._need_update = False
        # Departure (g): kafka-python snapshots the metadata it last *received* before
        # the assignor ran, which is empty when the first join beats the first metadata
        # response, so every new leader rebalanced twice. Snapshot what the assignor
        # actually saw, as Java's assignmentSnapshot does.
        snapshot = self._build_metadata_snapshot(self._subscription, self._cluster)
        self._metadata_snapshot = snapshot
        self._assignment_snapshot = snapshot
        return assignments

    # -- onJoinComplete ------------------------------------------------------------------
    async def _on_join_complete_async(
        self, generation: int, member_id: str, protocol: str, member_assignment_bytes: Any
    ) -> None:
        before = self._kg_prepare.owned_before
        if before is None:
            before = partitions_of(
                (tp.topic, tp.partition) for tp in self._subscription.assigned_partitions()
            )
        self._kg_prepare.owned_before = None
        self._kg_why.joined_before = True
        self._kg_why.reported = False
        self._kg_why.pending = None
        self._kg_why.cause = ""
        self._kg_why.context = (
            "cooperative_followup" if self.kg_protocol == "cooperative" else "assignment_failed"
        )
        try:
            await super()._on_join_complete_async(
                generation, member_id, protocol, member_assignment_bytes
            )
        finally:
            self._kg_why.context = None
        after = partitions_of(
            (tp.topic, tp.partition) for tp in self._subscription.assigned_partitions()
        )
        started = self._kg_why.started
        self._kg(
            "JoinCompleted",
            generation=generation,
            member_id=member_id,
            protocol=protocol,
            is_leader=bool(self._is_leader),
            assignment=after,
            added=_diff(after, before),
            removed=_diff(before, after),
            rebalance_ms=_ms(started) if started is not None else None,
        )

    # -- heartbeats (departure (b): FENCED_INSTANCE_ID ends the member) -----------------
    async def _send_heartbeat_request(self) -> Any:
        self._kg_heartbeat.handled = False
        # The generation the request carries (kafka-python builds it before its first
        # await; one heartbeat is in flight at a time).
        self._kg_heartbeat.generation = self._generation
        try:
            return await super()._send_heartbeat_request()
        except Errors.KafkaError as exc:
            if not self._kg_heartbeat.handled:
                self._kg("HeartbeatFailed", error=error_name(exc), transport=True)
            raise

    def _handle_heartbeat_response(self, response: Any, send_time: float) -> Any:
        self._kg_heartbeat.handled = True
        error_type = Errors.for_code(response.error_code)
        rtt = round((time.monotonic() - send_time) * 1000, 1)
        if error_type is Errors.NoError:
            self._kg_heartbeat.last_ms = time.time() * 1000
            self._kg(
                "HeartbeatSucceeded",
                rtt_ms=rtt,
                throttle_time_ms=getattr(response, "throttle_time_ms", 0) or 0,
            )
        else:
            self._kg("HeartbeatFailed", error=error_name(error_type), rtt_ms=rtt, transport=False)
        sent = self._kg_heartbeat.generation
        if error_type in _MEMBERSHIP_ERRORS and sent is not None and self._generation != sent:
            # Java's generationUnchanged(): the answer is about a generation the member
            # has left since (it rejoined while the heartbeat was in flight): ignored, and
            # counted as an answered heartbeat. kafka-python reset the current generation
            # (departure (u), audit row 8).
            return None
        if error_type in (Errors.FencedInstanceIdError, Errors.GroupAuthorizationFailedError):
            self._kg_fatal = error_type(
                f"group {self.group_id!r} instance {self.group_instance_id!r}"
            )
        if error_type is Errors.RebalanceInProgressError and self.state is not MemberState.STABLE:
            # Java's HeartbeatResponseHandler: during a rebalance (the heartbeats between
            # the JoinGroup and SyncGroup answers) this answer is expected and counts as
            # a heartbeat; only a STABLE member asks to rejoin.
            return None
        self._kg_why.context = (
            "rebalance_in_progress" if error_type is Errors.RebalanceInProgressError else None
        )
        self._kg_why.cause = f"heartbeat:{error_name(error_type)}"
        if error_type is Errors.FencedInstanceIdError:
            # Java's HeartbeatResponseHandler resets the generation and the member id on
            # FENCED_INSTANCE_ID as on UNKNOWN_MEMBER_ID (resetStateOnResponseError), so
            # close reports the partitions lost; kafka-python kept the generation and
            # close revoked them (departure (b), audit row 4).
            self.reset_generation()
        try:
            return super()._handle_heartbeat_response(response, send_time)
        finally:
            self._kg_why.context = None

    # -- offsets -------------------------------------------------------------------------
    def _handle_offset_commit_response(self, offsets: Any, send_time: float, response: Any) -> Any:
        sent = self._kg_commit_generations.pop(id(offsets), self._generation)
        first_error = next(
            (Errors.for_code(code) for _, parts in response.topics for _, code in parts if code),
            None,
        )
        if first_error in _MEMBERSHIP_ERRORS and sent != self._generation:
            # Departure (u), Java's OffsetCommitResponseHandler for an answer about a
            # generation the member has left since (kafka-python reset the current one):
            # while a new JoinGroup is out, the commit fails as a rebalance in progress
            # and nothing is reset; otherwise as Java: a fencing fails the commit, an
            # unknown member or old generation resets it.
            preparing = self.state is MemberState.REBALANCING and not self._kg_step.completing
            if preparing:
                raise CommitRebalanceInProgressError(
                    "the commit was for an earlier generation and the group is "
                    "rebalancing: finish the rebalance with poll(), then commit again"
                )
            if first_error is Errors.FencedInstanceIdError:
                raise Errors.CommitFailedError(first_error())
        self._kg_why.context = "rebalance_in_progress"  # the reason of a rejoin asked below
        self._kg_why.wire_context = WIRE_COMMIT_REBALANCING
        if first_error is not None:
            self._kg_why.cause = f"commit:{error_name(first_error)}"
        try:
            return super()._handle_offset_commit_response(offsets, send_time, response)
        except Errors.CommitFailedError as exc:
            if exc.args and isinstance(exc.args[0], Errors.RebalanceInProgressError):
                # Java's OffsetCommitResponseHandler: REBALANCE_IN_PROGRESS asks to rejoin
                # (kafka-python did) and fails the commit with RebalanceInProgressException,
                # which tells the caller to finish the rebalance with poll() and commit
                # again; kafka-python raised CommitFailedError, the error of a member that
                # was dropped from the group (departure (v), audit row 9).
                raise CommitRebalanceInProgressError(
                    "the group is rebalancing: finish the rebalance with poll(), then commit again"
                ) from None
            raise
        finally:
            self._kg_why.context = None
            self._kg_why.wire_context = None

    async def _send_offset_commit_request(self, offsets: Any) -> Any:
        started = time.monotonic()
        # The generation the request carries, for its answer (kafka-python reads it
        # before its first await); keyed by the offsets, as several may be in flight.
        self._kg_commit_generations[id(offsets)] = self._generation
        try:
            result = await super()._send_offset_commit_request(offsets)
        except Exception as exc:
            if offsets:
                self._kg(
                    "OffsetCommitFailed",
                    error=error_name(exc),
                    retriable=retriable(exc),
                    offsets=_offsets_doc(offsets),
                )
            raise
        finally:
            self._kg_commit_generations.pop(id(offsets), None)
        if offsets:
            self._kg("OffsetsCommitted", offsets=_offsets_doc(offsets), duration_ms=_ms(started))
        return result

    # -- leaving -------------------------------------------------------------------------
    async def maybe_leave_group_async(
        self, reason: str | None = None, timeout_ms: Any = None
    ) -> Any:
        if reason is None and not self._kg_closing and self.heartbeat.poll_timeout_expired():
            self._kg(
                "PollIntervalExceeded",
                max_poll_interval_ms=self.config["max_poll_interval_ms"],
                static=not self.is_dynamic_member(),
            )
            self._kg_why.pending = "poll_interval_exceeded"
            self._kg_why.cause = "poll_interval_exceeded"
            reason = "consumer poll timeout has expired."
        if reason is None:
            reason = self._kg_why.leave or "the consumer is being closed"
        if (
            self.is_dynamic_member()
            and not self.coordinator_unknown()
            and self.state is not MemberState.UNJOINED
            and self._generation.has_member_id()
        ):
            self._kg("LeaveGroupSent", reason=reason[:255], member_id=self._generation.member_id)
        if self._kg_why.cause != "poll_interval_exceeded":
            self._kg_why.cause = "left_group"
        return await super().maybe_leave_group_async(reason, timeout_ms)

    async def _on_close_prepare_async(self) -> None:
        """Java's onLeavePrepare: partitions still owned in the middle of a rebalance (a
        cooperative member; an eager one gave them up in onJoinPrepare) are reported
        lost, not revoked, as with a lost generation."""
        owned = set(self._subscription.assigned_partitions())
        if not (
            owned
            and self.state is MemberState.REBALANCING
            and self._subscription.partitions_auto_assigned()
            and not self._generation.is_lost()
        ):
            await super()._on_close_prepare_async()
            return
        self._subscription.mark_pending_revocation(owned)
        failure: Exception | None = None
        try:
            await self._invoke_rebalance_listener_async("on_partitions_lost", owned)
        except Exception as exc:  # noqa: BLE001 - raised below, after the cleanup
            failure = exc
        self._subscription.assign_from_subscribed([])
        self._is_leader = False
        self._subscription.reset_group_subscription()
        if failure is not None:
            raise Errors.KafkaError("User rebalance callback throws an error") from failure

    def close(self, autocommit: bool = True, timeout_ms: Any = None) -> None:
        # Departure (e): mark closing first so an in-flight join stops before SyncGroup
        # and the join loop does not start another one.
        self._kg_closing = True
        super().close(autocommit=autocommit, timeout_ms=timeout_ms)


# The errors Java's JoinGroup / SyncGroup answer handlers expect; any other ends the
# join with a KafkaException ("unexpected error"), which the join loop does not retry.
_JAVA_JOIN_ERRORS = frozenset(
    {
        "NONE", "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_MEMBER_ID", "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR", "FENCED_INSTANCE_ID", "INCONSISTENT_GROUP_PROTOCOL",
        "INVALID_SESSION_TIMEOUT", "INVALID_GROUP_ID", "GROUP_AUTHORIZATION_FAILED",
        "GROUP_MAX_SIZE_REACHED", "UNSUPPORTED_VERSION", "MEMBER_ID_REQUIRED",
        "REBALANCE_IN_PROGRESS",
    }
)  # fmt: skip
_JAVA_SYNC_ERRORS = frozenset(
    {
        "NONE", "GROUP_AUTHORIZATION_FAILED", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID",
        "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
    }
)  # fmt: skip


def _raise_unexpected(code: int, expected: frozenset[str], api: str) -> None:
    """Departure (r): Java fails a join on an answer its handler does not expect
    (ILLEGAL_GENERATION on JoinGroup, MEMBER_ID_REQUIRED or COORDINATOR_LOAD_IN_PROGRESS
    on SyncGroup, ...) and does not retry it; kafka-python retried some of them. The
    error keeps its name for the events and the member's exit line."""
    error_type = Errors.for_code(code)
    if error_name(error_type) in expected:
        return
    exc = error_type(f"unexpected in a {api} answer (the Java client gives up too)")
    exc.retriable = False
    exc.kg_unexpected = True
    raise exc


# kgctl's cause prefix -> Java's name of the API whose answer reset the generation.
_RESET_APIS = {
    "join": "JOIN_GROUP",
    "sync": "SYNC_GROUP",
    "heartbeat": "HEARTBEAT",
    "commit": "OFFSET_COMMIT",
}

# The answers that say the member's generation is over (Java resets it, if current).
_MEMBERSHIP_ERRORS = (
    Errors.IllegalGenerationError,
    Errors.UnknownMemberIdError,
    Errors.FencedInstanceIdError,
)


class CommitRebalanceInProgressError(Errors.RebalanceInProgressError):
    """A commit refused because the group is rebalancing. Not retried by the commit
    (RebalanceInProgressException is no retriable error in Java either): the caller
    polls to finish the rebalance, then commits again."""

    retriable = False


def _diff(a: dict[str, list[int]], b: dict[str, list[int]]) -> dict[str, list[int]]:
    out = {t: sorted(set(ps) - set(b.get(t, []))) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


class EventListener(ConsumerRebalanceListener):
    """The rebalance listener: turns onPartitions* calls into events."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._emit("PartitionsRevoked", partitions=_tps(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._emit("PartitionsAssigned", partitions=_tps(assigned))

    def on_partitions_lost(self, lost: Any) -> None:
        self._emit("PartitionsLost", partitions=_tps(lost))


def _tps(tps: Any) -> dict[str, list[int]]:
    return partitions_of((tp.topic, tp.partition) for tp in tps)


class WakingFetcher(Fetcher):
    """Departure (y): the poll's wait for fetch answers also ends when the coordinator
    asks for a rejoin (a metadata answer the leader must rebalance for, a heartbeat
    answered REBALANCE_IN_PROGRESS). Java's poll returns from the network on every
    answer and checks rejoinNeededOrPending at once; kafka-python's waited for a fetch
    answer or the poll's timeout (up to 200 ms in kgctl join), so a leader saw a grown
    topic that much later than Java's, and a told follower rejoined that much later."""

    _kg_wake: Callable[[], Any] | None = None  # the coordinator's kg_poll_wake

    def fetch_records(
        self, max_records: Any = None, update_offsets: bool = True, timeout_ms: Any = None
    ) -> Any:
        wake = self._kg_wake
        if wake is None or timeout_ms == 0:
            return super().fetch_records(max_records, update_offsets, timeout_ms=timeout_ms)
        ended = wake()
        # Drain what is buffered and send the next fetches without waiting, then wait
        # here for whichever comes first: a fetch answer or the wake.
        records, idle = super().fetch_records(max_records, update_offsets, timeout_ms=0)
        if records or idle:
            return records, idle
        done = Future()

        def fire(_: Any) -> None:
            if not done.is_done:
                done.success(None)

        for future in [*list(self._fetch_futures), ended]:
            future.add_both(fire)
        try:
            self._net.run(self._manager.wait_for, done, timeout_ms)
        except Errors.KafkaTimeoutError:
            pass
        records, _ = self.fetched_records(max_records, update_offsets=update_offsets)
        return records, False


def build_consumer(
    settings: ClientSettings | Mapping[str, Any], emit: Emit, **consumer_config: Any
) -> tuple[KafkaConsumer, TracedCoordinator]:
    """A KafkaConsumer whose coordinator is a TracedCoordinator emitting through `emit`;
    `consumer_config` (kafka-python's names, client_id included) wins over `settings`.
    `settings` may also be kafka-python's own settings (`bootstrap_servers` and the
    rest), for a script or test that drives the member in-process."""
    if isinstance(settings, Mapping):
        servers = settings.get("bootstrap_servers") or ["127.0.0.1:9092"]
        if isinstance(servers, str):
            servers = servers.split(",")
        consumer_config = {**settings, **consumer_config}
        settings = ClientSettings(bootstrap=",".join(servers))
    bound = type("BoundTracedCoordinator", (TracedCoordinator,), {"_kg_emit": staticmethod(emit)})
    consumer = clients.consumer(
        settings, "kgctl-member", coordinator=bound, fetcher=WakingFetcher, **consumer_config
    )
    coordinator = consumer._coordinator
    assert isinstance(coordinator, TracedCoordinator)
    assert isinstance(consumer._fetcher, WakingFetcher)
    consumer._fetcher._kg_wake = coordinator.kg_poll_wake
    _new_topics_at_once(consumer._cluster)
    return consumer, coordinator


def _partition_counts(snapshot: dict[str, Any] | None) -> dict[str, int]:
    """A kafka-python metadata or assignment snapshot (topic -> its partitions) as
    partition counts, by topic name."""
    return {t: len(ps) for t, ps in sorted((snapshot or {}).items())}


def _ask_at_once(cluster: Any) -> None:
    """Java's requestUpdateForNewTopics: forget when the last refresh was tried, so the
    update goes out now instead of retry.backoff.ms after it."""
    with cluster._lock:
        cluster._last_refresh_ms = 0
    cluster.request_update()


def _new_topics_at_once(cluster: Any) -> None:
    """Departure (x): metadata for newly watched topics is asked for at once. Java's
    subscribe and the leader's updateGroupSubscription call requestUpdateForNewTopics,
    which lifts the refresh backoff; kafka-python's set_topics only flags an update,
    which then waits retry.backoff.ms after the previous refresh (its bootstrap's, or
    the member's topic check). So the subscription's first metadata went out after the
    first JoinGroup answer, the leader waited for it before assigning ((j), as Java
    waits for a pending update), and its metadata.max.age.ms period restarted at the
    JoinGroup answer, next to its followers' heartbeats: a topic that grew was seen just
    after their heartbeats had gone out, a whole heartbeat interval late."""
    plain = cluster.set_topics

    def set_topics(topics: Any) -> Any:
        if set(topics) - set(cluster._topics):
            with cluster._lock:
                cluster._last_refresh_ms = 0
        return plain(topics)

    cluster.set_topics = set_topics


def subscribe(
    consumer: KafkaConsumer, emit: Emit, topics: list[str] | None, pattern: str | None
) -> None:
    """Subscribe (or change the subscription) with kgctl's listener."""
    state = consumer._subscription
    wanted = "AUTO_PATTERN" if pattern else "AUTO_TOPICS"
    if state.subscription_type.name not in ("NONE", wanted):
        # Departure (n): switching between topics and a pattern: kafka-python refuses;
        # Java allows it.
        state.subscription_type = type(state.subscription_type).NONE
        state.subscribed_pattern = None
    listener = EventListener(emit)
    if pattern:
        consumer.subscribe(pattern=pattern, listener=listener)
        _ask_at_once(consumer._cluster)  # departure (x): Java's subscribe(Pattern) does
        # Departure (k): kafka-python leaves the subscription empty until the next metadata
        # response matches the pattern, so a join in that window (a retry of a JoinGroup already
        # in flight) advertised no topics. Java's subscribe(Pattern) matches the topics
        # already known at once (updatePatternSubscription(metadata.fetch())) and asks
        # for fresh metadata; the metadata listener adds topics seen later.
        cluster = consumer._cluster
        exclude_internal = consumer.config["exclude_internal_topics"]
        matched = sorted(
            t for t in cluster.topics(exclude_internal) if state.subscribed_pattern.match(t)
        )
        if matched:
            state.change_subscription(matched)
    else:
        consumer.subscribe(topics=list(topics or []), listener=listener)


def existing_topics(
    consumer: KafkaConsumer, keep_trying: Callable[[], bool] = lambda: True
) -> set[str] | None:
    """Every topic the member may see (the check for missing subscribed topics), or None
    when `keep_trying` says to stop while retrying.

    Java's consumer has no such check; its metadata requests are retried, never fatal. A
    request that failed retriably (timed out on a loaded broker, a connection lost) is
    sent again after the client's retry.backoff.ms, as Java's client does; it used to end
    the member with exit 10 (1,500 members on one machine, docs/benchmarks.md). Any other
    error is raised.
    """
    backoff_s = consumer.config["retry_backoff_ms"] / 1000
    while True:
        try:
            return set(consumer.topics())
        except Errors.KafkaError as exc:
            if not clients.retriable(exc):
                raise
        if not keep_trying():
            return None
        time.sleep(backoff_s)


# The reason the coordinator is marked unknown when a whole session passed without an
# answered heartbeat (kafka-python's heartbeat loop uses the same text).
SESSION_EXPIRED = "Heartbeat session expired"
