"""The classic member's step state, as small records the coordinator subclass keeps (pure:
no kafka-python, no I/O).

kafka-python's coordinator knows three states (UNJOINED, REBALANCING, STABLE) and writes
them itself. Java's AbstractCoordinator has four: REBALANCING is PREPARING_REBALANCE
until the JoinGroup answer and COMPLETING_REBALANCE until the SyncGroup answer, when
heartbeats already run (departure (d) in docs/member.md). `RebalanceStep` holds that
split, every change checked against `REBALANCE_PREDECESSORS`. `RejoinWhy`,
`PrepareStep` and `HeartbeatStep` group what kgctl remembers about the next join, the
onJoinPrepare in progress and the last heartbeat.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class ClassicPhase(str, enum.Enum):
    """Java's classic member states (AbstractCoordinator.MemberState), by the same names."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"  # JoinGroup sent, not answered
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  # JoinGroup answered, SyncGroup not yet
    STABLE = "STABLE"


# The steps of a rebalance each step may follow: a join attempt starts PREPARING (after
# a JoinGroup answer too, when the SyncGroup failed and the member joins again); only a
# JoinGroup answer, to a JoinGroup sent in PREPARING, makes it COMPLETING.
REBALANCE_PREDECESSORS: dict[ClassicPhase, frozenset[ClassicPhase]] = {
    ClassicPhase.PREPARING_REBALANCE: frozenset(
        {ClassicPhase.PREPARING_REBALANCE, ClassicPhase.COMPLETING_REBALANCE}
    ),
    ClassicPhase.COMPLETING_REBALANCE: frozenset({ClassicPhase.PREPARING_REBALANCE}),
}


class IllegalClassicTransition(RuntimeError):
    """A step change the classic member's table refuses (a bug in the member)."""

    def __init__(self, before: ClassicPhase, after: ClassicPhase) -> None:
        super().__init__(f"classic member: illegal transition from {before.value} to {after.value}")
        self.before, self.after = before, after


@dataclass
class RebalanceStep:
    """Where a rebalance of kafka-python's REBALANCING state is, as Java's phases."""

    phase: ClassicPhase = ClassicPhase.PREPARING_REBALANCE

    def enter(self, after: ClassicPhase) -> None:
        """The one way the step changes: refused unless the table allows it."""
        if self.phase not in REBALANCE_PREDECESSORS.get(after, frozenset()):
            raise IllegalClassicTransition(self.phase, after)
        self.phase = after

    @property
    def completing(self) -> bool:
        return self.phase is ClassicPhase.COMPLETING_REBALANCE


@dataclass
class RejoinWhy:
    """Why the member joins (again): what its events say and what its JoinGroup tells the
    broker. Reasons are RejoinReason values (kgctl/model/reasons.py); causes say which
    step reset the generation (`heartbeat:UNKNOWN_MEMBER_ID`)."""

    reason: str = "first_join"  # the reason of the next JoinGroup's events
    pending: str | None = None  # the first reason asked since the last join completed
    context: str | None = None  # the reason of a request_rejoin kafka-python makes itself
    cause: str = ""  # why the next reset_generation happens
    # Java's rejoinReason: what the next JoinGroup tells the broker (KIP-800), in Java's
    # words; "" on a first join, as in Java.
    wire: str = ""
    wire_context: str | None = None  # the wire words of a request_rejoin made by super
    leave: str | None = None  # the LeaveGroup's reason, when the runner stops the member
    reported: bool = False  # RejoinRequested emitted for this rebalance
    joined_before: bool = False
    started: float | None = None  # monotonic time the rebalance began


@dataclass
class PrepareStep:
    """Java's onJoinPrepare in progress: its timer and pre-rebalance commit (departure
    (t)), when it began, and what the member owned at the rebalance's first one."""

    timer: Any = None  # Java's joinPrepareTimer
    commit: Any = None  # Java's autoCommitOffsetRequestFuture
    started: float | None = None
    running: bool = False  # the commit is done (or given up): callbacks are running
    owned_before: dict[str, list[int]] | None = None


@dataclass
class HeartbeatStep:
    """The heartbeat last sent: its generation, whether its answer was handled, when."""

    generation: Any = None
    handled: bool = False
    last_ms: float | None = None
