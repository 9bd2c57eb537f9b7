"""Pure tests of what kgctl concludes from the proxy's wire trace of clients that report
nothing themselves, on traces `kgctl proxy --trace-topic` recorded in the truth suite
(tests/truth/: librdkafka 2.x consumers on a real broker; each file is one group's
events, the truth in the comments is what those clients' own callbacks said)."""

from __future__ import annotations

import gzip
from dataclasses import replace
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


def test_a_growth_soon_after_a_second_round_is_not_a_third_round() -> None:
    # Three cooperative-sticky members: c3 joined (generation 3), c1 gave up partition 3
    # and rejoined from its SyncGroup answer (.790), sending JoinGroup at .792: generation
    # 4, the second round. The topic grew from 6 to 9 partitions 3 s later and c1 (the
    # leader) rejoined: generation 5, nothing revoked (their callbacks). In a CI run
    # generation 5 read "rejoin_requested by (nobody), inferred": the second round of
    # generation 4, since the wire dated c1's gen-3 answer and its gen-4 JoinGroup in one
    # millisecond, and what it gave up for generation 3 counted as given up in 4. Here
    # that JoinGroup's round trip is made 2 ms longer (sent at .790), as in that run.
    name = "wire_rdkafka-cooperative_growth.jsonl.gz"
    lines = gzip.decompress((DATA / name).read_bytes()).decode().splitlines()
    events = [Event.from_json(line) for line in lines if line.strip()]
    same_ms = []
    for e in events:
        if e.type == "JoinGroupTraced" and e.generation == 4 and e.client_id.endswith("-c1"):
            e = replace(e, data=dict(e.data, latency_ms=float(e.data["latency_ms"]) + 2))
        same_ms.append(e)
    for trace in (events, same_ms):
        found = {
            d.generation: d
            for d in explain(trace[0].group, trace, trace[-1].ts_ms + 1000).generations
        }
        assert found[4].trigger.reason == "second round of generation 3"
        growth = found[5].trigger
        assert (growth.cause, growth.who[-3:]) == ("partitions_changed", "-c1"), growth
        assert "second round" not in growth.evidence
    assert found[4].start_ms == 1796357562790  # the millisecond of c1's gen-3 answer


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


def test_a_rejoin_answered_with_the_same_generation_revoked_but_started_nothing() -> None:
    # kafka-python 3.0.12 on range, kgctl proxy answering c3's heartbeat with an injected
    # REBALANCE_IN_PROGRESS: c3 rejoined, the stable group handed it generation 4 again
    # (no rebalance), then the fault reached the others and generation 5 came. Its own
    # callbacks: c3 revoked its two partitions at each of its two rejoins, 8 in all.
    first = after("wire_kafkapython-range_fault-rip.jsonl.gz", 1796277392596)[0]
    assert "injected REBALANCE_IN_PROGRESS" in first.trigger.reason
    assert first.partitions_revoked == 8
    assert any("fault-rip-kafkapython-range-c3 4 " in n for n in first.notes)
    # Its time without partitions, from each rejoin to the assignment after it: by its
    # callbacks 153 ms in all (c1 332, c2 321); at least what the protocol's steps show.
    costs = {c.member.rsplit("-", 1)[1]: c.unassigned_ms for c in first.costs}
    assert 100 <= costs["c3"] <= 153 and 250 <= costs["c1"] <= 332, costs


