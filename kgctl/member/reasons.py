"""Pure decisions of the member: the one line a fatal protocol error ends it with.

Why a member rejoins is model vocabulary (`kgctl.model.reasons`); which errors are fatal,
and with which exit status, is the table of `kgctl/model/kafka_errors.py` (its exit
statuses mapped in `kgctl/errors.py`); how a failed join is retried is `join_retry` in
`kgctl/adapters/clients.py`. The adapter passes error names (Kafka's protocol names, for
example ``FENCED_INSTANCE_ID``).
"""

from __future__ import annotations

from kgctl.adapters.clients import auth_error
from kgctl.errors import (
    ExitStatus,
    FencedError,
    KgctlError,
    MemberFailedError,
    NotAuthorizedError,
    grant_hint,
    member_exit_status,
)

_HINTS = {
    "FENCED_INSTANCE_ID": "another member joined with the same --instance-id",
    "GROUP_AUTHORIZATION_FAILED": "the principal may not use this group (check the ACLs)",
    "TOPIC_AUTHORIZATION_FAILED": "the principal may not read a subscribed topic",
    "INVALID_SESSION_TIMEOUT": (
        "--session-timeout is outside the broker's group.min/max.session.timeout.ms"
    ),
    "INCONSISTENT_GROUP_PROTOCOL": "no --assignor in common with the group's other members",
    "GROUP_MAX_SIZE_REACHED": (
        "the group is full (group.max.size; a consumer-protocol group: group.consumer.max.size)"
    ),
    "UNRELEASED_INSTANCE_ID": (
        "another live member holds this --instance-id (it has not left yet); stop it "
        "first or use another --instance-id"
    ),
    "UNSUPPORTED_ASSIGNOR": (
        "the broker has no such --remote-assignor (see its group.consumer.assignors)"
    ),
    "INVALID_REGULAR_EXPRESSION": "the broker could not compile --pattern (RE2J syntax)",
}


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
    status = member_exit_status(error)
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
        return auth_error(principal)
    if status is ExitStatus.FENCED:
        return FencedError(message)
    if status is ExitStatus.NOT_AUTHORIZED:
        return NotAuthorizedError(message)
    return MemberFailedError(message, status)
