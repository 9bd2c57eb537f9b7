"""What a consumer-protocol (KIP-848) member's ConsumerGroupHeartbeat, as the proxy saw it
and kgctl/model/wire.py read it, says started a rebalance: a heartbeat with member epoch
0 is a join (a new member, or one back after a leave or a fencing), which bumps the
group epoch. A leave (epoch -1) reads as the LeaveGroupSent it stands for."""

from __future__ import annotations

from dataclasses import replace

from kgctl.model.diagnosis.types import EXACT, INFERRED, Diagnosis, Trigger
from kgctl.model.event_index import EventIndex
from kgctl.model.events import Event
from kgctl.model.reasons import Cause
from kgctl.model.state import GenerationRecord


def wire_group_join(e: Event, who: str, src: str) -> list[Trigger]:
    """A traced ConsumerGroupHeartbeat that joined (sent member epoch 0) and was answered."""
    sent = e.data.get("sent")
    if not isinstance(sent, dict) or sent.get("member_epoch") != 0:
        return []
    if e.data.get("error") not in (None, "", "NONE"):
        return []
    who = e.member or e.client_id or who
    return [
        Trigger(
            cause=Cause.MEMBER_JOINED,
            who=who,
            reason="",
            confidence=EXACT,
            evidence=f"wire: {who}'s ConsumerGroupHeartbeat with member epoch 0 (a join), "
            f"answered epoch {e.data.get('member_epoch')}",
            at_ms=e.ts_ms,
        )
    ]


def read_epochs(
    d: Diagnosis,
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
) -> Diagnosis:
    """A consumer group's epoch as its members' heartbeats on the wire tell it: a join
    answered with the old epoch started this one; a leave by a member that later joined
    again with the same member id was its application's (max.poll.interval.ms)."""
    if prev is None:
        return d
    t = d.trigger
    if t.cause == Cause.UNKNOWN:
        joined = _joined_at_old_epoch(events, rec, prev)
        if joined is not None:
            return replace(d, trigger=joined, notes=_without_inferred_note(d.notes))
    if t.cause == Cause.MEMBER_LEFT and t.confidence == EXACT and _WIRE_LEAVE in t.reason:
        back = _joined_again(events, t)
        if back is not None:
            return replace(d, trigger=back)
    return d


# The words kgctl/model/wire.py gives a leave it read from a ConsumerGroupHeartbeat.
_WIRE_LEAVE = "ConsumerGroupHeartbeat with member epoch -1"


def _joined_at_old_epoch(
    events: EventIndex, rec: GenerationRecord, prev: GenerationRecord
) -> Trigger | None:
    """A member joined while `prev` was the group's epoch and was answered it: the broker
    bumped the group epoch for the join (to `rec`), the others learn it later."""
    for e in events.of("GroupHeartbeatAnswered", since=prev.start_ms, until=rec.start_ms):
        sent = e.data.get("sent")
        if e.source != "wire" or not isinstance(sent, dict) or sent.get("member_epoch") != 0:
            continue
        if e.data.get("member_epoch") != prev.generation:
            continue
        for t in wire_group_join(e, e.member or e.client_id, "wire"):
            return replace(
                t,
                evidence=f"{t.evidence}, the epoch then: the broker bumped the group epoch "
                f"to {rec.generation} for the join",
            )
    return None


def _joined_again(events: EventIndex, left: Trigger) -> Trigger | None:
    """The member that left joined again later, with the same member id (a client keeps
    its member id for its life): it left on its own and came back."""
    ids = {e.member_id for e in events.of("LeaveGroupSent", since=left.at_ms - 1, until=left.at_ms)
           if (e.member or e.client_id) == left.who and e.member_id}  # fmt: skip
    for e in events.of("GroupHeartbeatAnswered", since=left.at_ms):
        sent = e.data.get("sent")
        if e.member_id in ids and isinstance(sent, dict) and sent.get("member_epoch") == 0:
            gap = (e.ts_ms - left.at_ms) / 1000
            return Trigger(
                cause=Cause.TIMED_OUT,
                who=left.who,
                reason="left and joined again with the same member id",
                confidence=INFERRED,
                evidence=f"wire: {left.who} left (its {_WIRE_LEAVE}) and joined again with "
                f"the same member id {gap:.1f}s later: a client does so when its "
                "application did not poll within max.poll.interval.ms (the wire does not "
                "say why it left)",
                at_ms=left.at_ms,
            )
    return None


def _without_inferred_note(notes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in notes if not n.startswith("kgctl infers this trigger"))
