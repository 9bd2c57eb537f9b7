"""A watch on one group: sources (observer, trace topic, replay file) feed one folded state.

Sources run on daemon threads and put events on a queue; the caller (the live view or
the JSON writer) drains the queue on its own thread, so the fold and every view only
ever run on one thread. The live view's diagnoses are made on a worker thread
(`Watch.background`), from an immutable state and copies of the events kept, and taken
on the caller's thread when done.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from kgctl.adapters.admin import GroupAdmin
from kgctl.adapters.consumer_group_records import ConsumerGroupRecord, GroupEpoch
from kgctl.adapters.group_log import GroupLogReader, GroupLogUnavailable
from kgctl.adapters.group_records import GroupRecord
from kgctl.adapters.trace import TraceTopicReader
from kgctl.errors import ConnectError, KgctlError, NotFoundError, UsageError
from kgctl.model.diagnosis import NEEDED_BEFORE_MS, Diagnosis, diagnose, keep_diagnoses
from kgctl.model.events import Event
from kgctl.model.fold import fold_many
from kgctl.model.snapshot import GroupListing
from kgctl.model.state import GroupState
from kgctl.model.wire import WireSteps
from kgctl.observe.infer import Inferrer
from kgctl.recordings import event_of_line, recording_lines
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 15.0


def now_ms() -> int:
    return int(time.time() * 1000)


class EventInbox:
    """The events on their way to the fold: put by the sources' threads, taken all at
    once by the caller's. At 1,000 members a rebalance brings 3,500 events a second; a
    `queue.Queue` took its lock and notified once for every event on both sides (its get,
    one by one, was a tenth of the drain: docs/benchmarks.md). A source that has several
    at once hands them over in one take."""

    def __init__(self) -> None:
        self._ready = threading.Condition(threading.Lock())
        self._events: list[Event] = []

    def put(self, event: Event) -> None:
        with self._ready:
            self._events.append(event)
            self._ready.notify()

    def put_all(self, events: Iterable[Event]) -> None:
        with self._ready:
            before = len(self._events)
            self._events.extend(events)
            if len(self._events) > before:
                self._ready.notify()

    def take_all(self, wait_s: float = 0.0) -> list[Event]:
        """Every event put so far, in order; waiting up to `wait_s` for one if none is."""
        with self._ready:
            if not self._events and wait_s > 0:
                self._ready.wait_for(lambda: self._events, timeout=wait_s)
            taken, self._events = self._events, []
        return taken

    def empty(self) -> bool:
        with self._ready:
            return not self._events


def replay_schedule(events: Iterable[Event], speed: float) -> Iterator[tuple[float, Event]]:
    """(seconds after the replay starts, event), in file order: the recorded gaps divided
    by `speed`. An event recorded earlier than the one before it (members' clocks and
    arrival order differ) is due with it; `speed` 0 means no waiting at all."""
    first: int | None = None
    due = 0.0
    for ev in events:
        if speed > 0 and ev.ts_ms > 0:
            first = ev.ts_ms if first is None else first
            due = max(due, (ev.ts_ms - first) / 1000.0 / speed)
        yield due, ev


# A paced replay wakes at most this often and hands over every event due by then: at
# 1,000 members a rebalance's events come a third of a millisecond apart, and a wake-up
# for each cost the replay thread most of its time (docs/benchmarks.md). A trace
# topic's reader gets its records in fetched batches too. An event is at most this late.
REPLAY_GRAIN_S = 0.01


def replay_batches(
    schedule: Iterable[tuple[float, Event]], grain_s: float = REPLAY_GRAIN_S
) -> Iterator[tuple[float, list[Event]]]:
    """(seconds after the replay starts, the events due by then) from `replay_schedule`:
    each event in the first batch at or after its due time, the batches at least
    `grain_s` apart."""
    at: float | None = None
    batch: list[Event] = []
    for due, ev in schedule:
        if at is None:
            at = due
        elif due > at:
            yield at, batch
            batch = []
            at = max(due, at + grain_s)
        batch.append(ev)
    if at is not None:
        yield at, batch


def read_events(path: Path) -> Iterator[Event]:
    """Events from a JSON-lines file (plain or gzip); a bad line is a usage error naming
    file and line."""
    for lineno, line in enumerate(recording_lines(path, "--replay"), 1):
        if not line.strip():
            continue
        try:
            yield event_of_line(line)
        except (ValueError, TypeError) as exc:
            raise UsageError(
                f"--replay {path}:{lineno}: not a kgctl event ({exc}); "
                "pass a file written by --record or --output json"
            ) from None


class GroupObserver:
    """Polls DescribeGroups (and offsets for lag) and turns snapshots into events."""

    def __init__(self, admin: GroupAdmin, group: str, interval_s: float) -> None:
        self.admin, self.group, self.interval_s = admin, group, interval_s
        self.inferrer = Inferrer(group, host=socket.gethostname(), pid=os.getpid())
        self.failures = 0
        # The poll thread and the group-log reader both feed the inferrer; events are
        # handed on under the lock too, so they reach the fold in the order made.
        self.lock = threading.Lock()

    def poll(
        self, clock: Callable[[], int] = now_ms, deliver: Callable[[Event], None] | None = None
    ) -> list[Event]:
        """One snapshot's events; on a connection failure, a BrokerDisconnected (once)."""
        try:
            snap = self.admin.describe(self.group)
        except ConnectError as exc:
            self.failures += 1
            error, retry_in = str(exc), self.next_delay()
            return self.infer(lambda: self.inferrer.disconnected(error, clock(), retry_in), deliver)
        self.failures = 0
        return self.infer(lambda: self.inferrer.observe(snap, clock()), deliver)

    def infer(
        self, step: Callable[[], list[Event]], deliver: Callable[[Event], None] | None = None
    ) -> list[Event]:
        """Run one inferrer step under the lock, delivering its events in order."""
        with self.lock:
            events = step()
            if deliver is not None:
                for ev in events:
                    deliver(ev)
        return events

    def next_delay(self) -> float:
        """The interval while connected; exponential backoff while the broker is away."""
        if self.failures == 0:
            return self.interval_s
        factor = float(2 ** min(self.failures, 6))
        return min(self.interval_s * factor, MAX_BACKOFF_S)