def test_a_rejoin_after_the_rebalance_answered_with_its_generation_is_its_revocation() -> None:
    # librdkafka on range, the topic grown from 6 to 9 partitions: c1 (the leader) and c2
    # rejoined as they saw it, c3 at its heartbeat; generation 4 was stable at .265. Then
    # c3's metadata showed the grown topic and it rejoined once more (.367): the broker
    # handed it generation 4 again, and [6, 7, 8] back (.399). Its callbacks: 2 + 2 + 2
    # revoked in the rebalance, then c3 its 3 again: 9; c3 108 ms without partitions. The
    # rebalance's own count was 6, and c3 70 ms, under the load of the suite's full run.
    first = after("wire_rdkafka-range_growth-late-rejoin.jsonl.gz", 1796355628348)[0]
    assert first.generation == 4 and first.partitions_revoked == 9
    assert not first.revoked_at_least
    assert any("growth-rdkafka-range-c3 3" in n for n in first.notes)
    costs = {c.member.rsplit("-", 1)[1]: c.unassigned_ms for c in first.costs}
    assert 95 <= costs["c3"] <= 108, costs
    # The same rejoin before the group was stable: c1's and c2's SyncGroup answers moved
    # 150 ms later, after c3's second one.
    lines = gzip.decompress((DATA / "wire_rdkafka-range_growth-late-rejoin.jsonl.gz").read_bytes())
    events = []
    for line in lines.decode().splitlines():
        e = Event.from_json(line)
        if e.type == "SyncGroupTraced" and e.generation == 4 and e.client_id[-3:] in ("-c1", "-c2"):
            late = dict(e.data, latency_ms=float(e.data["latency_ms"]) + 150)
            e = replace(e, ts_ms=e.ts_ms + 150, data=late)
        events.append(e)
    events.sort(key=lambda e: e.ts_ms)
    found = explain(events[0].group, events, events[-1].ts_ms).generations
    gen4 = next(d for d in found if d.generation == 4)
    assert gen4.stable_ms is not None and gen4.stable_ms > 1796355629399  # c3's answer
    assert gen4.partitions_revoked == 9
    costs = {c.member.rsplit("-", 1)[1]: c.unassigned_ms for c in gen4.costs}
    assert 95 <= costs["c3"] <= 108, costs


def test_each_member_of_a_growth_that_joined_twice_has_its_time_without_partitions() -> None:
    # librdkafka on range, the topic grown from 6 to 9 partitions: c2 rejoined first and
    # the stable group handed it generation 3 back, but c1 (the leader) rejoined too and
    # c2's SyncGroup was refused (REBALANCE_IN_PROGRESS): it joined again for generation
    # 4. c3, answered generation 4, saw the grown topic and sent JoinGroup once more
    # before its SyncGroup. Its callbacks: c1 980 ms, c2 971 ms and c3 715 ms without
    # partitions, 6 revoked. Before bee097e an eager member with two JoinGroups in the
    # rebalance had no time at all (c2 and c3 0 ms: the suite's "c2 0 ms, truth 720 ms").
    first = after("wire_rdkafka-range_growth-two-joins.jsonl.gz", 1796354884637)[0]
    assert (first.generation, first.partitions_revoked) == (4, 6)
    costs = {c.member.rsplit("-", 1)[1]: c.unassigned_ms for c in first.costs}
    assert 900 <= costs["c2"] <= 971 and 650 <= costs["c3"] <= 715, costs
    assert all(c.unassigned_basis == "wire" for c in first.costs)


def test_a_rejoin_answered_within_its_millisecond_gave_its_partitions_back() -> None:
    # librdkafka on range, the proxy answering c3's heartbeat REBALANCE_IN_PROGRESS: c3
    # rejoined, the stable group handed it generation 3 again and its SyncGroup gave
    # [4, 5] back, all at .491 (the proxy's answers took 0.4 and 0.3 ms); it revoked them
    # once more at its heartbeat at .994 for generation 4. Its callbacks: c1 2, c2 2, c3
    # 2 + 2 = 8; the answer within the rejoin's millisecond was missed (6).
    first = after("wire_rdkafka-range_fault-rip-same-ms.jsonl.gz", 1796356150183)[0]
    assert (first.generation, first.partitions_revoked) == (4, 8)
    assert any("fault-rip-rdkafka-range-c3 4 " in n for n in first.notes)


