"""Diff consecutive broker snapshots of a group into events, and guess each rebalance's cause.

Pure: snapshots and `now_ms` in, `Event`s out; no I/O, no clock. What the classic
DescribeGroups gives is limited, so some of this is inference:

- Membership (member id, client id, host, instance id) and the broker's group state are
  facts, diffed on every snapshot.
- The generation id is not in DescribeGroups. The observer counts rebalances itself:
  each time the group settles (Stable or Empty) after a visible change (a member came
  or went, a rebalancing state was seen, subscriptions or assignments changed), it emits
  GenerationChanged with `inferred: true` and a number relative to the watch's start.
- Assignments are only reported in Stable, so partition moves are diffed between
  settled snapshots.
- Causes, in order of precedence (see docs/watch.md): timed_out, member_left,
  member_joined, subscription_changed, partitions_changed, unknown.

A KIP-848 `consumer` group (ConsumerGroupDescribe) has real epochs: GenerationChanged
(`inferred: false`, the group epoch) is emitted when the group epoch changes, with its
cause; its rebalance runs Assigning → Reconciling → Stable, and partition moves are
still diffed between settled snapshots.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kgctl.adapters.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerRecordType,
    GroupEpoch,
    MemberMetadata,
)
from kgctl.adapters.group_records import OFFSETS_TOPIC, GroupRecord
from kgctl.model.events import Event
from kgctl.model.reasons import Cause
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.model.state import REBALANCING_STATES, SYNCING_STATES
from kgctl.model.timeline import diff_owners

# How soon after a classic group's tombstone the consumer group's records must come for
# the tombstone to be Kafka's online upgrade (written together) rather than a deletion.
UPGRADE_WRITE_MS = 1000
# What a long-lived group's inferrer keeps of its past: the member ids that left (to
# know one coming back as fenced), and the consumer-group epochs between two classic
# records (whether there were any is what is read).
GONE_KEPT = 1024
EPOCHS_KEPT = 16


def upgrade_follows(tombstone_ms: int, rec: ConsumerGroupRecord) -> bool:
    """Whether `rec`, a record of the consumer group read after the classic group's
    tombstone written at `tombstone_ms`, makes that tombstone Kafka's online upgrade:
    the upgrade writes the tombstone and the consumer group's first records at once; a
    consumer group made long after a deletion is a new group."""
    return rec.timestamp_ms - tombstone_ms <= UPGRADE_WRITE_MS


@dataclass(frozen=True, kw_only=True)
class Attribution:
    """The watch's guess at why a rebalance happened: its most likely cause, whether that
    is a guess, the evidence, and the other causes seen (each with its evidence)."""

    cause: Cause
    guess: bool
    evidence: str
    also: tuple[tuple[Cause, str], ...] = ()

    def to_data(self, *, also: bool = True) -> dict[str, Any]:
        """As an event's data (RebalanceAttributed's; GenerationChanged's without `also`):
        the event schema names causes by their values."""
        data: dict[str, Any] = {
            "cause": self.cause.value,
            "guess": self.guess,
            "evidence": self.evidence,
        }
        if also:
            data["also"] = [{"cause": c.value, "evidence": e} for c, e in self.also]
        return data


@dataclass
class _Pending:
    """What changed since the group last settled."""

    joined: dict[str, MemberSnapshot] = field(default_factory=dict)
    left: dict[str, MemberSnapshot] = field(default_factory=dict)
    dropped_in_rebalance: set[str] = field(default_factory=set)  # left while rebalancing
    resubscribed: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    fenced: dict[str, MemberSnapshot] = field(default_factory=dict)  # member epoch went back
    saw_rebalancing: bool = False
    started_ms: int | None = None
    sync_ms: int | None = None
    epoch_written_ms: int | None = None  # started_ms is a consumer-group record's write time
    outage: bool = False
    # A consumer group's stored epoch came with another hash of its subscribed topics'
    # metadata (Kafka 4.1+ writes it with the epoch): a topic grew, appeared or went.
    metadata_changed: bool = False

    def any(self) -> bool:
        return bool(
            self.joined
            or self.left
            or self.resubscribed
            or self.fenced
            or self.saw_rebalancing
            or self.metadata_changed
        )


class Inferrer:
    """Holds the previous snapshot and turns each new one into events."""

    def __init__(self, group: str, host: str = "", pid: int = 0) -> None:
        self.group = group
        self.host = host
        self.pid = pid
        self.seq = 0
        self.generation = 0  # rebalances seen since the watch started
        self.prev: GroupSnapshot | None = None
        self.baseline: GroupSnapshot | None = None  # the last settled snapshot
        self.subscriptions: dict[str, tuple[str, ...]] = {}
        self.pending = _Pending()
        # Consumer groups: member ids that left (the newest GONE_KEPT, oldest first). A
        # consumer-protocol client keeps its member id, so one coming back was fenced and
        # rejoined; a process started again has a new id, so on a group that runs for
        # months the ids that left would only add up.
        self.gone: dict[str, None] = {}
        self.connected = True
        self.down_since_ms: int | None = None
        self.started_mid_rebalance = False
        # The broker's own generation ids, from the group's records in __consumer_offsets.
        self.stored_source = False  # those records can be read: no numbering of our own
        self.stored_generation = -1  # the latest stored generation seen
        self.attributed_generation = -1  # the latest generation a cause went to
        self.stored_members: dict[str, MemberSnapshot] | None = None  # of that generation
        # The epochs the group stored as a consumer group since its last classic record
        # (a mixed group, on Kafka's online upgrade and its way back): the newest
        # EPOCHS_KEPT, as a group that stays upgraded stores one every rebalance.
        self.consumer_epochs_between: deque[int] = deque(maxlen=EPOCHS_KEPT)
        # Members whose consumer-group record was deleted since the last epoch stored.
        self.members_deleted: set[str] = set()
        # The classic generation and members before the group's last tombstone.
        self.upgraded_from: tuple[int, dict[str, MemberSnapshot] | None] = (-1, None)
        self.tombstone_ms = -1  # when that tombstone was written

    # -- event construction -------------------------------------------------------------

    def _event(
        self, type_: str, now_ms: int, member: MemberSnapshot | None = None, **data: Any
    ) -> Event:
        self.seq += 1
        return Event(
            type=type_,
            ts_ms=now_ms,
            mono_ms=float(now_ms),
            seq=self.seq,
            group=self.group,
            member_id=member.member_id if member else "",
            instance_id=member.instance_id if member else None,
            client_id=member.client_id if member else "",
            host=member.host if member else self.host,
            pid=self.pid,
            generation=self.generation if type_ in _GENERATION_TYPES else -1,
            source="observer",
            data=data,
        )

    # -- broker reachability --------------------------------------------------------------

    def disconnected(self, error: str, now_ms: int, retry_in_s: float) -> list[Event]:
        """The broker could not be reached; one event per outage."""
        if not self.connected:
            return []
        self.connected = False
        self.down_since_ms = now_ms
        return [self._event("BrokerDisconnected", now_ms, error=error, retry_in_s=retry_in_s)]

    def _reconnected(self, now_ms: int) -> list[Event]:
        if self.connected:
            return []
        self.connected = True
        down = now_ms - (self.down_since_ms or now_ms)
        self.down_since_ms = None
        self.pending.outage = True
        return [self._event("BrokerReconnected", now_ms, down_ms=down)]

    # -- snapshots ------------------------------------------------------------------------

    def observe(self, snap: GroupSnapshot, now_ms: int) -> list[Event]:
        """Events for one new snapshot, ending with the GroupObserved snapshot itself."""
        events = self._reconnected(now_ms)
        prev = self.prev
        if prev is None:
            if snap.state in REBALANCING_STATES:
                self.started_mid_rebalance = True
                self.pending.saw_rebalancing = True
                self.pending.started_ms = now_ms
            if snap.settled or snap.missing:
                # A missing group is an empty baseline: whatever appears has joined.
                self.baseline = snap
        else:
            events += self._diff(prev, snap, now_ms)
            if snap.group_epoch is not None and snap.group_epoch != prev.group_epoch:
                events += self._epoch_changed(prev, snap, now_ms)
        for m in snap.members:
            if m.subscription:
                self.subscriptions[m.member_id] = m.subscription
        if snap.settled:
            events += self._settle(snap, now_ms)
        changed = prev is None or _shape(prev) != _shape(snap)
        events.append(self._event("GroupObserved", now_ms, changed=changed, **snap.to_data()))
        self.prev = snap
        return events

    def _diff(self, prev: GroupSnapshot, snap: GroupSnapshot, now_ms: int) -> list[Event]:
        events: list[Event] = []
        p = self.pending
        if prev.state != snap.state:
            events.append(
                self._event(
                    "GroupStateChanged", now_ms, None, **{"from": prev.state, "to": snap.state}
                )
            )
        if snap.state in REBALANCING_STATES:
            p.saw_rebalancing = True
            p.started_ms = p.started_ms if p.started_ms is not None else now_ms
            if snap.state in SYNCING_STATES and p.sync_ms is None:
                p.sync_ms = now_ms
        before = {m.member_id: m for m in prev.members}
        after = {m.member_id: m for m in snap.members}
        for mid in sorted(after.keys() - before.keys()):
            m = after[mid]
            if mid in self.gone and snap.group_epoch is not None:
                del self.gone[mid]
                p.fenced[mid] = m
            else:
                p.joined[mid] = m
            p.started_ms = p.started_ms if p.started_ms is not None else now_ms
            events.append(self._event("MemberJoinedGroup", now_ms, m, **m.to_data()))
        for mid in sorted(before.keys() - after.keys()):
            m = before[mid]
            if mid in p.joined:  # came and went within one rebalance
                del p.joined[mid]
            else:
                p.left[mid] = m
            if snap.group_epoch is not None:
                self.gone[mid] = None
                if len(self.gone) > GONE_KEPT:
                    del self.gone[next(iter(self.gone))]
            if prev.state in REBALANCING_STATES and snap.group_epoch is None:
                # It was there while the group waited for rejoins, then dropped: it did
                # not rejoin within the rebalance timeout. (A consumer group waits for
                # no rejoins: leaving while it reconciles says nothing about why.)
                p.dropped_in_rebalance.add(mid)
            p.started_ms = p.started_ms if p.started_ms is not None else now_ms
            reason = (
                "dropped during a rebalance (did not rejoin in time)"
                if mid in p.dropped_in_rebalance
                else "no longer described by the broker (LeaveGroup or session timeout)"
            )
            events.append(self._event("MemberLeftGroup", now_ms, m, **m.to_data(), reason=reason))
        for mid in sorted(before.keys() & after.keys()):
            old_epoch, new_epoch = before[mid].member_epoch, after[mid].member_epoch
            if old_epoch is not None and new_epoch is not None and new_epoch < old_epoch:
                # A member epoch only goes back when the member was fenced and rejoined
                # with the same member id (session timeout, max.poll.interval.ms).
                p.fenced[mid] = after[mid]
            old_sub = self.subscriptions.get(mid)
            new_sub = after[mid].subscription
            if old_sub is not None and new_sub is not None and old_sub != new_sub:
                first = p.resubscribed.get(mid, (old_sub, new_sub))[0]
                p.resubscribed[mid] = (first, new_sub)
        return events

    def stored_metadata_changed(self) -> None:
        """A consumer group's stored epoch comes with another hash of its subscribed
        topics' metadata than the epoch before: a cause when nothing else changed."""
        self.pending.metadata_changed = True

    def stored_epoch(self, epoch: int, written_ms: int) -> None:
        """A consumer group's epoch bump as its ConsumerGroupMetadata record stored it,
        read before a description shows it: the rebalance began when the broker wrote
        it (the polls only see it begin at the next description). Nothing is said
        until a description shows the epoch; an epoch described already is left alone."""
        known = self.prev.group_epoch if self.prev is not None else None
        if known is None or epoch <= known or written_ms <= 0:
            return
        p = self.pending
        if p.started_ms is None or written_ms < p.started_ms:
            p.started_ms = written_ms
            p.epoch_written_ms = written_ms

    def _epoch_changed(self, prev: GroupSnapshot, snap: GroupSnapshot, now_ms: int) -> list[Event]:
        """A consumer group's epoch moved: a new generation with its cause, as it happens."""
        p = self.pending
        why = attribute(p, self.baseline, snap, self.started_mid_rebalance)
        self.generation = snap.group_epoch if snap.group_epoch is not None else -1
        # The start is the epoch record's write time when the monitor read it first.
        stored: dict[str, Any] = {}
        if p.epoch_written_ms is not None:
            stored["epoch_written_ms"] = p.epoch_written_ms
        events = [
            self._event(
                "GenerationChanged",
                now_ms,
                inferred=False,
                **stored,
                previous=prev.group_epoch,
                group_epoch=snap.group_epoch,
                assignment_epoch=snap.assignment_epoch,
                settled=snap.settled,
                rebalance_started_ms=p.started_ms if p.started_ms is not None else now_ms,
                sync_ms=p.sync_ms,
                **why.to_data(also=False),
            ),
            self._event("RebalanceAttributed", now_ms, **why.to_data()),
        ]
        # What is attributed is spent; partition moves wait for the group to settle.
        self.pending = _Pending(
            started_ms=now_ms,
            saw_rebalancing=snap.state in REBALANCING_STATES,
            sync_ms=now_ms if snap.state in SYNCING_STATES else None,
        )
        self.started_mid_rebalance = False
        return events

    def _settle(self, snap: GroupSnapshot, now_ms: int) -> list[Event]:
        if snap.group_epoch is not None or self.stored_source:
            return self._settle_known(snap, now_ms)
        base = self.baseline
        moves = _moves(base, snap) if base is not None else []
        p = self.pending
        if base is None and not p.any():
            self.baseline = snap
            return []
        if not p.any() and not moves and (base is None or base.member_ids() == snap.member_ids()):
            self.baseline = snap
            return []
        self.generation += 1
        why = attribute(p, base, snap, self.started_mid_rebalance)
        events = [
            self._event(
                "GenerationChanged",
                now_ms,
                inferred=True,
                previous=self.generation - 1,
                rebalance_started_ms=p.started_ms if p.started_ms is not None else now_ms,
                sync_ms=p.sync_ms,
                **why.to_data(also=False),
                note="DescribeGroups reports no generation id: numbered from the watch start",
            )
        ]
        if moves:
            events.append(self._event("PartitionsMoved", now_ms, moves=moves, count=len(moves)))
        events.append(self._event("RebalanceAttributed", now_ms, **why.to_data()))
        self.pending = _Pending()
        self.started_mid_rebalance = False
        self.baseline = snap
        return events

    # -- the broker's stored generations (__consumer_offsets) ---------------------------

    def stored_ready(
        self, partition: int, latest: GroupRecord | None, scanned: int, now_ms: int
    ) -> list[Event]:
        """The group's records can be read: generation ids are the broker's from now on;
        `latest` is the record the look-back found (the generation at the watch start)."""
        self.stored_source = True
        events = [
            self._event(
                "GenerationSourceChanged",
                now_ms,
                source=OFFSETS_TOPIC,
                partition=partition,
                scanned=scanned,
                found=latest is not None and latest.metadata is not None,
            )
        ]
        if latest is not None:
            events += self.stored_record(latest, now_ms, initial=True)
        return events

    def stored_unavailable(self, reason: str, now_ms: int) -> list[Event]:
        """The records cannot be read (not authorized, hidden): generations are inferred."""
        self.stored_source = False
        return [
            self._event(
                "GenerationSourceChanged",
                now_ms,
                source="inferred",
                reason=reason,
                note="generations are numbered from the watch start",
            )
        ]

    def stored_record(self, rec: GroupRecord, now_ms: int, initial: bool = False) -> list[Event]:
        """A GenerationChanged (`inferred: false`) when a record stores a new generation,
        and its cause: each record lists the generation's members and subscriptions, so
        joins, leaves and subscription changes are facts even between two polls."""
        meta = rec.metadata
        if meta is None:  # a tombstone: the group was deleted; a new one starts over
            # (unless consumer-group records follow: then it was the online upgrade)
            self.upgraded_from = (self.stored_generation, self.stored_members)
            self.tombstone_ms = rec.timestamp_ms
            self.stored_generation = self.attributed_generation = -1
            self.stored_members = None
            return []
        if meta.generation == self.stored_generation:
            return []  # stored again with the same generation (a static member replaced)
        if initial and self.baseline is not None and self.baseline.missing:
            initial = False  # the group did not exist at the watch start: all of it is new
        previous = self.stored_generation
        self.stored_generation = self.generation = meta.generation
        if meta.generation == 0 and not meta.members and previous < 0:
            # A group being created (its first JoinGroup was asked for a member id) is
            # stored empty at generation 0: nothing has rebalanced yet, no row to show.
            self.stored_members = {}
            return []
        members = {
            m.member_id: MemberSnapshot(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.host,
                instance_id=m.instance_id,
                subscription=m.subscription,
                # (the assignment the leader's SyncGroup stored with the generation)
                partitions=None
                if m.assignment is None
                else {t: list(ids) for t, ids in m.assignment.items()},
            )
            for m in meta.members
        }
        before = self.stored_members
        if before is None and self.baseline is not None and not initial:
            before = {m.member_id: m for m in self.baseline.members}
        self.stored_members = members
        between = list(self.consumer_epochs_between)
        self.consumer_epochs_between.clear()
        self.members_deleted = set()
        # The record is written while the group completes its rebalance: its state
        # timestamp is when the join phase ended, i.e. when SyncGroup began.
        synced = meta.state_ts_ms if meta.members and meta.state_ts_ms > 0 else None
        data: dict[str, Any] = {
            "inferred": False,
            "previous": previous if previous >= 0 else None,
            "initial": initial,
            "stored_in": OFFSETS_TOPIC,
            "partition": rec.partition,
            "offset": rec.offset,
            "written_ms": rec.timestamp_ms,
            "protocol_type": meta.protocol_type,
            "protocol": meta.protocol,
            "leader": meta.leader,
            "state_ts_ms": meta.state_ts_ms,
            "sync_ms": synced,
            # A consumer group's epochs stored since the classic record before: who owned
            # which partition then is not stored by name (the owners before are unknown).
            **({"consumer_epochs_between": between} if between else {}),
            # Each member's timeouts as it joined: its session timeout and its rebalance
            # timeout (max.poll.interval.ms), for explain's advice when nothing was traced.
            "members": [
                {
                    **members[r.member_id].to_data(),
                    "session_timeout_ms": r.session_timeout_ms,
                    "rebalance_timeout_ms": r.rebalance_timeout_ms,
                }
                for r in meta.members
            ],
        }
        if initial or before is None:
            # Found by the look-back: it began before the watch, about when it was
            # stored, for a cause not seen. Nothing to compare with (the watch started
            # mid-rebalance): the cause is guessed from the polls once the group settles.
            if initial:
                self.attributed_generation = meta.generation
                data["rebalance_started_ms"] = synced or rec.timestamp_ms
            return [self._event("GenerationChanged", now_ms, **data)]
        p = self.pending
        stored = _Pending(
            joined={k: m for k, m in members.items() if k not in before},
            left={k: m for k, m in before.items() if k not in members},
            saw_rebalancing=True,
            started_ms=p.started_ms,
            sync_ms=p.sync_ms,
            outage=p.outage,
        )
        stored.dropped_in_rebalance = p.dropped_in_rebalance & set(stored.left)
        for k, m in members.items():
            old = before[k].subscription if k in before else None
            if old is not None and m.subscription is not None and old != m.subscription:
                stored.resubscribed[k] = (old, m.subscription)
        snap = GroupSnapshot(
            group=self.group, state="CompletingRebalance", members=tuple(members.values())
        )
        if p.started_ms is not None:
            data["rebalance_started_ms"] = p.started_ms
        why = attribute(stored, None, snap, self.started_mid_rebalance)
        if why.cause is Cause.UNKNOWN and not self.started_mid_rebalance:
            # Same members, same subscriptions: the records cannot say why. A subscribed
            # topic that grew shows in the assignment, so the cause waits for the group
            # to settle (_settle_known compares the Stable snapshots).
            return [self._event("GenerationChanged", now_ms, **data)]
        data.update(why.to_data(also=False))
        self.attributed_generation = meta.generation
        # What the polls saw of this rebalance is spent; moves wait for it to settle.
        self.pending = _Pending()
        self.started_mid_rebalance = False
        return [
            self._event("GenerationChanged", now_ms, **data),
            self._event("RebalanceAttributed", now_ms, **why.to_data()),
        ]

    def stored_consumer_record(self, rec: ConsumerGroupRecord) -> None:
        """A record the group stored as a consumer group, read between its classic ones.

        Kafka's online upgrade makes a classic group a consumer group when a member joins
        on the consumer protocol (its classic members go on in it), and a classic group
        again when the last such member leaves. The member records say who joined meanwhile,
        so the classic record on the way back is compared with them (the member that left
        is a leave), not with the record from before the upgrade: the classic group's
        tombstone that the upgrade wrote is not its deletion. The assignments of that time
        are stored by topic id, not read: the next classic record says its owners before
        are unknown."""
        if self.stored_members is None:
            generation, members_before = self.upgraded_from
            if members_before is None or not upgrade_follows(self.tombstone_ms, rec):
                return  # no classic record yet to compare the next one with
            # The classic group's tombstone was its conversion to a consumer group.
            self.stored_generation, self.stored_members = generation, members_before
            self.attributed_generation = max(self.attributed_generation, generation)
            self.upgraded_from = (-1, None)
        if rec.kind is ConsumerRecordType.GROUP_METADATA:
            if isinstance(rec.value, GroupEpoch):
                self.consumer_epochs_between.append(rec.value.epoch)
                if self.members_deleted:
                    # An epoch stored after a member's record was deleted: it left the
                    # consumer group (its leave bumps the epoch). Kept, a group that
                    # stays upgraded would hold every member id it ever had.
                    self.stored_members = {
                        k: v
                        for k, v in self.stored_members.items()
                        if k not in self.members_deleted
                    }
                    self.members_deleted = set()
            return
        if rec.kind is not ConsumerRecordType.MEMBER_METADATA or not rec.member_id:
            return
        if rec.value is None:
            # Not a leave yet: the conversion back to classic deletes every member's
            # record at once, the one that left and those that stay, and then the epoch
            # too (no epoch after it). Who left then is who the classic record after it
            # does not list.
            self.members_deleted.add(rec.member_id)
            return
        self.members_deleted.discard(rec.member_id)
        members = dict(self.stored_members)
        if isinstance(rec.value, MemberMetadata) and rec.member_id not in members:
            v = rec.value
            # (no subscription: one stored as a consumer group's is not compared with a
            # classic record's, which a member that changed nothing would seem to change)
            members[rec.member_id] = MemberSnapshot(
                member_id=rec.member_id, client_id=v.client_id, host=v.host,
                instance_id=v.instance_id,
            )  # fmt: skip
        self.stored_members = members

    def _settle_known(self, snap: GroupSnapshot, now_ms: int) -> list[Event]:
        """Settled, with generation ids from the broker (a consumer group's epochs, or the
        records in __consumer_offsets): the partitions that moved. Causes went with the
        epoch change or the record, except for a record with nothing to compare it with,
        or whose members and subscriptions did not change: its cause is found here from
        what the polls saw and how the assignment changed (a topic grew), else
        `unknown`."""
        base = self.baseline
        moves = _moves(base, snap) if base is not None else []
        p = self.pending
        events = []
        if moves:
            events.append(self._event("PartitionsMoved", now_ms, moves=moves, count=len(moves)))
        if self.stored_generation > self.attributed_generation:
            why = attribute(p, base, snap, self.started_mid_rebalance)
            events.append(self._event("RebalanceAttributed", now_ms, **why.to_data()))
            self.attributed_generation = self.stored_generation
        self.pending = _Pending()
        self.started_mid_rebalance = False
        self.baseline = snap
        return events


