"""Cluster-level calls through kafka-python: is it up, which brokers answer, and what
its brokers can do (`probe`: the group protocols they serve, read once before a command
that needs one)."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from kafka.admin import ConfigResource, ConfigResourceType

from kgctl.adapters import clients
from kgctl.adapters.kip848 import request
from kgctl.errors import KgctlError
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


def describe_cluster(settings: ClientSettings) -> dict[str, Any]:
    """The cluster id, controller and live brokers, or raise a kgctl error."""
    # Asked again and again while a broker starts: kafka-python's retry logs would only
    # repeat what the caller reports itself.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    timeout_ms = min(settings.kafka_config()["request_timeout_ms"], 5000)
    admin = clients.admin(settings, "kgctl-cluster-check", request_timeout_ms=timeout_ms)
    try:
        return dict(admin.describe_cluster())
    finally:
        admin.close()


# -- what the cluster can do ------------------------------------------------------------

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
UNSUPPORTED_VERSION = 35
GROUP_ID_NOT_FOUND = 69
REBALANCE_PROTOCOLS = "group.coordinator.rebalance.protocols"
MIGRATION_POLICY = "group.consumer.migration.policy"

# absent: not in ApiVersions (3.7 without KIP-848); off: advertised but each group is
# answered with UNSUPPORTED_VERSION (3.8/3.9 with KIP-848 off, ZooKeeper mode);
# answers: a real answer (GROUP_ID_NOT_FOUND for a name no group has).
DescribeSupport = Literal["absent", "off", "answers"]
# Where a broker setting was read: DescribeConfigs, or the "KafkaConfig values:" block a
# local kgctl broker logged at its start (3.x's internal settings are only there).
SettingSource = Literal["DescribeConfigs", "broker log"]


@dataclass(frozen=True)
class Capabilities:
    """What one cluster's brokers serve, read once before a command that needs it."""

    bootstrap: str
    version: str  # "3.9": the newest Kafka release whose ApiVersions the broker matches
    api_versions: dict[int, tuple[int, int]]
    consumer_group_describe: DescribeSupport
    rebalance_protocols: tuple[str, ...] | None  # None: DescribeConfigs not readable
    migration_policy: str | None  # None: not known (see migration_policy_source)
    migration_policy_source: SettingSource | None = None

    @property
    def consumer_protocol_missing(self) -> str | None:
        """Why this broker cannot serve KIP-848's consumer protocol, or None if it can."""
        if CONSUMER_GROUP_HEARTBEAT not in self.api_versions:
            return "has no ConsumerGroupHeartbeat (KIP-848)"
        if self.rebalance_protocols is not None and "consumer" not in self.rebalance_protocols:
            return f"has {REBALANCE_PROTOCOLS}={','.join(self.rebalance_protocols)}"
        if self.consumer_group_describe == "off":
            # Advertised, but each group is refused: KIP-848 off (or ZooKeeper mode).
            return "advertises the consumer protocol but refuses it (UNSUPPORTED_VERSION)"
        if self.consumer_group_describe == "absent" and self.rebalance_protocols is None:
            # 3.7 advertises ConsumerGroupHeartbeat whether or not KIP-848 is on, and
            # ConsumerGroupDescribe in neither case: only its settings tell.
            return (
                "has ConsumerGroupHeartbeat but no ConsumerGroupDescribe, and its "
                f"{REBALANCE_PROTOCOLS} could not be read (DescribeConfigs)"
            )
        return None

    @property
    def online_migration_missing(self) -> str | None:
        """Why a classic group cannot move to the consumer protocol while it runs
        (KIP-848's online migration), or None if it can or the policy is not known
        (`migration_policy_unknown`): never assumed from the version."""
        missing = self.consumer_protocol_missing
        if missing:
            return missing
        if self.migration_policy is not None and self.migration_policy not in (
            "upgrade",
            "bidirectional",
        ):
            where = {"DescribeConfigs": "DescribeConfigs", "broker log": "its log"}
            read = where.get(self.migration_policy_source or "", "its settings")
            return f"has {MIGRATION_POLICY}={self.migration_policy} (read from {read})"
        return None

    @property
    def migration_policy_unknown(self) -> str | None:
        """Why the online migration policy could not be read, or None when it was."""
        if self.migration_policy is not None or self.consumer_protocol_missing:
            return None
        if self.version.startswith(("3.", "2.")):
            # Seen on 3.7.2 and 3.9.1: an internal setting there, left out of
            # DescribeConfigs' answer; its 3.x default is disabled.
            return (
                f"{MIGRATION_POLICY} is not readable on Kafka {self.version} (an internal "
                "setting there; its 3.x default, disabled, refuses online migration)"
            )
        return f"{MIGRATION_POLICY} was not readable (DescribeConfigs of the broker)"

    def refusal(self, what: str, missing: str, fix: str) -> str:
        """One line: what cannot run, on which broker and version, and what to do."""
        return (
            f"{what} needs the consumer protocol, but the broker at {self.bootstrap} "
            f"(Kafka {self.version}, from its ApiVersions) {missing}; {fix}"
        )

    @property
    def enable_hint(self) -> str:
        """The broker setting that would serve the consumer protocol."""
        if self.version.startswith(("0.", "1.", "2.")) or self.version in ("3.5", "3.6"):
            return "upgrade the broker to Kafka 4.0+ (3.7+ as early access, KRaft only)"
        return (
            f"set {REBALANCE_PROTOCOLS}=classic,consumer on a KRaft broker (preview "
            "before Kafka 4.0, where it is on by default)"
        )


