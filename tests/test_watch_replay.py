"""`kgctl watch --replay FILE --speed N`: a recording paced by its own timestamps, no broker."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kgctl.errors import NotFoundError, UsageError
from kgctl.model.events import Event
from kgctl.observe.watch import EventInbox, Watch, replay_batches, replay_schedule
from kgctl.settings import ClientSettings

T0 = 1_700_000_000_000


def ev(ts_ms: int, seq: int, group: str = "g") -> Event:
    return Event(
        type="GroupStateChanged",
        ts_ms=ts_ms,
        mono_ms=0.0,
        seq=seq,
        group=group,
        source="observer",
        data={"from": "Stable", "to": "PreparingRebalance"},
    )


def write(path: Path, events: list[Event]) -> Path:
    path.write_text("".join(e.to_json() + "\n" for e in events))
    return path


def test_the_schedule_divides_recorded_gaps_by_the_speed() -> None:
    events = [ev(T0, 1), ev(T0 + 1000, 2), ev(T0 + 3000, 3)]
    assert [d for d, _ in replay_schedule(events, 1)] == [0.0, 1.0, 3.0]
    assert [d for d, _ in replay_schedule(events, 10)] == [0.0, 0.1, 0.3]
    assert [d for d, _ in replay_schedule(events, 0)] == [0.0, 0.0, 0.0]
    # Recorded out of order (two members' clocks): due with the one before, never earlier.
    shuffled = [ev(T0, 1), ev(T0 + 2000, 2), ev(T0 + 1500, 3), ev(T0 + 2500, 4)]
    assert [d for d, _ in replay_schedule(shuffled, 1)] == [0.0, 2.0, 2.0, 2.5]
    assert [e.seq for _, e in replay_schedule(shuffled, 1)] == [1, 2, 3, 4]


def test_a_replay_wakes_once_for_the_events_due_close_together() -> None:
    events = [ev(T0 + ms, k) for k, ms in enumerate([0, 1, 2, 9, 10, 11, 50, 50, 62], 1)]
    batches = list(replay_batches(replay_schedule(events, 1), grain_s=0.01))
    assert [(at, [e.seq for e in b]) for at, b in batches] == [
        (0.0, [1]),
        (0.01, [2, 3, 4, 5]),  # woken a grain after the first: never before its due
        (0.02, [6]),
        (0.05, [7, 8]),  # due later than a grain: woken when due
        (0.062, [9]),
    ]
    seqs = [e.seq for _, b in batches for e in b]
    assert seqs == list(range(1, 10))  # each once, in order
    for at, batch in batches:  # none early, none later than a grain
        for e in batch:
            due = (e.ts_ms - T0) / 1000
            assert due <= at + 1e-9 < due + 0.01 + 1e-9
    assert list(replay_batches([], grain_s=0.01)) == []


def test_the_inbox_hands_over_everything_put_in_order_once() -> None:
    inbox = EventInbox()
    assert inbox.empty() and inbox.take_all() == []
    inbox.put(ev(T0, 1))
    inbox.put_all([ev(T0, 2), ev(T0, 3)])
    inbox.put_all([])
    inbox.put(ev(T0, 4))
    assert not inbox.empty()
    assert [e.seq for e in inbox.take_all()] == [1, 2, 3, 4]
    assert inbox.empty() and inbox.take_all() == []


def test_a_waiting_take_wakes_when_another_thread_puts() -> None:
    inbox = EventInbox()
    threading.Timer(0.05, inbox.put_all, args=([ev(T0, 1), ev(T0, 2)],)).start()
    started = time.monotonic()
    taken = inbox.take_all(wait_s=5.0)
    assert [e.seq for e in taken] == [1, 2]
    assert time.monotonic() - started < 4.0  # woken by the put, not by the timeout
    started = time.monotonic()
    assert inbox.take_all(wait_s=0.05) == []  # nothing comes: back after the wait
    assert time.monotonic() - started >= 0.04


def test_a_paced_replay_feeds_events_at_their_recorded_gaps(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [ev(T0, 1), ev(T0 + 2000, 2), ev(T0 + 4000, 3)])
    arrived: list[tuple[float, int]] = []
    with Watch(ClientSettings(), "g", replay=path, observe=False, speed=10) as watch:
        started = time.monotonic()
        watch.start()
        while len(arrived) < 3 and time.monotonic() - started < 5:
            for e in watch.drain(wait_s=0.05):
                arrived.append((time.monotonic() - started, e.seq))
        # The view's clock is the recording's: about 4 s of recorded time after 0.4 s.
        assert watch.clock() >= T0 + 4000
    assert [seq for _, seq in arrived] == [1, 2, 3]
    # Never before its recorded time / speed after the start (the schedule is absolute, so
    # a late first event cannot shrink it); the upper bound only rules out pacing at the
    # recorded speed (4 s), so a loaded machine does not fail it.
    times = [t for t, _ in arrived]
    assert times[1] >= 0.2 and times[2] >= 0.4
    assert times[2] < 3.0
    assert not watch.replaying.is_set()


def test_speed_zero_puts_everything_at_once_and_other_groups_are_left_out(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [ev(T0, 1), ev(T0 + 60_000, 2, "other"), ev(T0, 3)])
    with Watch(ClientSettings(), "g", replay=path, observe=False, speed=0) as watch:
        watch.start()
        assert [e.seq for e in watch.drain()] == [1, 3]
        assert not watch.replaying.is_set()


def test_an_instant_replay_tells_time_by_the_recordings_end_not_the_wall_clock(
    tmp_path: Path,
) -> None:
    # Durations and "seen ... ago" in the view are against this clock: the wall clock
    # made a generation recorded hours ago read "lasted 19h05m".
    path = write(
        tmp_path / "run.jsonl", [ev(T0, 1), ev(T0 + 2_500, 2), ev(T0 + 60_000, 3, "other")]
    )
    with Watch(ClientSettings(), "g", replay=path, observe=False, speed=0) as watch:
        watch.start()
        watch.drain()
        assert watch.clock() == T0 + 2_500


@pytest.mark.parametrize("speed", [0, 1])
def test_a_group_the_recording_does_not_hold_is_refused_naming_those_it_does(
    tmp_path: Path, speed: float
) -> None:
    path = write(tmp_path / "run.jsonl", [ev(T0, 1, "orders-app"), ev(T0, 2, "grüppe")])
    with Watch(ClientSettings(), "orders", replay=path, observe=False, speed=speed) as watch:
        with pytest.raises(
            NotFoundError, match=r"no events of group 'orders' \(groups: grüppe, orders-app\)"
        ):
            watch.start()
    # A name JSON escapes is found in its escaped form.
    with Watch(ClientSettings(), "grüppe", replay=path, observe=False, speed=0) as watch:
        watch.start()
        assert [e.seq for e in watch.drain()] == [2]


def test_a_negative_speed_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--speed"):
        Watch(ClientSettings(), "g", replay=tmp_path / "x", observe=False, speed=-1)


def _cli(path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "watch", "g", "--replay", str(path), "-o", "json"]
        + list(extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, time.monotonic() - started


def test_the_cli_paces_by_speed_and_prints_the_same_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [ev(T0 + 1000 * i, i + 1) for i in range(4)])
    fast, _ = _cli(path, "--speed", "0")
    paced, paced_s = _cli(path, "--speed", "2")  # 3 recorded seconds in 1.5 s
    assert fast.returncode == 0 and paced.returncode == 0, (fast.stderr, paced.stderr)
    assert fast.stdout == paced.stdout
    assert [json.loads(line)["seq"] for line in paced.stdout.splitlines()] == [1, 2, 3, 4]
    assert paced_s >= 1.5
    # A recording of two hours with --speed 0 does not wait (_cli gives up after 60 s).
    long = write(tmp_path / "long.jsonl", [ev(T0 + 3_600_000 * i, i + 1) for i in range(3)])
    instant, _ = _cli(long, "--speed", "0")
    assert instant.returncode == 0 and len(instant.stdout.splitlines()) == 3


def test_a_bad_line_in_a_paced_replay_is_still_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(ev(T0, 1).to_json() + "\nnot json\n")
    done, _ = _cli(path, "--speed", "5")
    assert done.returncode == 2, done.stderr
    assert "bad.jsonl:2" in done.stderr


def test_the_live_views_diagnosis_outlives_its_event_window() -> None:
    """The live view folds into a state that keeps its last 200 events: with records
    flowing (50 a second here) that is four seconds. The issue's scenario rerun by hand
    showed gen 3 as 'join waited 1.1s for b (late_join)' and gen 2 as 'kgctl-a-<uuid>:
    member joined (inferred)'; the watch keeps what the diagnosis reads."""
    import gzip

    from kgctl.model.diagnosis import diagnose
    from kgctl.report.summary import build_report, parse_lines

    data = Path(__file__).parent / "data" / "issue_scenario.jsonl.gz"
    events, _ = parse_lines(gzip.decompress(data.read_bytes()).decode().splitlines())
    report = build_report(events)
    whole = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}
    with Watch(ClientSettings(), report.group, observe=False) as watch:
        for e in report.events:  # as they arrived: in time order, a batch at a time
            watch.queue.put(e)
            if e.type != "RecordsConsumed":
                watch.drain(clock=lambda e=e: e.ts_ms)
                watch.diagnoses(e.ts_ms)
        watch.drain(clock=lambda: report.last_ms)
        shown = watch.diagnoses(report.last_ms)
        window = diagnose(watch.state, watch.state.recent, report.last_ms)
    assert {d.generation: d.critical_path for d in window}[3] != whole[
        3
    ].critical_path  # the window lost it
    for generation in (1, 2, 3, 4):
        assert shown[generation].trigger == whole[generation].trigger
    [wait] = shown[3].critical_path
    assert (wait.member, wait.why) == ("c", "dead") and wait.ms == whole[3].critical_path[0].ms