_GENERATION_TYPES = frozenset({"GenerationChanged", "RebalanceAttributed", "PartitionsMoved"})


def _shape(snap: GroupSnapshot) -> tuple[Any, ...]:
    """A snapshot without its lag: what makes a GroupObserved worth printing again."""
    return (
        snap.state,
        snap.protocol,
        snap.coordinator,
        snap.missing,
        snap.members,
        snap.group_epoch,
        snap.assignment_epoch,
    )


def _moves(base: GroupSnapshot, snap: GroupSnapshot) -> list[dict[str, Any]]:
    if base.state == "Stable" and any(m.partitions is None for m in base.members):
        return []
    before = {tp: (mid,) for tp, mid in base.owners().items()}
    after = {tp: (mid,) for tp, mid in snap.owners().items()}
    clients = {m.member_id: m.client_id for m in (*base.members, *snap.members)}
    out: list[dict[str, Any]] = []
    for mv in diff_owners(before, after):
        # A snapshot names one owner per partition, or none.
        src = mv.before[0] if mv.before else None
        dst = mv.after[0] if mv.after else None
        out.append(
            {
                "topic": mv.topic,
                "partition": mv.partition,
                "from": src,
                "to": dst,
                "from_client": clients.get(src or "", ""),
                "to_client": clients.get(dst or "", ""),
            }
        )
    return out


