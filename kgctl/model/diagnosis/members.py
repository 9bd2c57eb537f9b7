"""What each traced member said about itself: its configuration (session timeout,
heartbeat interval, max.poll.interval.ms, group.instance.id, protocols), read once per
diagnosis from its own events and the broker's stored records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgctl.model.diagnosis.types import DEFAULT_HEARTBEAT_MS, STORED, TRACED, SessionFrom
from kgctl.model.event_index import EventIndex
from kgctl.model.event_types import EventType, is_type
from kgctl.model.events import Event


@dataclass
class MemberConfig:
    """A member's configuration and the moments that matter, from its own events."""

    key: str
    session_ms: int | None = None
    session_from: SessionFrom = ""  # TRACED or STORED
    heartbeat_ms: int | None = None
    heartbeat_default: bool = False  # not set: the client's default
    max_poll_ms: int | None = None
    instance_id: str | None = None
    protocol: str = ""  # eager | cooperative, from JoinPrepared
    group_protocol: str = "classic"  # classic | consumer (KIP-848), from MemberStarted
    subscription: tuple[str, ...] = ()


def member_configs(events: EventIndex) -> dict[str, MemberConfig]:
    out: dict[str, MemberConfig] = {}
    ids: dict[str, str] = {}  # member id -> member
    # One pass over every event kept (at 1,000 members, some 200,000): the routine ones
    # only name their member, its id and its group.instance.id.
    for e in events:
        name = e.member
        if not name or e.source not in _TRACED_SOURCES:
            continue
        if e.member_id:
            ids[e.member_id] = name
        m = out.get(name)
        if m is None:
            m = _new_member(out, name)
        if e.type in _CONFIGURING:
            _configure(m, e)
        if e.instance_id:
            m.instance_id = e.instance_id
    for m in out.values():
        if m.session_ms:
            m.session_from = TRACED
    # A traced member whose configuration was not (its MemberStarted is older than what
    # was read): the session timeout the broker stored with its generation.
    for member_id, (session, rebalance) in stored_timeouts(events).items():
        found = out.get(ids.get(member_id, ""))
        if found is not None and not found.session_ms and session > 0:
            found.session_ms, found.session_from = session, STORED
        if found is not None and not found.max_poll_ms and rebalance > 0:
            found.max_poll_ms = rebalance
    return out


_TRACED_SOURCES = frozenset({"member", "wire"})
# The steps that carry a member's configuration.
_CONFIGURING: frozenset[EventType] = frozenset(
    {
        "MemberStarted",
        "JoinGroupSent",
        "JoinPrepared",
        "PollIntervalExceeded",
        "GroupHeartbeatAnswered",
    }
)


def _configure(m: MemberConfig, e: Event) -> None:
    """What one of the member's _CONFIGURING steps says of its configuration."""
    if is_type(e, "MemberStarted"):
        cfg = e.data.get("config") or {}
        client = e.data.get("client") or {}
        m.session_ms = _int_or_none(cfg.get("session_timeout_ms")) or m.session_ms
        # Its option, else its -X setting, else the client's default (a kgctl member's
        # configuration is all in its MemberStarted).
        set_hb = _int_or_none(cfg.get("heartbeat_interval_ms")) or _int_or_none(
            _number_or_text(client.get("heartbeat.interval.ms"))
        )
        m.heartbeat_ms = set_hb or DEFAULT_HEARTBEAT_MS
        m.heartbeat_default = set_hb is None
        m.max_poll_ms = _int_or_none(cfg.get("max_poll_interval_ms")) or m.max_poll_ms
        m.instance_id = cfg.get("instance_id") or m.instance_id
        m.group_protocol = str(cfg.get("group_protocol") or m.group_protocol)
        topics = cfg.get("topics")
        if isinstance(topics, list):
            m.subscription = tuple(sorted(str(t) for t in topics))
    elif is_type(e, "JoinGroupSent"):
        m.session_ms = _int_or_none(e.data.get("session_timeout_ms")) or m.session_ms
        rebalance = _int_or_none(e.data.get("rebalance_timeout_ms"))
        m.max_poll_ms = m.max_poll_ms or rebalance
    elif is_type(e, "JoinPrepared"):
        m.protocol = str(e.data.get("protocol", "") or m.protocol)
    elif is_type(e, "GroupHeartbeatAnswered"):
        m.group_protocol = "consumer"  # only a consumer-protocol member sends these
    elif is_type(e, "PollIntervalExceeded"):
        m.max_poll_ms = _int_or_none(e.data.get("max_poll_interval_ms")) or m.max_poll_ms


def _new_member(out: dict[str, MemberConfig], name: str) -> MemberConfig:
    """A member seen for the first time (not `setdefault`: that made one per event)."""
    m = out[name] = MemberConfig(name)
    return m


def stored_timeouts(events: EventIndex) -> dict[str, tuple[int, int]]:
    """member id -> (session.timeout.ms, rebalance timeout) as the broker stored them with
    each generation in __consumer_offsets (GenerationChanged `stored_in`)."""
    out: dict[str, tuple[int, int]] = {}
    for e in events.of("GenerationChanged"):
        if not e.data.get("stored_in"):
            continue
        for raw in e.data.get("members") or []:
            if not isinstance(raw, Mapping) or not raw.get("member_id"):
                continue
            session = _int_or_none(raw.get("session_timeout_ms")) or -1
            rebalance = _int_or_none(raw.get("rebalance_timeout_ms")) or -1
            if session > 0 or rebalance > 0:
                out[str(raw["member_id"])] = (session, rebalance)
    return out


def _number_or_text(value: Any) -> Any:
    """A client setting's text as a number, when it is one."""
    return int(value) if isinstance(value, str) and value.isdigit() else value


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
