"""Exit status codes and the errors that carry them to the CLI."""

from __future__ import annotations

import enum

from kgctl.model.kafka_errors import MemberEnd, member_end


class ExitStatus(enum.IntEnum):
    """Program exit status code constants (documented in docs/cli.md)."""

    OK = 0
    ERROR = 1  # an unexpected failure (a bug: please report it, with --verbose)
    USAGE = 2  # bad options or arguments
    CANNOT_CONNECT = 3  # bootstrap unreachable, not Kafka, or timed out
    NOT_FOUND = 4  # a group, topic or scenario that does not exist
    INVARIANT_FAILED = 5  # a chaos invariant or scenario expectation did not hold
    SETUP_FAILED = 6  # local broker or chaos fleet not set up, or the cluster cannot run it
    FENCED = 7  # a static member was fenced by another with the same instance id
    NOT_AUTHORIZED = 8  # the cluster refused an operation (ACLs, authentication)
    MISSING_DEPENDENCY = 9  # Java, Maven or an Apache Kafka distribution is missing
    MEMBER_FAILED = 10  # a group member hit a fatal protocol error
    NOT_BUILT = 11  # the command exists but is not built yet
    UNHEALTHY = 12  # explain: the group is not healthy now (missing, empty or rebalancing)
    INTERRUPTED = 130  # Ctrl-C


# The exit status of a member an error ends, by how it ends it (kgctl/model/kafka_errors.py).
MEMBER_END_STATUS: dict[MemberEnd, ExitStatus] = {
    MemberEnd.FENCED: ExitStatus.FENCED,
    MemberEnd.NOT_AUTHORIZED: ExitStatus.NOT_AUTHORIZED,
    MemberEnd.FAILED: ExitStatus.MEMBER_FAILED,
}


def member_exit_status(error: str) -> ExitStatus:
    """The exit status of a member ended by `error` (a protocol name): MEMBER_FAILED for
    an error that is not one of those that end a member."""
    end = member_end(error)
    return MEMBER_END_STATUS[end] if end is not None else ExitStatus.MEMBER_FAILED


class KgctlError(Exception):
    """An error meant for the user: one line saying what is wrong and what to do."""

    status: ExitStatus = ExitStatus.ERROR

    def __init__(self, message: str, status: ExitStatus | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class UsageError(KgctlError):
    status = ExitStatus.USAGE


class ConnectError(KgctlError):
    status = ExitStatus.CANNOT_CONNECT


class NotFoundError(KgctlError):
    status = ExitStatus.NOT_FOUND


class SetupError(KgctlError):
    status = ExitStatus.SETUP_FAILED


class MissingDependencyError(KgctlError):
    status = ExitStatus.MISSING_DEPENDENCY


class NotAuthorizedError(KgctlError):
    status = ExitStatus.NOT_AUTHORIZED


class MemberFailedError(KgctlError):
    status = ExitStatus.MEMBER_FAILED


class FencedError(KgctlError):
    status = ExitStatus.FENCED


def grant_hint(operation: str, resource_type: str, names: list[str], principal: str | None) -> str:
    """What to ask a Kafka admin for: `grant Read on Group g1 to User:alice`."""
    who = principal or "the principal in --command-config"
    return f"grant {operation} on {resource_type} {', '.join(names)} to {who}"
