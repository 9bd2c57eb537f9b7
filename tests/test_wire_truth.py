"""Pure tests of what kgctl concludes from the proxy's wire trace of clients that report
nothing themselves, on traces `kgctl proxy --trace-topic` recorded in the truth suite
(tests/truth/: librdkafka 2.x consumers on a real broker; each file is one group's
events, the truth in the comments is what those clients' own callbacks said)."""

from __future__ import annotations

import gzip
from pathlib import Path

from kgctl.model.diagnosis import EXACT, Diagnosis
from kgctl.model.events import Event
from kgctl.model.explanation import Explanation, explain

DATA = Path(__file__).parent / "truth" / "data"


def explained(name: str) -> Explanation:
    lines = gzip.decompress((DATA / name).read_bytes()).decode().splitlines()
    events = [Event.from_json(line) for line in lines if line.strip()]
    return explain(events[0].group, events, events[-1].ts_ms + 1000)


def after(name: str, action_ms: int) -> list[Diagnosis]:
    """The generations whose rebalance began after the situation's action, oldest first."""
    found = explained(name).generations
    return sorted((d for d in found if d.start_ms >= action_ms - 300), key=lambda d: d.generation)


def test_an_injected_rebalance_in_progress_is_the_trigger_not_the_members_that_obeyed() -> None:
    # Three range members; the proxy answers each one's next Heartbeat
    # REBALANCE_IN_PROGRESS (a fault rule, count=3): they all rejoin, without a reason
    # (librdkafka's JoinGroup v5 has none).
    first = after("wire_rdkafka-range_fault-rip.jsonl.gz", 1796176932338)[0]
    assert first.trigger.confidence == EXACT
    assert "injected REBALANCE_IN_PROGRESS" in first.trigger.reason
    assert "fault rule Heartbeat:error=REBALANCE_IN_PROGRESS" in first.trigger.evidence
    assert first.trigger.who == ""  # no member to fix: it did as it was told
    assert not any(a.pattern == "rejoin-loop" for a in first.advice)


def test_an_injected_fault_in_a_cooperative_group_too() -> None:
    first = after("wire_rdkafka-cooperative_fault-rip.jsonl.gz", 1796176933716)[0]
    assert (first.trigger.confidence, first.trigger.who) == (EXACT, "")
    assert "REBALANCE_IN_PROGRESS" in first.trigger.reason
