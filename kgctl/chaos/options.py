"""How to run a scenario, beyond the scenario itself: what the command line says."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kgctl.chaos.fit import TimingOverrides


@dataclass
class RunOptions:
    """How to run a scenario (beyond the scenario itself)."""

    topic_prefix: str = "kgctl."
    group: str | None = None  # an explicit group id (else kgctl.chaos.<scenario>.<run>)
    allow_destructive: bool = False
    keep_topics: bool = False
    broker_state: Path | None = None  # the LocalBroker state file (coordinator-failover)
    tie_nodes_to_parent: bool = False  # restarted broker nodes die with this process
    drain_timeout_s: float = 20.0
    timings: TimingOverrides = field(default_factory=TimingOverrides)  # --session-timeout ...
