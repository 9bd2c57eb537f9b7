"""Pure tests of the diagnosis of a generation (kgctl/model/diagnosis/), on runs
recorded from a real broker (tests/recorder.py regenerates them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kgctl.adapters.assignors import cooperative_sticky
from kgctl.model.bounds import GroupBounds
from kgctl.model.diagnosis import (
    EXACT,
    FAILED,
    INFERRED,
    WAIT_DEAD,
    WAIT_PROCESSING,
    Advice,
    AssignmentInput,
    BrokerReason,
    Context,
    Diagnosis,
    diagnose,
    restarts,
)
from kgctl.model.events import Event
from kgctl.report.summary import build_report, parse_lines

DATA = Path(__file__).parent / "data"


def diagnosed(name: str, ctx: Context | None = None) -> dict[int, Diagnosis]:
    events, _ = parse_lines((DATA / name).read_text().splitlines())
    report = build_report(events)
    return {d.generation: d for d in diagnose(report.state, report.events, report.last_ms, ctx)}


def test_dead_member_during_growth_names_the_growth_and_the_wait_for_the_dead_member() -> None:
    # a, b, c on 4 partitions; c SIGKILLed; the topic grown to 8 at once (session 6 s).
    g3 = diagnosed("dead_member_growth.jsonl")[3]
    assert g3.trigger.who == "a"
    assert g3.trigger.cause == "partitions_changed"
    assert g3.trigger.confidence == EXACT
    assert "4 → 8" in g3.trigger.evidence
    # c's silent departure came later: it joined a rebalance that was already running.
    assert [(t.who, t.cause) for t in g3.also] == [("c", "timed_out")]
    [wait] = g3.critical_path
    assert (wait.phase, wait.member, wait.why) == ("join", "c", WAIT_DEAD)
    assert wait.ms == g3.sync_ms - g3.start_ms  # type: ignore[operator]
    assert 4500 <= wait.ms <= 6500  # its session timeout, less the time it took a to notice
    assert "session.timeout.ms=6000" in wait.detail
    costs = {c.member: c.unassigned_ms for c in g3.costs}
    assert set(costs) == {"a", "b"} and min(costs.values()) >= 4500
    advice = {(a.setting, a.value) for a in g3.advice}
    assert ("session.timeout.ms", "3000") in advice  # 3 × heartbeat.interval.ms=1000
    assert ("shutdown", "LeaveGroup") in advice
    assert ("group.protocol", "consumer") in advice


def test_session_advice_respects_the_cluster_floor() -> None:
    bounds = GroupBounds.from_configs({"group.min.session.timeout.ms": "4500"})
    g3 = diagnosed("dead_member_growth.jsonl", Context(bounds=bounds))[3]
    assert ("session.timeout.ms", "4500") in {(a.setting, a.value) for a in g3.advice}


def test_a_member_killed_by_chaos_is_an_exact_session_timeout() -> None:
    # kgctl chaos SIGKILLed m2 and says so (ActionPerformed, its MemberFailed): exact.
    g3 = diagnosed("chaos_member_kill.jsonl")[3]
    assert (g3.trigger.who, g3.trigger.cause, g3.trigger.confidence) == (
        "m2",
        "timed_out",
        EXACT,
    )
    assert "kgctl chaos at " in g3.trigger.evidence and "SIGKILL m2" in g3.trigger.evidence
    assert not any("infers" in n for n in g3.notes)
    [detect] = g3.critical_path
    assert (detect.phase, detect.member, detect.confidence) == ("detect", "m2", EXACT)
    assert "SIGKILL m2" in detect.detail
    assert 2000 <= detect.ms <= 3500  # session.timeout.ms=3000
    # heartbeat.interval.ms=300, but a heartbeat once came 309 ms after the one before:
    # 2 × that, rounded up to a second, is above 3 × 300.
    [advice] = [a for a in g3.advice if a.setting == "session.timeout.ms"]
    assert advice.value == "1000" and "309 ms" in advice.text
    # 2 × 309 ms is 618 ms: the advice says it rounded the value up, not that 1000 is 2 × 309.
    assert "rounded up to a whole second" in advice.text


def without_chaos(name: str) -> tuple[Any, list[Event]]:
    """A recorded chaos run without chaos's own events: a kill -9 nobody announced."""
    events, _ = parse_lines((DATA / name).read_text().splitlines())
    report = build_report([e for e in events if e.source != "chaos"])
    return report, report.events


