"""A proxy's wire trace read as the steps of members that report nothing themselves.

`kgctl proxy` sees a Java or librdkafka application's JoinGroup, SyncGroup, LeaveGroup,
heartbeats and ConsumerGroupHeartbeats (source `wire`, `*Traced`), but the fold knows
members by their own events (JoinGroupReceived, JoinCompleted, GroupHeartbeatAnswered,
...). `WireSteps` turns the traced exchanges of clients that have no member events of
their own into those member events, so a recording of a proxy alone gives `kgctl
report`, `explain` and `watch` their members, generations (a consumer group's epochs)
and moved partitions. A kgctl member traced by the proxy reports itself; its wire
events are left as they are (counted once).

A consumer-protocol (KIP-848) member says on the wire what it owns (`owned`, sent when
it changed) and is answered its epoch and its target (`assignment`, sent when it
changed): what it gave up between two of its own reports it revoked (or lost, after a
fencing answer), and it is stable once it owns its target. The wire names topics by id:
an id whose name is known (`WireSteps.topic_names`: a chaos run's own topics) has it; a
group whose members subscribe to one topic has that topic's name for every id; else the
id stands for the topic.

Pure: events in, events out (`WireSteps` keeps what each member last said).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kgctl.model.diagnosis.types import FENCED as FENCED_INSTANCE_ID
from kgctl.model.events import Event, Partitions
from kgctl.model.kafka_errors import FENCES_MEMBER

_TRACED = frozenset(
    {
        "JoinGroupTraced",
        "SyncGroupTraced",
        "LeaveGroupTraced",
        "HeartbeatTraced",
        "ConsumerGroupHeartbeatTraced",
    }
)

# A ConsumerGroupHeartbeat's member epoch that leaves the group: -1 a dynamic member,
# -2 a static one (its instance id kept for its return).
_LEAVING_EPOCHS = (-1, -2)


def member_steps(events: Iterable[Event]) -> list[Event]:
    """`events` with the traced group steps of self-silent clients added as member
    events (same envelope, `source` kept `wire`), each right after its trace."""
    events = list(events)
    speaking = {e.client_id for e in events if e.source == "member" and e.client_id}
    wire = WireSteps()
    out: list[Event] = []
    for ev in events:
        out.append(ev)
        if ev.client_id not in speaking:
            out.extend(wire.steps(ev))
    return out


@dataclass
class _Consumer:
    """What a consumer-protocol member last said on the wire."""

    owned: Partitions | None = None  # None: not said yet in the trace
    target: Partitions | None = None
    fenced: bool = False  # answered a fencing error since its last report
    last_ms: int = 0  # its last heartbeat's answer
    interval_ms: int = 5_000  # its heartbeat interval, as answered (the broker's default)
    envelope: Event | None = None  # its last traced heartbeat, to speak of it


@dataclass
class WireSteps:
    """The member steps of traced exchanges, one event at a time (a live watch reads
    the trace as it comes), remembering what each consumer-protocol member said."""

    members: dict[tuple[str, str], _Consumer] = field(default_factory=dict)
    topics: dict[str, set[str]] = field(default_factory=dict)  # group -> subscribed names
    # {topic id: name} known from elsewhere (a chaos run's own topics); shared, it may
    # grow while the trace is read.
    topic_names: Mapping[str, str] = field(default_factory=dict)

    def steps(self, ev: Event) -> list[Event]:
        """The member steps `ev` stands for (none for a member's own event)."""
        if ev.source != "wire" or ev.type not in _TRACED:
            return []
        if ev.type == "ConsumerGroupHeartbeatTraced":
            return list(self._consumer_steps(ev))
        return list(_as_member(ev))

    def _name(self, group: str, raw: Any) -> Partitions | None:
        """A traced {topic id: [partitions]} by topic name: its id's known name, else the
        one topic the group's subscriptions name (else the id)."""
        if not isinstance(raw, Mapping):
            return None
        names = self.topics.get(group, set())
        only = next(iter(names)) if len(names) == 1 else None
        out: dict[str, set[int]] = {}
        for topic, ids in raw.items():
            name = self.topic_names.get(str(topic)) or only or str(topic)
            out.setdefault(name, set()).update(int(p) for p in ids or [])
        return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}

    def _consumer_steps(self, ev: Event) -> Iterator[Event]:
        d = ev.data
        req: dict[str, Any] = d.get("request") or {}
        resp: dict[str, Any] = d.get("response") or {}
        error = str(d.get("error", "") or "NONE")
        latency = float(d.get("latency_ms") or 0.0)
        sent_ms = ev.ts_ms - int(latency)
        sent_epoch = int(req.get("member_epoch", -1) if req.get("member_epoch") is not None else -1)
        subscription = req.get("subscription")
        if isinstance(subscription, list) and subscription:
            self.topics.setdefault(ev.group, set()).update(str(t) for t in subscription)
        key = (ev.group, ev.member_id or ev.client_id)
        m = self.members.setdefault(key, _Consumer())
        m.last_ms, m.envelope = ev.ts_ms, ev
        if resp and int(resp.get("heartbeat_interval_ms") or 0) > 0:
            m.interval_ms = int(resp["heartbeat_interval_ms"])

        def step(type_: str, ts_ms: int, **data: Any) -> Event:
            return replace(ev, type=type_, ts_ms=ts_ms, data=data)

        if sent_epoch in _LEAVING_EPOCHS:
            self.members.pop(key, None)
            how = "a static member's" if sent_epoch == -2 else "its"
            yield step(
                "LeaveGroupSent",
                sent_ms,
                reason=f"left the group ({how} ConsumerGroupHeartbeat with member epoch "
                f"{sent_epoch})",
            )
            return
        owned = self._name(ev.group, req.get("owned")) if req.get("owned") is not None else None
        if sent_epoch == 0:
            # A join (a first one, or again after a leave or a fencing): it owns nothing.
            owned = owned or {}
            m.owned, m.target = m.owned or {}, None
        if owned is not None:
            yield from _ownership_steps(step, sent_ms, m.owned or {}, owned, m.fenced)
            m.owned, m.fenced = owned, False
        answered = error == "NONE"
        target = self._name(ev.group, resp.get("assignment")) if answered else None
        epoch = int(resp.get("member_epoch", -1)) if answered and resp else -1
        said_more = owned is not None or subscription is not None or sent_epoch == 0
        if not (said_more or target is not None or not answered or epoch != sent_epoch):
            return  # a plain heartbeat: nothing new
        yield step(
            "GroupHeartbeatAnswered",
            ev.ts_ms,
            sent={
                "member_epoch": sent_epoch,
                "instance_id": req.get("instance_id"),
                "rebalance_timeout_ms": req.get("rebalance_timeout_ms"),
                "subscription": subscription,
                "regex": req.get("regex"),
                "server_assignor": req.get("server_assignor"),
                "owned": owned,
            },
            error=error,
            member_epoch=epoch if answered else sent_epoch,
            previous_epoch=sent_epoch,
            heartbeat_interval_ms=resp.get("heartbeat_interval_ms") if resp else None,
            assignment=target,
            rtt_ms=latency,
            api_version=d.get("api_version"),
        )
        if not answered:
            yield step("HeartbeatFailed", ev.ts_ms, error=error, rtt_ms=latency)
            m.fenced = m.fenced or error in FENCES_MEMBER
            return
        if target is not None:
            m.target = target
            yield from self._removed_for(ev, key, target)
        # As its own state would read: stable once it owns its target, reconciling while
        # it does not (a target it was just given, or one it still works towards).
        mine = m.owned if m.owned is not None else {}
        if m.target is not None and _pairs(mine) == _pairs(m.target):
            yield step("MemberStateChanged", ev.ts_ms, state="STABLE", member_epoch=epoch,
                       reason="owns its target (wire)")  # fmt: skip
        elif m.target is not None and target is not None:
            yield step("MemberStateChanged", ev.ts_ms, state="RECONCILING", member_epoch=epoch,
                       reason="a new target (wire)")  # fmt: skip

    def _removed_for(self, ev: Event, key: tuple[str, str], target: Partitions) -> Iterator[Event]:
        """Members the broker removed: it gives a consumer-protocol member a partition
        only once its owner revoked it, so a partition given while a silent member's
        last report still owned it means the broker no longer counts that member (its
        session timed out: killed or frozen). Silent: no heartbeat of its own for two of
        its heartbeat intervals (a report on its way is not taken for a removal)."""
        given = _pairs(target)
        for other, m in list(self.members.items()):
            if other == key or other[0] != ev.group or m.owned is None or m.envelope is None:
                continue
            if not given & _pairs(m.owned) or ev.ts_ms - m.last_ms < 2 * m.interval_ms:
                continue
            del self.members[other]
            # Not said by the member: named by its member id only, so that nothing
            # reads it as the member last heard of.
            yield replace(
                m.envelope,
                type="MemberLeftGroup",
                ts_ms=ev.ts_ms,
                member="",
                data={
                    "member_id": m.envelope.member_id,
                    "reason": f"removed by the broker: silent since its heartbeat answered at "
                    f"{m.last_ms}, its partitions given to {ev.member or ev.client_id} (wire)",
                },
            )


