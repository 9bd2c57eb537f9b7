"""Events of one run -> a `Report`: one row per rebalance, member timelines, invariants.

Pure: events in, frozen dataclasses out, no I/O, no clock. Everything is derived from the
model's `fold`, folded one event at a time so that what each member owned and which
phase it was in is known at every instant; causes come from what the members said
(their rejoin reasons, leaves, failures) and, failing that, from the observer's guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kgctl.model.diagnosis import Context, Diagnosis, diagnose
from kgctl.model.events import Event, concerns, groups_in
from kgctl.model.fold import fold
from kgctl.model.invariants import (
    Violation,
    check_complete_ownership,
    check_exclusive_ownership,
    check_single_generation,
    excused_by,
)
from kgctl.model.reasons import CAUSE_ORDER, Cause, cause_of_reason, named_cause
from kgctl.model.state import GenerationRecord, GroupState, format_owned
from kgctl.model.timeline import (
    Move,
    counted_errors,
    rebalance_moves,
    rebalance_unassigned,
    unassigned_ms,
)
from kgctl.model.wire import member_steps
from kgctl.recordings import event_of_line


@dataclass(frozen=True)
class Segment:
    """A member's state from `start_ms` to `end_ms`: partitions owned, or a phase."""

    start_ms: int
    end_ms: int
    label: str  # `orders[0,1]` (partitions) or `JoinGroup` (phase)
    count: int = 0  # partitions owned (0 for phase segments)


@dataclass(frozen=True)
class MemberTimeline:
    """One member over the whole run: when it lived, what it owned, which phase it was in."""

    key: str
    member_ids: tuple[str, ...]
    instance_id: str | None
    first_ms: int
    left_ms: int | None
    left_reason: str
    ownership: tuple[Segment, ...]
    phases: tuple[Segment, ...]
    unassigned_ms: int  # total time alive without partitions

    def to_dict(self) -> dict[str, Any]:
        return {
            "member": self.key,
            "member_ids": list(self.member_ids),
            "instance_id": self.instance_id,
            "first_ms": self.first_ms,
            "left_ms": self.left_ms,
            "left_reason": self.left_reason,
            "unassigned_ms": self.unassigned_ms,
            "ownership": [
                {
                    "start_ms": s.start_ms,
                    "end_ms": s.end_ms,
                    "partitions": s.label,
                    "count": s.count,
                }
                for s in self.ownership
            ],
            "phases": [
                {"start_ms": s.start_ms, "end_ms": s.end_ms, "phase": s.label} for s in self.phases
            ],
        }


@dataclass(frozen=True)
class ErrorCount:
    """One kind of error seen during a rebalance: `HeartbeatFailed REBALANCE_IN_PROGRESS`."""

    what: str
    count: int
    members: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.what, "count": self.count, "members": list(self.members)}


@dataclass(frozen=True, kw_only=True)
class Rebalance:
    """One rebalance: from its first sign to the generation it produced being stable."""

    index: int  # 1, 2, ... in the order they began
    generation: int
    previous_generation: int | None
    inferred: bool
    cause: Cause
    # A cause Cause does not list, by the name it was given (`cause` is UNKNOWN then): a
    # newer member's rejoin reason or a newer recording's cause reads as itself.
    other_cause: str = ""
    cause_guess: bool
    evidence: str
    also: tuple[str, ...]  # the other causes seen, by name (as the JSON names them)
    start_ms: int
    sync_ms: int | None
    stable_ms: int | None
    end_ms: int | None
    leader: str
    members: tuple[str, ...]
    unassigned_ms: Mapping[str, int]  # member -> ms without partitions during the rebalance
    moves: tuple[Move, ...]
    errors: tuple[ErrorCount, ...]
    diagnosis: Diagnosis | None = None  # trigger, critical path, cost, advice

    @property
    def cause_name(self) -> str:
        """The cause as the JSON names it."""
        return self.other_cause or self.cause.value

    @property
    def duration_ms(self) -> int | None:
        """Start to stable; None when the group never became stable in this generation."""
        return None if self.stable_ms is None else self.stable_ms - self.start_ms

    @property
    def join_ms(self) -> int | None:
        return None if self.sync_ms is None else self.sync_ms - self.start_ms

    @property
    def sync_phase_ms(self) -> int | None:
        if self.sync_ms is None or self.stable_ms is None:
            return None
        return self.stable_ms - self.sync_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "generation": self.generation,
            "previous_generation": self.previous_generation,
            "inferred": self.inferred,
            "cause": self.cause_name,
            "cause_guess": self.cause_guess,
            "evidence": self.evidence,
            "also": list(self.also),
            "start_ms": self.start_ms,
            "sync_ms": self.sync_ms,
            "stable_ms": self.stable_ms,
            "end_ms": self.end_ms,
            "duration_ms": self.duration_ms,
            "join_phase_ms": self.join_ms,
            "sync_phase_ms": self.sync_phase_ms,
            "leader": self.leader,
            "members": list(self.members),
            "unassigned_ms": dict(sorted(self.unassigned_ms.items())),
            "partitions_moved": len(self.moves),
            "moves": [m.to_dict() for m in self.moves],
            "errors": [e.to_dict() for e in self.errors],
            "diagnosis": None if self.diagnosis is None else self.diagnosis.to_dict(),
        }


