"""Members that stopped and came back under the same name (`Restart`), and static members
whose group.instance.id another process took (`Replacement`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kgctl.model.diagnosis.members import MemberConfig, member_configs
from kgctl.model.diagnosis.trigger import InstanceHolders, instance_id_of, member_id_of
from kgctl.model.diagnosis.types import FENCED, START_SLACK_MS
from kgctl.model.event_index import EventIndex, index
from kgctl.model.event_types import is_type
from kgctl.model.events import Event
from kgctl.model.state import (
    GroupState,
)
from kgctl.model.timeline import utc_clock as _clock


@dataclass(frozen=True)
class Restart:
    """A member that stopped and came back under the same name."""

    member: str
    stopped_ms: int
    back_ms: int  # its first JoinGroup after starting again
    static: bool
    session_timeout_ms: int | None = None
    rebalanced: bool = True  # a new generation began while it was away

    @property
    def down_ms(self) -> int:
        return self.back_ms - self.stopped_ms

    def text(self) -> str:
        kind = "static" if self.static else "dynamic"
        within = ""
        if self.session_timeout_ms:
            side = "within" if self.down_ms < self.session_timeout_ms else "beyond"
            within = f", {side} session.timeout.ms={self.session_timeout_ms}"
        outcome = "the group rebalanced" if self.rebalanced else "no rebalance"
        return f"{self.member} ({kind}) was away {self.down_ms / 1000:.1f}s{within}: {outcome}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "stopped_ms": self.stopped_ms,
            "back_ms": self.back_ms,
            "down_ms": self.down_ms,
            "static": self.static,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalanced": self.rebalanced,
        }


def restarts(state: GroupState, events: Sequence[Event]) -> tuple[Restart, ...]:
    """Every member that stopped (or left) and joined again under the same name: from
    the stop to its first JoinGroup after starting, and whether the group rebalanced for
    it (the generation it came back to is newer than the one it left, or a generation
    began while it was away)."""
    ordered = index(events)
    return indexed_restarts(state, ordered, member_configs(ordered))


def indexed_restarts(
    state: GroupState, ordered: EventIndex, members: Mapping[str, MemberConfig]
) -> tuple[Restart, ...]:
    """`restarts` of events already in time order, their members already read."""
    out = []
    for member, t0, back, gen_before in _comebacks(ordered):
        info = members.get(member)
        after = _generation_after(ordered, member, back)
        began = any(t0 <= g.start_ms <= back.ts_ms + START_SLACK_MS for g in state.generations)
        rebalanced = began or (after is not None and gen_before is not None and after > gen_before)
        out.append(
            Restart(
                member,
                t0,
                back.ts_ms,
                bool(back.instance_id or (info and info.instance_id)),
                info.session_ms if info else None,
                rebalanced,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Replacement:
    """A second process that took a static member's group.instance.id while the first
    still held it (the broker handed the identity over; the first, if still running, was
    fenced with FENCED_INSTANCE_ID)."""

    instance_id: str
    old: str
    new: str
    at_ms: int  # the newcomer's JoinGroup
    fenced_ms: int | None = None  # when the old one was told FENCED_INSTANCE_ID
    rebalanced: bool = False  # a rebalance began with it
    old_member_id: str = ""

    def text(self) -> str:
        # Two processes of one name (the same client id) are told apart by member id.
        old = self.old if self.old != self.new else f"the first (member id {self.old_member_id})"
        new = self.new if self.old != self.new else f"a second process of {self.new}"
        fenced = (
            f"; {self.old if self.old != self.new else 'it'} was fenced (FENCED_INSTANCE_ID)"
            f" at {_clock(self.fenced_ms)}"
            if self.fenced_ms is not None
            else ""
        )
        outcome = "the group rebalanced" if self.rebalanced else "no rebalance"
        return (
            f"{new} took group.instance.id {self.instance_id} from {old} at "
            f"{_clock(self.at_ms)}{fenced}: {outcome}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "old": self.old,
            "new": self.new,
            "at_ms": self.at_ms,
            "fenced_ms": self.fenced_ms,
            "rebalanced": self.rebalanced,
            "old_member_id": self.old_member_id,
        }


def replacements(state: GroupState, events: Sequence[Event]) -> tuple[Replacement, ...]:
    """Every static member whose group.instance.id another process took (a process of
    another name: one of the same name restarting is a `Restart`)."""
    ordered = sorted(events, key=lambda e: e.ts_ms)
    holders = InstanceHolders()
    out = []
    for e in ordered:
        iid = instance_id_of(e)
        if not iid or e.source not in ("member", "wire"):
            continue
        who = e.member or e.client_id
        member_id = member_id_of(e)
        joining = is_type(e, "JoinGroupSent") and not member_id
        held = holders.before_join(iid, e) if joining else None
        if held is not None:
            old, old_id = held
            # A process of the same name is a second one, not a restart, when its
            # predecessor was told FENCED_INSTANCE_ID after it joined (on the wire, two
            # processes of one application often share the client id: only their member
            # ids tell them apart).
            fenced = next(
                (
                    x.ts_ms
                    for x in ordered
                    if x.ts_ms >= e.ts_ms
                    and x.data.get("error") == FENCED
                    and (x.member == old if old != who else member_id_of(x) == old_id)
                ),
                None,
            )
            if old != who or fenced is not None:
                began = any(abs(g.start_ms - e.ts_ms) <= START_SLACK_MS for g in state.generations)
                out.append(Replacement(iid, old, who, e.ts_ms, fenced, began, old_id))
        elif member_id:
            holders.hold(iid, who or member_id, member_id)
    return tuple(out)


def _comebacks(ordered: EventIndex) -> list[tuple[str, int, Event, int | None]]:
    """(member, when it stopped, its first JoinGroup back, its generation when it stopped)."""
    stopped: dict[str, tuple[int, int | None]] = {}
    generation: dict[str, int] = {}
    started: set[str] = set()
    out = []
    # Only these types count below.
    for e in ordered.of(
        "JoinCompleted", "MemberStopped", "LeaveGroupSent", "MemberStarted", "JoinGroupSent"
    ):
        if e.source != "member" or not e.member:
            continue
        if is_type(e, "JoinCompleted"):
            generation[e.member] = int(e.data.get("generation", e.generation) or -1)
        if is_type(e, "MemberStopped", "LeaveGroupSent"):
            stopped.setdefault(e.member, (e.ts_ms, generation.get(e.member)))
            started.discard(e.member)
        elif is_type(e, "MemberStarted") and e.member in stopped:
            started.add(e.member)
        elif is_type(e, "JoinGroupSent") and e.member in started:
            t0, gen = stopped.pop(e.member)
            started.discard(e.member)
            out.append((e.member, t0, e, gen))
    return out


def _generation_after(ordered: EventIndex, member: str, back: Event) -> int | None:
    """The generation `member` completed first after coming back."""
    for e in ordered.by(member, since=back.ts_ms - 1):
        if is_type(e, "JoinCompleted"):
            return int(e.data.get("generation", e.generation) or -1)
    return None
