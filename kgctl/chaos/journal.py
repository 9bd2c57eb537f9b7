"""The journal of a chaos run: step reports, violations, verdict; what `--output json` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kgctl.errors import ExitStatus


@dataclass
class ViolationRecord:
    """One invariant or expectation that did not hold: rule, step, member, partition, time."""

    rule: str
    message: str
    at_ms: int
    step: str = ""
    members: list[str] = field(default_factory=list)
    partition: str = ""

    def key(self) -> tuple[str, str, str, tuple[str, ...]]:
        return (self.rule, self.step, self.partition, tuple(self.members))


@dataclass
class StepReport:
    """What one step did to the group."""

    index: int
    name: str
    action: str
    started_ms: int
    action_ms: int = 0
    settled_ms: int | None = None
    finished_ms: int | None = None
    cause: str = ""
    rejoin_reasons: dict[str, list[str]] = field(default_factory=dict)
    generations: list[int] = field(default_factory=list)
    settle_ms: int | None = None  # from the action to the group stable again
    unassigned_ms: dict[str, int] = field(default_factory=dict)
    moved: list[dict[str, Any]] = field(default_factory=list)
    affected: list[str] = field(default_factory=list)
    errors: dict[str, dict[str, int]] = field(default_factory=dict)
    revoked: dict[str, int] = field(default_factory=dict)
    fenced: list[str] = field(default_factory=list)
    diagnoses: list[dict[str, Any]] = field(default_factory=list)  # each new generation's
    protocol_changes: list[str] = field(default_factory=list)  # where a mixed group migrated
    details: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    status: str = "running"  # running | ok | failed | not settled | interrupted

    @property
    def rebalances(self) -> int:
        return len(self.generations)


@dataclass
class Journal:
    """Everything a run found out, in the order it happened."""

    scenario: str
    run_id: str
    group: str
    bootstrap: str
    origin: str = ""
    topics: dict[str, str] = field(default_factory=dict)  # logical name -> real name
    started_ms: int = 0
    finished_ms: int | None = None
    setup: dict[str, Any] = field(default_factory=dict)
    # The cluster's group bounds and the timings changed to fit them (kgctl/chaos/fit.py).
    cluster: dict[str, Any] = field(default_factory=dict)
    steps: list[StepReport] = field(default_factory=list)
    violations: list[ViolationRecord] = field(default_factory=list)
    invariants: dict[str, str] = field(default_factory=dict)  # rule -> held | violated
    records: dict[str, int] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdict: str = "running"  # running | passed | failed | interrupted | setup failed
    error: str = ""
    exit_status: int = 0

    def add_violation(self, v: ViolationRecord) -> bool:
        if any(old.key() == v.key() for old in self.violations):
            return False
        self.violations.append(v)
        self.invariants[v.rule] = "violated"
        return True

    def held(self, rule: str) -> None:
        self.invariants.setdefault(rule, "held")

    def finish(
        self,
        interrupted: bool = False,
        error: str = "",
        error_status: ExitStatus = ExitStatus.SETUP_FAILED,
    ) -> None:
        if error:
            self.verdict, self.error, self.exit_status = ("setup failed", error, error_status)
        elif interrupted:
            self.verdict, self.exit_status = "interrupted", ExitStatus.INTERRUPTED
        elif self.violations:
            self.verdict, self.exit_status = "failed", ExitStatus.INVARIANT_FAILED
        else:
            self.verdict, self.exit_status = "passed", ExitStatus.OK

    @property
    def ok(self) -> bool:
        return self.verdict == "passed"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["exit_status"] = int(self.exit_status)
        for s, step in zip(out["steps"], self.steps, strict=True):
            s["rebalances"] = step.rebalances
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Journal:
        """A journal as `to_dict` wrote it (a recording's ScenarioFinished carries one)."""
        known = {f.name for f in fields(StepReport)}
        steps = [StepReport(**{k: v for k, v in s.items() if k in known}) for s in d["steps"]]
        violations = [ViolationRecord(**v) for v in d.get("violations", [])]
        rest = {k: v for k, v in d.items() if k not in ("steps", "violations")}
        return cls(**rest, steps=steps, violations=violations)
