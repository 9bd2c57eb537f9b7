"""Every Kafka error kgctl meets, once: its protocol name, its code and what it means for
a group member (pure).

An error's traits are written here and read everywhere else: the classic member's join
loop and exit line (`kgctl/adapters/consumer.py`, `kgctl/member`), the consumer-protocol
member (`kgctl/member/membership.py`), the client factory (`kgctl/adapters/clients.py`),
the timeline and the diagnosis. The exit status an error ends a member with is an
`ExitStatus`, which lives in the settings layer: here it is a `MemberEnd`, and
`kgctl/errors.py` maps each `MemberEnd` to its `ExitStatus` once.

Names are Kafka's protocol names (`FENCED_INSTANCE_ID`), the words events carry in their
`error` field; codes and retriability are Java's (`Errors`, `RetriableException`), which
a test holds against kafka-python's `kafka.errors`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType


class MemberEnd(str, enum.Enum):
    """How an error that ends a member ends it (`kgctl/errors.py` maps it to an exit status)."""

    FENCED = "fenced"  # a static member displaced by another with the same instance id
    NOT_AUTHORIZED = "not_authorized"  # ACLs or authentication refused the member
    FAILED = "failed"  # any other protocol error the member cannot go on after


class CoordinatorTrouble(str, enum.Enum):
    """What an error says about the group coordinator."""

    MOVED = "moved"  # not (or no longer) the coordinator: find it again
    LOADING = "loading"  # the right coordinator, still loading the group: ask it later
    # The request got no answer in time: Java's network client drops the connection, so
    # a commit looks the coordinator up again as after MOVED.
    UNANSWERED = "unanswered"


@dataclass(frozen=True, kw_only=True)
class KafkaError:
    """One Kafka error and its traits."""

    name: str  # Kafka's protocol name, as events carry it
    code: int  # its code on the wire
    retriable: bool  # Java's RetriableException: the same request may succeed later
    # Ends a member of either protocol (the classic join loop does not retry it; kgctl
    # exits with the status its MemberEnd maps to). None: the member goes on.
    ends_member: MemberEnd | None = None
    # Java's consumer-protocol membership manager ends the member on this heartbeat
    # answer (transitionToFatal); any error it does not handle ends it too.
    fatal_heartbeat: bool = False
    # The consumer-protocol member is fenced: it loses its partitions, then rejoins
    # with epoch 0 (transitionToFenced).
    fences_member: bool = False
    coordinator: CoordinatorTrouble | None = None
    # The classic join loop (joinGroupIfNeeded) sends the next JoinGroup at once,
    # without backing off.
    rejoins_at_once: bool = False
    # The protocol's normal answer, not a failure (a dynamic member's first JoinGroup
    # is always answered MEMBER_ID_REQUIRED): no count of errors includes it.
    normal: bool = False


_FAILED = MemberEnd.FAILED
_REFUSED = MemberEnd.NOT_AUTHORIZED

KAFKA_ERRORS: tuple[KafkaError, ...] = (
    KafkaError(name="NONE", code=0, retriable=False, normal=True),
    KafkaError(name="UNKNOWN_TOPIC_OR_PARTITION", code=3, retriable=True),
    KafkaError(
        name="REQUEST_TIMED_OUT",
        code=7,
        retriable=True,
        coordinator=CoordinatorTrouble.UNANSWERED,
    ),
    KafkaError(name="OFFSET_METADATA_TOO_LARGE", code=12, retriable=False),
    KafkaError(
        name="COORDINATOR_LOAD_IN_PROGRESS",
        code=14,
        retriable=True,
        coordinator=CoordinatorTrouble.LOADING,
    ),
    KafkaError(
        name="COORDINATOR_NOT_AVAILABLE",
        code=15,
        retriable=True,
        coordinator=CoordinatorTrouble.MOVED,
    ),
    KafkaError(
        name="NOT_COORDINATOR", code=16, retriable=True, coordinator=CoordinatorTrouble.MOVED
    ),
    KafkaError(name="ILLEGAL_GENERATION", code=22, retriable=False, rejoins_at_once=True),
    KafkaError(name="INCONSISTENT_GROUP_PROTOCOL", code=23, retriable=False, ends_member=_FAILED),
    KafkaError(name="INVALID_GROUP_ID", code=24, retriable=False, ends_member=_FAILED),
    KafkaError(
        name="UNKNOWN_MEMBER_ID",
        code=25,
        retriable=False,
        fences_member=True,
        rejoins_at_once=True,
    ),
    KafkaError(name="INVALID_SESSION_TIMEOUT", code=26, retriable=False, ends_member=_FAILED),
    KafkaError(name="REBALANCE_IN_PROGRESS", code=27, retriable=False, rejoins_at_once=True),
    KafkaError(name="INVALID_COMMIT_OFFSET_SIZE", code=28, retriable=False),
    KafkaError(
        name="TOPIC_AUTHORIZATION_FAILED",
        code=29,
        retriable=False,
        ends_member=_REFUSED,
        fatal_heartbeat=True,
    ),
    KafkaError(
        name="GROUP_AUTHORIZATION_FAILED",
        code=30,
        retriable=False,
        ends_member=_REFUSED,
        fatal_heartbeat=True,
    ),
    KafkaError(name="CLUSTER_AUTHORIZATION_FAILED", code=31, retriable=False, ends_member=_REFUSED),
    KafkaError(
        name="UNSUPPORTED_VERSION",
        code=35,
        retriable=False,
        ends_member=_FAILED,
        fatal_heartbeat=True,
    ),
    KafkaError(
        name="INVALID_REQUEST", code=42, retriable=False, ends_member=_FAILED, fatal_heartbeat=True
    ),
    KafkaError(name="SASL_AUTHENTICATION_FAILED", code=58, retriable=False, ends_member=_REFUSED),
    KafkaError(
        name="MEMBER_ID_REQUIRED", code=79, retriable=False, rejoins_at_once=True, normal=True
    ),
    KafkaError(
        name="GROUP_MAX_SIZE_REACHED",
        code=81,
        retriable=False,
        ends_member=_FAILED,
        fatal_heartbeat=True,
    ),
    KafkaError(
        name="FENCED_INSTANCE_ID",
        code=82,
        retriable=False,
        ends_member=MemberEnd.FENCED,
        fatal_heartbeat=True,
    ),
    KafkaError(name="FENCED_MEMBER_EPOCH", code=110, retriable=False, fences_member=True),
    KafkaError(
        name="UNRELEASED_INSTANCE_ID",
        code=111,
        retriable=False,
        ends_member=_FAILED,
        fatal_heartbeat=True,
    ),
    KafkaError(
        name="UNSUPPORTED_ASSIGNOR",
        code=112,
        retriable=False,
        ends_member=_FAILED,
        fatal_heartbeat=True,
    ),
    KafkaError(name="STALE_MEMBER_EPOCH", code=113, retriable=False),
    KafkaError(
        name="INVALID_REGULAR_EXPRESSION",
        code=128,
        retriable=False,
        ends_member=_FAILED,
        fatal_heartbeat=True,
    ),
)

BY_NAME: Mapping[str, KafkaError] = MappingProxyType({e.name: e for e in KAFKA_ERRORS})


def kafka_error(name: str) -> KafkaError | None:
    """The table's entry for a protocol name, or None for an error kgctl gives no traits."""
    return BY_NAME.get(name)


