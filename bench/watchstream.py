"""`kgctl watch` through a full rebalance of a large group, without the group.

A generated event stream shaped like what `kgctl watch G --trace-topic T` receives from a
group of M `kgctl join` members over P partitions of one topic (eager range assignment,
heartbeat 3 s, auto-commit every 5 s, records every second) and from its own observer
(one DescribeGroups a second, with every member's assignment and the lag of every
partition), written as a JSON-lines recording and played through the watch's real code:
`Watch(replay=FILE, speed=1)` (its replay thread parses each line and feeds the queue at
the recorded pace, as the trace topic's reader would) and `kgctl.render.live.run_live`
(the terminal loop: drain, fold, diagnoses, `render_group`, rich's `Live` refresh) on a
truecolor console of the given size writing into a counter. Frames are counted where the
loop writes them; CPU is the process's (`time.process_time`: the replay thread's JSON
parsing included) between the phase boundaries of the recording.

The member events are the ones a `kgctl join` member emits (the types, order and data
fields of `tests/data/issue_scenario.jsonl.gz`, a live recording). The observer events are
made by the observer's own `Inferrer` from generated `GroupSnapshot`s (PreparingRebalance
and CompletingRebalance list the members without assignments, as DescribeGroups does), in
its inferred-generation mode (no `__consumer_offsets` reader). The timing is a model, not
a recording: during the rebalance each member learns of it at its next heartbeat (spread
over one heartbeat interval), revokes and rejoins; the broker answers every JoinGroup once
the last has rejoined; the answers and the SyncGroup answers arrive within `burst_ms`.

Phases of one run: the group's first two generations and `history_s` (120 s, what the
watch keeps for its diagnoses) of steady traffic are folded before the clock starts (not
timed); then `warm_s` of steady traffic (not reported), `steady_s` steady, the
rebalance (a member leaves, the other M-1 revoke everything and get a new range
assignment) until the first Stable description after it, `settle_s` after that (the view
diagnoses once a second while settling), `steady_s` steady again.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kgctl.errors import KgctlError
from kgctl.model.events import Event
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.observe.infer import Inferrer

TOPIC = "orders"
GROUP = "bench-watch"
T0 = 1_800_000_000_000


def _range(members: list[int], partitions: int) -> dict[int, list[int]]:
    """Range assignment of one topic's partitions over `members` (in order)."""
    per, extra = divmod(partitions, len(members))
    out: dict[int, list[int]] = {}
    start = 0
    for k, m in enumerate(members):
        n = per + (1 if k < extra else 0)
        out[m] = list(range(start, start + n))
        start += n
    return out


class _Members:
    """Event factory for the members: a kgctl member's envelope, seq per member."""

    def __init__(self) -> None:
        self.seq: dict[int, int] = {}

    @staticmethod
    def name(i: int) -> str:
        return f"m{i:04d}"

    @classmethod
    def member_id(cls, i: int) -> str:
        return f"kgctl-{cls.name(i)}-{i:08x}-0000-4000-8000-{i:012x}"

    def __call__(self, etype: str, i: int, t: int, gen: int, **data: Any) -> Event:
        self.seq[i] = self.seq.get(i, 0) + 1
        return Event(
            type=etype,
            ts_ms=t,
            mono_ms=float(t - T0),
            seq=self.seq[i],
            group=GROUP,
            member=self.name(i),
            member_id=self.member_id(i),
            client_id=f"kgctl-{self.name(i)}",
            host="bench",
            pid=20_000 + i // 50,  # 50 members a process, as the density bench packs them
            generation=gen,
            data=data,
        )


