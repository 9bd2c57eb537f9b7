"""Pure tests of the watch view: what a person sees at 80x24 and 160x50."""

from __future__ import annotations

import dataclasses
import io
import math

import pytest
from helpers import cmember, csnap, infer, member, snap, two_member_eager_history
from rich.console import Console

from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.state import GenerationRecord, GroupState
from kgctl.render.group_view import render_group

NOW = 10_000


def screen(state: GroupState, width: int, height: int) -> str:
    console = Console(
        record=True, width=width, height=height, color_system=None, file=io.StringIO()
    )
    console.print(render_group(state, NOW, width=width, height=height))
    return console.export_text()


def observed_state() -> GroupState:
    events = infer(
        snap("Stable", member("a-1", "alpha", [0, 1]), lag={"t": {0: 5, 1: 7}}),
        snap("PreparingRebalance", member("a-1", "alpha", None), member("b-1", "beta", None)),
        snap(
            "Stable",
            member("a-1", "alpha", [0]),
            member("b-1", "beta", [1]),
            lag={"t": {0: 2, 1: 3}},
        ),
    )
    return fold_all(GroupState("billing"), events, now_ms=4000)


def test_80x24_fits_and_shows_the_essentials() -> None:
    text = screen(observed_state(), 80, 24)
    lines = text.splitlines()
    assert len(lines) <= 23 and max(len(line) for line in lines) <= 80
    for needle in (
        "group billing",
        "Stable",
        "protocol classic  assignor range",
        "generation +1 since watch start (inferred)",
        "coordinator 1 h:9092",
        "members 2",
        "lag 5",
        "alpha",
        "beta",
        "t[1]",
        "member joined",
        "Events",
    ):
        assert needle in text, f"{needle!r} not on the 80x24 screen:\n{text}"


def test_160x50_adds_ids_hosts_phase_timings_and_evidence() -> None:
    text = screen(observed_state(), 160, 50)
    lines = text.splitlines()
    assert len(lines) <= 49 and max(len(line) for line in lines) <= 160
    for needle in (
        "member id",
        "a-1",
        "10.1.1.1",
        "join",
        "sync",
        "beta@10.1.1.1 joined",
        "cause: member joined",
    ):
        assert needle in text, f"{needle!r} not on the 160x50 screen:\n{text}"


def test_member_events_show_phases_leader_and_unassigned_time() -> None:
    state = fold_all(GroupState("orders-app"), two_member_eager_history(), now_ms=6000)
    text = screen(state, 160, 50)
    assert "leader m1" in text and "generation 2" in text
    assert "Stable" in text and "t[0,1]" in text and "t[2,3]" in text
    assert "m1 200ms" in text  # m1 owned nothing for 200 ms in generation 2


def test_disconnected_and_missing_are_said_in_the_header() -> None:
    from kgctl.observe.infer import Inferrer

    inf = Inferrer("gone")
    events = inf.observe(snap("Dead", missing=True), 1000)
    events += inf.disconnected("connection refused", 2000, retry_in_s=2)
    state = fold_all(GroupState("gone"), events, now_ms=2000)
    text = screen(state, 80, 24)
    assert "missing" in text
    assert "disconnected, retrying" in text


def test_many_members_are_cut_with_a_count_at_80x24() -> None:
    members = [member(f"m{i:02d}-1", f"m{i:02d}", [i]) for i in range(30)]
    state = fold_all(GroupState("big"), infer(snap("Stable", *members)), now_ms=2000)
    text = screen(state, 80, 24)
    assert len(text.splitlines()) <= 23
    assert "more" in text and "Members (30 live)" in text


