"""Kafka calls for `kgctl chaos`: its own topics, partition growth, a numbered producer.

The only chaos module that imports kafka-python. Topic and partition changes wait until
the metadata shows them, so a step that follows sees the new layout.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

import kafka.errors as Errors
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

from kgctl.adapters import clients
from kgctl.adapters.admin import GroupAdmin
from kgctl.errors import ExitStatus, KgctlError, SetupError
from kgctl.model.bounds import KAFKA_DEFAULTS, GroupBounds
from kgctl.model.state import REBALANCING_STATES
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


class ChaosAdmin:
    """Admin calls chaos needs; opened once per run, closed at the end."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._admin = clients.admin(settings, "kgctl-chaos")
        self._brokers: list[dict[str, Any]] | None = None
        self._groups: GroupAdmin | None = None  # opened by the first group_rebalancing

    def _described_brokers(self) -> list[dict[str, Any]]:
        # Asked once per run: the broker count and the bounds both read it before the
        # fleet starts, and a cluster's membership does not change between the two.
        if self._brokers is None:
            self._brokers = list(self._admin.describe_cluster().get("brokers", []))
        return self._brokers

    def _error(self, exc: Exception, what: str) -> KgctlError:
        # A broker's refusal of a chaos step is a set-up failure, not a lost connection.
        return clients.translate(exc, self.settings, doing=what, otherwise=ExitStatus.SETUP_FAILED)

    def close(self) -> None:
        try:
            self._admin.close()
        except Exception:  # closing must not hide the run's own result
            log.debug("admin close failed", exc_info=True)
        if self._groups is not None:
            self._groups.close()

    def group_rebalancing(self, group: str) -> bool:
        """Whether the coordinator has the classic group in a rebalance now (Preparing or
        Completing). False when it cannot say: the run's own view stands then."""
        if self._groups is None:
            # A short budget: the question is asked while the step settles, and a
            # cluster that does not answer at once leaves the run's own view to decide.
            self._groups = GroupAdmin(dataclasses.replace(self.settings, timeout_s=2.0))
        try:
            state = self._groups.describe(group, with_lag=False).state
        except KgctlError:
            return False
        return state in REBALANCING_STATES

    def broker_count(self) -> int:
        try:
            return len(self._described_brokers())
        except Exception as exc:
            raise self._error(exc, "describe cluster") from None

    def group_bounds(self) -> GroupBounds:
        """The group settings the cluster enforces (DescribeConfigs of one broker).

        Every broker of a cluster is meant to share these; one answer is enough. Where the
        principal may not describe configs, Kafka's defaults are assumed and the bounds say
        so: the run then fails fast if the cluster's are different (INVALID_SESSION_TIMEOUT).
        """
        try:
            brokers = self._described_brokers()
            if not brokers:
                return GroupBounds.assumed("the cluster described no broker")
            node = str(min(b["broker_id"] for b in brokers))
            wanted = ConfigResource(ConfigResourceType.BROKER, node, dict.fromkeys(KAFKA_DEFAULTS))
            answer = self._admin.describe_configs([wanted], config_filter="all")
        except (Errors.AuthorizationError, Errors.ClusterAuthorizationFailedError) as exc:
            return GroupBounds.assumed(f"the cluster refused DescribeConfigs ({exc})")
        except Exception as exc:
            raise self._error(exc, "describe the cluster's group settings") from None
        configs = (answer.get("broker") or {}).get(node) or {}
        if not configs:
            return GroupBounds.assumed(f"broker {node} described no group settings")
        return GroupBounds.from_configs({k: (v or {}).get("value") for k, v in configs.items()})

    def existing_topics(self) -> set[str]:
        try:
            return set(self._admin.list_topics())
        except Exception as exc:
            raise self._error(exc, "list topics") from None

    def group_type(self, group: str) -> str:
        """The group's type as the broker lists it (classic, consumer), "" if not listed.
        A group migrating between protocols changes type (KIP-848's online conversion)."""
        try:
            listed = self._admin.list_groups()
        except Exception as exc:
            raise self._error(exc, "list groups") from None
        for g in listed:
            if g.get("group_id") == group:
                return str(g.get("group_type") or "")
        return ""

    def group_exists(self, group: str) -> bool:
        try:
            listed = self._admin.list_groups()
        except Exception as exc:
            raise self._error(exc, "list groups") from None
        return any(g.get("group_id") == group for g in listed)

    def create_topics(self, topics: dict[str, int], replication: int) -> None:
        if not topics:
            return
        new = [NewTopic(name, n, replication) for name, n in sorted(topics.items())]
        try:
            self._admin.create_topics(new, timeout_ms=int(self.settings.timeout_s * 1000))
        except Exception as exc:
            raise self._error(exc, f"create topics {', '.join(sorted(topics))}") from None
        self._wait_partitions(topics)

    def grow_partitions(self, topic: str, count: int) -> None:
        try:
            self._admin.create_partitions(
                {topic: NewPartitions(total_count=count)},
                timeout_ms=int(self.settings.timeout_s * 1000),
            )
        except Exception as exc:
            raise self._error(exc, f"grow {topic} to {count} partitions") from None
        self._wait_partitions({topic: count})

    def partition_counts(self, topics: list[str]) -> dict[str, int]:
        try:
            described = self._admin.describe_topics(topics)
        except Exception as exc:
            raise self._error(exc, "describe topics") from None
        return {
            str(t.get("name", t.get("topic"))): len(t.get("partitions", []))
            for t in described
            if not t.get("error_code")
        }

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        """{topic id: name} of `topics` (Metadata v10+ names each topic's id; a topic
        without one is left out)."""
        try:
            described = self._admin.describe_topics(topics)
        except Exception as exc:
            raise self._error(exc, "describe topics") from None
        out: dict[str, str] = {}
        for t in described:
            tid, name = t.get("topic_id"), t.get("name", t.get("topic"))
            if tid is not None and not t.get("error_code") and int(getattr(tid, "int", 1)):
                out[str(tid)] = str(name)
        return out

    def _wait_partitions(self, want: dict[str, int], timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                have = self.partition_counts(sorted(want))
            except KgctlError:
                have = {}
            if all(have.get(t, 0) >= n for t, n in want.items()):
                return
            if time.monotonic() > deadline:
                raise SetupError(f"topics {want} not visible after {timeout_s:.0f}s (have {have})")
            time.sleep(0.2)

    def delete_topics(self, topics: list[str]) -> None:
        if not topics:
            return
        try:
            self._admin.delete_topics(topics, timeout_ms=5000)
        except Exception:  # cleanup is best effort; the run's verdict stands
            log.debug("delete topics failed", exc_info=True)

    def delete_group(self, group: str) -> None:
        try:
            self._admin.delete_groups([group])
        except Exception:  # cleanup is best effort
            log.debug("delete group failed", exc_info=True)

    def coordinator_of(self, group: str) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator."""
        try:
            node_id = self._admin._manager.run(self._admin._find_coordinator_id, group)
            meta = self._admin._manager.cluster.broker_metadata(node_id)
        except Exception as exc:
            raise self._error(exc, f"find the coordinator of {group}") from None
        host = meta.host if meta is not None else ""
        port = int(meta.port) if meta is not None else 0
        return int(node_id), host, port


class NumberedProducer:
    """Writes `kgctl:<run>:<n>` records and remembers each acknowledged (topic, partition, offset).

    `produce(count)` is synchronous; `start_rate(per_s)` produces in the background until
    `stop_rate()`. Partitions are chosen round-robin from the current metadata.
    """

    def __init__(self, settings: ClientSettings, run_id: str) -> None:
        self._producer = clients.producer(
            settings,
            "kgctl-chaos-producer",
            acks="all",
            linger_ms=5,
            metadata_max_age_ms=1000,
            retries=10,
        )
        self.run_id = run_id
        self.acked: list[tuple[str, int, int]] = []
        self.failed = 0
        self._n = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._topics: list[str] = []

    def _partitions(self, topic: str) -> list[int]:
        parts = self._producer.partitions_for(topic)
        return sorted(parts) if parts else [0]

    def _send(self, topic: str) -> Any:
        with self._lock:
            self._n += 1
            n = self._n
        parts = self._partitions(topic)
        value = f"kgctl:{self.run_id}:{n}".encode()
        return self._producer.send(topic, value=value, partition=parts[n % len(parts)])

    def _settle(self, futures: list[Any], timeout_s: float = 30.0) -> None:
        for fut in futures:
            try:
                meta = fut.get(timeout=timeout_s)
            except Exception:
                with self._lock:
                    self.failed += 1
                continue
            with self._lock:
                self.acked.append((meta.topic, meta.partition, meta.offset))

    def produce(self, topics: list[str], count: int) -> int:
        futures = [self._send(topics[i % len(topics)]) for i in range(count)]
        self._producer.flush()
        self._settle(futures)
        return len(futures)

    def start_rate(self, topics: list[str], per_s: float) -> None:
        self._topics = list(topics)
        if per_s <= 0 or self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            period = 1.0 / per_s
            i = 0
            pending: list[Any] = []
            next_at = time.monotonic()
            while not self._stop.is_set():
                try:
                    pending.append(self._send(self._topics[i % len(self._topics)]))
                except Exception:
                    log.debug("background produce failed", exc_info=True)
                i += 1
                if len(pending) >= 20:
                    self._settle(pending)
                    pending = []
                next_at += period
                self._stop.wait(max(0.0, next_at - time.monotonic()))
            self._producer.flush()
            self._settle(pending)

        self._thread = threading.Thread(target=loop, name="kgctl-chaos-producer", daemon=True)
        self._thread.start()

    def set_topics(self, topics: list[str]) -> None:
        self._topics = list(topics)

    def stop_rate(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=35)
            self._thread = None

    def produced(self) -> list[tuple[str, int, int]]:
        with self._lock:
            return list(self.acked)

    def close(self) -> None:
        self.stop_rate()
        try:
            self._producer.close(timeout=5)
        except Exception:  # best effort
            log.debug("producer close failed", exc_info=True)