def test_the_live_view_diagnoses_the_newest_generations_as_the_whole_run_does() -> None:
    """Only the newest generations are diagnosed again (a group that rebalanced for hours
    stays cheap to redraw); they read as a diagnosis of the whole run reads them."""
    from kgctl.model.diagnosis import diagnose
    from kgctl.report.summary import build_report

    # b comes and goes: 20 generations.
    events = [_stored(g, ["a-1", "b-1"] if g % 2 else ["a-1"], 1000 * g) for g in range(1, 21)]
    report = build_report(events)
    whole = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}
    with Watch(ClientSettings(), "g", observe=False) as watch:
        for e in events:
            watch.queue.put(e)
        watch.drain(clock=lambda: report.last_ms)
        shown = watch.diagnoses(report.last_ms)
    assert sorted(shown) == list(range(13, 21))  # the newest 8
    for generation, d in shown.items():
        assert d.trigger == whole[generation].trigger, generation


def test_a_steady_groups_heartbeats_and_records_are_not_diagnosed_again() -> None:
    """At 1,000 members a diagnosis is a large part of a CPU second; heartbeats and records
    are most of a steady group's stream and do not change it. The live view diagnoses again
    for a protocol step, and once a second while a rebalance runs or has just ended."""
    from helpers import mev, two_member_eager_history

    from kgctl.observe.watch import SETTLING_MS

    with Watch(ClientSettings(), "orders-app", observe=False) as watch:
        history = two_member_eager_history()
        for e in history:
            watch.queue.put(e)
        end = history[-1].ts_ms
        watch.drain(clock=lambda: end)
        assert 2 in watch.diagnoses(end)
        assert watch._diagnosed_at == end
        # Once settled, made once more: what came while it settled is in it.
        later = end + SETTLING_MS + 5000
        first = watch.diagnoses(later)
        made_at = watch._diagnosed_at
        assert made_at == later and 2 in first

        # Steady, well after the rebalance: heartbeats and records only.
        for i in range(40):
            ts = later + 100 * i
            watch.queue.put(mev("HeartbeatSucceeded", ts, "m1" if i % 2 else "m2", 2))
            watch.queue.put(mev("RecordsConsumed", ts, "m1", 2, count=1, batches=[]))
            watch.drain(clock=lambda ts=ts: ts)
            assert watch.diagnoses(ts) == first
        assert watch._diagnosed_at == made_at  # not made again

        # A protocol step is: one that starts a rebalance a second after it began (its
        # first members' steps do not each call for one).
        step = later + 5000
        watch.queue.put(mev("RejoinRequested", step, "m1", 2, reason="explicit_request"))
        watch.drain(clock=lambda: step)
        watch.diagnoses(step)
        assert watch._diagnosed_at == made_at
        opened = step + 300
        watch.queue.put(mev("JoinGroupReceived", opened, "m1", 3, generation=3, leader="m1-id"))
        watch.drain(clock=lambda: opened)
        watch.diagnoses(opened)
        assert watch._diagnosed_at == made_at
        assert 3 in watch.diagnoses(step + 1000)
        assert watch._diagnosed_at == step + 1000