class Watch:
    """Watch one group; `drain()` returns new events and keeps `state` folded."""

    def __init__(
        self,
        settings: ClientSettings,
        group: str,
        interval_s: float = 1.0,
        trace_topic: str | None = None,
        replay: Path | None = None,
        record: Path | None = None,
        observe: bool = True,
        speed: float = 1.0,
        stored_generations: bool = True,
    ) -> None:
        if interval_s <= 0:
            raise UsageError(f"--interval {interval_s}: must be more than 0 seconds")
        if speed < 0:
            raise UsageError(f"--speed {speed}: must be 0 (no pacing) or more")
        self.speed = speed
        # Read the broker's generation ids from __consumer_offsets (else: infer them).
        self.stored_generations = stored_generations
        self.replaying = threading.Event()  # set while a paced replay is still feeding
        self._replay_origin: tuple[float, int] | None = None  # (monotonic s, recorded ms)
        self._replay_end_ms: int | None = None  # an instant replay's clock: its last event
        self.settings, self.group, self.interval_s = settings, group, interval_s
        self.trace_topic, self.replay = trace_topic, replay
        self.state = GroupState(group)
        self._diagnosed: dict[int, Diagnosis] = {}
        self._diagnosed_at = 0
        self._diagnosed_settling = False  # the last diagnosis was made while settling
        # The time between diagnoses while a rebalance runs or settles: a second, or
        # DIAGNOSIS_SPACING times what the last one cost (the CPU this thread spent),
        # whichever is longer. The live view must draw at that size too.
        self._spacing_ms = 1000
        self._cpu_s: Callable[[], float] = time.thread_time
        # The live view asks for its diagnoses on a worker thread (`background`): at 1,000
        # members one takes seconds, and the frames go on meanwhile with the last ones.
        self.background = False
        self._job: _DiagnosisJob | None = None
        self._fresh = False
        self._steps: deque[Event] = deque(maxlen=DIAGNOSIS_STEPS)
        self._routine: deque[Event] = deque()
        # Clients that report their own steps (kgctl members): their wire events are not
        # read as steps a second time (kgctl/model/wire.py, as explain and report do).
        self._speaking: set[str] = set()
        self._wire = WireSteps()  # what each traced consumer-protocol member last said
        self.queue = EventInbox()
        self.notes: queue.Queue[str] = queue.Queue()
        self.stopping = threading.Event()
        # Set once a consumer group's epoch records are followed (from the end offset then).
        self.epochs_followed = threading.Event()
        self.threads: list[threading.Thread] = []
        self.admin = GroupAdmin(settings) if observe else None
        self.observer = GroupObserver(self.admin, group, interval_s) if self.admin else None
        self._record: IO[str] | None = None
        if record is not None:
            try:
                self._record = record.open("a", encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"--record {record}: cannot write it ({exc.strerror})") from None
        self.fatal: KgctlError | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def first_snapshot(self, fail_if_missing: bool = False) -> list[Event]:
        """Describe the group once, synchronously: connection and missing-group errors
        surface here, before any view starts."""
        if self.observer is None:
            return []
        assert self.admin is not None
        snap = self.admin.describe(self.group)
        if snap.missing and fail_if_missing:
            raise NotFoundError(
                f"group {self.group!r} does not exist (coordinator {snap.coordinator}); "
                "run `kgctl watch` without a group to list the groups"
            )
        events = self.observer.inferrer.observe(snap, now_ms())
        self.queue.put_all(events)
        return events

    def start(self) -> None:
        if self.replay is not None:
            self._replay_names_group()
            if self.speed == 0:
                for ev in read_events(self.replay):
                    if ev.group == self.group or not self.group:
                        self.queue.put(ev)
                        self._replay_end_ms = max(self._replay_end_ms or 0, ev.ts_ms)
            else:
                self.replaying.set()
                self._spawn(self._replay_loop, "kgctl-replay")
        if self.observer is not None:
            self._spawn(self._observe_loop, "kgctl-observer")
            self._start_group_log()
        if self.trace_topic:
            reader = TraceTopicReader(
                self.settings, self.trace_topic, self.group, self.queue.put, self.notes.put
            )
            reader.start()
            self.threads.append(reader)

    def stop(self) -> None:
        self.stopping.set()
        for th in self.threads:
            stop = getattr(th, "stop", None)
            if callable(stop):
                stop()
        for th in self.threads:
            th.join(timeout=5)
        if self.admin is not None:
            self.admin.close()
        if self._record is not None:
            self._record.close()
            self._record = None

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        th = threading.Thread(target=target, name=name, daemon=True)
        th.start()
        self.threads.append(th)

    def _replay_names_group(self) -> None:
        """Refuse a recording with no event of the group (a mistyped name would show an
        empty group until the replay ends). Its quoted name on no line is proof enough and
        cheap; the events are parsed only to list the groups it does hold."""
        assert self.replay is not None
        if not self.group:
            return
        quoted = {json.dumps(self.group), json.dumps(self.group, ensure_ascii=False)}
        if any(q in line for line in recording_lines(self.replay, "--replay") for q in quoted):
            return
        groups = sorted(
            {e.group for e in read_events(self.replay) if e.group and e.source != "chaos"}
        )
        raise NotFoundError(
            f"--replay {self.replay}: no events of group {self.group!r} "
            f"(groups: {', '.join(groups) or 'none'})"
        )

    def _replay_loop(self) -> None:
        """Feed the recording at its recorded pace (divided by `speed`)."""
        assert self.replay is not None
        try:
            started = time.monotonic()
            schedule = replay_schedule(read_events(self.replay), self.speed)
            for at, batch in replay_batches(schedule):
                if self._replay_origin is None:
                    first = next((ev for ev in batch if ev.ts_ms > 0), None)
                    if first is not None:
                        self._replay_origin = (started, first.ts_ms)
                if self.stopping.wait(max(0.0, started + at - time.monotonic())):
                    return
                group = self.group
                self.queue.put_all([ev for ev in batch if ev.group == group or not group])
        except KgctlError as exc:  # a bad line: the view says so and stops
            self.fatal = exc
        finally:
            self.replaying.clear()

    def _remember(self, ev: Event) -> None:
        """Keep what the diagnosis reads: every step (the last DIAGNOSIS_STEPS), and the
        routine events (consumption, heartbeats, commits, descriptions) of the last
        DIAGNOSIS_ROUTINE_MS only; under load those are most of the stream."""
        if ev.type in _ROUTINE_TYPES:
            self._routine.append(ev)
            while self._routine and self._routine[0].ts_ms < ev.ts_ms - DIAGNOSIS_ROUTINE_MS:
                self._routine.popleft()
        else:
            self._steps.append(ev)
            # Routine events alone do not call for a new diagnosis: they are most of a
            # steady group's stream (at 1,000 members, a diagnosis every frame cost
            # seconds); the once-a-second refresh while a rebalance runs or has just
            # ended takes them in.
            self._fresh = True

    def diagnoses(self, now_ms: int) -> dict[int, Diagnosis]:
        """Each generation's diagnosis, made again when events came (or a second passed);
        one whose events have begun to leave what is kept keeps what was said while
        they were all there."""
        if self._collect():
            return dict(self._diagnosed)  # one diagnosis at a time
        settling = self._settling(now_ms)
        if self._diagnosed_settling and not settling:
            self._fresh = True  # the settled rebalance, with all that came after it
        if self._fresh and self._too_early(now_ms):
            # A rebalance began: its first members' steps would each call for a whole
            # diagnosis. Until it completes, it waits one spacing (a second; at 1,000
            # members, where one costs seconds, SETTLING_MS): most rebalances have
            # completed by then, and one that has not is diagnosed while it waits.
            return dict(self._diagnosed)
        settling = settling or self.state.rebalancing
        due = now_ms - self._diagnosed_at >= self._spacing_ms
        if not (self._fresh or (due and settling)):
            return dict(self._diagnosed)
        if not due and settling:
            # While a rebalance runs its step events come at every frame: at most once a
            # second then (each is a pass over every member and partition), and less
            # often where one diagnosis costs more than a tenth of that (at 1,000
            # members, with the two minutes of events kept, about 5 CPU-s).
            return dict(self._diagnosed)
        # The newest generations only (and the one before, for what came before them),
        # from what happened since shortly before they began: the cost stays bounded on a
        # group that has rebalanced for hours. A member's configuration is in its start.
        all_gens = self.state.generations
        newest = DIAGNOSED_GENERATIONS
        if settling and all(
            g.inferred or g.generation in self._diagnosed
            for g in all_gens[-DIAGNOSED_GENERATIONS:-SETTLING_GENERATIONS]
        ):
            # While a rebalance runs or settles, only the generations it can change: its
            # own, and the one it ended (where it began bounds what followed that one).
            # The others keep what was said of them, and all are diagnosed again once it
            # has settled. At 1,000 members each generation costs about 0.1 CPU-s.
            newest = SETTLING_GENERATIONS
        gens = all_gens[-(newest + 1) :]
        since = gens[0].start_ms - NEEDED_BEFORE_MS if gens else 0
        starts = [q[0].ts_ms for q in (self._routine,) if q]
        if len(self._steps) == self._steps.maxlen:
            starts.append(self._steps[0].ts_ms)
        job = _DiagnosisJob(
            replace(self.state, generations=gens),
            list(self._steps),  # copies: the fold moves on while a worker reads them
            list(self._routine),
            since,
            len(gens) < len(all_gens),
            max(starts, default=None),
            now_ms,
            self._cpu_s,
        )
        self._fresh, self._diagnosed_at = False, now_ms
        self._diagnosed_settling = settling
        if self.background:
            self._job = job
            threading.Thread(target=job.run, name="kgctl-diagnosis", daemon=True).start()
            return dict(self._diagnosed)
        job.run()
        self._take(job)
        return dict(self._diagnosed)

    def _collect(self) -> bool:
        """Take a worker's diagnosis once it is made; whether one is still being made."""
        job = self._job
        if job is None:
            return False
        if not job.done.is_set():
            return True
        self._job = None
        self._take(job)
        return False

    def _take(self, job: _DiagnosisJob) -> None:
        if job.failed is not None:
            raise job.failed
        self._diagnosed = keep_diagnoses(self._diagnosed, job.fresh, job.window_from_ms)
        self._spacing_ms = max(1000, int(DIAGNOSIS_SPACING * job.cost_ms))

    def _too_early(self, now_ms: int) -> bool:
        """A rebalance runs, for less than one spacing (at most SETTLING_MS) so far. Never
        in an instant replay: its clock stops at its last event and nothing more comes, so
        a recording that ends mid-rebalance (members stopping) waited for ever."""
        if self._replay_end_ms is not None:
            return False
        s = self.state
        if not s.rebalancing or s.rebalance_started_ms is None or not s.generations:
            return False
        return now_ms - s.rebalance_started_ms < min(self._spacing_ms, SETTLING_MS)

    def _settling(self, now_ms: int) -> bool:
        """A rebalance runs, or the newest ended less than SETTLING_MS ago (the broker's
        description after it, with the lag, may still come)."""
        gens = self.state.generations
        if not gens:
            return False
        last = gens[-1]
        if last.stable_ms is None and last.end_ms is None:
            return True
        return now_ms - (last.stable_ms or last.end_ms or 0) < SETTLING_MS

    def clock(self) -> int:
        """Now for the views: the recording's own time during a paced replay (its end for
        an instant one), else the wall clock (so "seen 2s ago" and durations read as they
        did when recorded, not as hours since)."""
        if self._replay_end_ms is not None:
            return self._replay_end_ms
        origin = self._replay_origin
        if origin is None:
            return now_ms()
        return origin[1] + int((time.monotonic() - origin[0]) * 1000 * self.speed)

    def _reads_group_log(self) -> bool:
        """Generation ids come from __consumer_offsets: asked for, and not a KIP-848 group
        (which stores epochs there, not generations: `_start_group_log` reads those)."""
        first = self.observer.inferrer.prev if self.observer is not None else None
        return self.stored_generations and (first is None or first.group_epoch is None)

    def stored_generation_now(self) -> None:
        """For `--once`: look up the group's latest stored generation synchronously (the
        reader's bounded look-back) instead of following the records."""
        observer = self.observer
        first = observer.inferrer.prev if observer is not None else None
        if observer is None or first is None or first.missing or not self._reads_group_log():
            return

        inferrer = observer.inferrer
        try:
            partition, latest, scanned = GroupLogReader(self.settings, self.group).look_back()
        except GroupLogUnavailable as exc:
            events = inferrer.stored_unavailable(str(exc), now_ms())
        else:
            events = inferrer.stored_ready(partition, latest, scanned, now_ms())
        self.queue.put_all(events)

    def _start_group_log(self) -> None:
        """Follow the group's records in __consumer_offsets: a classic group's generation
        ids as soon as they are stored; a KIP-848 group's epoch bumps (when each of its
        rebalances began, which its next description shows only up to an interval later:
        the monitor reads the same record for the same start)."""
        observer = self.observer
        assert observer is not None
        inferrer, put = observer.inferrer, self.queue.put
        first = inferrer.prev
        if self.stored_generations and first is not None and first.group_epoch is not None:

            def bumped(rec: ConsumerGroupRecord) -> None:
                value = rec.value
                if isinstance(value, GroupEpoch):
                    with observer.lock:  # (says nothing: the next description will)
                        inferrer.stored_epoch(value.epoch, rec.timestamp_ms)

            epochs = GroupLogReader(
                self.settings, self.group, on_consumer_record=bumped,
                on_ready=lambda *_a: self.epochs_followed.set(),
                on_unavailable=lambda why: log.info("epoch records not read: %s", why),
            )  # fmt: skip
            epochs.start()
            self.threads.append(epochs)
            return
        if not self._reads_group_log():
            return

        def ready(partition: int, latest: GroupRecord | None, scanned: int) -> None:
            observer.infer(lambda: inferrer.stored_ready(partition, latest, scanned, now_ms()), put)

        def record(rec: GroupRecord) -> None:
            observer.infer(lambda: inferrer.stored_record(rec, now_ms()), put)

        def unavailable(reason: str) -> None:
            observer.infer(lambda: inferrer.stored_unavailable(reason, now_ms()), put)

        def between(rec: ConsumerGroupRecord) -> None:
            with observer.lock:  # (says nothing: the classic record after it will)
                inferrer.stored_consumer_record(rec)

        reader = GroupLogReader(
            self.settings, self.group, ready, record, unavailable, on_between=between
        )
        reader.start()
        self.threads.append(reader)

    def _observe_loop(self) -> None:
        assert self.observer is not None
        # The first snapshot was usually taken already; wait one interval before the next.
        while not self.stopping.wait(self.observer.next_delay()):
            try:
                self.observer.poll(deliver=self.queue.put)
            except KgctlError as exc:  # not authorized, or similar: nothing to retry
                self.fatal = exc
                self.notes.put(str(exc))
                return

    # -- consuming ----------------------------------------------------------------------

    def drain(self, clock: Callable[[], int] = now_ms, wait_s: float = 0.0) -> list[Event]:
        """Every event that arrived since the last call, folded into `state`."""
        out = self.queue.take_all(wait_s)
        now = clock()
        steps: list[tuple[Event, int]] = []
        for ev in out:
            for step in self._as_steps(ev):
                # A step read from the wire happened when the wire says (a JoinGroup
                # sent seconds before its answer came), not when the watch read it.
                steps.append((step, now if step is ev else min(now, step.ts_ms)))
                self._remember(step)
            if self._record is not None:
                self._record.write(ev.to_json() + "\n")
        if steps:
            self.state = fold_many(self.state, steps)
        if out and self._record is not None:
            self._record.flush()
        return out

    def _as_steps(self, ev: Event) -> list[Event]:
        """The event, and for a proxy's trace of a client that reports nothing itself
        (a Java or librdkafka application) the member steps it stands for: the live view
        folds and diagnoses what explain and report read from the same trace. A
        recording keeps the trace alone (its readers expand it themselves)."""
        if ev.source == "member" and ev.client_id:
            self._speaking.add(ev.client_id)
        if ev.source != "wire" or ev.client_id in self._speaking:
            return [ev]
        return [ev, *self._wire.steps(ev)]


