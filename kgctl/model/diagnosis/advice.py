"""The settings that would have avoided or shortened a rebalance, measured on the
member's own events: a dead member's session, a long batch's max.poll.records, a
dynamic restart's group.instance.id, a replaced static member's assignors, a rejoin loop."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kgctl.model.bounds import KAFKA_DEFAULTS
from kgctl.model.diagnosis.members import MemberConfig
from kgctl.model.diagnosis.restarts import Restart
from kgctl.model.diagnosis.types import (
    BROKER_CONFIG,
    DEFAULT_HEARTBEAT_MS,
    FENCED,
    MAIN_THREAD_TYPES,
    STORED,
    Advice,
    Context,
    Diagnosis,
    Trigger,
    Wait,
)
from kgctl.model.event_index import EventIndex
from kgctl.model.event_types import EventType, is_type
from kgctl.model.events import Event
from kgctl.model.reasons import Cause, RejoinReason
from kgctl.model.state import (
    GenerationRecord,
)
from kgctl.model.timeline import plural


def _ceil_to_second(ms: float) -> int:
    """Round up to a whole second, in ms."""
    return int(math.ceil(ms / 1000.0) * 1000)


def _is_heartbeat(e: Event) -> bool:
    """An answered heartbeat: a member's own, or one the proxy traced."""
    if is_type(e, "HeartbeatSucceeded") and e.source == "member":
        return True
    return is_type(e, "HeartbeatTraced") and e.source == "wire" and e.data.get("error") == "NONE"


