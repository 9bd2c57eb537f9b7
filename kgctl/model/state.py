"""The group state that `fold` builds from events: members, generations, ownership, log.

Everything here is immutable (frozen dataclasses, tuples, and mappings that are never
mutated after construction), so a state can be kept, compared and rendered while the
fold moves on. Times are wall-clock milliseconds taken from the events themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from kgctl.model.events import Event

# A partition as a key: (topic, partition id).
TopicPartition = tuple[str, int]
# Owned partitions, {topic: sorted ids}; never mutated once inside a state.
Owned = Mapping[str, tuple[int, ...]]

# Member phases, in the order a rebalance walks through them.
PHASE_UNKNOWN = "unknown"
PHASE_JOINING = "JoinGroup"  # JoinGroup sent, waiting for the response
PHASE_SYNCING = "SyncGroup"  # JoinGroup answered, SyncGroup pending
PHASE_STABLE = "Stable"  # assignment received and applied
PHASE_RECONCILING = "Reconciling"  # consumer protocol: assignment not yet its target
PHASE_LEFT = "left"
PHASE_FAILED = "failed"

# The broker's group states during which a rebalance is in progress (classic:
# PreparingRebalance, CompletingRebalance; consumer: Assigning, Reconciling), and those
# of them in which the assignment is known and members are applying it.
REBALANCING_STATES = frozenset(
    {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}
)
SYNCING_STATES = frozenset({"CompletingRebalance", "Reconciling"})

DEFAULT_LOG_LIMIT = 200


@dataclass(frozen=True)
class MemberState:
    """One group member as last seen, by its own events or by the broker."""

    key: str  # the member's label (--name) if it has one, else its member id
    member_id: str = ""
    client_id: str = ""
    host: str = ""
    instance_id: str | None = None
    partitions: Owned = field(default_factory=dict)
    phase: str = PHASE_UNKNOWN
    generation: int = -1  # the generation the member itself reported; -1 if unknown
    first_seen_ms: int = 0
    last_seen_ms: int = 0
    alive: bool = True
    left_ms: int | None = None
    left_reason: str = ""
    unassigned_since_ms: int | None = None  # set while the member owns nothing
    # When the member was alive: (start, end) spans, the last one open (None) while it
    # lives. A restarted member has one span per life; its down time is in none.
    lives: tuple[tuple[int, int | None], ...] = ()
    subscription: tuple[str, ...] = ()
    lag: int | None = None
    # member (its own events, or a proxy's trace of it: then wire too) / observer
    sources: frozenset[str] = frozenset()
    # Consumer-protocol (KIP-848) members, from ConsumerGroupDescribe: the member epoch,
    # and the assignment it is moving to (None for classic members).
    epoch: int = -1
    target: Owned | None = None
    # Which group protocol the member speaks (classic | consumer; "" unknown): its own
    # MemberStarted says, or ConsumerGroupDescribe's MemberType (v1). A consumer group
    # being migrated has both. `member_state` is a kgctl consumer-protocol member's own
    # state, by Java's MemberState names (JOINING, RECONCILING, STABLE, FENCED, ...).
    protocol: str = ""
    member_state: str = ""
    regex: str | None = None  # a consumer-protocol member's broker-side subscription regex
    # False for a member whose events never carry a generation or epoch (Java's
    # VerifiableConsumer in a chaos fleet, MemberStarted says so): it is judged by what it
    # reports (its callbacks ran, it has what it was given), not by a generation.
    reports_generation: bool = True

    @property
    def name(self) -> str:
        """What to call the member on screen: its label, else client id, else member id."""
        if self.key != self.member_id:
            return self.key
        return self.client_id or self.member_id

    @property
    def partition_count(self) -> int:
        return sum(len(ids) for ids in self.partitions.values())

    @property
    def reconciling(self) -> bool:
        """A consumer-protocol member whose assignment is not yet its target."""
        return self.target is not None and dict(self.target) != dict(self.partitions)


@dataclass(frozen=True)
class GenerationRecord:
    """One generation: why it started, its JoinGroup → SyncGroup → Stable phases, its end.

    `start_ms` is when the rebalance that produced it began; `sync_ms` when JoinGroup
    was answered (SyncGroup phase); `stable_ms` when every live member had its
    assignment; `end_ms` when the next rebalance began.
    """

    generation: int
    start_ms: int
    inferred: bool = False  # numbered by the observer, not reported by the broker
    cause: str = ""
    cause_guess: bool = True
    evidence: str = ""
    sync_ms: int | None = None
    stable_ms: int | None = None
    # The latest JoinCompleted of this generation by the members' own clocks: members'
    # events arrive interleaved, so the last one folded is not always the last one made.
    completed_ms: int | None = None
    end_ms: int | None = None
    leader: str = ""
    members: tuple[str, ...] = ()
    # False when the rebalance's start is only bounded: a generation found stored when
    # the watch began is known from when its join phase ended (the record's state time).
    start_exact: bool = True

    def duration_ms(self, now_ms: int) -> int:
        return (self.end_ms if self.end_ms is not None else now_ms) - self.start_ms

    def phase_spans(self, now_ms: int) -> tuple[tuple[str, int, int], ...]:
        """(phase, start, end) for JoinGroup, SyncGroup and Stable, as far as known."""
        end = self.end_ms if self.end_ms is not None else now_ms
        spans: list[tuple[str, int, int]] = []
        join_end = self.sync_ms if self.sync_ms is not None else self.stable_ms
        spans.append((PHASE_JOINING, self.start_ms, join_end if join_end is not None else end))
        if self.sync_ms is not None:
            sync_end = self.stable_ms if self.stable_ms is not None else end
            spans.append((PHASE_SYNCING, self.sync_ms, sync_end))
        if self.stable_ms is not None:
            spans.append((PHASE_STABLE, self.stable_ms, end))
        return tuple(spans)

    def rebalance_ms(self) -> int | None:
        """How long the group took to become stable, if it did."""
        return None if self.stable_ms is None else self.stable_ms - self.start_ms

    def rebalance_window(self, now_ms: int) -> tuple[int, int]:
        """From the rebalance's start to the group stable in this generation (or, if it
        never was, to the next rebalance, or `now_ms` while it runs)."""
        if self.stable_ms is not None:
            return self.start_ms, self.stable_ms
        return self.start_ms, self.end_ms if self.end_ms is not None else now_ms


@dataclass(frozen=True)
class OwnershipSpan:
    """A member owned a partition from `start_ms` until `end_ms` (None: still owns it)."""

    member: str
    generation: int
    start_ms: int
    end_ms: int | None = None

    def covers(self, at_ms: int) -> bool:
        return self.start_ms <= at_ms and (self.end_ms is None or at_ms < self.end_ms)


@dataclass(frozen=True)
class GroupState:
    """Everything known about one consumer group, built by `fold`."""

    group: str
    state: str = "Unknown"  # the broker's group state (Stable, PreparingRebalance, ...)
    protocol_type: str = ""
    protocol: str = ""  # the assignor the group agreed on (range, roundrobin, ...)
    group_type: str = ""  # classic | consumer (KIP-848), when the broker said
    group_epoch: int = -1  # consumer groups: the epoch of the group's membership
    assignment_epoch: int = -1  # consumer groups: the epoch its target assignment is for
    leader: str = ""  # member key of the leader, when a member reported it
    coordinator: str = ""  # "id host:port"
    generation: int = -1
    generation_inferred: bool = False
    rebalancing: bool = False
    rebalance_started_ms: int | None = None
    # That start is the first description that showed the rebalance, not a step anyone
    # made: it began between that poll and the one before, so it is a bound.
    rebalance_start_polled: bool = False
    members: Mapping[str, MemberState] = field(default_factory=dict)
    generations: tuple[GenerationRecord, ...] = ()
    ownership: Mapping[TopicPartition, tuple[OwnershipSpan, ...]] = field(default_factory=dict)
    recent: tuple[Event, ...] = ()
    log_limit: int = DEFAULT_LOG_LIMIT
    # The broker's last description's lag: topic -> partition -> records behind.
    lag: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    total_lag: int | None = None
    connected: bool = True
    disconnected_since_ms: int | None = None
    last_error: str = ""
    missing: bool = False  # the broker does not know the group
    observed_ms: int | None = None  # the last broker snapshot
    updated_ms: int = 0
    events_folded: int = 0
    # member id -> key of the first member with it, for `find_member` (a scan of 1,000
    # members per lookup made the fold of one description of 1,000 members N²). Valid only
    # for the `members` mapping it was made for (`member_index_of`): a state whose
    # members were replaced any other way is scanned, as before.
    member_index: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    member_index_of: Mapping[str, MemberState] | None = field(
        default=None, compare=False, repr=False
    )
    # The member the last check for the end of a rebalance found still on its way, and
    # its place in `members`' order: the next check looks at it first and goes on from
    # there (`fold._maybe_stable`; a scan from the first member at each member's
    # completion made a rebalance of N members cost N²).
    pending_hint: str = field(default="", compare=False, repr=False)
    pending_at: int = field(default=0, compare=False, repr=False)
    # What the batch of events that made this state (`fold.fold_many`) changed of the
    # timeline (ownership spans and members' lives): (events folded before the batch,
    # the earliest instant a change reaches back to: inf for none, -inf for everywhere).
    # None where that is not known (a state folded one event at a time): a reader
    # compares the mappings itself. The live view's memo reads it instead of comparing
    # 10,000 partitions' spans every frame (render/group_view.FrameMemo).
    batch_edits: tuple[int, float] | None = field(default=None, compare=False, repr=False)

    @property
    def live_members(self) -> tuple[MemberState, ...]:
        return tuple(m for m in self.members.values() if m.alive)

    @property
    def current(self) -> GenerationRecord | None:
        return self.generations[-1] if self.generations else None

    @property
    def stable(self) -> bool:
        """The group is stable: the broker says so (if it was asked) and no rebalance runs."""
        broker_ok = self.state in ("Stable", "Unknown")
        return broker_ok and not self.rebalancing and bool(self.live_members)

    def owners(self, at_ms: int | None = None) -> dict[TopicPartition, tuple[str, ...]]:
        """Who owns each known partition, now (open spans) or at an instant."""
        return {tp: self.owners_of(tp, at_ms) for tp in self.ownership}

    def owners_of(self, tp: TopicPartition, at_ms: int | None = None) -> tuple[str, ...]:
        """Who owns one partition, now (open spans) or at an instant."""
        spans = self.ownership.get(tp, ())
        if at_ms is None:
            return tuple(s.member for s in spans if s.end_ms is None)
        return tuple(s.member for s in spans if s.covers(at_ms))

    def find_member(self, member_id: str) -> MemberState | None:
        if not member_id:
            return None
        if self.member_index_of is self.members:
            key = self.member_index.get(member_id)
            return None if key is None else self.members[key]
        for m in self.members.values():
            if m.member_id == member_id:
                return m
        return None


def member_index(members: Mapping[str, MemberState]) -> dict[str, str]:
    """member id -> the key of the first member (in `members`' order) that has it."""
    out: dict[str, str] = {}
    for key, m in members.items():
        if m.member_id:
            out.setdefault(m.member_id, key)
    return out


_T = TypeVar("_T")
_FIELDS: dict[type, frozenset[str]] = {}


def evolve(obj: _T, **changes: Any) -> _T:
    """`dataclasses.replace` for the frozen state classes here, without re-running
    `__init__` over every field: the fold makes several new states per event, and at
    1,000 members `replace` of the 30-field GroupState was most of its time. The same
    result for these classes (none has `__post_init__` or a field outside `__init__`);
    an unknown field name is a TypeError, as with `replace`."""
    cls = type(obj)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in fields(obj))  # type: ignore[arg-type]
    if not names.issuperset(changes):
        unknown = sorted(set(changes) - names)
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    attrs = obj.__dict__
    if _DRAFT in attrs:
        attrs.update(changes)  # a batch's own state (`drafted`): nobody else holds it
        return obj
    new = object.__new__(cls)
    new.__dict__.update(attrs)
    new.__dict__.update(changes)
    return new