def test_a_rebalance_with_a_costly_diagnosis_is_diagnosed_settling_ms_after_it_began() -> None:
    """Where a diagnosis costs more than a tenth of SETTLING_MS (1,000 members), a running
    rebalance waits SETTLING_MS for its first: most are over by then."""
    from helpers import mev, two_member_eager_history

    from kgctl.observe.watch import SETTLING_MS

    with Watch(ClientSettings(), "orders-app", observe=False) as watch:
        history = two_member_eager_history()
        for e in history:
            watch.queue.put(e)
        end = history[-1].ts_ms
        watch.drain(clock=lambda: end)
        cpu = iter([0.0, 1.5, 5.0, 6.5])  # 1.5 s each: 15 s apart
        watch._cpu_s = lambda: next(cpu)
        later = end + SETTLING_MS + 5000
        watch.diagnoses(later)
        step = later + 20_000  # the last diagnosis is long past: due
        watch.queue.put(mev("RejoinRequested", step, "m1", 2, reason="explicit_request"))
        watch.drain(clock=lambda: step)
        watch.diagnoses(step + SETTLING_MS - 1)
        assert watch._diagnosed_at == later
        watch.diagnoses(step + SETTLING_MS)
        assert watch._diagnosed_at == step + SETTLING_MS


def test_while_a_rebalance_runs_a_costly_diagnosis_is_made_less_often() -> None:
    """A diagnosis is made at most once a second while a rebalance runs, and no more often
    than every ten times what the last one cost, so that a large group's view still draws;
    once the rebalance has settled it is made once more, with everything that came."""
    from helpers import mev, two_member_eager_history

    with Watch(ClientSettings(), "orders-app", observe=False) as watch:
        history = two_member_eager_history()
        for e in history:
            watch.queue.put(e)
        end = history[-1].ts_ms
        watch.drain(clock=lambda: end)
        cpu = iter([0.0, 0.5, 10.0, 10.5, 20.0, 20.5])  # each diagnosis costs 0.5 s
        watch._cpu_s = lambda: next(cpu)
        watch.queue.put(mev("RejoinRequested", end + 5, "m1", 2, reason="explicit_request"))
        watch.queue.put(mev("JoinGroupReceived", end + 10, "m1", 3, generation=3, leader="m1-id"))
        watch.drain(clock=lambda: end + 10)
        first = end + 5 + 1000  # a second after it began
        watch.diagnoses(first)
        assert watch._diagnosed_at == first
        # Steps keep coming while it runs: not again within 10 × 0.5 s.
        for k in range(1, 10):
            ts = first + 500 * k
            watch.queue.put(mev("JoinGroupSent", ts, "m1", 2))
            watch.drain(clock=lambda ts=ts: ts)
            watch.diagnoses(ts)
            assert watch._diagnosed_at == first
        at = first + 5000
        watch.diagnoses(at)
        assert watch._diagnosed_at == at


