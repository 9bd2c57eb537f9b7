"""`kgctl broker`: a real local Kafka, as a user drives it from the shell."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgctl.broker import provision
from kgctl.broker.local import LocalBroker
from kgctl.errors import ExitStatus, MissingDependencyError, SetupError, UsageError


def kgctl(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    return state != "Z"


@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment whose `kgctl broker` state lives in a fresh folder."""
    env = dict(os.environ, KGCTL_STATE_DIR=str(tmp_path / "state"))
    yield env
    kgctl("broker", "down", env=env)


@pytest.mark.kafka
def test_up_status_logs_down_from_other_shells(isolated: dict[str, str], bootstrap: str) -> None:
    del bootstrap  # the session broker has fetched the jars into the cache already
    up = kgctl("broker", "up", "--output", "json", env=isolated)
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    assert set(info) == {
        "bootstrap",
        "pids",
        "data_dir",
        "version",
        "metadata",
        "consumer_protocol",
        "security",
        "acls",
        "client_config",
    }
    assert (info["metadata"], info["consumer_protocol"]) == ("kraft", False)
    assert info["bootstrap"].startswith("127.0.0.1:") and info["version"] == "4.4.0"
    (pid,) = info["pids"]
    assert alive(pid)

    again = kgctl("broker", "up", "--output", "json", env=isolated)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == info, "a second up must reuse the running broker"

    status = kgctl("broker", "status", env=isolated)
    assert status.returncode == 0
    assert "running" in status.stdout and info["bootstrap"] in status.stdout

    logs = kgctl("broker", "logs", "-n", "200", env=isolated)
    assert "Kafka Server started" in logs.stdout

    down = kgctl("broker", "down", env=isolated)
    assert down.returncode == 0
    assert not alive(pid)
    after = kgctl("broker", "status", "--output", "json", env=isolated)
    assert after.returncode == 1 and json.loads(after.stdout)["running"] is False


@pytest.mark.kafka
def test_dead_broker_is_reported_and_replaced(isolated: dict[str, str], bootstrap: str) -> None:
    del bootstrap
    first = json.loads(kgctl("broker", "up", "-o", "json", env=isolated).stdout)
    os.kill(first["pids"][0], signal.SIGKILL)

    status = kgctl("broker", "status", "-o", "json", env=isolated)
    assert status.returncode == 1
    report = json.loads(status.stdout)
    assert report["dead"] == [1]
    assert "DEAD" in kgctl("broker", "status", env=isolated).stdout

    second = json.loads(kgctl("broker", "up", "-o", "json", env=isolated).stdout)
    assert second["bootstrap"] == first["bootstrap"], "the replacement keeps the port"
    assert second["pids"] != first["pids"] and alive(second["pids"][0])


@pytest.mark.kafka
def test_up_right_after_down_in_the_same_process(tmp_path: Path, bootstrap: str) -> None:
    # A restart within one process (chaos's failover, a test session, a benchmark): the
    # new JVM's /proc cmdline can read empty just after its start, and `up` took that for
    # "exited while starting" (it failed 3 times in 3 after a first cycle).
    del bootstrap
    from kgctl.broker.local import LocalBroker, node_is_running

    broker = LocalBroker(tmp_path / "state" / "broker.json")
    try:
        for _ in range(3):
            state = broker.up(timeout_s=120)
            assert all(node_is_running(n) for n in state.nodes)
            broker.down()
    finally:
        broker.down()


@pytest.mark.kafka
def test_down_stops_only_what_kgctl_started(isolated: dict[str, str], bootstrap: str) -> None:
    del bootstrap
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state_file = Path(isolated["KGCTL_STATE_DIR"]) / "broker.json"
        kgctl("broker", "up", env=isolated)
        state = json.loads(state_file.read_text())
        # A state file that names a pid kgctl did not start (pid reuse) must not kill it.
        state["nodes"][0]["pid"], real_pid = bystander.pid, state["nodes"][0]["pid"]
        state_file.write_text(json.dumps(state))
        kgctl("broker", "down", env=isolated)
        assert bystander.poll() is None, "down killed a process it did not start"
        os.kill(real_pid, signal.SIGKILL)
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.kafka
def test_plain_kafka_python_client_uses_the_broker(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    topic = f"kgctl.test.plain-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        producer.send(topic, str(i).encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=f"g-{uuid.uuid4().hex[:6]}",
        consumer_timeout_ms=15000,
    )
    try:
        values = sorted(int(r.value) for r in consumer)
    finally:
        consumer.close()
    assert values == list(range(10))


def test_missing_java_is_one_line(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path), KGCTL_STATE_DIR=str(tmp_path / "s"))
    env.pop("JAVA_HOME", None)
    done = subprocess.run(
        [sys.executable, "-m", "kgctl", "broker", "up"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == ExitStatus.MISSING_DEPENDENCY
    assert done.stderr.strip().count("\n") == 0
    assert "java not found" in done.stderr and "17" in done.stderr
    assert "Traceback" not in done.stderr


def test_old_java_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.21\" 2023-10-17' >&2\n")
    fake.chmod(0o755)
    with pytest.raises(MissingDependencyError, match="Java 11 found.*needs Java 17"):
        provision.check_java(str(fake))


def test_java_11_runs_kafka_3_but_not_4(tmp_path: Path) -> None:
    # Audit defect 8: Java 17 was asked of every version, though 3.x brokers run on 11.
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.21\" 2023-10-17' >&2\n")
    fake.chmod(0o755)
    assert provision.check_java(str(fake), "3.7.2") == 11
    with pytest.raises(MissingDependencyError, match="Kafka 4.4.0 needs Java 17"):
        provision.check_java(str(fake), "4.4.0")