def _names(members: dict[str, MemberSnapshot]) -> str:
    return ", ".join(m.label for m in members.values())


def _replaced(left: dict[str, MemberSnapshot], joined: dict[str, MemberSnapshot]) -> list[str]:
    """A group.instance.id that left under one member id and joined under another: the
    static member was replaced (its process restarted, or a second process took the id;
    the broker fenced the old member id). Taken out of `left` and `joined`."""
    out: list[str] = []
    for lid, lm in list(left.items()):
        if lm.instance_id is None:
            continue
        for jid, jm in list(joined.items()):
            if jm.instance_id == lm.instance_id:
                out.append(f"static member {lm.instance_id} replaced: member id {lid} → {jid}")
                del left[lid], joined[jid]
                break
    return out


def _rejoins(left: dict[str, MemberSnapshot], joined: dict[str, MemberSnapshot]) -> list[str]:
    """The same process (client id and host) leaving and joining again with a new member
    id is a rejoin: kafka-python and Java dynamic members do that after
    max.poll.interval.ms expires (LeaveGroup, reset, JoinGroup). Each pair found is taken
    out of `left` and `joined`; what is returned says who rejoined as what."""
    rejoined: list[str] = []
    for lid, lm in list(left.items()):
        for jid, jm in list(joined.items()):
            if (lm.client_id, lm.host, lm.instance_id) == (jm.client_id, jm.host, jm.instance_id):
                rejoined.append(f"{jm.label} left and rejoined as {jid}")
                del left[lid], joined[jid]
                break
    return rejoined