@dataclass(frozen=True)
class InvariantCheck:
    """One invariant judged at one instant (or over the whole run)."""

    rule: str
    at_ms: int
    generation: int | None
    violations: tuple[Violation, ...]
    recorded: bool = False  # reported by chaos (InvariantViolated), not checked here

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "at_ms": self.at_ms,
            "generation": self.generation,
            "passed": self.passed,
            "recorded": self.recorded,
            "violations": [v.to_dict() for v in self.violations],
        }


@dataclass(frozen=True)
class Report:
    """Everything `kgctl report` shows about one group's recorded run."""

    group: str
    first_ms: int
    last_ms: int
    events: tuple[Event, ...]
    rebalances: tuple[Rebalance, ...]
    members: tuple[MemberTimeline, ...]
    checks: tuple[InvariantCheck, ...]
    state: GroupState = field(repr=False)
    skipped: tuple[str, ...] = ()  # input lines that were not events, with why

    @property
    def violations(self) -> tuple[Violation, ...]:
        return tuple(v for c in self.checks for v in c.violations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "first_ms": self.first_ms,
            "last_ms": self.last_ms,
            "duration_ms": self.last_ms - self.first_ms,
            "events": len(self.events),
            "skipped": list(self.skipped),
            "generations": [r.generation for r in self.rebalances],
            "rebalances": [r.to_dict() for r in self.rebalances],
            "members": [m.to_dict() for m in self.members],
            "invariants": {
                "passed": not self.violations,
                "checks": [c.to_dict() for c in self.checks],
            },
        }


# -- reading ----------------------------------------------------------------------------


def parse_lines(lines: Iterable[str]) -> tuple[list[Event], list[str]]:
    """Events from JSON lines; lines that are not events are skipped and said why."""
    events: list[Event] = []
    skipped: list[str] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(event_of_line(line))
        except (ValueError, TypeError) as exc:
            skipped.append(f"line {lineno}: {exc}")
    return events, skipped


# -- building ---------------------------------------------------------------------------


class _Tracker:
    """Per-member ownership and phase segments, sampled after every folded event."""

    def __init__(self) -> None:
        self.owned: dict[str, list[list[Any]]] = {}  # key -> [[start, end, label, count]]
        self.phases: dict[str, list[list[Any]]] = {}
        self.ids: dict[str, list[str]] = {}

    def sample(self, s: GroupState, t: int) -> None:
        for key, m in s.members.items():
            ids = self.ids.setdefault(key, [])
            if m.member_id and m.member_id not in ids:
                ids.append(m.member_id)
            label = format_owned(m.partitions) if m.alive else None
            _extend(self.owned.setdefault(key, []), t, label, m.partition_count)
            _extend(self.phases.setdefault(key, []), t, m.phase if m.alive else None, 0)
        # A member renamed by the fold (observer id -> label) leaves its old key behind.
        for gone in set(self.owned) - set(s.members):
            _extend(self.owned[gone], t, None, 0)
            _extend(self.phases[gone], t, None, 0)

    def close(self, t: int) -> None:
        for segs in list(self.owned.values()) + list(self.phases.values()):
            if segs and segs[-1][1] is None:
                segs[-1][1] = t


def _extend(segs: list[list[Any]], t: int, label: str | None, count: int) -> None:
    """Start a new segment when the label changes; None closes the open one."""
    last = segs[-1] if segs else None
    if last is not None and last[1] is None:
        if label is not None and last[2] == label:
            return
        last[1] = t
    if label is not None:
        segs.append([t, None, label, count])


