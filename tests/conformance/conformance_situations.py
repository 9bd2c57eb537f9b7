"""The conformance suite's table of situations (pure data).

Each situation is applied to ONE member (the member under test) of a small group on the
real broker, through `kgctl proxy`'s fault rules, scoped to that member's client id.
The member joins, the group settles, then the situation's rules are armed (and its
trigger done) and the member is watched until it is a member again (or exits, or is
stopped), then stopped with SIGTERM. It runs once with Java's VerifiableConsumer
(`--group-protocol CLASSIC`) and once with `kgctl join`, with the same settings; some
also with kcat (librdkafka).

Settings shared by every run: session.timeout.ms=6000, heartbeat.interval.ms=500,
retry.backoff.ms=100, metadata.max.age.ms=1000, a topic of 2 partitions with 10
records written before the member starts. `commit`: `sync` is VerifiableConsumer's
default (commitSync after each batch; kgctl `--commit sync`), `auto` its
`--enable-autocommit` (kgctl `--commit auto`); kcat runs with enable.auto.commit=false.
"""

from __future__ import annotations

from dataclasses import dataclass

# A rejoin the member is told to make: its next heartbeat is answered
# REBALANCE_IN_PROGRESS (by the proxy, so the broker's group is untouched and the
# member rejoins alone, to a group that is Stable).
REJOIN = "Heartbeat:error=REBALANCE_IN_PROGRESS:count=1"


@dataclass(frozen=True)
class Situation:
    id: str
    covers: tuple[str, ...]  # audit rows ("audit 1") and the items it stands for
    stages: tuple[tuple[str, ...], ...]  # fault rules (no client=): stage k is armed once
    # a rule of stage k-1 applied; stage 0 at the start of the situation
    assignor: str = "range"  # or cooperative-sticky
    static: bool = False  # group.instance.id set
    commit: str = "sync"  # sync or auto
    trigger: str = ""  # "grow": the topic gets a 3rd partition; "produce": 10 records;
    # "subscribe": the member subscribes to the topic and a new one of one partition;
    # "peer-joins": a second (kgctl, consumer-protocol) member joins the group
    peer: bool = False  # a kgctl member joins first (the leader), through the proxy too
    peer_rules: tuple[str, ...] = ()  # rules on the peer, armed with stage 0
    peer_session_ms: int = 6000
    stop_on: str = ""  # SIGTERM the member as soon as a rule on this API applied
    until: str = "rejoined"  # or "exited": the member is expected to end by itself
    window: str = "fault"  # "start": compare from the member's start (its first join)
    kcat: bool = False  # also run kcat (librdkafka) as the member under test
    java: str = "java"  # java-resubscribing: ResubscribingMember.java, for "subscribe"
    ready: str = "joined"  # "committed": also wait for the member's first commit (its
    # consumed positions exist, so the pre-rebalance auto-commit has offsets to send)
    protocol: str = "classic"  # or "consumer" (KIP-848): Java's VerifiableConsumer with
    # --group-protocol CONSUMER, `kgctl join --group-protocol consumer`
    group_config: tuple[tuple[str, str], ...] = ()  # the group's own configs, set before
    # the member starts (consumer protocol: the broker's session and heartbeat interval)
    steady: int = 0  # once settled, also wait for this many steady heartbeats (consumer)


def _errors(api: str, errors: tuple[str, ...], *, rejoin: bool, **kw: object) -> list[Situation]:
    out = []
    for error in errors:
        name = f"{api.lower()}-{error.lower().replace('_', '-')}"
        rules = ((REJOIN,) if rejoin else ()) + (f"{api}:error={error}:count=1",)
        until = "exited" if error in FATAL else "rejoined"
        out.append(
            Situation(
                name,
                (f"{api} {error}",),
                (rules,),
                until=until,
                **kw,  # type: ignore[arg-type]
            )
        )
    return out


# Errors after which Java's member raises out of poll() and ends.
FATAL = frozenset({"GROUP_AUTHORIZATION_FAILED", "INVALID_SESSION_TIMEOUT", "FENCED_INSTANCE_ID"})

