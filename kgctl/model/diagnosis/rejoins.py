"""A rejoin the broker answered without a rebalance. A member of a stable classic group
that sends JoinGroup again with its member id and unchanged metadata (not the leader) is
handed the generation it has: no rebalance begins. kafka-python does so right after a join
it finished outside poll(); any client does when it rejoins on an error of its own (a
heartbeat answered REBALANCE_IN_PROGRESS by kgctl proxy). It starts nothing, but an eager
member revoked everything it owned before it sent that JoinGroup, and got it back."""

from __future__ import annotations

from kgctl.model.event_index import EventIndex
from kgctl.model.events import Event


def answered_unchanged(events: EventIndex, sent: Event, generation: int | None) -> bool:
    """Whether JoinGroup `sent` (the wire's JoinGroupSent) got, as its member's next
    JoinGroup answer, the generation `generation` the group was in."""
    if generation is None or sent.source != "wire":
        return False
    for e in events.by(sent.member, since=sent.ts_ms - 1):
        if e.type == "JoinGroupReceived" and e.source == "wire" and e.ts_ms >= sent.ts_ms:
            return e.data.get("error") in ("", "NONE") and e.data.get("generation") == generation
    return False


def unchanged_rejoins(
    events: EventIndex, member: str, since: int, until: int, generation: int
) -> list[Event]:
    """The JoinGroups `member` sent in since < ts <= until that the broker answered with
    `generation` unchanged."""
    return [
        e
        for e in events.by(member, since=since, until=until)
        if e.type == "JoinGroupSent"
        and e.data.get("member_id")
        and answered_unchanged(events, e, generation)
    ]
