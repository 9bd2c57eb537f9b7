"""The diagnosis of a generation: what started its rebalance, what the rebalance waited
for, what that cost, and which setting would have avoided it.

Pure: a folded `GroupState`, the events it was folded from and what else is known
(`Context`: the cluster's group bounds, reasons read from the broker's log, and a way to
re-run the cooperative-sticky assignor, which lives in kgctl/adapters/assignors.py
because it is kafka-python's) in; frozen dataclasses out. No I/O, no clock.

Confidence is `exact` when the trigger is a member's or the wire's own words (a traced
member's rejoin reason, LeaveGroup reason or poll-interval breach; a JoinGroup or
LeaveGroup reason the proxy saw; a `Preparing to rebalance` line of the broker's log)
and `inferred` when it is read from snapshots or from a silence (a member that stopped
sending anything and is missing from the next generation). docs/explain.md.

The modules, in the order a diagnosis runs: `types` (the answer and its JSON),
`members` (each member's configuration), `trigger` (with `causes`: what words name),
`waits` (the critical path), `cost`, `advice` and `protocol_advice`, `restarts`,
`mixed` (groups changing protocol), and `generation` (`diagnose`, putting it together).
What one module lends another is named without an underscore but not exported here: the
package's own, not kgctl's (`critical_path`, `trigger_candidates`, `member_configs`).
"""

from __future__ import annotations

from kgctl.model.diagnosis.generation import NEEDED_BEFORE_MS, diagnose, keep_diagnoses
from kgctl.model.diagnosis.restarts import Replacement, Restart, replacements, restarts
from kgctl.model.diagnosis.types import (
    DEFAULT_HEARTBEAT_MS,
    ESTIMATED_RATE,
    EXACT,
    FAILED,
    FENCED,
    INFERRED,
    LEFT,
    MEASURED_LAG,
    PARTITION_ADDED,
    POLL_BREACH,
    PREPARING,
    STORED,
    TRACED,
    UPGRADE_REFUSED,
    WAIT_DEAD,
    WAIT_HELD,
    WAIT_LATE_JOIN,
    WAIT_PROCESSING,
    WAIT_RESTARTING,
    WAIT_SLOW_ASSIGNMENT,
    Advice,
    AssignmentInput,
    BrokerReason,
    Context,
    Cost,
    Diagnosis,
    Reassign,
    Trigger,
    Wait,
)

__all__ = [
    "DEFAULT_HEARTBEAT_MS",
    "ESTIMATED_RATE",
    "EXACT",
    "FAILED",
    "LEFT",
    "FENCED",
    "INFERRED",
    "MEASURED_LAG",
    "PARTITION_ADDED",
    "UPGRADE_REFUSED",
    "NEEDED_BEFORE_MS",
    "POLL_BREACH",
    "PREPARING",
    "STORED",
    "TRACED",
    "WAIT_DEAD",
    "WAIT_HELD",
    "WAIT_LATE_JOIN",
    "WAIT_PROCESSING",
    "WAIT_RESTARTING",
    "WAIT_SLOW_ASSIGNMENT",
    "Advice",
    "AssignmentInput",
    "BrokerReason",
    "Context",
    "Cost",
    "Diagnosis",
    "Reassign",
    "Replacement",
    "Restart",
    "Trigger",
    "Wait",
    "diagnose",
    "keep_diagnoses",
    "replacements",
    "restarts",
]