def test_the_arrows_scroll_the_event_log_back_and_forth() -> None:
    from kgctl.model.events import Event
    from kgctl.render.group_view import render_log

    events = [
        Event(type="GenerationChanged", ts_ms=1000 * i, mono_ms=0.0, seq=i, group="g",
              source="observer", data={"from": i - 1, "to": i})
        for i in range(1, 21)
    ]  # fmt: skip

    def lines(scroll: int) -> str:
        console = Console(record=True, width=80, color_system=None, file=io.StringIO())
        console.print(render_log(events, 80, 5, scroll))
        return console.export_text()

    def clocks(scroll: int) -> list[str]:
        # Seconds only: the clock is local time, the seconds are the same in every zone.
        return [line.split()[0][-6:] for line in lines(scroll).splitlines()[1:] if line.strip()]

    assert clocks(0) == [f"{s}.000" for s in range(16, 21)], "newest five"
    assert "3 back" in lines(3)
    assert clocks(3) == [f"{s}.000" for s in range(13, 18)]
    assert clocks(1000) == [f"{s:02d}.000" for s in range(1, 6)], "stops at the oldest"


def consumer_protocol_state(now_ms: int = 3000) -> GroupState:
    """A KIP-848 group caught while b, just joined, waits for a to release t-2 and t-3."""
    events = infer(
        csnap("Stable", 2, cmember("a", 2, [0, 1, 2, 3])),
        csnap("Reconciling", 3, cmember("a", 2, [0, 1, 2, 3], [0, 1]), cmember("b", 3, [], [2, 3])),
    )
    return fold_all(GroupState("orders"), events, now_ms=now_ms)


def test_a_consumer_protocol_group_at_80x24_shows_epochs_and_who_reconciles() -> None:
    text = screen(consumer_protocol_state(), 80, 24)
    lines = text.splitlines()
    assert len(lines) <= 23 and max(len(line) for line in lines) <= 80
    for needle in (
        "Reconciling",
        "protocol consumer (KIP-848)",
        "assignor uniform",
        "group epoch 3",
        "reconciling 2 of 2",
        "Group epochs",
        "epoch",
        "member joined",
        "group epoch 3 (was 2)",
    ):
        assert needle in text, f"{needle!r} not on the 80x24 screen:\n{text}"
    assert "leader" not in text, "a consumer group has no leader"
    row_a = next(line for line in lines if line.startswith("c-a"))
    assert "t[0,1,2,3]" in row_a and "Reconciling" in row_a and row_a.split()[-3] == "2"


def test_a_consumer_protocol_group_at_160x50_shows_targets() -> None:
    text = screen(consumer_protocol_state(), 160, 50)
    lines = text.splitlines()
    assert len(lines) <= 49 and max(len(line) for line in lines) <= 160
    assert "target" in text and "assign" in text and "reconcile" in text
    row_a = next(line for line in lines if line.startswith("c-a"))
    assert "t[0,1,2,3]" in row_a and "t[0,1]" in row_a.split("t[0,1,2,3]", 1)[1]
    row_b = next(line for line in lines if line.startswith("c-b"))
    assert "t[2,3]" in row_b and "none" in row_b


def test_a_group_the_broker_does_not_know_is_not_shown_as_dead() -> None:
    # The broker answers a group that does not exist (yet) with state Dead.
    from kgctl.model.events import Event
    from kgctl.render.group_view import describe_event

    missing = Event(
        "GroupObserved", 1, 1.0, 1, "g", source="observer",
        data={"state": "Dead", "missing": True, "members": []},
    )  # fmt: skip
    assert describe_event(missing).endswith("snapshot: no such group (yet)")
    assert "Dead" not in describe_event(missing)


