"""A member of a KIP-848 `consumer` group, as a state machine with no I/O (pure).

In the new protocol the broker computes the assignment; each member heartbeats
(ConsumerGroupHeartbeat, api key 68) and reconciles on its own: when an answer carries a
target assignment that differs from what it owns, it commits, revokes what it must give
up, takes what is new and acknowledges at once with its next heartbeat. There is no
JoinGroup, SyncGroup or stop-the-world. This module follows the Java client's membership
manager (`AbstractMembershipManager`, `ConsumerMembershipManager`, `MemberState`) and
heartbeat manager (`ConsumerHeartbeatRequestManager` and its HeartbeatState): the same
states, the same epochs (join with 0, leave with -1, a static member leaves with -2),
the same handling of each error, and the same rule for which fields a heartbeat carries
(all of them on a join, then only those that changed).

`Membership` is driven by a caller that owns the network and the consumer: it asks
`heartbeat_due(now_ms)` / `next_heartbeat(now_ms)` what to send, gives every answer to
`on_answer`, performs the `Reconcile` plan it gets (commit, revoke, assign: the order
Java keeps) and reports it done with `reconciled`. The clock is always passed in.
"""

from __future__ import annotations

import enum
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from kgctl.model.kafka_errors import (
    COORDINATOR_LOADING,
    COORDINATOR_MOVED,
    FATAL_HEARTBEAT,
    FENCES_MEMBER,
)

Partitions = dict[str, frozenset[int]]  # topic (id or name) -> partitions

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_EPOCH_STATIC = -2

# What each heartbeat or commit error means is the table of kgctl/model/kafka_errors.py.


class CommitKind(str, enum.Enum):
    """Why a commit is sent, which decides what Java retries."""

    BEFORE_REBALANCE = "before_rebalance"  # auto-commit before a revocation or a leave
    INTERVAL = "interval"  # auto-commit on auto.commit.interval.ms
    SYNC = "sync"  # the application's commitSync
    ASYNC = "async"  # the application's commitAsync


def commit_retried(kind: CommitKind, error: str, retriable: bool, in_group: bool) -> bool:
    """Whether Java's consumer sends a failed commit again (`retriable`: the error is one
    Java retries, or the request got no answer).

    - Before a rebalance (auto-commit before revoking or leaving; Java's
      maybeAutoCommitSyncBeforeRebalance): retriable errors, except UNKNOWN_TOPIC_OR_PARTITION
      (a deleted topic would hold the revocation), and STALE_MEMBER_EPOCH while the member
      is still in the group: the retry carries the latest offsets and the epoch the member
      has by then.
    - On the interval: retriable errors, after retry.backoff.ms (STALE_MEMBER_EPOCH waits
      for the next interval).
    - commitSync: retriable errors (STALE_MEMBER_EPOCH fails the commit).
    - commitAsync: never."""
    if kind is CommitKind.ASYNC:
        return False
    if kind is CommitKind.BEFORE_REBALANCE:
        if error == "STALE_MEMBER_EPOCH":
            return in_group
        return retriable and error != "UNKNOWN_TOPIC_OR_PARTITION"
    return retriable and error != "STALE_MEMBER_EPOCH"