def test_a_settled_rebalance_is_diagnosed_once_more_after_settling() -> None:
    """The last diagnosis made while a rebalance settled may be seconds before it had
    settled (the spacing above): the first frame after that makes one more."""
    from helpers import two_member_eager_history

    from kgctl.observe.watch import SETTLING_MS

    with Watch(ClientSettings(), "orders-app", observe=False) as watch:
        history = two_member_eager_history()
        for e in history:
            watch.queue.put(e)
        end = history[-1].ts_ms
        watch.drain(clock=lambda: end)
        cpu = iter([0.0, 1.2, 5.0, 6.2])  # 1.2 s each: 12 s apart while settling
        watch._cpu_s = lambda: next(cpu)
        watch.diagnoses(end)
        stable = watch.state.generations[-1].stable_ms
        assert stable is not None and end - stable < SETTLING_MS
        watch.diagnoses(stable + SETTLING_MS - 1)  # still settling, not due
        assert watch._diagnosed_at == end
        after = stable + SETTLING_MS + 1
        watch.diagnoses(after)
        assert watch._diagnosed_at == after
        watch.diagnoses(after + 100)  # and not again
        assert watch._diagnosed_at == after


def test_in_the_background_a_diagnosis_is_made_on_a_worker_and_taken_when_done() -> None:
    """The live view's frames go on while a diagnosis is made: the first ask starts it
    and answers with what was known; once it is done the next ask has it."""
    from helpers import two_member_eager_history

    with Watch(ClientSettings(), "orders-app", observe=False) as watch:
        watch.background = True
        history = two_member_eager_history()
        for e in history:
            watch.queue.put(e)
        end = history[-1].ts_ms
        watch.drain(clock=lambda: end)
        assert watch.diagnoses(end) == {}  # being made
        job = watch._job
        assert job is not None and job.done.wait(timeout=30)
        found = watch.diagnoses(end + 100)
        assert set(found) == {1, 2}
    with Watch(ClientSettings(), "orders-app", observe=False) as same:
        for e in history:
            same.queue.put(e)
        same.drain(clock=lambda: end)
        assert same.diagnoses(end) == found  # what the view's own thread would have made


