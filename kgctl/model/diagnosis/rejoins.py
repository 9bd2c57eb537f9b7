"""A rejoin the broker answered without a rebalance. A member of a stable classic group
that sends JoinGroup again with its member id and unchanged metadata (not the leader) is
handed the generation it has: no rebalance begins. kafka-python does so right after a join
it finished outside poll(); any client does when it rejoins on an error of its own (a
heartbeat answered REBALANCE_IN_PROGRESS by kgctl proxy). It starts nothing, but an eager
member revoked everything it owned before it sent that JoinGroup, and got it back.

Such a rejoin falls between two rebalances, and belongs to the one it is nearer: one
soon after a rebalance is its aftermath (a member that saw the change late: librdkafka
rejoins once more when its metadata shows the grown topic after it joined, kafka-python
after a join it finished outside poll()), one soon before the next is that one's first
step (a heartbeat error that reached one member first). The gap is split half way; with
no rebalance after it, the gap is the last one's."""

from __future__ import annotations

from kgctl.model.event_index import EventIndex
from kgctl.model.events import Event
from kgctl.model.state import GenerationRecord, GroupState


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


def aftermath(state: GroupState, rec: GenerationRecord, now_ms: int) -> tuple[int, int] | None:
    """The window (since, until] after `rec`'s rebalance whose rejoins answered with its
    generation are that rebalance's: from when it was stable half way to the next
    rebalance's start (to `now_ms` when none began). None when it was never stable."""
    if rec.stable_ms is None or rec not in state.generations:
        return None
    i = state.generations.index(rec)
    nxt = state.generations[i + 1] if i + 1 < len(state.generations) else None
    if nxt is None:
        return rec.stable_ms, max(rec.stable_ms, now_ms)
    return rec.stable_ms, max(rec.stable_ms, (rec.stable_ms + nxt.start_ms) // 2)


def lead_up_since(state: GroupState, prev: GenerationRecord, now_ms: int) -> int:
    """Since when (exclusive) the rejoins answered with `prev`'s generation are the next
    rebalance's: the end of `prev`'s aftermath (else its start, never stable)."""
    after = aftermath(state, prev, now_ms)
    if after is not None:
        return after[1]
    return prev.stable_ms if prev.stable_ms is not None else prev.start_ms
