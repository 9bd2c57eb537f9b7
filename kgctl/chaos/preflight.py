"""What a scenario needs of the cluster, checked before anything starts.

A scenario on the consumer protocol (a member, a `--group-protocol consumer` run, either
half of the protocol showdown) needs brokers that serve KIP-848; one that moves a group
between protocols while it runs (migrate-online) also needs
`group.consumer.migration.policy` to allow it. Without the check such a scenario ran for
minutes on a Kafka 3.x broker and blamed an invariant (the audit in
docs/broker.md's support matrix); with it, one line in seconds and exit 6.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from kgctl.adapters.cluster import MIGRATION_POLICY, Capabilities, probe
from kgctl.broker.local import local_broker_logs, logged_setting
from kgctl.chaos.scenario import Scenario
from kgctl.errors import SetupError
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Needs:
    """The group protocols a scenario's runs speak, and whether a group changes
    protocol while it runs."""

    consumer_protocol: bool
    online_migration: bool


def needs(sc: Scenario) -> Needs:
    """Read from the scenario alone: its members, its steps' `protocol:`, and the
    showdown's halves (each is checked before the first runs)."""
    fleet = sc.fleet.protocols
    switched = {str(s.args["protocol"]) for s in sc.steps if s.args.get("protocol")}
    halves = set(sc.protocols) if sc.compare_protocols else set()
    return Needs(
        consumer_protocol="consumer" in fleet | switched | halves,
        online_migration=bool(switched - fleet),
    )


def check(
    sc: Scenario,
    settings: ClientSettings,
    read: Callable[[ClientSettings], Capabilities] = probe,
) -> Capabilities | None:
    """Raise SetupError (exit 6) when the cluster cannot run `sc`; the capabilities read,
    or None when the scenario needs nothing beyond the classic protocol (not asked)."""
    need = needs(sc)
    if not need.consumer_protocol:
        return None
    caps = read(settings)
    what = f"scenario {sc.name}"
    missing = caps.consumer_protocol_missing
    if missing:
        if sc.compare_protocols:
            fix = (
                f"{caps.enable_hint}; or run its classic half alone: kgctl chaos run {sc.name} "
                "--group-protocol classic"
            )
        elif need.online_migration:
            fix = caps.enable_hint
        else:
            fix = f"run it with --group-protocol classic, or {caps.enable_hint}"
        raise SetupError(caps.refusal(what, missing, fix))
    if need.online_migration:
        caps = _policy_from_log(caps)
        unknown = caps.migration_policy_unknown
        if unknown:
            # Not refused on a guess: the broker may have it set. Said before the run,
            # so a migration that then fails has its likely why at the top.
            log.warning(
                "%s: %s; if the group fails with GROUP_ID_NOT_FOUND when it changes "
                "protocol, set %s=bidirectional on the brokers",
                what, unknown, MIGRATION_POLICY,
            )  # fmt: skip
        missing = caps.online_migration_missing
        if missing:
            raise SetupError(
                f"{what} moves a running group between protocols, but the broker at "
                f"{caps.bootstrap} (Kafka {caps.version}) {missing}; set "
                f"{MIGRATION_POLICY}=bidirectional on the brokers (Kafka 4's default)"
            )
    return caps


def _policy_from_log(caps: Capabilities) -> Capabilities:
    """`caps` with the migration policy a local kgctl broker logged at its start, when
    DescribeConfigs did not give it (Kafka 3.x leaves it out: an internal setting)."""
    if caps.migration_policy is not None:
        return caps
    logged = logged_setting(local_broker_logs(caps.bootstrap), MIGRATION_POLICY)
    if logged is None:
        return caps
    return replace(caps, migration_policy=logged.lower(), migration_policy_source="broker log")
