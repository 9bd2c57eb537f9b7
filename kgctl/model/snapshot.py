"""A group as the broker describes it at one instant (DescribeGroups + offsets), as data.

The admin adapter builds these; the observer diffs consecutive ones into events. The
classic DescribeGroups response has no generation id and no leader, and outside the
Stable state it omits subscriptions and assignments: `None` means "not reported".
A KIP-848 `consumer` group comes from ConsumerGroupDescribe instead: it has real epochs
(group, assignment, each member's) and each member's current and target assignment.
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
    # Consumer-protocol (KIP-848) members only; None for classic groups.
    member_epoch: int | None = None
    target: dict[str, list[int]] | None = None  # the assignment it is reconciling towards
    rack: str | None = None
    regex: str | None = None  # a subscription by regular expression
    member_type: str | None = None  # classic | consumer (ConsumerGroupDescribe v1)

    @property
    def reconciling(self) -> bool:
        """Its assignment is not yet its target (a consumer-protocol member)."""
        return self.target is not None and self.target != (self.partitions or {})

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
        if self.member_epoch is not None:
            out["member_epoch"] = self.member_epoch
        if self.target is not None:
            out["target"] = {t: list(ps) for t, ps in self.target.items()}
            out["reconciling"] = self.reconciling
        for name in ("rack", "regex", "member_type"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
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
    group_type: str = ""  # classic | consumer ("" when not known)
    group_epoch: int | None = None  # consumer groups: bumped on every membership change
    assignment_epoch: int | None = None  # the group epoch the target assignment is for

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

    def targets(self) -> dict[tuple[str, int], str]:
        """partition -> member id, from the target assignments (consumer groups)."""
        out: dict[tuple[str, int], str] = {}
        for m in self.members:
            for topic, ids in (m.target or {}).items():
                for pid in ids:
                    out[(topic, pid)] = m.member_id
        return out

    def to_data(self) -> dict[str, Any]:
        """The `data` of a GroupObserved event."""
        epochs: dict[str, Any] = {}
        if self.group_type:
            epochs["group_type"] = self.group_type
        if self.group_epoch is not None:
            epochs["group_epoch"] = self.group_epoch
            epochs["assignment_epoch"] = self.assignment_epoch
        return {
            **epochs,
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
