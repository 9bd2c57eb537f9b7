"""The diagnosis's vocabulary and its answer: the frozen dataclasses a diagnosis is made of
(`Trigger`, `Wait`, `Cost`, `Advice`, `Diagnosis`, and what it is given: `Context`,
`BrokerReason`, `AssignmentInput`), each with its JSON (`to_dict`), and the words and
thresholds the other modules share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from kgctl.model.bounds import GroupBounds
from kgctl.model.event_types import EventType
from kgctl.model.reasons import Cause, cause_text
from kgctl.model.state import (
    TopicPartition,
)
from kgctl.model.timeline import UnassignedBasis

# How a trigger or a wait is known: `exact` from a member's, the wire's or the broker
# log's own words, `inferred` from snapshots, stored records or a silence.
Confidence = Literal["exact", "inferred"]
EXACT: Final = "exact"
INFERRED: Final = "inferred"

FENCED = "FENCED_INSTANCE_ID"
POLL_BREACH = "max.poll.interval.ms exceeded"  # a PollIntervalExceeded's reason

# A cause within this much after the rebalance's first sign still started it: members
# stamp their own events, and a member learns of a rebalance at its next heartbeat.
START_SLACK_MS = 500
# A join phase that ends this long after the last live member's JoinGroup waited for
# someone else (or for that member).
WAIT_SLACK_MS = 300
# A wait this close to a member's session timeout (as a share) was that timeout.
SESSION_MATCH = 0.8

# A member's main-thread steps: the first one after a batch ends its processing.
MAIN_THREAD_TYPES: frozenset[EventType] = frozenset(
    {"RecordsConsumed", "RejoinRequested", "JoinGroupSent", "MemberStopped"}
)
# Events that say nothing about why a member acts (routine or a reaction).
ROUTINE_TYPES: frozenset[EventType] = frozenset(
    {"HeartbeatSucceeded", "RecordsConsumed", "OffsetsCommitted"}
)


# How a Cost's records_missed is known ("" when it is not).
RecordsBasis = Literal["lag", "rate", ""]
MEASURED_LAG: Final = "lag"  # the lag growth the broker described
ESTIMATED_RATE: Final = "rate"  # its measured rate x the time without partitions
# heartbeat.interval.ms in the Java client and kafka-python, when nothing else says it.
DEFAULT_HEARTBEAT_MS = 3000
# Where a member's session timeout was read ("" when it is not known).
SessionFrom = Literal["traced", "__consumer_offsets", "broker-config", ""]
TRACED: Final = "traced"  # the member's own events gave it
STORED: Final = "__consumer_offsets"  # stored with the member's generation
# A consumer-protocol member's session is the broker's group.consumer.session.timeout.ms
# (DescribeConfigs), unless its group sets consumer.session.timeout.ms of its own.
BROKER_CONFIG: Final = "broker-config"
CONSUMER_SESSION_KEY: Final = "group.consumer.session.timeout.ms"

# Kinds of broker log lines.
BrokerLineKind = Literal["preparing", "failed", "left", "partition", "upgrade_refused"]
PREPARING: Final = "preparing"  # Preparing to rebalance group … (reason: …)
# Member … in group … has failed, removing it from the group (a classic session expired;
# a consumer-protocol member fenced when its session expired reads the same)
FAILED: Final = "failed"
# [Group G] Member … has left group through explicit `LeaveGroup` request; client reason:
# … (Kafka 4's coordinator: its `Preparing to rebalance` line for a leave has no client
# reason, this one has)
LEFT: Final = "left"
# The controller's `Replayed PartitionRecord for new partition T-p`, for a topic that
# already had partitions (a growth, not a topic's creation): of no group (`group` "").
PARTITION_ADDED: Final = "partition"
# Kafka 4's `Cannot upgrade classic group G to consumer group: …`: a member on the consumer
# protocol refused (GROUP_ID_NOT_FOUND). Not a rebalance: explain says it as a note.
UPGRADE_REFUSED: Final = "upgrade_refused"


@dataclass(frozen=True)
class BrokerReason:
    """A line of the broker's log about a group: a rebalance prepared, with its reason,
    or a member removed when its session timed out."""

    ts_ms: int
    group: str
    reason: str
    generation: int = -1  # the old generation the line names, when it does
    kind: BrokerLineKind = PREPARING

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts_ms": self.ts_ms,
            "group": self.group,
            "reason": self.reason,
            "generation": self.generation,
            "kind": self.kind,
        }


@dataclass(frozen=True)
class AssignmentInput:
    """What an assignor needs to re-run one generation: each member's subscription and
    what it owned before, and each topic's partition count."""

    subscriptions: Mapping[str, tuple[str, ...]]
    owned: Mapping[str, tuple[TopicPartition, ...]]
    partitions: Mapping[str, int]


