"""The critical path: what the join phase, the detection of a dead member and the sync
phase waited for, one `Wait` per member waited for, with why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kgctl.model.diagnosis.causes import member_id_in_broker_reason, member_name
from kgctl.model.diagnosis.members import MemberConfig, stored_timeouts
from kgctl.model.diagnosis.trigger import (
    chaos_said,
    chaos_silenced_by,
    last_heard_ms,
    static_replacements,
)
from kgctl.model.diagnosis.types import (
    BROKER_CONFIG,
    CONSUMER_SESSION_KEY,
    EXACT,
    FAILED,
    INFERRED,
    ROUTINE_TYPES,
    SESSION_MATCH,
    START_SLACK_MS,
    STORED,
    WAIT_DEAD,
    WAIT_HELD,
    WAIT_LATE_JOIN,
    WAIT_PROCESSING,
    WAIT_RESTARTING,
    WAIT_SLACK_MS,
    WAIT_SLOW_ASSIGNMENT,
    BrokerReason,
    Confidence,
    SessionFrom,
    Trigger,
    Wait,
    WaitReason,
)
from kgctl.model.event_index import EventIndex
from kgctl.model.event_types import is_type
from kgctl.model.events import Event
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
)
from kgctl.model.timeline import utc_clock as _clock


def critical_path(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    state: GroupState,
    members: Mapping[str, MemberConfig],
    trigger: Trigger,
    broker: Sequence[BrokerReason] = (),
    consumer_session_ms: int | None = None,
) -> list[Wait]:
    """What the join phase, the detection of a dead member and the sync phase waited for.
    `consumer_session_ms`: a consumer-protocol group's session, as the cluster's config
    says it (its members store none)."""
    if rec.sync_ms is None:
        return []
    out = _join_waits(events, rec, prev, members)
    if not any(k in members for k in rec.members):
        out += _logged_waits(events, rec, state, broker)
    detect = _detect_wait(
        events, rec.start_ms, state, members, trigger, broker, consumer_session_ms
    )
    held = _held_syncs(events, rec)
    slow = [
        w for w in _sync_waits(events, rec, members) if w.member not in {h.member for h in held}
    ]
    return detect + out + held + slow


def _join_waits(
    events: EventIndex,
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    members: Mapping[str, MemberConfig],
) -> list[Wait]:
    """The join phase held for a dead member (until its session timed out), or for the
    last live member to send its JoinGroup."""
    start, sync = rec.start_ms, rec.sync_ms or rec.start_ms
    # Each member's last JoinGroupSent in the window, in one pass over the events (a pass
    # per member made a generation of N members cost N × events).
    last_sent: dict[str, Event] = {}
    for e in events.of("JoinGroupSent", since=start - 2, until=sync):  # start - 1 <= ts
        last_sent[e.member] = e
    sent_at = {}
    for k in rec.members:
        sent = last_sent.get(k) if k in members else None
        if sent is not None:
            sent_at[k] = sent.ts_ms
    last_live = max(sent_at.values(), default=start)
    # Members of the previous generation that were not in this one and said nothing (a
    # static member replaced was fenced, not waited for).
    _, swapped = static_replacements(events, -1, sync, prev)
    gone = [
        k
        for k in (prev.members if prev else ())
        if k not in rec.members
        and k in members
        and k not in swapped
        and not _said_anything(events, k, start, sync)
    ]
    if sync - last_live > WAIT_SLACK_MS and gone:
        return [_dead_wait(events, k, start, sync, last_live, members) for k in gone]
    # Members of the previous generation, told of the rebalance by their heartbeats, that
    # sent no JoinGroup before it went on without them: alive but not polling.
    stuck = {
        k: told
        for k in (prev.members if prev else ())
        if k not in rec.members
        and k in members
        and k not in swapped
        and k not in last_sent
        and (told := _told_at(events, k, start, sync)) is not None
    }
    if sync - last_live > WAIT_SLACK_MS and stuck:
        return [_stuck_wait(k, told, start, sync, members) for k, told in stuck.items()]
    if not sent_at:
        return []
    k = max(sent_at, key=lambda name: sent_at[name])
    waited = sent_at[k] - min(sent_at.values())
    if waited <= WAIT_SLACK_MS:
        return []
    why, detail, conf = _why_late(events, k, start, sent_at[k], members)
    return [
        Wait(
            phase="join",
            member=k,
            ms=waited,
            why=why,
            detail=detail,
            confidence=conf,
            session_timeout_ms=members[k].session_ms,
            session_from=members[k].session_from,
        )
    ]


def _dead_wait(
    events: EventIndex,
    k: str,
    start: int,
    sync: int,
    last_live: int,
    members: Mapping[str, MemberConfig],
) -> Wait:
    last = last_heard_ms(events, k, sync)
    session, source = members[k].session_ms, members[k].session_from
    since_last = None if last is None else sync - last
    detail = f"no heartbeat since {_clock(last)}" if last is not None else "silent"
    chaos = chaos_silenced_by(events, k, sync)
    if chaos is not None:
        detail = f"{chaos_said(chaos)}; {detail}"
    if session and since_last is not None and since_last >= SESSION_MATCH * session:
        stored = ", stored in __consumer_offsets" if source == STORED else ""
        detail += (
            f": dead, the broker removed it at its session timeout "
            f"(session.timeout.ms={session}{stored}, {since_last / 1000:.1f}s after it was "
            f"last heard of); the live members had all joined by {_clock(last_live)}"
        )
    confidence: Confidence = EXACT if chaos is not None else INFERRED
    return Wait(
        phase="join",
        member=k,
        ms=sync - start,
        why=WAIT_DEAD,
        detail=detail,
        confidence=confidence,
        session_timeout_ms=session,
        session_from=source,
    )


def _logged_waits(
    events: EventIndex,
    rec: GenerationRecord,
    state: GroupState,
    broker: Sequence[BrokerReason],
) -> list[Wait]:
    """Untraced: the broker's log says when it removed a member whose session timed out
    while the join phase waited for it."""
    start, sync = rec.start_ms, rec.sync_ms or rec.start_ms
    stored = stored_timeouts(events)
    out = []
    for br in broker:
        if br.kind != FAILED or not start + WAIT_SLACK_MS < br.ts_ms <= sync + WAIT_SLACK_MS:
            continue
        member_id = member_id_in_broker_reason(br.reason)
        session = stored.get(member_id, (-1, -1))[0]
        known = f" (session.timeout.ms={session}, stored in __consumer_offsets)"
        out.append(
            Wait(
                phase="join",
                member=member_name(state, member_id, events),
                ms=br.ts_ms - start,
                why=WAIT_DEAD,
                detail=f"the broker removed it at {_clock(br.ts_ms)} when its session timed out"
                f"{known if session > 0 else ''} (broker log): the join phase waited for it "
                "until then",
                confidence=EXACT,
                session_timeout_ms=session if session > 0 else None,
                session_from=STORED if session > 0 else "",
            )
        )
    return out


def _session_setting(m: MemberConfig) -> str:
    """The session timeout that removed `m`, as far as it is known."""
    if m.session_ms:
        return f"session.timeout.ms={m.session_ms}"
    if m.group_protocol == "consumer":
        # KIP-848: the member sends no session timeout; the group's own config sets it.
        return "the group's consumer.session.timeout.ms, set on the broker, not traced"
    return "session.timeout.ms, not traced or stored"


def _detect_wait(
    events: EventIndex,
    start: int,
    state: GroupState,
    members: Mapping[str, MemberConfig],
    trigger: Trigger,
    broker: Sequence[BrokerReason] = (),
    consumer_session_ms: int | None = None,
) -> list[Wait]:
    """Nothing held the join, but the rebalance began only when a silent member's
    session timed out: the time went to noticing it was gone. The broker removes a
    member session.timeout.ms after the last heartbeat it received, so that is the
    wait wherever the session is known; the silence a trace measures (from the last
    event it saw of the member to the first sign of the rebalance) only checks it."""
    if trigger.reason != "session timeout":
        return []
    removal = _logged_removal(start, state, events, trigger, broker)
    if trigger.who not in members:
        return _logged_detect_wait(events, trigger, removal, consumer_session_ms)
    last = last_heard_ms(events, trigger.who, start)
    if last is None or start - last <= WAIT_SLACK_MS:
        return []
    m = members[trigger.who]
    session = m.session_ms
    silent = start - last
    chaos = chaos_silenced_by(events, trigger.who, start)
    said = f"{chaos_said(chaos)}; " if chaos is not None else ""
    if removal is not None:
        said += f"the broker removed it at {_clock(removal.ts_ms)} (broker log); "
    ms, measured = silent, ""
    if session and silent >= SESSION_MATCH * session:
        # The broker removed it a session after the last heartbeat it had from it: that
        # is the wait. The silence a trace measures also holds the trace's own error (a
        # late event of the member, heartbeats it did not keep, a busy broker's timer).
        ms = session
        measured = f"; the trace last heard of it {silent / 1000:.1f}s before the rebalance"
    return [
        Wait(
            phase="detect",
            member=trigger.who,
            ms=ms,
            why=WAIT_DEAD,
            detail=f"{said}no heartbeat since {_clock(last)}: the rebalance began only when its "
            f"session timed out ({_session_setting(m)}); its partitions were not consumed "
            f"meanwhile{measured}",
            confidence=EXACT if chaos is not None or removal is not None else INFERRED,
            session_timeout_ms=session,
            session_from=m.session_from,
        )
    ]


def _logged_removal(
    start: int,
    state: GroupState,
    events: EventIndex,
    trigger: Trigger,
    broker: Sequence[BrokerReason],
) -> BrokerReason | None:
    """The broker's log line that removed `trigger.who` when its session expired, as
    the rebalance began (the old coordinator's and the new one's `… has failed,
    removing it`, a `Preparing to rebalance` for `… on heartbeat expiration`)."""
    for br in broker:
        expired = br.kind == FAILED or "heartbeat expiration" in br.reason
        if not expired or abs(br.ts_ms - start) > START_SLACK_MS:
            continue
        if member_name(state, member_id_in_broker_reason(br.reason), events) == trigger.who:
            return br
    return None


def _logged_detect_wait(
    events: EventIndex,
    trigger: Trigger,
    removal: BrokerReason | None,
    consumer_session_ms: int | None = None,
) -> list[Wait]:
    """Untraced: the broker's log says when it removed the member on its session's
    expiry, and __consumer_offsets how long that session was (a classic member's), or
    the cluster's config (a consumer-protocol member's): it had been silent that long
    when the rebalance began (a heartbeat interval or less after it died)."""
    if removal is None:
        return []
    member_id = member_id_in_broker_reason(removal.reason)
    session = stored_timeouts(events).get(member_id, (-1, -1))[0]
    removed = (
        f"the broker removed it at {_clock(removal.ts_ms)} when its session timed out (broker log)"
    )
    source: SessionFrom
    conf: Confidence
    if session > 0:
        setting, source, conf = f"session.timeout.ms={session}", STORED, EXACT
        whence = " (stored in __consumer_offsets)"
    elif consumer_session_ms:
        # The configured session, not a stored one: a group that sets its own
        # consumer.session.timeout.ms (Kafka 4.0+) waits that instead.
        session, source, conf = consumer_session_ms, BROKER_CONFIG, INFERRED
        setting = f"{CONSUMER_SESSION_KEY}={session}"
        whence = (
            " (the broker's setting; a group's own consumer.session.timeout.ms would replace it)"
        )
    else:
        return []  # how long it waited is not known: no length said
    return [
        Wait(
            phase="detect",
            member=trigger.who,
            ms=session,
            why=WAIT_DEAD,
            detail=f"{removed}, {setting} after the last heartbeat it had from it{whence}; its "
            "partitions were not consumed meanwhile",
            confidence=conf,
            session_timeout_ms=session,
            session_from=source,
        )
    ]


def _sync_waits(
    events: EventIndex, rec: GenerationRecord, members: Mapping[str, MemberConfig]
) -> list[Wait]:
    """The sync phase: followers wait for the leader's SyncGroup (its assignment)."""
    sync, leader = rec.sync_ms or rec.start_ms, rec.leader
    if rec.stable_ms is None or leader not in members:
        return []
    mine = events.by(leader, since=sync - 1)
    got = [e.ts_ms for e in mine if is_type(e, "JoinGroupReceived")]
    synced = [e.ts_ms for e in mine if is_type(e, "SyncGroupSent")]
    if not got or not synced or synced[0] - got[0] <= WAIT_SLACK_MS:
        return []
    took = synced[0] - got[0]
    computed = [e for e in mine if is_type(e, "AssignmentComputed")]
    detail = f"the leader sent its SyncGroup {took / 1000:.1f}s after the join"
    if computed and computed[0].data.get("duration_ms") is not None:
        detail += f" (its assignor ran {float(computed[0].data['duration_ms']):.0f} ms)"
    return [
        Wait(
            phase="sync",
            member=leader,
            ms=took,
            why=WAIT_SLOW_ASSIGNMENT,
            detail=detail,
            confidence=EXACT,
        )
    ]


