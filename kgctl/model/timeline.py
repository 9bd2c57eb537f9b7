"""Timeline queries on a folded `GroupState`: the facts chaos, report and watch share.

Each fact has one definition here, so the three give the same number for the same
events:

- **time without partitions** (`unassigned_ms`): within a window, the time a member was
  alive (one of its `lives`) and owned no partition;
- **partition moves** (`moves`): the partitions whose owners differ between two
  instants. A partition that ends with no owner is a move too (to no one: its topic left
  every subscription, or its owner died and nobody took it over); one that starts with
  none (a new partition, a group's first assignment) is a move from no one;
- **new generations** (`generations_since`);
- **errors worth counting** (`counted_errors`): what an event reports as failed, except
  the protocol's normal answers, a heartbeat's REBALANCE_IN_PROGRESS (the rebalance's
  own signal) and a join failure that repeats its response's error.

Pure and clock-free: every window is given by the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kgctl.model.events import Event
from kgctl.model.kafka_errors import NORMAL_ANSWERS
from kgctl.model.state import GenerationRecord, GroupState, OwnershipSpan, TopicPartition

# How a member's time without partitions is known (a diagnosis's Cost says it).
# "callbacks": a kgctl member's own events, when it revoked and took up its partitions:
# the time itself. "wire": a proxy's trace of the
# protocol (the JoinGroup that gave them up to the SyncGroup answer that gave them back):
# the client's revocation comes before and its assignment callback after (at the
# application's next poll), so the application went at least that long without them.
# "descriptions": the broker's descriptions, polled: within a poll interval either way.
UnassignedBasis = Literal["callbacks", "wire", "descriptions"]


def unassigned_basis(state: GroupState, key: str) -> UnassignedBasis:
    """Where member `key`'s time without partitions comes from: its own events, a
    proxy's trace of its protocol (a lower bound), or the broker's descriptions."""
    m = state.members.get(key)
    sources = m.sources if m is not None else frozenset()
    if "wire" in sources:
        return "wire"
    return "callbacks" if "member" in sources else "descriptions"


def plural(count: int, noun: str) -> str:
    """`1 record`, `2 records`: a count in the model's (and its views') words."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def utc_clock(ms: int | None) -> str:
    """HH:MM:SS.mmm UTC of an epoch millisecond (pure arithmetic, no clock read): how the
    model's own words (a diagnosis's evidence, an invariant's violation) give a time."""
    if ms is None:
        return "?"
    s, milli = divmod(ms, 1000)
    day = s % 86400
    return f"{day // 3600:02d}:{day % 3600 // 60:02d}:{day % 60:02d}.{milli:03d}"


# Errors that are the protocol's normal answers, not failures (the table's `normal`: a
# dynamic member's first JoinGroup is always answered MEMBER_ID_REQUIRED), and no error.
NORMAL_ERRORS = NORMAL_ANSWERS | {""}
# A heartbeat answered REBALANCE_IN_PROGRESS is how every member of a classic group learns
# that a rebalance began: counting it made every rebalance read as "errors: 1 per member".
_NORMAL_SIGNALS = frozenset({("HeartbeatFailed", "REBALANCE_IN_PROGRESS")})
# The responses whose error a following JoinFailed repeats.
_JOIN_RESPONSES = frozenset({"JoinGroupReceived", "SyncGroupReceived"})


@dataclass(frozen=True)
class Move:
    """A partition whose owners differ between two instants (empty: no owner)."""

    topic: str
    partition: int
    before: tuple[str, ...]
    after: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from": list(self.before),
            "to": list(self.after),
        }


def diff_owners(
    before: Mapping[TopicPartition, Iterable[str]],
    after: Mapping[TopicPartition, Iterable[str]],
) -> tuple[Move, ...]:
    """The moves between two pictures of who owns what (`GroupState.owners()`, or the
    broker's snapshots), in partition order."""
    # The same owners in the same order are no move (most partitions, most times): only
    # the others are sorted, and put in partition order.
    differ = [
        tp for tp, a in before.items() if not (type(a) is type(b := after.get(tp, ())) and a == b)
    ]
    differ += [tp for tp, b in after.items() if tp not in before and b != ()]
    out: list[Move] = []
    for tp in sorted(differ):
        a, b = tuple(sorted(before.get(tp, ()))), tuple(sorted(after.get(tp, ())))
        if a != b:
            out.append(Move(tp[0], tp[1], a, b))
    return tuple(out)