def test_a_rejoin_right_after_a_rebalance_is_not_the_next_ones() -> None:
    # kafka-python's c2 sent JoinGroup again right after generation 3 formed (a join it
    # finished outside poll()) and got generation 3 back: it revoked its 2 partitions
    # then, seven seconds before c3 stalled past max.poll.interval.ms (generation 4). Those
    # 2 are generation 3's aftermath; generation 4 took c1's 2 and c2's 2.
    found = explained("wire_kafkapython-range_max-poll.jsonl.gz").generations
    by = {d.generation: d for d in found}
    assert (by[3].partitions_revoked, by[4].partitions_revoked) == (8, 4)


def test_a_redundant_rejoin_long_before_is_not_the_trigger() -> None:
    # kafka-python sent JoinGroup again right after generation 3 formed (it finished that
    # join outside poll()); the broker answered generation 3: no rebalance. Seven seconds
    # later c3 stalled past max.poll.interval.ms and left (its own callbacks, the test's
    # stall): that is what began generation 4.
    first = after("wire_kafkapython-range_max-poll.jsonl.gz", 1796277389954)[0]
    assert (first.trigger.cause, first.trigger.who) == (
        "timed_out",
        "max-poll-kafkapython-range-c3",
    )


def test_a_held_sync_is_seen_when_the_second_round_began_before_the_last_answer() -> None:
    # cooperative-sticky librdkafka, a third member joins (generation 4) and kgctl proxy
    # holds every SyncGroup of that round 1.5 s. c1 had its answer first and joined again
    # for the second round 4 ms before c2's answer came back. Under a full run's load that
    # order flips: c2's answer, moved here 10 ms later, arrives after generation 5 began,
    # so generation 4 is never stable; its held sync was then missed (CI: "wait unknown").
    lines = gzip.decompress((DATA / "wire_rdkafka-cooperative_sync-held.jsonl.gz").read_bytes())
    events = []
    for line in lines.decode().splitlines():
        e = Event.from_json(line)
        if e.type == "SyncGroupTraced" and e.client_id.endswith("-c2") and e.generation == 4:
            late = dict(e.data, latency_ms=float(e.data["latency_ms"]) + 10)
            e = replace(e, ts_ms=e.ts_ms + 10, data=late)
        events.append(e)
    for moved in (False, True):
        picked = events if moved else [Event.from_json(x) for x in lines.decode().splitlines()]
        found = explain(picked[0].group, picked, picked[-1].ts_ms + 1000).generations
        gen4 = next(d for d in found if d.generation == 4)
        held = [w for w in gen4.critical_path if w.phase == "sync"]
        assert [(w.why, w.ms) for w in held] == [("held", 1500)], moved


# -- consumer-protocol (KIP-848) groups known only from the wire ----------------------------


def test_a_consumer_group_known_only_from_the_wire_has_its_epochs() -> None:
    """librdkafka with group.protocol=consumer: three members, one SIGKILLed; the broker's
    session for consumer groups is 10 s. Its epochs are the generations, and the dead
    member's removal is read from the broker giving its partitions to the others."""
    epochs = after("wire_rdkafka-consumer_kill.jsonl.gz", 1796176934581)
    assert epochs, "the epochs the heartbeats carry are rebalances"
    dead = epochs[0]
    assert dead.group_epoch
    assert (dead.trigger.cause, dead.trigger.confidence) == ("timed_out", "inferred")
    assert dead.trigger.who.endswith("-c3")
    [wait] = dead.critical_path
    assert (wait.phase, wait.why) == ("detect", "dead") and wait.member.endswith("-c3")
    assert 9_000 <= wait.ms <= 11_000  # the session, from its last heartbeat
    assert (dead.partitions_moved, dead.partitions_revoked) == (2, 0)  # its 2 went elsewhere