def test_an_instant_replay_that_ends_mid_rebalance_still_diagnoses_its_generations(
    tmp_path: Path,
) -> None:
    # A chaos recording ends with its members stopping: a rebalance begun and never done.
    # The view's clock stays at the last event, so it must not wait for that rebalance.
    from helpers import mev, two_member_eager_history

    history = two_member_eager_history()
    history.insert(6, mev("RejoinRequested", 5005, "m2", reason="first_join"))
    history += [
        mev("PartitionsRevoked", 9100, "m1", 2, partitions={"t": [0, 1]}),
        mev("LeaveGroupSent", 9110, "m1", 2, reason="stopping"),
    ]
    group = history[0].group
    path = write(tmp_path / "run.jsonl", history)
    with Watch(ClientSettings(), group, replay=path, observe=False, speed=0) as watch:
        watch.start()
        watch.drain()
        assert watch.state.rebalancing
        diagnosed = watch.diagnoses(watch.clock())
    assert sorted(diagnosed) == [1, 2]
    assert diagnosed[2].trigger.text() == "m2: member joined (first_join)"


def test_the_live_view_reads_a_proxys_wire_trace_as_explain_does() -> None:
    """The audit's first defect: `watch --trace-topic` showed the JoinGroup and SyncGroup
    lines of librdkafka clients (which report nothing themselves) in its event log, and
    its `e` said 'no member of this generation was traced'. The live view's diagnosis is
    explain's: the wire's steps count as those clients' own."""
    from kgctl.model.diagnosis import Context
    from kgctl.model.explanation import explain
    from kgctl.report.summary import parse_lines

    path = Path(__file__).parent / "data" / "wire_dead_member_growth.jsonl"
    events, _ = parse_lines(path.read_text().splitlines())
    group = next(e.group for e in events if e.group)
    last = max(e.ts_ms for e in events)
    told = {d.generation: d for d in explain(group, events, last, Context()).generations}
    with Watch(ClientSettings(), group, observe=False) as watch:
        for e in events:  # as a trace topic hands them over, one batch at a time
            watch.queue.put(e)
            watch.drain(clock=lambda e=e: e.ts_ms)
        shown = watch.diagnoses(last)
    assert told and set(told) <= set(shown)
    for generation, diagnosis in told.items():
        assert shown[generation].trigger == diagnosis.trigger, generation
        waits = [(w.phase, w.member, w.why) for w in diagnosis.critical_path]
        assert [(w.phase, w.member, w.why) for w in shown[generation].critical_path] == waits
    # The growth's rebalance, as explain tells it: app-a rejoined, waited for dead app-c.
    growth = shown[max(told)]
    assert growth.trigger.who == "app-a"
    assert [(w.member, w.why) for w in growth.critical_path] == [("app-c", "dead")]


