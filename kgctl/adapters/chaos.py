"""Kafka calls for `kgctl chaos`: its own topics, partition growth, a numbered producer.

The only chaos module that imports kafka-python. Topic and partition changes wait until
the metadata shows them, so a step that follows sees the new layout.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Any

from kgctl.errors import ConnectError, KgctlError, NotAuthorizedError, SetupError
from kgctl.model.bounds import KAFKA_DEFAULTS, GroupBounds
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


def _kafka() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka

    from kgctl.adapters.sockets import close_abandoned_connects

    close_abandoned_connects()
    return kafka


def _translate(exc: Exception, what: str) -> KgctlError:
    import kafka.errors as Errors

    # kafka-python 3.0.12 names: SaslAuthenticationFailedError; no NoBrokersAvailable.
    if isinstance(exc, Errors.AuthorizationError | Errors.SaslAuthenticationFailedError):
        return NotAuthorizedError(f"{what}: the cluster refused ({exc}); check credentials/ACLs")
    if isinstance(exc, Errors.KafkaConnectionError | Errors.KafkaTimeoutError):
        from kgctl.adapters.cluster import why_unreachable

        servers = what.removeprefix("connect to ")
        return ConnectError(
            f"{what}: cannot reach Kafka ({why_unreachable(servers)}); check -b, the "
            "security settings and that the broker is up"
        )
    return SetupError(f"{what}: {type(exc).__name__}: {exc}")


class ChaosAdmin:
    """Admin calls chaos needs; opened once per run, closed at the end."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        kafka = _kafka()
        cfg = settings.kafka_config()
        cfg.setdefault("client_id", "kgctl-chaos")
        try:
            self._admin = kafka.KafkaAdminClient(**cfg)
        except Exception as exc:
            raise _translate(exc, f"connect to {settings.bootstrap}") from None

    def close(self) -> None:
        try:
            self._admin.close()
        except Exception:  # closing must not hide the run's own result
            log.debug("admin close failed", exc_info=True)

    def broker_count(self) -> int:
        try:
            return len(self._admin.describe_cluster().get("brokers", []))
        except Exception as exc:
            raise _translate(exc, "describe cluster") from None

    def group_bounds(self) -> GroupBounds:
        """The group settings the cluster enforces (DescribeConfigs of one broker).

        Every broker of a cluster is meant to share these; one answer is enough. Where the
        principal may not describe configs, Kafka's defaults are assumed and the bounds say
        so: the run then fails fast if the cluster's are different (INVALID_SESSION_TIMEOUT).
        """
        import kafka.errors as Errors
        from kafka.admin import ConfigResource, ConfigResourceType

        try:
            brokers = self._admin.describe_cluster().get("brokers", [])
            node = str(min(b["broker_id"] for b in brokers))
            wanted = ConfigResource(ConfigResourceType.BROKER, node, dict.fromkeys(KAFKA_DEFAULTS))
            answer = self._admin.describe_configs([wanted], config_filter="all")
        except (Errors.AuthorizationError, Errors.ClusterAuthorizationFailedError) as exc:
            return GroupBounds.assumed(f"the cluster refused DescribeConfigs ({exc})")
        except Exception as exc:
            raise _translate(exc, "describe the cluster's group settings") from None
        configs = (answer.get("broker") or {}).get(node) or {}
        if not configs:
            return GroupBounds.assumed(f"broker {node} described no group settings")
        return GroupBounds.from_configs({k: (v or {}).get("value") for k, v in configs.items()})

    def existing_topics(self) -> set[str]:
        try:
            return set(self._admin.list_topics())
        except Exception as exc:
            raise _translate(exc, "list topics") from None

    def group_exists(self, group: str) -> bool:
        try:
            listed = self._admin.list_groups()
        except Exception as exc:
            raise _translate(exc, "list groups") from None
        return any(g.get("group_id") == group for g in listed)

    def create_topics(self, topics: dict[str, int], replication: int) -> None:
        from kafka.admin import NewTopic

        if not topics:
            return
        new = [NewTopic(name, n, replication) for name, n in sorted(topics.items())]
        try:
            self._admin.create_topics(new, timeout_ms=int(self.settings.timeout_s * 1000))
        except Exception as exc:
            raise _translate(exc, f"create topics {', '.join(sorted(topics))}") from None
        self._wait_partitions(topics)

    def grow_partitions(self, topic: str, count: int) -> None:
        from kafka.admin import NewPartitions

        try:
            self._admin.create_partitions(
                {topic: NewPartitions(total_count=count)},
                timeout_ms=int(self.settings.timeout_s * 1000),
            )
        except Exception as exc:
            raise _translate(exc, f"grow {topic} to {count} partitions") from None
        self._wait_partitions({topic: count})

    def partition_counts(self, topics: list[str]) -> dict[str, int]:
        try:
            described = self._admin.describe_topics(topics)
        except Exception as exc:
            raise _translate(exc, "describe topics") from None
        return {
            str(t.get("name", t.get("topic"))): len(t.get("partitions", []))
            for t in described
            if not t.get("error_code")
        }

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
            self._admin.delete_consumer_groups([group])
        except Exception:  # cleanup is best effort
            log.debug("delete group failed", exc_info=True)

    def coordinator_of(self, group: str) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator."""
        try:
            node_id = self._admin._manager.run(self._admin._find_coordinator_id, group)
            meta = self._admin._manager.cluster.broker_metadata(node_id)
        except Exception as exc:
            raise _translate(exc, f"find the coordinator of {group}") from None
        host = meta.host if meta is not None else ""
        port = int(meta.port) if meta is not None else 0
        return int(node_id), host, port


class NumberedProducer:
    """Writes `kgctl:<run>:<n>` records and remembers each acknowledged (topic, partition, offset).

    `produce(count)` is synchronous; `start_rate(per_s)` produces in the background until
    `stop_rate()`. Partitions are chosen round-robin from the current metadata.
    """

    def __init__(self, settings: ClientSettings, run_id: str) -> None:
        kafka = _kafka()
        cfg = settings.kafka_config()
        cfg.update(acks="all", linger_ms=5, metadata_max_age_ms=1000, retries=10)
        cfg.setdefault("client_id", "kgctl-chaos-producer")
        try:
            self._producer = kafka.KafkaProducer(**cfg)
        except Exception as exc:
            raise _translate(exc, f"connect a producer to {settings.bootstrap}") from None
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