def test_a_member_killed_without_a_word_is_an_inferred_session_timeout() -> None:
    report, events = without_chaos("chaos_member_kill.jsonl")
    g3 = diagnose(report.state, events, report.last_ms)[2]
    assert (g3.trigger.who, g3.trigger.cause, g3.trigger.confidence) == (
        "m2",
        "timed_out",
        INFERRED,
    )
    assert "killed or frozen" in g3.trigger.evidence and "chaos" not in g3.trigger.evidence
    assert any("infers" in n for n in g3.notes)
    assert g3.critical_path[0].confidence == INFERRED


def test_a_broker_log_line_makes_a_silent_departure_exact() -> None:
    report, _ = without_chaos("chaos_member_kill.jsonl")
    g3 = report.state.generations[2]
    line = BrokerReason(
        g3.start_ms - 5, report.group, "removing member m2-id on heartbeat expiration", 2
    )
    d = diagnose(report.state, report.events, report.last_ms, Context(broker_reasons=(line,)))
    trig = d[2].trigger
    assert trig.confidence == EXACT and trig.cause == "timed_out"
    assert trig.evidence.startswith("broker log ")


def test_max_poll_interval_breach_is_the_members_own_words_with_a_measured_fix() -> None:
    # b spends 4 s on one batch against max.poll.interval.ms=2000.
    g3 = diagnosed("slow_member.jsonl")[3]
    assert (g3.trigger.who, g3.trigger.cause, g3.trigger.confidence) == ("b", "timed_out", EXACT)
    assert "max.poll.interval.ms=2000" in g3.trigger.evidence
    [advice] = [a for a in g3.advice if a.pattern == "max-poll-interval"]
    # One record alone took 4 s: fewer records cannot help, a longer interval can.
    assert advice.setting == "max.poll.interval.ms"
    assert advice.value == "6000"  # 1.5 × 4.0 s, rounded up to a second


def test_growth_under_eager_says_what_cooperative_sticky_would_have_revoked() -> None:
    # a and b own 4 partitions (2 each) under range; the topic grows to 6.
    ctx = Context(cooperative=cooperative_sticky)
    g3 = diagnosed("two_members_growth.jsonl", ctx)[3]
    assert g3.trigger.cause == "partitions_changed"
    assert g3.partitions_revoked == 4
    [coop] = [a for a in g3.advice if a.pattern == "eager-stop-the-world"]
    assert coop.value == "cooperative-sticky"
    assert "revoked 4" in coop.text and "would have revoked 0" in coop.text
    # The way there is the client's: librdkafka refuses Java's two-step mixed list.
    assert "cooperative-sticky,range" in coop.text and "librdkafka refuses" in coop.text
    # Without the assignor passed in, no claim is made.
    plain = diagnosed("two_members_growth.jsonl")[3]
    assert not [a for a in plain.advice if a.pattern == "eager-stop-the-world"]


def test_cooperative_sticky_keeps_owners_and_moves_only_what_balance_needs() -> None:
    owned = {"a": (("t", 0), ("t", 1), ("t", 2)), "b": (("t", 3), ("t", 4), ("t", 5))}
    plan = cooperative_sticky(
        AssignmentInput({"a": ("t",), "b": ("t",), "c": ("t",)}, owned, {"t": 6})
    )
    assert sorted(p for tps in plan.values() for p in tps) == [("t", i) for i in range(6)]
    assert all(len(tps) == 2 for tps in plan.values())
    kept = sum(1 for m, tps in owned.items() for tp in tps if tp in plan[m])
    assert kept == 4


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.jsonl")))
def test_every_recorded_generation_gets_a_trigger(name: str) -> None:
    diags = diagnosed(name)
    assert diags
    for d in diags.values():
        assert d.trigger.cause != "unknown", (name, d.generation)
        assert d.trigger.confidence in (EXACT, INFERRED)
        assert d.to_dict()["trigger"]["evidence"]


def test_a_member_that_keeps_starting_rebalances_is_named_with_its_reasons() -> None:
    from kgctl.model.diagnosis import Trigger
    from kgctl.model.diagnosis.advice import advise_rejoin_loop
    from kgctl.model.reasons import Cause

    def d(gen: int, who: str, reason: str) -> Diagnosis:
        return Diagnosis(
            gen,
            False,
            gen * 100,
            None,
            None,
            Trigger(cause=Cause.TIMED_OUT, who=who, reason=reason),
        )

    diags = [d(1, "a", "first_join"), d(2, "b", "x"), d(3, "b", "y"), d(4, "a", "z"),
             d(5, "b", "x")]  # fmt: skip
    loops = advise_rejoin_loop(diags)
    assert set(loops) == {5}
    assert loops[5].value == "b" and "x, y" in loops[5].text


