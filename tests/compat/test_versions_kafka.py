"""kgctl on Kafka 3.7.2 (KRaft), 3.9.1 (ZooKeeper) and 3.9.1 (KRaft, KIP-848 on).

Each test names the audit defect it pins (docs/broker.md's support matrix cites them);
the classic jobs are checked on every broker, the consumer protocol's refusals where
the broker cannot serve it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
import warnings

import pytest
from compat_broker import Compat, kgctl

from kgctl.adapters.cluster import probe
from kgctl.errors import ExitStatus
from kgctl.settings import ClientSettings

pytestmark = pytest.mark.kafka


def group() -> str:
    return f"compat-{uuid.uuid4().hex[:10]}"


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.startswith("kgctl: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# -- what each broker serves (the matrix's protocol and ConsumerGroupDescribe columns) --


def test_what_each_broker_serves(k37: Compat, k39zk: Compat, k39kip848: Compat) -> None:
    found = {
        b.name: probe(ClientSettings(bootstrap=b.bootstrap, timeout_s=10))
        for b in (k37, k39zk, k39kip848)
    }
    assert found["3.7.2"].version == "3.7"
    assert found["3.7.2"].consumer_group_describe == "absent"
    assert found["3.9.1-zk"].consumer_group_describe == "off"  # advertised, answers 35
    assert found["3.9.1-kip848"].consumer_group_describe == "answers"
    assert found["3.7.2"].consumer_protocol_missing is not None
    assert found["3.9.1-zk"].consumer_protocol_missing is not None
    assert found["3.9.1-kip848"].consumer_protocol_missing is None
    # Internal on 3.x: DescribeConfigs leaves the migration policy out; not assumed.
    assert found["3.9.1-kip848"].migration_policy is None
    assert found["3.9.1-kip848"].migration_policy_unknown is not None
    assert found["3.9.1-kip848"].online_migration_missing is None


# -- classic jobs on every broker --------------------------------------------------------


def test_a_classic_member_joins_and_is_assigned(any_broker: Compat) -> None:
    topic, g = any_broker.topic(2), group()
    done = kgctl("join", topic, "-g", g, "-b", any_broker.bootstrap, "--duration", "4",
                 "-o", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    types = [json.loads(line).get("type") for line in done.stdout.splitlines() if line]
    assert "PartitionsAssigned" in types
    # KIP-800 (Kafka 3.2+): the broker's log gives the join's reason.
    log = any_broker.log.read_text(errors="replace")
    assert any(g in ln and "reason" in ln for ln in log.splitlines() if "Preparing" in ln)


def test_member_kill_scenario_passes(any_broker: Compat) -> None:
    done = kgctl("chaos", "run", "member-kill", "-b", any_broker.bootstrap, "-q", timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr


def test_explain_and_fail_if_missing_of_a_group_not_there_yet(any_broker: Compat) -> None:
    # Audit defect 1: on 3.8/3.9 (ConsumerGroupDescribe advertised, answered 35) these
    # were exit 3, "Kafka at … failed: UNSUPPORTED_VERSION".
    g = group()
    watched = kgctl("watch", g, "-b", any_broker.bootstrap, "--fail-if-missing", "--once")
    assert watched.returncode == ExitStatus.NOT_FOUND, watched.stderr
    assert "failed: UNSUPPORTED_VERSION" not in watched.stderr  # the false "cannot connect"
    explained = kgctl("explain", g, "-b", any_broker.bootstrap)
    assert explained.returncode == ExitStatus.UNHEALTHY, explained.stderr
    assert "failed: UNSUPPORTED_VERSION" not in explained.stderr


def test_the_broker_without_consumer_groups_is_said_once(k37: Compat) -> None:
    # Audit defect 6: on 3.7 `watch --once -o json` said it twice, its document read
    # through a second admin that found it out again.
    done = kgctl("watch", group(), "-b", k37.bootstrap, "--once", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("describes no consumer-protocol (KIP-848) groups") == 1, done.stderr


def test_watch_waits_for_a_group_then_shows_it(k39zk: Compat) -> None:
    topic, g = k39zk.topic(2), group()
    watch = subprocess.Popen(
        [sys.executable, "-m", "kgctl", "watch", g, "-b", k39zk.bootstrap, "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)
        assert watch.poll() is None, watch.communicate()[1]  # still waiting, no exit 3
        member = kgctl("join", topic, "-g", g, "-b", k39zk.bootstrap, "--duration", "5")
        assert member.returncode == 0, member.stderr
        # A group deleted under a live watch: exit 3 on 3.9 before (each describe of the
        # missing group met error 35); now the watch waits for it again.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=k39zk.bootstrap)
        try:
            assert admin.delete_groups([g]) == {g: "OK"}
        finally:
            admin.close()
        time.sleep(3)
        assert watch.poll() is None, watch.communicate()[1]
    finally:
        watch.terminate()
        out, err = watch.communicate(timeout=30)
    assert "failed: UNSUPPORTED_VERSION" not in err
    assert err.count("describes no consumer-protocol") <= 1  # audit defect 6: warned once
    assert g in out and "Stable" in out


def test_group_list_without_group_types_says_classic(k37: Compat) -> None:
    # Audit defect 5: 3.7's ListGroups has no group type; the list said "consumer".
    topic, g = k37.topic(1), group()
    member = subprocess.Popen(
        [sys.executable, "-m", "kgctl", "join", topic, "-g", g, "-b", k37.bootstrap,
         "--duration", "8", "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        listing: dict[str, str] = {}
        while g not in listing and time.monotonic() < deadline:
            done = kgctl("watch", "-b", k37.bootstrap, "-o", "json")
            assert done.returncode == 0, done.stderr
            rows = json.loads(done.stdout)
            rows = rows.get("groups", rows) if isinstance(rows, dict) else rows
            listing = {r["group"]: r.get("group_type") or r.get("type") for r in rows}
            time.sleep(0.5)
    finally:
        member.terminate()
        member.wait(timeout=30)
    assert listing.get(g) == "classic"


# -- the consumer protocol where it is served, refused where it is not -------------------


def test_consumer_protocol_member_on_kip848_preview(k39kip848: Compat) -> None:
    topic, g = k39kip848.topic(2), group()
    done = kgctl("join", topic, "-g", g, "-b", k39kip848.bootstrap, "--group-protocol",
                 "consumer", "--duration", "5", "-o", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "GroupHeartbeatAnswered" in done.stdout


@pytest.mark.parametrize("name", ["k37", "k39zk"])
def test_consumer_protocol_member_is_refused_with_why(
    name: str, request: pytest.FixtureRequest
) -> None:
    # Audit defect 3: "UNSUPPORTED_VERSION: the member cannot continue", nothing of why.
    broker: Compat = request.getfixturevalue(name)
    started = time.monotonic()
    done = kgctl("join", broker.topic(1), "-g", group(), "-b", broker.bootstrap,
                 "--group-protocol", "consumer")  # fmt: skip
    assert time.monotonic() - started < 20
    assert done.returncode == ExitStatus.MEMBER_FAILED
    line = one_line(done.stderr)
    assert "--group-protocol classic" in line and "group.coordinator.rebalance.protocols" in line
    assert "Kafka 3." in line


@pytest.mark.parametrize(
    ("name", "scenario", "named"),
    [
        ("k37", "protocol-showdown", "group.coordinator.rebalance.protocols"),
        ("k39zk", "migrate-online", "group.coordinator.rebalance.protocols"),
        (
            "k39kip848",
            "migrate-online",
            "group.consumer.migration.policy=disabled (read from its log)",
        ),
        ("k39zk", "member-kill --group-protocol consumer", "--group-protocol classic"),
    ],
)
def test_a_scenario_the_broker_cannot_serve_ends_in_seconds(
    name: str, scenario: str, named: str, request: pytest.FixtureRequest
) -> None:
    # Audit defects 2 and 4: minutes, then exit 5 blaming an invariant (or a hang).
    broker: Compat = request.getfixturevalue(name)
    started = time.monotonic()
    # The broker as `kgctl broker up` leaves it: its state dir, whose log gives the
    # migration policy DescribeConfigs does not on 3.x.
    env = dict(os.environ, KGCTL_STATE_DIR=str(broker.state_dir))
    done = kgctl("chaos", "run", *scenario.split(), "-b", broker.bootstrap, env=env)
    assert time.monotonic() - started < 30
    assert done.returncode == ExitStatus.SETUP_FAILED, done.stdout[-1000:] + done.stderr
    assert named in one_line(done.stderr)


def test_another_version_in_the_same_state_dir_is_refused(k37: Compat) -> None:
    # Audit defect 7: exit 0 with the running 3.7.2's address.
    env = dict(os.environ, KGCTL_STATE_DIR=str(k37.state_dir))
    done = kgctl("broker", "up", "--kafka-version", "3.9.1", "-q", env=env)
    assert done.returncode == ExitStatus.USAGE
    line = one_line(done.stderr)
    assert "3.7.2" in line and "3.9.1" in line and k37.bootstrap in line
    assert done.stdout == ""