class Stream:
    """The generated recording: events in time order and the phase boundaries."""

    def __init__(
        self,
        members: int = 1000,
        partitions: int = 10_000,
        warm_s: float = 5.0,
        steady_s: float = 20.0,
        settle_s: float = 10.0,
        heartbeat_ms: int = 3000,
        records_ms: int = 1000,
        commit_ms: int = 5000,
        describe_ms: int = 1000,
        burst_ms: int = 300,
        seed: int = 18,
        history_s: float = 120.0,
    ) -> None:
        self.n, self.p = members, partitions
        self.history_s = history_s
        self.heartbeat_ms, self.records_ms = heartbeat_ms, records_ms
        self.commit_ms, self.describe_ms, self.burst_ms = commit_ms, describe_ms, burst_ms
        self.rng = random.Random(seed)
        self.ev = _Members()
        self.inferrer = Inferrer(GROUP, host="bench", pid=1)
        self.setup: list[Event] = []
        self.timed: list[Event] = []
        self.phases: dict[str, tuple[int, int]] = {}
        self.offsets: dict[int, int] = {}  # partition -> consumed up to
        self._build(warm_s, steady_s, settle_s)

    # -- pieces -------------------------------------------------------------------------

    def _join_round(
        self, live: list[int], gen: int, learn: dict[int, int], owned: dict[int, list[int]]
    ) -> tuple[list[Event], dict[int, list[int]], int, int]:
        """One eager rebalance of `live`: each member's revoke and JoinGroup at its
        `learn` time, then the answers. Returns events, the new assignment, when the
        JoinGroup answers began and when the last member completed."""
        out: list[Event] = []
        e = self.ev
        for i in live:
            t = learn[i]
            mine = {TOPIC: owned.get(i, [])} if owned.get(i) else {}
            first = gen == 1
            reason = "first_join" if first else "rebalance_in_progress"
            if not first:
                out.append(
                    e("HeartbeatFailed", i, t, gen - 1, error="REBALANCE_IN_PROGRESS",
                      rtt_ms=1.4, transport=False)
                )  # fmt: skip
            out.append(e("RejoinRequested", i, t + 1, gen - 1, reason=reason))
            if mine:
                offs = {TOPIC: {str(p): self.offsets.get(p, 0) for p in mine[TOPIC]}}
                out.append(e("OffsetsCommitted", i, t + 3, gen - 1, duration_ms=3.1, offsets=offs))
                out.append(e("PartitionsRevoked", i, t + 4, gen - 1, partitions=mine))
            out.append(
                e("JoinPrepared", i, t + 4, gen - 1, auto_commit=True, duration_ms=3.0,
                  lost=False, owned=mine, previous_generation=gen - 1,
                  previous_member_id=e.member_id(i) if not first else "", protocol="eager")
            )  # fmt: skip
            out.append(
                e("JoinGroupSent", i, t + 5, gen - 1, coordinator="coordinator-1",
                  member_id=e.member_id(i), owned={}, protocols=["range"], reason=reason,
                  rebalance_timeout_ms=300_000, session_timeout_ms=45_000,
                  wire_reason=f"kgctl: {reason}")
            )  # fmt: skip
        answered = max(learn.values()) + 20
        new = _range(live, self.p)
        leader = live[0]
        step = self.burst_ms / len(live)
        for k, i in enumerate(live):
            t = int(answered + k * step)
            is_leader = i == leader
            extra: dict[str, Any] = {}
            if is_leader:
                extra["members"] = [
                    {"member_id": e.member_id(j), "group_instance_id": None} for j in live
                ]
            out.append(
                e("JoinGroupReceived", i, t, gen - 1, api_version=9,
                  duration_ms=float(t - learn[i]), error="NONE", generation=gen,
                  is_leader=is_leader,
                  leader=e.member_id(leader), member_id=e.member_id(i), protocol="range", **extra)
            )  # fmt: skip
            if is_leader:
                out.append(
                    e("AssignmentComputed", i, t + 2, gen, assignor="range",
                      members=len(live), duration_ms=2.0)
                )  # fmt: skip
            out.append(e("SyncGroupSent", i, t + 3, gen, assignments=len(live) if is_leader else 0,
                         is_leader=is_leader))  # fmt: skip
        synced = int(answered + self.burst_ms + 30)
        for k, i in enumerate(live):
            t = int(synced + k * step)
            mine = {TOPIC: new[i]} if new[i] else {}
            out.append(
                e("SyncGroupReceived", i, t, gen, assignment=mine, duration_ms=30.0, error="NONE")
            )
            out.append(e("PartitionsAssigned", i, t + 1, gen, partitions=mine))
            out.append(
                e("JoinCompleted", i, t + 1, gen, added=mine, assignment=mine, generation=gen,
                  is_leader=i == leader, member_id=e.member_id(i), protocol="range",
                  rebalance_ms=t + 1 - learn[i], removed={})
            )  # fmt: skip
        done = int(synced + self.burst_ms + 2)
        return out, new, answered, done

    def _snapshot(
        self, live: list[int], state: str, owned: dict[int, list[int]] | None
    ) -> GroupSnapshot:
        members = tuple(
            MemberSnapshot(
                member_id=self.ev.member_id(i),
                client_id=f"kgctl-{self.ev.name(i)}",
                host="/127.0.0.1",
                subscription=(TOPIC,) if owned is not None else None,
                partitions={TOPIC: owned[i]} if owned is not None and owned.get(i) else None,
            )
            for i in live
        )
        # Lag: what each partition's consumer has not read yet, a few records at most.
        lag = {TOPIC: {p: self.rng.randint(0, 5) for p in range(self.p)}}
        return GroupSnapshot(
            group=GROUP,
            state=state,
            protocol_type="consumer",
            protocol="range" if state != "PreparingRebalance" else "",
            coordinator="1 127.0.0.1:9092",
            members=members,
            lag=lag,
        )

    def _steady(
        self,
        live: list[int],
        gen: int,
        owned: dict[int, list[int]],
        start: int,
        end: int,
        quiet: dict[int, tuple[int, int]] | None = None,
    ) -> list[Event]:
        """Heartbeats, records and commits of `live` between `start` and `end`; a member
        is quiet (rebalancing) within its `quiet` span."""
        out: list[Event] = []
        e = self.ev
        for i in live:
            mine = owned.get(i, [])
            q0, q1 = (quiet or {}).get(i, (0, 0))
            phase = (i * self.heartbeat_ms) // self.n  # members heartbeat out of step
            t = start + phase
            while t < end:
                if not q0 <= t < q1:
                    out.append(e("HeartbeatSucceeded", i, t, gen, rtt_ms=1.2, throttle_time_ms=0))
                t += self.heartbeat_ms
            t = start + (i * self.records_ms) // self.n
            while t < end and mine:
                if not q0 <= t < q1:
                    p = mine[(t // self.records_ms) % len(mine)]
                    first = self.offsets.get(p, 0)
                    self.offsets[p] = first + 5
                    batch = {"topic": TOPIC, "partition": p, "first": first,
                             "last": first + 4, "count": 5, "duplicates": 0}  # fmt: skip
                    out.append(
                        e("RecordsConsumed", i, t, gen, batches=[batch], count=5, duplicates=0,
                          total=self.offsets[p])
                    )  # fmt: skip
                t += self.records_ms
            t = start + (i * self.commit_ms) // self.n
            while t < end and mine:
                if not q0 <= t < q1:
                    offs = {TOPIC: {str(p): self.offsets.get(p, 0) for p in mine}}
                    out.append(e("OffsetsCommitted", i, t, gen, duration_ms=3.0, offsets=offs))
                t += self.commit_ms
        return out

    def _describes(self, start: int, end: int, shape: Any) -> list[Event]:
        """The observer's polls every `describe_ms` in [start, end): `shape(t)` gives
        (live members, state, owned or None) at t."""
        out: list[Event] = []
        t = start
        while t < end:
            live, state, owned = shape(t)
            out += self.inferrer.observe(self._snapshot(live, state, owned), t)
            t += self.describe_ms
        return out

    # -- the whole run ------------------------------------------------------------------

    def _build(self, warm_s: float, steady_s: float, settle_s: float) -> None:
        n = self.n
        everyone = list(range(n))
        e = self.ev
        t = T0
        setup: list[Event] = []
        for i in everyone:
            setup.append(
                e("MemberStarted", i, t, -1, bootstrap="127.0.0.1:9092",
                  config={"group": GROUP, "topics": [TOPIC], "assignors": ["range"],
                          "heartbeat_interval_ms": self.heartbeat_ms,
                          "session_timeout_ms": 45_000, "commit": "auto", "name": e.name(i)})
            )  # fmt: skip
        owned: dict[int, list[int]] = {}
        for gen in (1, 2):
            learn = {i: t + 10 + (i * 2000) // n for i in everyone}
            events, owned, _, done = self._join_round(everyone, gen, learn, owned)
            setup += events
            t = done + 1000
        # Then the minutes of steady traffic a watch that has run for a while keeps for
        # its diagnoses (DIAGNOSIS_ROUTINE_MS of heartbeats, records, commits and
        # descriptions), folded before the clock starts.
        hist = max(int(1000 * self.history_s), 15_000)  # past the view's settling
        stable = lambda _t: (everyone, "Stable", owned)  # noqa: E731
        setup += self._steady(everyone, 2, owned, t, t + hist)
        setup += self._describes(t, t + hist, stable)
        self.setup = sorted(setup, key=lambda ev: ev.ts_ms)
        t += hist
        t -= t % self.describe_ms  # polls on whole periods, as the boundaries below

        timed: list[Event] = []
        start = t
        phases: dict[str, tuple[int, int]] = {}
        warm_end = start + int(1000 * warm_s)
        steady_end = warm_end + int(1000 * steady_s)
        phases["steady"] = (warm_end, steady_end)
        timed += self._steady(everyone, 2, owned, start, steady_end)
        timed += self._describes(start, steady_end, stable)

        # The rebalance: the last member leaves; every other learns at its next heartbeat.
        trigger = steady_end
        leaver = everyone[-1]
        live = everyone[:-1]
        mine = {TOPIC: owned[leaver]}
        timed += [
            e("PartitionsRevoked", leaver, trigger, 2, partitions=mine),
            e("LeaveGroupSent", leaver, trigger + 1, 2, member_id=e.member_id(leaver),
              reason="kgctl: member stopping (SIGTERM)"),
            e("GenerationReset", leaver, trigger + 4, -1, cause="left_group",
              member_id_kept=False, previous_generation=2,
              previous_member_id=e.member_id(leaver)),
            e("MemberStopped", leaver, trigger + 5, -1, reason="SIGTERM", exit_status=0,
              records=0, duplicates=0, committed={}, consumed_up_to={}),
        ]  # fmt: skip
        learn = {
            i: trigger + 5 + ((i * self.heartbeat_ms) // n - trigger + T0) % self.heartbeat_ms
            for i in live
        }
        events, new, answered, done = self._join_round(live, 3, learn, owned)
        timed += events
        quiet = {i: (learn[i], done) for i in live}
        rebalance_end = done - done % self.describe_ms + self.describe_ms  # next Stable poll
        timed += self._steady(live, 2, owned, steady_end, answered, quiet)
        timed += self._steady(live, 3, new, answered, rebalance_end, quiet)

        def during(t: int) -> tuple[list[int], str, dict[int, list[int]] | None]:
            if t < trigger:
                return everyone, "Stable", owned
            if t < answered:
                return (everyone if t < trigger + 5 else live), "PreparingRebalance", None
            if t < done:
                return live, "CompletingRebalance", None
            return live, "Stable", new

        timed += self._describes(steady_end, rebalance_end + 1, during)
        phases["rebalance"] = (trigger, rebalance_end + 1)
        settle_end = rebalance_end + 1 + int(1000 * settle_s)
        phases["settling"] = (rebalance_end + 1, settle_end)
        after_end = settle_end + int(1000 * steady_s)
        phases["after"] = (settle_end, after_end)
        timed += self._steady(live, 3, new, rebalance_end + 1, after_end)
        after = lambda _t: (live, "Stable", new)  # noqa: E731
        timed += self._describes(rebalance_end + self.describe_ms, after_end, after)
        self.timed = sorted(timed, key=lambda ev: ev.ts_ms)
        self.start_ms, self.end_ms = start, after_end
        self.phases = phases

    def write(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as fh:
            for ev in self.timed:
                fh.write(ev.to_json() + "\n")

    def counts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"setup_events": len(self.setup), "timed_events": len(self.timed)}
        for name, (a, b) in self.phases.items():
            n = sum(1 for ev in self.timed if a <= ev.ts_ms < b)
            out[f"{name}_events"] = n
            out[f"{name}_events_per_s"] = round(1000 * n / (b - a))
        return out


class _Frames(io.TextIOBase):
    """A terminal that counts the frames the live loop writes, with their times."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.chars = 0

    def write(self, s: str) -> int:
        # rich's Live writes each refresh in one piece; control-only writes (cursor
        # show/hide, the alternate screen) are a few characters.
        if len(s) > 200:
            self.times.append(time.perf_counter())
        self.chars += len(s)
        return len(s)

    def isatty(self) -> bool:
        return True

    def flush(self) -> None:
        pass


class _Played(KgctlError):
    """The recording has been played: the harness's way out of the live loop."""


def run_once(
    stream: Stream, path: Path, width: int, height: int, profile: str | None = None
) -> dict[str, Any]:
    """Play `path` (the stream's timed part) through a Watch and the live loop."""
    from bench.micro import terminal_console
    from kgctl.observe.watch import Watch
    from kgctl.render.live import run_live
    from kgctl.settings import ClientSettings

    watch = Watch(ClientSettings(bootstrap="127.0.0.1:1"), GROUP, observe=False, replay=path)
    for ev in stream.setup:
        watch.queue.put(ev)
    watch.drain(clock=lambda: stream.setup[-1].ts_ms)
    term = _Frames()
    console = terminal_console(term, width, height)
    marks: dict[str, tuple[float, float, float]] = {}  # label -> (wall, cpu, gc s so far)
    by_thread: dict[str, dict[str, float]] = {}  # label -> CPU s so far of each thread
    gc_s = [0.0, 0.0]  # total, and when the collection running now began

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_s[1] = time.perf_counter()
        else:
            gc_s[0] += time.perf_counter() - gc_s[1]

    gc.callbacks.append(collected)

    def boundaries() -> Iterator[tuple[str, int]]:
        for name, (a, b) in stream.phases.items():
            yield f"{name}:start", a
            yield f"{name}:end", b

    def monitor(origin: float) -> None:
        for label, ts in sorted(boundaries(), key=lambda x: x[1]):
            at = origin + (ts - stream.start_ms) / 1000
            time.sleep(max(0.0, at - time.perf_counter()))
            marks[label] = (time.perf_counter(), time.process_time(), gc_s[0])
            by_thread[label] = _thread_cpu()
        # The loop's next turn raises this: the replay is over.
        watch.fatal = _Played("played")

    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    watch.start()
    origin = time.perf_counter()
    mon = threading.Thread(target=monitor, args=(origin,), daemon=True)
    mon.start()
    try:
        if prof is not None:
            prof.enable()
        run_live(watch, console)
    except _Played:
        pass
    finally:
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)  # type: ignore[arg-type]
        watch.stop()
        gc.callbacks.remove(collected)
    out: dict[str, Any] = {}
    for name in stream.phases:
        (w0, c0, g0), (w1, c1, g1) = marks[f"{name}:start"], marks[f"{name}:end"]
        frames = [f for f in term.times if w0 <= f < w1]
        gaps = [b - a for a, b in zip(frames, frames[1:], strict=False)]
        out[name] = {
            "wall_s": round(w1 - w0, 2),
            "frames": len(frames),
            "frames_per_s": round(len(frames) / (w1 - w0), 2),
            "cpu_pct": round(100 * (c1 - c0) / (w1 - w0), 1),
            "cpu_s": round(c1 - c0, 2),
            "gc_s": round(g1 - g0, 2),  # wall time in the cycle collector
            "longest_gap_ms": round(1000 * max(gaps), 0) if gaps else None,
            # Which thread spent it: the live loop (MainThread), the replay's parsing
            # (kgctl-replay), the diagnoses (kgctl-diagnosis, one thread per job).
            "cpu_pct_by_thread": _per_thread(
                by_thread[f"{name}:start"], by_thread[f"{name}:end"], w1 - w0
            ),
        }
    return out


def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by thread name (Linux's
    per-task counters; threads of the same name summed), {} where /proc has none."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for t in threading.enumerate():
        try:
            fields = Path(f"/proc/self/task/{t.native_id}/stat").read_text().rsplit(")", 1)[1]
        except (OSError, IndexError):
            continue
        utime, stime = (int(x) for x in fields.split()[11:13])
        out[t.name] = out.get(t.name, 0.0) + (utime + stime) / tick
    return out


def _per_thread(a: dict[str, float], b: dict[str, float], wall_s: float) -> dict[str, float]:
    """% of a core each thread spent between the marks `a` and `b` (a thread that began
    in between counts from 0)."""
    spent = {name: b[name] - a.get(name, 0.0) for name in b}
    return {n: round(100 * v / wall_s, 1) for n, v in sorted(spent.items()) if v > 0}


def _median_of(runs: list[dict[str, Any]], phase: str, key: str) -> float | None:
    values = [r[phase][key] for r in runs if r[phase][key] is not None]
    return float(statistics.median(values)) if values else None


def bench(
    members: int = 1000,
    partitions: int = 10_000,
    runs: int = 5,
    steady_s: float = 20.0,
    settle_s: float = 10.0,
    width: int = 160,
    height: int = 50,
    profile: str | None = None,
    say: Any = print,
    warm_s: float = 5.0,
) -> dict[str, Any]:
    """Frames/s and CPU of `kgctl watch`'s live loop per phase, in `runs` runs of one
    generated stream, with the medians."""
    stream = Stream(members, partitions, warm_s=warm_s, steady_s=steady_s, settle_s=settle_s)
    out: dict[str, Any] = {
        "members": members,
        "partitions": partitions,
        "size": f"{width}x{height}",
        "stream": stream.counts(),
        "phases_s": {k: (b - a) / 1000 for k, (a, b) in stream.phases.items()},
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="kgctl-watchstream-") as tmp:
        path = Path(tmp) / "stream.jsonl"
        stream.write(path)
        for k in range(runs):
            load0 = os.getloadavg()[0]
            one = run_once(stream, path, width, height, profile if k == 0 else None)
            one["loadavg_1m_start_end"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            out["runs"].append(one)
            say(f"watchstream run {k + 1}/{runs}: " + json.dumps(one))
    out["median"] = {
        phase: {
            key: _median_of(out["runs"], phase, key)
            for key in ("frames_per_s", "cpu_pct", "cpu_s", "gc_s", "longest_gap_ms")
        }
        for phase in stream.phases
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steady", type=float, default=20.0, help="seconds of steady traffic")
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--warm", type=float, default=5.0, help="seconds before the steady phase")
    ap.add_argument("--history", type=float, default=120.0, help="seconds of steady traffic before")
    ap.add_argument("--size", default="160x50", help="terminal WIDTHxHEIGHT")
    ap.add_argument("--profile", help="cProfile the first run into this file")
    ap.add_argument("--write", help="only write the recording (timed part) to this file")
    ap.add_argument("--out", help="results JSON")
    args = ap.parse_args()
    if args.write:
        stream = Stream(
            args.members,
            args.partitions,
            steady_s=args.steady,
            settle_s=args.settle,
            history_s=args.history,
        )
        with Path(args.write).open("w", encoding="utf-8") as fh:
            for ev in stream.setup + stream.timed:
                fh.write(ev.to_json() + "\n")
        print(json.dumps(stream.counts()))
        return
    width, height = (int(x) for x in args.size.split("x"))
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    result = bench(
        args.members, args.partitions, args.runs, args.steady, args.settle, width, height,
        args.profile, warm_s=args.warm,
    )  # fmt: skip
    result["started"] = started
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(json.dumps(result["median"], indent=1))


if __name__ == "__main__":
    main()
