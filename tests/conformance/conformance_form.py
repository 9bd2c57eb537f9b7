"""The conformance suite's pure half: what one member did in one situation, as the proxy
and its listener saw it, turned into a form two clients can be compared in; the
comparison; and the allow-list read from docs/member.md.

No broker and no clock here (tests/conformance/test_conformance_form.py tests it alone).
The real-broker half (test_conformance_kafka.py) records, for each run:

- `Request`s: every group request the member sent, from the proxy's `*Traced` events
  (`sent_ms` is when the proxy read the request: its answer time minus the latency);
- `Callback`s: the member's rebalance listener calls (Java's VerifiableConsumer prints
  `partitions_revoked` / `partitions_assigned`; kgctl emits `PartitionsRevoked`,
  `PartitionsLost`, `PartitionsAssigned`; kcat prints its rebalance lines);
- `Mark`s: what the test did to the member (`stop`: SIGTERM) and whether it exited
  on its own.

How a lost partition is told from a revoked one when the client cannot say
(VerifiableConsumer's listener has no `onPartitionsLost`, so Java's default hands lost
partitions to `onPartitionsRevoked`, and VerifiableConsumer prints them as revoked):
Java calls "lost" exactly when its generation was reset when the listener runs
(`ConsumerCoordinator.onJoinPrepare`: no generation, or no member id), and at close
also when a rebalance is in progress (`onLeavePrepare`). A reset happens on an answer
with UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_INSTANCE_ID (any group API) and
lasts until a JoinGroup is answered with a generation; a rebalance is in progress from
a JoinGroup sent until its SyncGroup is answered. So a `revoked_or_lost` call is `lost`
when, by the answers the member had received before the call, its generation was
reset or (after the test stopped it) a join was under way, and `revoked` otherwise
(`settle_lost`).

The consumer protocol (KIP-848, ConsumerGroupHeartbeat) has no JoinGroup: a member is
fenced by a heartbeat answered FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID (Java's
transitionToFenced calls onPartitionsLost, which VerifiableConsumer prints as revoked),
and a fatal answer (FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID) drops the assignment the
same way; the next heartbeat answered NONE makes it a member again. Each heartbeat is a
step naming its member epoch relative to the one the coordinator last gave (`join` 0,
`current`, `stale`, `leave` -1, `leave-static` -2), the optional fields it carried (the
rest were null: "unchanged"), and the partitions it says it owns relative to the
assignment last given (`target`); a heartbeat with no optional field, of the current
epoch, answered NONE is timing, not a step (how many there are is the clock's), as an
answered classic heartbeat is. The gap between such steady heartbeats, against the
interval the broker gave, is compared as a delay (`steady heartbeat interval`).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any

# The answers after which a Java member has no generation (AbstractCoordinator
# resetGenerationOnResponseError / resetStateAndGeneration).
RESET_ERRORS = frozenset({"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_INSTANCE_ID"})
# ConsumerGroupHeartbeat answers after which a consumer-protocol member has lost its
# partitions (Java: fenced, or fatal), until a heartbeat of its is answered NONE again.
CGH = "ConsumerGroupHeartbeat"
CGH_LOSING_ERRORS = frozenset(
    {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "UNRELEASED_INSTANCE_ID"}
)

# How far apart two clients' retry delays may be before they count as a difference.
# Both clients run with retry.backoff.ms=100 and heartbeat.interval.ms=500. A retry
# that waits for the next heartbeat tick or poll can land anywhere in one heartbeat
# interval, a backoff adds up to one retry.backoff.ms, and a JVM and a Python process
# sharing two busy cores are scheduled up to a few hundred ms late: 500 + 100 + 400.
DELAY_TOLERANCE_MS = 1000.0
# A wait longer than that (a session timeout, a backoff that grew) is compared
# relatively: both clients must wait within a quarter of the longer wait.
DELAY_RELATIVE = 0.25


@dataclass(frozen=True)
class Request:
    """One group request the member sent, and its answer."""

    api: str  # JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup, FindCoordinator
    sent_ms: float
    answered_ms: float
    error: str  # NONE, an error name, NO_RESPONSE (dropped, hung, connection closed)
    member_id: str = ""  # the request's
    generation: int = -1  # the request's (SyncGroup, Heartbeat, OffsetCommit)
    injected: bool = False  # answered by a proxy fault rule, never forwarded
    reason: str | None = None  # JoinGroup v8+, LeaveGroup v5+ (KIP-800)
    owned: tuple[str, ...] | None = None  # JoinGroup: the partitions it claims (labels)
    dropped: bool = False  # the proxy closed the connection instead of answering
    version: int = -1  # the API version on the wire
    answer_member_id: str = ""  # JoinGroup's (and ConsumerGroupHeartbeat's) answer
    answer_generation: int = -1  # JoinGroup's answer; ConsumerGroupHeartbeat's member epoch
    # ConsumerGroupHeartbeat only (`generation` is the member epoch the request carried,
    # `owned` the partitions it says it owns, None when not sent):
    fields: tuple[str, ...] = ()  # the optional fields it carried (not null)
    assignment: tuple[str, ...] | None = None  # the answer's assignment; None: unchanged
    interval_ms: int = 0  # the heartbeat interval the answer gave


@dataclass(frozen=True)
class Callback:
    """One rebalance listener call, or a commit the member's program saw fail."""

    at_ms: float
    kind: str  # assigned, revoked, lost, revoked_or_lost (Java: not told apart),
    # commit failed
    detail: str  # the partitions, `[0, 1]` (`partitions`), or the commit's failure
    stamp_lag_ms: float = 0.0  # how much later than the call its stamp may be (kcat's
    # lines are stamped when the test reads them from its pipe)


