"""What kafka-python's exceptions mean to kgctl (kgctl/adapters/clients.py), without a broker:
one translation for every command, one retry decision."""

from __future__ import annotations

import kafka.errors as Errors
import pytest

from kgctl.adapters import clients
from kgctl.errors import ExitStatus, KgctlError
from kgctl.settings import ClientSettings

SASL = ClientSettings(
    bootstrap="127.0.0.1:1",
    properties={
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="alice" password="not-shown";',
    },
)


def test_a_failed_login_reads_the_same_however_kafka_python_said_it() -> None:
    answered = Errors.SaslAuthenticationFailedError("invalid credentials with SCRAM-SHA-512")
    closed = Errors.SaslAuthenticationFailedError("the broker closed the connection")
    lines = {str(clients.translate(e, SASL, doing="list topics")) for e in (answered, closed)}
    assert len(lines) == 1
    (line,) = lines
    assert line.startswith("authentication failed for User:alice")
    assert "not-shown" not in line and "\n" not in line
    assert clients.translate(answered, SASL).status is ExitStatus.NOT_AUTHORIZED


def test_unreachable_and_refused_and_other_errors() -> None:
    down = clients.translate(Errors.KafkaTimeoutError(), SASL)
    assert down.status is ExitStatus.CANNOT_CONNECT
    assert "cannot reach Kafka at 127.0.0.1:1" in str(down) and "refused" in str(down)
    denied = clients.translate(Errors.GroupAuthorizationFailedError(), SASL, group="g1")
    assert denied.status is ExitStatus.NOT_AUTHORIZED
    assert "grant Describe on Group g1 to User:alice" in str(denied)
    refused = clients.translate(Errors.TopicAuthorizationFailedError(), SASL, doing="grow t")
    assert str(refused).startswith("grow t: the cluster refused User:alice")
    other = clients.translate(
        Errors.InvalidPartitionsError("7 < 8"), SASL, otherwise=ExitStatus.SETUP_FAILED
    )
    assert other.status is ExitStatus.SETUP_FAILED and "INVALID_PARTITIONS" in str(other)
    mine = KgctlError("already a kgctl error", ExitStatus.USAGE)
    assert clients.translate(mine, SASL) is mine


@pytest.mark.parametrize(
    ("exc", "again"),
    [
        (Errors.KafkaConnectionError(), True),
        (Errors.CoordinatorLoadInProgressError(), True),
        (Errors.KafkaTimeoutError(), True),
        (Errors.GroupAuthorizationFailedError(), False),
        (Errors.SaslAuthenticationFailedError(), False),
        (ValueError("a bug"), False),
    ],
)
def test_one_retry_decision(exc: BaseException, again: bool) -> None:
    assert clients.retriable(exc) is again


def test_api_versions_are_read_by_number_even_for_keys_kafka_python_does_not_know() -> None:
    # Kafka 4.4 advertises API key 93, which kafka-python 3.0.12's ApiKey enum lacks: its
    # own api_versions() raised ValueError, and every consumer-protocol join and
    # scenario's preflight on 4.4 failed with "93 is not a valid ApiKey".
    from types import SimpleNamespace

    from kgctl.adapters.clients import api_versions

    data = SimpleNamespace(api_versions={68: (0, 1), 93: (0, 0)})
    admin = SimpleNamespace(_manager=SimpleNamespace(broker_version_data=data))
    assert api_versions(admin) == {68: (0, 1), 93: (0, 0)}


def test_overlapping_login_watches_put_the_kafka_loggers_back_as_they_were() -> None:
    """A monitor opens its reader and its admin at once: two watches, the first ending
    before the second. kafka-python's connection log must end as it began (before, it was
    left at INFO), and meanwhile show the user what it showed before, once."""
    import logging

    logger = logging.getLogger("kafka.net.connection")
    before = (logger.level, logger.propagate)
    seen: list[str] = []

    class _Root(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    root = _Root(logging.DEBUG)
    parent = logger.parent
    assert parent is not None
    parent.addHandler(root)
    kafka_logger = logging.getLogger("kafka")
    kafka_level = kafka_logger.level
    kafka_logger.setLevel(logging.WARNING)  # the user's level, whatever pytest's is
    try:
        first, second = clients.AuthFailureWatch(), clients.AuthFailureWatch()
        first.__enter__()
        second.__enter__()
        logger.info("Connected")  # seen by the watches only, as the user's level hides INFO
        logger.warning("Connection lost")
        first.__exit__(None, None, None)
        logger.warning("still watched")
        second.__exit__(None, None, None)
        logger.info("not shown")
    finally:
        parent.removeHandler(root)
        kafka_logger.setLevel(kafka_level)
    assert (logger.level, logger.propagate) == before
    assert seen == ["Connection lost", "still watched"]