def test_a_live_loops_memo_draws_what_a_fresh_computation_draws() -> None:
    # The live loop reuses each generation's time without partitions between frames
    # (FrameMemo); every frame must still read as one computed afresh, whether the events
    # in between changed the generations (a rebalance), only heartbeats, or nothing.
    from helpers import mev

    from kgctl.model.fold import fold
    from kgctl.render.group_view import FrameMemo

    history = two_member_eager_history() + [
        mev("HeartbeatSucceeded", 6000 + 500 * i, "m1" if i % 2 else "m2", 2) for i in range(6)
    ]
    history += [
        mev("PartitionsRevoked", 9100, "m1", 2, partitions={"t": [0, 1]}),
        mev("JoinGroupSent", 9110, "m1", 2),
    ]
    memo = FrameMemo()
    state = GroupState("orders-app")

    def draw(now: int, **kw: object) -> str:
        console = Console(record=True, width=160, height=50, color_system=None, file=io.StringIO())
        console.print(render_group(state, now, width=160, height=50, **kw))  # type: ignore[arg-type]
        return console.export_text()

    frames = 0
    for i, ev in enumerate(history):
        state = fold(state, ev, ev.ts_ms)
        for now in (ev.ts_ms, ev.ts_ms + 125):  # two frames per event: the second reuses
            assert draw(now, memo=memo) == draw(now), (i, ev.type, now)
            frames += 1
    assert frames == 2 * len(history)


def test_a_generation_of_many_members_without_partitions_names_the_longest_waits() -> None:
    from kgctl.render.group_view import _unassigned_cell

    waits = {f"m{i}": 100 * i for i in range(1, 11)}
    # A thousand names would not fit the cell anyway: the longest three, and how many more.
    assert _unassigned_cell(GroupState("g"), waits) == "m10 1.0s, m9 900ms, m8 800ms +7 more"
    assert _unassigned_cell(GroupState("g"), {"m1": 200, "m2": 100}) == "m1 200ms, m2 100ms"
    assert _unassigned_cell(GroupState("g"), {}) == "-"


