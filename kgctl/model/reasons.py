"""The vocabulary of why things happen in a group: why a member (re)joins, why a
group rebalanced.

Pure and shared: the member's adapter decides a `RejoinReason`, events carry its value,
and the report, watch and chaos read it back from those events.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping


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


def partitions_changed(
    assigned_with: Mapping[str, int],
    now: Mapping[str, int],
    resubscribed: Collection[str] = (),
) -> bool:
    """Whether a topic's partition count changed since the last assignment, the topics
    that came or went with a subscription change (`resubscribed`) left out.

    The two snapshots differ as soon as the metadata of a newly subscribed topic arrives;
    when that answer beat the next rejoin check (the heartbeat thread polls the network
    too) Java's order names the rejoin "cached metadata has changed", though no topic
    grew: the subscription changed (departure (z) in docs/member.md)."""
    topics = (set(assigned_with) | set(now)) - set(resubscribed)
    return any(assigned_with.get(t) != now.get(t) for t in topics)


# -- the reasons on the wire (KIP-800) ------------------------------------------------------
#
# A JoinGroup (v8+) carries the client's reason, and the broker logs it ("client reason:
# ..."). kgctl's member sends the words Java's classic consumer (4.x) sends in the same
# situation, so a broker log reads the same whichever client rejoined; its events keep
# kgctl's own `RejoinReason`. These strings are protocol-visible values, matched
# verbatim for that reason. A first join carries no reason (the broker logs "not
# provided"), as Java's does.

# kgctl's rejoin reason -> the wire reason of the request that asks for the rejoin.
WIRE_REASONS: dict[str, str] = {
    RejoinReason.METADATA_CHANGED.value: "cached metadata has changed",
    RejoinReason.SUBSCRIPTION_CHANGED.value: "subscription has changed",
    RejoinReason.EXPLICIT_REQUEST.value: "rebalance enforced by user",
    RejoinReason.REBALANCE_IN_PROGRESS.value: "group is already rebalancing",
    RejoinReason.COOPERATIVE_FOLLOWUP.value: "need to revoke partitions and re-join",
    RejoinReason.ASSIGNMENT_FAILED.value: (
        "received assignment does not match the current subscription"
    ),
}
WIRE_COMMIT_REBALANCING = "offset commit failed since group is already rebalancing"
WIRE_LEFT_GROUP = "consumer pro-actively leaving the group"


def wire_failed_join(exception: str) -> str:
    """After a failed JoinGroup/SyncGroup (`exception`: Java's exception class name)."""
    return f"rebalance failed due to {exception}"


def wire_reset(error: str, api: str) -> str:
    """After an answer that reset the generation (`api`: JOIN_GROUP, SYNC_GROUP,
    HEARTBEAT, OFFSET_COMMIT)."""
    return f"encountered {error} from {api} response"


def wire_member_id(member_id: str) -> str:
    """After MEMBER_ID_REQUIRED, with the member id the broker gave."""
    return f"need to re-join with the given member-id: {member_id}"


def wire_stale_join(generation: int, member_id: str, protocol: str | None, state: str) -> str:
    """A join that completed after its generation was reset (by a heartbeat answer or the
    poll timeout); `state` as Java names it (UNJOINED, PREPARING_REBALANCE, ...)."""
    gen = f"Generation{{generationId={generation}, memberId='{member_id}', protocol='{protocol}'}}"
    return (
        f"rebalance failed since the generation/state was modified by heartbeat thread to "
        f"{gen}/{state} before the rebalance callback triggered"
    )


class Cause(str, enum.Enum):
    """Why a rebalance happened, as report, watch and chaos name it (docs/watch.md).

    Listed in precedence order: when several things happened in one rebalance, the
    first of them names it (`CAUSE_ORDER`).
    """

    MEMBER_FAILED = "member_failed"
    TIMED_OUT = "timed_out"
    # A static member's group.instance.id joined with a new member id (a restart, or a
    # second process with the same id): the broker hands the identity over and fences the
    # old member id (FENCED_INSTANCE_ID). It rebalances only when the group was not
    # stable or the group's chosen assignor changes.
    STATIC_MEMBER_REPLACED = "static_member_replaced"
    MEMBER_LEFT = "member_left"
    MEMBER_JOINED = "member_joined"
    SUBSCRIPTION_CHANGED = "subscription_changed"
    PARTITIONS_CHANGED = "partitions_changed"
    REJOIN_REQUESTED = "rejoin_requested"
    ASSIGNMENT_FAILED = "assignment_failed"
    GENERATION_RESET = "generation_reset"
    UNKNOWN = "unknown"


CAUSE_ORDER: tuple[Cause, ...] = tuple(c for c in Cause if c is not Cause.UNKNOWN)

# The cause a member's rejoin reason names; None: a reaction to someone else's
# rebalance (or a rejoin kgctl cannot name), not a cause.
REASON_CAUSE: dict[RejoinReason, Cause | None] = {
    RejoinReason.FIRST_JOIN: Cause.MEMBER_JOINED,
    RejoinReason.SUBSCRIPTION_CHANGED: Cause.SUBSCRIPTION_CHANGED,
    RejoinReason.METADATA_CHANGED: Cause.PARTITIONS_CHANGED,
    RejoinReason.POLL_INTERVAL_EXCEEDED: Cause.TIMED_OUT,
    RejoinReason.EXPLICIT_REQUEST: Cause.REJOIN_REQUESTED,
    RejoinReason.ASSIGNMENT_FAILED: Cause.ASSIGNMENT_FAILED,
    RejoinReason.GENERATION_RESET: Cause.GENERATION_RESET,
    RejoinReason.COOPERATIVE_FOLLOWUP: None,
    RejoinReason.REBALANCE_IN_PROGRESS: None,
    RejoinReason.REQUESTED: None,
}


def cause_of_reason(reason: str) -> str | None:
    """The cause a RejoinRequested `reason` names (a `Cause` value); an unknown reason
    (a newer member's) is its own cause; None for a reaction, not a cause."""
    try:
        cause = REASON_CAUSE[RejoinReason(reason)]
    except ValueError:
        return reason or None
    return None if cause is None else cause.value


def named_cause(name: str) -> tuple[Cause, str]:
    """A cause by its name, as `Trigger(cause=..., other_cause=...)` and the report's
    `Rebalance` take it: one that `Cause` does not list (a newer member's rejoin reason, a
    newer recording's cause) is `Cause.UNKNOWN` with its own name kept."""
    try:
        return Cause(name), ""
    except ValueError:
        return Cause.UNKNOWN, name


def cause_text(cause: str) -> str:
    """A cause value in words; an unknown one (a newer recording's) with its underscores
    made spaces."""
    return cause.replace("_", " ")