def test_a_consumer_groups_join_leave_and_revocations_from_the_wire() -> None:
    # A third member joins (member epoch 0): the two give up 2 partitions for it.
    joined = after("wire_rdkafka-consumer_scale-out.jsonl.gz", 1796176934593)[0]
    assert (joined.trigger.cause, joined.trigger.confidence) == ("member_joined", EXACT)
    assert joined.trigger.who.endswith("-c3")
    assert "member epoch 0" in joined.trigger.evidence
    assert (joined.partitions_revoked, joined.partitions_moved) == (2, 2)
    # A member stops: its leave heartbeat (member epoch -1) is its LeaveGroup.
    left = after("wire_rdkafka-consumer_stop.jsonl.gz", 1796176934593)[0]
    assert (left.trigger.cause, left.trigger.confidence) == ("member_left", EXACT)
    assert left.trigger.who.endswith("-c3") and "member epoch -1" in left.trigger.reason


def test_a_consumer_member_that_left_and_came_back_is_read_as_its_poll_timeout() -> None:
    # One member stops polling past max.poll.interval.ms: librdkafka leaves the group
    # and joins again, with the same member id, at its next poll.
    left, back = after("wire_rdkafka-consumer_max-poll.jsonl.gz", 1796176934594)[:2]
    assert (left.trigger.cause, left.trigger.confidence) == ("timed_out", "inferred")
    assert "max.poll.interval.ms" in left.trigger.evidence
    # its join, answered the epoch of its leave, is what bumped the next one
    assert (back.trigger.cause, back.trigger.who) == ("member_joined", left.trigger.who)


def test_a_consumer_groups_partitions_are_named_by_the_one_topic_subscribed() -> None:
    state = explained("wire_rdkafka-consumer_growth.jsonl.gz").state
    topics = {t for m in state.members.values() for t in m.partitions} | {
        t for (t, _p) in state.ownership
    }
    assert topics and all(t.startswith("truth-growth-") for t in topics), topics


def test_the_live_watch_reads_the_trace_as_explain_does() -> None:
    """The watch folds the trace one event at a time: a consumer member's revocations
    need what it said before, so the watch keeps one reader of the trace."""
    from kgctl.model.wire import WireSteps, member_steps

    lines = gzip.decompress((DATA / "wire_rdkafka-consumer_scale-out.jsonl.gz").read_bytes())
    events = [Event.from_json(line) for line in lines.decode().splitlines() if line.strip()]
    wire = WireSteps()
    one_by_one = [s for e in events for s in (e, *wire.steps(e))]
    assert one_by_one == member_steps(events)
    assert sum(e.type == "PartitionsRevoked" for e in one_by_one) >= 2


def test_a_second_rounds_row_in_a_narrow_live_view_says_it_is_one() -> None:
    # Tried by hand in a 110-column terminal: the row of a second round read
    # "subscription changed (inferred)", as if the subscription had changed twice;
    # explain said it was the second round of the generation before.
    import io

    from rich.console import Console

    from kgctl.render.group_view import render_generations

    x = explained("wire_rdkafka-cooperative_scale-out.jsonl.gz")
    found = {d.generation: d for d in x.generations}
    out = io.StringIO()
    Console(file=out, width=110, color_system=None).print(
        render_generations(x.state, x.now_ms, 110, 10, found)
    )
    [row] = [line for line in out.getvalue().splitlines() if line.strip().startswith("4 ")]
    assert "(second round of generation 3)" in row