def test_a_dynamic_restart_is_advised_static_membership_sized_from_the_restart_seen() -> None:
    # b stopped (LeaveGroup) and started again: two rebalances.
    diags = diagnosed("dynamic_restart.jsonl")
    [(gen, advice)] = [
        (d.generation, a)
        for d in diags.values()
        for a in d.advice
        if a.pattern == "dynamic-restart"
    ]
    assert diags[gen].trigger.who == "b" and diags[gen].trigger.reason == "first_join"
    assert diags[gen - 1].trigger.cause == "member_left"
    events, _ = parse_lines((DATA / "dynamic_restart.jsonl").read_text().splitlines())
    report = build_report(events)
    [back] = restarts(report.state, report.events)
    assert back.rebalanced and not back.static
    expected = max(math.ceil(1.5 * back.down_ms / 1000) * 1000, 1000)
    assert advice.setting == "group.instance.id"
    assert advice.value == f"session.timeout.ms={expected}"


def test_a_static_restart_within_the_session_timeout_rebalances_nothing() -> None:
    events, _ = parse_lines((DATA / "static_restart.jsonl").read_text().splitlines())
    report = build_report(events)
    [back] = restarts(report.state, report.events)
    assert back.static and not back.rebalanced
    assert back.session_timeout_ms == 6000 and back.down_ms < 6000
    assert "no rebalance" in back.text()
    # Only the two first joins made generations.
    assert [d.trigger.reason for d in diagnose(report.state, report.events, report.last_ms)] == [
        "first_join",
        "first_join",
    ]


def test_the_proxys_wire_events_give_an_exact_trigger() -> None:
    """A plain client behind `kgctl proxy`: its JoinGroup's KIP-800 reason, as the proxy
    traced it (source `wire`, read as its steps by `member_steps`), names the trigger; a
    reaction's reason does not."""
    from kgctl.model.events import Event
    from kgctl.model.fold import fold_all
    from kgctl.model.state import GroupState
    from kgctl.model.wire import member_steps

    events, _ = parse_lines((DATA / "dead_member_growth.jsonl").read_text().splitlines())
    events = [e for e in events if e.type != "RejoinRequested"]  # the members say nothing
    group = events[0].group
    state = fold_all(GroupState(group, log_limit=0), events, events[-1].ts_ms)
    g3 = state.generations[2]

    def wire(ts: int, client: str, reason: str | None) -> Event:
        request = {"group": group, "member_id": f"{client}-1", "reason": reason}
        return Event("JoinGroupTraced", ts, 0.0, 1, group, member=client, client_id=client,
                     source="wire", data={"request": request, "latency_ms": 0})  # fmt: skip

    traced = member_steps(
        [
            wire(g3.start_ms - 10, "java-app", "cached metadata has changed from 4 to 8"),
            wire(g3.start_ms + 100, "java-other", "group is already rebalancing"),
        ]
    )
    d = diagnose(state, events + traced, events[-1].ts_ms)[2]
    assert (d.trigger.who, d.trigger.cause, d.trigger.confidence) == (
        "java-app",
        "partitions_changed",
        EXACT,
    )
    assert d.trigger.evidence.startswith("wire: java-app's JoinGroup reason")
    assert "java-other" not in {t.who for t in d.also}


def test_a_join_held_by_a_member_finishing_its_batch() -> None:
    # a spends 2.5 s on every batch and always has another; b joins.
    g2 = diagnosed("busy_member.jsonl")[2]
    assert (g2.trigger.who, g2.trigger.cause) == ("b", "member_joined")
    [wait] = g2.critical_path
    assert (wait.phase, wait.member, wait.why) == ("join", "a", WAIT_PROCESSING)
    assert 0 < wait.ms <= 2600  # at most one batch
    [fix] = [a for a in g2.advice if a.pattern == "processing-held-join"]
    assert fix.setting == "max.poll.records"
    n, per_record = _batch_in(fix.text)
    assert int(fix.value) == int(1000 / per_record) < n


def _batch_in(text: str) -> tuple[int, float]:
    """(records, ms each) of the batch an advice names: `a batch of 44 records (2.5s, 57 ms
    each)`; the value is checked against them."""
    n = int(text.split("a batch of ")[1].split()[0])
    seconds = float(text.split(" records (")[1].split("s,")[0])
    return n, seconds * 1000 / n


