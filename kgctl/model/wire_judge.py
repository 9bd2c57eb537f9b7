"""The judge from the wire: what each member was given and what it committed, from a
proxy's trace alone (for programs that report nothing themselves).

What a member was given to read comes from `FetchTraced` (each partition's record batch
ranges, from the batch headers: a batch may begin before the member's fetch position, so
a range can start a little early); what it committed from `OffsetCommitTraced` (only
commits the broker accepted: an answer with an error moved nothing). Events are taken in
their order (the proxy emits one stream). Checked:

- `commit-not-ahead`: a member never commits past what it was given on that partition
  (nor past the group's committed offset when it was given nothing there);
- `commits-monotonic`: the group's committed offset of a partition never moves back;
- `committed-progress`: after each step, every partition that had records waiting (the
  high watermark last seen past the committed offset) gets a newer commit before the end;
- `at-least-once (wire)`: at the end, every produced record is below its partition's
  committed offset (a record above it was never acknowledged by the group).

Pure: events in, a judgement out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgctl.model.events import Event

TopicPartition = tuple[str, int]

RULES = ("commit-not-ahead", "commits-monotonic", "committed-progress", "at-least-once")


@dataclass(frozen=True)
class Finding:
    """One thing the wire shows that must not happen."""

    rule: str
    message: str
    at_ms: int
    member: str = ""
    partition: str = ""


@dataclass
class MemberWire:
    """What one member was given and committed, as the wire saw it."""

    given: int = 0  # records in the batches it was given (ranges may overlap re-fetches)
    fetched_to: dict[TopicPartition, int] = field(default_factory=dict)  # next offset after
    committed: dict[TopicPartition, int] = field(default_factory=dict)  # its last accepted
    commits: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "given": self.given,
            "commits": self.commits,
            "fetched_to": {f"{t}-{p}": o for (t, p), o in sorted(self.fetched_to.items())},
            "committed": {f"{t}-{p}": o for (t, p), o in sorted(self.committed.items())},
            # Given but not committed by it: handed to its next owner again (re-read).
            "given_not_committed": sum(
                max(0, end - self.committed.get(tp, 0)) for tp, end in self.fetched_to.items()
            ),
        }


@dataclass
class WireJudgement:
    findings: list[Finding] = field(default_factory=list)
    members: dict[str, MemberWire] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)  # the group's, at the end
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    not_committed: dict[TopicPartition, int] = field(default_factory=dict)  # produced, above it
    # Every batch range Fetch answers carried to any member, per partition.
    fetched_ranges: dict[TopicPartition, list[tuple[int, int]]] = field(default_factory=dict)

    def fetched_records(self) -> int:
        """Distinct offsets that Fetch answers carried to the members (re-reads once)."""
        total = 0
        for ranges in self.fetched_ranges.values():
            end = -1  # past the last offset counted, in this partition's sorted ranges
            for first, last in sorted(ranges):
                if last > end:
                    total += last - max(first, end + 1) + 1
                    end = last
        return total


def _where(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


class _Judge:
    def __init__(self, members: set[str]) -> None:
        self.members = members
        self.out = WireJudgement()
        # (step, at_ms, {tp: committed then}) for partitions with records waiting then.
        self.waiting: list[tuple[str, int, dict[TopicPartition, int]]] = []

    def fetched(self, ev: Event) -> None:
        m = self.out.members.setdefault(ev.member, MemberWire())
        for topic, parts in (ev.data.get("partitions") or {}).items():
            for p, entry in parts.items():
                tp = (str(topic), int(p))
                hw = entry.get("hw")
                if isinstance(hw, int) and hw >= 0:
                    self.out.high_watermarks[tp] = max(self.out.high_watermarks.get(tp, 0), hw)
                for first, last in entry.get("batches") or []:
                    m.given += int(last) - int(first) + 1
                    self.out.fetched_ranges.setdefault(tp, []).append((int(first), int(last)))
                    m.fetched_to[tp] = max(m.fetched_to.get(tp, 0), int(last) + 1)

    def committed(self, ev: Event) -> None:
        if ev.data.get("error") not in ("NONE", None) or ev.data.get("injected"):
            return  # refused (or answered by a fault): the broker moved nothing
        m = self.out.members.setdefault(ev.member, MemberWire())
        m.commits += 1
        offsets = (ev.data.get("request") or {}).get("offsets") or {}
        for topic, parts in offsets.items():
            for p, offset in parts.items():
                self._commit(ev, m, (str(topic), int(p)), int(offset))

    def _commit(self, ev: Event, m: MemberWire, tp: TopicPartition, offset: int) -> None:
        before = self.out.committed.get(tp)
        given = m.fetched_to.get(tp)
        limit = max(given or 0, before or 0)
        if offset > limit:
            what = f"given up to {given - 1}" if given else "given nothing there"
            self.out.findings.append(
                Finding(
                    "commit-not-ahead",
                    f"{ev.member} committed {_where(tp)} at {offset}, {what}"
                    + (f" (the group had committed {before})" if before is not None else ""),
                    ev.ts_ms,
                    ev.member,
                    _where(tp),
                )
            )
        if before is not None and offset < before:
            self.out.findings.append(
                Finding(
                    "commits-monotonic",
                    f"{ev.member} moved {_where(tp)}'s committed offset back from {before} "
                    f"to {offset}",
                    ev.ts_ms,
                    ev.member,
                    _where(tp),
                )
            )
        m.committed[tp] = offset
        self.out.committed[tp] = offset

    def step_started(self, name: str, at_ms: int) -> None:
        waiting = {
            tp: self.out.committed.get(tp, 0)
            for tp, hw in self.out.high_watermarks.items()
            if hw > self.out.committed.get(tp, 0)
        }
        self.waiting.append((name, at_ms, waiting))

    def progress(self, commits: list[tuple[int, TopicPartition, int]], end_ms: int) -> None:
        for name, at_ms, waiting in self.waiting:
            for tp, base in sorted(waiting.items()):
                if not any(t >= at_ms and q == tp and o > base for t, q, o in commits):
                    self.out.findings.append(
                        Finding(
                            "committed-progress",
                            f"{_where(tp)} had records waiting past offset {base} when step "
                            f"{name} began and no commit moved it before the end",
                            end_ms,
                            partition=_where(tp),
                        )
                    )


def judge_wire(
    events: Iterable[Event],
    *,
    members: Iterable[str],
    steps: Iterable[tuple[str, int]] = (),
    produced_ends: Mapping[TopicPartition, int] | None = None,
    end_ms: int = 0,
) -> WireJudgement:
    """Judge `members` (named as in the events) from the run's `events`. `steps` are
    (name, started_ms), in order; `produced_ends` the next offset after the last record
    produced to each partition (None: not judged)."""
    judge = _Judge(set(members))
    pending = sorted(steps, key=lambda s: s[1])
    commits: list[tuple[int, TopicPartition, int]] = []
    last_ts = end_ms
    for ev in events:
        while pending and pending[0][1] <= ev.ts_ms:
            judge.step_started(*pending.pop(0))
        last_ts = max(last_ts, ev.ts_ms)
        if ev.source != "wire" or ev.member not in judge.members:
            continue
        if ev.type == "FetchTraced":
            judge.fetched(ev)
        elif ev.type == "OffsetCommitTraced":
            before = dict(judge.out.committed)
            judge.committed(ev)
            commits += [
                (ev.ts_ms, tp, o) for tp, o in judge.out.committed.items() if before.get(tp) != o
            ]
    for step in pending:
        judge.step_started(*step)
    judge.progress(commits, last_ts)
    out = judge.out
    for tp, end in sorted((produced_ends or {}).items()):
        left = end - out.committed.get(tp, 0)
        if left > 0:
            out.not_committed[tp] = left
    if out.not_committed:
        tp, left = next(iter(out.not_committed.items()))
        total = sum(out.not_committed.values())
        out.findings.append(
            Finding(
                "at-least-once",
                f"{total} produced record(s) above the group's committed offsets at the end "
                f"(never acknowledged), first {_where(tp)}: {left} from "
                f"{out.committed.get(tp, 0)}",
                last_ts,
                partition=_where(tp),
            )
        )
    return out