class MemberState(str, enum.Enum):
    """Java's MemberState, by the same names."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    FATAL = "FATAL"
    STALE = "STALE"


# The states each state may follow, as Java's MemberState lists them: every change goes
# through `Membership._become`, which refuses any other (a bug shows as a refused move,
# not as a strange state three steps on).
_S = MemberState
PREDECESSORS: dict[MemberState, frozenset[MemberState]] = {
    _S.JOINING: frozenset({_S.FENCED, _S.UNSUBSCRIBED, _S.STALE}),
    _S.RECONCILING: frozenset({_S.STABLE, _S.JOINING, _S.ACKNOWLEDGING}),
    _S.ACKNOWLEDGING: frozenset({_S.RECONCILING}),
    _S.STABLE: frozenset({_S.JOINING, _S.ACKNOWLEDGING, _S.RECONCILING}),
    _S.FENCED: frozenset(
        {_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING, _S.PREPARE_LEAVING, _S.LEAVING}
    ),
    _S.FATAL: frozenset(
        {
            _S.JOINING,
            _S.STABLE,
            _S.RECONCILING,
            _S.ACKNOWLEDGING,
            _S.PREPARE_LEAVING,
            _S.LEAVING,
            _S.UNSUBSCRIBED,
        }
    ),
    _S.PREPARE_LEAVING: frozenset(
        {_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING, _S.UNSUBSCRIBED}
    ),
    _S.LEAVING: frozenset({_S.PREPARE_LEAVING}),
    _S.UNSUBSCRIBED: frozenset({_S.PREPARE_LEAVING, _S.LEAVING, _S.FENCED}),
    _S.STALE: frozenset({_S.LEAVING}),
}
# Moves kgctl makes that Java's table does not list, each for a reason of its own:
KGCTL_PREDECESSORS: dict[MemberState, frozenset[MemberState]] = {
    # The poll timer expired: the partitions are lost, not revoked, so the leave
    # heartbeat goes at once, with no PREPARE_LEAVING to wait in.
    _S.LEAVING: frozenset({_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE}),
    # A heartbeat in flight when the leave began is answered with an assignment.
    _S.RECONCILING: frozenset({_S.PREPARE_LEAVING}),
}


class IllegalTransition(RuntimeError):
    """A state change the membership's table refuses (a bug in the machine)."""

    def __init__(self, before: MemberState, after: MemberState) -> None:
        super().__init__(
            f"consumer-protocol member: illegal transition from {before.value} to "
            f"{after.value} (valid predecessors of {after.value}: "
            f"{', '.join(sorted(s.value for s in may_follow(after))) or 'none'})"
        )
        self.before, self.after = before, after


def may_follow(state: MemberState) -> frozenset[MemberState]:
    """The states `state` may follow: Java's, and kgctl's own moves."""
    return PREDECESSORS.get(state, frozenset()) | KGCTL_PREDECESSORS.get(state, frozenset())


# States whose heartbeat Java sends at once, even while a retry backs off
# (shouldHeartbeatNow): a join, an acknowledgement, a leave.
_HEARTBEAT_NOW = frozenset({MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.LEAVING})

# States in which a heartbeat goes out on the interval (Java: canSendRequest / shouldSkip).
_HEARTBEATING = frozenset(
    {
        MemberState.JOINING,
        MemberState.RECONCILING,
        MemberState.ACKNOWLEDGING,
        MemberState.STABLE,
        MemberState.LEAVING,
    }
)


@dataclass(frozen=True)
class Subscription:
    """What the member asks for: topic names or a broker-side regex (RE2J), an assignor."""

    topics: frozenset[str] = frozenset()
    regex: str | None = None
    server_assignor: str | None = None  # uniform | range; None: the broker's default


@dataclass(frozen=True)
class Heartbeat:
    """One ConsumerGroupHeartbeat request; None means "unchanged, not sent"."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None  # by topic id, as the wire carries it
    rack_id: str | None = None  # client.rack: sent when joining only, as Java does


@dataclass(frozen=True)
class Answer:
    """A ConsumerGroupHeartbeat answer, decoded; assignment None: unchanged."""

    error: str = "NONE"
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # by topic id
    message: str | None = None


@dataclass(frozen=True)
class Reconcile:
    """What to do, in this order: commit (if auto-commit), revoke, then assign.

    `revoke` and `assign` are by topic name; `pending` holds the assigned topic ids whose
    names the member's metadata does not know yet (assigned once they are known)."""

    epoch: int
    revoke: Partitions
    assign: Partitions
    pending: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Outcome:
    """What an answer or a timer changed, for the caller to act on and to trace."""

    state: MemberState
    reconcile: Reconcile | None = None
    lost: Partitions = field(default_factory=dict)  # to hand to onPartitionsLost
    find_coordinator: bool = False
    retry_after_ms: int = 0
    fatal: str | None = None
    note: str = ""