def test_a_live_loops_memo_recomputes_only_the_generations_a_change_reaches_into(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At 1,000 members each generation's time without partitions cost ~10 ms a frame; a
    # running rebalance changes the ownership at every event, but after every finished
    # generation's window. Only a late event stamped inside a window redoes that one.
    from helpers import mev

    import kgctl.render.group_view as view
    from kgctl.model.fold import fold
    from kgctl.render.group_view import FrameMemo

    computed: list[int] = []
    real = view.rebalance_unassigned

    def counted(s: GroupState, g: GenerationRecord, now_ms: int) -> dict[str, int]:
        computed.append(g.generation)
        return real(s, g, now_ms)

    monkeypatch.setattr(view, "rebalance_unassigned", counted)
    memo = FrameMemo()
    state = fold_all(GroupState("orders-app"), two_member_eager_history(), now_ms=6000)

    def frame(now: int) -> str:
        console = Console(record=True, width=160, height=50, color_system=None, file=io.StringIO())
        console.print(render_group(state, now, width=160, height=50, memo=memo))
        return console.export_text()

    frame(6000)
    assert sorted(computed) == [1, 2]
    running = [
        mev("PartitionsRevoked", 9100, "m1", 2, partitions={"t": [0, 1]}),
        mev("JoinGroupSent", 9110, "m1", 2),
        mev("PartitionsRevoked", 9150, "m2", 2, partitions={"t": [2, 3]}),
    ]
    for ev in running:
        state = fold(state, ev, ev.ts_ms)
        computed.clear()
        frame(ev.ts_ms + 50)
        assert computed == [], ev.type
    late = mev("PartitionsAssigned", 5440, "m1", 2, partitions={"t": [4]})
    state = fold(state, late, 9200)
    computed.clear()
    shown = frame(9250)
    assert computed == [2]  # generation 1's window ended at 1160, before the late change
    monkeypatch.setattr(view, "rebalance_unassigned", real)
    assert shown == frame_without_memo(state, 9250)


def _memo_history() -> list[Event]:
    """Two rebalances, and events that reach back into generation 2's window once it is
    over: a late assignment, a late description with a new member, a member the broker
    described during it that names itself later (a rename), and a late stop of that
    member."""
    from helpers import mev, oev

    def described(at: int, state: str, *names: str) -> Event:
        members = [{"member_id": f"{m}-id", "client_id": f"{m}-client"} for m in names]
        return oev("GroupObserved", at, state=state, members=members)

    eager = two_member_eager_history()
    history = eager[:10] + [described(5320, "CompletingRebalance", "m1", "m2", "m3")]
    history += eager[10:]
    history += [mev("HeartbeatSucceeded", 6000 + 500 * i, f"m{1 + i % 2}", 2) for i in range(4)]
    history += [
        mev("PartitionsAssigned", 5420, "m2", 2, partitions={"t": [5]}),  # late
        described(5440, "Stable", "m1", "m2", "m3", "m4"),  # late, and m4 is new
        mev("MemberStarted", 8000, "m3"),  # m3, known by its member id, names itself
        mev("MemberStopped", 5430, "m3", reason="SIGTERM"),  # late
        mev("PartitionsRevoked", 9100, "m1", 2, partitions={"t": [0, 1, 4]}),
        mev("JoinGroupSent", 9110, "m1", 2),
        mev("MemberStopped", 9400, "m2", reason="SIGTERM"),
        mev("JoinGroupReceived", 9500, "m1", 3, leader="m1-id"),
        mev("PartitionsAssigned", 9600, "m1", 3, partitions={"t": [0, 1, 2, 3, 5]}),
        mev("JoinCompleted", 9600, "m1", 3),
    ]
    history += [mev("HeartbeatSucceeded", 10_000 + 500 * i, "m1", 3) for i in range(3)]
    return history


@pytest.mark.parametrize("seed", range(6))
def test_a_live_loops_memo_reads_each_batch_as_the_fold_accounts_for_it(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # The watch folds what arrived between two frames as one batch (`fold_many`), which
    # says where its changes to the timeline begin (`batch_edits`): the memo reads that
    # instead of comparing every partition's spans. Every frame must still read as one
    # computed afresh, whatever the batches hold (late events, a rename, a member gone),
    # and with batches that follow one another nothing is compared.
    import random

    import kgctl.render.group_view as view
    from kgctl.model.fold import fold_many
    from kgctl.model.timeline import rebalance_unassigned
    from kgctl.render.group_view import FrameMemo

    compared: list[int] = []
    real = view._first_change_between

    def counted(old: GroupState, new: GroupState) -> float:
        compared.append(new.events_folded)
        return real(old, new)

    monkeypatch.setattr(view, "_first_change_between", counted)
    history = _memo_history()
    rnd = random.Random(seed)
    memo = FrameMemo()
    state = GroupState("orders-app")
    skipped = 0
    at = 0
    while at < len(history):
        # (seed 0: one event a batch, a frame after each, so that each late event's
        # own account is what the memo goes by)
        batch = history[at : at + (rnd.randint(1, 4) if seed else 1)]
        at += len(batch)
        now = max(e.ts_ms for e in history[:at]) + 50
        state = fold_many(state, [(e, now) for e in batch])
        assert state.batch_edits is not None
        if seed and rnd.random() < 0.2:
            skipped += 1  # no frame between two batches (a paused view): compared then
            continue
        with_memo = frame_with(state, now, memo)
        assert with_memo == frame_without_memo(state, now), (seed, at)
        for g in state.generations:  # (a cell shows a few names, cut: the numbers too)
            assert memo.unassigned(state, g, now) == rebalance_unassigned(state, g, now)
    assert len(compared) <= skipped


def frame_with(state: GroupState, now: int, memo: object) -> str:
    console = Console(record=True, width=160, height=50, color_system=None, file=io.StringIO())
    console.print(render_group(state, now, width=160, height=50, memo=memo))  # type: ignore[arg-type]
    return console.export_text()


def frame_without_memo(state: GroupState, now: int) -> str:
    console = Console(record=True, width=160, height=50, color_system=None, file=io.StringIO())
    console.print(render_group(state, now, width=160, height=50))
    return console.export_text()


def test_a_generation_superseded_before_it_was_stable_does_not_read_not_yet() -> None:
    from kgctl.render.group_view import _to_stable

    assert _to_stable(GenerationRecord(generation=1, start_ms=0, end_ms=500)) == "superseded"
    assert _to_stable(GenerationRecord(generation=2, start_ms=500)) == "not yet"
    assert _to_stable(GenerationRecord(generation=2, start_ms=500, stable_ms=800)) == "300ms"


def test_a_member_first_seen_empty_handed_has_had_no_partitions_at_least_that_long() -> None:
    # The observer cannot know for how long before it first saw the member.
    events = infer(
        snap("Stable", member("a-1", "alpha", [0, 1]), member("b-1", "beta", [])),
        snap("Stable", member("a-1", "alpha", [0, 1]), member("b-1", "beta", [])),
    )
    state = fold_all(GroupState("billing"), events, now_ms=4000)
    [beta] = [m for m in state.members.values() if m.name == "beta"]
    first = beta.first_seen_ms
    row = [line for line in screen(state, 160, 50).splitlines() if line.startswith("beta")]
    assert row and f"none for ≥{(NOW - first) / 1000:.1f}s" in row[0], row


def test_the_event_log_hides_routine_kip848_heartbeats_and_on_request_commits() -> None:
    """The audit: every answered ConsumerGroupHeartbeat of librdkafka members filled the
    live view's log, and OffsetCommit lines pushed the group's steps off the screen."""
    from kgctl.model.events import Event
    from kgctl.render.group_view import render_log

    def wire(seq: int, type_: str, request: dict, response: dict) -> Event:
        return Event(
            type=type_, ts_ms=1000 + seq, mono_ms=0.0, seq=seq, group="g", client_id="rd-1",
            member_id="m-1", source="wire",
            data={"api_version": 0, "connection": "c1", "latency_ms": 1.0, "error": "NONE",
                  "request": request, "response": response},
        )  # fmt: skip

    events = [
        wire(1, "ConsumerGroupHeartbeatTraced", {"member_epoch": 0},
             {"member_epoch": 3, "assignment": {"t": [0]}}),
        wire(2, "ConsumerGroupHeartbeatTraced", {"member_epoch": 3}, {"member_epoch": 3}),
        wire(3, "OffsetCommitTraced", {"offsets": {"t": {"0": 9}}}, {}),
    ]  # fmt: skip

    def text(commits: bool) -> str:
        console = Console(record=True, width=160, color_system=None, file=io.StringIO())
        console.print(render_log(events, 160, 10, commits=commits))
        return console.export_text()

    shown = text(commits=True)
    assert "epoch=0" in shown and "epoch=3" not in shown  # the join shown, the beat not
    assert "OffsetCommit" in shown
    assert "OffsetCommit" not in text(commits=False)


def test_a_rebalance_the_polls_saw_begin_is_said_to_take_at_least() -> None:
    # The broker's descriptions, a second apart: Stable with a and b, then
    # PreparingRebalance (the rebalance began between those two polls, not at the second),
    # then Stable with c too. Before, the row said "to stable 1.0s" and explain "began
    # 00:00:02 took 1.0s", as if the poll had seen the rebalance begin; a live run of three
    # librdkafka members showed 124 ms where the broker's log gave 394 ms.
    from kgctl.model.explanation import explain
    from kgctl.render.explain_text import render_diagnosis

    events = infer(
        snap("Stable", member("a", "app-a", [0, 1]), member("b", "app-b", [2, 3])),
        snap("PreparingRebalance", member("a", "app-a", None), member("b", "app-b", None)),
        snap(
            "Stable",
            member("a", "app-a", [0]),
            member("b", "app-b", [2]),
            member("c", "app-c", [1, 3]),
        ),
    )
    state = fold_all(GroupState(events[0].group), events, now_ms=NOW)
    [g] = state.generations
    assert (g.start_ms, g.start_exact) == (2000, False)
    assert "≥1.0s" in screen(state, 160, 40)
    [d] = explain(state.group, events, NOW).generations
    assert d.start_bound and d.duration_ms == 1000
    console = Console(record=True, width=100, color_system=None, file=io.StringIO())
    console.print(render_diagnosis(d))
    assert "began by 00:00:02.000  took ≥1.0s" in console.export_text()


def test_a_mixed_group_back_to_classic_is_shown_classic() -> None:
    # The audit's defect 2: a consumer-protocol member left a mixed group and the broker
    # made it classic again (DescribeGroups: Stable, k2 and k3), yet the live view still
    # said "protocol consumer (KIP-848) … group epoch 3 … reconciling 1 of 2": the epochs
    # and the members' targets of the last ConsumerGroupDescribe stayed, and the member
    # that left still counted as one speaking the consumer protocol.
    from dataclasses import replace

    from helpers import KIP848_GROUP

    from kgctl.model.snapshot import GroupSnapshot

    k1 = cmember("k1", 3, [0, 1, 2])
    k2 = replace(cmember("k2", 3, [3, 4, 5]), member_type="classic")
    back = GroupSnapshot(
        group=KIP848_GROUP, state="Stable", protocol_type="consumer", protocol="range",
        coordinator="1 h:9092", group_type="classic",
        members=(member("k2", "c-k2", [0, 1, 2]), member("k3", "c-k3", [3, 4, 5])),
    )  # fmt: skip
    events = infer(csnap("Stable", 3, k1, k2), back, back)
    state = fold_all(GroupState(KIP848_GROUP), events, now_ms=NOW)
    text = screen(state, 120, 40)
    assert "protocol classic" in text
    assert "KIP-848" not in text and "group epoch" not in text and "reconciling" not in text
    assert state.group_epoch == -1
    assert all(m.target is None and m.epoch == -1 for m in state.members.values() if m.alive)


def test_the_memos_quick_reading_of_a_change_is_the_full_reading() -> None:
    """The frame memo reads the fold's usual changes to a partition's spans (spans
    added after the same ones, the last one's end set) by position: on random changes
    it finds the instant the full comparison of both sides finds, except where that one
    cannot tell two spans apart and says "everything"."""
    import random

    import kgctl.render.group_view as view
    from kgctl.model.state import OwnershipSpan
    from kgctl.render.group_view import _first_change

    rng = random.Random(27)

    def span() -> OwnershipSpan:
        end = rng.choice([None, rng.randint(0, 9)])
        return OwnershipSpan(rng.choice("ab"), rng.randint(1, 2), rng.randint(0, 5), end)

    def split(sp: OwnershipSpan) -> tuple[tuple[str, int, int], int, int | None]:
        return (sp.member, sp.generation, sp.start_ms), sp.start_ms, sp.end_ms

    quick = ambiguous = 0
    for _ in range(3000):
        old = tuple(span() for _ in range(rng.randint(0, 3)))
        how = rng.choice(["added", "ended", "other"] if old else ["added", "other"])
        if how == "added":
            new = old + tuple(span() for _ in range(rng.randint(1, 2)))
        elif how == "ended":
            new = old[:-1] + (dataclasses.replace(old[-1], end_ms=rng.randint(0, 9)),)
        else:
            new = tuple(span() for _ in range(rng.randint(0, 3)))
        found = _first_change([(old, new)], False, split)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(view, "_added_or_ended", lambda *_: None)
            full = _first_change([(old, new)], False, split)
        if all(len({split(sp)[0] for sp in side}) == len(side) for side in (old, new)):
            assert found == full, (old, new)
        else:
            # Two spans the full reading cannot tell apart: it says -inf (everything
            # again); by position the change is known.
            assert full == -math.inf
            prefix = len(new) > len(old) and all(a is b for a, b in zip(old, new, strict=False))
            if prefix:
                assert found == min(sp.start_ms for sp in new[len(old) :])
            elif how == "ended":
                ends = [e for e in (old[-1].end_ms, new[-1].end_ms) if e is not None]
                assert found == (min(ends) if old[-1].end_ms != new[-1].end_ms else math.inf)
            else:
                assert found == -math.inf
            ambiguous += 1
        quick += how != "other"
    assert quick > 1000 and ambiguous > 50
