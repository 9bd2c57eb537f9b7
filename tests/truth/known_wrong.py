# ruff: noqa: E501  (each reason is one line: what kgctl says against the truth)
"""The truth cells kgctl gets wrong today: for each, the tags the table shows and the
defect, what kgctl says against what happened (from one run of the suite; the numbers
move a little from run to run, the defects do not). Each is a strict expected failure:
fixing a defect fails the suite until its line here goes (and the table is rewritten).

The defects, by the audit's numbers (../shared/design/client-truth-audit.md), and where
each fix goes (most in kgctl/model/diagnosis.py; see the truth suite's section of
docs/explain.md):
"""

from __future__ import annotations

# tag -> the defect it stands for
DEFECTS: dict[str, str] = {
    "revoked": "audit 5 (0 revoked): an eager member's revocations are not counted for "
    "clients that report nothing (the wire and the broker show none; each eager member "
    "revokes all it owns)",
    "moved": "audit 9: partitions_moved is 0 where the sources cannot tell, or counts "
    "moves the clients did not make",
    "no wait": "audit 5a: the broker log's 'removing member … on heartbeat expiration' "
    "is not read as the dead member's wait",
    "wait length": "audit 5a: a dead member's wait measured from the wire, not its session timeout",
    "trigger (exact)": "audit 5b/5d: a cause marked exact that the source's words do not "
    "say (a growth read as 'rejoin requested'; a max.poll.interval.ms breach read as "
    "'member left')",
    "trigger": "audit 5b: from the cluster alone a growth is inferred as 'rejoin requested' "
    "(the earlier generations' stored assignments, which show it, are not read)",
    "second round as trigger": "audit 5c: a cooperative second round read as a trigger of its own",
    "no rebalance": "audit 3: a KIP-848 group known only from the wire has 0 rebalances",
    "fault not named": "audit 5e: a rebalance that followed an injected error in the "
    "trace is not put down to the fault",
    "no-partitions time": "audit 6: a member's time without partitions wrong",
}

# (client, situation, view) -> (the table's tags, the defect: kgctl says X, truth is Y)
KNOWN_WRONG: dict[tuple[str, str, str], tuple[str, str]] = {
    ("rdkafka-range", "kill", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "kill", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "kill", "explain:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 4",
    ),
    ("rdkafka-range", "kill", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "kill", "watch:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 4",
    ),
    ("rdkafka-range", "kill-45s", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "kill-45s", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "kill-45s", "explain:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 4",
    ),
    ("rdkafka-range", "kill-45s", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "kill-45s", "watch:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 4",
    ),
    ("rdkafka-range", "stop", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "stop", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "stop", "explain:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 4",
    ),
    ("rdkafka-range", "stop", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 4; 0 moved; truth 3",
    ),
    ("rdkafka-range", "stop", "watch:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 4",
    ),
    ("rdkafka-range", "scale-out", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 6; 0 moved; truth 3",
    ),
    ("rdkafka-range", "scale-out", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 6; 0 moved; truth 3",
    ),
    ("rdkafka-range", "scale-out", "explain:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-range", "scale-out", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 6; 0 moved; truth 3",
    ),
    ("rdkafka-range", "scale-out", "watch:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-range", "growth", "explain:cluster"): (
        "trigger, revoked, moved",
        "kgctl says gen 2: rejoin_requested by  (inferred); truth: partitions_changed by any member; 0 revoked; truth 6; 0 moved; truth 3",
    ),
    ("rdkafka-range", "growth", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 8; 0 moved; truth 3",
    ),
    ("rdkafka-range", "growth", "explain:wire"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 8; 6 moved; truth 3",
    ),
    ("rdkafka-range", "growth", "watch:cluster"): (
        "trigger, revoked, moved",
        "kgctl says gen 2: rejoin_requested by  (inferred); truth: partitions_changed by any member; 0 revoked; truth 6; 0 moved; truth 3",
    ),
    ("rdkafka-range", "growth", "watch:wire"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 8; 6 moved; truth 3",
    ),
    ("rdkafka-range", "max-poll", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 10; 0 moved; truth 6",
    ),
    ("rdkafka-range", "max-poll", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 10; 0 moved; truth 6",
    ),
    ("rdkafka-range", "max-poll", "explain:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 10",
    ),
    ("rdkafka-range", "max-poll", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 10; 0 moved; truth 6",
    ),
    ("rdkafka-range", "max-poll", "watch:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 10",
    ),
    ("rdkafka-range", "fault-rip", "explain:cluster"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-range", "fault-rip", "explain:broker-log"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-range", "fault-rip", "explain:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-range", "fault-rip", "watch:cluster"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-range", "fault-rip", "watch:wire"): (
        "revoked",
        "kgctl says 0 revoked; truth 6",
    ),
    ("rdkafka-cooperative", "kill", "explain:cluster"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "kill", "explain:broker-log"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "kill", "watch:cluster"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "kill-45s", "explain:cluster"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "kill-45s", "explain:broker-log"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "kill-45s", "watch:cluster"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "stop", "explain:cluster"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "stop", "explain:broker-log"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "stop", "watch:cluster"): (
        "moved",
        "kgctl says 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "scale-out", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "scale-out", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "scale-out", "explain:wire"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 4 moved; truth 2",
    ),
    ("rdkafka-cooperative", "scale-out", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 0 moved; truth 2",
    ),
    ("rdkafka-cooperative", "scale-out", "watch:wire"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 4 moved; truth 2",
    ),
    ("rdkafka-cooperative", "growth", "explain:cluster"): (
        "trigger",
        "kgctl says gen 3: rejoin_requested by  (inferred); truth: partitions_changed by any member",
    ),
    ("rdkafka-cooperative", "growth", "explain:wire"): (
        "moved",
        "kgctl says 3 moved; truth 0",
    ),
    ("rdkafka-cooperative", "growth", "watch:cluster"): (
        "trigger",
        "kgctl says gen 3: rejoin_requested by  (inferred); truth: partitions_changed by any member",
    ),
    ("rdkafka-cooperative", "growth", "watch:wire"): (
        "moved",
        "kgctl says 3 moved; truth 0",
    ),
    ("rdkafka-cooperative", "max-poll", "explain:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 0 moved; truth 4",
    ),
    ("rdkafka-cooperative", "max-poll", "explain:broker-log"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 0 moved; truth 4",
    ),
    ("rdkafka-cooperative", "max-poll", "explain:wire"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 6 moved; truth 4",
    ),
    ("rdkafka-cooperative", "max-poll", "watch:cluster"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 0 moved; truth 4",
    ),
    ("rdkafka-cooperative", "max-poll", "watch:wire"): (
        "revoked, moved",
        "kgctl says 0 revoked; truth 2; 6 moved; truth 4",
    ),
    ("rdkafka-consumer", "growth", "explain:wire"): (
        "moved",
        "kgctl says 3 moved; truth 0",
    ),
    ("rdkafka-consumer", "growth", "watch:wire"): (
        "moved",
        "kgctl says 3 moved; truth 0",
    ),
}
