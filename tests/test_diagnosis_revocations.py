"""Pure tests of what a rebalance took from members that report nothing themselves
(kgctl/model/diagnosis/revocations.py and cost.py): revocations inferred from the
assignor's protocol, partitions moved read from the assignments the broker stored, and
an eager member's time without partitions. Before these, kgctl said 0 revoked and 0
moved for a Java or librdkafka group (the truth suite's `revoked` and `moved` cells)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kgctl.adapters.assignors import cooperative_sticky
from kgctl.adapters.group_records import GroupMetadata, GroupRecord, MemberRecord
from kgctl.model.diagnosis import Context, Diagnosis
from kgctl.model.events import Event
from kgctl.model.explanation import explain
from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot
from kgctl.observe.infer import Inferrer
from kgctl.recordings import recording_lines
from kgctl.report.summary import parse_lines

GROUP = "app"
TOPIC = "orders"
T0 = 1_800_000_000_000


def _record(
    generation: int, assignor: str, owned: dict[str, list[int]], at: int, stored: bool = True
) -> GroupRecord:
    members = tuple(
        MemberRecord(
            member_id=f"{name}-id",
            client_id=name,
            host="/10.0.0.1",
            rebalance_timeout_ms=300000,
            session_timeout_ms=10000,
            subscription=(TOPIC,),
            assignment={TOPIC: tuple(ids)} if stored and ids else ({} if stored else None),
        )
        for name, ids in owned.items()
    )
    meta = GroupMetadata(
        generation=generation,
        protocol_type="consumer",
        protocol=assignor,
        leader=members[0].member_id,
        state_ts_ms=at - 20,
        members=members,
        version=3,
    )
    return GroupRecord(GROUP, meta, offset=generation, timestamp_ms=at, partition=7)


def _cluster_events(
    records: list[GroupRecord], assignor: str, now: dict[str, list[int]], *, whole: bool
) -> list[Event]:
    """What `kgctl explain` reads from the cluster alone (explain/sources.py): every
    stored record of the group (`whole`) or, as `watch --once` does, only the latest one,
    and the DescribeGroups answer now."""
    stored = Inferrer(GROUP)
    stored.stored_source = True
    events: list[Event] = []
    if whole:
        stored.stored_members = {}  # the group's own beginning is in the window
        for rec in records:
            events += stored.stored_record(rec, rec.timestamp_ms)
    else:
        events += stored.stored_record(records[-1], records[-1].timestamp_ms, initial=True)
    snap = GroupSnapshot(
        group=GROUP,
        state="Stable",
        protocol_type="consumer",
        protocol=assignor,
        members=tuple(
            MemberSnapshot(
                member_id=f"{name}-id",
                client_id=name,
                subscription=(TOPIC,),
                partitions={TOPIC: ids},
            )
            for name, ids in now.items()
        ),
    )
    last = records[-1].timestamp_ms + 5_000
    events += [e for e in Inferrer(GROUP).observe(snap, last) if e.type == "GroupObserved"]
    return events


def _diagnosed(events: list[Event]) -> dict[int, Diagnosis]:
    now = max(e.ts_ms for e in events)
    x = explain(GROUP, events, now, Context(cooperative=cooperative_sticky))
    return {d.generation: d for d in x.generations}


# range on 6 partitions: c1, c2, c3; c3 leaves; c1 and c2 share its partitions.
RANGE_BEFORE = {"c1": [0, 1], "c2": [2, 3], "c3": [4, 5]}
RANGE_AFTER = {"c1": [0, 1, 2], "c2": [3, 4, 5]}


def _range_stop(*, stored: bool = True) -> list[GroupRecord]:
    return [
        _record(1, "range", RANGE_BEFORE, T0, stored),
        _record(2, "range", RANGE_AFTER, T0 + 60_000, stored),
    ]


def test_an_eager_groups_revocations_are_inferred_from_its_assignor() -> None:
    g2 = _diagnosed(_cluster_events(_range_stop(), "range", RANGE_AFTER, whole=True))[2]
    # c1 and c2 stayed and, eager, revoked all they owned (2 each) as they rejoined.
    assert g2.partitions_revoked == 4
    [note] = [n for n in g2.notes if "revoked partitions inferred" in n]
    assert "c1 2, c2 2" in note and "the group's assignor is range" in note
    assert "eager" in note
    # Moved: 2 (c2's, to c1), 4 and 5 (c3's, to c2); 0, 1 and 3 stayed where they were.
    assert g2.partitions_moved == 3
    assert g2.to_dict()["partitions_revoked"] == 4


def test_a_cooperative_groups_two_rounds_move_each_partition_once() -> None:
    # cooperative-sticky: c3 joins; round one takes 2 and 5 from c1 and c2 (to no one),
    # round two gives them to c3.
    owned = [
        {"c1": [0, 1, 2], "c2": [3, 4, 5]},
        {"c1": [0, 1], "c2": [3, 4], "c3": []},
        {"c1": [0, 1], "c2": [3, 4], "c3": [2, 5]},
    ]
    records = [_record(i + 1, "cooperative-sticky", o, T0 + i * 1000) for i, o in enumerate(owned)]
    gens = _diagnosed(_cluster_events(records, "cooperative-sticky", owned[-1], whole=True))
    # Only what the new assignment dropped is revoked (c1's 2, c2's 5), in round one.
    assert (gens[2].partitions_revoked, gens[3].partitions_revoked) == (2, 0)
    # Each moved once, when c3 took it; nothing moved in round one.
    assert (gens[2].partitions_moved, gens[3].partitions_moved) == (0, 2)


def test_without_the_assignment_before_the_counts_are_unknown_not_zero() -> None:
    # `watch --once` reads the latest stored generation only: what was owned before it
    # is not known, so neither is what was revoked or moved.
    latest_only = _diagnosed(_cluster_events(_range_stop(), "range", RANGE_AFTER, whole=False))
    # Records without assignments (none parsed) say no more.
    unparsed = _diagnosed(
        _cluster_events(_range_stop(stored=False), "range", RANGE_AFTER, whole=True)
    )
    for g2 in (latest_only[2], unparsed[2]):
        assert g2.partitions_revoked is None
        assert g2.partitions_moved is None
        assert g2.to_dict()["partitions_moved"] is None


def test_a_custom_assignors_protocol_is_not_guessed() -> None:
    records = [
        _record(1, "my-assignor", RANGE_BEFORE, T0),
        _record(2, "my-assignor", RANGE_AFTER, T0 + 60_000),
    ]
    g2 = _diagnosed(_cluster_events(records, "my-assignor", RANGE_AFTER, whole=True))[2]
    assert g2.partitions_revoked is None  # eager or cooperative: kgctl cannot tell
    assert g2.partitions_moved == 3  # the assignments say it either way


def test_the_protocol_is_the_one_every_assignor_offered_supports() -> None:
    from kgctl.model.diagnosis.revocations import protocol_of

    assert protocol_of(("range",)) == "eager"
    assert protocol_of(("cooperative-sticky",)) == "cooperative"
    # Java's rolling upgrade list is still eager until range goes.
    assert protocol_of(("cooperative-sticky", "range")) == "eager"
    assert protocol_of(("cooperative-sticky", "my-assignor")) == ""


def test_eager_members_on_the_wire_go_without_partitions_until_their_new_assignment() -> None:
    # A proxy's trace of three librdkafka-like members (range, roundrobin): app-c killed,
    # the topic grown, the join barrier waiting 4.3 s for app-c's session. The eager
    # members that stayed revoked everything as they sent JoinGroup and had nothing
    # until their SyncGroup answers: before, kgctl said 0 revoked and no cost.
    path = Path(__file__).parent / "data" / "wire_dead_member_growth.jsonl"
    events, _ = parse_lines(recording_lines(path))
    now = max(e.ts_ms for e in events)
    x = explain("wire-pay-2498", events, now, Context(cooperative=cooperative_sticky))
    g5 = {d.generation: d for d in x.generations}[5]
    costs = {c.member: c.unassigned_ms for c in g5.costs}
    assert set(costs) == {"app-a", "app-b"}
    assert all(3_500 <= ms <= 4_600 for ms in costs.values())
    assert g5.partitions_revoked == 3
    assert any("its JoinGroup offered range, roundrobin" in n for n in g5.notes)
    # The growth's new partitions had no owner: not moved.
    assert g5.partitions_moved == 2


def test_a_polled_eager_group_shows_its_members_time_without_partitions() -> None:
    # What `kgctl watch` and `kgctl monitor` see of a range group with no trace and no
    # stored records: DescribeGroups once a second. c3 joins; the broker reports no
    # assignment while it rebalances, so the model kept c1's and c2's partitions owned
    # throughout and the monitor's unassigned histogram stayed empty for eager groups.
    def snap(
        state: str, owned: dict[str, list[int]] | None, names: tuple[str, ...]
    ) -> GroupSnapshot:
        return GroupSnapshot(
            group=GROUP,
            state=state,
            protocol_type="consumer",
            protocol="range",
            members=tuple(
                MemberSnapshot(
                    member_id=f"{n}-id",
                    client_id=n,
                    subscription=(TOPIC,),
                    partitions=None if owned is None else {TOPIC: owned[n]},
                )
                for n in names
            ),
        )

    inferrer = Inferrer(GROUP)
    events: list[Event] = []
    polls = [
        (T0, snap("Stable", {"c1": [0, 1, 2], "c2": [3, 4, 5]}, ("c1", "c2"))),
        (T0 + 1_000, snap("PreparingRebalance", None, ("c1", "c2", "c3"))),
        (T0 + 2_000, snap("CompletingRebalance", None, ("c1", "c2", "c3"))),
        (
            T0 + 3_000,
            snap("Stable", {"c1": [0, 1], "c2": [2, 3], "c3": [4, 5]}, ("c1", "c2", "c3")),
        ),
    ]
    for at, s in polls:
        events += inferrer.observe(s, at)
    [d] = _diagnosed(events).values()
    costs = {c.member: c.unassigned_ms for c in d.costs}
    # From the rebalance seen beginning to the group seen stable again, for each eager
    # member that stayed (c3 had nothing to lose, but nothing to consume either).
    assert costs["c1"] == costs["c2"] == 2_000
    assert d.partitions_revoked == 6
    assert d.partitions_moved == 3  # 2 to c2; 4 and 5 to c3


def test_a_member_the_group_removed_lost_its_partitions_rather_than_revoking_them() -> None:
    # The same trace, but app-b's JoinGroup of generation 5 asks for a new member id:
    # the group had removed it (its session ran out), so what it owned was lost, not
    # revoked (a lost partition is not a revoke: the client's onPartitionsLost).
    path = Path(__file__).parent / "data" / "wire_dead_member_growth.jsonl"
    events, _ = parse_lines(recording_lines(path))

    def removed(e: Event) -> Event:
        if e.type != "JoinGroupTraced" or e.client_id != "app-b":
            return e
        if (e.data.get("response") or {}).get("generation") != 5:
            return e
        request = {**e.data["request"], "member_id": ""}
        return replace(e, data={**e.data, "request": request})

    events = [removed(e) for e in events]
    now = max(e.ts_ms for e in events)
    x = explain("wire-pay-2498", events, now, Context(cooperative=cooperative_sticky))
    g5 = {d.generation: d for d in x.generations}[5]
    assert g5.partitions_revoked == 2  # app-a's alone (with app-b's: 3)


def test_a_rebalance_a_description_saw_begin_was_polled() -> None:
    """The description that showed the rebalance begin is at its very start: with the
    events' `since` exclusive, it was left out, the rebalance counted as not polled, and
    the members known from descriptions lost their time without partitions (the
    monitor's histogram stayed empty: tests/test_monitor_kafka.py)."""
    from test_monitor_orders import B_JOINING, BOTH, ONLY_A, A, B, G, _record

    from kgctl.monitor.follower import GroupFollower

    f = GroupFollower(G, settle_ms=3000, stored_source=True)
    out = f.record(_record(0, [], 0), 10) + f.record(_record(1, [A], 185), 200)
    out += f.observed(ONLY_A, 1000) + f.observed(B_JOINING, 2000)
    out += f.record(_record(2, [A, B], 4000), 4005) + f.observed(BOTH, 5000)
    out += f.tick(20_000, flush=True)
    [joined] = [d.rebalance for d in out if d.rebalance.generation == 2]
    assert joined.unassigned_ms and max(joined.unassigned_ms) >= 1900