# While `fold.fold_many` folds a batch of events, its state is a draft: a private copy
# that `evolve` changes in place, with the mappings it copied at their first change
# (`writable`) kept under this key (id -> the mapping: held, so no id is reused while
# the batch runs). At 1,000 members a rebalance's events each made several new
# 30-field states and a copy of the members or of the 10,000-partition ownership
# mapping; a batch makes each copy once. A draft never leaves the batch.
_DRAFT = "_draft_mappings"
_EDITED_FROM = "_draft_edited_from"  # the earliest instant the batch changed (`edited`)
_BATCH_FROM = "_draft_batch_from"  # events folded before the batch


def drafted(state: GroupState) -> GroupState:
    """A private copy of `state` to change in place (`evolve`, `writable`); `state`
    itself, and every mapping it holds, stay as they are."""
    copy = object.__new__(type(state))
    copy.__dict__.update(state.__dict__)
    copy.__dict__[_DRAFT] = {}  # (a draft's copy is a new draft: nothing of it is its own)
    copy.__dict__[_EDITED_FROM] = math.inf
    copy.__dict__[_BATCH_FROM] = state.events_folded
    return copy


def finished(draft: GroupState) -> GroupState:
    """The draft as an ordinary state, never changed again."""
    attrs = draft.__dict__
    attrs.pop(_DRAFT, None)
    if _BATCH_FROM in attrs:
        attrs["batch_edits"] = (attrs.pop(_BATCH_FROM), attrs.pop(_EDITED_FROM))
    return draft