JOIN_ERRORS = (
    "UNKNOWN_MEMBER_ID",
    "REBALANCE_IN_PROGRESS",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "GROUP_AUTHORIZATION_FAILED",
    "INVALID_SESSION_TIMEOUT",
)
# The "first five" SyncGroup errors, less MEMBER_ID_REQUIRED (SyncGroup does not
# define it: the broker never answers it and the proxy refuses it), plus
# COORDINATOR_NOT_AVAILABLE.
SYNC_ERRORS = (
    "UNKNOWN_MEMBER_ID",
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
)
HEARTBEAT_ERRORS = (
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "NOT_COORDINATOR",
)
COMMIT_ERRORS = ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID")

# SUBSCRIBE_AFTER_COMMIT: a subscription change starts once the member committed its
# first batch. ResubscribingMember wakes its poll loop up to subscribe; a wakeup in the
# middle of the first batch's commitSync abandons that commit in flight, and the next
# poll's JoinGroup then went out with it unanswered (seen once in the whole module's run,
# `java only: JoinGroup sent with an OffsetCommit in flight`): the harness's timing.
SITUATIONS: list[Situation] = [
    # -- the audit's rows (../shared/design/fidelity-audit.md) --------------------------
    Situation(
        "a1-metadata-rejoin-join-rebalance-in-progress",
        ("audit 1", "audit 2", "audit 10", "JoinGroup REBALANCE_IN_PROGRESS"),
        (("JoinGroup:error=REBALANCE_IN_PROGRESS:count=1",),),
        trigger="grow",
    ),
    Situation(
        "a1-subscription-rejoin-join-rebalance-in-progress",
        ("audit 1", "audit 2", "JoinGroup REBALANCE_IN_PROGRESS"),
        (("JoinGroup:error=REBALANCE_IN_PROGRESS:count=1",),),
        trigger="subscribe",
        java="java-resubscribing",
        peer=True,
        ready="committed",  # see SUBSCRIBE_AFTER_COMMIT
    ),
    Situation(
        "a1-subscription-rejoin-join-not-coordinator",
        ("audit 1", "audit 2", "JoinGroup NOT_COORDINATOR"),
        (("JoinGroup:error=NOT_COORDINATOR:count=1",),),
        trigger="subscribe",
        java="java-resubscribing",
        peer=True,
        ready="committed",  # see SUBSCRIBE_AFTER_COMMIT
    ),
    Situation(
        "a1-metadata-rejoin-join-not-coordinator",
        ("audit 1", "audit 2", "JoinGroup NOT_COORDINATOR"),
        (("JoinGroup:error=NOT_COORDINATOR:count=1",),),
        trigger="grow",
    ),
    Situation(
        "a1-metadata-rejoin-join-dropped",
        ("audit 1", "coordinator connection dropped mid-join"),
        (("JoinGroup:drop:count=1",),),
        trigger="grow",
    ),
    Situation(
        "a3-reset-mid-join-cooperative",
        ("audit 3", "cooperative", "JoinGroup UNKNOWN_MEMBER_ID"),
        ((REJOIN, "JoinGroup:error=UNKNOWN_MEMBER_ID:count=1"),),
        assignor="cooperative-sticky",
    ),
    Situation(
        "a4-heartbeat-fenced-static",
        ("audit 4", "Heartbeat FENCED_INSTANCE_ID", "static"),
        (("Heartbeat:error=FENCED_INSTANCE_ID:count=1",),),
        static=True,
        until="exited",
    ),
    Situation(
        "a5-close-during-held-join-eager",
        ("audit 5", "close() during a held JoinGroup", "eager"),
        ((REJOIN, "JoinGroup:delay=3000:count=1"),),
        stop_on="JoinGroup",
        kcat=True,
    ),
    Situation(
        "a5-close-during-held-join-cooperative",
        ("audit 5", "close() during a held JoinGroup", "cooperative"),
        ((REJOIN, "JoinGroup:delay=3000:count=1"),),
        assignor="cooperative-sticky",
        stop_on="JoinGroup",
    ),
    Situation(
        "a6-autocommit-awaited-before-join",
        ("audit 6", "auto-commit"),
        ((REJOIN,), ("OffsetCommit:error=COORDINATOR_LOAD_IN_PROGRESS:count=1",)),
        commit="auto",
        ready="committed",
    ),
    Situation(
        # The pre-rebalance commit is held 1.5 s by the proxy: Java sends JoinGroup only
        # once it is answered (a JoinGroup sent before would be read by the proxy while
        # the commit's answer is still on its way).
        "a6-autocommit-slow-commit-awaited-before-join",
        ("audit 6", "auto-commit"),
        ((REJOIN,), ("OffsetCommit:delay=1500:count=1",)),
        commit="auto",
        ready="committed",
    ),
    Situation(
        # The peer (the leader, joined first) is told to rejoin: a leader's JoinGroup
        # always rebalances the group, and the broker's REBALANCE_IN_PROGRESS brings the
        # member under test (a follower) in; the leader's SyncGroup is then held 8 s,
        # past its session (3 s), while the follower waits for its assignment. The
        # leader's session is shorter than the follower's 6 s so that the broker ends
        # the wait (drops the leader, answers REBALANCE_IN_PROGRESS) well before the
        # follower's own session could run out: its heartbeats wait at the broker behind
        # its SyncGroup, and which of two 6 s timers fired first would be chance.
        "a7-slow-leader-sync-follower-keeps-session",
        ("audit 7", "SyncGroup delayed past the session timeout (the leader's)"),
        (),
        peer=True,
        peer_rules=(REJOIN, "SyncGroup:delay=8000:count=1"),
        peer_session_ms=3000,
    ),
    Situation(
        "a9-commit-rebalance-in-progress",
        ("audit 9", "OffsetCommit REBALANCE_IN_PROGRESS"),
        (("OffsetCommit:error=REBALANCE_IN_PROGRESS:count=1",),),
        trigger="produce",
    ),
    # -- the list --------------------------------------------------------------
    Situation(
        "first-join-member-id-required",
        ("JoinGroup MEMBER_ID_REQUIRED (the broker's own, on a dynamic member's first join)",),
        (),
        window="start",
        kcat=True,
    ),
    Situation(
        "first-join-static",
        ("static", "first join"),
        (),
        static=True,
        window="start",
    ),
    *[
        s
        for s in _errors("JoinGroup", JOIN_ERRORS, rejoin=True)
        if s.id != "joingroup-rebalance-in-progress"
    ],
    Situation(
        "joingroup-rebalance-in-progress",
        ("JoinGroup REBALANCE_IN_PROGRESS",),
        ((REJOIN, "JoinGroup:error=REBALANCE_IN_PROGRESS:count=1"),),
        kcat=True,
    ),
    *_errors("SyncGroup", SYNC_ERRORS, rejoin=True),
    *_errors("Heartbeat", HEARTBEAT_ERRORS, rejoin=False),
    *[
        Situation(
            f"heartbeat-{e.lower().replace('_', '-')}-cooperative",
            (f"Heartbeat {e}", "cooperative"),
            ((f"Heartbeat:error={e}:count=1",),),
            assignor="cooperative-sticky",
        )
        for e in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID")
    ],
    Situation(
        "heartbeat-unknown-member-id-static",
        ("Heartbeat UNKNOWN_MEMBER_ID", "static"),
        (("Heartbeat:error=UNKNOWN_MEMBER_ID:count=1",),),
        static=True,
    ),
    Situation(
        "heartbeat-unknown-member-id-librdkafka",
        ("Heartbeat UNKNOWN_MEMBER_ID",),
        (("Heartbeat:error=UNKNOWN_MEMBER_ID:count=1",),),
        kcat=True,
    ),
    *[
        s
        for s in _errors("OffsetCommit", COMMIT_ERRORS, rejoin=False, trigger="produce")
        if s.id != "offsetcommit-rebalance-in-progress"
    ],  # fmt: skip
    Situation(
        "syncgroup-own-delayed-past-session",
        ("SyncGroup delayed past the session timeout (its own)",),
        ((REJOIN, "SyncGroup:delay=8000:count=1"),),
    ),
]


