"""One group as the monitor follows it: its stored records and its descriptions turned
into events by the observer's `Inferrer`, folded by `fold`, and each completed
generation diagnosed by `diagnose`, the code `kgctl explain` runs, once.

No I/O and no clock: records, snapshots and `now_ms` come in, `Rebalance`s (with their
`Diagnosis`) go out. Memory is bounded per group: the events kept for the diagnosis
(EVENTS_KEPT) and the generations kept in the state (GENERATIONS_KEPT).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kgctl.adapters.consumer_group_records import ConsumerGroupRecord, GroupEpoch
from kgctl.adapters.group_records import GroupRecord
from kgctl.model.diagnosis import Diagnosis, diagnose
from kgctl.model.events import Event
from kgctl.model.fold import fold_many
from kgctl.model.snapshot import GroupSnapshot
from kgctl.model.state import GroupState, evolve
from kgctl.monitor.accounting import Protocol, Rebalance, WaitSeen
from kgctl.observe.infer import Inferrer

EVENTS_KEPT = 400
GENERATIONS_KEPT = 4
LOG_KEPT = 20  # the fold's own recent-event log, unused by the monitor


@dataclass(frozen=True)
class Diagnosed:
    """A completed rebalance: what is counted, and the diagnosis it was read from."""

    rebalance: Rebalance
    diagnosis: Diagnosis


class GroupFollower:
    """One group's inferrer, folded state and what was diagnosed."""

    def __init__(self, group: str, settle_ms: int, stored_source: bool) -> None:
        self.group, self.settle_ms, self.stored_source = group, settle_ms, stored_source
        self._reset()

    def _reset(self) -> None:
        self.inferrer = Inferrer(self.group)
        self.inferrer.stored_source = self.stored_source
        self._new_story()
        self.snapshot: GroupSnapshot | None = None
        self.records_seen = 0
        self.empty_generations: set[int] = set()  # stored with no members
        self.held_missing: GroupSnapshot | None = None  # described missing, no tombstone yet
        # When each stored generation's record was folded, and when the newest description
        # folded was taken: a stored generation is final once described after its record.
        self.stored_at: dict[int, int] = {}
        self.described_ms: int | None = None

    def _new_story(self) -> None:
        """The folded state and the events it is diagnosed from start over; the Inferrer
        (who the group's members are) and what was described go on."""
        self.state = GroupState(self.group, log_limit=LOG_KEPT)
        self.events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self.diagnosed_generation = -1
        self.classic_stored: set[int] = set()  # generations a classic record stored

    @property
    def protocol(self) -> Protocol:
        snap = self.snapshot
        return "consumer" if snap is not None and snap.group_epoch is not None else "classic"

    # -- what comes in --------------------------------------------------------------------

    def record(self, rec: GroupRecord, now_ms: int) -> list[Diagnosed]:
        """A record of the group read from `__consumer_offsets`; a tombstone resets it
        (the caller counts the deletion, and tells Kafka's online upgrade apart:
        `upgraded`)."""
        if rec.metadata is None:
            done = self._complete(now_ms, flush=True)  # what completed before the deletion
            held = self.held_missing
            self._reset()
            if held is not None:  # described missing before: the group starts from nothing
                done += self.observed(held, now_ms)
            return done
        before: list[Diagnosed] = []  # what the story before it completed
        generation = rec.metadata.generation
        if (
            self.inferrer.consumer_epochs_between
            and generation != self.inferrer.stored_generation
            and generation <= self.state.generation
        ):
            # A mixed group's way back: its last consumer-protocol member left, and Kafka
            # wrote the classic group again at the consumer group's last epoch
            # (ClassicGroup.fromConsumerGroup), a number the fold already holds as that
            # epoch. It is another rebalance (that member's leave): the classic group's
            # generations start a story of their own, as explain reads them
            # (stored_epochs.py); the Inferrer compares the record with who the consumer
            # group's records said was in it.
            before = self._complete(now_ms, flush=True)
            self._new_story()
        if self.records_seen == 0 and self.state.generation < 0:
            # The first record of the group read: one of its first generations began in
            # an empty group (its members joined), a later one was found already made.
            initial = rec.metadata.generation > 1
            if not initial:
                self.inferrer.stored_members = {}
        else:
            initial = False
        self.records_seen += 1
        if not rec.metadata.members:
            self.empty_generations.add(rec.metadata.generation)
        at = rec.timestamp_ms if rec.timestamp_ms > 0 else now_ms
        self.stored_at.setdefault(generation, now_ms)
        self.classic_stored.add(generation)
        return before + self._feed(self.inferrer.stored_record(rec, at, initial=initial), now_ms)

    def upgraded(self, tombstone: GroupRecord) -> None:
        """The classic group's `tombstone` was Kafka's online upgrade to a consumer group
        (its records follow: the caller asks `upgrade_follows`), not its deletion: nothing
        starts over. The Inferrer keeps the classic members, for the way back."""
        self.inferrer.stored_record(tombstone, tombstone.timestamp_ms)

    def consumer_record(self, rec: ConsumerGroupRecord, now_ms: int) -> None:
        """A record of the consumer group read from `__consumer_offsets`. An epoch bump
        newer than the last description is when its rebalance began, and makes the first
        description after it final, as a classic group's record does. Member records
        make the monitor describe the group soon (the caller) and, in a group that was
        classic, say who joined as a consumer group: on the way back the classic record
        is compared with them (the Inferrer's time between, as explain and watch read
        it)."""
        self.inferrer.stored_consumer_record(rec)
        value = rec.value
        if not isinstance(value, GroupEpoch):
            return
        described = self.snapshot.group_epoch if self.snapshot is not None else None
        if described is None or value.epoch <= described:
            return  # not described yet (its first description is a baseline), or old
        self.stored_at.setdefault(value.epoch, now_ms)
        self.inferrer.stored_epoch(value.epoch, rec.timestamp_ms)

    def observed(
        self, snap: GroupSnapshot, now_ms: int, taken_ms: int | None = None
    ) -> list[Diagnosed]:
        """A description of the group, taken at `taken_ms` (when its round took its
        groups; `now_ms` when not given)."""
        done: list[Diagnosed] = []
        if snap.missing and self.snapshot is not None and not self.snapshot.missing:
            if self.stored_source and self.records_seen > 0:
                # The records say the group exists until its tombstone is read. Missing
                # for a round (a ListGroups without it while its coordinator moves, a
                # Dead answer) is no deletion: its members did not leave, nor join
                # again when it is described next.
                self.held_missing = snap
                return []
            done = self._complete(now_ms, flush=True)
            self._reset()  # deleted: the group starts over if it comes back
        self.held_missing = None
        self.snapshot = snap
        self.described_ms = now_ms if taken_ms is None else taken_ms
        classic = snap.group_epoch is None  # a consumer group's records have no members
        if snap.missing and classic and self.stored_source and self.inferrer.prev is None:
            # Missing before it was ever described (service.py's stand-in for a group
            # first listed after the first poll; after a tombstone): the records say
            # when it was created and who joined it. Described next, no member is new
            # to it: the listing may only have missed a group that was there (its first
            # record read is then of a later generation, made before the monitor).
            return done
        return done + self._feed(self.inferrer.observe(snap, now_ms), now_ms)

    @property
    def settling(self) -> bool:
        """Whether a generation that completed is still to be diagnosed: only then can
        time alone (`tick`) complete it."""
        return any(
            g.stable_ms is not None and g.generation > self.diagnosed_generation
            for g in self.state.generations
        )

    def tick(self, now_ms: int, flush: bool = False) -> list[Diagnosed]:
        """Generations that completed and settled by `now_ms` (all stable ones when
        `flush`: the history read at start is over, nothing more will be said of it)."""
        return self._complete(now_ms, flush)

    # -- fold and diagnose ----------------------------------------------------------------

    def _feed(self, events: list[Event], now_ms: int) -> list[Diagnosed]:
        state = fold_many(self.state, ((ev, now_ms) for ev in events))
        for ev in events:
            if ev.type != "GroupObserved" or ev.data.get("changed"):
                self.events.append(ev)
        gens = state.generations
        if len(gens) > GENERATIONS_KEPT:
            state = evolve(state, generations=gens[-GENERATIONS_KEPT:])
        self.state = state
        return self._complete(now_ms, False)

    def _final(self, i: int, now_ms: int, flush: bool) -> bool:
        gens = self.state.generations
        rec = gens[i]
        if rec.stable_ms is None or rec.generation <= self.diagnosed_generation:
            return False
        if flush or i < len(gens) - 1:
            return True
        # Its record carries its members; what only a description adds (the start of the
        # rebalance, who was waited for) was described before it, or in the first round
        # taken after the record was read.
        stored = self.stored_at.get(rec.generation)
        if stored is not None and self.described_ms is not None and self.described_ms >= stored:
            return True
        # Described only: its cause may still come with the next settled description.
        return now_ms - rec.stable_ms >= self.settle_ms

    def _complete(self, now_ms: int, flush: bool) -> list[Diagnosed]:
        gens = self.state.generations
        due = [i for i in range(len(gens)) if self._final(i, now_ms, flush)]
        if not due:
            return []
        diagnoses = {d.generation: d for d in diagnose(self.state, list(self.events), now_ms)}
        out = []
        for i in due:
            rec = gens[i]
            self.diagnosed_generation = max(self.diagnosed_generation, rec.generation)
            d = diagnoses.get(rec.generation)
            if d is None or self._empty(rec.generation, i == len(gens) - 1):
                continue  # an Empty generation: the group emptied, nobody rebalanced
            out.append(Diagnosed(self._rebalance(d, rec.stable_ms or now_ms), d))
        for generation in [g for g in self.stored_at if g <= self.diagnosed_generation]:
            del self.stored_at[generation]  # bounded: only what is still to be diagnosed
        self.classic_stored = {g for g in self.classic_stored if g > self.diagnosed_generation}
        return out

    def _empty(self, generation: int, newest: bool) -> bool:
        """Whether the generation has no members: stored so, or (described only) the
        newest one while the group is described Empty."""
        if generation in self.empty_generations:
            return True
        snap = self.snapshot
        return newest and self.records_seen == 0 and snap is not None and snap.state == "Empty"

    def _rebalance(self, d: Diagnosis, stable_ms: int) -> Rebalance:
        # The protocol of the generation it made, which with the generation is what the
        # tally counts once. A classic record's generation is classic even while the
        # group is still described as a consumer group: on the way back the record (at
        # the consumer group's last epoch) stores the leave of its last consumer-protocol
        # member, the rebalance that made the group classic again.
        protocol: Protocol = (
            "classic"
            if d.generation in self.classic_stored
            else "consumer"
            if d.group_epoch
            else self.protocol
        )
        return Rebalance(
            group=self.group,
            generation=d.generation,
            protocol=protocol,
            cause=d.trigger.cause_name,
            confidence=d.trigger.confidence,
            ended_ms=d.stable_ms if d.stable_ms is not None else stable_ms,
            duration_ms=d.duration_ms,
            unassigned_ms=tuple(c.unassigned_ms for c in d.costs),
            waits=tuple(WaitSeen(w.member, w.ms, w.why) for w in d.critical_path),
            trigger=d.trigger.text(),
        )