def _diff(a: Partitions, b: Partitions) -> Partitions:
    out = {t: frozenset(ps - b.get(t, frozenset())) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _union(a: Partitions, b: Partitions) -> Partitions:
    return {t: a.get(t, frozenset()) | b.get(t, frozenset()) for t in set(a) | set(b)}


class Backoff:
    """The wait before retrying a failed request, as Java's clients compute it
    (`ExponentialBackoff` in their request managers): retry.backoff.ms doubled per failed
    attempt up to retry.backoff.max.ms, each wait spread by +/-20 % at random so that
    members failing together do not retry together. `rand` gives a number in [0, 1)."""

    BASE = 2
    JITTER = 0.2

    def __init__(
        self,
        initial_ms: int = 100,
        max_ms: int = 1000,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial_ms = min(initial_ms, max_ms)
        self.max_ms = max_ms
        self._rand = rand
        # The attempt after which doubling would pass the maximum (a fraction is kept, so
        # the last doubling reaches the maximum itself, not a power of two below it).
        self._top = (
            math.log(max_ms / max(self.initial_ms, 1), self.BASE) if max_ms > self.initial_ms else 0
        )

    def wait_ms(self, attempts: int) -> int:
        """The wait after `attempts` earlier failures (0: after the first failure)."""
        if self._top == 0:
            return self.initial_ms
        grown = self.initial_ms * self.BASE ** min(attempts, self._top)
        spread = 1 - self.JITTER + 2 * self.JITTER * self._rand()
        return min(int(grown * spread), self.max_ms)


class Membership:
    """One member's state in a consumer group (Java's membership + heartbeat state)."""

    def __init__(
        self,
        member_id: str,
        *,
        instance_id: str | None = None,
        rebalance_timeout_ms: int = 300000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        rack_id: str | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        # v1 of the request: the client makes its own member id, kept across rejoins.
        # v0: "" until the broker gives one in its first answer.
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        # Java's heartbeat request state: failed attempts back off exponentially; a
        # success, a fencing or a coordinator change starts again from the first wait.
        self.backoff = Backoff(retry_backoff_ms, retry_backoff_max_ms, rand)
        self._attempts = 0
        self._retry_at_ms: int | None = None
        self._state = MemberState.UNSUBSCRIBED
        self.epoch = JOIN_EPOCH
        self.subscription = Subscription()
        self.interval_ms = 0  # the broker says; 0 until the first answer
        self.owned_ids: Partitions = {}  # what the member owns, by topic id
        self.target_ids: Partitions | None = None  # the latest assignment received
        self.names: dict[str, str] = {}  # topic id -> name, from metadata
        self._timer_ms: int | None = None
        self._in_flight = False
        self._send_now = False
        self._sent: Heartbeat | None = None  # the fields the broker knows (Java: sentFields)
        self._owned_changed = True
        self._reconciling: tuple[Partitions, Partitions] = ({}, {})  # revoke, assign by id
        self._stale_after_leave = False
        self._leave_in_flight = False

    @property
    def state(self) -> MemberState:
        return self._state

    def _become(self, after: MemberState) -> None:
        """The one way the state changes (Java: transitionTo): refused unless the table
        lists the current state among the new one's predecessors."""
        if self._state not in may_follow(after):
            raise IllegalTransition(self._state, after)
        self._state = after

    # -- subscription and leaving ------------------------------------------------------
    def subscribe(self, subscription: Subscription) -> None:
        """A new subscription: join if not a member yet, else tell the broker at once."""
        self.subscription = subscription
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.STALE):
            self._join()
        self._send_now = True

    def leave(self) -> Partitions:
        """Start leaving (Java: leaveGroup): returns the partitions to revoke first."""
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return {}
        self._become(MemberState.PREPARE_LEAVING)
        return self.owned()

    def revoked_for_leave(self) -> None:
        """Revocation done: the leave heartbeat goes out next."""
        self.owned_ids = {}
        self._become(MemberState.LEAVING)
        self.epoch = LEAVE_EPOCH_STATIC if self.instance_id else LEAVE_EPOCH
        self._send_now = True

    def poll_timer_expired(self) -> Partitions:
        """max.poll.interval.ms passed without a poll: leave, and lose the partitions.

        Java sends the leave heartbeat (epoch -1; -2 for a static member, as every leave
        of a static member), drops the assignment calling onPartitionsLost, and stays
        STALE until the next poll rejoins."""
        lost = self.owned()
        self.owned_ids, self.target_ids = {}, None
        self._become(MemberState.LEAVING)
        self.epoch = LEAVE_EPOCH_STATIC if self.instance_id else LEAVE_EPOCH
        self._stale_after_leave = True
        self._send_now = True
        return lost

    def polled(self) -> None:
        """The application polled: a STALE member joins again."""
        if self.state is MemberState.STALE:
            self._join()

    # -- heartbeats --------------------------------------------------------------------
    def heartbeat_due(self, now_ms: int) -> bool:
        if self._in_flight or self.state not in _HEARTBEATING:
            return False
        if self._send_now and self.state in _HEARTBEAT_NOW:
            return True  # Java: a join, acknowledgement or leave does not wait a backoff
        if self._retry_at_ms is not None and now_ms < self._retry_at_ms:
            return False
        if self._send_now or self._timer_ms is None:
            return True
        return now_ms - self._timer_ms >= self.interval_ms

    def _failed_attempt(self, now_ms: int) -> int:
        """A heartbeat failed in a way Java retries after a backoff: the next one goes
        out once it has passed (not an interval later). Returns the wait."""
        wait = self.backoff.wait_ms(self._attempts)
        self._attempts += 1
        self._retry_at_ms = now_ms + wait
        self._send_now = True
        return wait

    def _reset_backoff(self) -> None:
        self._attempts = 0
        self._retry_at_ms = None

    def next_heartbeat(self, now_ms: int) -> Heartbeat:
        """The request to send now; only the fields the broker does not know yet."""
        full = self.state is MemberState.JOINING or self._sent is None
        sub = self.subscription
        # The broker keeps the names and the regex it was last sent and subscribes the
        # member to both: a switch from one to the other clears the other ([] or "").
        names = tuple(sorted(sub.topics)) if sub.regex is None else ()
        regex = sub.regex or ""
        sent = self._sent
        sent_regex = (sent.subscribed_topic_regex or "") if sent is not None else ""
        hb = Heartbeat(
            member_id=self.member_id,
            member_epoch=self.epoch,
            # Java sends a static member's instance id on every heartbeat, not only the join
            # (seen in the conformance suite's k848 situations).
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else None,
            subscribed_topic_names=names
            if full or sent is None or names != sent.subscribed_topic_names
            else None,
            subscribed_topic_regex=regex
            if (full and regex) or (not full and regex != sent_regex)
            else None,
            server_assignor=sub.server_assignor
            if full or sent is None or sub.server_assignor != sent.server_assignor
            else None,
            owned=dict(self.owned_ids)
            if full or self._owned_changed or self.state is MemberState.ACKNOWLEDGING
            else None,
            # Java sends the rack with a join only (the broker keeps it for the member).
            rack_id=self.rack_id if self.state is MemberState.JOINING else None,
        )
        self._in_flight = True
        self._send_now = False
        self._timer_ms = now_ms
        if self.state is MemberState.LEAVING:
            return self._leave_heartbeat()
        self._remember_sent(hb)
        if self.state is MemberState.ACKNOWLEDGING and self._target_reconciled():
            # Java (onHeartbeatRequestGenerated): acknowledged once the request goes out.
            self._become(MemberState.STABLE)
        return hb

    def _leave_heartbeat(self) -> Heartbeat:
        """The leave: Java leaves the state as the request goes out (UNSUBSCRIBED, or
        STALE after a poll timeout) and ignores the answer.

        Its fields follow the rule of every heartbeat (what changed since last sent):
        the partitions are gone, so an empty owned list goes out; a member leaving for
        good has unsubscribed first (Java's close), so an empty topic list goes out too,
        while one leaving on a poll timeout keeps its subscription. After a failed
        request (nothing known as sent) the rebalance timeout and assignor go again."""
        sent = self._sent
        stale, self._stale_after_leave = self._stale_after_leave, False
        names: tuple[str, ...] = ()
        if stale and self.subscription.regex is None:
            names = tuple(sorted(self.subscription.topics))
        hb = Heartbeat(
            self.member_id,
            self.epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if sent is None else None,
            subscribed_topic_names=names
            if sent is None or sent.subscribed_topic_names != names
            else None,
            server_assignor=self.subscription.server_assignor if sent is None else None,
            owned={} if sent is None or sent.owned != {} else None,
        )
        self._become(MemberState.STALE if stale else MemberState.UNSUBSCRIBED)
        self.epoch = JOIN_EPOCH
        self._sent = None
        self._leave_in_flight = True
        return hb

    @property
    def in_group(self) -> bool:
        """A member the broker counts in the group now: an epoch it was given, not fenced,
        failed or leaving (Java's commit manager drops the epoch otherwise)."""
        return self.epoch > 0 and self.state in (
            MemberState.JOINING,
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.STABLE,
        )

    @property
    def leave_pending(self) -> bool:
        """A leave not yet sent, or sent and not yet answered (what a closing member waits
        for, as Java's close waits for its leave)."""
        return self.state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING) or (
            self._leave_in_flight
        )

    def _target_reconciled(self) -> bool:
        target = self.target_ids if self.target_ids is not None else {}
        return {t: ps for t, ps in target.items() if ps} == self.owned_ids

    def _remember_sent(self, hb: Heartbeat) -> None:
        prev = self._sent or Heartbeat(self.member_id, self.epoch)
        self._sent = Heartbeat(
            member_id=hb.member_id,
            member_epoch=hb.member_epoch,
            instance_id=hb.instance_id or prev.instance_id,
            rebalance_timeout_ms=hb.rebalance_timeout_ms or prev.rebalance_timeout_ms,
            subscribed_topic_names=hb.subscribed_topic_names
            if hb.subscribed_topic_names is not None
            else prev.subscribed_topic_names,
            subscribed_topic_regex=hb.subscribed_topic_regex
            if hb.subscribed_topic_regex is not None
            else prev.subscribed_topic_regex,
            server_assignor=hb.server_assignor or prev.server_assignor,
            owned=hb.owned if hb.owned is not None else prev.owned,
        )
        if hb.owned is not None:
            self._owned_changed = False

    def send_failed(self, now_ms: int) -> Outcome:
        """The request got no answer (disconnect, timeout): find the coordinator, retry."""
        self._in_flight = False
        self._leave_in_flight = False
        self._sent = None  # Java resets the sent fields: the next heartbeat carries all
        # Once the coordinator is found again and the backoff has passed, not an interval
        # later (a join, acknowledgement or leave goes as soon as the coordinator is known).
        wait = self._failed_attempt(now_ms)
        return Outcome(self.state, find_coordinator=True, retry_after_ms=wait)

    def on_answer(self, answer: Answer, now_ms: int) -> Outcome:
        """An answer to the heartbeat in flight."""
        self._in_flight = False
        self._timer_ms = now_ms  # Java's timer restarts at the answer, not the send
        if self._leave_in_flight:
            # Java ignores the leave's answer (it may already be joining again).
            self._leave_in_flight = False
            return Outcome(self.state, note="left the group")
        if answer.error != "NONE":
            return self._on_error(answer, now_ms)
        self._reset_backoff()
        if answer.heartbeat_interval_ms > 0:
            self.interval_ms = answer.heartbeat_interval_ms
        if answer.member_id:
            self.member_id = answer.member_id
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.target_ids = answer.assignment
        if self.state is MemberState.ACKNOWLEDGING and answer.assignment is None:
            self._become(MemberState.STABLE)
        return self._maybe_reconcile()

    def _maybe_reconcile(self) -> Outcome:
        target = self.target_ids
        if target is None or self.state is MemberState.RECONCILING:
            if self.state is MemberState.JOINING and target is None:
                return Outcome(self.state, note="joined; no assignment yet")
            return Outcome(self.state)
        resolvable = {t: ps for t, ps in target.items() if t in self.names}
        pending = frozenset(t for t in target if t not in self.names)
        owned_resolvable = {t: ps for t, ps in self.owned_ids.items() if t in self.names}
        revoke = _diff(owned_resolvable, resolvable)
        assign = _diff(resolvable, self.owned_ids)
        if not revoke and not assign:
            if self.state in (MemberState.JOINING, MemberState.RECONCILING) and not pending:
                self._become(MemberState.STABLE)
            return Outcome(self.state, note="assignment unchanged" if not pending else "")
        self._become(MemberState.RECONCILING)
        plan = Reconcile(self.epoch, self.named(revoke), self.named(assign), pending)
        self._reconciling = (revoke, assign)
        return Outcome(self.state, reconcile=plan)

    def reconciled(self) -> None:
        """The plan was carried out (commit, revoke, assign): acknowledge at once."""
        revoke, assign = self._reconciling
        self.owned_ids = _union(_diff(self.owned_ids, revoke), assign)
        self.owned_ids = {t: ps for t, ps in self.owned_ids.items() if ps}
        self._owned_changed = True
        self._become(MemberState.ACKNOWLEDGING)
        self._send_now = True

    def lost_handled(self) -> None:
        """onPartitionsLost returned after fencing: join again with epoch 0."""
        if self.state is MemberState.FENCED:
            self._join()

    def topics_known(self, names: dict[str, str]) -> Outcome:
        """New metadata: topic ids the member could not name may now be assigned."""
        self.names.update(names)
        if self.state in (MemberState.STABLE, MemberState.ACKNOWLEDGING, MemberState.JOINING):
            return self._maybe_reconcile()
        return Outcome(self.state)

    def _on_error(self, answer: Answer, now_ms: int) -> Outcome:
        error = answer.error
        # Java resets the sent fields on every error answer: the next heartbeat carries
        # all of them (seen after COORDINATOR_LOAD_IN_PROGRESS in the conformance suite).
        self._sent = None
        if error in FATAL_HEARTBEAT:
            lost = self.owned()
            self.owned_ids = {}
            self._become(MemberState.FATAL)
            return Outcome(self.state, lost=lost, fatal=error, note=answer.message or "")
        if error in FENCES_MEMBER:
            # Java: transitionToFenced -> onPartitionsLost; once that returns, rejoin
            # with epoch 0 and the same member id (`lost_handled`).
            lost = self.owned()
            self.owned_ids, self.target_ids = {}, None
            self._become(MemberState.FENCED)
            self._reset_backoff()  # the rejoin goes as soon as the partitions are released
            return Outcome(self.state, lost=lost, note=error)
        if error in COORDINATOR_MOVED:
            self._sent = None
            self._send_now = True
            self._reset_backoff()  # sent as soon as the coordinator is found again
            return Outcome(self.state, find_coordinator=True, note=error)
        if error in COORDINATOR_LOADING:  # the heartbeat again, after a backoff
            wait = self._failed_attempt(now_ms)
            return Outcome(self.state, retry_after_ms=wait, note=error)
        # Anything else Java does not retry ends the member.
        lost = self.owned()
        self.owned_ids = {}
        self._become(MemberState.FATAL)
        return Outcome(self.state, lost=lost, fatal=error, note=answer.message or "")

    # -- views -------------------------------------------------------------------------
    def owned(self) -> Partitions:
        """What the member owns, by topic name where known."""
        return self.named(self.owned_ids)

    def named(self, by_id: Partitions) -> Partitions:
        return {self.names.get(t, t): ps for t, ps in by_id.items() if ps}

    def _join(self) -> None:
        self._become(MemberState.JOINING)
        self.epoch = JOIN_EPOCH
        self._sent = None
        self._owned_changed = True
        self._send_now = True


# -- the broker-side regex (SubscribedTopicRegex) ------------------------------------------
# The broker compiles the member's regex with RE2J and matches whole topic names. RE2J
# has no lookaround, no backreferences, no atomic groups or possessive quantifiers, no
# conditionals: a regex using them is refused by the broker (INVALID_REGULAR_EXPRESSION)
# or, worse, means something else. Checked before the member joins.
_RE2J_UNSUPPORTED = (
    (re.compile(r"\(\?<?[=!]"), "lookaround ((?=, (?!, (?<=, (?<!)"),
    (re.compile(r"\\[1-9]|\(\?P=|\\k<"), "backreferences (\\1, (?P=name), \\k<name>)"),
    (re.compile(r"\(\?>"), "atomic groups ((?>...))"),
    (re.compile(r"\(\?\("), "conditionals ((?(...)...))"),
    (re.compile(r"(?<!\\)[*+?}]\+"), "possessive quantifiers (*+, ++, ?+)"),
    (re.compile(r"\\[ZG]"), "\\Z or \\G anchors (use \\z, or nothing: whole names are matched)"),
)


def re2j_problem(pattern: str) -> str | None:
    """Why RE2J (the broker's regex engine) will not read `pattern` as Python does, or
    None. Escaped backslashes are skipped so `\\\\1` (a backslash then 1) passes."""
    text = re.sub(r"\\\\", "", pattern)
    for found, what in _RE2J_UNSUPPORTED:
        if found.search(text):
            return f"RE2J, the broker's regex engine, has no {what}"
    return None
