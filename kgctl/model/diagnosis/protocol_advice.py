"""Advice about the rebalance protocol itself: cooperative-sticky for eager members (re-run
with the cooperative assignor, or read from the broker's assignment in a mixed group)
and the consumer protocol (KIP-848) for a classic group's stop-the-world."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kgctl.model.diagnosis.members import MemberConfig
from kgctl.model.diagnosis.mixed import consumer_protocol_members
from kgctl.model.diagnosis.types import (
    WAIT_DEAD,
    WAIT_PROCESSING,
    WAIT_RESTARTING,
    Advice,
    AssignmentInput,
    Context,
    Cost,
    Wait,
)
from kgctl.model.event_index import EventIndex
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
    TopicPartition,
    owned_from,
    owned_pairs,
)
from kgctl.model.timeline import Move, owners_at, plural


def _prepared_owned(
    events: EventIndex, since: int, until: int
) -> dict[str, tuple[TopicPartition, ...]]:
    """Each member's partitions as it prepared to join (JoinPrepared `owned`)."""
    out: dict[str, tuple[TopicPartition, ...]] = {}
    for e in events.of("JoinPrepared", since=since, until=until):
        if e.member:
            raw = e.data.get("owned") or {}
            if isinstance(raw, dict):
                out[e.member] = tuple(
                    sorted((str(t), int(p)) for t, ids in raw.items() for p in ids)
                )
    return out


def advise_cooperative(
    events: EventIndex,
    since: int,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, MemberConfig],
    ctx: Context,
    revoked: int,
    now_ms: int,
) -> list[Advice]:
    speakers = consumer_protocol_members(events, rec)
    # (a member's `protocol` is its last JoinPrepared's: one restarted onto the consumer
    # protocol still carries its classic life's)
    eager = [
        k
        for k in rec.members
        if k in members and members[k].protocol == "eager" and k not in speakers
    ]
    if not eager or prev is None or revoked == 0:
        return []
    if speakers or (state.group_type == "consumer" and rec.end_ms is None):
        return _advise_cooperative_classic_members(events, since, rec, prev, eager, now_ms)
    if ctx.cooperative is None:
        return []
    after_t = rec.stable_ms if rec.stable_ms is not None else now_ms
    after = owners_at(state, after_t)
    partitions: dict[str, int] = {}
    for (topic, p), who in after.items():
        if who:  # owners() lists every partition ever owned, later ones included
            partitions[topic] = max(partitions.get(topic, 0), p + 1)
    subs = {k: members[k].subscription or tuple(sorted(partitions)) for k in rec.members}
    owned = _owned_before(events, since, state, rec, prev)
    for held in owned.values():
        for topic, p in held:
            partitions[topic] = max(partitions.get(topic, 0), p + 1)
    plan = ctx.cooperative(
        AssignmentInput(subs, {k: tuple(sorted(v)) for k, v in owned.items()}, partitions)
    )
    moving = sum(1 for k, tps in owned.items() for tp in tps if tp not in set(plan.get(k, ())))
    if moving >= revoked:
        return []
    return [
        Advice(
            pattern="eager-stop-the-world",
            setting="partition.assignment.strategy",
            value="cooperative-sticky",
            text=f"the eager protocol revoked {plural(revoked, 'partition')} from members "
            "that stayed; "
            f"cooperative-sticky, re-run on this generation's members and subscriptions, "
            f"would have revoked {moving} and left the others consuming; {SWITCH_TO_COOPERATIVE}",
        )
    ]


# How a running group moves from an eager assignor to cooperative-sticky depends on the
# client: Java's KIP-429 upgrade takes two rolling restarts through a list of both;
# librdkafka refuses a list that mixes cooperative and eager assignors (seen by the
# client-truth audit with confluent-kafka 2.x), so its members all restart at once.
SWITCH_TO_COOPERATIVE = (
    "to switch a running group, Java clients take two rolling restarts (first "
    "partition.assignment.strategy=cooperative-sticky,range, then cooperative-sticky alone); "
    "librdkafka refuses a list that mixes the two, so its members all restart with "
    "cooperative-sticky"
)


def _owned_before(
    events: EventIndex,
    since: int,
    state: GroupState,
    rec: GenerationRecord,
    prev: GenerationRecord,
) -> dict[str, list[TopicPartition]]:
    """What each member of `rec` owned as the rebalance began: its own words when it
    prepared to join, else the owners when the previous generation was stable."""
    owned: dict[str, list[TopicPartition]] = {k: [] for k in rec.members}
    prepared = _prepared_owned(events, since, rec.sync_ms or rec.start_ms)
    before_t = prev.stable_ms if prev.stable_ms is not None else rec.start_ms - 1
    for tp, who in owners_at(state, min(before_t, rec.start_ms - 1)).items():
        for k in who:
            if k in owned and k not in prepared:
                owned[k].append(tp)
    for k, claimed in prepared.items():
        if k in owned:
            owned[k] = list(claimed)
    return owned