# member -> the partitions it would get
Reassign = Callable[[AssignmentInput], Mapping[str, tuple[TopicPartition, ...]]]


@dataclass(frozen=True)
class Context:
    """What is known besides the events."""

    bounds: GroupBounds | None = None
    broker_reasons: tuple[BrokerReason, ...] = ()
    cooperative: Reassign | None = None  # kgctl.adapters.assignors.cooperative_sticky


@dataclass(frozen=True, kw_only=True)
class Trigger:
    """Who or what started a rebalance, and how we know."""

    cause: Cause
    # A cause Cause does not list, by the name it was given (`cause` is UNKNOWN then):
    # kept as said, so a newer member's reason reads as itself, not as unknown.
    other_cause: str = ""
    who: str = ""
    reason: str = ""  # the member's or the wire's own words, when there are some
    confidence: Confidence = INFERRED
    evidence: str = ""
    at_ms: int = 0
    # A cooperative second round: the generation whose rebalance it finishes (its
    # cause is that one's; `reason` says so in words).
    round_of: int | None = None

    @property
    def cause_name(self) -> str:
        """The cause as the JSON names it."""
        return self.other_cause or self.cause.value

    @property
    def cause_known(self) -> bool:
        """Whether something named why (`unknown`: nothing did)."""
        return self.cause is not Cause.UNKNOWN or bool(self.other_cause)

    def text(self) -> str:
        who = f"{self.who}: " if self.who else ""
        name = self.cause_name
        reason = f" ({self.reason})" if self.reason and self.reason != name else ""
        return f"{who}{cause_text(name)}{reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause_name,
            "who": self.who,
            "reason": self.reason,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "at_ms": self.at_ms,
        }


# The part of a rebalance that waited: the join barrier, the time before it began while
# a dead member's session ran out (its detection), or the sync phase (the assignment).
WaitPhase = Literal["join", "detect", "sync"]

# Why a phase waited for a member.
WaitReason = Literal["dead", "processing", "restarting", "slow_assignment", "late_join", "held"]
WAIT_DEAD: Final = "dead"  # no heartbeat since T; removed at its session timeout
WAIT_PROCESSING: Final = "processing"  # still processing a batch; rejoined at its next poll
WAIT_RESTARTING: Final = "restarting"  # a static member restarting within its session timeout
WAIT_SLOW_ASSIGNMENT: Final = "slow_assignment"  # the leader took long to send the assignment
WAIT_LATE_JOIN: Final = "late_join"  # rejoined late for another reason (reaction time)
WAIT_HELD: Final = "held"  # kgctl proxy held its request (a delay fault rule)


@dataclass(frozen=True, kw_only=True)
class Wait:
    """A phase of the rebalance that waited for one member."""

    phase: WaitPhase
    member: str
    ms: int
    why: WaitReason
    detail: str
    confidence: Confidence = INFERRED
    session_timeout_ms: int | None = None
    session_from: SessionFrom = ""

    def text(self) -> str:
        return f"{self.phase} waited {self.ms / 1000:.1f}s for {self.member}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "member": self.member,
            "ms": self.ms,
            "why": self.why,
            "detail": self.detail,
            "confidence": self.confidence,
            "session_timeout_ms": self.session_timeout_ms,
            "session_from": self.session_from,
        }


@dataclass(frozen=True, kw_only=True)
class Cost:
    """What one member lost during the rebalance."""

    member: str
    unassigned_ms: int
    records_missed: int | None = None
    # How records_missed is known: MEASURED_LAG (the lag on its partitions grew by that
    # much meanwhile, from the broker's descriptions) or ESTIMATED_RATE (its consumption
    # rate before, measured, times the time without partitions).
    records_basis: RecordsBasis = ""
    unassigned_basis: UnassignedBasis = "callbacks"

    @property
    def at_least(self) -> bool:
        """The time is a lower bound: the protocol's, not the application's."""
        return self.unassigned_basis == "wire"

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "unassigned_ms": self.unassigned_ms,
            "unassigned_basis": self.unassigned_basis,
            "records_missed": self.records_missed,
            "records_basis": self.records_basis,
        }


