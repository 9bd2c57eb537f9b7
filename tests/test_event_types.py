"""The `EventType` Literal the model's comparisons are checked with names exactly the
event catalogue's types (kgctl/model/events.py), in its order."""

from __future__ import annotations

from typing import get_args

from kgctl.model.event_types import EventType, is_type
from kgctl.model.events import EVENT_TYPES, Event


def test_event_type_names_every_catalogued_type_and_nothing_else() -> None:
    assert list(get_args(EventType)) == list(EVENT_TYPES)


def test_is_type_matches_an_event_of_any_type_given() -> None:
    e = Event(type="JoinGroupSent", ts_ms=1, mono_ms=1.0, seq=1, group="g", member="m-1")
    assert is_type(e, "JoinGroupSent")
    assert is_type(e, "LeaveGroupSent", "JoinGroupSent")
    assert not is_type(e, "JoinGroupReceived")