# -- the consumer protocol (KIP-848) ---------------------------------------------------------
# Same settings, less those the protocol takes from the broker: no session timeout,
# heartbeat interval or assignor is set (Java refuses them with group.protocol=consumer);
# the broker's (the session broker's 10 s and 500 ms, docs/testing.md) apply unless the
# situation gives its group configs of its own. Java: VerifiableConsumer
# --group-protocol CONSUMER; kgctl: `kgctl join --group-protocol consumer`.
CGH = "ConsumerGroupHeartbeat"


def _k848(name: str, covers: tuple[str, ...], rules: tuple[str, ...], **kw: object) -> Situation:
    # The situation starts once the member committed its first batch: a commit still in
    # flight would otherwise wait behind a held heartbeat on the coordinator connection
    # and be refused with it (seen: Java's, in k848-heartbeat-delayed-past-session), or
    # carry an epoch the situation has just fenced: timing, not behaviour.
    if kw.get("window", "fault") == "fault":
        kw.setdefault("ready", "committed")
    return Situation(f"k848-{name}", ("consumer protocol", *covers), (rules,) if rules else (),
                     protocol="consumer", **kw)  # type: ignore[arg-type]  # fmt: skip


K848_SITUATIONS: list[Situation] = [
    # The join (epoch 0, every field), the acknowledgement, steady heartbeats on the
    # interval the group gives (2 s, so a client that ignored it would show), the leave
    # (-1) when stopped.
    _k848(
        "first-join",
        ("join with epoch 0", "heartbeat interval from the broker", "fields sent when changed"),
        (),
        window="start",
        group_config=(("consumer.heartbeat.interval.ms", "2000"),),
        steady=3,  # three gaps: the fewest the interval is compared on
    ),
    # A static member: its instance id on the join; its leave is -2.
    _k848("first-join-static", ("static", "leave with -2"), (), window="start", static=True),
    *[
        _k848(
            f"heartbeat-{e.lower().replace('_', '-')}",
            (f"{CGH} {e}",),
            (f"{CGH}:error={e}:count=1",),
        )
        for e in (
            "FENCED_MEMBER_EPOCH",  # fenced: partitions lost, join again with epoch 0
            "UNKNOWN_MEMBER_ID",
            # Find the coordinator again, full heartbeat (COORDINATOR_NOT_AVAILABLE takes
            # the same path in both clients: left out to keep the suite's time down).
            "NOT_COORDINATOR",
            "COORDINATOR_LOAD_IN_PROGRESS",  # retried after a backoff
        )
    ],
    *[
        _k848(
            f"heartbeat-{e.lower().replace('_', '-')}-static",
            (f"{CGH} {e}", "static", "fatal"),
            (f"{CGH}:error={e}:count=1",),
            static=True,
            until="exited",
        )
        for e in ("FENCED_INSTANCE_ID", "UNRELEASED_INSTANCE_ID")
    ],
    # The answer lost with its connection: the next heartbeat carries every field.
    _k848("heartbeat-dropped", ("a heartbeat's answer lost",), (f"{CGH}:drop:count=1",)),
    # A heartbeat held past the session (3 s here): the broker fences the member meanwhile.
    _k848(
        "heartbeat-delayed-past-session",
        ("a heartbeat held past the session timeout",),
        (f"{CGH}:delay=5000:count=1",),
        group_config=(("consumer.session.timeout.ms", "3000"),),
    ),
    # A second member joins: the member revokes one partition (commit, revoke callback,
    # assign callback, acknowledging heartbeat).
    _k848("second-member-joins", ("reconciliation: revoke",), (), trigger="peer-joins"),
    # The same with auto-commit, once the member has committed: Java commits before it
    # revokes.
    _k848(
        "second-member-joins-autocommit",
        ("reconciliation: commit before revoke", "auto-commit"),
        (),
        trigger="peer-joins",
        commit="auto",
    ),
]
SITUATIONS += K848_SITUATIONS

AUDIT_ROWS_NOT_PROVOKED = {
    "audit 8": (
        "an answer for an older generation cannot reach a member through the proxy: a "
        "client sends its heartbeats, commits and joins on one coordinator connection, "
        "and answers come back in request order, so no heartbeat or commit answer can "
        "arrive after the next JoinGroup's answer"
    ),
}