def edited(state: GroupState, at: float) -> None:
    """Note that the timeline (an ownership span, a member's life) changed at instant
    `at`: a draft keeps the earliest for its `batch_edits`. A state that is not a draft
    says nothing of its edits (`batch_edits` None), so there is nothing to note."""
    attrs = state.__dict__
    if _EDITED_FROM in attrs and at < attrs[_EDITED_FROM]:
        attrs[_EDITED_FROM] = at


def lives_changed_at(
    old: tuple[tuple[int, int | None], ...], new: tuple[tuple[int, int | None], ...]
) -> float:
    """The earliest instant at which two versions of a member's lives differ: a life
    added or gone at its start, a life's end moved at the earlier end; -inf when one
    holds two lives of one start (which could not be told apart)."""
    if old is new:
        return math.inf
    before, after = dict(old), dict(new)
    if len(before) != len(old) or len(after) != len(new):
        return -math.inf
    first = math.inf
    for start in before.keys() | after.keys():
        if start not in before or start not in after:
            first = min(first, start)
        elif before[start] != after[start]:
            ends = [e for e in (before[start], after[start]) if e is not None]
            first = min(first, min(ends))
    return first


def writable(state: GroupState, name: str) -> dict[Any, Any]:
    """The mapping field `name` of `state`, to change and then set with `evolve`: a copy,
    except in a draft whose own copy it already is."""
    current = getattr(state, name)
    made = state.__dict__.get(_DRAFT)
    if made is None:
        return dict(current)
    if made.get(id(current)) is current:
        return current  # type: ignore[no-any-return]
    copy = dict(current)
    made[id(copy)] = copy
    return copy


