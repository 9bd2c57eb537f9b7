"""The truth suite's one fixture: every situation of every client kind, run side by side
on the session broker (each in its own group), its ground truth read, and kgctl asked in
every view. Runs once per pytest session; the tests only read its results."""

from __future__ import annotations

import gzip
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

# Situations run at once (each with its own group, three or four client processes).
SIDE_BY_SIDE = 12

sys.path.insert(0, str(Path(__file__).parent))

from harness import VIEWS, Proxy, Run, ask, ask_text, unique  # noqa: E402
from situations import (  # noqa: E402
    CLASSIC_TIMING,
    CLIENTS,
    RUNS,
    SITUATIONS,
    Context,
    Outcome,
    classic,
    judge,
    truth_of,
)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "truth-admin"})


def _create(admin: Any, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result()


def _grow(admin: Any, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewPartitions

    for future in admin.create_partitions([NewPartitions(topic, partitions)]).values():
        future.result()


def _created(admin: Any, topic: str, partitions: int, topics: list[str], lock: Any) -> None:
    """A topic a situation makes (a subscription change's second), deleted at the end."""
    with lock:
        topics.append(topic)
    _create(admin, topic, partitions)


@pytest.fixture(scope="session")
def truth_outcomes(
    bootstrap: str, broker_logs: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str], Outcome]]:
    admin = _admin(bootstrap)
    empty_state = tmp_path_factory.mktemp("truth-no-local-broker")
    trace_topic = unique("truth-trace")
    proxy = Proxy(bootstrap, trace_topic)
    topics: list[str] = []
    lock = threading.Lock()
    ctx = Context(
        proxy=proxy,
        grow=lambda topic, n: _grow(admin, topic, n),
        create=lambda topic, n: _created(admin, topic, n, topics, lock),
    )
    outcomes: dict[tuple[str, str], Outcome] = {key: Outcome() for key in RUNS}
    texts = os.environ.get("KGCTL_TRUTH_TEXT")
    if any(CLIENTS[c].program == "client_java.py" for c, _ in RUNS):
        _java_archive(tmp_path_factory.mktemp("truth-java") / "classes.jsa", admin, proxy)

    def one(key: tuple[str, str], delay: float) -> None:
        client, situation = key
        out = outcomes[key]
        time.sleep(delay)  # starts spread out: two cores, fifty processes
        began = time.monotonic()
        topic, group = unique(f"truth-{situation}"), unique(f"truth-{situation}-{client}")
        out.group = group
        with lock:
            topics.append(topic)
        kind = CLIENTS[client]
        conf = dict(kind.conf)
        if classic(client):
            conf.update(CLASSIC_TIMING)
        run = Run(client, situation, group, topic, 6, proxy.bootstrap, kind.program, conf)
        try:
            _create(admin, topic, 6)
            expected = SITUATIONS[situation](run, ctx)
            out.truth = truth_of(run, expected)
            out.callbacks = run.callbacks(expected.action_ms - 5000)
            proxy.await_published(group)  # the wire views read the trace topic
            for view in VIEWS:
                out.answers[view] = ask(
                    view,
                    group,
                    bootstrap,
                    trace_topic=trace_topic,
                    broker_logs=broker_logs,
                    empty_state=empty_state,
                )
                out.verdicts[view] = judge(out.truth, out.answers[view], view)
            if texts:
                _keep_texts(Path(texts), key, run, bootstrap, trace_topic, broker_logs)
        except Exception:
            out.error = traceback.format_exc()
        finally:
            run.end()
            out.seconds = time.monotonic() - began

    # The longest (Kafka's 45 s session) first, then the rest side by side, at most
    # SIDE_BY_SIDE at once: all of them together (a Java member is a JVM) starved this
    # 2-core machine, and setups never settled within their limits.
    # The clients' runs interleaved, so that the JVMs do not all start in one wave.
    nth = {key: [k for k in RUNS if k[0] == key[0]].index(key) for key in RUNS}
    order = sorted(RUNS, key=lambda key: (key[1] != "kill-45s", nth[key]))
    try:
        with ThreadPoolExecutor(max_workers=min(len(order), SIDE_BY_SIDE)) as pool:
            for i, key in enumerate(order):
                # The first wave starts spread out; the others as slots free up.
                pool.submit(one, key, i * 0.7 if i < SIDE_BY_SIDE else 0.0)
        dump = os.environ.get("KGCTL_TRUTH_DUMP")
        if dump:
            _dump(Path(dump), outcomes)
        yield outcomes
    finally:
        proxy.stop()
        admin.delete_topics([*topics, trace_topic])