def _excused_by_chaos(events: Sequence[Event]) -> Callable[[str, int], bool] | None:
    """What a chaos run excused from exclusive-ownership, as its ScenarioFinished says:
    members whose ownership it knew to be stale (frozen, cut off from their coordinator,
    replaced by a process with their group.instance.id), each over intervals of ms."""
    found: dict[str, list[tuple[int, int | None]]] = {}
    for e in events:
        raw = e.data.get("excused") if e.type == "ScenarioFinished" else None
        if isinstance(raw, Mapping):
            for member, spans in raw.items():
                found.setdefault(str(member), []).extend(
                    (int(s[0]), None if s[1] is None else int(s[1])) for s in spans
                )
    return excused_by(found) if found else None


def build_report(
    events: Sequence[Event],
    group: str | None = None,
    skipped: Sequence[str] = (),
    context: Context | None = None,
) -> Report:
    """Fold `events` (any order; sorted by time here) into a report on `group`. A
    proxy's trace of clients that report nothing themselves counts as their steps. Each
    rebalance carries its diagnosis (`context`: what else is known,
    kgctl/model/diagnosis/)."""
    events = member_steps(events)
    names = groups_in(events)
    if group is None:
        group = names[0] if len(names) == 1 else ""
    chosen = [e for e in events if concerns(e, group)]
    ordered = sorted(chosen, key=lambda e: e.ts_ms)  # stable: file order breaks ties
    first = ordered[0].ts_ms if ordered else 0
    last = ordered[-1].ts_ms if ordered else 0

    state = GroupState(group=group, log_limit=0)
    tracker = _Tracker()
    checks: list[InvariantCheck] = []
    judged: set[tuple[int, bool]] = set()
    synced: set[int] = set()  # generations whose members' assignments were traced
    for ev in ordered:
        state = fold(state, ev, ev.ts_ms)
        tracker.sample(state, ev.ts_ms)
        if ev.type == "JoinCompleted" and ev.generation is not None:
            synced.add(ev.generation)
        rec = state.current
        if rec is not None and rec.stable_ms is not None:
            ident = (rec.generation, rec.inferred)
            if ident not in judged and _ownership_known(rec, ev, synced):
                judged.add(ident)
                checks += _stable_checks(state, rec)
        if ev.type == "InvariantViolated":
            checks.append(_recorded_violation(ev))
    tracker.close(last)
    exclusive = check_exclusive_ownership(state, _excused_by_chaos(ordered))
    checks.insert(0, InvariantCheck("exclusive-ownership", last, None, tuple(exclusive)))

    members = tuple(
        _timeline(key, state, tracker, first, last)
        for key in sorted(tracker.owned, key=_first(tracker))
    )
    diagnoses = diagnose(state, ordered, last, context)
    rebalances = tuple(
        replace(
            _rebalance(i, state.generations, ordered, state, tracker, last),
            diagnosis=diagnoses[i],
        )
        for i in range(len(state.generations))
    )
    return Report(
        group=group,
        first_ms=first,
        last_ms=last,
        events=tuple(ordered),
        rebalances=rebalances,
        members=members,
        checks=tuple(checks),
        state=state,
        skipped=tuple(skipped),
    )


def _first(tracker: _Tracker) -> Any:
    def key(name: str) -> tuple[int, str]:
        segs = tracker.owned.get(name) or tracker.phases.get(name) or [[0]]
        return (int(segs[0][0]), name)

    return key


def _ownership_known(rec: GenerationRecord, ev: Event, synced: set[int]) -> bool:
    """Whether the state holds who owns what in the stable generation `rec`: at once when
    its members' assignments were traced (their JoinCompleted, their own or read from the
    wire); else (a watch of clients that report nothing, known from the broker's
    descriptions) from the first description made once it was stable. The record in
    __consumer_offsets tells a generation stable up to a poll interval before a
    description shows its owners: judging then found a partition 'without a live owner'
    that the next description, 43 ms later, showed owned. A generation superseded
    before any description showed it stable is not judged: nothing showed its owners."""
    if rec.generation in synced:
        return True
    stable = rec.stable_ms if rec.stable_ms is not None else ev.ts_ms
    return ev.type == "GroupObserved" and ev.ts_ms >= stable


def _stable_checks(state: GroupState, rec: GenerationRecord) -> list[InvariantCheck]:
    at = rec.stable_ms if rec.stable_ms is not None else state.updated_ms
    # A generation everyone left (the group is empty) owns nothing, rightly.
    unowned = check_complete_ownership(state, at) if rec.members else []
    return [
        InvariantCheck("complete-ownership", at, rec.generation, tuple(unowned)),
        InvariantCheck(
            "single-generation", at, rec.generation, tuple(check_single_generation(state, at))
        ),
    ]