def test_a_new_members_retried_join_is_not_the_next_rounds_trigger() -> None:
    # Two cooperative-sticky members; the proxy answers a third one's first JoinGroup
    # NOT_COORDINATOR; it finds the coordinator again and joins (MEMBER_ID_REQUIRED, then
    # generation 4 at .501, SyncGroup answered at .532); the second round is generation 5.
    # In one CI-like run generation 4's SyncGroup answers were not in the trace (its end
    # unknown), and the retried join without a member id, inside generation 4's rebalance,
    # read as generation 5's trigger: "member_joined by c3 (exact)". Here those answers
    # are taken out of the recorded trace to make that run again.
    name = "wire_rdkafka-cooperative_join-not-coord.jsonl.gz"
    lines = gzip.decompress((DATA / name).read_bytes()).decode().splitlines()
    events = [Event.from_json(line) for line in lines if line.strip()]
    g4_synced = 1796356885532
    cut = [e for e in events if not (e.type == "SyncGroupTraced" and e.ts_ms == g4_synced)]
    for trace in (events, cut):
        found = {
            d.generation: d
            for d in explain(trace[0].group, trace, trace[-1].ts_ms + 1000).generations
        }
        assert found[4].trigger.who.endswith("-c3") and found[4].trigger.confidence == EXACT
        second = found[5].trigger
        # The second round, or an honest unknown where the first round's end is missing;
        # never c3's join again.
        assert not (second.cause == "member_joined" and second.who.endswith("-c3")), second
        assert second.cause == "unknown" or "second round" in second.reason


def test_a_poll_timeout_read_from_a_leave_and_a_new_join_is_advised_as_inferred() -> None:
    # Three range members with max.poll.interval.ms=4000; c3 stalls 8 s: librdkafka
    # leaves without a reason (LeaveGroup v4 has none) and joins again with a new member
    # id at its next poll. The audit's defect 5: such a member "gets no wait and no
    # advice". The trigger was already read as the poll timeout (inferred); its advice
    # names the interval the client's JoinGroup carried and says it is inferred.
    x = explained("wire_rdkafka-range_max-poll.jsonl.gz")
    [d] = [d for d in x.generations if d.trigger.cause == "timed_out"]
    assert d.trigger.who.endswith("-c3")
    [a] = [a for a in d.advice if a.pattern == "max-poll-interval"]
    assert a.setting == "max.poll.interval.ms"
    assert "max.poll.interval.ms=4000" in a.text and "inferred" in a.text
    # No processing was traced: nothing is measured or proposed as a number.
    assert a.value == ""


def test_a_mixed_groups_classic_generations_are_not_called_epochs() -> None:
    # Two range members (generations 1 and 2, by JoinGroup); a third joins with
    # group.protocol=consumer and Kafka makes the group a consumer group (epoch 3). The
    # audit's defect 2: explain, told by the broker that the group is a consumer group
    # now, labelled every generation an epoch, "group epoch 1 (consumer protocol): no join
    # barrier", the classic ones before the upgrade too.
    from kgctl.model.snapshot import GroupSnapshot
    from kgctl.observe.infer import Inferrer

    name = "wire_rdkafka-range_mixed-join.jsonl.gz"
    lines = gzip.decompress((DATA / name).read_bytes()).decode().splitlines()
    events = [Event.from_json(line) for line in lines if line.strip()]
    group = events[0].group
    now = GroupSnapshot(group=group, state="Stable", group_type="consumer", group_epoch=3)
    described = Inferrer(group).observe(now, events[-1].ts_ms + 500)
    events += [e for e in described if e.type == "GroupObserved"]
    found = {d.generation: d for d in explain(group, events, events[-1].ts_ms + 1000).generations}
    assert [found[n].label for n in (1, 2, 3)] == [
        "generation 1",
        "generation 2",
        "group epoch 3",
    ]
    assert not any("no join barrier" in n for n in found[1].notes + found[2].notes)
    # And the change is said where it happened, from the clients' own requests (c3's
    # ConsumerGroupHeartbeat, the others' JoinGroups): the audit's "no protocol change
    # noted".
    change = found[3].protocol_change
    assert "became a consumer-protocol group" in change and "mixed-join-rdkafka-range-c3" in change
    assert not found[2].protocol_change


