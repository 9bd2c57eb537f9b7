"""A group as the broker describes it at one instant (DescribeGroups + offsets), as data.

The admin adapter builds these; the observer diffs consecutive ones into events. The
classic DescribeGroups response has no generation id and no leader, and outside the
Stable state it omits subscriptions and assignments: `None` means "not reported".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Broker states in which the group is not moving.
SETTLED_STATES = frozenset({"Stable", "Empty"})


@dataclass(frozen=True)
class MemberSnapshot:
    """One member in a DescribeGroups response."""

    member_id: str
    client_id: str = ""
    host: str = ""
    instance_id: str | None = None
    subscription: tuple[str, ...] | None = None
    partitions: dict[str, list[int]] | None = None

    @property
    def label(self) -> str:
        """client id and host, enough for a person to recognise the process."""
        who = self.client_id or self.member_id
        extra = f" ({self.instance_id})" if self.instance_id else ""
        return f"{who}@{self.host.lstrip('/')}{extra}" if self.host else f"{who}{extra}"

    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "member_id": self.member_id,
            "client_id": self.client_id,
            "host": self.host,
            "instance_id": self.instance_id,
        }
        if self.subscription is not None:
            out["subscription"] = list(self.subscription)
        if self.partitions is not None:
            out["partitions"] = {t: list(ps) for t, ps in self.partitions.items()}
        return out


@dataclass(frozen=True)
class GroupSnapshot:
    """One DescribeGroups answer for one group, with lag when it could be computed."""

    group: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    coordinator: str = ""
    members: tuple[MemberSnapshot, ...] = ()
    lag: dict[str, dict[int, int]] | None = None  # topic -> partition -> lag
    missing: bool = False

    @property
    def settled(self) -> bool:
        return self.state in SETTLED_STATES

    @property
    def total_lag(self) -> int | None:
        if self.lag is None:
            return None
        return sum(v for parts in self.lag.values() for v in parts.values())

    def member_ids(self) -> set[str]:
        return {m.member_id for m in self.members}

    def owners(self) -> dict[tuple[str, int], str]:
        """partition -> member id, from the reported assignments."""
        out: dict[tuple[str, int], str] = {}
        for m in self.members:
            for topic, ids in (m.partitions or {}).items():
                for pid in ids:
                    out[(topic, pid)] = m.member_id
        return out

    def to_data(self) -> dict[str, Any]:
        """The `data` of a GroupObserved event."""
        return {
            "state": self.state,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "coordinator": self.coordinator,
            "missing": self.missing,
            "members": [m.to_data() for m in self.members],
            "lag": None
            if self.lag is None
            else {t: {str(p): v for p, v in sorted(ps.items())} for t, ps in self.lag.items()},
            "total_lag": self.total_lag,
        }


@dataclass(frozen=True)
class GroupListing:
    """One line of `kgctl watch` without a group."""

    group: str
    state: str
    protocol_type: str = ""
    group_type: str = ""
    members: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
