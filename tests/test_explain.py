"""Pure tests of `kgctl explain`: the broker log reader, the explanation's health and
order, and the command on recordings (no broker)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kgctl.cli.app import app
from kgctl.cli.explain import parse_duration
from kgctl.errors import ExitStatus
from kgctl.model.diagnosis import FAILED, PREPARING, Context, diagnose
from kgctl.model.events import Event
from kgctl.model.explanation import explain
from kgctl.observe.broker_log import parse_broker_log
from kgctl.report.summary import parse_lines

DATA = Path(__file__).parent / "data"
runner = CliRunner()

# Lines in the shape a Kafka 4.x coordinator logs them (log4j `[%d] %p %m (%c)`).
LOG = """\
[2026-11-30 09:01:17,791] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] \
Preparing to rebalance group g1 in state PreparingRebalance with old generation 2 (reason: \
Leader app-1-8f0c1d2e-1111-2222-3333-444455556666 re-joining group during Stable; client \
reason: need to revoke partitions and re-join). \
(org.apache.kafka.coordinator.group.GroupMetadataManager)
[2026-11-30 09:01:18,000] INFO [GroupCoordinator id=1] Preparing to rebalance group other in \
state PreparingRebalance with old generation 0 (reason: x). \
(org.apache.kafka.coordinator.group.GroupMetadataManager)
[2026-11-30 09:01:23,064] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] \
Member app-2-8f0c1d2e-1111-2222-3333-444455556666 in group g1 has failed, removing it from \
the group. (org.apache.kafka.coordinator.group.GroupMetadataManager)
[2026-11-30 09:01:24,100] INFO [Broker id=1] something else entirely
"""


def test_broker_log_lines_give_the_reason_the_time_and_removed_members() -> None:
    found = parse_broker_log(LOG.splitlines(), "g1")
    assert [(r.kind, r.generation) for r in found] == [(PREPARING, 2), (FAILED, -1)]
    prep, failed = found
    assert prep.ts_ms % 86_400_000 == ((9 * 60 + 1) * 60 + 17) * 1000 + 791  # read as UTC
    assert prep.reason.endswith("client reason: need to revoke partitions and re-join")
    assert "app-2-8f0c1d2e" in failed.reason
    assert len(parse_broker_log(LOG.splitlines())) == 3  # every group when none is named


def test_durations() -> None:
    assert parse_duration("90s") == 90_000
    assert parse_duration("15m") == 900_000
    assert parse_duration("1.5h") == 5_400_000
    assert parse_duration("500ms") == 500


def events_of(name: str) -> list:  # type: ignore[type-arg]
    events, _ = parse_lines((DATA / name).read_text().splitlines())
    return events


def test_explanation_is_newest_first_and_cut_by_last() -> None:
    events = events_of("dead_member_growth.jsonl")
    group = events[0].group
    last_ms = max(e.ts_ms for e in events)
    x = explain(group, events, last_ms, Context(), last=2)
    assert [d.generation for d in x.generations] == [3, 2]
    assert x.total == 3
    # Every member stopped at the end of the recording: nobody consumes.
    assert not x.healthy and "no live member" in x.health
    doc = x.to_dict()
    assert doc["generations"][0]["trigger"]["cause"] == "partitions_changed"
    assert doc["generations"][0]["critical_path"][0]["member"] == "c"


def test_a_group_that_ends_stable_is_healthy() -> None:
    # The slow-member run up to its last completed join, before the members were stopped.
    events = events_of("slow_member.jsonl")
    done = max(i for i, e in enumerate(events) if e.type == "JoinCompleted")
    events = events[: done + 1]
    group = events[0].group
    x = explain(group, events, max(e.ts_ms for e in events))
    assert x.healthy, x.health


def test_explain_command_on_a_recording_prints_one_json_document_and_exits_unhealthy() -> None:
    path = DATA / "dead_member_growth.jsonl"
    group = events_of(path.name)[0].group
    result = runner.invoke(app, ["explain", group, "--recording", str(path), "-o", "json"])
    assert result.exit_code == ExitStatus.UNHEALTHY, result.output
    doc = json.loads(result.stdout)  # one document, nothing else on stdout
    assert [g["generation"] for g in doc["generations"]] == [3, 2, 1]
    g3 = doc["generations"][0]
    assert g3["trigger"]["who"] == "a" and g3["trigger"]["confidence"] == "exact"
    coop = [a for a in g3["advice"] if a["pattern"] == "eager-stop-the-world"]
    assert coop and "would have revoked 0" in coop[0]["text"]


def test_explain_command_text_names_trigger_wait_and_advice() -> None:
    path = DATA / "dead_member_growth.jsonl"
    group = events_of(path.name)[0].group
    result = runner.invoke(
        app, ["explain", group, "--recording", str(path), "--last", "1"], env={"COLUMNS": "100"}
    )
    out = result.stdout
    assert "generation 3" in out and "generation 2" not in out
    assert "partitions changed" in out
    assert "join waited 5.4s for c" in out
    assert "session.timeout.ms=3000" in out


def test_explain_bad_since_is_a_usage_error() -> None:
    path = DATA / "dead_member_growth.jsonl"
    result = runner.invoke(app, ["explain", "g", "--recording", str(path), "--since", "soon"])
    assert result.exit_code == ExitStatus.USAGE
    assert "not a duration" in result.stderr and "Traceback" not in result.output


def test_explain_unknown_group_in_a_recording_says_what_to_do() -> None:
    path = DATA / "dead_member_growth.jsonl"
    result = runner.invoke(app, ["explain", "nope", "--recording", str(path)])
    assert result.exit_code == ExitStatus.USAGE
    groups = sorted({e.group for e in events_of("dead_member_growth.jsonl")})
    assert groups and "nope" not in groups
    said = result.stderr.strip()
    assert said.startswith("kgctl: error: nothing known about group 'nope'")
    assert f"(the recording holds {', '.join(groups)})" in said
    assert len(said.splitlines()) == 1 and "Traceback" not in result.output


def test_a_chaos_runs_own_events_do_not_make_another_group_known() -> None:
    # kgctl chaos's events name the group they acted on: with a mistyped group, explain
    # said "group nope unhealthy: no live member" (exit 12) from them alone.
    path = DATA / "chaos_member_kill.jsonl"
    [run_group] = {e.group for e in events_of("chaos_member_kill.jsonl") if e.source == "chaos"}
    wrong = runner.invoke(app, ["explain", "nope", "--recording", str(path), "--offline"])
    assert wrong.exit_code == ExitStatus.USAGE, wrong.output
    assert f"nothing known about group 'nope' (the recording holds {run_group}" in wrong.stderr
    right = runner.invoke(app, ["explain", run_group, "--recording", str(path), "--offline"])
    assert right.exit_code in (ExitStatus.OK, ExitStatus.UNHEALTHY), right.output
    assert "killed" in right.stdout or "SIGKILL" in right.stdout


def test_broker_log_reasons_feed_the_diagnosis_of_untraced_generations() -> None:
    # The recording's events without the members' own words: only the broker log speaks.
    events = [e for e in events_of("dead_member_growth.jsonl") if e.type != "RejoinRequested"]
    group = events[0].group
    from kgctl.model.fold import fold_all
    from kgctl.model.state import GroupState

    state = fold_all(GroupState(group, log_limit=0), events, events[-1].ts_ms)
    g3 = state.generations[2]
    line = f"[{_log_time(g3.start_ms)}] INFO Preparing to rebalance group {group} in state "
    line += "PreparingRebalance with old generation 2 (reason: Leader x re-joining group "
    line += "during Stable; client reason: kgctl: metadata_changed). (org.apache.kafka.X)"
    reasons = tuple(parse_broker_log([line], group))
    d = diagnose(state, events, events[-1].ts_ms, Context(broker_reasons=reasons))[2]
    assert d.trigger.cause == "partitions_changed" and d.trigger.confidence == "exact"
    assert d.trigger.reason == "kgctl: metadata_changed"


def _log_time(ms: int) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f",{ms % 1000:03d}"


def test_watch_once_json_is_one_document_with_each_generations_diagnosis() -> None:
    path = DATA / "dead_member_growth.jsonl"
    group = events_of(path.name)[0].group
    base = ["watch", group, "--replay", str(path), "--once", "-o", "json"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["group"] == group and doc["state"]["generation"] == 3
    g3 = doc["generations"][0]
    assert g3["trigger"]["cause"] == "partitions_changed"
    assert g3["critical_path"][0]["member"] == "c"
    # The event stream is still there, behind --events.
    lines = runner.invoke(app, [*base, "--events"]).stdout.splitlines()
    assert len(lines) == len(events_of(path.name))
    assert {json.loads(line)["type"] for line in lines} >= {"JoinGroupSent", "JoinCompleted"}


def test_watch_generations_table_shows_trigger_and_critical_path() -> None:
    from rich.console import Console

    from kgctl.model.fold import fold_all
    from kgctl.model.state import GroupState
    from kgctl.render.group_view import diagnoses_of, render_generations

    events = sorted(events_of("dead_member_growth.jsonl"), key=lambda e: e.ts_ms)
    s = fold_all(GroupState(events[0].group), events, events[-1].ts_ms)
    console = Console(width=160, record=True)
    console.print(
        render_generations(s, events[-1].ts_ms, 160, 3, diagnoses_of(s, events[-1].ts_ms))
    )
    text = console.export_text()
    assert "a: partitions changed (metadata_changed); join waited 5.4s for c (dead)" in text


def test_report_carries_the_diagnosis_in_json_text_and_html(tmp_path: Path) -> None:
    import re

    from kgctl.render.html_report import CHAR_W

    path = DATA / "dead_member_growth.jsonl"
    doc = json.loads(runner.invoke(app, ["report", str(path), "-o", "json"]).stdout)
    d3 = doc["rebalances"][2]["diagnosis"]
    assert d3["trigger"]["who"] == "a" and d3["critical_path"][0]["member"] == "c"
    text = runner.invoke(app, ["report", str(path)], env={"COLUMNS": "120"}).stdout
    assert "why, rebalance by rebalance" in text and "join waited 5.4s for c" in text
    html_path = tmp_path / "r.html"
    runner.invoke(app, ["report", str(path), "--html", str(html_path)])
    html = html_path.read_text()
    # The timeline marks the member generation 3 waited for.
    assert re.search(r'class="waited-for" data-member="c" data-generation="3"', html)
    # Generation labels on one line do not overlap (gen 1 and 2 began 1.3 s apart).
    labels = re.findall(r'<text class="gen-label" x="([\d.]+)" y="(\d+)"[^>]*>([^<]*)<', html)
    assert len(labels) == 3
    by_line: dict[str, list[tuple[float, float]]] = {}
    for x, y, words in labels:
        by_line.setdefault(y, []).append((float(x), float(x) + len(words) * CHAR_W))
    assert len(by_line) > 1
    for spans in by_line.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_a_client_that_gives_no_reason_is_told_in_the_brokers_words() -> None:
    events = [e for e in events_of("dead_member_growth.jsonl") if e.type != "RejoinRequested"]
    group = events[0].group
    from kgctl.model.fold import fold_all
    from kgctl.model.state import GroupState

    state = fold_all(GroupState(group, log_limit=0), events, events[-1].ts_ms)
    g3 = state.generations[2]
    member_id = state.members["a"].member_id
    line = f"[{_log_time(g3.start_ms)}] INFO Preparing to rebalance group {group} in state "
    line += f"PreparingRebalance with old generation 2 (reason: Leader {member_id} re-joining "
    line += "group during Stable; client reason: not provided). (org.apache.kafka.X)"
    reasons = tuple(parse_broker_log([line], group))
    trig = diagnose(state, events, events[-1].ts_ms, Context(broker_reasons=reasons))[2].trigger
    # The broker's words say who rejoined, not why: the growth the assignments show
    # (4 -> 8 partitions) is why, inferred (issue 25: it read 'rejoin requested', exact).
    assert trig.who == "a" and trig.reason == "Leader re-joining group during Stable"
    assert (trig.cause, trig.confidence) == ("partitions_changed", "inferred")


def test_since_on_a_recording_counts_back_from_its_end() -> None:
    path = DATA / "dead_member_growth.jsonl"
    group = events_of(path.name)[0].group
    # Generation 3 was stable 0.9 s before the recording ends; generation 2, 6.9 s before.
    args = ["explain", group, "--recording", str(path), "-o", "json", "--since", "3s"]
    doc = json.loads(runner.invoke(app, args).stdout)
    assert [g["generation"] for g in doc["generations"]] == [3]


def test_plain_clients_behind_the_proxy_are_explained_from_the_wire() -> None:
    """kafka-python consumers (no KIP-800 reason, no kgctl member) behind `kgctl proxy`:
    app-c SIGKILLed, the topic grown 4 → 8 (tests/recorder.py wire_dead_member_growth)."""
    path = DATA / "wire_dead_member_growth.jsonl"
    group = next(e.group for e in events_of(path.name) if e.group)
    doc = json.loads(
        runner.invoke(app, ["explain", group, "--recording", str(path), "-o", "json"]).stdout
    )
    growth = doc["generations"][0]
    # The leader rejoined on its own: the wire shows it, the client gave no reason; the
    # assignments show the growth that made it rejoin, inferred (issue 25: it read
    # 'rejoin requested', exact).
    assert growth["trigger"]["who"] == "app-a" and growth["trigger"]["confidence"] == "inferred"
    assert growth["trigger"]["cause"] == "partitions_changed"
    assert "the leader" in growth["trigger"]["reason"]
    assert "4 partitions assigned up to generation 4 and 8" in growth["trigger"]["evidence"]
    [wait] = growth["critical_path"]
    assert (wait["member"], wait["why"], wait["session_timeout_ms"]) == ("app-c", "dead", 6000)
    # Its heartbeat interval was not traced: measured on the wire (about 1 s), x 3.
    fix = [a for a in growth["advice"] if a["setting"] == "session.timeout.ms"]
    assert fix and fix[0]["value"] == "4000" and "seen between heartbeats" in fix[0]["text"]


def test_a_rebalance_begins_when_the_broker_began_it_not_when_the_wire_learnt_of_it() -> None:
    """librdkafka members behind `kgctl proxy`, kp3 SIGKILLed (session 10 s, heartbeats
    every 3 s; h2's by-hand run, /work/wt/h2-by-hand.md A1). The broker removed kp3 and
    began the rebalance at 07:38:36.255; the survivors' heartbeats learnt of it 1.6 s
    later. explain said "began 07:38:37.884 took 61ms" next to the broker line it quoted."""
    recording, log = DATA / "rdkafka_wire_kill.jsonl.gz", DATA / "rdkafka_wire_kill.server.log"
    args = ["explain", "g-kill-proxy", "--recording", str(recording), "--broker-log", str(log)]
    doc = json.loads(runner.invoke(app, [*args, "--offline", "-o", "json"]).stdout)
    kill = doc["generations"][0]
    assert kill["generation"] == 4 and kill["trigger"]["who"] == "kp3"
    # 07:38:36.255 and 07:38:37.928 (the broker's Preparing and Stabilized lines), UTC.
    assert kill["start_ms"] == 1796197116255
    assert kill["stable_ms"] - kill["start_ms"] > 1500


def _injected(ts: int, error: str) -> Event:
    return Event(
        "FaultInjected", ts, float(ts), 1, "g", member="c3", source="wire",
        data={"api": "ConsumerGroupHeartbeat", "effect": "error", "error": error,
              "rule": "r1", "text": f"ConsumerGroupHeartbeat:error={error}:count=1"},
    )  # fmt: skip


def test_an_injected_fence_no_rebalance_followed_is_said() -> None:
    # The truth suite's fault-fenced: the proxy answered a consumer-protocol member's
    # heartbeat FENCED_MEMBER_EPOCH itself; the broker, which never heard of it, answered
    # the member's rejoin at the same group epoch: no rebalance, and kgctl said nothing.
    doc = explain("g", [_injected(10_000, "FENCED_MEMBER_EPOCH")], 20_000)
    [note] = [n for n in doc.notes if "FENCED_MEMBER_EPOCH" in n]
    assert "c3's ConsumerGroupHeartbeat" in note and "no rebalance began within 5s" in note


def test_an_injected_error_a_rebalance_followed_is_no_note() -> None:
    events, _ = parse_lines((DATA / "wire_dead_member_growth.jsonl").read_text().splitlines())
    group = next(e.group for e in events if e.group)
    events = [e for e in events if e.group == group]
    now = max(e.ts_ms for e in events)
    began = explain(group, events, now).generations[0].start_ms
    fault = replace(_injected(began - 50, "REBALANCE_IN_PROGRESS"), group=group)
    doc = explain(group, [*events, fault], now)
    assert doc.generations[0].trigger.reason == "kgctl proxy injected REBALANCE_IN_PROGRESS"
    assert not [n for n in doc.notes if "injected" in n]


def test_a_json_line_that_is_not_an_object_is_not_an_event() -> None:
    # Random bytes hold such lines now and then (a run of digits): a usage error, not a crash.
    events, skipped = parse_lines(["5", '"text"', "[1, 2]"])
    assert events == [] and len(skipped) == 3
    assert all("not an event object" in s for s in skipped)


def test_a_consumer_protocol_group_is_told_in_epochs_and_diagnosed_without_unknowns() -> None:
    from helpers import cmember, csnap, infer

    # KIP-848: m-3 joins two members at group epoch 5; the coordinator reconciles each.
    events = infer(
        csnap("Stable", 4, cmember("m-1", 4, [0, 1]), cmember("m-2", 4, [2, 3])),
        csnap("Reconciling", 5, cmember("m-1", 5, [0], [0]), cmember("m-2", 4, [2, 3], [2]),
              cmember("m-3", 5, [], [1, 3]), assigned=5),
        csnap("Stable", 5, cmember("m-1", 5, [0]), cmember("m-2", 5, [2]),
              cmember("m-3", 5, [1, 3])),
    )  # fmt: skip
    x = explain(events[0].group, events, events[-1].ts_ms, live=True)
    assert x.healthy and x.health == "stable now, 3 members in group epoch 5"
    [epoch5] = [d for d in x.generations if d.generation == 5]
    assert (epoch5.trigger.cause, epoch5.trigger.who) == ("member_joined", "c-m-3")
    assert any("group epoch 5 (consumer protocol)" in n for n in epoch5.notes)
    assert epoch5.label == "group epoch 5" and {c.member for c in epoch5.costs} <= {"c-m-3"}
    alone = infer(csnap("Stable", 7, cmember("m-1", 7, [0, 1, 2, 3])))
    one = explain(alone[0].group, alone, alone[-1].ts_ms, live=True)
    assert one.health == "stable now, 1 member in group epoch 7"
    assert "snapshots: c-m-3 new" in epoch5.trigger.evidence  # named as the views name it
    # No join barrier to advise away, and nothing reads 'unknown' or 'DEAD'.
    assert not any(a.pattern == "kip-848" for d in x.generations for a in d.advice)
    text = json.dumps(x.to_dict())
    assert "unknown" not in text and "DEAD" not in text and '"generation": 5' in text


def test_a_static_member_taken_over_without_a_rebalance_is_said() -> None:
    # kgctl chaos run static-conflict: m1-dup started with m1's group.instance.id in a
    # stable group: the broker handed it over, fenced m1, and did not rebalance.
    events = events_of("static_conflict.jsonl")
    group = next(e.group for e in events if e.source == "member")
    x = explain(group, events, max(e.ts_ms for e in events))
    [taken] = x.replaced
    assert (taken.instance_id, taken.old, taken.new) == ("m1", "m1", "m1-dup")
    assert taken.fenced_ms is not None and taken.fenced_ms >= taken.at_ms
    assert not taken.rebalanced
    assert "replaced: m1-dup took group.instance.id m1 from m1" in _text(x)
    # The same with a rebalance (the newcomer's assignors in another order).
    events = events_of("static_replaced.jsonl")
    x = explain(events[0].group, events, max(e.ts_ms for e in events))
    assert [(r.new, r.old, r.rebalanced) for r in x.replaced] == [("a2", "a", True)]


def _text(x: Any) -> str:
    from rich.console import Console

    from kgctl.render.explain_text import render_explanation

    console = Console(width=200, record=True)
    console.print(render_explanation(x))
    return console.export_text()


def test_a_refused_upgrade_in_the_broker_log_is_said(tmp_path: Path) -> None:
    # Kafka 4.4.0's own line when a librdkafka member on the consumer protocol joined a
    # classic group of cooperative-sticky members (recorded by hand, group renamed).
    path = DATA / "dead_member_growth.jsonl"
    group = events_of(path.name)[0].group
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-12-03 06:38:55,458] WARN [GroupCoordinator id=1 topic=__consumer_offsets "
        f"partition=0] Cannot upgrade classic group {group} to consumer group: userData "
        "from a custom assignor would be lost. "
        "(org.apache.kafka.coordinator.group.GroupMetadataManager)\n"
        "[2026-12-03 06:38:56,000] WARN [GroupCoordinator id=1] Cannot upgrade classic "
        "group other to consumer group: userData from a custom assignor would be lost.\n"
    )
    result = runner.invoke(
        app,
        ["explain", group, "--recording", str(path), "--broker-log", str(log), "-o", "json"],
    )
    doc = json.loads(result.stdout)
    said = [n for n in doc["notes"] if "would not make this classic group" in n]
    assert len(said) == 1, doc["notes"]  # the other group's line is not this group's
    assert "(userData from a custom assignor would be lost)" in said[0]
    assert "06:38:55.458" in said[0] and "GROUP_ID_NOT_FOUND" in said[0]
