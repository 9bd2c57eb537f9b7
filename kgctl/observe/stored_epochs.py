"""A consumer-protocol (KIP-848) group's past rebalances, from its records in
`__consumer_offsets` (`kgctl explain` and `watch --once` from the cluster).

The group coordinator bumps a consumer group's epoch when a member joins, leaves or is
removed, changes its subscription, or when the subscribed topics' metadata changes, and
writes the member records that made it do so in the same batch, before the epoch. So
the members at each stored epoch are what their records said last, and the group as it
was at each epoch is a snapshot the observer's `Inferrer` diffs as it diffs a live
ConsumerGroupDescribe answer: the same causes, in the same words, as the live watch.

What the records cannot say, and so is not said:
- the group's state (each snapshot reads Stable: nothing is inferred from a state);
- assignments by name (stored by topic id): no partition is named, moved or revoked;
- why a member went: a leave and a session's expiry both delete its records (the
  broker's log tells them apart).
The first epoch read is where the story starts (compaction may have removed older
ones, or the group was a classic group before it: Kafka's online upgrade): it is the
baseline, not a rebalance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kgctl.adapters.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerRecordType,
    GroupEpoch,
    MemberAssignment,
    MemberMetadata,
)
from kgctl.adapters.group_log import AnyGroupRecord
from kgctl.model.events import Event
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.observe.infer import Inferrer

# What a stored epoch says; the snapshots themselves are the records', not descriptions
# the broker gave (their GroupObserved would read as the group seen Stable then).
_TOLD = frozenset({"GenerationChanged", "RebalanceAttributed", "MemberJoinedGroup",
                   "MemberLeftGroup"})  # fmt: skip


@dataclass(frozen=True)
class StoredEpochs:
    """The events the stored epochs tell, and the epoch the story starts at (None when
    no epoch was read)."""

    events: tuple[Event, ...]
    first_epoch: int | None
    after_classic: bool  # the group was a classic group before its first epoch read


def stored_epochs(group: str, records: Sequence[AnyGroupRecord]) -> StoredEpochs:
    """Each stored epoch after the first, as the live watch would have told it."""
    inferrer = Inferrer(group)
    inferrer.stored_source = True
    members: dict[str, MemberMetadata] = {}
    member_epochs: dict[str, int] = {}
    last_hash: int | None = None
    first: int | None = None
    after_classic = False
    events: list[Event] = []
    told: list[Event] = []  # a deleted consumer group's, dated: a new one reuses epochs
    # The epoch each member must reach, and who has not yet: once nobody is left to, the
    # group was reconciled (Stable) at that record's write time.
    epoch_now, waiting, reconciled = -1, set[str](), dict[int, int]()
    for rec in records:
        if not isinstance(rec, ConsumerGroupRecord):
            # A classic record: the group was (or is again) a classic group; the consumer
            # group that follows starts a story of its own.
            inferrer, members, member_epochs, last_hash, first = Inferrer(group), {}, {}, None, None
            inferrer.stored_source, after_classic = True, True
            events, epoch_now, waiting, reconciled = [], -1, set(), {}
            continue
        value, mid = rec.value, rec.member_id
        if rec.kind is ConsumerRecordType.MEMBER_METADATA and mid:
            if isinstance(value, MemberMetadata):
                members[mid] = value
            else:
                members.pop(mid, None)
                member_epochs.pop(mid, None)
                _reached(waiting, mid, epoch_now, rec.timestamp_ms, reconciled)
        elif rec.kind is ConsumerRecordType.CURRENT_MEMBER_ASSIGNMENT and mid:
            if isinstance(value, MemberAssignment):
                member_epochs[mid] = value.member_epoch
                if value.member_epoch == epoch_now and value.pending_revocation == 0:
                    # (state 0: at its epoch, nothing to give up or wait for)
                    if value.state == 0:
                        _reached(waiting, mid, epoch_now, rec.timestamp_ms, reconciled)
        elif rec.kind is ConsumerRecordType.GROUP_METADATA and isinstance(value, GroupEpoch):
            changed = (
                last_hash is not None
                and value.metadata_hash is not None
                and value.metadata_hash != last_hash
            )
            if value.metadata_hash is not None:
                last_hash = value.metadata_hash
            snap = _snapshot(group, value.epoch, members, member_epochs)
            epoch_now, waiting = value.epoch, set(members)
            _reached(waiting, None, epoch_now, rec.timestamp_ms, reconciled)
            if first is None:
                first = value.epoch
                inferrer.observe(snap, rec.timestamp_ms)  # the baseline
                continue
            if changed:
                inferrer.stored_metadata_changed()
            # A member back under a member id that left was fenced and rejoined: the
            # attribution says so; its join, read alone, would be a new member's.
            back = set(inferrer.gone)
            events += [
                _stamped(e, value.epoch)
                for e in inferrer.observe(snap, rec.timestamp_ms)
                if e.type in _TOLD
                and not (e.type == "MemberJoinedGroup" and e.data.get("member_id") in back)
            ]
        elif rec.kind is ConsumerRecordType.GROUP_METADATA:
            # The consumer group deleted: one made again later is a new group.
            inferrer, members, member_epochs, last_hash, first = Inferrer(group), {}, {}, None, None
            inferrer.stored_source = True
            told += [_dated(e, reconciled) for e in events]
            events, epoch_now, waiting, reconciled = [], -1, set(), {}
    told += [_dated(e, reconciled) for e in events]
    return StoredEpochs(tuple(told), first, after_classic)


def _reached(
    waiting: set[str], mid: str | None, epoch: int, at_ms: int, reconciled: dict[int, int]
) -> None:
    """`mid` reached `epoch` (or left); the group was reconciled when nobody waits."""
    if mid is not None:
        if mid not in waiting:
            return
        waiting.discard(mid)
    if not waiting and epoch >= 0:
        reconciled.setdefault(epoch, at_ms)


def _dated(e: Event, reconciled: dict[int, int]) -> Event:
    """A generation's end as the records date it: when its last member's assignment
    record reached the epoch with nothing pending (not when the epoch was written,
    which is when it began); unknown when no record says so."""
    if e.type != "GenerationChanged":
        return e
    data = {**e.data, "settled": False}
    stable = reconciled.get(int(e.data.get("group_epoch", -1)))
    if stable is not None:
        data["stable_ms"] = stable
    return replace(e, data=data)


def _stamped(e: Event, epoch: int) -> Event:
    """A member's join or leave as the records told it: its record was written (or
    deleted) with `epoch`; not a description's."""
    if e.type not in ("MemberJoinedGroup", "MemberLeftGroup"):
        return e
    return replace(e, data={**e.data, "stored_with_epoch": epoch})


def _snapshot(
    group: str,
    epoch: int,
    members: dict[str, MemberMetadata],
    member_epochs: dict[str, int],
) -> GroupSnapshot:
    return GroupSnapshot(
        group=group,
        state="Stable",
        protocol_type="consumer",
        group_type="consumer",
        group_epoch=epoch,
        assignment_epoch=epoch,
        members=tuple(
            MemberSnapshot(
                member_id=mid,
                client_id=m.client_id,
                host=m.host,
                instance_id=m.instance_id,
                subscription=m.subscribed_topics,
                member_epoch=member_epochs.get(mid),
                regex=m.subscribed_regex or None,
            )
            for mid, m in sorted(members.items())
        ),
    )