def test_a_leader_slow_to_send_the_assignment_holds_the_sync_phase() -> None:
    """The two-member run with everything after the leader's JoinGroup answer of
    generation 2 moved 1.5 s later: the followers waited that long in SyncGroup."""
    from dataclasses import replace

    events, _ = parse_lines((DATA / "two_members_growth.jsonl").read_text().splitlines())
    events.sort(key=lambda e: e.ts_ms)
    answer = next(
        e
        for e in events
        if e.type == "JoinGroupReceived"
        and e.data.get("generation") == 2
        and e.data.get("is_leader")
    )
    slowed = [replace(e, ts_ms=e.ts_ms + 1500) if e.ts_ms > answer.ts_ms else e for e in events]
    report = build_report(slowed)
    g2 = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}[2]
    [sync] = [w for w in g2.critical_path if w.phase == "sync"]
    assert (sync.member, sync.why) == (answer.member, "slow_assignment")
    assert 1500 <= sync.ms <= 1600


def _stored(generation: int, ts: int, member_ids: list[str], session_ms: int = 10000) -> Event:
    """A generation as watch reads it from the broker's own record in __consumer_offsets."""
    members = [
        {"member_id": m, "client_id": m.split("-")[0], "session_timeout_ms": session_ms,
         "rebalance_timeout_ms": 300000}
        for m in member_ids
    ]  # fmt: skip
    return Event(
        "GenerationChanged", ts, float(ts), generation, "g", generation=generation,
        source="observer",
        data={"inferred": False, "previous": generation - 1, "stored_in": "__consumer_offsets",
              "written_ms": ts, "state_ts_ms": ts, "sync_ms": ts, "members": members},
    )  # fmt: skip


def test_stored_records_alone_name_a_first_generation_and_a_rejoin_of_the_same_members() -> None:
    # A plain kafka-python consumer, no trace and no broker log: its group's records
    # say generation 1 then 2, both with only its own member id.
    events = [_stored(1, 1000, ["app-1"]), _stored(2, 1100, ["app-1"])]
    report = build_report(events)
    found = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}
    assert found[1].trigger.cause == "member_joined"
    assert found[2].trigger.cause == "rejoin_requested"
    assert found[2].trigger.confidence == INFERRED
    assert "the same members" in found[2].trigger.evidence
    # Someone new in the next generation is not a rejoin of the same members.
    events.append(_stored(3, 1200, ["app-1", "app-2"]))
    report = build_report(events)
    third = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}[3]
    assert third.trigger.cause != "rejoin_requested"


def test_a_static_member_replaced_by_a_process_with_other_assignors() -> None:
    # a2 joined with a's group.instance.id, roundrobin first (a: range): the broker gave
    # a2 the identity, fenced a, and rebalanced for the new assignor.
    g2 = diagnosed("static_replaced.jsonl")[2]
    assert (g2.trigger.who, g2.trigger.cause, g2.trigger.confidence) == (
        "a2",
        "static_member_replaced",
        EXACT,
    )
    assert "group.instance.id" in g2.trigger.evidence
    # a was fenced, not killed: neither a session timeout nor a wait for it.
    assert not g2.also and not g2.critical_path
    advice = {(a.setting, a.value) for a in g2.advice}
    assert ("partition.assignment.strategy", "range") in advice
    assert ("group.instance.id", "one per process") in advice


def test_the_brokers_words_for_a_static_member_replaced() -> None:
    from kgctl.model.diagnosis.causes import broker_cause

    for reason in (
        "Updating metadata for static member m-1 with instance id i; client reason: x",
        "Group's selectedProtocol will change because static member m-1 with instance id i "
        "joined with change of protocol; client reason: not provided",
    ):
        assert broker_cause(reason) == "static_member_replaced", reason


