"""The group settings a cluster enforces on its members (session timeouts, delays).

A member whose session timeout is outside `group.min/max.session.timeout.ms` is refused
with INVALID_SESSION_TIMEOUT, and the first join of an empty classic group waits
`group.initial.rebalance.delay.ms`. Chaos fits a scenario's timings to these bounds
before its fleet starts; explain compares what was waited with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The broker configs read, and the value Kafka 4.x uses when a cluster does not set it.
KAFKA_DEFAULTS: dict[str, int] = {
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.initial.rebalance.delay.ms": 3000,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
}

SOURCE_CLUSTER = "cluster"
SOURCE_DEFAULTS = "kafka-defaults"


@dataclass(frozen=True)
class GroupBounds:
    """The cluster's group settings, and where kgctl learnt them."""

    configs: dict[str, int] = field(default_factory=lambda: dict(KAFKA_DEFAULTS))
    source: str = SOURCE_DEFAULTS  # cluster | kafka-defaults
    note: str = ""  # why the defaults were assumed, when they were

    @classmethod
    def from_configs(cls, raw: dict[str, str | int | None], note: str = "") -> GroupBounds:
        """Bounds from the broker's answer; a key it did not give keeps Kafka's default."""
        configs = dict(KAFKA_DEFAULTS)
        for key in KAFKA_DEFAULTS:
            value = raw.get(key)
            if value is not None and str(value).lstrip("-").isdigit():
                configs[key] = int(value)
        return cls(configs=configs, source=SOURCE_CLUSTER, note=note)

    @classmethod
    def assumed(cls, why: str) -> GroupBounds:
        return cls(source=SOURCE_DEFAULTS, note=why)

    @property
    def min_session_ms(self) -> int:
        return self.configs["group.min.session.timeout.ms"]

    @property
    def max_session_ms(self) -> int:
        return self.configs["group.max.session.timeout.ms"]

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self.configs["group.initial.rebalance.delay.ms"]

    def session_range(self) -> str:
        """`group.min.session.timeout.ms=6000 … group.max.session.timeout.ms=1800000`."""
        return (
            f"group.min.session.timeout.ms={self.min_session_ms} … "
            f"group.max.session.timeout.ms={self.max_session_ms}"
        )

    def origin(self) -> str:
        """How these bounds were learnt, for a message."""
        if self.source == SOURCE_CLUSTER:
            return "read from the cluster"
        return f"Kafka's defaults, assumed: {self.note}" if self.note else "Kafka's defaults"

    def to_dict(self) -> dict[str, object]:
        return {"configs": dict(self.configs), "source": self.source, "note": self.note}