def moves(state: GroupState, t0: int, t1: int | None = None) -> tuple[Move, ...]:
    """Partitions whose owners at `t0` differ from those at `t1` (None: now, the end of
    what was folded)."""
    memo = _memo_of(state)
    key = ("moves", t0, t1)
    found: tuple[Move, ...] | None = memo.get(key)
    if found is None:
        found = diff_owners(owners_at(state, t0), owners_at(state, t1))
        memo[key] = found
    return found


def _covered(spans: Iterable[tuple[int, int]]) -> int:
    """Milliseconds covered by the union of [start, end) spans."""
    total, cur_s, cur_e = 0, 0, -1
    for s, e in sorted(spans):
        if s > cur_e:
            total += max(cur_e - cur_s, 0)
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + max(cur_e - cur_s, 0)


def _clip(spans: Iterable[tuple[int, int | None]], lo: int, hi: int) -> list[tuple[int, int]]:
    out = []
    for s, e in spans:
        a, b = max(s, lo), min(hi if e is None else e, hi)
        if b > a:
            out.append((a, b))
    return out


def alive_ms(state: GroupState, member: str, t0: int, t1: int) -> int:
    """Milliseconds within [t0, t1] that `member` was alive."""
    m = state.members.get(member)
    return 0 if m is None else _covered(_clip(m.lives, t0, t1))


# The spans per member and the owners at an instant of the last few ownership mappings.
# A frame of the live view asks for them several times per generation (diagnosis,
# costs, its own row), of the same immutable mapping (the fold replaces it only when an
# assignment changes): at 1,000 members and 10,000 partitions each pass over it cost
# tens of milliseconds. More than one is kept: the view's diagnosis reads one state on
# a worker thread while the frames read newer ones (with one entry, each reset the
# other's, and the diagnosis did its passes again).
_MAPPINGS_KEPT = 4  # the least recently asked for goes first
_MEMO_KEYS_KEPT = 64  # an open rebalance asks at a new `now` every frame
_Ownership = Mapping[TopicPartition, tuple[OwnershipSpan, ...]]
_memos: dict[int, tuple[_Ownership, dict[Any, Any]]] = {}
_memos_lock = threading.Lock()


def _memo_of(state: GroupState) -> dict[Any, Any]:
    mapping = state.ownership
    with _memos_lock:
        found = _memos.pop(id(mapping), None)
        if found is None or found[0] is not mapping or len(found[1]) > _MEMO_KEYS_KEPT:
            # (held with its mapping, so its id is not reused while it is kept)
            found = (mapping, {})
        _memos[id(mapping)] = found
        while len(_memos) > _MAPPINGS_KEPT:
            del _memos[next(iter(_memos))]
        return found[1]


# (member, start, end) -> the partitions owned over that interval
_Intervals = dict[tuple[str, int, int | None], list[TopicPartition]]


def _intervals(state: GroupState) -> _Intervals:
    """The ownership spans grouped by member and interval: a member's partitions of one
    generation share theirs, so at 1,000 members and 10,000 partitions a few thousand
    intervals stand for tens of thousands of spans."""
    memo = _memo_of(state)
    found: _Intervals | None = memo.get("intervals")
    if found is None:
        found = _intervals_changed(state.ownership)
        if found is None:
            found = intervals_of(state.ownership)
        memo["intervals"] = found
    return found


def intervals_of(ownership: _Ownership) -> _Intervals:
    """The intervals of `ownership`, from every span."""
    out: _Intervals = {}
    for tp, spans in ownership.items():
        for sp in spans:
            out.setdefault((sp.member, sp.start_ms, sp.end_ms), []).append(tp)
    return out