def test_an_untraced_dead_member_is_advised_from_its_stored_session_timeout() -> None:
    # Plain Java consumers: no trace; the records say each member's session timeout
    # (45 s), the broker log says why the rebalance began (the client's own words) and
    # when c was removed.
    events = [
        _stored(1, 1000, ["a-1", "b-1", "c-1"], 45000),
        _stored(2, 47000, ["a-1", "b-1"], 45000),
    ]
    report = build_report(events)
    lines = (
        BrokerReason(2000, "g", "Leader a-1 re-joining group during Stable; client reason: "
                     "cached metadata has changed from [t=4] at the beginning of the rebalance "
                     "to [t=8]", 1),
        BrokerReason(46990, "g", "member c-1 has failed (session timeout), removed", kind=FAILED),
    )  # fmt: skip
    ctx = Context(broker_reasons=lines)
    d = {x.generation: x for x in diagnose(report.state, report.events, report.last_ms, ctx)}[2]
    assert (d.trigger.cause, d.trigger.confidence) == ("partitions_changed", EXACT)
    [wait] = d.critical_path
    assert (wait.why, wait.session_timeout_ms, wait.session_from) == (
        "dead",
        45000,
        "__consumer_offsets",
    )
    assert "session.timeout.ms=45000, stored in __consumer_offsets" in wait.detail
    [fix] = [a for a in d.advice if a.setting == "session.timeout.ms"]
    # No heartbeat traced: 3 × the clients' default interval, and it says so.
    assert fix.value == "9000" and "default floor" not in fix.text
    assert "stored in __consumer_offsets" in fix.text and "default heartbeat" in fix.text


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("cached metadata has changed from [t-4] at the beginning of the rebalance to [t-8]",
         "partitions_changed"),
        ("subscription has changed from [a] at the beginning of the rebalance to [a, b]",
         "subscription_changed"),
        ("received assignment [a-0] does not match the current subscription Subscribe(b); it "
         "is likely that the subscription has changed since we joined the group, will re-join "
         "with current subscription", "subscription_changed"),
        ("rebalance failed due to 'The group is rebalancing, so a rejoin is needed.' "
         "(RebalanceInProgressException)", None),
        ("group is already rebalancing", None),
        ("need to revoke partitions [t-1] as indicated by the current assignment and re-join",
         None),
        ("rebalance failed due to 'The coordinator is not aware of this member.' "
         "(UnknownMemberIdException)", "generation_reset"),
        ("rebalance enforced by user", "rejoin_requested"),
        ("kgctl: metadata_changed", "partitions_changed"),
        ("kgctl: first_join", "member_joined"),
        ("rebalance_in_progress", None),
    ],
)  # fmt: skip
def test_a_clients_own_reason_in_kgctls_or_javas_words(reason: str, cause: str | None) -> None:
    from kgctl.model.diagnosis.causes import broker_cause, wire_cause

    assert wire_cause(reason) == cause
    # In the broker's log, after its own words for a member that rejoined.
    logged = f"Updating metadata for member m-1 during Stable; client reason: {reason}"
    assert broker_cause(logged) == (cause or "rejoin_requested")


def test_the_kip848_advice_is_computed_from_the_generation() -> None:
    # a [0,1], b [2], c [3] on 4 partitions; c killed; 8 partitions: a [0-3], b [4-7].
    g3 = diagnosed("dead_member_growth.jsonl")[3]
    [advice] = [a for a in g3.advice if a.pattern == "kip-848"]
    costs = {c.member: c.unassigned_ms for c in g3.costs}
    # The stop-the-world as it was: both live members idle, eager revocations...
    assert f"a {costs['a'] / 1000:.1f}s, b {costs['b'] / 1000:.1f}s" in advice.text
    assert f"gave up {g3.partitions_revoked} partitions" in advice.text
    # ...against what the consumer protocol would have paused: only b's partition 2,
    # handed to a (c's 3 waits for c's session either way; 4-7 are new).
    assert "only the 1 taken from one of them would have paused (of 8 partitions)" in advice.text
    assert f"the {g3.critical_path[0].ms / 1000:.1f}s the join waited for c" in advice.text


def test_the_issues_scenario_rerun_by_hand_reads_right() -> None:
    """`kgctl watch --trace-topic --record` of the issue's scenario on the dev broker: a,
    b, c traced (session 20 s), records produced all along, c kill -9'd, `pay` grown
    4 → 8 (tests/data/issue_scenario.jsonl.gz, gzipped: 1,282 RecordsConsumed)."""
    import gzip

    lines = gzip.decompress((DATA / "issue_scenario.jsonl.gz").read_bytes()).decode()
    events, _ = parse_lines(lines.splitlines())
    report = build_report(events)
    found = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}
    # gen 2: b and c joined; the trace says so (not the watch's first sight of a).
    g2 = found[2]
    assert (g2.trigger.cause, g2.trigger.confidence) == ("member_joined", EXACT)
    assert g2.trigger.who in ("b", "c")
    # gen 3: a saw 8 partitions; the join waited for dead c until its session timed out.
    g3 = found[3]
    assert (g3.trigger.who, g3.trigger.cause, g3.trigger.confidence) == (
        "a",
        "partitions_changed",
        EXACT,
    )
    [wait] = g3.critical_path
    assert (wait.member, wait.why) == ("c", WAIT_DEAD) and 15_000 <= wait.ms <= 20_000
    # What a and b did not consume meanwhile: measured on the lag of their partitions.
    assert {c.member: c.records_basis for c in g3.costs} == {"a": "lag", "b": "lag"}
    assert all((c.records_missed or 0) > 0 for c in g3.costs)
    # c set no heartbeat.interval.ms: its client's default (3 s) sizes the advice.
    [fix] = [a for a in g3.advice if a.setting == "session.timeout.ms"]
    assert fix.value == "9000" and "heartbeat.interval.ms=3000, the client's default" in fix.text
    # gen 4: a and b stopped (SIGTERM): b's LeaveGroup, not the watch seeing c gone.
    g4 = found[4]
    assert (g4.trigger.who, g4.trigger.cause, g4.trigger.confidence) == ("b", "member_left", EXACT)
    # The report's checks: an empty group owning nothing is no violation.
    assert not [v for c in report.checks for v in c.violations]


