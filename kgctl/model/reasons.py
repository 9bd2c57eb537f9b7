"""The vocabulary of why things happen in a group: why a member (re)joins.

Pure and shared: the member's adapter decides a `RejoinReason`, events carry its value,
and the report, watch and chaos read it back from those events.
"""

from __future__ import annotations

import enum


class RejoinReason(str, enum.Enum):
    """Why the member decided to (re)join; carried by RejoinRequested and JoinGroupSent."""

    FIRST_JOIN = "first_join"
    SUBSCRIPTION_CHANGED = "subscription_changed"
    METADATA_CHANGED = "metadata_changed"
    ASSIGNMENT_FAILED = "assignment_failed"
    GENERATION_RESET = "generation_reset"
    REBALANCE_IN_PROGRESS = "rebalance_in_progress"
    POLL_INTERVAL_EXCEEDED = "poll_interval_exceeded"
    EXPLICIT_REQUEST = "explicit_request"
    COOPERATIVE_FOLLOWUP = "cooperative_followup"
    REQUESTED = "requested"  # the base flag was set by a path kgctl does not name


def rejoin_reason(
    *,
    joined_before: bool,
    metadata_changed: bool,
    subscription_changed: bool,
    pending: str | None,
) -> RejoinReason:
    """The reason for a rejoin, checked in the order of Java's rejoinNeededOrPending.

    A member that never completed a join is on its first join whatever else is true;
    then the assignment's metadata snapshot, then the joined subscription, then the
    reason recorded when the base class's rejoin flag was set.
    """
    if not joined_before:
        return RejoinReason.FIRST_JOIN
    if metadata_changed:
        return RejoinReason.METADATA_CHANGED
    if subscription_changed:
        return RejoinReason.SUBSCRIPTION_CHANGED
    if pending:
        return RejoinReason(pending)
    return RejoinReason.REQUESTED
