"""The cause that a client's or the broker's words name: the KIP-800 rejoin and leave
reasons of each popular client (one table, `CLIENT_REASONS`), the group coordinator's
`Preparing to rebalance` reasons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kgctl.model.event_index import EventIndex
from kgctl.model.reasons import REASON_CAUSE, Cause, RejoinReason
from kgctl.model.state import (
    GroupState,
)

ClientName = Literal["java", "librdkafka", "kgctl"]


@dataclass(frozen=True)
class ClientReason:
    """Words a client gives for a (re)join or a leave, and the cause they name (None: a
    reaction to a rebalance someone else started, not a cause)."""

    client: ClientName
    words: str  # lower-cased; matched inside the reason's lower-cased text
    cause: Cause | None
    # Whether the client sends them in its requests (a KIP-800 JoinGroup/LeaveGroup
    # reason, which the wire and the broker's log show), or only says them in its own
    # log: librdkafka 2.x sends JoinGroup up to v5 and LeaveGroup up to v1, which carry
    # no reason, so its words reach kgctl only from its log, and its groups' causes
    # come from the evidence (a topic's partition count, a member that came back).
    on_wire: bool = True


# Each popular client's rejoin and leave reasons, read from its source, and their causes.
# Checked in order, on the lower-cased text: the first match names the cause.
CLIENT_REASONS: tuple[ClientReason, ...] = (
    # Java's ConsumerCoordinator and AbstractCoordinator (classic protocol)
    ClientReason("java", "cached metadata has changed", Cause.PARTITIONS_CHANGED),
    ClientReason("java", "subscription has changed", Cause.SUBSCRIPTION_CHANGED),
    ClientReason("java", "does not match the current subscription", Cause.SUBSCRIPTION_CHANGED),
    ClientReason("java", "need to revoke partitions", None),  # the cooperative second round
    ClientReason("java", "group is already rebalancing", None),
    ClientReason("java", "need to re-join with the given member-id", None),  # a first join
    ClientReason("java", "rebalanceinprogress", None),
    ClientReason("java", "illegalgeneration", None),
    ClientReason("java", "illegal_generation", None),
    ClientReason("java", "memberidrequired", None),
    ClientReason("java", "unknownmemberid", Cause.GENERATION_RESET),  # removed: joins anew
    ClientReason("java", "unknown_member_id", Cause.GENERATION_RESET),
    ClientReason("java", "rebalance failed due to", None),  # the rebalance was running
    # a join that completed after a heartbeat answer or the poll timeout reset it
    ClientReason("java", "generation/state was modified", Cause.GENERATION_RESET),
    # its LeaveGroup reasons
    ClientReason("java", "consumer poll timeout has expired", Cause.TIMED_OUT),
    ClientReason("java", "the consumer is being closed", Cause.MEMBER_LEFT),
    ClientReason("java", "unsubscribed from all topics", Cause.MEMBER_LEFT),
    # the rejoin after leaving on its own, mostly for max.poll.interval.ms (an
    # unsubscribe says so too, but is rare among members that rejoin)
    ClientReason("java", "pro-actively leaving the group", Cause.TIMED_OUT),
    ClientReason("java", "rebalance enforced by user", Cause.REJOIN_REQUESTED),
    # librdkafka's rd_kafka_cgrp (its debug log's "rejoining" and rebalance reasons)
    ClientReason(
        "librdkafka",
        "metadata for subscribed topic(s) has changed",
        Cause.PARTITIONS_CHANGED,
        on_wire=False,
    ),  # fmt: skip
    ClientReason("librdkafka", "subscription modified", Cause.SUBSCRIPTION_CHANGED, on_wire=False),
    ClientReason(
        "librdkafka", "applying next subscription", Cause.SUBSCRIPTION_CHANGED, on_wire=False
    ),
    ClientReason("librdkafka", "max.poll.interval.ms exceeded", Cause.TIMED_OUT, on_wire=False),
    ClientReason("librdkafka", "group is rebalancing", None, on_wire=False),
    ClientReason(
        "librdkafka", "redistribute previously owned partitions", None, on_wire=False
    ),  # the cooperative second round
    ClientReason("librdkafka", "unassignment done", None, on_wire=False),
    ClientReason("librdkafka", "current assignment is empty", None, on_wire=False),
    ClientReason("librdkafka", "assignor failed", Cause.ASSIGNMENT_FAILED, on_wire=False),
    ClientReason(
        "librdkafka", "fenced by newer instance", Cause.STATIC_MEMBER_REPLACED, on_wire=False
    ),
    ClientReason("librdkafka", "member fenced", Cause.GENERATION_RESET, on_wire=False),
    ClientReason(
        "librdkafka", "offsetcommit error: unknown member", Cause.GENERATION_RESET, on_wire=False
    ),
    ClientReason("librdkafka", "offsetcommit error: illegal generation", None, on_wire=False),
    ClientReason("librdkafka", "syncgroup error", None, on_wire=False),
    ClientReason("librdkafka", "joingroup error", None, on_wire=False),
    ClientReason("librdkafka", "unsubscribe", Cause.MEMBER_LEFT, on_wire=False),
    # kgctl's names (and older kgctl members' `kgctl: <reason>`)
    ClientReason("kgctl", "rebalance_in_progress", None),
    ClientReason("kgctl", "rebalance in progress", None),  # librdkafka's words too
    ClientReason("kgctl", "already rebalancing", None),
    ClientReason("kgctl", "retry after member_id_required", None),
    ClientReason("kgctl", "cooperative_followup", None),
)


def client_cause(reason: str) -> Cause | None:
    """The cause a client's own reason names; None for a reaction; Cause.UNKNOWN when
    kgctl does not know the words."""
    low = reason.lower().strip()
    name = low.removeprefix("kgctl:").strip()  # kgctl's own names: `kgctl: metadata_changed`
    if name in {r.value for r in RejoinReason}:
        return REASON_CAUSE[RejoinReason(name)]
    for said in CLIENT_REASONS:
        if said.words in low:
            return said.cause
    if "poll" in low and ("timeout" in low or "interval" in low):
        return Cause.TIMED_OUT
    return Cause.UNKNOWN


def wire_cause(reason: str) -> Cause | None:
    """The cause a JoinGroup's KIP-800 reason names; None for a reaction."""
    cause = client_cause(reason)
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
    # Kafka 4's mixed group on its way back: "Downgrade group G from consumer to classic
    # for member leaving" (its last consumer-protocol member left).
    ("for member leaving", Cause.MEMBER_LEFT),
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
    said = client.strip()
    for words, cause in _BROKER_REASONS:
        if words in low:
            if cause is Cause.MEMBER_LEFT and said and said != "not provided":
                # A leave's own reason says why it left (Java: its poll timed out).
                found = client_cause(said)
                return found if found is not None and found is not Cause.UNKNOWN else cause
            if cause:
                return cause
            rejoined = True
            break
    if said and said != "not provided":
        found = client_cause(said)
        if found is not None and found is not Cause.UNKNOWN:
            return found
    elif not client:
        found = client_cause(broker)
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
    if "has failed" in reason and len(words) > 1 and words[0] == "member":
        return words[1]  # a removal (broker_log.py's words): any id, a KIP-848 one too
    for i, w in enumerate(words[:-1]):
        if w.lower() in ("member", "leader", "for") and "-" in words[i + 1]:
            return words[i + 1].rstrip(".,;")
    return ""


def member_name(state: GroupState, member_id: str, events: EventIndex | None = None) -> str:
    """A member id as its member's name; one the state does not know by the client id
    the group's records gave it (`events`: a member of the first stored epoch, which the
    story starts from, is told only when it goes), else a dynamic id (client.id, a dash
    and a UUID) as its client id."""
    found = state.find_member(member_id)
    if found is not None:
        return found.name
    told = recorded_client_ids(events).get(member_id) if events is not None else None
    if told:
        return told
    if len(member_id) > 37 and member_id[-37] == "-" and member_id[-28] == "-":
        return member_id[:-37]
    return member_id


def recorded_client_ids(events: EventIndex) -> dict[str, str]:
    """member id -> client id, as the observer's joins and leaves (a description, the
    group's records) gave them."""

    def build(ix: EventIndex) -> dict[str, str]:
        return {
            e.member_id: e.client_id
            for e in ix.of("MemberJoinedGroup", "MemberLeftGroup")
            if e.source == "observer" and e.member_id and e.client_id
        }

    return events.memo("client-ids-by-member-id", build)
