"""Pure tests of the live loop's housekeeping (kgctl/render/live.py), without a terminal."""

from __future__ import annotations

import gc

import pytest

from kgctl.render import live


def test_the_view_sets_aside_what_has_lived_and_hands_it_back_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What has lived is set aside from the cycle collector at the first turn and every
    FREEZE_S after; every FULL_COLLECTION_S all of it is handed back; on leaving, the
    collector is as it was."""
    clock = [1000.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    saved = gc.get_threshold()
    keep = [[i] for i in range(1000)]  # objects that live on
    try:
        with live._Collections() as collections:
            assert gc.get_threshold()[0] == live._Collections.YOUNG_THRESHOLD
            collections.tick()
            first = gc.get_freeze_count()
            assert first >= len(keep)
            clock[0] += live._Collections.FREEZE_S / 2
            more = [[i] for i in range(1000)]
            collections.tick()
            assert gc.get_freeze_count() == first  # not yet
            clock[0] += live._Collections.FREEZE_S / 2
            collections.tick()
            assert gc.get_freeze_count() >= first + len(more)
            clock[0] = 1000.0 + live._Collections.FULL_COLLECTION_S
            collections.tick()
            assert gc.get_freeze_count() == 0  # handed back: a full collection sees all
        assert gc.get_threshold() == saved and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)