def _held_syncs(events: EventIndex, rec: GenerationRecord) -> list[Wait]:
    """The sync phase held by `kgctl proxy`: a delay fault rule on a SyncGroup of this
    generation (its FaultInjected). The leader's held holds every member's answer (they
    wait for its assignment); a follower's, only its own. Up to the generation's end when
    it never was stable: a cooperative second round that some member began before the
    slowest SyncGroup answer of the first came back (the 2-core CI, a full truth run)."""
    sync = rec.sync_ms or rec.start_ms
    out: list[Wait] = []
    for e in events.of("FaultInjected", since=sync - 1, until=rec.stable_ms or rec.end_ms):
        d = e.data
        if e.source != "wire" or d.get("effect") != "delay" or d.get("api") != "SyncGroup":
            continue
        if e.generation != rec.generation or not d.get("delay_ms"):
            continue  # (a SyncGroup names its generation: the proxy's event carries it)
        who = e.member or e.client_id or e.member_id or "a member"
        leader = bool(rec.leader) and who == rec.leader
        whose = "the leader's: every member waited for its assignment" if leader else "its own"
        out.append(
            Wait(
                phase="sync",
                member=who,
                ms=int(d["delay_ms"]),
                why=WAIT_HELD,
                detail=f"kgctl proxy held its SyncGroup {int(d['delay_ms'])} ms (an injected "
                f"delay, fault rule {d.get('text') or d.get('rule')}); the answer held was {whose}",
                confidence=EXACT,
            )
        )
    by_leader = [w for w in out if w.detail.endswith("its assignment")]
    return by_leader or out  # (the leader's held the followers' too: theirs add nothing)