def attribute(
    p: _Pending, base: GroupSnapshot | None, snap: GroupSnapshot, mid_rebalance: bool = False
) -> Attribution:
    """The most likely cause of the rebalance that just settled, and whether it is a guess."""
    found: list[tuple[Cause, str]] = []  # (cause, evidence), most likely first
    joined, left = dict(p.joined), dict(p.left)
    replaced = _replaced(left, joined)
    rejoined = _rejoins(left, joined)
    dropped = {mid: m for mid, m in left.items() if mid in p.dropped_in_rebalance}
    if dropped:
        found.append(
            (
                Cause.TIMED_OUT,
                f"{_names(dropped)} stayed in the group while it rebalanced, then was "
                "dropped: it did not rejoin within the rebalance timeout "
                "(max.poll.interval.ms)",
            )
        )
        left = {mid: m for mid, m in left.items() if mid not in dropped}
    if rejoined:
        found.append(
            (
                Cause.TIMED_OUT,
                "; ".join(rejoined) + ": most likely max.poll.interval.ms expired "
                "(or the process restarted)",
            )
        )
    if replaced:
        found.append((Cause.STATIC_MEMBER_REPLACED, "; ".join(replaced)))
    if p.fenced:
        found.append(
            (
                Cause.TIMED_OUT,
                f"{_names(p.fenced)} came back with the same member id and its member epoch "
                "reset: it was fenced (session timeout, or max.poll.interval.ms expired) "
                "and rejoined",
            )
        )
    if left:
        found.append(
            (
                Cause.MEMBER_LEFT,
                f"{_names(left)} left (the broker does not say whether by LeaveGroup or "
                "session timeout)",
            )
        )
    if joined:
        found.append((Cause.MEMBER_JOINED, f"{_names(joined)} joined"))
    for mid, (old, new) in p.resubscribed.items():
        who = next((m.label for m in snap.members if m.member_id == mid), mid)
        found.append(
            (
                Cause.SUBSCRIPTION_CHANGED,
                f"{who} changed subscription {list(old)} → {list(new)}",
            )
        )
    epochs = snap.group_epoch is not None
    if p.metadata_changed and not (p.joined or p.left or p.resubscribed or p.fenced):
        found.append(
            (
                Cause.PARTITIONS_CHANGED,
                "the group epoch moved with the same members and subscriptions, and with "
                "another hash of the subscribed topics' metadata (stored with the epoch): "
                "a subscribed topic grew, appeared or was deleted",
            )
        )
    elif base is not None and base.state == "Stable" and (snap.state == "Stable" or epochs):
        # A consumer group's target assignment is known as soon as its epoch moves.
        before, after = set(base.owners()), set(snap.targets() if epochs else snap.owners())
        if before != after and not (p.joined or p.left or p.resubscribed or p.fenced):
            found.append(
                (
                    Cause.PARTITIONS_CHANGED,
                    f"assigned partitions went from {len(before)} to {len(after)} with the "
                    "same members and subscriptions: a subscribed topic grew, appeared or "
                    "was deleted",
                )
            )
    if not found:
        if mid_rebalance:
            evidence = "the watch started during this rebalance; its cause was not seen"
        elif p.outage:
            evidence = "it happened while the broker was unreachable"
        elif epochs:
            evidence = (
                "the group epoch moved with the same members, subscriptions and partitions: "
                "a member was fenced and rejoined between two polls, or the metadata of a "
                "subscribed topic changed"
            )
        else:
            evidence = (
                "the group rebalanced with the same members, subscriptions and partitions: "
                "a member rejoined (poll timeout with a static member, metadata refresh, or "
                "a client-side rejoin)"
            )
        return Attribution(cause=Cause.UNKNOWN, guess=True, evidence=evidence)
    cause, evidence = found[0]
    # A fact when exactly one thing visibly changed; a guess when several did, or when the
    # cause is itself an inference (timed out, partitions changed).
    inferred = (Cause.TIMED_OUT, Cause.PARTITIONS_CHANGED)
    guess = len(found) > 1 or cause in inferred or p.outage
    return Attribution(cause=cause, guess=guess, evidence=evidence, also=tuple(found[1:]))