def names_where(trait: Callable[[KafkaError], bool]) -> frozenset[str]:
    """The names of the errors that have a trait: `names_where(lambda e: e.fences_member)`."""
    return frozenset(e.name for e in KAFKA_ERRORS if trait(e))


def member_end(name: str) -> MemberEnd | None:
    """How the error ends a member, or None when it does not."""
    entry = BY_NAME.get(name)
    return entry.ends_member if entry is not None else None


def is_retriable(name: str) -> bool:
    """Java's RetriableException, by name (an error not in the table: no)."""
    entry = BY_NAME.get(name)
    return entry is not None and entry.retriable


# The sets the classifiers read, each derived from the table above.
ENDS_MEMBER = names_where(lambda e: e.ends_member is not None)
FATAL_HEARTBEAT = names_where(lambda e: e.fatal_heartbeat)
FENCES_MEMBER = names_where(lambda e: e.fences_member)
COORDINATOR_MOVED = names_where(lambda e: e.coordinator is CoordinatorTrouble.MOVED)
COORDINATOR_LOADING = names_where(lambda e: e.coordinator is CoordinatorTrouble.LOADING)
# After these a commit looks the coordinator up again (Java: markCoordinatorUnknown).
COMMIT_LOSES_COORDINATOR = names_where(
    lambda e: e.coordinator in (CoordinatorTrouble.MOVED, CoordinatorTrouble.UNANSWERED)
)
REJOINS_AT_ONCE = names_where(lambda e: e.rejoins_at_once)
NORMAL_ANSWERS = names_where(lambda e: e.normal)