def partitions(labels: list[str]) -> str:
    """Partitions as a step shows them: `[0, 1, b0]` (labels sorted, numbers first)."""
    return "[" + ", ".join(sorted(labels, key=lambda x: (not x.isdigit(), len(x), x))) + "]"


# The failure a member's program was told of when a commit failed: Java's exception
# (VerifiableConsumer prints its message) or kafka-python's error, by what it means.
_COMMIT_FAILURES = (
    ("undergoing a rebalance", "RebalanceInProgress"),
    ("executing a rebalance", "RebalanceInProgress"),
    ("REBALANCE_IN_PROGRESS", "RebalanceInProgress"),
    ("RebalanceInProgress", "RebalanceInProgress"),
    ("not part of an active group", "CommitFailed"),
    ("already rebalanced", "CommitFailed"),
    ("CommitFailed", "CommitFailed"),
)


def commit_failure(text: str) -> str:
    for needle, name in _COMMIT_FAILURES:
        if needle in text:
            return name
    return text.split(":")[0].strip() or "unknown"


@dataclass(frozen=True)
class Mark:
    """Something the test did to the member, or the member did by itself."""

    at_ms: float
    what: str  # stop (SIGTERM sent), exited (ended before being stopped)


@dataclass
class Trace:
    """One member's run in one situation, in the comparable form."""

    steps: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # its JoinGroups' reasons, normalised
    leave_reasons: list[str] = field(default_factory=list)  # its LeaveGroups' reasons
    delays: list[tuple[str, float]] = field(default_factory=list)  # (after what, ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "reasons": self.reasons,
            "leave_reasons": self.leave_reasons,
            "delays": self.delays,
        }


def settle_lost(
    requests: list[Request], callbacks: list[Callback], stop_ms: float | None = None
) -> list[Callback]:
    """Java's `revoked_or_lost` calls named: `lost` when the member's generation was reset
    at the time of the call, or when it was closing (from `stop_ms`) in the middle of a
    join (see the module's docstring); `revoked` otherwise."""
    out = []
    for cb in callbacks:
        if cb.kind != "revoked_or_lost":
            out.append(cb)
            continue
        reset, joining = _state_at(requests, cb.at_ms)
        closing = stop_ms is not None and cb.at_ms >= stop_ms
        lost = reset or (closing and joining)
        out.append(Callback(cb.at_ms, "lost" if lost else "revoked", cb.detail, cb.stamp_lag_ms))
    return out