def owned_from(raw: object) -> Owned:
    """Read `{topic: [ids]}` (or a list of [topic, id] pairs) into an `Owned` mapping.

    Anything malformed is skipped: events from other versions must not break the fold.
    """
    if isinstance(raw, Mapping) and all(
        type(t) is str and type(ids) is list and {*map(type, ids)} <= {int}
        for t, ids in raw.items()
    ):
        # What an event's JSON gives, read in bulk: every member's callbacks carry one,
        # 2,000 of them in a 1,000-member rebalance.
        return {t: tuple(sorted(set(ids))) for t, ids in sorted(raw.items()) if ids}
    return owned_by_entry(raw)


def owned_by_entry(raw: object) -> Owned:
    """`owned_from`, entry by entry: what is not a whole-number id (a bool, a string, a
    float) skipped, topics named as strings."""
    out: dict[str, set[int]] = {}
    if isinstance(raw, Mapping):
        for topic, ids in raw.items():
            if isinstance(ids, list | tuple):
                for pid in ids:
                    if isinstance(pid, int) and not isinstance(pid, bool):
                        out.setdefault(str(topic), set()).add(pid)
    elif isinstance(raw, list | tuple):
        for pair in raw:
            if isinstance(pair, list | tuple) and len(pair) == 2 and isinstance(pair[1], int):
                out.setdefault(str(pair[0]), set()).add(pair[1])
    return {t: tuple(sorted(ids)) for t, ids in sorted(out.items()) if ids}


def owned_pairs(owned: Owned) -> frozenset[TopicPartition]:
    return frozenset((t, p) for t, ids in owned.items() for p in ids)


def owned_of_pairs(pairs: frozenset[TopicPartition] | set[TopicPartition]) -> Owned:
    out: dict[str, list[int]] = {}
    for t, p in pairs:
        out.setdefault(t, []).append(p)
    return {t: tuple(sorted(ids)) for t, ids in sorted(out.items())}


def format_owned(owned: Owned, limit: int = 0) -> str:
    """`orders[0,1,2] pay[3]`, cut to `limit` characters with an ellipsis when asked."""
    text = " ".join(f"{t}[{','.join(str(p) for p in ids)}]" for t, ids in owned.items())
    if limit and len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text
