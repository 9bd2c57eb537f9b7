"""In-process throughput: events/s through the pure fold, frames/s of the watch view.

Synthetic but shaped like real traffic: M members of one group over P partitions of one
topic, eager range assignment; a rebalance is every member's RejoinRequested ->
JoinPrepared -> PartitionsRevoked -> JoinGroupSent -> JoinGroupReceived -> SyncGroupSent
-> SyncGroupReceived -> PartitionsAssigned -> JoinCompleted; steady state is
HeartbeatSucceeded and RecordsConsumed. CPU is process CPU time over wall time.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from kgctl.model.events import Event
from kgctl.model.fold import fold
from kgctl.model.state import GroupState
from kgctl.render import plain_console
from kgctl.render.group_view import render_group

TOPIC = "orders"


def _assignment(members: int, partitions: int, i: int) -> dict[str, list[int]]:
    per, extra = divmod(partitions, members)
    start = i * per + min(i, extra)
    count = per + (1 if i < extra else 0)
    return {TOPIC: list(range(start, start + count))}


class _Stamp:
    def __init__(self, group: str, t0: int) -> None:
        self.group = group
        self.t = t0
        self.seq: dict[str, int] = {}

    def __call__(self, etype: str, member: int, gen: int, **data: Any) -> Event:
        self.t += 1
        name = f"m{member:04d}"
        self.seq[name] = self.seq.get(name, 0) + 1
        return Event(
            type=etype,
            ts_ms=self.t,
            mono_ms=float(self.t),
            seq=self.seq[name],
            group=self.group,
            member=name,
            member_id=f"kgctl-{name}-0000",
            client_id=f"kgctl-{name}",
            host="bench",
            pid=10_000 + member,
            generation=gen,
            data=data,
        )


def rebalance_events(stamp: _Stamp, members: int, partitions: int, gen: int) -> list[Event]:
    out: list[Event] = []
    for i in range(members):
        owned = _assignment(members, partitions, i) if gen > 1 else {}
        out.append(stamp("RejoinRequested", i, gen - 1, reason="rebalance_in_progress"))
        out.append(stamp("JoinPrepared", i, gen - 1, owned=owned, lost=False, protocol="eager"))
        if owned:
            out.append(stamp("PartitionsRevoked", i, gen - 1, partitions=owned))
        out.append(stamp("JoinGroupSent", i, gen - 1, reason="rebalance_in_progress"))
    for i in range(members):
        mine = _assignment(members, partitions, i)
        out.append(
            stamp(
                "JoinGroupReceived",
                i,
                gen,
                error="NONE",
                generation=gen,
                member_id=f"kgctl-m{i:04d}-0000",
                leader="kgctl-m0000-0000",
                is_leader=i == 0,
                protocol="range",
            )
        )
        out.append(stamp("SyncGroupSent", i, gen, is_leader=i == 0, assignments=0))
        out.append(stamp("SyncGroupReceived", i, gen, error="NONE", assignment=mine))
        out.append(stamp("PartitionsAssigned", i, gen, partitions=mine))
        out.append(
            stamp(
                "JoinCompleted",
                i,
                gen,
                generation=gen,
                member_id=f"kgctl-m{i:04d}-0000",
                protocol="range",
                is_leader=i == 0,
                assignment=mine,
                added=mine,
                removed={},
                rebalance_ms=50,
            )
        )
    return out


def steady_events(stamp: _Stamp, members: int, partitions: int, gen: int, rounds: int):
    out: list[Event] = []
    for r in range(rounds):
        for i in range(members):
            out.append(stamp("HeartbeatSucceeded", i, gen, rtt_ms=1.0, throttle_time_ms=0))
            p = _assignment(members, partitions, i)[TOPIC][0]
            out.append(
                stamp(
                    "RecordsConsumed",
                    i,
                    gen,
                    batches=[
                        {
                            "topic": TOPIC,
                            "partition": p,
                            "first": r * 10,
                            "last": r * 10 + 9,
                            "count": 10,
                            "duplicates": 0,
                        }
                    ],
                    count=10,
                    duplicates=0,
                    total=(r + 1) * 10,
                )
            )
    return out


def _timed_fold(state: GroupState, events: list[Event]) -> tuple[GroupState, dict[str, float]]:
    w0, c0 = time.perf_counter(), time.process_time()
    for ev in events:
        state = fold(state, ev, ev.ts_ms)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return state, {
        "events": len(events),
        "wall_s": round(wall, 3),
        "events_per_s": round(len(events) / wall),
        "events_per_cpu_s": round(len(events) / cpu) if cpu else None,
        "cpu_pct": round(100 * cpu / wall),
    }


def synthetic_state(members: int, partitions: int, generations: int = 3) -> GroupState:
    stamp = _Stamp("bench", 1_800_000_000_000)
    state = GroupState(group="bench", state="Stable")
    for gen in range(1, generations + 1):
        state = fold_all(state, rebalance_events(stamp, members, partitions, gen))
    return fold_all(state, steady_events(stamp, members, partitions, generations, 2))


def fold_all(state: GroupState, events: list[Event]) -> GroupState:
    for ev in events:
        state = fold(state, ev, ev.ts_ms)
    return state


def bench_fold(members: int, partitions: int, rounds: int) -> dict[str, Any]:
    """Events/s folding rebalances and steady traffic into one group of `members`."""
    stamp = _Stamp("bench", 1_800_000_000_000)
    state = GroupState(group="bench", state="Stable")
    out: dict[str, Any] = {"members": members, "partitions": partitions}
    state, out["first_join"] = _timed_fold(state, rebalance_events(stamp, members, partitions, 1))
    state, out["rebalance"] = _timed_fold(state, rebalance_events(stamp, members, partitions, 2))
    state, out["steady"] = _timed_fold(state, steady_events(stamp, members, partitions, 2, rounds))
    return out


def terminal_console(file: Any, width: int, height: int) -> Console:
    """A console that renders as a truecolor terminal of this size would, into `file`."""
    return plain_console(
        file=file,
        width=width,
        height=height,
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
    )


def bench_view(
    members: int, partitions: int, seconds: float, width: int = 160, height: int = 50
) -> dict[str, Any]:
    """Frames/s of render_group + rich rendering into a terminal-sized buffer."""
    state = synthetic_state(members, partitions)
    console = terminal_console(io.StringIO(), width, height)
    frames = 0
    now = state.updated_ms
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        console.file = io.StringIO()
        console.print(render_group(state, now + frames * 250, width=width, height=height))
        frames += 1
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {
        "members": len(state.members),
        "partitions": sum(len(m.partitions.get(TOPIC, ())) for m in state.members.values()),
        "size": f"{width}x{height}",
        "frames": frames,
        "frames_per_s": round(frames / wall, 1),
        "ms_per_frame": round(1000 * wall / frames, 1),
        "cpu_ms_per_frame": round(1000 * cpu / frames, 1),
        "cpu_pct": round(100 * cpu / wall),
        "cpu_at_4fps_pct": round(100 * (cpu / frames) * 4, 1),
    }


def bench_watch(
    members: int,
    partitions: int,
    seconds: float,
    fps: float = 4.0,
    width: int = 160,
    height: int = 50,
    heartbeat_s: float = 3.0,
    records_s: float = 1.0,
    rebalance_s: float = 2.0,
    simulated: bool = False,
) -> dict[str, Any]:
    """`kgctl watch`'s live loop (kgctl/render/live.py), paced in real time, on a synthetic
    event stream: every frame period the events due go through a `Watch` (its fold and
    what it keeps for the diagnoses), `Watch.diagnoses` is asked, and one frame is rendered
    with the loop's `FrameMemo` into a terminal-sized buffer. Events carry the time they
    are due at (so the watch's clock runs as the wall clock does). The group first goes
    through three generations (not timed). Steady: more than `SETTLING_MS` after the last
    rebalance, each member heartbeats every `heartbeat_s` and reports records every
    `records_s`, for `seconds`. Then a rebalance of every member (revoke and reassign
    every partition) spread over `rebalance_s`; then the `SETTLING_MS` after it (the view
    diagnoses again once a second), then `seconds` of steady traffic again. Frames/s and
    CPU over wall time per phase.

    `simulated`: no pacing; each frame is drawn at its due time on the events' clock, the
    diagnoses are made inline, and each phase's CPU is split into the fold, the
    diagnoses and the frames (CPU seconds, so a machine shared with other work reads
    the same: the wall-time mode's CPU share is what the process got)."""
    from dataclasses import replace

    from kgctl.observe.watch import SETTLING_MS, Watch
    from kgctl.render.group_view import FrameMemo
    from kgctl.render.live import _Collections
    from kgctl.settings import ClientSettings

    watch = Watch(ClientSettings(bootstrap="127.0.0.1:1"), "bench", observe=False)
    stamp = _Stamp("bench", 1_800_000_000_000)
    setup: list[Event] = []
    for gen in (1, 2, 3):
        setup += rebalance_events(stamp, members, partitions, gen)
    for ev in setup:
        watch.queue.put(ev)
    watch.drain(clock=lambda: stamp.t)
    per_round = max(1, round(heartbeat_s / records_s))
    memo = FrameMemo()
    console = terminal_console(io.StringIO(), width, height)
    tick: list[Callable[[], None]] = [lambda: None]  # the collector's turn, each frame

    def spread(events: list[Event], span_s: float) -> list[Event]:
        """The events due evenly over the next `span_s` seconds of the watch's clock."""
        t0 = stamp.t
        step = 1000 * span_s / max(len(events), 1)
        out = [
            replace(ev, ts_ms=int(t0 + k * step), mono_ms=float(t0 + k * step))
            for k, ev in enumerate(events)
        ]
        stamp.t = int(t0 + 1000 * span_s)
        return out

    def simulated_phase(events: list[Event], span_s: float) -> dict[str, Any]:
        cpu = {"fold": 0.0, "diagnoses": 0.0, "frames": 0.0}
        t0, i = (events[0].ts_ms if events else stamp.t), 0
        frames = max(1, int(span_s * fps))
        for f in range(1, frames + 1):
            now = int(t0 + 1000 * f / fps)
            tick[0]()
            c0 = time.process_time()
            while i < len(events) and events[i].ts_ms <= now:
                watch.queue.put(events[i])
                i += 1
            watch.drain(clock=lambda now=now: now)
            c1 = time.process_time()
            found = watch.diagnoses(now)
            c2 = time.process_time()
            console.file = io.StringIO()
            console.print(
                render_group(
                    watch.state, now, width=width, height=height, diagnoses=found, memo=memo
                )
            )
            c3 = time.process_time()
            cpu["fold"] += c1 - c0
            cpu["diagnoses"] += c2 - c1
            cpu["frames"] += c3 - c2
        total = sum(cpu.values())
        return {
            "events": len(events),
            "span_s": span_s,
            "frames": frames,
            **{f"cpu_s_{k}": round(v, 3) for k, v in cpu.items()},
            "cpu_s": round(total, 3),
            "cpu_pct": round(100 * total / span_s, 1),
        }

    def phase(events: list[Event], span_s: float) -> dict[str, Any]:
        if simulated:
            return simulated_phase(events, span_s)
        period = 1.0 / fps
        frames, worst = 0, 0.0
        w0, c0 = time.perf_counter(), time.process_time()
        i = 0
        while True:
            elapsed = time.perf_counter() - w0
            if elapsed >= span_s and i >= len(events):
                break
            f0 = time.perf_counter()
            tick[0]()
            due = len(events) if span_s <= 0 else int(len(events) * min(1.0, elapsed / span_s))
            for ev in events[i:due]:
                watch.queue.put(ev)
            i = max(i, due)
            now = events[max(i - 1, 0)].ts_ms if events else stamp.t
            watch.drain(clock=lambda now=now: now)
            found = watch.diagnoses(now)
            console.file = io.StringIO()
            console.print(
                render_group(
                    watch.state, now, width=width, height=height, diagnoses=found, memo=memo
                )
            )
            frames += 1
            worst = max(worst, time.perf_counter() - f0)
            # The next frame at its due time (a late frame does not push the ones after).
            time.sleep(max(0.0, w0 + frames * period - time.perf_counter()))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        return {
            "events": len(events),
            "events_per_s": round(len(events) / wall),
            "wall_s": round(wall, 2),
            "frames": frames,
            "frames_per_s": round(frames / wall, 2),
            "worst_frame_ms": round(1000 * worst, 1),
            "cpu_pct": round(100 * cpu / wall, 1),
            # folding included; what `fps` frames a second cost when the CPU is there
            "cpu_ms_per_frame": round(1000 * cpu / frames, 1),
            "cpu_pct_at_target_fps": round(100 * cpu / frames * fps, 1),
        }

    def steady(gen: int, span_s: float) -> list[Event]:
        out: list[Event] = []
        for r in range(max(1, int(span_s / records_s))):
            for i in range(members):
                if r % per_round == i % per_round:
                    out.append(stamp("HeartbeatSucceeded", i, gen, rtt_ms=1.0, throttle_time_ms=0))
                p = _assignment(members, partitions, i)[TOPIC][0]
                batch = {"topic": TOPIC, "partition": p, "first": r, "last": r, "count": 1}
                out.append(
                    stamp(
                        "RecordsConsumed",
                        i,
                        gen,
                        batches=[{**batch, "duplicates": 0}],
                        count=1,
                        duplicates=0,
                        total=r + 1,
                    )
                )
        return spread(out, span_s)

    settle_s = SETTLING_MS / 1000
    stamp.t += SETTLING_MS + 1000  # the setup's last rebalance is past settling
    out: dict[str, Any] = {"members": members, "partitions": partitions, "fps_target": fps}
    out["size"] = f"{width}x{height}"
    steady_events = steady(3, seconds)
    rebalance_stream = spread(rebalance_events(stamp, members, partitions, 4), rebalance_s)
    settling_events = steady(4, settle_s)
    after_events = steady(4, seconds)
    # The cycle collector as the live loop runs it (kgctl/render/live.py): young objects
    # collected less often, what has lived set aside when it starts and every 10 s. With
    # Python's defaults a full collection goes through the 1.5 million objects of this
    # state and the events kept, in whichever frame it falls.
    with _Collections() as collections:
        tick[0] = collections.tick
        out["steady"] = phase(steady_events, seconds)
        out["rebalance"] = phase(rebalance_stream, rebalance_s)
        out["settling"] = phase(settling_events, settle_s)
        out["after"] = phase(after_events, seconds)
    return out
