"""The cause that a client's or the broker's words name: KIP-800 JoinGroup reasons, the
Java client's rejoin reasons, the group coordinator's `Preparing to rebalance` reasons."""

from __future__ import annotations

from kgctl.model.reasons import REASON_CAUSE, Cause, RejoinReason
from kgctl.model.state import (
    GroupState,
)

# A client's own KIP-800 reason (kgctl's `kgctl: <reason>`, the Java client's words) and
# the cause it names; None: a reaction to a rebalance someone else started. Checked in
# order, on the lower-cased text.
_CLIENT_REASONS: tuple[tuple[str, Cause | None], ...] = (
    # Java's ConsumerCoordinator and AbstractCoordinator
    ("cached metadata has changed", Cause.PARTITIONS_CHANGED),
    ("subscription has changed", Cause.SUBSCRIPTION_CHANGED),
    ("does not match the current subscription", Cause.SUBSCRIPTION_CHANGED),
    ("need to revoke partitions", None),  # the cooperative follow-up round
    ("group is already rebalancing", None),
    ("need to re-join with the given member-id", None),  # the second half of a first join
    ("rebalanceinprogress", None),
    ("illegalgeneration", None),
    ("illegal_generation", None),
    ("memberidrequired", None),
    ("unknownmemberid", Cause.GENERATION_RESET),  # removed meanwhile: joins anew
    ("unknown_member_id", Cause.GENERATION_RESET),
    ("rebalance failed due to", None),  # another error: the rebalance was already running
    # a join that completed after a heartbeat answer or the poll timeout reset it
    ("generation/state was modified", Cause.GENERATION_RESET),
    ("consumer poll timeout has expired", Cause.TIMED_OUT),
    # the rejoin after leaving on its own, mostly for max.poll.interval.ms (an
    # unsubscribe says so too, but is rare among members that rejoin)
    ("pro-actively leaving the group", Cause.TIMED_OUT),
    ("the consumer is being closed", Cause.MEMBER_LEFT),
    ("unsubscribed from all topics", Cause.MEMBER_LEFT),
    ("rebalance enforced by user", Cause.REJOIN_REQUESTED),
    # kgctl's names (and older kgctl members' `kgctl: <reason>`)
    ("rebalance_in_progress", None),
    ("rebalance in progress", None),
    ("already rebalancing", None),
    ("retry after member_id_required", None),
    ("cooperative_followup", None),
)


def _client_cause(reason: str) -> Cause | None:
    """The cause a client's own reason names; None for a reaction; Cause.UNKNOWN when
    kgctl does not know the words."""
    low = reason.lower().strip()
    name = low.removeprefix("kgctl:").strip()  # kgctl's own names: `kgctl: metadata_changed`
    if name in {r.value for r in RejoinReason}:
        return REASON_CAUSE[RejoinReason(name)]
    for words, cause in _CLIENT_REASONS:
        if words in low:
            return cause
    if "poll" in low and ("timeout" in low or "interval" in low):
        return Cause.TIMED_OUT
    return Cause.UNKNOWN


def wire_cause(reason: str) -> Cause | None:
    """The cause a JoinGroup's KIP-800 reason names; None for a reaction."""
    cause = _client_cause(reason)
    return cause if cause is not Cause.UNKNOWN else broker_cause(reason)


# The broker's own words before `; client reason:` (Kafka's group coordinator) and the
# cause they name; None when the client's reason says why (a member rejoined).
_BROKER_REASONS: tuple[tuple[str, Cause | None], ...] = (
    ("static member", Cause.STATIC_MEMBER_REPLACED),
    ("heartbeat expiration", Cause.TIMED_OUT),
    ("session", Cause.TIMED_OUT),
    ("pending sync request expiration", Cause.TIMED_OUT),
    ("poll timeout", Cause.TIMED_OUT),
    ("max.poll", Cause.TIMED_OUT),
    ("on leavegroup", Cause.MEMBER_LEFT),
    ("leave", Cause.MEMBER_LEFT),
    ("removing member", Cause.MEMBER_LEFT),
    ("adding new member", Cause.MEMBER_JOINED),
    ("new member", Cause.MEMBER_JOINED),
    ("re-joining group", None),
    ("updating metadata for member", None),
    ("storing group assignment", Cause.ASSIGNMENT_FAILED),
)


def broker_cause(reason: str) -> Cause:
    """The cause a broker log reason names: the broker's words when they name one, else
    the client's (KIP-800 reasons are free text)."""
    broker, _, client = reason.partition("; client reason: ")
    low = broker.lower()
    rejoined = False  # the broker says only that a member rejoined: its client says why
    for words, cause in _BROKER_REASONS:
        if words in low:
            if cause:
                return cause
            rejoined = True
            break
    said = client.strip()
    if said and said != "not provided":
        found = _client_cause(said)
        if found is not None and found is not Cause.UNKNOWN:
            return found
    elif not client:
        found = _client_cause(broker)
        if found is not None and found is not Cause.UNKNOWN:
            return found
    if rejoined:
        return Cause.REJOIN_REQUESTED
    if "metadata" in low or "partition" in low:
        return Cause.PARTITIONS_CHANGED
    if "subscription" in low:
        return Cause.SUBSCRIPTION_CHANGED
    return Cause.REJOIN_REQUESTED


def member_id_in_broker_reason(reason: str) -> str:
    """The member id a broker reason names (`removing member X on …`), if any."""
    words = reason.replace("(", " ").replace(")", " ").split()
    for i, w in enumerate(words[:-1]):
        if w.lower() in ("member", "leader", "for") and "-" in words[i + 1]:
            return words[i + 1].rstrip(".,;")
    return ""


def member_name(state: GroupState, member_id: str) -> str:
    """A member id as its member's name; an unknown dynamic id (client.id, a dash and a
    UUID) as its client id."""
    found = state.find_member(member_id)
    if found is not None:
        return found.name
    if len(member_id) > 37 and member_id[-37] == "-" and member_id[-28] == "-":
        return member_id[:-37]
    return member_id