def test_zookeeper_mode_is_refused_on_kafka_4(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path / "broker.json")
    with pytest.raises(UsageError, match="ZooKeeper mode ended with Kafka 3.9"):
        broker.up(metadata="zookeeper", version="4.4.0")
    assert not (tmp_path / "broker.json").exists()


# -- the download path, against a local HTTP server serving a tarball built here ----------


def _release_tarball(version: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in (f"kafka_2.13-{version}.jar", f"kafka-clients-{version}.jar"):
            data = b"not really a jar"
            info = tarfile.TarInfo(f"kafka_2.13-{version}/libs/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "mirror"
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(root), **k
    )
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def _publish(root: Path, version: str, checksum: str | None = None) -> None:
    tarball = _release_tarball(version)
    folder = root / version
    folder.mkdir(parents=True)
    name = f"kafka_2.13-{version}.tgz"
    (folder / name).write_bytes(tarball)
    digest = checksum or hashlib.sha512(tarball).hexdigest().upper()
    grouped = " ".join(digest[i : i + 8] for i in range(0, len(digest), 8))
    (folder / f"{name}.sha512").write_text(f"{name}: {grouped[:70]}\n {grouped[70:]}\n")


def test_download_with_good_checksum_lands_in_cache(
    mirror: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = mirror
    _publish(root, "9.9.1")
    monkeypatch.setenv("KGCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KGCTL_KAFKA_MIRROR", url)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no mvn: fall through to download
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    seen: list[int] = []
    dist = provision.resolve_kafka("9.9.1", progress=lambda _l, done, _t: seen.append(done))
    assert dist.origin == "download"
    assert (dist.libs / "kafka_2.13-9.9.1.jar").exists()
    assert seen and seen[-1] == (root / "9.9.1" / "kafka_2.13-9.9.1.tgz").stat().st_size
    again = provision.resolve_kafka("9.9.1")
    assert again.origin == "cache" and again.libs == dist.libs


def test_download_with_bad_checksum_installs_nothing(
    mirror: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = mirror
    _publish(root, "9.9.2", checksum="AB" * 64)
    cache = tmp_path / "cache"
    monkeypatch.setenv("KGCTL_CACHE_DIR", str(cache))
    with pytest.raises(SetupError, match="sha512 .* does not match"):
        provision.fetch_release("9.9.2", mirror=url)
    assert not (cache / "kafka-9.9.2").exists()
    assert [p.name for p in cache.iterdir()] == [], "nothing half-written is left behind"


def test_unreachable_mirror_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGCTL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(SetupError, match="cannot download .*--kafka-home"):
        provision.fetch_release("9.9.3", mirror="http://127.0.0.1:9")


def test_kafka_home_that_is_not_kafka(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="not an unpacked Apache Kafka"):
        provision.resolve_kafka("4.4.0", kafka_home=tmp_path)


def test_cluster_ids_are_never_read_as_options(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid as uuid_module

    from kgctl.broker import local

    # 0xf8 in the first byte encodes to a leading "-" in URL-safe base64.
    dashed = uuid_module.UUID(bytes=bytes([0xF8]) + bytes(15))
    fine = uuid_module.UUID(bytes=bytes([0x10]) + bytes(15))
    drawn = iter([dashed, dashed, fine])
    monkeypatch.setattr(local.uuid, "uuid4", lambda: next(drawn))
    cluster_id = local._kraft_cluster_id()
    assert not cluster_id.startswith("-") and len(cluster_id) == 22


def test_a_failed_start_names_its_own_error_not_an_older_runs(tmp_path: Path) -> None:
    from kgctl.broker import local

    log = tmp_path / "server.log"
    log.write_text("[t0] ERROR an earlier run's failure\n")
    local._log_sizes_at_start[str(log)] = log.stat().st_size  # what _start_node notes
    with log.open("a") as out:
        out.write("[t1] INFO starting\n")
    assert local._last_error(log) == "no error in its log"
    with log.open("a") as out:
        out.write("[t2] ERROR this start's failure\n")
    assert local._last_error(log) == "[t2] ERROR this start's failure"


def _processes_mentioning(needle: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if needle in cmd and stat[0] != "Z":
            found.append(f"{entry.name} {cmd[:120]}")
    return found


@pytest.mark.kafka
def test_an_up_that_times_out_stops_the_node_it_started(
    isolated: dict[str, str], bootstrap: str
) -> None:
    del bootstrap  # the session broker has fetched the jars into the cache already
    state_dir = isolated["KGCTL_STATE_DIR"]
    # A JVM takes seconds to answer: half a second is a node that does not answer in time.
    up = kgctl("broker", "up", "--timeout", "0.5", env=isolated)
    assert up.returncode == int(ExitStatus.SETUP_FAILED), up.stderr
    lines = up.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer within" in lines[0], up.stderr
    assert _processes_mentioning(state_dir) == []
    status = kgctl("broker", "status", env=isolated)
    assert status.stdout.startswith("not running"), status.stdout
