"""What the cluster serves, read true, as a scenario's preflight checks it
(kgctl/chaos/preflight.py over kgctl/adapters/cluster.py's Capabilities): the online
migration policy is refused only when it was read, never assumed from the broker's
version. No broker: the capabilities are given, the log is a file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kgctl.adapters.cluster import Capabilities
from kgctl.broker.local import logged_setting
from kgctl.chaos.preflight import check
from kgctl.chaos.scenarios import builtin
from kgctl.errors import SetupError
from kgctl.settings import ClientSettings

KIP848_APIS = {68: (0, 0), 69: (0, 0)}


def caps(version: str, policy: str | None) -> Capabilities:
    return Capabilities(
        "127.0.0.1:1", version, KIP848_APIS, "answers", ("classic", "consumer"), policy,
        "DescribeConfigs" if policy else None,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def no_local_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGCTL_STATE_DIR", str(tmp_path / "state"))


def run_check(found: Capabilities) -> Capabilities | None:
    settings = ClientSettings(bootstrap=found.bootstrap, timeout_s=1)
    return check(builtin("migrate-online"), settings, read=lambda _: found)


def test_a_policy_read_as_disabled_is_refused_naming_it() -> None:
    with pytest.raises(SetupError) as refused:
        run_check(caps("4.4", "disabled"))
    assert "group.consumer.migration.policy=disabled (read from DescribeConfigs)" in str(
        refused.value
    )


def test_a_policy_not_readable_on_3x_is_said_unknown_not_assumed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: "keeps group.consumer.migration.policy at its Kafka 3.x default, disabled",
    # exit 6, for a broker that may have it set to bidirectional.
    with caplog.at_level(logging.WARNING):
        assert run_check(caps("3.9", None)) is not None
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert "not readable on Kafka 3.9" in said[0]
    assert "group.consumer.migration.policy=bidirectional" in said[0]


def test_an_allowing_policy_runs_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert run_check(caps("3.9", "bidirectional")) is not None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_policy_a_broker_logged_at_its_latest_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-12-02 02:00:00,000] INFO KafkaConfig values: \n"
        "\tgroup.consumer.migration.policy = disabled\n"
        "\tgroup.coordinator.rebalance.protocols = [classic, consumer]\n"
        "[2026-12-02 02:10:00,000] INFO KafkaConfig values: \n"
        "\tgroup.consumer.migration.policy = upgrade\n"
    )
    assert logged_setting([log], "group.consumer.migration.policy") == "upgrade"
    assert logged_setting([log], "group.consumer.max.size") is None
    assert logged_setting([tmp_path / "absent.log"], "group.consumer.migration.policy") is None


def test_3_7_with_kip848_on_serves_the_consumer_protocol_it_cannot_describe() -> None:
    # Seen on 3.7.2: ConsumerGroupHeartbeat advertised with KIP-848 off or on,
    # ConsumerGroupDescribe in neither case; a consumer member worked with it on. Before,
    # `join --group-protocol consumer` was refused there: "advertises the consumer
    # protocol but refuses it (UNSUPPORTED_VERSION)", which it never answered.
    def on_37(protocols: tuple[str, ...] | None) -> Capabilities:
        return Capabilities("b:1", "3.7", {68: (0, 0)}, "absent", protocols, None)

    assert on_37(("classic", "consumer")).consumer_protocol_missing is None
    off = on_37(("classic",)).consumer_protocol_missing
    assert off == "has group.coordinator.rebalance.protocols=classic"
    unread = on_37(None).consumer_protocol_missing
    assert unread is not None and "could not be read" in unread
    assert "UNSUPPORTED_VERSION" not in unread
