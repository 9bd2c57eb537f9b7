"""The one event schema: every fact kgctl learns or causes is an `Event`.

Members, the broker observer and chaos all emit the same envelope; the type name says
what happened (past tense) and `data` holds that type's own fields. docs/events.md is
the reference for each type's fields; `EVENT_TYPES` is the catalogue it is checked
against.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, field
from functools import cached_property
from typing import Any

SCHEMA_VERSION = 1

# Partitions are always written as {topic: [partition ids, sorted]}.
Partitions = dict[str, list[int]]

# type name -> one-line meaning. Grouped by who emits them.
EVENT_TYPES: dict[str, str] = {
    # -- a member (kgctl join) --------------------------------------------------------
    "MemberStarted": "the member process started, with its configuration",
    "TopicMissing": "a subscribed topic does not exist yet; the member waits for it",
    "RejoinRequested": "the member decided it must (re)join, with the reason",
    "CoordinatorLookupSent": "FindCoordinator sent to the least loaded broker",
    "CoordinatorFound": "the group coordinator is known and connected",
    "CoordinatorLost": "the coordinator was marked dead (error or disconnect)",
    "JoinPrepared": "onJoinPrepare ran: auto-commit, revocation, leader duties dropped",
    "PartitionsRevoked": "onPartitionsRevoked was called",
    "JoinGroupSent": "a JoinGroup request was sent",
    "JoinGroupReceived": "the JoinGroup response arrived (generation, leader, members)",
    "AssignmentComputed": "the leader ran the assignor; the full plan",
    "SyncGroupSent": "a SyncGroup request was sent",
    "SyncGroupReceived": "the SyncGroup response arrived with this member's assignment",
    "JoinCompleted": "onJoinComplete ran: the member owns its new assignment",
    "PartitionsAssigned": "onPartitionsAssigned was called",
    "PartitionsLost": "onPartitionsLost was called (generation lost without revocation)",
    "JoinFailed": "JoinGroup or SyncGroup failed; retried or fatal",
    "HeartbeatSucceeded": "a heartbeat was answered without error",
    "HeartbeatFailed": "a heartbeat was answered with an error",
    "GenerationReset": "the member dropped its generation (and maybe its member id)",
    "PollIntervalExceeded": "max.poll.interval.ms passed without a poll",
    "RecordsConsumed": "a poll returned records",
    "OffsetsCommitted": "offsets were committed",
    "OffsetCommitFailed": "an offset commit failed",
    "ControlReceived": "a live control command arrived (stdin or control topic)",
    "LeaveGroupSent": "LeaveGroup was sent, with its reason",
    "MemberFailed": "a fatal error ended the member",
    "MemberStopped": "the member stopped; its totals",
    # -- a consumer-protocol member (kgctl join --group-protocol consumer, KIP-848) ------
    "MemberStateChanged": "the member's state changed (Java's MemberState: JOINING, STABLE, ...)",
    "GroupHeartbeatAnswered": "a ConsumerGroupHeartbeat that joined, changed, acknowledged or "
    "left, or whose answer changed the epoch or the assignment, with its answer",
    "TargetAssignmentReceived": "the broker sent a new target assignment; owned and pending",
    "ReconciliationStarted": "the member began moving from what it owns to its target",
    "ReconciliationCompleted": "revocation and assignment done; the acknowledgement goes next",
    "ReconciliationAborted": "a reconciliation was dropped: fenced or left while it ran",
    "MemberFenced": "the broker fenced the member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)",
    # -- the broker observer (kgctl watch) --------------------------------------------
    "GroupObserved": "a snapshot of the group as the broker describes it",
    "GroupStateChanged": "the broker's group state changed",
    "GenerationChanged": "the group's generation (or epoch) changed",
    "GenerationSourceChanged": "where watch takes generation ids from: the broker or itself",
    "MemberJoinedGroup": "a member appeared in the broker's description",
    "MemberLeftGroup": "a member disappeared from the broker's description",
    "PartitionsMoved": "partition ownership changed between two snapshots",
    "RebalanceAttributed": "the most likely cause of a rebalance (maybe a guess)",
    "BrokerDisconnected": "the observer lost the broker; retrying",
    "BrokerReconnected": "the observer reached the broker again",
    # -- chaos -------------------------------------------------------------------------
    "ScenarioStarted": "a chaos scenario began",
    "StepStarted": "a scenario step began",
    "ActionPerformed": "a chaos action was carried out",
    "GroupSettled": "the group was stable after a step",
    "StepFinished": "a scenario step ended, with its report",
    "InvariantViolated": "an invariant or expectation failed",
    "ScenarioFinished": "the scenario ended, with its verdict",
    # -- the proxy (kgctl proxy), source `wire` -----------------------------------------
    "ProxyStarted": "the proxy listens; the bootstrap address to give clients",
    "ListenerOpened": "the proxy opened a local port for one upstream broker",
    "ApiVersionsLowered": "the proxy advertised lower versions of some APIs than the broker",
    "ProxyConnectionAborted": "one client connection was closed on a framing or upstream error",
    "FaultRuleAdded": "a fault rule was put in force",
    "FaultRuleRemoved": "a fault rule was removed, cleared or ran out",
    "FaultInjected": "a fault rule was applied to one request",
    "ControlRejected": "a control line for the proxy was not understood",
    "FindCoordinatorTraced": "a FindCoordinator request and its answer, seen on the wire",
    "JoinGroupTraced": "a JoinGroup request and its answer, seen on the wire",
    "SyncGroupTraced": "a SyncGroup request and its answer, seen on the wire",
    "HeartbeatTraced": "a Heartbeat request and its answer, seen on the wire",
    "LeaveGroupTraced": "a LeaveGroup request and its answer, seen on the wire",
    "OffsetCommitTraced": "an OffsetCommit request and its answer, seen on the wire",
    "ConsumerGroupHeartbeatTraced": "a ConsumerGroupHeartbeat and its answer, seen on the wire",
    "MetadataTraced": "a Metadata request and its answer, seen on the wire (--trace-metadata)",
    # Traced only on request (ProxyConfig.trace_fetch: chaos runs with app members).
    "FetchTraced": "what a Fetch answer gave each partition: its record batches' offset ranges",
    "ProxyStopped": "the proxy stopped; its totals",
}


@dataclass(frozen=True)
class Event:
    """One thing that happened, with who, where and when it happened."""

    type: str
    ts_ms: int  # wall clock, ms since the epoch
    mono_ms: float  # the emitter's monotonic clock, ms since it started
    seq: int  # per emitter, from 1
    group: str
    member: str = ""  # human label (--name)
    member_id: str = ""
    instance_id: str | None = None
    client_id: str = ""
    host: str = ""
    pid: int = 0
    generation: int = -1
    source: str = "member"  # member | observer | chaos | wire
    data: dict[str, Any] = field(default_factory=dict)
    v: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return self._json

    @cached_property
    def _json(self) -> str:
        # Encoded once (a member writes each event to stdout and to the trace topic), from
        # a shallow dict: asdict() deep-copies `data`, 7x the cost of the encoding itself.
        shallow = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return json.dumps(shallow, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Event:
        if not isinstance(raw, dict):  # a JSON line that is a number, a string, a list
            raise ValueError(f"not an event object: {type(raw).__name__}")
        unknown_type = raw.get("type") not in EVENT_TYPES
        if unknown_type:
            raise ValueError(f"unknown event type {raw.get('type')!r}")
        known = raw if raw.keys() <= _FIELDS else {k: v for k, v in raw.items() if k in _FIELDS}
        if not _REQUIRED <= known.keys():
            return cls(**known)  # (its TypeError names what is missing)
        # A watch parses every line of a trace topic (14,000 events in a 1,000-member
        # rebalance): the frozen dataclass's __init__, a setattr per field, was most of
        # the cost. The fields are set as __init__ would set them, with its defaults.
        event = object.__new__(cls)
        fields = event.__dict__
        fields.update(_DEFAULTS)
        fields["data"] = {}
        fields.update(known)
        return event

    @classmethod
    def from_json(cls, line: str) -> Event:
        return cls.from_dict(json.loads(line))


def concerns(event: Event, group: str) -> bool:
    """`event` is about `group`: it names it, or it is kgctl chaos's own about the run and
    names no group (chaos's events name the group they acted on: a recording's events
    of another group's run are not this group's)."""
    return event.group == group or (event.source == "chaos" and not event.group)


def groups_in(events: Iterable[Event]) -> list[str]:
    """The consumer groups that members or the observer reported on (a recording's
    groups: chaos's own events name the one they acted on, or none)."""
    return sorted({e.group for e in events if e.group and e.source != "chaos"})


_FIELDS = frozenset(Event.__dataclass_fields__)
_DEFAULTS = {
    name: f.default for name, f in Event.__dataclass_fields__.items() if f.default is not MISSING
}
_REQUIRED = frozenset(
    name
    for name, f in Event.__dataclass_fields__.items()
    if f.default is MISSING and f.default_factory is MISSING
)


def partitions_of(pairs: Any) -> Partitions:
    """Normalise (topic, partition) pairs into {topic: sorted ids}."""
    out: dict[str, set[int]] = {}
    for topic, partition in pairs:
        out.setdefault(str(topic), set()).add(int(partition))
    return {t: sorted(ps) for t, ps in sorted(out.items())}
