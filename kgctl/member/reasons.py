"""Pure decisions of the member: how a failed join is retried, which errors end it.
No kafka import: the adapter passes error names (Kafka's protocol names, for example
``FENCED_INSTANCE_ID``). Why a member rejoins is model vocabulary (`kgctl.model.reasons`).
"""

from __future__ import annotations

from kgctl.errors import (
    ExitStatus,
    FencedError,
    KgctlError,
    MemberFailedError,
    NotAuthorizedError,
    grant_hint,
)

# AbstractCoordinator#joinGroupIfNeeded retries these at once, without backoff.
IMMEDIATE_RETRY = frozenset(
    {"UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "MEMBER_ID_REQUIRED"}
)

# Errors that end the member, with the exit status the CLI reports.
FATAL_ERRORS: dict[str, ExitStatus] = {
    "FENCED_INSTANCE_ID": ExitStatus.FENCED,
    "GROUP_AUTHORIZATION_FAILED": ExitStatus.NOT_AUTHORIZED,
    "TOPIC_AUTHORIZATION_FAILED": ExitStatus.NOT_AUTHORIZED,
    "CLUSTER_AUTHORIZATION_FAILED": ExitStatus.NOT_AUTHORIZED,
    "SASL_AUTHENTICATION_FAILED": ExitStatus.NOT_AUTHORIZED,
    "INVALID_SESSION_TIMEOUT": ExitStatus.MEMBER_FAILED,
    "INCONSISTENT_GROUP_PROTOCOL": ExitStatus.MEMBER_FAILED,
    "INVALID_GROUP_ID": ExitStatus.MEMBER_FAILED,
    "GROUP_MAX_SIZE_REACHED": ExitStatus.MEMBER_FAILED,
    "UNSUPPORTED_VERSION": ExitStatus.MEMBER_FAILED,
}

_HINTS = {
    "FENCED_INSTANCE_ID": "another member joined with the same --instance-id",
    "GROUP_AUTHORIZATION_FAILED": "the principal may not use this group (check the ACLs)",
    "TOPIC_AUTHORIZATION_FAILED": "the principal may not read a subscribed topic",
    "INVALID_SESSION_TIMEOUT": (
        "--session-timeout is outside the broker's group.min/max.session.timeout.ms"
    ),
    "INCONSISTENT_GROUP_PROTOCOL": "no --assignor in common with the group's other members",
    "GROUP_MAX_SIZE_REACHED": "the group is full (group.max.size)",
}


def join_retry(error: str, retriable: bool) -> str:
    """How joinGroupIfNeeded continues after a failed JoinGroup/SyncGroup."""
    if error in FATAL_ERRORS:
        return "fatal"
    if error in IMMEDIATE_RETRY:
        return "immediate"
    return "backoff" if retriable else "fatal"


def fatal_error(
    error: str,
    group: str,
    detail: str = "",
    principal: str | None = None,
    topics: list[str] | None = None,
) -> KgctlError:
    """The one-line error (and its exit status) for a fatal protocol error.

    Authorization errors name the missing ACL and the principal (`User:alice`) when known.
    """
    status = FATAL_ERRORS.get(error, ExitStatus.MEMBER_FAILED)
    hint = _HINTS.get(error, detail or "the member cannot continue")
    message = f"group {group!r}: {error}: {hint}"
    if error == "GROUP_AUTHORIZATION_FAILED":
        grant = grant_hint("Read", "Group", [group], principal)
        message = f"not authorized to use group {group}: {grant} ({error})"
    elif error == "TOPIC_AUTHORIZATION_FAILED":
        names = sorted(topics or []) or ["<the subscribed topics>"]
        grant = grant_hint("Read", "Topic", names, principal)
        message = f"not authorized to read topic {', '.join(names)}: {grant} ({error})"
    elif error == "CLUSTER_AUTHORIZATION_FAILED":
        message = f"not authorized on the cluster: {error} ({detail or 'check the ACLs'})"
    elif error == "SASL_AUTHENTICATION_FAILED":
        who = principal or "the configured user"
        message = (
            f"authentication failed for {who}: check the user and password in "
            f"--command-config ({error})"
        )
    if status is ExitStatus.FENCED:
        return FencedError(message)
    if status is ExitStatus.NOT_AUTHORIZED:
        return NotAuthorizedError(message)
    return MemberFailedError(message, status)