def _state_at(requests: list[Request], at_ms: float) -> tuple[bool, bool]:
    """(generation reset, join under way) for a member at `at_ms`, by what it had sent
    and what answers it had received by then."""
    timeline = [(r.answered_ms, 1, r) for r in requests if r.answered_ms <= at_ms]
    # (a ConsumerGroupHeartbeat counts by its answer: a fenced member's lost call comes
    # before the join heartbeat it sends next)
    timeline += [(r.sent_ms, 0, r) for r in requests if r.api == "JoinGroup" and r.sent_ms <= at_ms]
    reset = joining = False
    for _, answered, r in sorted(timeline, key=lambda x: (x[0], x[1])):
        if r.api == CGH:
            if r.error in CGH_LOSING_ERRORS:
                reset = True
            elif r.error == "NONE":
                reset = False
            continue
        if not answered:
            joining = True
        elif r.error in RESET_ERRORS:
            reset, joining = True, False
        elif r.api == "JoinGroup":
            reset = reset and r.error != "NONE"
            joining = r.error == "NONE"
        elif r.api == "SyncGroup":
            joining = False
    return reset, joining


_MEMBER_ID = re.compile(r"[\w.-]*-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_KGCTL_MEMBER_ID = re.compile(r"[\w.-]+-[0-9a-f]{32}")


def normalise_reason(reason: str | None) -> str:
    """A KIP-800 reason with what differs from run to run taken out: member ids
    (Java's and kafka-python's forms), topic names and numbers in metadata snapshots."""
    if reason is None:
        return "<none>"
    text = _MEMBER_ID.sub("<member-id>", reason)
    text = _KGCTL_MEMBER_ID.sub("<member-id>", text)
    return re.sub(r"\d+", "N", text)


class _Walk:
    """State carried along one member's requests: its member id and generation as the
    coordinator last gave them, to name each request's relative to them."""

    def __init__(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.join_answered_ms: float | None = None  # the last JoinGroup answered NONE
        self.commit_failed = False  # the last commit answered an error
        self.refused_heartbeats: set[str] = set()  # since the last JoinGroup
        self.assignment: tuple[str, ...] = ()  # the last one a ConsumerGroupHeartbeat gave
        self.owned_sent: tuple[str, ...] = ()  # the last owned list a heartbeat carried
        # A new assignment given and not yet acknowledged (a heartbeat with owned): the
        # member is reconciling, and a commit it sends now is the reconciliation's.
        self.reconciling = False

    def member(self, member_id: str) -> str:
        if not member_id:
            return "none"
        return "current" if member_id == self.member_id else "other"

    def gen(self, generation: int) -> str:
        if generation < 0:
            return "-1"
        return "current" if generation == self.generation else "stale"

    def epoch(self, epoch: int) -> str:
        """A consumer-protocol member epoch, relative to the one last given."""
        named = {0: "join", -1: "leave", -2: "leave-static"}
        if epoch in named:
            return named[epoch]
        return "current" if epoch == self.generation else "stale"

    def owned(self, owned: tuple[str, ...]) -> str:
        """Owned partitions as sent: `[]`, `target` (the assignment last given), or
        the partitions themselves."""
        if owned and sorted(owned) == sorted(self.assignment):
            return "target"
        return partitions(list(owned))

    def learn(self, r: Request) -> None:
        if r.api == CGH:
            if r.owned is not None:
                self.owned_sent, self.reconciling = r.owned, False
            # The member epoch is the consumer protocol's generation (commits carry it).
            if r.error == "NONE" and r.generation >= 0 and r.answer_generation >= 0:
                self.generation = r.answer_generation
                self.member_id = r.answer_member_id or self.member_id
                if r.assignment is not None:
                    self.assignment = r.assignment
                    self.reconciling = sorted(r.assignment) != sorted(self.owned_sent)
            return
        if r.api == "OffsetCommit":
            self.commit_failed = r.error != "NONE"
        elif r.api == "JoinGroup":
            self.commit_failed = False
            self.refused_heartbeats = set()
        if r.api == "JoinGroup" and r.answer_member_id:
            self.member_id = r.answer_member_id
        if r.api == "JoinGroup" and r.error == "NONE":
            self.generation = r.answer_generation
            self.join_answered_ms = r.answered_ms


def _request_step(r: Request, walk: _Walk) -> str | None:
    step = _request_text(r, walk)
    if r.api == "Heartbeat" and step is not None:
        # Once a heartbeat was refused, how many more are refused the same way before the
        # member's next JoinGroup depends on how many heartbeat ticks that took.
        if step in walk.refused_heartbeats:
            return None
        walk.refused_heartbeats.add(step)
    return step


# Sent on every heartbeat of a static member (Java's rule), so no sign of a change.
ALWAYS_SENT = frozenset({"instance_id"})


def steady(r: Request) -> bool:
    """A ConsumerGroupHeartbeat that says nothing new: answered NONE, with a member epoch
    and nothing else but what goes with every heartbeat."""
    return (
        r.api == CGH
        and r.error == "NONE"
        and not r.dropped
        and r.generation > 0
        and set(r.fields) <= ALWAYS_SENT
    )


def _heartbeat_text(r: Request, walk: _Walk) -> str | None:
    """A ConsumerGroupHeartbeat as a step: `ConsumerGroupHeartbeat(epoch=E[, FIELD...][,
    owned=target|[..]]) -> ERROR`; None for a steady one (current epoch, nothing but the
    epoch sent, answered NONE)."""
    epoch = walk.epoch(r.generation)
    if epoch == "current" and steady(r):
        return None
    parts = [f"epoch={epoch}"] + [f for f in r.fields if f != "owned"]
    if r.owned is not None:
        parts.append(f"owned={walk.owned(r.owned)}")
    error = f"{r.error}, connection closed" if r.dropped else r.error
    return f"{CGH}({', '.join(parts)}) -> {error}"


def _request_text(r: Request, walk: _Walk) -> str | None:
    """The step a request shows as, or None for one that is timing, not behaviour: an
    answered heartbeat (how many there are depends on the clock), a refused heartbeat of
    the generation being replaced, and an answered commit
    (when a member commits is its program's choice, VerifiableConsumer's or kgctl
    join's), unless it retries a commit that failed."""
    if r.api == CGH:
        return _heartbeat_text(r, walk)
    if r.api == "Heartbeat" and r.error == "NONE":
        return None
    if (
        r.api == "Heartbeat"
        and r.error == "REBALANCE_IN_PROGRESS"
        and walk.gen(r.generation) == "stale"
    ):
        # A heartbeat of the generation the member is leaving, in flight when its
        # JoinGroup was answered: whether one was is the clock's (Java, seen in CI).
        return None
    if r.api == "OffsetCommit" and r.error == "NONE" and walk.reconciling:
        return f"OffsetCommit(gen={walk.gen(r.generation)}) -> NONE (reconciling)"
    if r.api == "OffsetCommit" and r.error == "NONE" and not walk.commit_failed:
        return None
    error = f"{r.error}, connection closed" if r.dropped else r.error
    if r.api == "JoinGroup":
        # No claim and an empty claim are one thing (a v0 subscription has no field).
        owned = f", owned={partitions(list(r.owned))}" if r.owned else ""
        return f"JoinGroup(member={walk.member(r.member_id)}{owned}) -> {error}"
    if r.api in ("SyncGroup", "Heartbeat", "OffsetCommit"):
        return f"{r.api}(gen={walk.gen(r.generation)}) -> {error}"
    return f"{r.api} -> {error}"


# Both clients run with heartbeat.interval.ms=500 and start the interval at the JoinGroup
# answer (Java's heartbeat thread is enabled there). How long a SyncGroup waits is the
# leader's timing, so whether a heartbeat went out in a short wait says nothing (CI,
# stop 37: Java's wait passed one interval and it heartbeated, kgctl's did not pass it).
# What a client does is seen only in a wait of two intervals: one was due in it, and a
# client that sent none does not heartbeat while it syncs. Only that absence is a step.
HEARTBEAT_INTERVAL_MS = 500.0
QUIET_SYNC_WAIT_MS = 2 * HEARTBEAT_INTERVAL_MS
NO_HEARTBEAT_WHILE_SYNCING = "no heartbeat during a SyncGroup wait of two intervals"


def _silent_while_syncing(sync: Request, requests: list[Request], walk: _Walk) -> bool:
    """Did the member send no heartbeat while it waited for this SyncGroup's answer, in a
    wait (from its JoinGroup answer or the SyncGroup, whichever came later) long enough
    that one was due?"""
    if walk.join_answered_ms is None:
        return False
    start = max(walk.join_answered_ms, sync.sent_ms)
    if sync.answered_ms - start <= QUIET_SYNC_WAIT_MS:
        return False
    return not any(r.api == "Heartbeat" and start <= r.sent_ms < sync.answered_ms for r in requests)


def _commit_in_flight(join: Request, requests: list[Request]) -> bool:
    """Was a commit sent before this JoinGroup still unanswered when it went out (Java's
    onJoinPrepare waits for its pre-rebalance commit first)?"""
    return any(
        r.api == "OffsetCommit" and r.sent_ms < join.sent_ms < r.answered_ms for r in requests
    )


def normalise(
    requests: list[Request],
    callbacks: list[Callback],
    marks: list[Mark],
    since_ms: float,
) -> Trace:
    """One member's run as steps (from `since_ms` on; what came before only sets the
    member id and generation the later requests are named against), the reasons its
    JoinGroups gave, and how long it waited after each failure the proxy injected.

    Steps: each request as `API(member=none|current|other[, owned=[..]]) -> ERROR` or
    `API(gen=current|stale|-1) -> ERROR` (answered heartbeats and commits left out, but
    for a commit retrying one that failed), each listener call as
    `assigned|revoked|lost [ids]`, a commit the program saw fail as `commit failed WHAT`,
    `no heartbeat during a SyncGroup wait of two intervals` before a SyncGroup that
    waited that long with no heartbeat going,
    `JoinGroup sent with an OffsetCommit in flight` before such a JoinGroup,
    `<stop>` and `exited`. Repeats in a row
    of one step count once: a retry loop's length is timing."""
    requests = sorted(requests, key=lambda r: r.sent_ms)
    # The clients stamp their calls in whole milliseconds (truncated) and the test its
    # SIGTERM to the microsecond: a member's reaction in the stop's own millisecond can
    # look older than the stop (seen: kgctl's revoke at close, stamped 0.4 ms "before"
    # it). A stop counts from the start of its millisecond, ahead of what is stamped in it;
    # the test sends one only once the clock has left the millisecond of everything it
    # saw, so what it waited for is never stamped in the stop's millisecond.
    marks = [Mark(float(math.floor(m.at_ms)), m.what) if m.what == "stop" else m for m in marks]
    stops = [m.at_ms for m in marks if m.what == "stop"]
    callbacks = settle_lost(requests, callbacks, min(stops) if stops else None)
    items: list[tuple[float, int, Any]] = [(r.sent_ms, 0, r) for r in requests]
    items += [(c.at_ms, 1, c) for c in callbacks]
    items += [(m.at_ms, -1 if m.what == "stop" else 2, m) for m in marks]
    items.sort(key=lambda x: (x[0], x[1]))
    items = _listener_first(items)
    walk, trace = _Walk(), Trace()
    for at, _, item in items:
        step: str | None = None
        if isinstance(item, Request):
            if in_window(item, since_ms):
                if item.api == "SyncGroup" and _silent_while_syncing(item, requests, walk):
                    _add(trace.steps, NO_HEARTBEAT_WHILE_SYNCING)
                if item.api == "JoinGroup" and _commit_in_flight(item, requests):
                    _add(trace.steps, "JoinGroup sent with an OffsetCommit in flight")
                step = _request_step(item, walk)
                if item.api == "JoinGroup":
                    trace.reasons.append(normalise_reason(item.reason))
                elif item.api == "LeaveGroup":
                    trace.leave_reasons.append(normalise_reason(item.reason))
            walk.learn(item)
        elif isinstance(item, Callback):
            step = f"{item.kind} {item.detail}" if at >= since_ms else None
        else:
            step = f"<{item.what}>" if item.what == "stop" else item.what
        if step is not None:
            _add(trace.steps, step)
    trace.delays = retry_delays(requests, since_ms) + steady_interval(requests, since_ms)
    return trace


# The listener runs just before a JoinGroup (prepare) or LeaveGroup (close) is sent,
# often within the same millisecond; the member stamps its callback after the call
# (kcat's line is stamped when read), and the proxy's times are whole milliseconds
# less a latency. A callback stamped up to this long after such a request was read
# (and before its answer) is put before it, where it ran.
LISTENER_SLACK_MS = 2.0


def _listener_first(items: list[tuple[float, int, Any]]) -> list[tuple[float, int, Any]]:
    out = list(items)
    for i in range(1, len(out)):
        j = i
        while j > 0 and _ran_before(out[j][2], out[j - 1][2]):
            out[j - 1], out[j] = out[j], out[j - 1]
            j -= 1
    return out


def _ran_before(cb: Any, r: Any) -> bool:
    if not (isinstance(cb, Callback) and isinstance(r, Request)):
        return False
    at = cb.at_ms - cb.stamp_lag_ms  # the earliest the call can have run
    if cb.kind == "revoked" and r.api == "JoinGroup" and r.sent_ms <= at <= r.answered_ms:
        # Neither client revokes while its JoinGroup is in flight (Java revokes in
        # onJoinPrepare and onLeavePrepare only): a revoke stamped then is that
        # JoinGroup's prepare, stamped late on a loaded machine (seen in CI: over 2 ms).
        return True
    if r.api not in ("JoinGroup", "LeaveGroup", CGH) or at - r.sent_ms > LISTENER_SLACK_MS:
        return False
    # An answer that resets the generation is followed by the lost call it causes: one
    # stamped in the answer's millisecond is that reaction, not a prepare before it.
    if r.error in RESET_ERRORS or (r.api == CGH and r.error in CGH_LOSING_ERRORS):
        return at < r.answered_ms
    return at <= r.answered_ms


def _add(steps: list[str], step: str) -> None:
    if not steps or steps[-1] != step:
        steps.append(step)


def in_window(r: Request, since_ms: float) -> bool:
    """Whether a request belongs to the compared run: sent from `since_ms` on, or answered
    by a fault rule. The proxy stamps its answers in whole milliseconds (truncated), so a
    request read in the millisecond the situation began can look up to 1 ms older than it
    (seen in CI: Java's faulted OffsetCommit left out); every rule is armed after
    `since_ms`, so an injected answer is always the situation's."""
    return r.injected or r.sent_ms >= since_ms


def retry_delays(requests: list[Request], since_ms: float) -> list[tuple[str, float]]:
    """For each answer the proxy injected (from `since_ms` on): how long the member took
    to send its next group request, labelled `after API ERROR`."""
    ordered = sorted(requests, key=lambda r: r.sent_ms)
    out = []
    for r in ordered:
        if not r.injected or not in_window(r, since_ms):
            continue
        nxt = next((n for n in ordered if n.sent_ms >= r.answered_ms and n is not r), None)
        if nxt is not None:
            out.append((f"after {r.api} {r.error}", round(nxt.sent_ms - r.answered_ms, 1)))
    return out


# Steady heartbeats needed before their interval is compared (a median of fewer is one
# heartbeat's luck).
STEADY_SAMPLES = 3


def steady_interval(requests: list[Request], since_ms: float) -> list[tuple[str, float]]:
    """The median wait between a steady ConsumerGroupHeartbeat's answer (`steady`) and
    the next heartbeat, when it is followed by
    another steady one: what the member made of the interval the broker gave. Labelled
    `steady heartbeat interval (given N ms)`; nothing when fewer than STEADY_SAMPLES."""
    beats = sorted((r for r in requests if r.api == CGH), key=lambda r: r.sent_ms)
    gaps = [
        b.sent_ms - a.answered_ms
        for a, b in zip(beats, beats[1:], strict=False)
        if a.sent_ms >= since_ms and steady(a) and steady(b)
    ]
    if len(gaps) < STEADY_SAMPLES:
        return []
    given = next((r.interval_ms for r in reversed(beats) if r.interval_ms > 0), 0)
    gaps.sort()
    return [(f"steady heartbeat interval (given {given} ms)", round(gaps[len(gaps) // 2], 1))]


def delays_differ(a_ms: float, b_ms: float) -> bool:
    """Two waits for the same thing differ beyond the tolerances above."""
    gap = abs(a_ms - b_ms)
    return gap > DELAY_TOLERANCE_MS and gap > DELAY_RELATIVE * max(a_ms, b_ms)


def compare(java: Trace, other: Trace, name: str = "kgctl") -> list[str]:
    """The differences between Java's trace and another client's, one line each:
    `java only: STEP`, `NAME only: STEP`, `reason #i: java '...' NAME '...'`,
    `delay after API ERROR: java N ms, NAME M ms`."""
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=java.steps, b=other.steps, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        out += [f"java only: {s}" for s in java.steps[a0:a1]]
        out += [f"{name} only: {s}" for s in other.steps[b0:b1]]
    for i, (a, b) in enumerate(zip(java.reasons, other.reasons, strict=False), 1):
        if a != b:
            out.append(f"reason #{i}: java {a!r} {name} {b!r}")
    for a, b in zip(java.leave_reasons, other.leave_reasons, strict=False):
        if a != b:
            out.append(f"leave reason: java {a!r} {name} {b!r}")
    theirs = dict(other.delays)
    for label, ms in java.delays:
        if label in theirs and delays_differ(ms, theirs[label]):
            out.append(f"delay {label}: java {ms:.0f} ms, {name} {theirs[label]:.0f} ms")
    return out


# -- the allow-list in docs/member.md -----------------------------------------------------

ALLOW_HEADING = "## Where kgctl and librdkafka differ from Java (the conformance allow-list)"
ALLOW_COLUMNS = ["situations", "client", "difference", "why", "what a user sees"]


@dataclass(frozen=True)
class Allowed:
    """One allow-list row: differences matching `difference` (patterns, `matches`, on
    the lines `compare` writes, several separated by ` ; `) are accepted in situations
    matching `situations` (patterns separated by commas) for `client`."""

    situations: str
    client: str
    difference: str
    why: str
    effect: str

    def covers(self, situation: str, client: str, difference: str) -> bool:
        return (
            client == self.client
            and any(matches(s, situation) for s in self.situations.split(","))
            and any(matches(d, difference) for d in self.difference.split(" ; "))
        )


def matches(pattern: str, text: str) -> bool:
    """`*` stands for any text; everything else is literal (the suite's lines hold
    brackets, which fnmatch would read as character classes)."""
    parts = [re.escape(p) for p in pattern.strip().split("*")]
    return re.fullmatch(".*".join(parts), text, re.DOTALL) is not None


class AllowListError(ValueError):
    """The allow-list section of docs/member.md is missing or malformed."""


def _cells(line: str) -> list[str]:
    inner = line.strip()[1:-1]
    return [c.replace("`", "").strip() for c in re.split(r"(?<!\\)\|", inner)]


def read_allow_list(doc: str) -> list[Allowed]:
    """The allow-list table under ALLOW_HEADING: every row needs all five cells filled (a
    difference allowed without its reason and effect is refused)."""
    lines = doc.splitlines()
    try:
        start = lines.index(ALLOW_HEADING)
    except ValueError:
        raise AllowListError(f"docs/member.md has no section {ALLOW_HEADING!r}") from None
    rows: list[Allowed] = []
    header: list[str] | None = None
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if header is not None and rows:
                break
            continue
        cells = _cells(line)
        if header is None:
            header = [c.lower() for c in cells]
            if header != ALLOW_COLUMNS:
                raise AllowListError(f"allow-list columns {header}, expected {ALLOW_COLUMNS}")
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        if len(cells) != len(ALLOW_COLUMNS) or not all(cells):
            raise AllowListError(f"allow-list row with an empty or missing cell: {line}")
        cells = [c.replace("\\|", "|") for c in cells]
        if cells[1] not in ("kgctl", "librdkafka"):
            raise AllowListError(f"allow-list client {cells[1]!r}: kgctl or librdkafka")
        rows.append(Allowed(*cells))
    if header is None:
        raise AllowListError("the allow-list section has no table")
    return rows


def unexplained(
    differences: list[str], allowed: list[Allowed], situation: str, client: str
) -> list[str]:
    return [d for d in differences if not any(a.covers(situation, client, d) for a in allowed)]
