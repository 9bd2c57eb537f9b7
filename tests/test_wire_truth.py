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


def test_a_cooperative_second_round_is_the_first_rounds_not_a_trigger() -> None:
    # Two cooperative-sticky members; a third joins (generation 3): the two give up what
    # the third gets and join again at once (generation 4), without a reason (librdkafka).
    first, second = after("wire_rdkafka-cooperative_scale-out.jsonl.gz", 1796176933342)[:2]
    assert (first.trigger.cause, first.trigger.who) == ("member_joined", first.trigger.who)
    assert first.trigger.who.endswith("-c3")
    assert second.trigger.reason == f"second round of generation {first.generation}"
    assert second.trigger.cause == first.trigger.cause  # the same rebalance's cause
    assert second.trigger.who == ""  # no member to fix
    assert "gave up partitions" in second.trigger.evidence
    assert not any(t.cause == "rejoin_requested" for t in second.also)


def test_a_second_round_known_only_from_the_clusters_records_may_be_one() -> None:
    """`kgctl watch` of cooperative librdkafka members without a trace: the stored
    records show the same members twice in a row, on cooperative-sticky, but not who
    gave partitions up (a rejoin after an error reads the same): the rejoin read from
    the records says it may be the second round, and names no member."""
    from kgctl.model.diagnosis import INFERRED, diagnose
    from kgctl.report.summary import build_report, parse_lines

    path = DATA / "watch_rdkafka_cooperative.jsonl"
    events, _ = parse_lines(path.read_text().splitlines())
    report = build_report(events)
    by = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}
    t = by[5].trigger
    assert (t.confidence, t.who) == (INFERRED, "")
    assert "it may be that one's cooperative second round" in t.evidence
    assert "second round" not in by[8].trigger.evidence  # a leave, long after
    assert by[6].trigger.cause == "member_joined"


def test_an_eager_groups_quick_rounds_are_not_second_rounds() -> None:
    # range (eager): the three first members join 0.2 s apart, each a rebalance of its own.
    for d in explained("wire_rdkafka-range_fault-rip.jsonl.gz").generations:
        assert "second round" not in d.trigger.reason