def _java_archive(path: Path, admin: Any, proxy: Proxy) -> None:
    """One Java member's classes archived for the others (KGCTL_TRUTH_JAVA_CDS): a member
    that joins a group of its own and closes writes it as it exits."""
    os.environ["KGCTL_TRUTH_JAVA_CDS"] = str(path)
    topic = unique("truth-java-warm")
    _create(admin, topic, 1)
    run = Run(
        "java", "warm", unique("truth-java-warm"), topic, 1, proxy.bootstrap, "client_java.py", {}
    )
    try:
        run.start(1)
        run.settle(1, quiet_ms=0, timeout_s=60)
    finally:
        run.end()
        admin.delete_topics([topic])
    if not path.exists():  # the members run without it: slower, not wrong
        del os.environ["KGCTL_TRUTH_JAVA_CDS"]


def _keep_texts(
    into: Path,
    key: tuple[str, str],
    run: Run,
    bootstrap: str,
    trace_topic: str,
    broker_logs: list[Path],
) -> None:
    """explain's text, for a person to read (KGCTL_TRUTH_TEXT=DIR), and the group's wire
    trace (`.wire.jsonl.gz`: what tests/test_wire_truth.py reads as data)."""
    from kgctl.adapters.trace import read_trace
    from kgctl.settings import ClientSettings

    into.mkdir(parents=True, exist_ok=True)
    logs = [a for log in broker_logs for a in ("--broker-log", str(log))]
    name = f"{key[0]}-{key[1]}"
    (into / f"{name}.direct.txt").write_text(ask_text(run.group, bootstrap, *logs))
    (into / f"{name}.wire.txt").write_text(
        ask_text(run.group, bootstrap, "--trace-topic", trace_topic)
    )
    events = read_trace(ClientSettings(bootstrap=bootstrap), trace_topic, run.group, 0, 30)
    lines = "".join(e.to_json() + "\n" for e in events)
    (into / f"{name}.wire.jsonl.gz").write_bytes(gzip.compress(lines.encode()))


def _dump(path: Path, outcomes: dict[tuple[str, str], Outcome]) -> None:
    """Every run's truth and verdicts as JSON (KGCTL_TRUTH_DUMP=FILE), to read a failure."""
    doc = {}
    for (client, situation), out in outcomes.items():
        doc[f"{client} {situation}"] = {
            "group": out.group,
            "seconds": round(out.seconds, 1),
            "error": out.error,
            "truth": None
            if out.truth is None
            else {
                "expected": vars(out.truth.expected),
                "revoked": out.truth.revoked,
                "moved": out.truth.moved,
                "without": out.truth.without,
                "second_round": out.truth.second_round,
                "revoked_ms": list(out.truth.revoked_ms),
                "settled_ms": out.truth.settled_ms,
            },
            "verdicts": {v: vars(verdict) for v, verdict in out.verdicts.items()},
            "callbacks": out.callbacks,
            "said": {
                view: [
                    {
                        k: g.get(k)
                        for k in (
                            "generation",
                            "start_ms",
                            "trigger",
                            "critical_path",
                            "partitions_moved",
                            "partitions_revoked",
                            "cost",
                        )
                    }
                    for g in answer.get("generations", [])
                    if out.truth and (g.get("start_ms") or 0) >= out.truth.expected.action_ms - 300
                ]
                + [answer.get("notes"), answer.get("error")]
                for view, answer in out.answers.items()
            },
        }
    path.write_text(json.dumps(doc, indent=1))