class _DiagnosisJob:
    """One diagnosis of what the watch kept, made on the caller's thread or a worker's:
    everything it reads is immutable or its own copy."""

    def __init__(
        self,
        state: GroupState,
        steps: list[Event],
        routine: list[Event],
        since: int,
        context_first: bool,
        window_from_ms: int | None,
        now_ms: int,
        cpu_s: Callable[[], float],
    ) -> None:
        self.state, self.steps, self.routine, self.since = state, steps, routine, since
        self.context_first, self.window_from_ms, self.now_ms = context_first, window_from_ms, now_ms
        self.cpu_s = cpu_s
        self.fresh: tuple[Diagnosis, ...] = ()
        self.cost_ms = 0.0  # the CPU this thread spent on it
        self.failed: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            cpu0 = self.cpu_s()
            since = self.since
            kept = [e for e in self.steps if e.ts_ms >= since or e.type == "MemberStarted"]
            kept += [e for e in self.routine if e.ts_ms >= since]
            fresh = diagnose(self.state, kept, self.now_ms)  # (which orders them by time)
            # The one before was context, not diagnosed whole.
            self.fresh = fresh[1:] if self.context_first else fresh
            self.cost_ms = 1000 * (self.cpu_s() - cpu0)
        except BaseException as exc:  # handed to the view's thread, raised there
            self.failed = exc
        finally:
            self.done.set()


