"""Cluster-level calls through kafka-python: is it up, which brokers answer."""

from __future__ import annotations

import logging
from typing import Any

from kgctl.settings import ClientSettings


def describe_cluster(settings: ClientSettings) -> dict[str, Any]:
    """The cluster id, controller and live brokers, or raise the client's error."""
    from kafka import KafkaAdminClient

    from kgctl.adapters.sockets import close_abandoned_connects

    close_abandoned_connects()
    cfg = settings.kafka_config()
    cfg["request_timeout_ms"] = min(cfg["request_timeout_ms"], 5000)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    with AuthFailureWatch(cfg) as watch:
        try:
            admin = KafkaAdminClient(**cfg)
        except Exception:
            if watch.failure is not None:
                raise auth_error(watch.failure, settings.principal) from None
            raise
    try:
        return dict(admin.describe_cluster())
    finally:
        admin.close()


class AuthFailureWatch(logging.Handler):
    """Catches a SASL authentication failure while a kafka-python client bootstraps.

    kafka-python retries a bootstrap whose SASL handshake failed until its timeout and
    then reports only "Unable to bootstrap"; the failure itself is only logged (with the
    exception as the log record's argument). Used as a context manager around a client's
    constructor: `failure` holds the exception seen, if any.
    """

    LOGGERS = ("kafka.net.manager", "kafka.net.connection")

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(logging.DEBUG)
        protocol = str((config or {}).get("security_protocol", "PLAINTEXT")).upper()
        self.sasl = protocol.startswith("SASL")
        self.failure: BaseException | None = None
        self._saved: list[tuple[logging.Logger, int, bool]] = []
        self._shown: dict[str, int] = {}  # logger -> the level it propagated before

    def emit(self, record: logging.LogRecord) -> None:
        import kafka.errors as Errors

        shown = self._shown.get(record.name)
        if shown is not None and record.levelno >= shown:
            parent = logging.getLogger(record.name).parent
            if parent is not None:
                parent.handle(record)  # what propagated before still does

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
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.level, logger.propagate))
            shown = logger.getEffectiveLevel()
            # INFO is needed to see a clean close ("Connection closed"). What was not shown
            # before stays unshown: records below the old level go to this watch only.
            logger.setLevel(min(shown, logging.INFO))
            if shown > logging.INFO:
                self._shown[name] = shown if logger.propagate else logging.CRITICAL + 1
                logger.propagate = False
            logger.addHandler(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        for logger, level, propagate in self._saved:
            logger.removeHandler(self)
            logger.setLevel(level)
            logger.propagate = propagate
        self._saved.clear()
        self._shown.clear()


def auth_error(failure: BaseException, principal: str | None) -> Any:
    """The NotAuthorizedError for a SASL failure seen by AuthFailureWatch."""
    from kgctl.errors import NotAuthorizedError

    who = principal or "the configured user"
    detail = str(failure).split(":", 1)[-1].strip()[:160]
    return NotAuthorizedError(
        f"authentication failed for {who}: {detail}; check the user and password in "
        "--command-config (SASL_AUTHENTICATION_FAILED)"
    )


def why_unreachable(bootstrap: str) -> str:
    """A short diagnosis of a bootstrap that never answered: DNS, refused, or not Kafka."""
    import socket

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
