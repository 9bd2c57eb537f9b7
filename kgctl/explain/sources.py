"""Where `kgctl explain` learns about a group: every source the user has, read once.

- a recording (`--recording FILE`: events written by `--record` or `--output json`);
- the group's records in `__consumer_offsets` (a classic group's stored generations:
  members, subscriptions, leader, when each was stored), turned into events by the
  observer's inferrer, as `kgctl watch` does;
- a live DescribeGroups / ConsumerGroupDescribe (the state now, for the exit status);
- a trace topic (`--trace-topic`: kgctl members' and the proxy's own events);
- a broker log (`--broker-log PATH`: the `Preparing to rebalance … (reason: …)` lines,
  with the clients' KIP-800 reasons), or the local broker's own log when the bootstrap
  is a `kgctl broker` cluster;
- the cluster's group bounds (for advice within them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from kgctl.adapters.admin import GroupAdmin
from kgctl.adapters.chaos import ChaosAdmin
from kgctl.adapters.consumer_group_records import ConsumerGroupRecord
from kgctl.adapters.group_log import GroupLogReader, GroupLogUnavailable
from kgctl.adapters.group_records import GroupRecord
from kgctl.adapters.trace import read_trace
from kgctl.errors import KgctlError, NotFoundError, UsageError
from kgctl.model.bounds import GroupBounds
from kgctl.model.diagnosis import UPGRADE_REFUSED, BrokerReason
from kgctl.model.events import Event, concerns, groups_in
from kgctl.observe.broker_log import parse_broker_log, refused_upgrade_note
from kgctl.observe.infer import Inferrer
from kgctl.observe.stored_epochs import stored_epochs
from kgctl.observe.watch import read_events
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


@dataclass
class Gathered:
    """Events and side facts from every source read, and what could not be read."""

    events: list[Event] = field(default_factory=list)
    broker_reasons: list[BrokerReason] = field(default_factory=list)
    bounds: GroupBounds | None = None
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    live: bool = False
    recorded_groups: set[str] = field(default_factory=set)  # the recordings' (`groups_in`)


def read_recording(path: Path, group: str, into: Gathered) -> None:
    if not path.exists():  # as `kgctl report` says it (exit 4)
        raise NotFoundError(f"--recording {path}: no such file")
    try:
        every = list(read_events(path))
    except UsageError as exc:
        raise UsageError(str(exc).replace("--replay", "--recording")) from None
    events = [e for e in every if concerns(e, group)]
    into.recorded_groups.update(groups_in(every))
    into.events += events
    into.sources.append(f"recording {path} ({len(events)} events)")


def read_broker_log(path: Path, group: str, into: Gathered) -> None:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            found = parse_broker_log(handle, group)
    except OSError as exc:
        raise UsageError(f"--broker-log {path}: cannot read it ({exc.strerror})") from None
    # A refused upgrade is no rebalance: a note, not a reason the diagnosis reads.
    into.broker_reasons += [br for br in found if br.kind != UPGRADE_REFUSED]
    into.notes += [refused_upgrade_note(br) for br in found if br.kind == UPGRADE_REFUSED]
    about = sum(1 for br in found if br.group == group)  # a growth's lines name no group
    into.sources.append(f"broker log {path} ({about} lines about the group)")


def read_consumer_group_log(
    settings: ClientSettings, group: str, since_ms: int, into: Gathered
) -> None:
    """A consumer-protocol group's stored epochs (kgctl/observe/stored_epochs.py): each a
    rebalance, its cause from the member records written with it."""
    try:
        records = GroupLogReader(settings, group).consumer_history()
    except GroupLogUnavailable as exc:
        into.notes.append(f"__consumer_offsets not read: {exc}")
        return
    told = stored_epochs(group, records)
    into.events += [e for e in told.events if e.ts_ms >= since_ms]
    into.sources.append(
        f"__consumer_offsets ({sum(isinstance(r, ConsumerGroupRecord) for r in records)} "
        "consumer-group records of the group)"
    )
    wire = "--trace-topic through kgctl proxy, or a kgctl watch recording, has them"
    if told.first_epoch is None:
        into.notes.append(
            "a consumer-protocol (KIP-848) group's past rebalances are unknown from the "
            f"cluster: no epoch of it is left in __consumer_offsets ({wire})"
        )
        return
    if told.after_classic:
        into.notes.append(
            f"the group became a consumer group at epoch {told.first_epoch} (Kafka's online "
            "upgrade of a classic group, which writes its members' records anew): what "
            "happened before that epoch is unknown from these records"
        )
    into.notes.append(
        "a consumer-protocol (KIP-848) group's rebalances are told from its epoch and member "
        f"records in __consumer_offsets, from epoch {told.first_epoch} on; its assignments "
        "are stored by topic id, so partitions moved and revoked and the members' time "
        f"without partitions are unknown from them ({wire})"
    )


def read_cluster(
    settings: ClientSettings,
    group: str,
    since_ms: int,
    now_ms: int,
    into: Gathered,
    *,
    offsets: bool = True,
    trace_topic: str | None = None,
    admin: GroupAdmin | None = None,
) -> None:
    """The live description, the stored generations and the trace topic. `admin`: the
    caller's, when it has one (`watch --once`), so what it learnt of the broker is not
    learnt (and warned about) again."""
    own = admin is None
    admin = admin or GroupAdmin(settings)
    try:
        snap = admin.describe(group)
    finally:
        if own:
            admin.close()
    into.live = True
    if offsets and not snap.missing and snap.group_epoch is None:
        try:
            records = GroupLogReader(settings, group).history(since_ms)
        except GroupLogUnavailable as exc:
            into.notes.append(f"__consumer_offsets not read: {exc}")
        else:
            stored = Inferrer(group)
            stored.stored_source = True
            first = records[0] if records else None
            if isinstance(first, GroupRecord) and first.metadata is not None:
                if first.metadata.generation <= 1:
                    # The group's own beginning is in the window: its first members
                    # joined an empty group (not a generation found already made).
                    stored.stored_members = {}
            for i, rec in enumerate(records):
                if isinstance(rec, ConsumerGroupRecord):
                    stored.stored_consumer_record(rec)  # a mixed group's time between
                    continue
                at = rec.timestamp_ms if rec.timestamp_ms > 0 else now_ms
                into.events += stored.stored_record(
                    rec, at, initial=i == 0 and stored.stored_members is None
                )
            into.sources.append(f"__consumer_offsets ({len(records)} records of the group)")
    elif offsets and not snap.missing and not trace_topic:
        read_consumer_group_log(settings, group, since_ms, into)
    elif trace_topic and not snap.missing:
        # The trace has every epoch's steps; the records would tell the same epochs a
        # second time, with less (no assignments by name), and the two are not merged.
        into.notes.append(
            "a consumer-protocol (KIP-848) group's rebalances are told from the trace: its "
            "epoch records in __consumer_offsets are read only without --trace-topic"
        )
    # The state now, last: its snapshot is what the exit status judges.
    live = Inferrer(group)
    into.events += [e for e in live.observe(snap, now_ms) if e.type == "GroupObserved"]
    into.sources.append("DescribeGroups now" if snap.group_epoch is None else
                        "ConsumerGroupDescribe now")  # fmt: skip
    if trace_topic:
        traced = read_trace(settings, trace_topic, group, since_ms, settings.timeout_s)
        into.events += traced
        into.sources.append(f"trace topic {trace_topic} ({len(traced)} events)")
    try:
        chaos_admin = ChaosAdmin(settings)
        try:
            into.bounds = chaos_admin.group_bounds()
        finally:
            chaos_admin.close()
    except KgctlError as exc:
        into.notes.append(f"group bounds not read: {exc}")
