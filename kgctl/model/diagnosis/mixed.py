"""Mixed groups (classic members in a consumer-protocol group, and back): which members
spoke which protocol, a change of the group's protocol, classic members assigned late."""

from __future__ import annotations

from collections.abc import Mapping

from kgctl.model.diagnosis.members import MemberConfig
from kgctl.model.event_index import EventIndex
from kgctl.model.reasons import Cause
from kgctl.model.state import (
    GenerationRecord,
)


def assigned_late(
    events: EventIndex, prev: GenerationRecord | None, members: Mapping[str, MemberConfig]
) -> list[str]:
    """Classic members that first joined `prev` with nothing assigned, in a group where a
    member speaks KIP-848: the broker answers their JoinGroup at once and assigns them at
    its next target assignment, which is a new generation nobody else asked for."""
    if prev is None or not any(
        k in members and members[k].group_protocol == "consumer" for k in prev.members
    ):
        return []
    first = {
        e.member
        for e in events.of("RejoinRequested")
        if e.data.get("reason") == "first_join" and e.member
    }
    return sorted(
        {
            e.member
            for e in events.of("JoinCompleted")
            if e.generation == prev.generation
            and e.member in first
            and not e.data.get("assignment")
        }
    )


def consumer_protocol_members(events: EventIndex, g: GenerationRecord) -> list[str]:
    """The generation's members that spoke the consumer protocol (group.protocol=consumer)
    in it, by their latest MemberStarted (a member restarted under its name may speak the
    other)."""

    def started(index: EventIndex) -> list[tuple[int, str, str]]:
        said = [
            (
                e.ts_ms,
                e.member,
                str((e.data.get("config") or {}).get("group_protocol") or "classic"),
            )
            for e in index.of("MemberStarted")
            if e.source in ("member", "wire") and e.member
        ]
        # A client the proxy traced says nothing of its settings: its requests do. Its
        # first ConsumerGroupHeartbeat answered, or its first JoinGroup, from then on.
        named = {member for _, member, _ in said}
        heard: dict[str, tuple[int, str]] = {}
        for e in index.of("GroupHeartbeatAnswered", "JoinGroupSent"):
            who = e.member or e.client_id
            if e.source != "wire" or not who or who in named or who in heard:
                continue
            heard[who] = (e.ts_ms, "consumer" if e.type == "GroupHeartbeatAnswered" else "classic")
        said += [(ts, who, protocol) for who, (ts, protocol) in heard.items()]
        return sorted(said)

    # A member restarted within the rebalance is in the generation too, speaking what it
    # restarted with: the cut is when the generation was stable (or ended), not began.
    cut = g.stable_ms if g.stable_ms is not None else g.end_ms
    said: dict[str, str] = {}
    for ts, member, protocol in events.memo("member protocols", started):
        if cut is None or ts <= cut:
            said[member] = protocol
    return sorted(k for k in g.members if said.get(k) == "consumer")


def describe_protocol_change(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
) -> str:
    """A mixed group that changed protocol between two generations, in words ("" when it
    did not), from the members' own words: which protocol each spoke then (its latest
    MemberStarted before the generation began: a member restarted under its name may
    speak the other) and whether the group had a classic leader (a leader's
    AssignmentComputed, or a classic member's JoinGroup answer naming a leader: a
    consumer-protocol group's names none, its broker assigns)."""
    if prev is None:
        return ""

    answers = events.of("JoinGroupReceived")
    # The traced classic members' own ids, to name a leader that is one of them.
    ids = {str(e.data.get("member_id") or e.member_id): e.member for e in answers if e.member}

    def classic_leader(generation: int) -> str:
        """How the generation is known to have had a classic leader, or ""."""
        for e in events.of("AssignmentComputed"):
            if e.generation == generation and e.member:
                return (
                    f"{e.member} computed this generation's assignment as its classic leader "
                    f"({e.data.get('assignor', '?')})"
                )
        for e in answers:
            leader = str(e.data.get("leader") or "")
            if e.data.get("generation") == generation and leader:
                return (
                    f"{e.member}'s JoinGroup answer named {ids.get(leader, leader)} its leader, "
                    "as only a classic group's does"
                )
        return ""

    before, after = consumer_protocol_members(events, prev), consumer_protocol_members(events, rec)
    leader = classic_leader(rec.generation)
    if before and not after and leader and not classic_leader(prev.generation):
        return (
            f"the group went back to the classic protocol: {', '.join(before)} "
            f"{'was its last member' if len(before) == 1 else 'were its last members'} "
            "with group.protocol=consumer, and with none left the broker converts the group "
            "to classic (group.consumer.migration.policy): a classic leader assigns again, "
            f"where the broker assigned before ({leader})"
        )
    # (not "members new to this generation": a member restarted onto the consumer
    # protocol within one rebalance is in both)
    if after and not before and classic_leader(prev.generation):
        return (
            f"the group became a consumer-protocol group: {', '.join(after)} joined with "
            "group.protocol=consumer, so the broker converted it (group.consumer.migration."
            "policy) and now assigns every member's partitions, classic members' included"
        )
    return ""


def downgrade_leave(events: EventIndex, prev: GenerationRecord | None) -> str:
    """The leave `prev` stored when it took a mixed group back to classic (its record,
    the first classic one after the consumer group's epochs, misses a member the consumer
    group had), in the observer's words; "" when `prev` is no such generation. Kafka
    rebalances the classic group it converts back for a member leaving ("Downgrade group
    … from consumer to classic for member leaving", its log): the generation after it is
    that leave's."""
    if prev is None or prev.cause != Cause.MEMBER_LEFT.value:
        return ""
    way_back = any(
        e.generation == prev.generation and e.data.get("consumer_epochs_between")
        for e in events.of("GenerationChanged")
    )
    return (prev.evidence or "a member left") if way_back else ""