def probe(settings: ClientSettings) -> Capabilities:
    """ApiVersions, one ConsumerGroupDescribe of a name no group has, and the broker
    settings DescribeConfigs lets us read: seconds, and nothing created."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    timeout_ms = min(settings.kafka_config()["request_timeout_ms"], 10000)
    try:
        admin = clients.admin(settings, "kgctl-capabilities", request_timeout_ms=timeout_ms)
    except KgctlError:
        raise
    except Exception as exc:
        raise clients.translate(exc, settings) from exc
    try:
        versions = clients.api_versions(admin)
        found = admin._manager.broker_version
        version = ".".join(str(p) for p in found[:2]) if found else "unknown"
        describe: DescribeSupport = "absent"
        if CONSUMER_GROUP_DESCRIBE in versions:
            describe = _probe_describe(admin)
        protocols, policy = _read_group_configs(admin)
    finally:
        admin.close()
    return Capabilities(
        settings.bootstrap, version, versions, describe, protocols, policy,
        "DescribeConfigs" if policy is not None else None,
    )  # fmt: skip


def _probe_describe(admin: Any) -> DescribeSupport:
    async def ask() -> Any:
        name = f"kgctl-probe-{uuid.uuid4().hex[:12]}"
        coordinator = await admin._find_coordinator_id(name)
        return await admin._manager.send(request(name), node_id=coordinator)

    # A fresh cluster's first FindCoordinator creates __consumer_offsets and answers
    # COORDINATOR_NOT_AVAILABLE until it is loaded: asked again, briefly.
    for attempt in range(10):
        try:
            response = admin._manager.run(ask)
            code = int(response.groups[0].error_code)
        except Exception as exc:
            if clients.retriable(exc) and attempt < 9:
                time.sleep(0.5)
                continue
            log.debug("ConsumerGroupDescribe probe failed", exc_info=True)
            return "absent"  # e.g. IncompatibleBrokerVersion: as good as absent
        if code in (14, 15) and attempt < 9:  # COORDINATOR_LOAD_IN_PROGRESS, NOT_AVAILABLE
            time.sleep(0.5)
            continue
        break
    return "off" if code == UNSUPPORTED_VERSION else "answers"


def _read_group_configs(admin: Any) -> tuple[tuple[str, ...] | None, str | None]:
    try:
        node = str(admin.describe_cluster()["brokers"][0]["broker_id"])
        wanted = {REBALANCE_PROTOCOLS: None, MIGRATION_POLICY: None}
        got = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, node, configs=wanted)],
            config_filter="all",
        )
        configs = got["broker"][node]
    except Exception:  # not authorized (DescribeConfigs on the cluster): say nothing
        log.debug("DescribeConfigs of the group settings failed", exc_info=True)
        return None, None
    protocols = configs.get(REBALANCE_PROTOCOLS, {}).get("value")
    policy = configs.get(MIGRATION_POLICY, {}).get("value")
    return (
        tuple(p.strip().lower() for p in protocols.split(",") if p.strip())
        if isinstance(protocols, str)
        else None,
        policy.lower() if isinstance(policy, str) else None,
    )