def test_cooperative_members_that_kept_partitions_are_not_said_without() -> None:
    # The audit's defect 6: in the live view's "no partitions" column, a cooperative
    # member that kept its partitions through the rebalance read as without them ("c3
    # 1.1s" where c3 held [4,5] throughout). Two cooperative-sticky members; a third
    # joins: c1 and c2 each give up one partition and keep the rest.
    import io

    from rich.console import Console

    from kgctl.render.group_view import render_generations

    x = explained("wire_rdkafka-cooperative_scale-out.jsonl.gz")
    found = {d.generation: d for d in x.generations}
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(
        render_generations(x.state, x.now_ms, 200, 10, found)
    )
    rows = {
        line.split()[0]: line for line in out.getvalue().splitlines() if line[:5].strip().isdigit()
    }
    for gen in ("3", "4"):  # the join and its second round
        cell = rows[gen].rsplit("  ", 1)[-1]
        assert "cooperative-c1" not in cell and "cooperative-c2" not in cell, rows[gen]
    # explain says the same: only the joiner went without partitions.
    assert {c.member[-2:] for d in (found[3], found[4]) for c in d.costs} == {"c3"}


def test_a_join_the_broker_refused_is_not_the_trigger() -> None:
    # Three range members through kgctl proxy with `SyncGroup:hang` on c1's third
    # SyncGroup (the audit's hung SyncGroup, by hand on 12-04): c1 goes silent, the broker
    # removes it at its 10 s session; c1 then sends JoinGroup with its old member id
    # (answered UNKNOWN_MEMBER_ID: it started nothing) and at once without one (the join
    # that did). Before: "c1: rejoin requested (a member rejoined on its own)".
    found = {
        d.generation: d for d in explained("wire_rdkafka-range_sync-hang.jsonl.gz").generations
    }
    joined = found[5].trigger
    assert (joined.cause, joined.who, joined.confidence) == ("member_joined", "c1", EXACT)
    assert not any(t.cause == "rejoin_requested" for t in found[5].also)


def test_a_member_the_proxy_left_unanswered_is_not_advised_as_a_dead_one() -> None:
    # The same run: kgctl proxy's `SyncGroup:hang` left c1's SyncGroup unanswered, and
    # every answer after it on that connection (its heartbeats'): the broker removed it at
    # its 10 s session (its log's line below). Before: the wait named no cause and the
    # advice was a dead member's ("stop c1 gracefully", a shorter session.timeout.ms),
    # blaming a member the fault had silenced.
    from kgctl.model.diagnosis import FAILED, BrokerReason, Context

    name = "wire_rdkafka-range_sync-hang.jsonl.gz"
    lines = gzip.decompress((DATA / name).read_bytes()).decode().splitlines()
    events = [Event.from_json(line) for line in lines if line.strip()]
    group = events[0].group
    removed = BrokerReason(
        1796359523807,
        group,
        "member c1-90add341-d7ec-4cb4-baa7-9fca223b3e37 has failed (session timeout), removed",
        kind=FAILED,
    )
    x = explain(group, events, events[-1].ts_ms + 1000, Context(broker_reasons=(removed,)))
    d = {g.generation: g for g in x.generations}[4]
    assert (d.trigger.cause, d.trigger.who) == ("timed_out", "c1")
    [wait] = d.critical_path
    assert "kgctl proxy" in wait.detail and "SyncGroup:hang" in wait.detail
    assert not any(a.pattern == "dead-member-held-join" for a in d.advice)


def test_a_second_round_begun_in_the_first_rounds_last_millisecond_counts_nothing_twice() -> None:
    # Cooperative librdkafka: c3 came back after its poll stall (generation 5). c1 got its
    # generation-5 assignment at .124, gave partition 2 up and joined again at .130 (the
    # second round, generation 6); the proxy dated c2's generation-5 answer (partition 0
    # given up) .130 too. Their callbacks: c1 1, c2 1 revoked, both in generation 5's
    # round; the second round only hands them out.
    found = explained("wire_rdkafka-cooperative_max-poll-same-ms.jsonl.gz").generations
    by = {d.generation: d for d in found}
    assert (by[5].partitions_revoked, by[6].partitions_revoked) == (2, 0)
    assert by[6].trigger.reason == "second round of generation 5"
