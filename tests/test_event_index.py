"""The diagnosis's event index answers every window as a filter over the sorted events would."""

from __future__ import annotations

import random

import pytest

from kgctl.model.event_index import EventIndex, index
from kgctl.model.events import Event

TYPES = ("HeartbeatSucceeded", "RecordsConsumed", "JoinGroupSent", "MemberStarted", "GroupObserved")
MEMBERS = ("", "m1", "m2", "m3")


def _events(rng: random.Random, n: int) -> list[Event]:
    # Few distinct timestamps, so that many events share an instant: their order must hold.
    return [
        Event(
            type=rng.choice(TYPES),
            ts_ms=rng.randrange(0, 40),
            mono_ms=0.0,
            seq=i,
            group="g",
            member=rng.choice(MEMBERS),
        )
        for i in range(n)
    ]


def _bounds(rng: random.Random) -> tuple[int | None, int | None]:
    since = rng.choice([None, rng.randrange(-5, 45)])
    until = rng.choice([None, rng.randrange(-5, 45)])
    return since, until


def _inside(e: Event, since: int | None, until: int | None) -> bool:
    return (since is None or e.ts_ms > since) and (until is None or e.ts_ms <= until)


@pytest.mark.parametrize("seed", range(20))
def test_every_window_is_the_filter_of_the_time_ordered_events(seed: int) -> None:
    rng = random.Random(seed)
    events = _events(rng, rng.randrange(0, 300))
    ordered = sorted(events, key=lambda e: e.ts_ms)  # stable, as the index must be
    idx = EventIndex(events)
    assert list(idx) == ordered and len(idx) == len(ordered)
    for _ in range(30):
        since, until = _bounds(rng)
        types = rng.sample(TYPES, rng.randrange(0, 4))
        member = rng.choice(MEMBERS[1:] + ("nobody",))
        assert idx.between(since, until) == [e for e in ordered if _inside(e, since, until)]
        assert idx.of(*types, since=since, until=until) == [
            e for e in ordered if e.type in types and _inside(e, since, until)
        ]
        assert idx.excluding(types, since=since, until=until) == [
            e for e in ordered if e.type not in types and _inside(e, since, until)
        ]
        assert idx.by(member, since=since, until=until) == [
            e for e in ordered if e.member == member and _inside(e, since, until)
        ]
        at = rng.randrange(-5, 45)
        mine = [e.ts_ms for e in ordered if e.member == member and e.ts_ms <= at]
        assert idx.last_ts_by(member, at) == (mine[-1] if mine else None)


def test_what_is_derived_is_derived_once_and_an_index_is_not_indexed_again() -> None:
    idx = EventIndex(_events(random.Random(1), 50))
    calls: list[int] = []

    def count(i: EventIndex) -> int:
        calls.append(1)
        return len(i.of("JoinGroupSent"))

    assert idx.memo("joins", count) == idx.memo("joins", count)
    assert len(calls) == 1
    assert index(idx) is idx