@dataclass(frozen=True, kw_only=True)
class Advice:
    """A setting that would have avoided (or shortened) the rebalance, with its value."""

    pattern: str
    setting: str
    value: str
    text: str

    def shown(self) -> str:
        """The setting as people read it: `max.poll.records=17`; a value that is itself a
        setting or words is not written as one (`group.instance.id and
        session.timeout.ms=2000`, `group.instance.id (one per process)`)."""
        if not self.value:
            return self.setting
        if "=" in self.value:
            return f"{self.setting} and {self.value}"
        if " " in self.value:
            return f"{self.setting} ({self.value})"
        return f"{self.setting}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "setting": self.setting,
            "value": self.value,
            "text": self.text,
        }


@dataclass(frozen=True)
class Diagnosis:
    """One generation, explained."""

    generation: int
    inferred: bool
    start_ms: int
    sync_ms: int | None
    stable_ms: int | None
    trigger: Trigger
    also: tuple[Trigger, ...] = ()
    critical_path: tuple[Wait, ...] = ()
    costs: tuple[Cost, ...] = ()
    # Partitions given to another member than their last owner (revocations.py); None:
    # nobody saw who owned what before the rebalance.
    partitions_moved: int | None = 0
    # Revoked from members that kept being members (reported, or inferred from their
    # protocol: see `notes`); None: a silent member's protocol or holdings are unknown.
    partitions_revoked: int | None = 0
    # `partitions_revoked` is a lower bound (Revoked.at_least): "≥" in the text.
    revoked_at_least: bool = False
    advice: tuple[Advice, ...] = ()
    notes: tuple[str, ...] = ()
    # False when only the broker's stored record dates the generation (no member traced,
    # no broker log): when its rebalance began is unknown.
    timed: bool = True
    # The start is the first description of the broker's that showed the rebalance (the
    # polls saw it begin between two of them): it began then or before, and took at
    # least `duration_ms`.
    start_bound: bool = False
    group_epoch: bool = False  # a consumer-protocol (KIP-848) group: `generation` is its epoch
    # A mixed group that changed protocol at this generation, in words (one of `notes`
    # too): chaos's step report says it.
    protocol_change: str = ""

    @property
    def label(self) -> str:
        return (
            f"group epoch {self.generation}"
            if self.group_epoch
            else f"generation {self.generation}"
        )

    @property
    def duration_ms(self) -> int | None:
        if self.stable_ms is None or not self.timed:
            return None
        return self.stable_ms - self.start_ms

    @property
    def waited_for(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w.member for w in self.critical_path))

    def short(self, reasons: bool = False) -> str:
        """Trigger and critical path in a few words, for a table cell (with the trigger's
        own words when `reasons`)."""
        t = self.trigger
        text = (f"{t.who}: " if t.who else "") + cause_text(t.cause_name)
        # A second round's words are kept in a narrow cell too: without them the cell
        # reads as a second rebalance of that cause (a second subscription change).
        if (reasons or t.round_of is not None) and t.reason and t.reason != t.cause_name:
            text += f" ({t.reason})"
        if t.confidence == INFERRED:
            text += " (inferred)"
        for w in self.critical_path:
            text += f"; {w.phase} waited {w.ms / 1000:.1f}s for {w.member} ({w.why})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "group_epoch": self.group_epoch,
            "inferred": self.inferred,
            "start_ms": self.start_ms,
            "sync_ms": self.sync_ms,
            "stable_ms": self.stable_ms,
            "duration_ms": self.duration_ms,
            "timed": self.timed,
            "start_at_latest": self.start_bound,
            "trigger": self.trigger.to_dict(),
            "also": [t.to_dict() for t in self.also],
            "critical_path": [w.to_dict() for w in self.critical_path],
            "cost": [c.to_dict() for c in self.costs],
            "partitions_moved": self.partitions_moved,
            "partitions_revoked": self.partitions_revoked,
            "partitions_revoked_at_least": self.revoked_at_least,
            "advice": [a.to_dict() for a in self.advice],
            "notes": list(self.notes),
            "protocol_change": self.protocol_change,
        }