def _advise_cooperative_classic_members(
    events: EventIndex,
    since: int,
    rec: GenerationRecord,
    prev: GenerationRecord,
    eager: list[str],
    now_ms: int,
) -> list[Advice]:
    """Eager classic members of a consumer-protocol group (a mixed group): the broker
    assigns, so re-running a client assignor says nothing of it. Each eager member gave
    up all it held; a cooperative one gives up only what the broker's new assignment
    takes from it (taken as the one it was given here: the broker computes its target
    from the assignments it gave, not from what a member let go of)."""
    # Each one's own words: what it held when it prepared to join, and what the
    # generation gave it (its JoinCompleted). There is no barrier: each prepares when
    # its heartbeat hears of the rebalance, after the generation's own start.
    until = rec.end_ms if rec.end_ms is not None else now_ms
    given: dict[str, frozenset[TopicPartition]] = {}
    completed: dict[str, int] = {}
    for e in events.of("JoinCompleted", since=rec.start_ms, until=until):
        if e.member in eager and e.generation == rec.generation:
            given[e.member] = owned_pairs(owned_from(e.data.get("assignment")))
            completed[e.member] = e.ts_ms
    owned: dict[str, frozenset[TopicPartition]] = {}
    for e in events.of("JoinPrepared", since=since, until=until):
        if e.member in completed and e.ts_ms <= completed[e.member]:
            owned[e.member] = owned_pairs(owned_from(e.data.get("owned")))
    stayed = [k for k in eager if k in prev.members and owned.get(k)]
    held = sum(len(owned[k]) for k in stayed)
    moving = sum(1 for k in stayed for tp in owned[k] if tp not in given[k])
    if not held or moving >= held:
        return []
    one = len(stayed) == 1
    gave = f"gave up all {plural(held, 'partition')}" if held > 1 else "gave up the partition"
    who = (
        f"{stayed[0]} (a classic member, eager protocol) {gave} it held"
        if one
        else f"{', '.join(stayed)} (classic members, eager protocol) {gave} they held"
    )
    back = "every one" if moving == 0 else f"all but {moving}"
    kept = "kept them all" if moving == 0 else f"given up only {moving}"
    return [
        Advice(
            pattern="eager-stop-the-world",
            setting="partition.assignment.strategy",
            value="cooperative-sticky",
            text=f"{who}; the broker, which assigns this consumer-protocol group, gave "
            f"{'it' if one else 'them'} back {back}: with cooperative-sticky "
            f"{'it' if one else 'they'} would have {kept} (inferred: the broker's assignment "
            "taken as it would have been with a cooperative member)",
        )
    ]


def advise_consumer_protocol(
    state: GroupState,
    waits: Sequence[Wait],
    costs: Sequence[Cost],
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    moved: Sequence[Move],
    revoked: int,
) -> list[Advice]:
    """A classic group whose rebalance stopped members that stayed: the consumer protocol
    (KIP-848) has no join barrier and no stop-the-world; each member is reconciled on its
    own heartbeats and only the partitions that move pause."""
    if state.group_type == "consumer" or (state.group_epoch or -1) >= 0 or prev is None:
        return []
    if state.protocol_type not in ("", "consumer"):
        return []  # a Connect or other classic protocol: no KIP-848 equivalent
    stayed = {k for k in rec.members if k in prev.members}
    named = {state.members[k].name if k in state.members else k for k in stayed}
    idle = {c.member: c.unassigned_ms for c in costs if c.member in named and c.unassigned_ms}
    held = sum(
        w.ms
        for w in waits
        if w.phase == "join" and w.why in (WAIT_DEAD, WAIT_PROCESSING, WAIT_RESTARTING)
    )
    if held <= 1000 and sum(idle.values()) <= 1000:
        return []
    owned = len(owners_at(state, rec.stable_ms or rec.start_ms))
    # Only a partition taken from a live owner pauses (revoked, then assigned); a new
    # partition is assigned at once, a dead member's waits for its session either way.
    handed = sum(1 for m in moved if set(m.before) & stayed)
    stopped = ", ".join(f"{k} {v / 1000:.1f}s" for k, v in sorted(idle.items()))
    waited = ", ".join(dict.fromkeys(w.member for w in waits if w.phase == "join"))
    text = (
        "with group.protocol=consumer (KIP-848, brokers 4.0+) there is no join barrier "
        "and no stop-the-world: each member is reconciled on its own heartbeats"
    )
    if stopped:
        text += f"; here the members that stayed went without partitions ({stopped})"
    if revoked:
        text += f" and gave up {plural(revoked, 'partition')}"
    text += (
        f", where only the {handed} taken from one of them would have paused"
        if handed
        else ", where none of theirs would have paused"
    )
    if owned:
        text += f" (of {plural(owned, 'partition')})"
    if waited and held > 1000:
        text += (
            f"; the {held / 1000:.1f}s the join waited for {waited} would not have held "
            "the others (a dead member's own partitions still wait for its session "
            "timeout, group.consumer.session.timeout.ms on the broker)"
        )
    return [Advice(pattern="kip-848", setting="group.protocol", value="consumer", text=text)]