def _heartbeat_every(events: Sequence[Event], member: str | None) -> int | None:
    """The usual time between `member`'s heartbeats (the median gap; of every member's
    when `member` is None), when it was seen: its heartbeat.interval.ms when its
    configuration was not traced."""
    last: dict[str, int] = {}
    gaps = []
    for e in events:
        who = e.member or e.client_id
        if member is not None and who != member:
            continue
        if _is_heartbeat(e):
            if who in last and e.ts_ms > last[who]:
                gaps.append(e.ts_ms - last[who])
            last[who] = e.ts_ms
        elif e.type in _HEARTBEATS_PAUSED:  # a gap across a rejoin is not the interval
            last.pop(who, None)
    gaps.sort()
    return gaps[len(gaps) // 2] if gaps else None


# A member's own steps after which its heartbeats pause (its join, its start, leaving).
_HEARTBEATS_PAUSED: frozenset[EventType] = frozenset(
    {"JoinGroupSent", "MemberStarted", "LeaveGroupSent", "PollIntervalExceeded"}
)


def _heartbeat_basis(
    events: Sequence[Event], member: str, members: Mapping[str, MemberConfig]
) -> tuple[int, bool, str]:
    """(heartbeat interval, whether it is a configured value, how it is known)."""
    info = members.get(member)
    if info is not None and info.heartbeat_ms:
        default = ", the client's default" if info.heartbeat_default else ""
        return info.heartbeat_ms, True, f"3 × heartbeat.interval.ms={info.heartbeat_ms}{default}"
    own = _heartbeat_every(events, member)
    if own:
        return own, False, f"3 × the {own} ms seen between heartbeats"
    group = _heartbeat_every(events, None)
    if group:
        return group, False, f"3 × the {group} ms seen between the other members' heartbeats"
    return (
        DEFAULT_HEARTBEAT_MS,
        True,
        f"3 × the clients' default heartbeat.interval.ms={DEFAULT_HEARTBEAT_MS}, no "
        "heartbeat traced",
    )


def _longest_heartbeat_gap(events: Sequence[Event]) -> int:
    """The longest time between two successive answered heartbeats of one member, while it
    was in a generation (a gap across its own rejoin is the protocol's, not a silence)."""
    last: dict[str, int] = {}
    longest = 0
    for e in events:
        who = e.member or e.client_id
        if e.source not in ("member", "wire") or not who:
            continue
        if _is_heartbeat(e):
            if who in last:
                longest = max(longest, e.ts_ms - last[who])
            last[who] = e.ts_ms
        elif e.type in _HEARTBEATS_PAUSED:
            last.pop(who, None)
    return longest


# Kafka's default group.min.session.timeout.ms: what a cluster allows unless set lower.
KAFKA_MIN_SESSION_MS = KAFKA_DEFAULTS["group.min.session.timeout.ms"]


def advise_dead_member(
    w: Wait, members: Mapping[str, MemberConfig], ctx: Context, events: Sequence[Event] = ()
) -> list[Advice]:
    session = w.session_timeout_ms
    if not session:
        dead = members.get(w.member)
        lower = (
            "a lower consumer.session.timeout.ms (the group's config on the broker; the "
            "member sends none with group.protocol=consumer)"
            if dead is not None and dead.group_protocol == "consumer"
            else "a lower session.timeout.ms"
        )
        return [
            Advice(
                pattern="dead-member-held-join",
                setting="shutdown",
                value="LeaveGroup",
                text=f"the join waited {w.ms / 1000:.1f}s for {w.member}, dead until its session "
                "timed out: stopped gracefully (consumer.close()) it would have sent "
                f"LeaveGroup; {lower} shortens the wait (its value is not known: neither "
                "traced nor stored)",
            )
        ]
    if w.session_from == BROKER_CONFIG:
        # A consumer-protocol member sends no session: the group's is the broker's
        # setting (or the group's own consumer.session.timeout.ms), which no client
        # setting changes (librdkafka refuses session.timeout.ms with group.protocol=
        # consumer), and its floor is group.consumer.min.session.timeout.ms.
        return [
            Advice(
                pattern="dead-member-held-join",
                setting="shutdown",
                value="LeaveGroup",
                text=f"stop {w.member} gracefully (SIGTERM, consumer.close()): it leaves the "
                f"group (member epoch -1) and the group does not wait {session / 1000:.0f}s "
                "for it; the session itself is the group's consumer.session.timeout.ms on the "
                "broker, not a client setting",
            )
        ]
    hb, configured, why = _heartbeat_basis(events, w.member, members)
    # A session must outlive a few missed heartbeats and the longest silence a live
    # member was seen to have between two heartbeats (a GC pause, a slow network); the
    # cluster sets the floor.
    gap = _longest_heartbeat_gap(events)
    floor = ctx.bounds.min_session_ms if ctx.bounds else 0
    three = 3 * hb if configured else _ceil_to_second(3 * hb)  # a measured interval: whole seconds
    suggested = max(three, _ceil_to_second(2 * gap) if gap else 0, floor)
    if not configured and three != 3 * hb:
        why += ", rounded up to a whole second"
    if gap and _ceil_to_second(2 * gap) > three:
        why = f"2 × the longest gap seen between two heartbeats, {gap} ms"
        if _ceil_to_second(2 * gap) != 2 * gap:
            why += ", rounded up to a whole second"
    what = "the join waited" if w.phase == "join" else "the group waited"
    where = " (stored in __consumer_offsets)" if w.session_from == STORED else ""
    out = []
    if suggested < session:
        bound = f" (the cluster's floor: {ctx.bounds.session_range()})" if ctx.bounds else ""
        # Below what Kafka allows by default the advice has a price, said with it: the
        # session is then shorter than a GC pause or a network blip may be.
        risk = (
            f"; it is below Kafka's default floor (group.min.session.timeout.ms="
            f"{KAFKA_MIN_SESSION_MS}): a GC pause or a network blip longer than "
            f"{suggested / 1000:.1f}s would then remove a live member and rebalance the group"
            if suggested < KAFKA_MIN_SESSION_MS
            else ""
        )
        out.append(
            Advice(
                pattern="dead-member-held-join",
                setting="session.timeout.ms",
                value=str(suggested),
                text=f"{what} {w.ms / 1000:.1f}s for dead {w.member} until its "
                f"session.timeout.ms={session}{where}; session.timeout.ms={suggested} "
                f"({why}){bound} would have cut the wait to "
                f"about {suggested / 1000:.1f}s{risk}",
            )
        )
    out.append(
        Advice(
            pattern="dead-member-held-join",
            setting="shutdown",
            value="LeaveGroup",
            text=f"stop {w.member} gracefully (SIGTERM, consumer.close()): it sends LeaveGroup "
            f"and the group does not wait {session / 1000:.0f}s for it",
        )
    )
    return out


def advise_poll_interval(
    events: EventIndex,
    member: str,
    members: Mapping[str, MemberConfig],
    until: int,
    inferred: bool = False,
) -> list[Advice]:
    """Processing longer than max.poll.interval.ms: the batch and its time, measured.
    `inferred`: no source said the interval ran out; the member's leave and join with a
    new member id suggest it (a restart looks the same), and the advice says so."""
    info = members.get(member)
    limit = info.max_poll_ms if info else None
    if inferred and (
        limit is None or not any(is_type(e, "RecordsConsumed") for e in events.by(member))
    ):
        # A client that reports nothing (librdkafka, Java through the proxy): what its
        # batches take is not known, nor always its interval.
        setting = f"max.poll.interval.ms={limit}" if limit else "max.poll.interval.ms"
        return [
            Advice(
                pattern="max-poll-interval",
                setting="max.poll.interval.ms",
                value="",
                text=f"{member} left without a reason and joined again with a new member id, "
                f"as a client whose processing outlived {setting} does (inferred: a "
                "restart looks the same); if a batch can take that long, raise it above the "
                "longest batch, or make batches shorter (no batch was traced: kgctl cannot "
                "measure their time)",
            )
        ]
    mine = events.by(member, until=until + 60_000)
    worst: tuple[int, int] | None = None  # (batch ms, records)
    for i, e in enumerate(mine):
        if not is_type(e, "RecordsConsumed"):
            continue
        # Measured only for a batch whose processing outlived a poll interval (the
        # heartbeat thread said so) or held a join: the next main-thread step after it
        # is the end of its processing. Gaps between other polls may be idle time.
        later = mine[i + 1 :]
        nxt = next((x for x in later if x.type in MAIN_THREAD_TYPES), None)
        if nxt is None:
            continue
        breached = any(
            is_type(x, "PollIntervalExceeded", "HeartbeatFailed") and x.ts_ms <= nxt.ts_ms
            for x in later
        )
        took, n = nxt.ts_ms - e.ts_ms, int(e.data.get("count", 0) or 0)
        if breached and n > 0 and (worst is None or took > worst[0]):
            worst = (took, n)
    if limit is None:
        return []
    if worst is None:
        return [
            Advice(
                pattern="max-poll-interval",
                setting="max.poll.interval.ms",
                value="",
                text=f"{member} did not poll within max.poll.interval.ms={limit}; no batch was "
                "traced, so kgctl cannot measure its processing time",
            )
        ]
    took, n = worst
    per_record = took / n
    records = int(0.8 * limit / per_record)
    interval = _ceil_to_second(1.5 * took)
    out = []
    if records >= 1:
        out.append(
            Advice(
                pattern="max-poll-interval",
                setting="max.poll.records",
                value=str(records),
                text=f"{member} spent {took / 1000:.1f}s on {plural(n, 'record')} "
                f"({per_record:.0f} ms each) against max.poll.interval.ms={limit}: "
                f"max.poll.records={records} keeps a batch within 80% of the interval",
            )
        )
    single = " (one record alone outlives the interval)" if records < 1 else ""
    out.append(
        Advice(
            pattern="max-poll-interval",
            setting="max.poll.interval.ms",
            value=str(interval),
            text=f"{'or ' if out else ''}max.poll.interval.ms={interval} (1.5 × the "
            f"{took / 1000:.1f}s batch of {plural(n, 'record')} seen){single}",
        )
    )
    return out


def advise_batch_size(events: EventIndex, w: Wait, start_ms: int) -> list[Advice]:
    """A join held by a member finishing its batch: a batch of about a second keeps the
    wait to about a second (the per-record time measured on the batch it was finishing)."""
    batches = [
        e for e in events.by(w.member, until=start_ms + w.ms) if is_type(e, "RecordsConsumed")
    ]
    if not batches:
        return []
    b = batches[-1]
    n = int(b.data.get("count", 0) or 0)
    nxt = next(
        (e.ts_ms for e in events.by(w.member, since=b.ts_ms) if e.type in MAIN_THREAD_TYPES), None
    )
    if n <= 0 or nxt is None:
        return []
    took = nxt - b.ts_ms
    per_record = took / n
    records = int(1000 / per_record) if per_record > 0 else n
    if records >= n or records < 1:
        return []
    return [
        Advice(
            pattern="processing-held-join",
            setting="max.poll.records",
            value=str(records),
            text=f"the join waited {w.ms / 1000:.1f}s for {w.member} to finish a batch of "
            f"{plural(n, 'record')} ({took / 1000:.1f}s, {per_record:.0f} ms each): with "
            f"max.poll.records={records} a batch takes about a second, and so does the wait",
        )
    ]


def advise_static_membership(
    trigger: Trigger, back: Sequence[Restart], since: int, until: int, ctx: Context
) -> list[Advice]:
    out = []
    for r in back:
        if r.static or r.member != trigger.who or not since < r.back_ms <= until:
            continue
        session = _ceil_to_second(max(1.5 * r.down_ms, 1000))
        if ctx.bounds is not None:
            session = min(max(session, ctx.bounds.min_session_ms), ctx.bounds.max_session_ms)
        out.append(
            Advice(
                pattern="dynamic-restart",
                setting="group.instance.id",
                value=f"session.timeout.ms={session}",
                text=f"{r.member} restarted in {r.down_ms / 1000:.1f}s as a dynamic member (a new "
                "member id: a rebalance to leave, one to join); as a static member "
                f"(group.instance.id) with session.timeout.ms={session} (1.5 × the restart "
                "seen) the group would not rebalance",
            )
        )
    return out


def _assignors_offered(events: EventIndex, member: str, until: int) -> tuple[str, ...]:
    """The assignors `member` offered in its last JoinGroup up to `until`."""
    found: tuple[str, ...] = ()
    for e in events.by(member, until=until):
        if is_type(e, "JoinGroupSent"):
            raw = e.data.get("protocols")
            if isinstance(raw, list):
                found = tuple(str(p) for p in raw)
    return found


def advise_replaced_static_member(
    events: EventIndex, trigger: Trigger, prev: GenerationRecord | None, until: int
) -> list[Advice]:
    """A static member replaced: by a process that offered the assignors in another order
    (the group's choice changed, so it rebalanced), or while the old one still ran (it
    was fenced: two processes shared one group.instance.id)."""
    if trigger.cause != Cause.STATIC_MEMBER_REPLACED or prev is None:
        return []
    new = trigger.who
    old = next((k for k in prev.members if k != new and k in trigger.evidence), new)
    out = []
    mine, theirs = (
        _assignors_offered(events, new, until),
        _assignors_offered(events, old, trigger.at_ms - 1),
    )
    if mine and theirs and mine[0] != theirs[0]:
        out.append(
            Advice(
                pattern="static-member-replaced",
                setting="partition.assignment.strategy",
                value=",".join(theirs),
                text=f"{new} took {old}'s group.instance.id offering {','.join(mine)} where "
                f"{old} offered {','.join(theirs)}: the group's assignor changed with it, "
                "so the replacement rebalanced the group (a static member replaced in a "
                "stable group with the same assignors does not); list the same assignors, "
                "in the same order, on every member",
            )
        )
    fenced = any(
        is_type(e, "MemberFailed") and e.member == old and e.data.get("error") == FENCED
        and e.ts_ms >= trigger.at_ms
        for e in events
    )  # fmt: skip
    if fenced and old != new:
        out.append(
            Advice(
                pattern="static-member-replaced",
                setting="group.instance.id",
                value="one per process",
                text=f"{old} was still running when {new} joined with its group.instance.id: the "
                f"broker fenced {old} (FENCED_INSTANCE_ID) and it stopped; give each process "
                "its own id (a restart should stop the old process first)",
            )
        )
    return out


def advise_rejoin_loop(
    diags: Sequence[Diagnosis], window: int = 5, times: int = 3
) -> dict[int, Advice]:
    """A member that started `times` of the last `window` rebalances: its reasons."""
    out: dict[int, Advice] = {}
    for i in range(len(diags)):
        recent = diags[max(0, i - window + 1) : i + 1]
        who = diags[i].trigger.who
        if not who:
            continue
        mine = [
            d
            for d in recent
            if d.trigger.who == who
            and d.trigger.reason != RejoinReason.FIRST_JOIN.value
            and d.trigger.cause != Cause.MEMBER_JOINED
        ]
        if len(mine) >= times:
            reasons = sorted({d.trigger.reason or d.trigger.cause_name for d in mine})
            out[diags[i].generation] = Advice(
                pattern="rejoin-loop",
                setting="member",
                value=who,
                text=f"{who} started {len(mine)} of the last {len(recent)} rebalances "
                f"(reasons: {', '.join(reasons)}): fix that member first",
            )
    return out