def test_a_finished_rebalances_diagnosis_is_kept_once_its_events_leave_the_window() -> None:
    from dataclasses import replace

    from kgctl.model.diagnosis import NEEDED_BEFORE_MS, keep_diagnoses

    g3 = diagnosed("dead_member_growth.jsonl")[3]
    poorer = replace(g3, critical_path=(), advice=())  # made from a window missing its beginning
    inside = g3.start_ms - NEEDED_BEFORE_MS  # the window still holds all it needs
    assert keep_diagnoses({3: g3}, [poorer], inside)[3] is poorer  # still the newest word
    later = inside + 1
    assert keep_diagnoses({3: g3}, [poorer], later)[3] is g3  # kept once it is lost
    # One diagnosed before it was stable is not kept: the next one is better.
    unfinished = replace(g3, stable_ms=None)
    assert keep_diagnoses({3: unfinished}, [poorer], later)[3] is poorer


def test_an_unseen_heartbeat_interval_is_measured_on_the_other_members() -> None:
    # kafka-python behind the proxy (no configuration traced), app-c's own heartbeats
    # taken out: the others' interval on the wire (about 1 s) sizes the advice.
    events, _ = parse_lines((DATA / "wire_dead_member_growth.jsonl").read_text().splitlines())
    kept = [
        e for e in events if not (e.type == "HeartbeatTraced" and e.client_id.startswith("app-c"))
    ]
    report = build_report(kept)
    growth = diagnose(report.state, report.events, report.last_ms)[-1]
    [fix] = [a for a in growth.advice if a.setting == "session.timeout.ms"]
    assert "seen between the other members' heartbeats" in fix.text and fix.value == "4000"
    # Below Kafka's default floor the advice says what it risks (issue 25: "advice that
    # does no harm"); 9000 elsewhere in this file says nothing of it.
    assert "below Kafka's default floor (group.min.session.timeout.ms=6000)" in fix.text
    assert "a GC pause or a network blip longer than 4.0s" in fix.text


def test_a_generation_everyone_left_is_timed_by_the_leave_it_began_with() -> None:
    # Read after the fact: the stored records and a's traced LeaveGroup (the generation
    # it made has no member left to trace).
    leave = Event(
        "LeaveGroupSent", 1500, 1500.0, 9, "g", member="a", member_id="a-1", source="member",
        data={"member_id": "a-1", "reason": "kgctl: member stopping (SIGTERM)"},
    )  # fmt: skip
    events = [_stored(1, 1000, ["a-1"]), leave, _stored(2, 1600, [])]
    report = build_report(events)
    last = diagnose(report.state, report.events, report.last_ms)[-1]
    assert (last.trigger.who, last.trigger.cause, last.trigger.confidence) == (
        "a",
        "member_left",
        EXACT,
    )
    assert last.timed and last.start_ms == 1500


@pytest.mark.parametrize(
    "reason, cause",
    [
        ("cached metadata has changed", "partitions_changed"),
        ("subscription has changed", "subscription_changed"),
        ("rebalance enforced by user", "rejoin_requested"),
        ("encountered UNKNOWN_MEMBER_ID from HEARTBEAT response", "generation_reset"),
        # A stale generation: the group moved on without the member (a reaction).
        ("encountered ILLEGAL_GENERATION from OFFSET_COMMIT response", None),
        ("consumer pro-actively leaving the group", "timed_out"),
        ("received assignment does not match the current subscription", "subscription_changed"),
        (
            "rebalance failed since the generation/state was modified by heartbeat thread to "
            "Generation{generationId=-1, memberId='', protocol='null'}/UNJOINED before the "
            "rebalance callback triggered",
            "generation_reset",
        ),
        # Reactions: the member follows a rebalance, or sends a failed join again.
        ("group is already rebalancing", None),
        ("offset commit failed since group is already rebalancing", None),
        ("rebalance failed due to RebalanceInProgressException", None),
        ("rebalance failed due to DisconnectException", None),
        ("need to revoke partitions and re-join", None),
        ("need to re-join with the given member-id: java-app-1", None),
    ],
)
def test_the_java_clients_rejoin_reasons_name_their_causes(reason: str, cause: str | None) -> None:
    """Java's classic consumer's KIP-800 reasons (kgctl's member sends the same words) as
    `kgctl proxy` traced them: each names its cause, or is a reaction that names none."""
    from kgctl.model.events import Event
    from kgctl.model.fold import fold_all
    from kgctl.model.state import GroupState
    from kgctl.model.wire import member_steps

    events, _ = parse_lines((DATA / "dead_member_growth.jsonl").read_text().splitlines())
    events = [e for e in events if e.type != "RejoinRequested"]  # the members say nothing
    group = events[0].group
    state = fold_all(GroupState(group, log_limit=0), events, events[-1].ts_ms)
    g3 = state.generations[2]
    request = {"group": group, "member_id": "java-app-1", "reason": reason}
    traced = member_steps(
        [
            Event("JoinGroupTraced", g3.start_ms - 10, 0.0, 1, group, member="java-app",
                  client_id="java-app", source="wire",
                  data={"request": request, "latency_ms": 0}),
        ]
    )  # fmt: skip
    d = diagnose(state, events + traced, events[-1].ts_ms)[2]
    named = {t.who: t.cause for t in (d.trigger, *d.also)}
    assert named.get("java-app") == cause


