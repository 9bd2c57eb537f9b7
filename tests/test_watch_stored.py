"""Pure tests of watch with the broker's stored generations (records of __consumer_offsets)."""

from __future__ import annotations

import io

from helpers import WATCH_GROUP as G
from helpers import causes, member, snap, types
from rich.console import Console

from kgctl.adapters.group_records import GroupMetadata, GroupRecord, MemberRecord
from kgctl.model.diagnosis import diagnose
from kgctl.model.events import Event
from kgctl.model.fold import fold_all
from kgctl.model.state import GroupState
from kgctl.observe.infer import Inferrer
from kgctl.render.group_view import render_group, render_header

A = MemberRecord("a-1", "a", "/10.1.1.1", subscription=("t",))
B = MemberRecord("b-1", "b", "/10.1.1.1", subscription=("t",))


def record(generation: int, *members: MemberRecord, leader: str = "a-1") -> GroupRecord:
    meta = GroupMetadata(
        generation=generation,
        protocol_type="consumer",
        protocol="range" if members else None,
        leader=leader if members else None,
        state_ts_ms=1000 * generation,
        members=members,
        version=3,
    )
    return GroupRecord(G, meta, offset=generation, timestamp_ms=1000 * generation + 5)


def text(events: list[Event]) -> str:
    state = fold_all(GroupState(G), events, 99_000)
    header = render_header(state, 99_000)
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(header)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_the_look_back_gives_the_current_generation_and_its_leader() -> None:
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 1000)
    events += inf.stored_ready(7, record(5, A), scanned=1200, now_ms=2000)
    assert types(events) == ["GenerationSourceChanged", "GenerationChanged"]
    source, gen = events[1], events[2]
    assert source.data == {
        "source": "__consumer_offsets",
        "partition": 7,
        "scanned": 1200,
        "found": True,
    }
    assert gen.generation == 5 and gen.data["inferred"] is False and gen.data["initial"]
    assert gen.data["leader"] == "a-1" and gen.data["previous"] is None
    state = fold_all(GroupState(G), events, 3000)
    assert (state.generation, state.generation_inferred, state.leader) == (5, False, "a-1")
    assert state.current is not None and state.current.stable_ms == 5005
    assert "generation 5\n" in text(events) and "inferred" not in text(events)


def test_a_generation_stored_before_the_watch_began_was_stable_when_written() -> None:
    # Seen in a terminal: a group stable for 10 s read "sync 10.1s, to stable 10.1s", the
    # time until the watch started, not how long its rebalance took.
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 60_000)
    events += inf.stored_ready(7, record(5, A), scanned=1200, now_ms=61_000)
    state = fold_all(GroupState(G), events, 62_000)
    rec = state.current
    assert rec is not None and (rec.start_ms, rec.stable_ms) == (5000, 5005)
    # Its start is the record's state time, the end of the join phase: the join's
    # length is not known, and the rebalance took at least the 5 ms after it.
    assert not rec.start_exact
    console = Console(width=160, file=io.StringIO(), color_system=None, record=True)
    console.print(render_group(state, 62_000, width=160, height=50))
    [row] = [line for line in console.export_text().splitlines() if line.startswith("  5 ")]
    assert row.split()[-5:-2] == ["-", "5ms", "≥5ms"], row


def test_a_rebalance_between_two_polls_is_bounded_by_its_record_not_timed_by_the_watch() -> None:
    # b left between two polls: the record (state time 2000, written 2005) is all there
    # is; the view read "join 0ms, to stable 0ms" from the watch's own read time (2100).
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])), 1000)
    events += inf.stored_ready(0, record(1, A, B), 10, 1500)
    events += inf.stored_record(record(2, A), 2100)
    state = fold_all(GroupState(G), events, 3000)
    one, two = state.generations
    assert (two.start_ms, two.sync_ms, two.stable_ms, two.start_exact) == (2000, 2000, 2005, False)
    assert one.end_ms == 2000


def test_each_record_is_a_generation_with_its_cause_even_between_two_polls() -> None:
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 1000)
    events += inf.stored_ready(0, record(1, A), 10, 1500)
    # b joins and leaves again between two polls: only the records saw it.
    events += inf.stored_record(record(2, A, B), 2000)
    events += inf.stored_record(record(3, A), 2500)
    events += inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 3000)
    gens = [e for e in events if e.type == "GenerationChanged"]
    assert [(e.generation, e.data["previous"]) for e in gens] == [(1, None), (2, 1), (3, 2)]
    assert causes(events) == [(2, "member_joined", False), (3, "member_left", False)]
    assert "b@10.1.1.1" in gens[1].data["evidence"]
    # No numbering of its own once the broker's generations are known.
    assert not [e for e in events if e.type == "GenerationChanged" and e.data["inferred"]]
    state = fold_all(GroupState(G), events, 4000)
    assert [(g.generation, g.cause, g.inferred) for g in state.generations] == [
        (1, "", False),
        (2, "member_joined", False),
        (3, "member_left", False),
    ]


