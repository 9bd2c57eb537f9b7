"""The compatibility tier's broker handle and kgctl runner (see conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Compat:
    """One running broker of the tier and where its state lives."""

    name: str
    bootstrap: str
    state_dir: Path
    log: Path

    def topic(self, partitions: int = 2) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.admin import KafkaAdminClient, NewTopic
        name = f"compat-{uuid.uuid4().hex[:10]}"
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()
        return name


def kgctl(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
        check=False,
    )
