"""The one table of Kafka's errors (kgctl/model/kafka_errors.py) agrees with Kafka: each
entry's code and retriability are those of kafka-python's own error classes, and the
traits the members read hold together."""

from __future__ import annotations

import kafka.errors as kafka_python_errors
import pytest

from kgctl.adapters import clients, wire
from kgctl.errors import MEMBER_END_STATUS, ExitStatus, member_exit_status
from kgctl.model.kafka_errors import (
    BY_NAME,
    ENDS_MEMBER,
    FATAL_HEARTBEAT,
    FENCES_MEMBER,
    KAFKA_ERRORS,
    NORMAL_ANSWERS,
    REJOINS_AT_ONCE,
    KafkaError,
    MemberEnd,
)

# Errors newer than kafka-python 3.0.12, with the code Kafka 4.4's Errors gives them.
NEWER_THAN_KAFKA_PYTHON = {"INVALID_REGULAR_EXPRESSION": 128}


@pytest.mark.parametrize("entry", KAFKA_ERRORS, ids=lambda e: e.name)
def test_each_error_has_kafkas_code_and_retriability(entry: KafkaError) -> None:
    cls = kafka_python_errors.for_code(entry.code)
    if entry.name in NEWER_THAN_KAFKA_PYTHON:
        assert entry.code == NEWER_THAN_KAFKA_PYTHON[entry.name]
        # When kafka-python learns it, its class must agree too: drop it from the list.
        assert cls.__name__ == "UnrecognizedBrokerError", cls
        return
    assert clients.error_name(cls) == entry.name
    assert cls.retriable == entry.retriable


def test_names_and_codes_are_each_written_once() -> None:
    assert len({e.name for e in KAFKA_ERRORS}) == len(KAFKA_ERRORS)
    assert len({e.code for e in KAFKA_ERRORS}) == len(KAFKA_ERRORS)


def test_every_error_a_fault_rule_may_answer_has_its_traits() -> None:
    for api, names in wire.API_ERRORS.items():
        for name in names:
            assert name in BY_NAME, (api, name)
            assert wire.ERROR_CODES[name] == BY_NAME[name].code


def test_an_error_that_ends_a_consumer_protocol_member_ends_a_classic_one_too() -> None:
    # One exit line and status for both protocols: fatal_error reads ends_member.
    assert FATAL_HEARTBEAT <= ENDS_MEMBER


def test_normal_answers_and_rejoins_are_not_failures_that_end_a_member() -> None:
    assert "MEMBER_ID_REQUIRED" in NORMAL_ANSWERS and "NONE" in NORMAL_ANSWERS
    assert not (NORMAL_ANSWERS | REJOINS_AT_ONCE | FENCES_MEMBER) & ENDS_MEMBER


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ("FENCED_INSTANCE_ID", ExitStatus.FENCED),
        ("GROUP_AUTHORIZATION_FAILED", ExitStatus.NOT_AUTHORIZED),
        ("SASL_AUTHENTICATION_FAILED", ExitStatus.NOT_AUTHORIZED),
        ("INVALID_SESSION_TIMEOUT", ExitStatus.MEMBER_FAILED),
        ("UNRELEASED_INSTANCE_ID", ExitStatus.MEMBER_FAILED),
        ("SOME_ERROR_KGCTL_HAS_NO_TRAITS_FOR", ExitStatus.MEMBER_FAILED),
    ],
)
def test_the_exit_status_a_member_ends_with(error: str, status: ExitStatus) -> None:
    assert member_exit_status(error) is status


def test_every_way_of_ending_a_member_has_an_exit_status() -> None:
    assert set(MEMBER_END_STATUS) == set(MemberEnd)


@pytest.mark.parametrize(
    ("error", "retriable", "decision"),
    [
        ("INVALID_SESSION_TIMEOUT", False, "fatal"),
        ("FENCED_INSTANCE_ID", False, "fatal"),
        ("REBALANCE_IN_PROGRESS", False, "immediate"),
        ("MEMBER_ID_REQUIRED", False, "immediate"),
        ("COORDINATOR_LOAD_IN_PROGRESS", True, "backoff"),
        ("OFFSET_METADATA_TOO_LARGE", False, "fatal"),
    ],
)
def test_the_classic_join_loop_reads_the_table(error: str, retriable: bool, decision: str) -> None:
    assert clients.join_retry(error, retriable) == decision
