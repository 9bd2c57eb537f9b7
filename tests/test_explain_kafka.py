"""Real-broker tests of the diagnosis and `kgctl explain`: each pattern is reproduced
with real `kgctl join` members (tests/recorder.py) and the diagnosis of the recorded run
is checked for its trigger, the member the rebalance waited for, how long, and the
advice's setting and value."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgctl.adapters.assignors import cooperative_sticky
from kgctl.cli.app import app
from kgctl.model.diagnosis import EXACT, WAIT_DEAD, Context, Diagnosis, diagnose, restarts
from kgctl.report.summary import build_report, parse_lines

sys.path.insert(0, str(Path(__file__).parent))
from recorder import (  # noqa: E402
    record_busy_member,
    record_dead_member_growth,
    record_restart,
    record_scale_out,
    record_slow_member,
    record_static_replaced,
)

pytestmark = pytest.mark.kafka
runner = CliRunner()


def diagnosed(path: Path) -> tuple[str, dict[int, Diagnosis]]:
    events, _ = parse_lines(path.read_text().splitlines())
    report = build_report(events)
    diags = diagnose(report.state, report.events, report.last_ms, Context())
    return report.group, {d.generation: d for d in diags}


def test_dead_member_during_growth_waits_for_its_session_timeout(
    bootstrap: str, tmp_path: Path
) -> None:
    session = 4000
    path = tmp_path / "run.jsonl"
    record_dead_member_growth(bootstrap, path, session_ms=session)
    events, _ = parse_lines(path.read_text().splitlines())
    c_last = max(e.ts_ms for e in events if e.member == "c")
    _group, diags = diagnosed(path)
    # The growth's rebalance: the one c (SIGKILLed just before) is missing from.
    [growth] = [d for d in diags.values() if d.trigger.cause == "partitions_changed"]
    # The leader (a, which joined first) saw the new partitions and rejoined.
    assert (growth.trigger.who, growth.trigger.confidence) == ("a", EXACT)
    assert "4 → 8" in growth.trigger.evidence
    [wait] = [w for w in growth.critical_path if w.phase == "join"]
    assert (wait.member, wait.why) == ("c", WAIT_DEAD)
    # The join phase is the wait, and it ended when c's session timed out...
    assert growth.sync_ms is not None and wait.ms == growth.sync_ms - growth.start_ms
    assert 0.8 * session <= growth.sync_ms - c_last <= session + 1000, wait
    # ...less the time a took to see the new partitions (metadata.max.age.ms=1000).
    assert session - 2500 <= wait.ms <= session, wait
    costs = {c.member: c.unassigned_ms for c in growth.costs}
    assert set(costs) == {"a", "b"}
    heartbeat = session // 6  # the recorder's heartbeat.interval.ms
    [fix] = [a for a in growth.advice if a.setting == "session.timeout.ms"]
    # Above 3 heartbeats and twice the longest silence a live member had, below what
    # was waited.
    gaps, last = [0], {}
    for e in events:
        if e.type == "HeartbeatSucceeded":
            if e.member in last:
                gaps.append(e.ts_ms - last[e.member])
            last[e.member] = e.ts_ms
        elif e.type in ("JoinGroupSent", "MemberStarted", "LeaveGroupSent"):
            last.pop(e.member, None)
    assert max(3 * heartbeat, 2 * max(gaps)) <= int(fix.value) < session
    assert ("shutdown", "LeaveGroup") in {(a.setting, a.value) for a in growth.advice}


def test_max_poll_interval_breach_is_told_with_the_measured_batch(
    bootstrap: str, tmp_path: Path
) -> None:
    max_poll = 1500
    path = tmp_path / "run.jsonl"
    record_slow_member(bootstrap, path, max_poll_ms=max_poll)
    _group, diags = diagnosed(path)
    [breach] = [d for d in diags.values() if d.trigger.reason == "max.poll.interval.ms exceeded"]
    assert (breach.trigger.who, breach.trigger.cause, breach.trigger.confidence) == (
        "b",
        "timed_out",
        EXACT,
    )
    [fix] = [a for a in breach.advice if a.setting == "max.poll.interval.ms"]
    # b processes one batch for 2 × max.poll.interval.ms = 3 s: 1.5 × that, rounded up to
    # a second, with the batch's end seen within a second of its sleep.
    assert fix.value in ("5000", "6000"), fix


def test_explain_names_triggers_of_untraced_members_from_offsets_and_broker_log(
    bootstrap: str, broker_logs: list[Path], tmp_path: Path
) -> None:
    # The members' own events are set aside: explain reads only what the cluster kept.
    path = tmp_path / "run.jsonl"
    group = record_dead_member_growth(bootstrap, path, session_ms=2000)
    args = ["explain", group, "-b", bootstrap, "-o", "json"]
    for log in broker_logs:
        args += ["--broker-log", str(log)]
    result = runner.invoke(app, args)
    doc = json.loads(result.stdout)
    assert any(s.startswith("__consumer_offsets") for s in doc["sources"])
    assert not doc["healthy"]  # every member stopped: the group is empty
    [growth] = [g for g in doc["generations"] if g["trigger"]["cause"] == "partitions_changed"]
    assert growth["trigger"]["confidence"] == "exact"
    # The client's own words: kgctl's name for it, or (as the Java client says it) the
    # metadata it saw change.
    reason = growth["trigger"]["reason"]
    assert reason == "kgctl: metadata_changed" or reason.startswith("cached metadata has changed")
    [wait] = growth["critical_path"]
    assert wait["member"].startswith("kgctl-c") and wait["why"] == "dead"
    # Its session timeout, as the broker stored it with c's generation.
    assert (wait["session_timeout_ms"], wait["session_from"]) == (2000, "__consumer_offsets")
    assert any("does not wait 2s" in a["text"] for a in growth["advice"])
    # The join waited from the leader's rejoin until the broker removed c: when c's
    # session (2 s) ran out after c was last heard of.
    events, _ = parse_lines(path.read_text().splitlines())
    c_last = max(e.ts_ms for e in events if e.member == "c")
    removed = growth["start_ms"] + wait["ms"]
    assert wait["ms"] > 0 and 1600 <= removed - c_last <= 3000, (wait, c_last)


def test_dynamic_restart_is_two_rebalances_and_static_membership_is_advised(
    bootstrap: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    record_restart(bootstrap, path, static=False)
    events, _ = parse_lines(path.read_text().splitlines())
    report = build_report(events)
    [back] = restarts(report.state, report.events)
    assert back.member == "b" and back.rebalanced
    diags = diagnose(report.state, report.events, report.last_ms, Context())
    left = [d for d in diags if d.trigger.cause == "member_left" and d.trigger.who == "b"]
    assert left and left[0].trigger.confidence == EXACT
    # Said once, on the rebalance b's return started (or joined, when b was back before
    # the one its leave started had ended).
    [advice] = [a for d in diags for a in d.advice if a.pattern == "dynamic-restart"]
    expected = max(math.ceil(1.5 * back.down_ms / 1000) * 1000, 1000)
    assert (advice.setting, advice.value) == ("group.instance.id", f"session.timeout.ms={expected}")


def test_static_restart_within_the_session_timeout_causes_no_rebalance(
    bootstrap: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    group = record_restart(bootstrap, path, static=True, session_ms=6000)
    result = runner.invoke(app, ["explain", group, "--recording", str(path), "-o", "json"])
    doc = json.loads(result.stdout)
    [back] = doc["restarts"]
    assert back["member"] == "b" and back["static"] and not back["rebalanced"]
    assert back["down_ms"] < 6000
    # The two first joins are the only generations until the members were stopped.
    triggers = [g["trigger"]["reason"] for g in reversed(doc["generations"])]
    assert triggers[:2] == ["first_join", "first_join"]
    assert all(g["trigger"]["who"] != "b" or g["start_ms"] > back["back_ms"]
               for g in doc["generations"][:-2])  # fmt: skip


def test_cooperative_sticky_prediction_matches_a_real_cooperative_run(
    bootstrap: str, tmp_path: Path
) -> None:
    # The same scale-out (c joins a and b on 6 partitions) with range, then for real with
    # cooperative-sticky: what explain predicts is what cooperative members revoke.
    eager, coop = tmp_path / "eager.jsonl", tmp_path / "coop.jsonl"
    record_scale_out(bootstrap, eager, "range")
    record_scale_out(bootstrap, coop, "cooperative-sticky")
    events, _ = parse_lines(eager.read_text().splitlines())
    report = build_report(events)
    diags = diagnose(
        report.state, report.events, report.last_ms, Context(cooperative=cooperative_sticky)
    )
    [scale] = [d for d in diags if d.trigger.who == "c" and d.trigger.reason == "first_join"]
    assert scale.partitions_revoked == 6  # eager: a and b gave up everything
    [advice] = [a for a in scale.advice if a.pattern == "eager-stop-the-world"]
    predicted = int(advice.text.split("would have revoked ")[1].split()[0])
    real, _ = parse_lines(coop.read_text().splitlines())
    # From c's JoinGroup to c owning its share (the cooperative second round).
    c_joined = min(e.ts_ms for e in real if e.member == "c" and e.type == "JoinGroupSent")
    c_owns = min(
        e.ts_ms
        for e in real
        if e.member == "c" and e.type == "JoinCompleted" and e.data.get("assignment")
    )
    revoked = sum(
        len(ids)
        for e in real
        if e.type == "PartitionsRevoked" and e.member in ("a", "b")
        and c_joined <= e.ts_ms <= c_owns
        for ids in (e.data.get("partitions") or {}).values()
    )  # fmt: skip
    assert predicted == revoked == 2


def test_explain_reads_the_members_own_words_from_a_trace_topic(
    bootstrap: str, tmp_path: Path
) -> None:
    from recorder import Recording, create_topic, grow_topic

    topic = create_topic(bootstrap, 2)
    trace = f"kgctl-trace-{topic}"
    group = f"kgctl-explain-trace-{topic}"
    rec = Recording(bootstrap, group)
    try:
        rec.start("a", topic, "--trace-topic", trace, session_ms=2000)
        rec.wait_converged(["a"], 2)
        grow_topic(bootstrap, topic, 4)
        rec.wait_converged(["a"], 4)
        args = ["explain", group, "-b", bootstrap, "--trace-topic", trace, "-o", "json"]
        doc = json.loads(runner.invoke(app, [*args, "--broker-log", "/dev/null"]).stdout)
    finally:
        rec.close()
    assert doc["healthy"], doc["health"]  # a is still consuming when explain runs
    assert any(s.startswith(f"trace topic {trace}") for s in doc["sources"])
    growth = doc["generations"][0]
    assert growth["trigger"]["who"] == "a" and growth["trigger"]["confidence"] == "exact"
    assert growth["trigger"]["cause"] == "partitions_changed"
    assert growth["trigger"]["evidence"].startswith("a's trace:")


def test_a_member_busy_with_its_batch_holds_the_join(bootstrap: str, tmp_path: Path) -> None:
    processing = 2500
    path = tmp_path / "run.jsonl"
    record_busy_member(bootstrap, path, processing_ms=processing)
    _group, diags = diagnosed(path)
    [joined] = [d for d in diags.values() if d.trigger.who == "b"]
    assert joined.trigger.cause == "member_joined"
    [wait] = joined.critical_path
    assert (wait.phase, wait.member, wait.why) == ("join", "a", "processing")
    assert 0 < wait.ms <= processing + 500  # at most the batch it was on
    [fix] = [a for a in joined.advice if a.pattern == "processing-held-join"]
    n = int(fix.text.split("a batch of ")[1].split()[0])
    seconds = float(fix.text.split(" records (")[1].split("s,")[0])
    # About a second's worth of records at the measured pace (the text rounds the time).
    assert fix.setting == "max.poll.records"
    assert abs(int(fix.value) - 1000 * n / (seconds * 1000)) <= 2 and int(fix.value) < n


def test_a_static_member_replaced_by_a_process_with_other_assignors(
    bootstrap: str, tmp_path: Path
) -> None:
    # a2 takes a's group.instance.id offering roundrobin first: the broker hands it the
    # identity, fences a and, the group's assignor changing, rebalances.
    path = tmp_path / "run.jsonl"
    record_static_replaced(bootstrap, path)
    events, _ = parse_lines(path.read_text().splitlines())
    assert any(
        e.member == "a" and e.type == "MemberFailed" and e.data["error"] == "FENCED_INSTANCE_ID"
        for e in events
    )
    _group, diags = diagnosed(path)
    [swap] = [d for d in diags.values() if d.trigger.cause == "static_member_replaced"]
    assert (swap.trigger.who, swap.trigger.confidence) == ("a2", EXACT)
    # a was fenced, not killed: no session timeout named, nothing waited for.
    assert not swap.critical_path and not any(t.who == "a" for t in swap.also)
    advice = {(a.setting, a.value) for a in swap.advice}
    assert ("partition.assignment.strategy", "range") in advice
    assert ("group.instance.id", "one per process") in advice