def test_a_mixed_group_that_lost_its_last_consumer_protocol_member_is_classic_again() -> None:
    """Recorded: `kgctl chaos run member-kill --group-protocol mixed` (m2 on the consumer
    protocol, m1 and m3 classic eager range). SIGKILL m2: once its session expired the
    broker converted the group back to classic and m3, its classic leader, assigned
    generation 5, moving partitions between the survivors. Said, with its evidence; and
    m2's session timeout is the group's (never sent by a KIP-848 member), not "None"."""
    gens = diagnosed("chaos_mixed_member_kill.jsonl")
    g5 = gens[5]
    assert (g5.trigger.who, g5.trigger.cause) == ("m2", "timed_out")
    [note] = [n for n in g5.notes if "classic protocol" in n]
    assert "m2 was its last member with group.protocol=consumer" in note
    assert "m3 computed this generation's assignment" in note and "(range)" in note
    [detect] = g5.critical_path
    assert "consumer.session.timeout.ms" in detect.detail and "None" not in detect.detail
    assert any("consumer.session.timeout.ms" in a.text for a in g5.advice)
    # Before, the broker assigned (no classic leader): no protocol change to tell.
    assert not [n for d in (gens[2], gens[4]) for n in d.notes if "protocol:" in n]


def test_members_that_report_no_protocol_step_still_name_their_comings_and_goings() -> None:
    """Recorded: `kgctl chaos run migrate-online` (kgctl k1, k2 and Java j1, j2 rolled
    classic → consumer → classic). VerifiableConsumer reports its start, its partitions
    and its stop but no request: its restarts read "unknown" before. Now each rebalance of
    a Java restart names it, inferred and said so; a stop is dated from its close's
    revocation (reported ~200 ms later, after the LeaveGroup)."""
    import gzip

    lines = gzip.decompress((DATA / "chaos_migrate_online.jsonl.gz").read_bytes()).decode()
    events, _ = parse_lines(lines.splitlines())
    report = build_report(events)
    diags = diagnose(report.state, report.events, report.last_ms)
    said = [(d.trigger.who, d.trigger.cause, d.trigger.confidence) for d in diags]
    assert "unknown" not in {cause for _, cause, _ in said}, said
    java = [(who, cause) for who, cause, conf in said if who.startswith("j")]
    # Each Java member restarted twice (onto consumer, then back onto classic).
    for who in ("j1", "j2"):
        assert java.count((who, "member_left")) == 2 and java.count((who, "member_joined")) >= 2
    assert all(conf == INFERRED for who, _, conf in said if who.startswith("j"))
    # kgctl's own members still say it themselves.
    assert all(conf == EXACT for who, _, conf in said if who.startswith("k"))


def test_a_member_restarted_onto_consumer_within_one_rebalance_converts_the_group() -> None:
    """k1 leaves the classic group and starts again with group.protocol=consumer before the
    rebalance is over: it is in both generations (one CI run of migrate-online said no
    protocol change for that step: the detection wanted a member new to the generation
    and read the protocol spoken when the rebalance began)."""
    from kgctl.model.diagnosis.mixed import describe_protocol_change
    from kgctl.model.event_index import EventIndex
    from kgctl.model.state import GenerationRecord

    def started(ts: int, protocol: str) -> Event:
        config = {"group_protocol": protocol}
        return Event("MemberStarted", ts, 0.0, 1, "g", member="k1", data={"config": config})

    def computed(ts: int, generation: int) -> Event:
        data = {"assignor": "range"}
        return Event(
            "AssignmentComputed", ts, 0.0, 1, "g", member="k2", generation=generation, data=data
        )

    prev = GenerationRecord(3, 1_000, stable_ms=1_200, end_ms=5_000, members=("k1", "k2"))
    rec = GenerationRecord(4, 5_000, stable_ms=5_900, members=("k1", "k2"))
    events = EventIndex([started(0, "classic"), computed(1_100, 3), started(5_400, "consumer")])
    said = describe_protocol_change(events, rec, prev)
    assert said.startswith("the group became a consumer-protocol group: k1 joined with")