def _recorded_violation(ev: Event) -> InvariantCheck:
    d = ev.data
    rule = str(d.get("rule") or d.get("invariant") or d.get("expectation") or "expectation")
    message = str(d.get("message") or d.get("detail") or d.get("error") or rule)
    members = d.get("members")
    v = Violation(
        rule=rule,
        message=message,
        at_ms=ev.ts_ms,
        members=tuple(str(m) for m in members) if isinstance(members, list) else (),
        topic=str(d.get("topic", "") or ""),
        partition=int(d["partition"]) if isinstance(d.get("partition"), int) else -1,
    )
    gen = ev.generation if ev.generation >= 0 else None
    return InvariantCheck(rule, ev.ts_ms, gen, (v,), recorded=True)


def _segments(raw: list[list[Any]]) -> tuple[Segment, ...]:
    return tuple(Segment(int(a), int(b), str(label), int(n)) for a, b, label, n in raw if b > a)


def _timeline(
    key: str, state: GroupState, tracker: _Tracker, first_ms: int, last_ms: int
) -> MemberTimeline:
    owned = _segments(tracker.owned.get(key, []))
    m = state.members.get(key)
    return MemberTimeline(
        key=key,
        member_ids=tuple(tracker.ids.get(key, [])),
        instance_id=m.instance_id if m is not None else None,
        first_ms=owned[0].start_ms if owned else (m.first_seen_ms if m else 0),
        left_ms=m.left_ms if m is not None else None,
        left_reason=m.left_reason if m is not None else "",
        ownership=owned,
        phases=_segments(tracker.phases.get(key, [])),
        unassigned_ms=unassigned_ms(state, key, first_ms, last_ms),
    )


def _rebalance(
    i: int,
    gens: Sequence[GenerationRecord],
    events: Sequence[Event],
    state: GroupState,
    tracker: _Tracker,
    last_ms: int,
) -> Rebalance:
    rec = gens[i]
    prev = gens[i - 1] if i > 0 else None
    # What caused it happened after the previous generation settled and before this
    # one's JoinGroup was answered.
    since = (prev.stable_ms if prev.stable_ms is not None else prev.start_ms) if prev else -1
    until = rec.sync_ms if rec.sync_ms is not None else (rec.stable_ms or rec.start_ms)
    window = [e for e in events if since < e.ts_ms <= until]
    ids = {k: set(v) for k, v in tracker.ids.items()}
    (cause, other), guess, evidence, also = _cause(rec, prev, window, ids)
    _start, end = rec.rebalance_window(last_ms)
    in_rebalance = [e for e in events if rec.start_ms <= e.ts_ms <= end]
    return Rebalance(
        index=i + 1,
        generation=rec.generation,
        previous_generation=prev.generation if prev else None,
        inferred=rec.inferred,
        cause=cause,
        other_cause=other,
        cause_guess=guess,
        evidence=evidence,
        also=also,
        start_ms=rec.start_ms,
        sync_ms=rec.sync_ms,
        stable_ms=rec.stable_ms,
        end_ms=rec.end_ms,
        leader=rec.leader,
        members=rec.members,
        unassigned_ms=_by_name(state, rebalance_unassigned(state, rec, last_ms)),
        moves=rebalance_moves(state, rec, last_ms),
        errors=_errors(in_rebalance),
    )


def _by_name(state: GroupState, by_key: Mapping[str, int]) -> dict[str, int]:
    """Members named as the views name them: a member known from the broker's
    descriptions alone is keyed by its member id (the client id and a UUID), which the
    report printed whole; two members of one name keep their keys."""
    names = {k: state.members[k].name if k in state.members else k for k in by_key}
    taken = list(names.values())
    return {(names[k] if taken.count(names[k]) == 1 else k): ms for k, ms in by_key.items()}


# A cause and, for one Cause does not list, the name it was given (see named_cause).
_Named = tuple[Cause, str]


def _name(named: _Named) -> str:
    """A cause as the JSON names it."""
    cause, other = named
    return other or cause.value


