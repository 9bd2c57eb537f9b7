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