def test_eager_members_of_a_consumer_protocol_group_are_advised_from_the_brokers_answer() -> None:
    """Recorded migrate-online: while a member speaks group.protocol=consumer the broker
    assigns, so re-running kafka-python's assignor (as for a classic group) was the wrong
    basis; the advice counted revocations of members that no longer spoke classic. Now,
    in those generations, only the eager classic members are counted, from their own
    JoinPrepared (what they held) and JoinCompleted (what the broker gave back)."""
    import gzip

    lines = gzip.decompress((DATA / "chaos_migrate_online.jsonl.gz").read_bytes()).decode()
    events, _ = parse_lines(lines.splitlines())
    report = build_report(events)
    ctx = Context(cooperative=cooperative_sticky)
    diags = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms, ctx)}
    coop = {
        g: a.text for g, d in diags.items() for a in d.advice if a.pattern == "eager-stop-the-world"
    }
    # k1 held 0, 3, 5 and got 0, 3 back; k2 held 4, 6, 7 and got 4, 6 back.
    assert coop[17].startswith("k1, k2 (classic members, eager protocol) gave up all 6")
    assert "back all but 2" in coop[17] and "inferred" in coop[17]
    # Generations 6-13: k1 and k2 spoke consumer; nobody eager is left to advise.
    assert not {g for g in coop if 6 <= g <= 13}
    # Before generation 5 and from 18 on the group is classic (a classic leader
    # assigned): there the assignor is re-run.
    assert "re-run on this generation's members" in coop[19]
    assert not [t for g, t in coop.items() if 5 <= g <= 17 and "re-run" in t]


def test_a_consumer_protocol_member_fenced_and_back_names_the_epoch_its_rejoin_made() -> None:
    """Recorded: `kgctl chaos run fencing-loop` (routine events dropped): m2's heartbeat is
    held past its session twice; each time the broker removes it (epochs 5, 7), m2 hears
    UNKNOWN_MEMBER_ID, loses its partitions and joins again with epoch 0, and the broker
    bumps the group epoch for it (6, then 8). Those epochs read "unknown" before."""
    import gzip

    lines = gzip.decompress((DATA / "chaos_fencing_loop.jsonl.gz").read_bytes()).decode()
    events, _ = parse_lines(lines.splitlines())
    report = build_report(events)
    diags = {d.generation: d for d in diagnose(report.state, report.events, report.last_ms)}
    for epoch in (6, 8):
        t = diags[epoch].trigger
        assert (t.who, t.cause, t.confidence) == ("m2", "member_joined", EXACT), epoch
        assert t.reason == "rejoined after UNKNOWN_MEMBER_ID"
        assert "fenced (UNKNOWN_MEMBER_ID)" in t.evidence
    # The epochs before (5, 7) are the broker removing m2 while its heartbeat was held:
    # the chaos run says it held it, m2 says the broker answered it by fencing.
    for epoch, held in ((5, "first"), (7, "second")):
        t = diags[epoch].trigger
        assert (t.who, t.cause, t.reason, t.confidence) == (
            "m2",
            "timed_out",
            "session timeout",
            EXACT,
        ), epoch
        assert f"fault in force: {held} ConsumerGroupHeartbeat:delay=15000" in t.evidence
        assert "was answered UNKNOWN_MEMBER_ID only at" in t.evidence


def test_an_advice_names_its_setting_as_people_read_it() -> None:
    # A value that is itself a setting, or words, read "group.instance.id=session.timeout..."
    def shown(setting: str, value: str) -> str:
        return Advice(pattern="p", setting=setting, value=value, text="why").shown()

    assert shown("max.poll.records", "17") == "max.poll.records=17"
    assert shown("group.instance.id", "session.timeout.ms=2000") == (
        "group.instance.id and session.timeout.ms=2000"
    )
    assert shown("group.instance.id", "one per process") == "group.instance.id (one per process)"
    assert shown("shutdown", "") == "shutdown"