def _intervals_changed(ownership: _Ownership) -> _Intervals | None:
    """The intervals of `ownership` from those of the mapping read last (the fold's
    previous one, as a rule: while a rebalance runs, a frame's events change a few
    hundred partitions of 10,000, and a pass over every span cost each frame about
    25 ms), changed where the partitions' spans are not the same objects; None when no
    mapping read has its intervals, or most partitions differ."""
    with _memos_lock:
        last = next(
            (
                (mapping, memo["intervals"])
                for mapping, memo in reversed(_memos.values())
                if mapping is not ownership and "intervals" in memo
            ),
            None,
        )
    if last is None:
        return None
    base_map, base = last
    changed = [
        (tp, base_map.get(tp, ()), spans)
        for tp, spans in ownership.items()
        if base_map.get(tp) is not spans
    ]
    if len(changed) > len(ownership) // 2:
        return None
    gone = len(base_map) - (len(ownership) - sum(1 for tp, _, _ in changed if tp not in base_map))
    if gone:
        changed += [(tp, spans, ()) for tp, spans in base_map.items() if tp not in ownership]
    out = dict(base)  # its lists are the base's: each is copied before it changes
    copied: set[tuple[str, int, int | None]] = set()
    for tp, before, after in changed:
        for spans, add in ((before, False), (after, True)):
            for sp in spans:
                key = (sp.member, sp.start_ms, sp.end_ms)
                if key not in copied:
                    out[key] = list(out.get(key, ()))
                    copied.add(key)
                if add:
                    out[key].append(tp)
                else:
                    out[key].remove(tp)
    for key in copied:
        if not out[key]:
            del out[key]
    return out


def _owned_spans(state: GroupState) -> dict[str, list[tuple[int, int | None]]]:
    memo = _memo_of(state)
    found: dict[str, list[tuple[int, int | None]]] | None = memo.get("spans")
    if found is None:
        spans_of: dict[str, list[tuple[int, int | None]]] = {}
        # One span per distinct interval: only the union's length is used.
        for member, start, end in _intervals(state):
            spans_of.setdefault(member, []).append((start, end))
        found = {m: sorted(v, key=_span_key) for m, v in spans_of.items()}
        memo["spans"] = found
    return found


def _span_key(span: tuple[int, int | None]) -> tuple[int, int]:
    return span[0], -1 if span[1] is None else span[1]


def owners_at(state: GroupState, at_ms: int | None) -> dict[TopicPartition, tuple[str, ...]]:
    """`state.owners(at_ms)`, computed once per ownership mapping and instant (treat the
    answer as read-only: it is shared)."""
    memo = _memo_of(state)
    key = ("owners", at_ms)
    found: dict[TopicPartition, tuple[str, ...]] | None = memo.get(key)
    if found is None:
        found = _owners_by_interval(state, at_ms)
        memo[key] = found
    return found


def _owners_by_interval(
    state: GroupState, at_ms: int | None
) -> dict[TopicPartition, tuple[str, ...]]:
    """What `state.owners(at_ms)` gives, read from the intervals (a pass over every span
    of 10,000 partitions took tens of milliseconds, and a diagnosis asks at a dozen
    instants). A partition with two owners at once has them in its spans' order, as
    `owners` gives them."""
    out: dict[TopicPartition, tuple[str, ...]] = dict.fromkeys(state.ownership, ())
    shared: list[TopicPartition] = []
    for (member, start, end), tps in _intervals(state).items():
        if at_ms is None:
            covers = end is None
        else:
            covers = start <= at_ms and (end is None or at_ms < end)
        if covers:
            owner = (member,)
            for tp in tps:
                if out[tp]:
                    shared.append(tp)
                out[tp] = owner
    for tp in shared:
        out[tp] = state.owners_of(tp, at_ms)
    return out


def _unassigned(
    lives: Iterable[tuple[int, int | None]],
    owned: Iterable[tuple[int, int | None]],
    t0: int,
    t1: int,
) -> int:
    # Owning happens only while alive (the fold closes spans when a member goes), so the
    # owned time is inside the alive time.
    return _covered(_clip(lives, t0, t1)) - _covered(_clip(owned, t0, t1))