def test_the_live_view_shows_no_cooperative_member_without_the_partitions_it_kept() -> None:
    """The audit's defects 6 and 8, on a live `watch --trace-topic --record` of the
    audit's librdkafka consumers (cooperative-sticky, through kgctl proxy): c1, c2, c3
    start, c4 joins, the topic grows to 9, c2 is killed, c4 stops. The clients' own logs:
    c2 was assigned [0..5] at 14:13:20.362, gave up [0,1,2,3] at 21.374 and kept [4,5];
    c1 and c3 were first assigned at 21.891 ([1,3] and [0,2]). Fed to the live view one
    event at a time, generation 3's "no partitions" must name c1 and c3 (517 ms by their
    logs), never c2. At the audited commit it read "c1 5ms, c2 5ms, c3 5ms"; from 36e5880
    to f22136a^, some frames read "c2 6ms" (a follower's JoinGroup answer ended everyone's
    ownership). Defect 8 (a row gone for a frame, then back): no frame loses a row a
    later frame shows again (this passes at the audited commit too)."""
    import gzip
    import re

    from kgctl.render.grid import Grid
    from kgctl.render.group_view import render_generations
    from kgctl.report.summary import parse_lines

    path = Path(__file__).parent / "truth" / "data" / "watch_rdkafka_cooperative_live.jsonl.gz"
    events, _ = parse_lines(gzip.open(path, "rt").read().splitlines())
    group = next(e.group for e in events if e.group)
    third: list[str] = []  # generation 3's "no partitions", frame after frame
    frames: list[set[str]] = []
    with Watch(ClientSettings(), group, observe=False) as watch:
        watch.background = False
        for e in events:  # as the trace topic and the polls hand them over
            watch.queue.put(e)
            watch.drain(clock=lambda e=e: e.ts_ms)
            table = render_generations(watch.state, e.ts_ms, 160, 8, watch.diagnoses(e.ts_ms))
            assert isinstance(table, Grid)
            labels = [row.cells[0].plain for row in table.rows]
            unassigned = [row.cells[-1].plain for row in table.rows]
            frames.append(set(labels) - {"-"})
            if "3" in labels:
                third.append(unassigned[labels.index("3")])
    assert third, "generation 3 was never shown"
    assert not [c for c in third if "c2" in c], "c2 kept [4,5] all along"
    assert "c1" in third[-1] and "c3" in third[-1], third[-1]
    for ms in re.findall(r"(\d+)ms", third[-1]):
        assert 400 <= int(ms) <= 650, third[-1]  # 517 ms by the clients' logs
    for k in range(1, len(frames)):
        gone = frames[k - 1] - frames[k]
        assert not [g for g in gone if any(g in later for later in frames[k + 1 :])], k


def _stored(generation: int, ids: list[str], ts: int = 0) -> Event:
    """The broker's stored record of one generation, as the observer reports it."""
    ts = ts or T0 + 1000 * generation
    members = [{"member_id": m, "client_id": m.split("-")[0]} for m in ids]
    return Event(
        "GenerationChanged", ts, float(ts), generation, "g", generation=generation,
        source="observer",
        data={"inferred": False, "previous": generation - 1, "written_ms": ts,
              "stored_in": "__consumer_offsets", "state_ts_ms": ts, "sync_ms": ts,
              "members": members},
    )  # fmt: skip


def test_while_a_rebalance_settles_only_the_generations_it_can_change_are_diagnosed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 1,000 members each generation's diagnosis costs about 0.1 CPU-s. While a
    rebalance runs or settles, the view diagnoses its generation and the one it ended
    (with the one before as context); the others keep what was said, and all are
    diagnosed again once it has settled. A view that has not yet said anything of the
    older ones diagnoses them all at once."""
    import kgctl.observe.watch as watch_module
    from kgctl.observe.watch import SETTLING_MS

    asked: list[list[int]] = []
    real = watch_module.diagnose

    def recorded(state, events, now_ms):  # type: ignore[no-untyped-def]
        asked.append([g.generation for g in state.generations])
        return real(state, events, now_ms)

    monkeypatch.setattr(watch_module, "diagnose", recorded)
    events = [_stored(g, ["a-1", "b-1"] if g % 2 else ["a-1"]) for g in range(1, 21)]
    with Watch(ClientSettings(), "g", observe=False) as watch:
        for e in events:
            watch.queue.put(e)
        end = events[-1].ts_ms
        watch.drain(clock=lambda: end)
        watch.diagnoses(end)  # settling, but nothing said yet of the older ones: all
        assert asked == [list(range(12, 21))]
        settled = end + SETTLING_MS + 1
        before = watch.diagnoses(settled)
        assert asked[-1] == list(range(12, 21)) and sorted(before) == list(range(13, 21))

        new = _stored(21, ["a-1", "b-1"], ts=settled + 5000)
        watch.queue.put(new)
        watch.drain(clock=lambda: new.ts_ms)
        shown = watch.diagnoses(new.ts_ms)
        assert asked[-1] == [19, 20, 21]  # 19 as context
        assert sorted(shown) == list(range(13, 22))
        assert all(shown[g] is before[g] for g in range(13, 20))  # kept as said

        later = new.ts_ms + SETTLING_MS + 1
        watch.diagnoses(later)
        assert asked[-1] == list(range(13, 22))