def _told_at(events: EventIndex, member: str, t0: int, t1: int) -> int | None:
    """When `member`'s heartbeat was first answered REBALANCE_IN_PROGRESS in [t0, t1]."""
    for e in events.by(member, since=t0 - 1, until=t1):
        if is_type(e, "HeartbeatFailed") and e.data.get("error") == "REBALANCE_IN_PROGRESS":
            return e.ts_ms
    return None


def _stuck_wait(
    k: str, told: int, start: int, sync: int, members: Mapping[str, MemberConfig]
) -> Wait:
    """The join phase held for a member that heartbeated but never rejoined, until the
    coordinator went on without it at the rebalance timeout (its max.poll.interval.ms).
    That it was busy outside poll() is inferred: the wire shows only that its heartbeat
    thread was told and its JoinGroup never came."""
    limit = members[k].max_poll_ms
    timeout = f" (its max.poll.interval.ms={limit})" if limit else ""
    return Wait(
        phase="join",
        member=k,
        ms=sync - start,
        why=WAIT_PROCESSING,
        detail=(
            f"alive but not rejoining: its heartbeats were answered REBALANCE_IN_PROGRESS "
            f"from {_clock(told)}, yet it sent no JoinGroup, and the group went on without "
            f"it at the rebalance timeout{timeout}: busy outside poll(), in a long batch or "
            "a rebalance callback that blocks"
        ),
        confidence=INFERRED,
        session_timeout_ms=members[k].session_ms,
        session_from=members[k].session_from,
    )


