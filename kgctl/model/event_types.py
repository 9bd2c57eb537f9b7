"""The event catalogue's type names as a type: `EventType` lets mypy check the names
the model compares an event's type with (`is_type(e, "JoinGroupSent")`,
`index.of("RecordsConsumed")`), where a misspelt string would silently match nothing.

Kept in step with `EVENT_TYPES` (kgctl/model/events.py) by tests/test_event_types.py: a
type added to the catalogue is added here, in the same order.
"""

from __future__ import annotations

from typing import Literal

from kgctl.model.events import Event

EventType = Literal[
    "MemberStarted",
    "TopicMissing",
    "RejoinRequested",
    "CoordinatorLookupSent",
    "CoordinatorFound",
    "CoordinatorLost",
    "JoinPrepared",
    "PartitionsRevoked",
    "JoinGroupSent",
    "JoinGroupReceived",
    "AssignmentComputed",
    "SyncGroupSent",
    "SyncGroupReceived",
    "JoinCompleted",
    "PartitionsAssigned",
    "PartitionsLost",
    "JoinFailed",
    "HeartbeatSucceeded",
    "HeartbeatFailed",
    "GenerationReset",
    "PollIntervalExceeded",
    "RecordsConsumed",
    "OffsetsCommitted",
    "OffsetCommitFailed",
    "ControlReceived",
    "LeaveGroupSent",
    "MemberFailed",
    "MemberStopped",
    "MemberStateChanged",
    "GroupHeartbeatAnswered",
    "TargetAssignmentReceived",
    "ReconciliationStarted",
    "ReconciliationCompleted",
    "ReconciliationAborted",
    "MemberFenced",
    "GroupObserved",
    "GroupStateChanged",
    "GenerationChanged",
    "GenerationSourceChanged",
    "MemberJoinedGroup",
    "MemberLeftGroup",
    "PartitionsMoved",
    "RebalanceAttributed",
    "BrokerDisconnected",
    "BrokerReconnected",
    "ScenarioStarted",
    "StepStarted",
    "ActionPerformed",
    "GroupSettled",
    "StepFinished",
    "InvariantViolated",
    "ScenarioFinished",
    "ProxyStarted",
    "ListenerOpened",
    "ApiVersionsLowered",
    "ProxyConnectionAborted",
    "FaultRuleAdded",
    "FaultRuleRemoved",
    "FaultInjected",
    "ControlRejected",
    "FindCoordinatorTraced",
    "JoinGroupTraced",
    "SyncGroupTraced",
    "HeartbeatTraced",
    "LeaveGroupTraced",
    "OffsetCommitTraced",
    "ConsumerGroupHeartbeatTraced",
    "MetadataTraced",
    "FetchTraced",
    "ProxyStopped",
]


def is_type(e: Event, *types: EventType) -> bool:
    """Whether `e` is of one of `types` (names mypy checks against the catalogue)."""
    return e.type in types
