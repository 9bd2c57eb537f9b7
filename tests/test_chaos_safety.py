"""kgctl chaos never damages what it did not create: a group or topics that already
exist are refused (and left exactly as they were), `--allow-destructive` is the one way
to act on someone else's group (and even then it is not deleted), and partitions are
grown only on a loopback cluster unless `--allow-destructive` is given."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers import group_with_offsets

from kgctl.chaos.runner import ChaosRun, RunOptions, is_loopback
from kgctl.chaos.scenarios import builtin
from kgctl.errors import ExitStatus, UsageError
from kgctl.settings import ClientSettings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

# One member, one step: enough to join, consume and commit in a group.
TINY = """\
name: tiny
description: one member joins, consumes and commits for a second
fleet:
  members: 1
  session_timeout_ms: 6000
  heartbeat_interval_ms: 500
  topics: {orders: 2}
  produce_rate: 20
  commit: sync
steps:
  - name: consume
    action: wait
    seconds: 1
"""


def chaos(bootstrap: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgctl", "chaos", "run", *args, "-b", bootstrap,
         "--timeout", "15"],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    offsets = admin.list_group_offsets(group).get(group, {})
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def groups(admin: Any) -> set[str]:
    return {g["group_id"] for g in admin.list_groups()}


@pytest.mark.kafka
def test_a_group_kgctl_did_not_create_is_refused_and_left_as_it_was(
    bootstrap: str, admin: Any, topic: Any
) -> None:
    t = topic(1)
    group = group_with_offsets(bootstrap, t, 3)
    done = chaos(bootstrap, "member-kill", "--group", group)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert len(lines) == 1 and "already exists and kgctl did not create it" in lines[0]
    assert "--allow-destructive" in lines[0]
    # Refused means untouched: the group and its committed offset are still there.
    assert group in groups(admin)
    assert committed(admin, group) == {(t, 0): 3}


@pytest.mark.kafka
def test_allow_destructive_acts_on_the_group_and_does_not_delete_it(
    bootstrap: str, admin: Any, topic: Any, tmp_path: Path
) -> None:
    t = topic(1)
    group = group_with_offsets(bootstrap, t, 3)
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    done = chaos(bootstrap, str(scenario), "--group", group, "--allow-destructive", "-o", "json")
    assert done.returncode == ExitStatus.OK, done.stderr[-2000:]
    journal = json.loads(done.stdout)
    assert journal["verdict"] == "passed" and journal["group"] == group
    # It acted in the group: the member joined it and consumed.
    assert journal["records"]["consumed"] > 0
    # The group is the user's: its own offset survives and the group is not deleted;
    # the topics kgctl made for the run are.
    assert group in groups(admin)
    assert committed(admin, group).get((t, 0)) == 3
    assert not set(journal["topics"].values()) & set(admin.list_topics())


@pytest.mark.kafka
def test_a_run_deletes_the_topics_and_the_group_it_created(
    bootstrap: str, admin: Any, tmp_path: Path
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    done = chaos(bootstrap, str(scenario), "-o", "json")
    assert done.returncode == ExitStatus.OK, done.stderr[-2000:]
    journal = json.loads(done.stdout)
    assert journal["group"] not in groups(admin)
    assert not set(journal["topics"].values()) & set(admin.list_topics())


@pytest.mark.kafka
def test_topics_that_already_exist_are_refused_and_kept(
    bootstrap: str, admin: Any, topic: Any
) -> None:
    from kafka.admin import NewTopic

    run = ChaosRun(builtin("member-kill"), ClientSettings(bootstrap=bootstrap))
    try:
        # Someone else's topics under the names this run would create.
        names = sorted(run.topics.values())
        admin.create_topics([NewTopic(topic.adopt(n), 1, 1) for n in names])
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send(names[0], b"theirs").get(timeout=30)
        producer.close()
        with pytest.raises(UsageError, match="already exist; kgctl creates its own"):
            run.run()
    finally:
        shutil.rmtree(run.workdir, ignore_errors=True)
    assert set(names) <= set(admin.list_topics())
    reader = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(names[0], 0)
        assert reader.end_offsets([tp])[tp] == 1  # its record is still there
    finally:
        reader.close()


def test_partition_growth_off_loopback_needs_allow_destructive(tmp_path: Path) -> None:
    # No connection is made: the check runs before any client is built.
    remote = ClientSettings(bootstrap="192.0.2.10:9092")
    refused = ChaosRun(builtin("partition-growth"), remote)
    allowed = ChaosRun(builtin("partition-growth"), remote, RunOptions(allow_destructive=True))
    local = ChaosRun(builtin("partition-growth"), ClientSettings(bootstrap="localhost:9092"))
    try:
        with pytest.raises(UsageError, match="--allow-destructive") as refusal:
            refused.check_safety()
        assert "grows partitions (irreversible)" in str(refusal.value)
        allowed.check_safety()
        local.check_safety()
        # A scenario that grows nothing needs no permission anywhere.
        ChaosRun(builtin("member-kill"), remote).check_safety()
    finally:
        for run in (refused, allowed, local):
            shutil.rmtree(run.workdir, ignore_errors=True)


@pytest.mark.parametrize(
    ("bootstrap", "loopback"),
    [
        ("127.0.0.1:9092", True),
        ("[::1]:9092", True),
        ("localhost:9092,127.0.0.2:9093", True),
        ("127.0.0.1:9092,192.0.2.10:9092", False),
        ("192.0.2.10:9092", False),
        ("no-such-host.invalid:9092", False),
    ],
)
def test_only_loopback_addresses_count_as_local(bootstrap: str, loopback: bool) -> None:
    assert is_loopback(bootstrap) is loopback


def test_demo_on_a_remote_cluster_takes_the_flag_its_refusal_names(tmp_path: Path) -> None:
    """`kgctl demo -b REMOTE` refuses to grow partitions and names --allow-destructive;
    with it, the demo goes past the check (and here fails to connect: nothing listens)."""
    remote = "192.0.2.10:9092"  # TEST-NET-1: never routed, nothing answers
    base = [sys.executable, "-m", "kgctl", "demo", "-b", remote, "--out-dir", str(tmp_path)]
    refused = subprocess.run([*base, "--timeout", "2"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == int(ExitStatus.USAGE), refused.stderr
    assert "pass --allow-destructive" in refused.stderr
    allowed = subprocess.run(
        [*base, "--allow-destructive", "--timeout", "2"], capture_output=True, text=True, timeout=60
    )
    assert allowed.returncode == int(ExitStatus.CANNOT_CONNECT), allowed.stderr
    assert "--allow-destructive" not in allowed.stderr