def _pairs(p: Partitions) -> set[tuple[str, int]]:
    return {(t, i) for t, ids in p.items() for i in ids}


def _ownership_steps(
    step: Any, at_ms: int, before: Partitions, now: Partitions, fenced: bool
) -> Iterator[Event]:
    """What a member's report of what it owns says it gave up (revoked; lost after a
    fencing answer) and took since its last one."""
    gone, new = _pairs(before) - _pairs(now), _pairs(now) - _pairs(before)
    if gone:
        kind = "PartitionsLost" if fenced else "PartitionsRevoked"
        yield step(kind, at_ms, partitions=_partitions(gone))
    if new:
        yield step("PartitionsAssigned", at_ms, partitions=_partitions(new))


def _partitions(pairs: set[tuple[str, int]]) -> Partitions:
    out: dict[str, list[int]] = {}
    for t, p in sorted(pairs):
        out.setdefault(t, []).append(p)
    return out


def _as_member(ev: Event) -> Iterator[Event]:
    d = ev.data
    req: dict[str, Any] = d.get("request") or {}
    resp: dict[str, Any] = d.get("response") or {}
    error = str(d.get("error", ""))
    latency = float(d.get("latency_ms") or 0.0)
    sent_ms = ev.ts_ms - int(latency)

    def step(type_: str, ts_ms: int, **data: Any) -> Event:
        return replace(ev, type=type_, ts_ms=ts_ms, data=data)

    if ev.type == "JoinGroupTraced":
        yield step(
            "JoinGroupSent",
            sent_ms,
            reason=req.get("reason") or "",
            wire_reason=req.get("reason") or "",
            protocols=req.get("protocols") or [],
            member_id=req.get("member_id") or "",
            session_timeout_ms=req.get("session_timeout_ms"),
            rebalance_timeout_ms=req.get("rebalance_timeout_ms"),
        )
        if resp:
            yield step(
                "JoinGroupReceived",
                ev.ts_ms,
                error=error,
                generation=resp.get("generation", -1),
                member_id=resp.get("member_id") or "",
                leader=resp.get("leader") or "",
                protocol=resp.get("protocol") or "",
                is_leader=bool(resp.get("is_leader")),
                members=[{"member_id": m} for m in resp.get("members") or []],
                duration_ms=latency,
            )
    elif ev.type == "SyncGroupTraced" and error == "NONE":
        assignment = resp.get("assignment")
        if assignment is not None:
            generation = int(req.get("generation", -1))
            yield replace(
                ev,
                type="JoinCompleted",
                generation=generation,
                data={
                    "generation": generation,
                    "member_id": ev.member_id,
                    "assignment": assignment,
                    "is_leader": bool(req.get("assignments")),
                },
            )
    elif ev.type == "LeaveGroupTraced":
        members = req.get("members") or [{}]
        said = members[0].get("reason") or ""
        yield step("LeaveGroupSent", sent_ms, reason=said or "left the group", wire_reason=said)
    elif ev.type == "HeartbeatTraced" and error not in ("NONE", "", FENCED_INSTANCE_ID):
        yield step("HeartbeatFailed", ev.ts_ms, error=error, rtt_ms=latency)
    if error == FENCED_INSTANCE_ID:
        # Another process joined with this member's group.instance.id and took its place:
        # the broker answers the old member id so from now on, and librdkafka and Java
        # treat it as fatal. The process is gone, without a rebalance (kgctl's own member
        # says MemberFailed here too). Its successor often has the same client id, so the
        # same name on the wire: the id fenced is in the data, not the envelope, so that
        # the fold ends the member only while it is still that process (fold._on_failed).
        yield replace(
            ev, type="MemberFailed", member_id="",
            data={
                "error": error, "member_id": ev.member_id,
                "reason": "fenced: another process joined with its group.instance.id",
            },
        )  # fmt: skip