def test_a_subscription_change_in_the_records_and_moves_at_the_next_settle() -> None:
    inf = Inferrer(G)
    inf.observe(snap("Stable", member("a-1", "a", [0, 1]), member("b-1", "b", [2, 3])), 1000)
    inf.stored_ready(0, record(4, A, B), 10, 1500)
    wider = MemberRecord("b-1", "b", "/10.1.1.1", subscription=("t", "u"))
    events = inf.stored_record(record(5, A, wider), 2000)
    assert causes(events) == [(5, "subscription_changed", False)]
    events = inf.observe(
        snap("Stable", member("a-1", "a", [0, 1, 2]), member("b-1", "b", [3], ("t", "u"))), 3000
    )
    moved = [e for e in events if e.type == "PartitionsMoved"]
    assert len(moved) == 1 and moved[0].generation == 5
    assert not [e for e in events if e.type == "RebalanceAttributed"]  # said with the record


def test_the_same_generation_stored_again_and_a_tombstone() -> None:
    inf = Inferrer(G)
    inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 1000)
    inf.stored_ready(0, record(2, A), 10, 1500)
    assert inf.stored_record(record(2, A), 2000) == []
    assert inf.stored_record(GroupRecord(G, None, offset=9), 2500) == []
    again = inf.stored_record(record(1, A), 3000)  # recreated: counts from 1 again
    assert [e.generation for e in again if e.type == "GenerationChanged"] == [1]


def test_when_the_topic_cannot_be_read_generations_are_inferred() -> None:
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0, 1, 2, 3])), 1000)
    events += inf.stored_unavailable("not authorized to read __consumer_offsets", 1500)
    events += inf.observe(
        snap("Stable", member("a-1", "a", [0, 1]), member("b-1", "b", [2, 3])), 2000
    )
    note = [e for e in events if e.type == "GenerationSourceChanged"]
    assert len(note) == 1 and note[0].data["source"] == "inferred"
    assert "not authorized" in note[0].data["reason"]
    gen = next(e for e in events if e.type == "GenerationChanged")
    assert gen.generation == 1 and gen.data["inferred"] is True
    assert "+1 since watch start (inferred)" in text(events)


def test_a_group_missing_at_the_start_gets_the_cause_of_its_first_generation() -> None:
    inf = Inferrer(G)
    inf.observe(snap("Dead", missing=True), 1000)
    # The look-back already finds the first generation: it began after the watch did.
    events = inf.stored_ready(0, record(1, A), 10, 1500)
    assert causes(events) == [(1, "member_joined", False)]


def test_a_group_being_created_is_not_a_generation_and_its_first_member_joined() -> None:
    inf = Inferrer(G)
    events = inf.observe(snap("Dead", missing=True), 1000)
    events += inf.stored_ready(0, None, scanned=0, now_ms=1100)
    # The first JoinGroup (asked for a member id) stores the new group, empty, at 0.
    assert inf.stored_record(record(0), 1200) == []
    events += inf.stored_record(record(1, A), 2000)
    assert [e.generation for e in events if e.type == "GenerationChanged"] == [1]
    assert causes(events) == [(1, "member_joined", False)]


def test_a_topic_that_grew_is_named_when_the_group_settles() -> None:
    inf = Inferrer(G)
    inf.observe(snap("Stable", member("a-1", "a", [0, 1]), member("b-1", "b", [2, 3])), 1000)
    inf.stored_ready(0, record(4, A, B), 10, 1500)
    # Same members, same subscriptions: the record alone cannot say why.
    events = inf.stored_record(record(5, A, B), 2000)
    assert [e.type for e in events] == ["GenerationChanged"] and causes(events) == []
    events = inf.observe(
        snap("Stable", member("a-1", "a", [0, 1, 2]), member("b-1", "b", [3, 4, 5])), 3000
    )
    assert causes(events) == [(5, "partitions_changed", True)]
    # A rebalance that changed nothing visible at all is still given a cause: unknown.
    inf.stored_record(record(6, A, B), 4000)
    events = inf.observe(
        snap("Stable", member("a-1", "a", [0, 1, 2]), member("b-1", "b", [3, 4, 5])), 5000
    )
    assert [c[:2] for c in causes(events)] == [(6, "unknown")]


def test_a_record_read_before_the_poll_that_shows_its_member_keeps_the_cause() -> None:
    # The reader is faster than the polls: b's generation is read before a description
    # shows b, b's leave before a description no longer shows it. b, new in the next
    # description, joined generation 2 (its record says so), not generation 3.
    inf = Inferrer(G)
    events = inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 1000)
    events += inf.stored_ready(7, record(1, A), scanned=10, now_ms=1100)
    events += inf.stored_record(record(2, A, B), 2100)
    events += inf.observe(snap("Stable", member("a-1", "a", [0]), member("b-1", "b", [1])), 2200)
    events += inf.stored_record(record(3, A), 3100)
    events += inf.observe(snap("Stable", member("a-1", "a", [0, 1])), 3200)
    state = fold_all(GroupState(G), events, 9000)
    [gen2, gen3] = [d for d in diagnose(state, events, 9000) if d.generation > 1]
    assert (gen2.trigger.cause_name, gen3.trigger.cause_name) == ("member_joined", "member_left")
    assert "b" in gen3.trigger.evidence and "new in the broker's description" not in (
        gen3.trigger.evidence
    )
