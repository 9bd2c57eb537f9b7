"""Running a proxy until told to stop: the asyncio loop, stdin control lines, signals.

`run_proxy` is what `kgctl proxy` calls and what tests and chaos can call on a thread
(`ProxyThread`): it starts the listeners, emits `ProxyStarted` (whose `bootstrap` is the
address to give clients), applies fault rules given at start and as JSON control lines,
and stops on `stop()`, SIGINT or SIGTERM, emitting `ProxyStopped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from kgctl.adapters.cluster import describe_cluster
from kgctl.errors import UsageError
from kgctl.model.events import Event
from kgctl.proxy.faults import Rule, RuleError, parse_control, parse_rule
from kgctl.proxy.server import DEFAULT_MAX_FRAME_BYTES, Proxy
from kgctl.proxy.trace import WireEmitter
from kgctl.settings import ClientSettings


@dataclass
class ProxyConfig:
    """What `kgctl proxy` was asked to do."""

    listen: tuple[str, int] = ("127.0.0.1", 0)
    rules: list[Rule] = field(default_factory=list)
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    # API key -> the highest version ApiVersions may advertise (an older broker as the
    # clients see it; `--cap-version`).
    version_caps: dict[int, int] = field(default_factory=dict)
    trace_metadata: bool = False  # MetadataTraced events too (--trace-metadata)
    trace_fetch: bool = False  # FetchTraced events too (chaos runs with app members)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise UsageError(
            f"--listen {text!r}: expected HOST:PORT, for example 127.0.0.1:9092 (port 0: any)"
        )
    return host.strip("[]"), int(port)


def upstream_ssl(settings: ClientSettings) -> ssl.SSLContext | None:
    """The TLS context for the upstream side, from the client settings (None: plaintext)."""
    cfg = settings.kafka_config()
    if not str(cfg.get("security_protocol", "PLAINTEXT")).endswith("SSL"):
        return None
    context: ssl.SSLContext = cfg.get("ssl_context") or ssl.create_default_context(
        cafile=cfg.get("ssl_cafile")
    )
    if cfg.get("ssl_certfile"):
        context.load_cert_chain(
            cfg["ssl_certfile"], cfg.get("ssl_keyfile"), cfg.get("ssl_password")
        )
    context.check_hostname = bool(cfg.get("ssl_check_hostname", True))
    return context


def upstream_addresses(settings: ClientSettings) -> list[tuple[str, int]]:
    out = []
    for part in settings.bootstrap.split(","):
        host, _, port = part.strip().rpartition(":")
        out.append((host.strip("[]"), int(port)))
    return out


class ProxyRun:
    """One proxy on its own asyncio loop; `serve` blocks until `stop`."""

    def __init__(
        self,
        settings: ClientSettings,
        config: ProxyConfig,
        sink: Callable[[Event], None],
        *,
        control: IO[str] | None = None,
        handle_signals: bool = False,
    ) -> None:
        self.settings, self.config, self.sink = settings, config, sink
        self.control = control
        self.handle_signals = handle_signals
        self.bootstrap: str | None = None
        self.started = threading.Event()
        self.proxy: Proxy | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.stopped_by: str = "stop"

    # Called from any thread.
    def stop(self, why: str = "stop") -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            self.stopped_by = why
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)

    def add_rule(self, rule: Rule | str) -> Rule:
        """Parse here (errors raise in the caller), apply on the loop; returns the rule
        (its `id` set, unless it had one)."""
        if isinstance(rule, str):
            rule = parse_rule(rule)
        added = rule
        self._call(lambda: self._add(added))
        return added

    def remove_rule(self, rule_id: str) -> None:
        self._call(lambda: self._remove(rule_id))

    def clear_rules(self) -> None:
        self._call(self._clear)

    def _call(self, fn: Callable[[], Any]) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the proxy is not running")
        done = threading.Event()

        def call() -> None:
            try:
                fn()
            finally:
                done.set()

        loop.call_soon_threadsafe(call)
        done.wait(5.0)

    # On the loop.
    def _add(self, rule: Rule) -> None:
        assert self.proxy is not None
        self.proxy.faults.add(rule, time.monotonic())
        self.proxy.emit.emit("FaultRuleAdded", **rule.to_dict())

    def _remove(self, rule_id: str) -> None:
        assert self.proxy is not None
        gone = self.proxy.faults.remove(rule_id)
        for rule in gone:
            self.proxy.emit.emit(
                "FaultRuleRemoved", id=rule.id, rule=rule.text, applied=rule.applied, why="removed"
            )
        if not gone:
            self.proxy.emit.emit("ControlRejected", error=f"no rule {rule_id!r}")

    def _clear(self) -> None:
        assert self.proxy is not None
        for rule in self.proxy.faults.clear():
            self.proxy.emit.emit(
                "FaultRuleRemoved", id=rule.id, rule=rule.text, applied=rule.applied, why="cleared"
            )

    def _control_line(self, line: str) -> None:
        assert self.proxy is not None
        if not line.strip():
            return
        try:
            op, arg = parse_control(line)
        except RuleError as exc:
            self.proxy.emit.emit("ControlRejected", error=str(exc))
            return
        if op == "add":
            self._add(arg)
        elif op == "remove":
            self._remove(arg)
        elif op == "clear":
            self._clear()
        else:
            for rule in self.proxy.faults.rules:
                self.proxy.emit.emit(
                    "FaultRuleAdded", **rule.to_dict(), applied=rule.applied, listed=True
                )

    def _read_control(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.control is not None
        for line in self.control:
            loop.call_soon_threadsafe(self._control_line, line)

    async def _expire(self) -> None:
        # A rule whose count or for= ran out is reported gone within half a second.
        assert self.proxy is not None
        while True:
            await asyncio.sleep(0.5)
            for rule in self.proxy.faults.expired(time.monotonic()):
                self.proxy.emit.emit(
                    "FaultRuleRemoved",
                    id=rule.id,
                    rule=rule.text,
                    applied=rule.applied,
                    why="expired",
                )

    async def _check_upstream(self) -> None:
        """Refuse to start in front of a cluster that does not answer as Kafka (clients
        would only see their connections closed, one by one): the same check, and the
        same one-line error, as every other command's first client."""
        await asyncio.to_thread(describe_cluster, self.settings)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        emitter = WireEmitter(self.sink)
        self.proxy = Proxy(
            upstream_addresses(self.settings),
            emitter,
            listen=self.config.listen,
            upstream_ssl=upstream_ssl(self.settings),
            max_frame_bytes=self.config.max_frame_bytes,
            connect_timeout_s=self.settings.timeout_s,
            version_caps=self.config.version_caps,
            trace_metadata=self.config.trace_metadata,
            trace_fetch=self.config.trace_fetch,
        )
        if self.handle_signals:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._loop.add_signal_handler(sig, self.stop, sig.name)
        await self._check_upstream()
        try:
            self.bootstrap = await self.proxy.start()
        except OSError as exc:
            host, port = self.config.listen
            raise UsageError(
                f"--listen {host}:{port}: "
                f"cannot listen there ({exc.strerror}); pick another address"
            ) from None
        emitter.emit(
            "ProxyStarted",
            bootstrap=self.bootstrap,
            upstream=self.settings.bootstrap,
            tls_upstream=self.proxy.upstream_ssl is not None,
            max_frame_bytes=self.config.max_frame_bytes,
        )
        for rule in self.config.rules:
            self._add(rule)
        if self.control is not None:
            threading.Thread(
                target=self._read_control,
                args=(self._loop,),
                daemon=True,
                name="kgctl-proxy-control",
            ).start()
        expire = asyncio.create_task(self._expire())
        self.started.set()
        try:
            await self._stop.wait()
        finally:
            expire.cancel()
            await self.proxy.close()
            emitter.emit(
                "ProxyStopped",
                why=self.stopped_by,
                connections=self.proxy.connections,
                requests=self.proxy.requests,
            )

    def serve(self) -> None:
        """Run until stop(); raises what start-up raised."""
        try:
            asyncio.run(self._main())
        finally:
            self.started.set()
            self._loop = None


class ProxyThread(threading.Thread):
    """A ProxyRun on a daemon thread (tests, benchmarks, chaos): `start()` returns once
    the proxy listens; `bootstrap` is its address; `close()` stops it and waits."""

    def __init__(
        self,
        settings: ClientSettings,
        config: ProxyConfig | None = None,
        sink: Callable[[Event], None] | None = None,
    ) -> None:
        super().__init__(name="kgctl-proxy", daemon=True)
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._user_sink = sink
        self.run_ = ProxyRun(settings, config or ProxyConfig(), self._sink)
        self.error: BaseException | None = None

    def _sink(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
        if self._user_sink is not None:
            self._user_sink(event)

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)

    def run(self) -> None:
        try:
            self.run_.serve()
        except BaseException as exc:  # handed to start()'s caller
            self.error = exc

    def start(self) -> None:
        super().start()
        self.run_.started.wait(30)
        if self.error is not None:
            raise self.error

    @property
    def bootstrap(self) -> str:
        assert self.run_.bootstrap is not None
        return self.run_.bootstrap

    def close(self, timeout_s: float = 10.0) -> None:
        self.run_.stop()
        self.join(timeout_s)