def unassigned_ms(state: GroupState, member: str, t0: int, t1: int) -> int:
    """Milliseconds within [t0, t1] that `member` was alive and owned no partition."""
    m = state.members.get(member)
    if m is None:
        return 0
    owned = (
        (sp.start_ms, sp.end_ms)
        for spans in state.ownership.values()
        for sp in spans
        if sp.member == member
    )
    return _unassigned(m.lives, owned, t0, t1)


def unassigned_by_member(
    state: GroupState, t0: int, t1: int, *, with_zero: bool = False
) -> dict[str, int]:
    """`unassigned_ms` of every member alive within [t0, t1]; members with none left out
    unless `with_zero`."""
    owned = _owned_spans(state)
    out: dict[str, int] = {}
    for key in sorted(state.members):
        if not alive_ms(state, key, t0, t1) and not _alive_at(state, key, t0):
            continue
        ms = _unassigned(state.members[key].lives, owned.get(key, ()), t0, t1)
        if ms or with_zero:
            out[key] = ms
    return out


def _alive_at(state: GroupState, member: str, at_ms: int) -> bool:
    m = state.members[member]
    return any(s <= at_ms and (e is None or at_ms <= e) for s, e in m.lives)


def rebalance_unassigned(state: GroupState, rec: GenerationRecord, now_ms: int) -> dict[str, int]:
    """Each member's time without partitions during the rebalance that made `rec`."""
    t0, t1 = rec.rebalance_window(now_ms)
    return unassigned_by_member(state, t0, t1)


def rebalance_instants(state: GroupState, rec: GenerationRecord, now_ms: int) -> tuple[int, int]:
    """Before and after the rebalance that made `rec`: the previous generation once it
    was stable (so a member that died before the rebalance began is still where its
    partitions came from; without a stable previous generation, just before this
    rebalance began) and this generation once stable (or, if it never was, just before
    the next rebalance began, or `now_ms`)."""
    i = state.generations.index(rec)
    prev = state.generations[i - 1] if i > 0 else None
    start = prev.stable_ms if prev is not None and prev.stable_ms is not None else None
    # (A previous generation stable in the millisecond this rebalance began is read at
    # that millisecond, where its own rebalance's view ends: a cooperative member's last
    # answer of that round, dated with the rejoin that began this one, counts once.)
    if start is None or start > rec.start_ms:
        start = rec.start_ms - 1
    if rec.stable_ms is not None:
        end = rec.stable_ms
    else:
        end = (rec.end_ms if rec.end_ms is not None else now_ms) - 1
    return start, end


def rebalance_moves(state: GroupState, rec: GenerationRecord, now_ms: int) -> tuple[Move, ...]:
    """The partitions the rebalance that made `rec` moved, between its
    `rebalance_instants`."""
    return moves(state, *rebalance_instants(state, rec, now_ms))


def generations_since(state: GroupState, generation: int) -> list[int]:
    """The generations after `generation`, in order."""
    return sorted({g.generation for g in state.generations if g.generation > generation})


def counted_errors(events: Iterable[Event]) -> Iterator[tuple[Event, str]]:
    """(event, error) for every failure worth counting, in order.

    Every event whose `error` is not a normal answer (`NORMAL_ERRORS`, and a heartbeat's
    REBALANCE_IN_PROGRESS: the rebalance's own signal) counts, except a
    JoinFailed that repeats the error of its member's last JoinGroup/SyncGroup response
    (that failure was counted once, as the response); a JoinFailed without such a
    response (a timeout, a lost connection) counts. A proxy's wire events (source
    `wire`) do not count: they are a second view of steps a member reports itself, and
    their fault rules name the errors they inject.
    """
    answered: dict[str, str] = {}  # member -> error of its last join/sync response
    for ev in events:
        if ev.source == "wire":
            continue
        error = str(ev.data.get("error", "") or "")
        who = ev.member or ev.member_id
        if ev.type in _JOIN_RESPONSES:
            answered[who] = error
        if ev.type == "JoinFailed" and answered.pop(who, None) == error:
            continue
        if error not in NORMAL_ERRORS and (ev.type, error) not in _NORMAL_SIGNALS:
            yield ev, error
