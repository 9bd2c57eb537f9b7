"""Every kafka-python client kgctl builds, and what kafka-python's exceptions mean to kgctl.

A new Kafka client goes through `admin()`, `consumer()` or `producer()`. Each one:

- installs the fix for the sockets kafka-python leaves open (`sockets.py`) before it
  builds anything;
- names the client (`name` is its client id, unless --command-config sets `client.id`;
  a `client_id` in the overrides wins over both, as the member's --client-id does);
- watches the bootstrap for a failed login: kafka-python retries a bootstrap whose SASL
  handshake failed until its timeout and then only says it could not bootstrap, the
  failure itself being logged (`AuthFailureWatch`);
- turns a failed construction into the one-line kgctl error (`translate`).

`translate` is the one mapping from a kafka-python exception to a kgctl error, and
`retriable` the one decision whether an error is worth another attempt; `join_retry` is
how the member's join loop goes on after a failed JoinGroup/SyncGroup, as Java's
joinGroupIfNeeded does. So a wrong password, an unreachable bootstrap or a refused ACL
reads the same whichever command met it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import kafka.consumer.group as _group_module
import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from kgctl.adapters.sockets import close_abandoned_connects
from kgctl.errors import (
    ConnectError,
    ExitStatus,
    KgctlError,
    NotAuthorizedError,
    UsageError,
    grant_hint,
)
from kgctl.model.kafka_errors import ENDS_MEMBER, REJOINS_AT_ONCE
from kgctl.settings import ClientSettings

# -- building clients --------------------------------------------------------------------


def admin(settings: ClientSettings, name: str, **overrides: Any) -> Any:
    """A KafkaAdminClient, bootstrapped (or a kgctl error)."""
    return _build(KafkaAdminClient, settings, name, overrides)


def consumer(
    settings: ClientSettings,
    name: str,
    *,
    coordinator: type | None = None,
    fetcher: type | None = None,
    **overrides: Any,
) -> Any:
    """A KafkaConsumer, bootstrapped (or a kgctl error); `overrides` are kafka-python's
    consumer settings (group_id=None for a reader that joins no group). `coordinator`
    replaces kafka-python's ConsumerCoordinator (the member's TracedCoordinator),
    `fetcher` its Fetcher (the member's WakingFetcher)."""
    if coordinator is None and fetcher is None:
        return _build(KafkaConsumer, settings, name, overrides)
    with _consumer_classes(coordinator, fetcher):
        return _build(KafkaConsumer, settings, name, overrides)


def producer(settings: ClientSettings, name: str, **overrides: Any) -> Any:
    """A KafkaProducer, bootstrapped (or a kgctl error)."""
    return _build(KafkaProducer, settings, name, overrides)


def _build(cls: Any, settings: ClientSettings, name: str, overrides: dict[str, Any]) -> Any:
    close_abandoned_connects()
    config = settings.kafka_config()
    config.setdefault("client_id", name)
    config.update(overrides)
    with AuthFailureWatch(config) as watch:
        try:
            return cls(**config)
        except Errors.KafkaError as exc:
            # A failed login is only logged; what the constructor raises is the timeout.
            raise translate(watch.failure or exc, settings) from None


_CONSTRUCT_LOCK = threading.Lock()


@contextlib.contextmanager
def _consumer_classes(coordinator: type | None, fetcher: type | None) -> Iterator[None]:
    """Make KafkaConsumer's constructor build these instead of ConsumerCoordinator and
    Fetcher: it has no setting for that, and looks the names up in its module when it
    builds them."""
    with _CONSTRUCT_LOCK:
        originals = (_group_module.ConsumerCoordinator, _group_module.Fetcher)
        if coordinator is not None:
            _group_module.ConsumerCoordinator = coordinator
        if fetcher is not None:
            _group_module.Fetcher = fetcher
        try:
            yield
        finally:
            _group_module.ConsumerCoordinator, _group_module.Fetcher = originals


# -- what an error means -----------------------------------------------------------------


def error_name(exc: BaseException | type) -> str:
    """Kafka's protocol name for a broker error (FENCED_INSTANCE_ID), else the class name."""
    cls = exc if isinstance(exc, type) else type(exc)
    if cls is Errors.NoError:
        return "NONE"
    message = getattr(cls, "message", None)
    if issubclass(cls, Errors.BrokerResponseError) and message:
        return str(message)
    return cls.__name__


# Java exception classes whose name is not the error's name in CamelCase + "Exception".
_JAVA_EXCEPTIONS = {
    "GROUP_AUTHORIZATION_FAILED": "GroupAuthorizationException",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "SASL_AUTHENTICATION_FAILED": "SaslAuthenticationException",
    "UNKNOWN_SERVER_ERROR": "UnknownServerException",
    # kafka-python fails a request that timed out in flight with REQUEST_TIMED_OUT and
    # closes the connection; Java's network client disconnects too (DisconnectException).
    "REQUEST_TIMED_OUT": "DisconnectException",
    "KafkaConnectionError": "DisconnectException",
    "NodeNotReadyError": "DisconnectException",
    "KafkaTimeoutError": "TimeoutException",
    "KafkaError": "KafkaException",
}


def java_exception_name(exc: BaseException) -> str:
    """The simple name of the exception Java's client raises for the same failure
    (REBALANCE_IN_PROGRESS: RebalanceInProgressException; a lost connection:
    DisconnectException); another exception keeps its own class name."""
    name = error_name(exc)
    if name in _JAVA_EXCEPTIONS:
        return _JAVA_EXCEPTIONS[name]
    if isinstance(exc, Errors.BrokerResponseError) and name.isupper():
        return "".join(word.capitalize() for word in name.split("_")) + "Exception"
    return type(exc).__name__


def retriable(exc: BaseException) -> bool:
    """Whether another attempt may succeed: kafka-python marks such errors (a lost
    connection, a coordinator loading, a timeout) `retriable`."""
    return bool(getattr(exc, "retriable", False))


def topics_of(exc: BaseException) -> list[str]:
    """The topics a TopicAuthorizationFailedError names (kafka-python passes a set)."""
    found: set[str] = set()
    for arg in getattr(exc, "args", ()):
        if isinstance(arg, set | frozenset | list | tuple):
            found.update(str(t) for t in arg)
    return sorted(found)


def translate(
    exc: BaseException,
    settings: ClientSettings,
    *,
    doing: str = "",
    group: str | None = None,
    otherwise: ExitStatus = ExitStatus.CANNOT_CONNECT,
) -> KgctlError:
    """The kgctl error for a kafka-python exception met while `doing` something.

    `group` names the group a GROUP_AUTHORIZATION_FAILED was about (the grant to ask
    for is Describe on it); `otherwise` is the exit status of a Kafka error none of the
    cases below covers (a broker's answer to a chaos action is a set-up failure, not a
    connection failure).
    """
    prefix = f"{doing}: " if doing else ""
    if isinstance(exc, KgctlError):
        return exc
    if isinstance(exc, Errors.KafkaConfigurationError):
        return UsageError(f"invalid client settings: {exc}")
    if isinstance(exc, Errors.SaslAuthenticationFailedError):
        return auth_error(settings.principal)
    if isinstance(exc, Errors.GroupAuthorizationFailedError) and group:
        grant = grant_hint("Describe", "Group", [group], settings.principal)
        return NotAuthorizedError(
            f"not authorized to describe group {group}: {grant} (GROUP_AUTHORIZATION_FAILED)"
        )
    if isinstance(exc, Errors.AuthorizationError):
        who = settings.principal or "the principal in --command-config"
        return NotAuthorizedError(
            f"{prefix}the cluster refused {who} ({error_name(exc)}); ask for the ACLs it "
            "needs (Describe on the group and its topics to watch, Read to join)"
        )
    if isinstance(exc, Errors.KafkaTimeoutError | Errors.KafkaConnectionError):
        return unreachable(settings.bootstrap, prefix)
    return KgctlError(
        f"{prefix}Kafka at {settings.bootstrap} failed: {error_name(exc)}: {exc}", otherwise
    )


def unreachable(bootstrap: str, prefix: str = "") -> ConnectError:
    return ConnectError(
        f"{prefix}cannot reach Kafka at {bootstrap} ({why_unreachable(bootstrap)}); check "
        "--bootstrap-server (-b), the security settings and that the broker is up"
    )


def auth_error(principal: str | None) -> NotAuthorizedError:
    """The one line for a failed login, whichever client met it and however the broker
    said it (an answer, or a closed connection): the same on every command."""
    who = principal or "the configured user"
    return NotAuthorizedError(
        f"authentication failed for {who}: the broker rejected the login; check the user "
        "and password in --command-config (SASL_AUTHENTICATION_FAILED)"
    )


def why_unreachable(bootstrap: str) -> str:
    """A short diagnosis of a bootstrap that never answered: DNS, refused, or not Kafka."""
    reasons = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except (OSError, ValueError):
            reasons.append(f"{host}: unknown host")
            continue
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except OSError as exc:
            reasons.append(f"{server}: {exc.strerror or type(exc).__name__}".lower())
            continue
        reasons.append(f"{server} accepts connections but did not answer as Kafka")
    return "; ".join(reasons)


def join_retry(error: str, retriable: bool) -> str:
    """How joinGroupIfNeeded continues after a failed JoinGroup/SyncGroup."""
    if error in ENDS_MEMBER:
        return "fatal"
    if error in REJOINS_AT_ONCE:
        return "immediate"
    return "backoff" if retriable else "fatal"


# -- the login watch ---------------------------------------------------------------------


class _Forwarder(logging.Handler):
    """While any login watch is on, hands on to the parent logger what a watched logger
    propagated before the watches turned its propagation off (each record once, however
    many watches are on)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.shown: dict[str, int] = {}  # logger -> the level it propagated before

    def emit(self, record: logging.LogRecord) -> None:
        shown = self.shown.get(record.name)
        if shown is not None and record.levelno >= shown:
            parent = logging.getLogger(record.name).parent
            if parent is not None:
                parent.handle(record)


class AuthFailureWatch(logging.Handler):
    """Catches a SASL authentication failure while a kafka-python client bootstraps.

    kafka-python retries a bootstrap whose SASL handshake failed until its timeout and
    then reports only "Unable to bootstrap"; the failure itself is only logged (with the
    exception as the log record's argument). Used as a context manager around a client's
    constructor: `failure` holds the exception seen, if any.

    Watches overlap: a monitor opens its `__consumer_offsets` reader and its admin client
    in two threads. The loggers' levels are changed by the first watch on and put back by
    the last one off, under one lock: before, each watch saved and restored them itself,
    and two interleaved could restore another's change, leaving kafka-python's connection
    log at INFO and propagating, in the user's terminal.
    """

    LOGGERS = ("kafka.net.manager", "kafka.net.connection")
    _lock = threading.Lock()
    _on = 0  # watches on now
    _saved: list[tuple[logging.Logger, int, bool]] = []  # shared by the watches on
    _forwarder = _Forwarder()

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(logging.DEBUG)
        protocol = str((config or {}).get("security_protocol", "PLAINTEXT")).upper()
        self.sasl = protocol.startswith("SASL")
        self.failure: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        for arg in args:
            if isinstance(arg, Errors.SaslAuthenticationFailedError):
                self.failure = arg
        # A broker rejecting SCRAM credentials closes the connection without an answer:
        # lost while initializing, after ApiVersions, with SASL on = authentication.
        # The close is seen as a reset or an EOF ("Connection lost: ..." with whatever the
        # socket said, or "Connection closed"), whichever the socket reports first.
        conn = args[0] if args else None
        init = getattr(conn, "_init_future", None)
        message = record.getMessage()
        lost_in_init = init is not None and init.failed()
        if (
            self.sasl
            and any(word in message for word in ("Connection lost", "Connection closed"))
            and (lost_in_init or "Connection lost" in message)
            and getattr(conn, "broker_version_data", None) is not None
        ):
            self.failure = Errors.SaslAuthenticationFailedError(
                "the broker closed the connection during SASL authentication"
            )

    def __enter__(self) -> AuthFailureWatch:
        cls = AuthFailureWatch
        with cls._lock:
            if cls._on == 0:
                cls._open_loggers()
            cls._on += 1
            for name in self.LOGGERS:
                logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        cls = AuthFailureWatch
        with cls._lock:
            for name in self.LOGGERS:
                logging.getLogger(name).removeHandler(self)
            cls._on -= 1
            if cls._on == 0:
                cls._restore_loggers()

    @classmethod
    def _open_loggers(cls) -> None:
        shown = cls._forwarder.shown
        for name in cls.LOGGERS:
            logger = logging.getLogger(name)
            cls._saved.append((logger, logger.level, logger.propagate))
            level = logger.getEffectiveLevel()
            # INFO is needed to see a clean close ("Connection closed"). What was not shown
            # before stays unshown: records below the old level go to the watches only.
            logger.setLevel(min(level, logging.INFO))
            if level > logging.INFO:
                shown[name] = level if logger.propagate else logging.CRITICAL + 1
                logger.propagate = False
            logger.addHandler(cls._forwarder)

    @classmethod
    def _restore_loggers(cls) -> None:
        for logger, level, propagate in cls._saved:
            logger.removeHandler(cls._forwarder)
            logger.setLevel(level)
            logger.propagate = propagate
        cls._saved.clear()
        cls._forwarder.shown.clear()


def api_versions(admin: Any) -> dict[int, tuple[int, int]]:
    """The (min, max) version of each API key the broker advertised, by number.

    kafka-python's `api_versions()` turns each key into its own `ApiKey` enum and fails
    on a key it does not know (Kafka 4.4 advertises 93): read the raw table instead."""
    raw = admin._manager.broker_version_data.api_versions
    return {int(k): (int(v[0]), int(v[1])) for k, v in raw.items()}
