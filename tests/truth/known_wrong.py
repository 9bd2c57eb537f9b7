# ruff: noqa: E501  (each reason is one line: what kgctl says against the truth)
"""The truth cells kgctl gets wrong today: for each, the tags the table shows and the
defect, what kgctl says against what happened (from one run of the suite; the numbers
move a little from run to run, the defects do not). Each is a strict expected failure,
unless every tag is "(sometimes)" (a defect a run shows or not): fixing a defect fails
the suite until its line here goes (and the table is rewritten).

The defects, by the audit's numbers (../shared/design/client-truth-audit.md), and where
each fix goes (most in the kgctl/model/diagnosis/ package; see the truth suite's section of
docs/explain.md):
"""

from __future__ import annotations

# tag -> the defect it stands for
DEFECTS: dict[str, str] = {
    "revoked (sometimes)": "audit 5: revocations of clients that report nothing are "
    "inferred from the assignor's protocol (eager: all a member owned, at each rejoin); in "
    "the range fault-rip the member whose heartbeat kgctl proxy answered "
    "REBALANCE_IN_PROGRESS rejoins while the group is still stable, the broker hands it its "
    "generation and its partitions back (no rebalance), and it revokes them once more for "
    "the rebalance (librdkafka truth 10, kafka-python 8, kgctl 6; right in runs where its "
    "SyncGroup was already refused). "
    "The wire views see that JoinGroup and its answer and count it; the cluster's records "
    "and the broker's log do not show it, so there the count is given as at least 6 (a "
    "lower bound, right). In the librdkafka range growth (the situations run at most "
    "twelve at a time) the wire views at times count 6 where the truth is 10: a second "
    "revocation within the generation, likely the same rejoin answered with the "
    "generation, not yet traced",
    "no-partitions time (sometimes)": "audit 5: a member's time without partitions from "
    "the wire is missing when the rebalance runs long under load: in h2's full run "
    "(2 cores, every situation at once) the range join-not-coord gave the late member c1 "
    "no cost where it was 2.1 s without partitions, and the range growth c2 none for "
    "0.7 s; right in runs of the slice alone. (A wire time that is short, the protocol's "
    "JoinGroup to SyncGroup answer against the callbacks' revoke to assign, is now said "
    "as a lower bound, `unassigned_basis: wire`, and holds: the max-poll cells.) One "
    "cause found on 12-03: an eager member that sent more than one JoinGroup in the "
    "rebalance (a retry after NOT_COORDINATOR, a rejoin the stable group answered with "
    "its generation) was given no time at all; each JoinGroup to the assignment after it "
    "now counts (a full run showed it in the range fault-rip: c2 0 ms, truth 677 ms). "
    "Kept as sometimes-wrong until full runs show no other cause",
}

# (client, situation, view) -> (the table's tags, the defect: kgctl says X, truth is Y)
KNOWN_WRONG: dict[tuple[str, str, str], tuple[str, str]] = {
    ("rdkafka-range", "growth", "explain:wire"): (
        "revoked (sometimes), no-partitions time (sometimes)",
        "kgctl says 6 revoked; truth 10; or c2 0 ms without partitions, truth 720 ms",
    ),
    ("rdkafka-range", "growth", "watch:wire"): (
        "revoked (sometimes), no-partitions time (sometimes)",
        "kgctl says 6 revoked; truth 10; or c2 0 ms without partitions, truth 720 ms",
    ),
    ("rdkafka-range", "join-not-coord", "explain:wire"): (
        "no-partitions time (sometimes)",
        "kgctl says c1 0 ms without partitions (no cost line); truth 2144 ms",
    ),
    ("rdkafka-range", "join-not-coord", "watch:wire"): (
        "no-partitions time (sometimes)",
        "kgctl says c1 0 ms without partitions (no cost line); truth 2144 ms",
    ),
}