# What the live view keeps for the diagnosis of each generation (`Watch.diagnoses`), and
# how many of the newest generations it diagnoses again (the table shows at most 8).
DIAGNOSED_GENERATIONS = 8
SETTLING_GENERATIONS = 2
DIAGNOSIS_STEPS = 20_000
DIAGNOSIS_ROUTINE_MS = 120_000
SETTLING_MS = 10_000
DIAGNOSIS_SPACING = 10  # a diagnosis at most a tenth of the time while a rebalance runs
_ROUTINE_TYPES = frozenset(
    {"RecordsConsumed", "HeartbeatSucceeded", "HeartbeatTraced", "OffsetsCommitted",
     "OffsetCommitTraced", "GroupObserved", "ConsumerGroupHeartbeatTraced"}
)  # fmt: skip


def list_groups(settings: ClientSettings) -> list[GroupListing]:
    """Every group the cluster knows, with state and member count."""
    admin = GroupAdmin(settings)
    try:
        return admin.list_groups()
    finally:
        admin.close()


def listing_json(items: list[GroupListing]) -> list[dict[str, Any]]:
    return [
        {
            "group": g.group,
            "state": g.state,
            "protocol_type": g.protocol_type,
            "group_type": g.group_type,
            "members": g.members,
        }
        for g in items
    ]


def event_line(ev: Event) -> str:
    return json.dumps(ev.to_dict(), sort_keys=True, separators=(",", ":"))
