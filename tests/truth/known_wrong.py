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

# tag -> the defect it stands for. None left: the last, the librdkafka range growth's and
# join-not-coord's wire views, wrong "(sometimes)", were a rejoin after the rebalance that
# the broker answered with its generation (its revocation in no rebalance's count) and an
# eager member with two JoinGroups in a rebalance given no time without partitions.
DEFECTS: dict[str, str] = {}

# (client, situation, view) -> (the table's tags, the defect: kgctl says X, truth is Y)
KNOWN_WRONG: dict[tuple[str, str, str], tuple[str, str]] = {}