def _said_anything(events: EventIndex, member: str, t0: int, t1: int) -> bool:
    return any(e.type not in ROUTINE_TYPES for e in events.by(member, since=t0 - 1, until=t1))


def _why_late(
    events: EventIndex, member: str, start: int, sent: int, members: Mapping[str, MemberConfig]
) -> tuple[WaitReason, str, Confidence]:
    """Why `member` sent its JoinGroup only at `sent`."""
    mine = events.by(member, until=sent)
    started = [e for e in mine if is_type(e, "MemberStarted") and e.ts_ms >= start - 1]
    if started:
        static = members[member].instance_id
        kind = f"static member {static} restarting" if static else "restarting"
        return WAIT_RESTARTING, f"{kind}: process started {_clock(started[-1].ts_ms)}", EXACT
    told = [
        e
        for e in mine
        if e.ts_ms >= start - 1
        and (
            is_type(e, "HeartbeatFailed")
            or (is_type(e, "RejoinRequested") and e.source == "member")
        )
    ]
    if told:
        # Its heartbeat thread learnt of the rebalance at `told`; the JoinGroup waits for
        # the main thread's next poll: the time between is processing.
        busy = sent - told[0].ts_ms
        if busy > WAIT_SLACK_MS:
            limit = members[member].max_poll_ms
            batches = [e for e in mine if is_type(e, "RecordsConsumed")]
            polled = (
                f" of {batches[-1].data.get('count', '?')} records polled at "
                f"{_clock(batches[-1].ts_ms)}"
                if batches
                else ""
            )
            detail = (
                f"still processing: told of the rebalance at {_clock(told[0].ts_ms)} "
                f"by its heartbeat, it polled (and joined) only {busy / 1000:.1f}s later"
                f"{polled}"
            )
            if limit:
                detail += f"; the broker waits up to max.poll.interval.ms={limit}"
            return WAIT_PROCESSING, detail, EXACT
        hb = members[member].heartbeat_ms
        every = f" (heartbeat.interval.ms={hb})" if hb else ""
        return (
            WAIT_LATE_JOIN,
            f"learnt of the rebalance only at its heartbeat at {_clock(told[0].ts_ms)}{every}",
            EXACT,
        )
    # No heartbeat of it was answered REBALANCE_IN_PROGRESS first: it was not told, it
    # rejoined on its own (librdkafka does on its next metadata refresh after a growth).
    return (
        WAIT_LATE_JOIN,
        "rejoined late, not told of the rebalance by a heartbeat first: why it joined "
        "when it did, the sources do not say",
        INFERRED,
    )