def _cause(
    rec: GenerationRecord,
    prev: GenerationRecord | None,
    window: Sequence[Event],
    ids: Mapping[str, set[str]],
) -> tuple[_Named, bool, str, tuple[str, ...]]:
    """(cause, guess, evidence, other causes' names) from what the members said in the
    window."""
    found: dict[_Named, list[str]] = {}
    actions: list[str] = []
    for e in window:
        who = e.member or e.member_id
        kind: Cause | None = None
        other = ""
        note = ""
        if e.type == "RejoinRequested":
            reason = str(e.data.get("reason", ""))
            named = cause_of_reason(reason)
            if named is not None:
                kind, other = named_cause(named)
            note = f"{who}: {reason}"
        elif e.type == "LeaveGroupSent":
            kind, note = Cause.MEMBER_LEFT, f"{who} left: {e.data.get('reason', '')}"
        elif e.type == "MemberStopped" and e.instance_id:
            # A static member sends no LeaveGroup: it is gone once its session times out.
            kind = Cause.MEMBER_LEFT
            note = f"{who} (static) stopped: {e.data.get('reason', '')}"
        elif e.type == "MemberFailed" and e.data.get("error") == "FENCED_INSTANCE_ID":
            # Another process joined with its group.instance.id: the broker fenced it.
            kind = Cause.STATIC_MEMBER_REPLACED
            note = f"{who} fenced: another process joined with its group.instance.id"
        elif e.type == "MemberFailed":
            # A program chaos stopped (SIGTERM) that printed no MemberStopped: it left.
            asked = bool(e.data.get("stopped_as_asked"))
            kind = Cause.MEMBER_LEFT if asked else Cause.MEMBER_FAILED
            note = (
                f"{who} stopped: SIGTERM from kgctl chaos"
                if asked
                else f"{who} failed: {e.data.get('error', '')}"
            )
        elif e.type == "PollIntervalExceeded":
            ms = e.data.get("max_poll_interval_ms")
            kind, note = Cause.TIMED_OUT, f"{who}: no poll within max.poll.interval.ms={ms}"
        elif e.type == "ActionPerformed":
            actions.append("chaos: " + _compact(e.data))
            continue
        if kind is not None:
            found.setdefault((kind, other), []).append(note)
    if prev is not None:
        # Members of the last generation that are gone without a word: killed, or hung
        # until their session timed out. The leader's JoinGroup response lists who is in.
        said = {e.member or e.member_id for e in window if e.type != "HeartbeatSucceeded"}
        joined = _joined_ids(window, rec.generation)
        silent = [
            m
            for m in prev.members
            if m not in said
            and (m not in rec.members or (joined is not None and not ids.get(m, set()) & joined))
        ]
        if silent:
            found.setdefault((Cause.TIMED_OUT, ""), []).append(
                f"{', '.join(silent)} stopped without a word (killed or session timeout)"
            )
    # Kafka's causes in precedence order, then those kgctl does not know by name.
    ordered: list[_Named] = [(c, "") for c in CAUSE_ORDER]
    kinds = [k for k in ordered if k in found] + sorted(set(found) - set(ordered), key=_name)
    if kinds:
        notes = [n for k in kinds for n in _unique(found[k])] + actions
        timed_out = (Cause.TIMED_OUT, "")
        silent_only = kinds[0] == timed_out and all("without a word" in n for n in found[timed_out])
        return kinds[0], silent_only, "; ".join(notes), tuple(_name(k) for k in kinds[1:])
    if rec.cause:
        return named_cause(rec.cause), rec.cause_guess, rec.evidence, ()
    return (Cause.UNKNOWN, ""), True, "; ".join(actions) or "no member said why", ()


def _joined_ids(window: Sequence[Event], generation: int) -> set[str] | None:
    """Member ids in the leader's JoinGroup response for `generation`, if it was traced."""
    for e in window:
        members = e.data.get("members")
        if e.type == "JoinGroupReceived" and isinstance(members, list):
            if e.data.get("generation") == generation:
                return {str(m.get("member_id")) for m in members if isinstance(m, dict)}
    return None


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _compact(data: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(data.items()) if not isinstance(v, dict | list))


def _errors(events: Sequence[Event]) -> tuple[ErrorCount, ...]:
    """The rebalance's failures (`counted_errors`) and the violations chaos recorded."""
    counts: dict[str, tuple[int, list[str]]] = {}
    failures = list(counted_errors(e for e in events if e.type != "InvariantViolated"))
    violations = [
        (e, str(e.data.get("rule", "") or "violation"))
        for e in events
        if e.type == "InvariantViolated"
    ]
    order = {id(e): i for i, e in enumerate(events)}
    for e, error in sorted(failures + violations, key=lambda pair: order[id(pair[0])]):
        what = f"{e.type} {error}"
        n, who = counts.get(what, (0, []))
        member = e.member or e.member_id
        counts[what] = (n + 1, who + ([member] if member and member not in who else []))
    return tuple(ErrorCount(what, n, tuple(who)) for what, (n, who) in counts.items())
