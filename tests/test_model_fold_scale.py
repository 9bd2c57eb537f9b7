"""Pure tests of what the fold does to stay fast at 1,000 members (docs/benchmarks.md, "The
live watch through a 1,000-member rebalance"): its shortcuts must give the same state as
the plain way."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from pathlib import Path

import pytest
from helpers import FOLD_GROUP, KEPT_RECORDINGS, group_streams, mev, oev

from kgctl.model.events import Event
from kgctl.model.fold import _observe_member, fold, fold_all, fold_many
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
    MemberState,
    OwnershipSpan,
    evolve,
)

DATA = Path(__file__).parent / "data"
G = FOLD_GROUP


def _recording(name: str) -> list[Event]:
    path = DATA / name
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [Event.from_json(line) for line in fh if line.strip()]


def _scan(s: GroupState, member_id: str) -> MemberState | None:
    """find_member as it was: the first member with that id, in order."""
    return next((m for m in s.members.values() if member_id and m.member_id == member_id), None)


@pytest.mark.parametrize(
    "obj",
    [
        GroupState(G, state="Stable", generation=3, members={"a": MemberState("a")}),
        MemberState("a", member_id="a-1", partitions={"t": (1, 2)}, lives=((5, None),)),
        GenerationRecord(4, 100, cause="member_joined", members=("a", "b")),
        OwnershipSpan("a", 2, 10),
    ],
)
def test_evolve_makes_what_dataclasses_replace_makes(obj: object) -> None:
    name = dataclasses.fields(obj)[1].name  # type: ignore[arg-type]
    value = getattr(obj, name)
    changed = "x" if isinstance(value, str) else 7 if isinstance(value, int) else value
    new = evolve(obj, **{name: changed})
    assert new == dataclasses.replace(obj, **{name: changed})  # type: ignore[type-var]
    assert type(new) is type(obj) and getattr(new, name) == changed
    assert obj == dataclasses.replace(obj)  # the original is untouched
    with pytest.raises(TypeError, match="no field"):
        evolve(obj, no_such_field=1)


@pytest.mark.parametrize(
    "name", ["issue_scenario.jsonl.gz", "chaos_member_kill.jsonl", "static_replaced.jsonl"]
)
def test_the_member_index_finds_what_a_scan_finds_after_every_event(name: str) -> None:
    events = _recording(name)
    ids = {e.member_id for e in events if e.member_id} | {
        str(m.get("member_id"))
        for e in events
        if e.type == "GroupObserved"
        for m in e.data.get("members") or []
    }
    s = GroupState(events[0].group)
    for ev in events:
        s = fold(s, ev, ev.ts_ms)
        # The fold keeps the index for each state it makes with members in it.
        assert s.member_index_of is s.members or not s.members
        for member_id in ids:
            assert s.find_member(member_id) == _scan(s, member_id), (ev.type, member_id)


def test_a_state_whose_members_were_replaced_outside_the_fold_is_scanned() -> None:
    s = fold_all(GroupState(G), [mev("JoinGroupSent", 10, "m1")], now_ms=10)
    assert s.find_member("m1-id") is not None
    other = dataclasses.replace(s, members={"x": MemberState("x", member_id="m1-id")})
    found = other.find_member("m1-id")
    assert found is not None and found.key == "x"


def _described(*members: dict[str, object], ts: int = 500, state: str = "Stable") -> Event:
    return oev("GroupObserved", ts, state=state, members=list(members))


def test_a_description_folded_at_once_is_what_one_member_at_a_time_makes() -> None:
    """Untraced members (the broker's view only) get their partitions from a Stable
    description; a traced one keeps its own; a member described twice in one answer ends
    as the second says."""
    traced = [mev("JoinGroupSent", 10, "m1"), mev("JoinCompleted", 20, "m1", 1,
              generation=1, assignment={"t": [0]})]  # fmt: skip
    base = fold_all(GroupState(G), traced, now_ms=20)
    raws = [
        {"member_id": "m1-id", "client_id": "m1-client", "partitions": {"t": [0, 5]}},
        {"member_id": "o1", "client_id": "c-o1", "host": "/10.0.0.9", "partitions": {"t": [1]}},
        {"member_id": "o2", "client_id": "c-o2", "partitions": {"t": [2, 3]}},
        {"member_id": "o1", "client_id": "c-o1", "partitions": {"t": [1, 4]}},
    ]
    at_once = fold(base, _described(*raws), 500)

    one_by_one = evolve(base, state="Stable", observed_ms=500)
    for raw in raws:
        one_by_one = _observe_member(one_by_one, raw, str(raw["member_id"]), 500, True)

    assert at_once.members == one_by_one.members
    assert list(at_once.members) == list(one_by_one.members)
    assert dict(at_once.ownership) == dict(one_by_one.ownership)
    assert dict(at_once.members["o1"].partitions) == {"t": (1, 4)}
    assert dict(at_once.members["m1"].partitions) == {"t": (0,)}  # its own events say so
    for member_id in ("m1-id", "o1", "o2"):
        assert at_once.find_member(member_id) == _scan(at_once, member_id)


def test_a_rebalance_ends_when_its_last_member_completes_in_any_order() -> None:
    """The check for the end of a rebalance starts where it last found a member on its
    way: the generation is stable at the last completion, whatever the order."""
    names = [f"m{i}" for i in range(6)]
    joins = [mev("JoinGroupSent", 10 + i, n) for i, n in enumerate(names)]
    s = fold_all(GroupState(G), joins, now_ms=20)
    order = ["m3", "m0", "m5", "m1", "m4", "m2"]
    for k, n in enumerate(order):
        t = 100 + 10 * k
        s = fold(s, mev("JoinGroupReceived", t, n, 1, generation=1, leader="m0-id"), t)
    for k, n in enumerate(order):
        t = 200 + 10 * k
        s = fold(s, mev("JoinCompleted", t, n, 1, generation=1, assignment={"t": [k]}), t)
        if k < len(order) - 1:
            assert s.rebalancing and s.generations[-1].stable_ms is None, n
    assert not s.rebalancing and s.generations[-1].stable_ms == 250


def test_lag_is_read_from_json_keys_and_numbers_as_before() -> None:
    """A description's lag as JSON gives it (string partition ids), and odd entries
    skipped as before."""
    line = json.dumps(
        {"t": {"0": 3, "1": 4, "x": 9, "2": -1, "3": "5", " 4": 6, "²": 1}}, ensure_ascii=False
    )
    traced = [mev("JoinGroupSent", 10, "m1"), mev("JoinCompleted", 20, "m1", 1,
              generation=1, assignment={"t": [0, 1, 3, 4]})]  # fmt: skip
    s = fold_all(GroupState(G), traced, now_ms=20)
    s = fold(s, oev("GroupObserved", 30, state="Stable", lag=json.loads(line)), 30)
    assert {t: dict(v) for t, v in s.lag.items()} == {"t": {0: 3, 1: 4, 3: 5, 4: 6}}
    assert s.members["m1"].lag == 18


def _same_state(a: GroupState, b: GroupState) -> None:
    """Equal as the views read them: every compared field, the members' order, and an
    index that finds what a scan finds."""
    assert a == b
    assert list(a.members) == list(b.members)
    assert dict(a.ownership) == dict(b.ownership)
    assert (a.member_index_of is a.members) == (b.member_index_of is b.members)
    for m in b.members.values():
        assert a.find_member(m.member_id) == _scan(a, m.member_id)


@pytest.mark.parametrize("path", KEPT_RECORDINGS, ids=lambda p: p.name)
def test_a_batch_folds_every_recording_to_the_state_of_one_event_at_a_time(path: Path) -> None:
    """`fold_many` changes one private draft in place: every kept recording, of every
    group in it and as the views order it (a proxy's trace as its member steps), gives
    the state `fold` gives one event at a time, whether folded in one batch or in the
    live view's batches of a few events; and a state a batch started from is left as
    it was (the watch's diagnoses read it on a worker while the fold moves on)."""
    for ordered in group_streams(path):
        group = ordered[0].group
        one_by_one = GroupState(group)
        for ev in ordered:
            one_by_one = fold(one_by_one, ev, ev.ts_ms)
        whole = fold_many(GroupState(group), ((ev, ev.ts_ms) for ev in ordered))
        _same_state(whole, one_by_one)

        s = GroupState(group)
        for k in range(0, len(ordered), 7):
            before = copy.deepcopy(s)
            s_next = fold_many(s, ((ev, ev.ts_ms) for ev in ordered[k : k + 7]))
            _same_state(s, before)  # untouched
            s = s_next
        _same_state(s, one_by_one)


def test_a_batch_of_a_thousand_member_rebalance_is_the_state_of_one_event_at_a_time() -> None:
    from bench.micro import _Stamp, rebalance_events

    stamp = _Stamp(G, 1_800_000_000_000)
    setup = rebalance_events(stamp, 50, 500, 1) + rebalance_events(stamp, 50, 500, 2)
    base = fold_all(GroupState(G), setup, stamp.t)
    rebalance = rebalance_events(stamp, 50, 500, 3)
    before = copy.deepcopy(base)
    one_by_one = base
    for ev in rebalance:
        one_by_one = fold(one_by_one, ev, stamp.t)
    batch = fold_many(base, ((ev, stamp.t) for ev in rebalance))
    _same_state(batch, one_by_one)
    _same_state(base, before)
    assert batch.generation == 3 and not batch.rebalancing


def test_a_batch_hands_back_an_ordinary_state() -> None:
    """What a batch returns is never changed again: the next fold makes a new state."""
    s = fold_many(GroupState(G), [(mev("JoinGroupSent", 10, "m1"), 10)])
    kept = copy.deepcopy(s)
    t = fold(s, mev("JoinCompleted", 20, "m1", 1, generation=1, assignment={"t": [0]}), 20)
    assert t is not s and t.members is not s.members and t.ownership is not s.ownership
    _same_state(s, kept)


def test_assignments_and_lag_read_in_bulk_are_what_reading_each_entry_gives() -> None:
    """`owned_from` and a description's lag read what JSON gives in bulk; anything else
    (a bool, a string, a negative, a tuple, a number as a topic) entry by entry. Both
    ways give the same."""
    import random

    from kgctl.model.fold import _lag_of_topic, lag_by_entry
    from kgctl.model.state import owned_by_entry, owned_from

    rng = random.Random(7)
    odd: list[object] = [True, False, -1, "3", 2.0, None, "x", " 4", "²", 10**20]
    for _ in range(2000):
        clean = rng.random() < 0.5
        raw: dict[object, object] = {}
        for k in range(rng.randint(0, 3)):
            topic: object = f"t{k}" if clean or rng.random() < 0.8 else k
            ids = [rng.randint(0, 40) for _ in range(rng.randint(0, 6))]
            if not clean and rng.random() < 0.5:
                ids.insert(rng.randint(0, len(ids)), rng.choice(odd))  # type: ignore[arg-type]
            raw[topic] = ids if clean or rng.random() < 0.8 else tuple(ids)
        assert owned_from(raw) == owned_by_entry(raw), raw
        lag: dict[object, object] = {
            str(p): rng.randint(0, 10**6) for p in rng.sample(range(50), rng.randint(0, 8))
        }
        if not clean:
            lag[rng.choice(odd + ["7"])] = rng.choice(odd + [5])
        assert _lag_of_topic(lag) == lag_by_entry(lag), lag
