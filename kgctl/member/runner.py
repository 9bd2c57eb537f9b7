"""One real consumer-group member: the poll loop, live control, stopping, and totals.

The protocol steps themselves are traced by the adapter's coordinator (on kafka-python's
I/O thread); this module owns the main thread: it polls, applies control commands,
writes every queued event to the sinks, and stops cleanly (commit, LeaveGroup, totals).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from kgctl.adapters import clients
from kgctl.adapters import consumer as adapter
from kgctl.adapters.control import ControlTopicReader
from kgctl.adapters.trace import TracePublisher
from kgctl.errors import ExitStatus, KgctlError, NotFoundError, UsageError
from kgctl.member.control import Command, ControlQueue
from kgctl.member.emitter import Emitter
from kgctl.member.reasons import fatal_error
from kgctl.member.stats import ConsumeStats
from kgctl.model.events import Event
from kgctl.model.kafka_errors import ENDS_MEMBER
from kgctl.settings import ClientSettings, check_topic_name

Sink = Callable[[Event], None]
COMMIT_MODES = ("auto", "sync", "async", "none")
GROUP_PROTOCOLS = ("classic", "consumer")
REMOTE_ASSIGNORS = ("uniform", "range")
POLL_MS = 200
# A member that does not fetch (`--no-fetch`) has no records to wait for: it polls without
# waiting and then sleeps until an event, a control command or a stop wakes it, or this long
# at most (auto-commit and max.poll.interval are kept by these polls; the heartbeats run on
# kafka-python's I/O thread and each one's event wakes it anyway). A signal's stop does not
# wake it (its handler takes no lock): it is seen within this long.
IDLE_WAIT_MS = 1000
# The most a stopping member spends on its last commit and LeaveGroup together.
CLOSE_BUDGET_S = 10.0
# The most it then waits for the trace topic to take its last events.
TRACE_CLOSE_S = 2.0
# Events a busy member emits all the time; the trace topic batches them (up to a second)
# while every other event, a step of the protocol, goes out at once.
ROUTINE_EVENTS = frozenset({"RecordsConsumed", "HeartbeatSucceeded", "OffsetsCommitted"})


@dataclass
class MemberConfig:
    """What `kgctl join` was asked to do (times in ms unless named _s)."""

    group: str
    topics: list[str] = field(default_factory=list)
    pattern: str | None = None
    # Consumer protocol only: a regex the member matches against topic names itself (Java's
    # subscribe(java.util.regex.Pattern)); it sends the names. `pattern` is the broker's.
    client_pattern: str | None = None
    assignors: list[str] = field(default_factory=lambda: ["range"])
    instance_id: str | None = None
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    max_poll_interval_ms: int | None = None
    client_id: str | None = None
    name: str | None = None
    processing_ms: float = 0.0
    commit: str = "auto"
    offset_reset: str = "earliest"
    max_records: int | None = None
    duration_s: float | None = None
    control_topic: str | None = None
    trace_topic: str | None = None
    fail_on_missing: bool = False
    # False: partitions are kept paused, so the member sends no Fetch at all (a fleet that
    # only needs members in the group); the MemberStarted event says so.
    fetch: bool = True
    fetch_max_wait_ms: int | None = None
    read_stdin: bool = True
    # Java's group.protocol: classic (JoinGroup/SyncGroup, kafka-python's coordinator)
    # or consumer (KIP-848, ConsumerGroupHeartbeat, kgctl/member/consumer_member.py).
    group_protocol: str = "classic"
    remote_assignor: str | None = None  # consumer protocol: the broker's assignor
    # Java's client.rack: Fetch's RackId (both protocols) and, with the consumer
    # protocol, the heartbeat's RackId, which the broker's rack-aware assignors read.
    client_rack: str | None = None

    def validate(self) -> None:
        if [bool(self.topics), bool(self.pattern), bool(self.client_pattern)].count(True) != 1:
            raise UsageError(
                "give TOPICS..., --pattern REGEX or --client-pattern REGEX (exactly one of them)"
            )
        if not self.group:
            raise UsageError("--group is required")

        for topic in self.topics:
            check_topic_name(topic)
        for option, name in (
            ("--control-topic", self.control_topic),
            ("--trace-topic", self.trace_topic),
        ):
            if name is not None:
                check_topic_name(name, option)
        if self.commit not in COMMIT_MODES:
            raise UsageError(f"--commit {self.commit!r}: expected one of {COMMIT_MODES}")
        for option, regex in (
            ("--pattern", self.pattern),
            ("--client-pattern", self.client_pattern),
        ):
            if regex is not None:
                try:
                    re.compile(regex)
                except re.error as exc:
                    raise UsageError(f"{option} {regex!r}: not a regex ({exc})") from None
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise UsageError(
                f"--group-protocol {self.group_protocol!r}: expected one of {GROUP_PROTOCOLS}"
            )
        if self.group_protocol == "consumer" and not self.fetch:
            raise UsageError(
                "--no-fetch is for the classic protocol (a consumer-protocol member's loop "
                "fetches); drop --no-fetch or --group-protocol consumer"
            )
        if self.group_protocol == "consumer":
            self._validate_consumer_protocol()
        elif self.remote_assignor is not None:
            raise UsageError(
                "--remote-assignor is for --group-protocol consumer "
                "(a classic group's members assign: use --assignor)"
            )
        elif self.client_pattern is not None:
            raise UsageError(
                "--client-pattern is for --group-protocol consumer (with the classic "
                "protocol --pattern is already matched by the member)"
            )

    def _validate_consumer_protocol(self) -> None:
        """Java refuses the classic-only settings with group.protocol=consumer, and so
        does kgctl: in a consumer group the broker owns them."""
        for option, value, instead in (
            ("--session-timeout", self.session_timeout_ms, "consumer.session.timeout.ms"),
            ("--heartbeat-interval", self.heartbeat_interval_ms, "consumer.heartbeat.interval.ms"),
        ):
            if value is not None:
                raise UsageError(
                    f"{option} is not a member setting with --group-protocol consumer: the "
                    f"broker sets it (group config {instead}); drop {option}"
                )
        if self.assignors != ["range"]:
            raise UsageError(
                "--assignor is not used with --group-protocol consumer: the broker "
                "assigns; choose its assignor with --remote-assignor uniform|range"
            )
        if self.remote_assignor is not None and self.remote_assignor not in REMOTE_ASSIGNORS:
            raise UsageError(
                f"--remote-assignor {self.remote_assignor!r}: expected one of {REMOTE_ASSIGNORS}"
            )
        if self.pattern is not None:
            # Here, not at the top: the KIP-848 state machine is no part of a classic
            # member, whose start-up pays for every module it imports (docs/benchmarks.md).
            from kgctl.member.membership import re2j_problem  # noqa: PLC0415

            problem = re2j_problem(self.pattern)
            if problem is not None:
                raise UsageError(
                    f"--pattern {self.pattern!r}: {problem}; with --group-protocol consumer "
                    "the broker matches the regex (RE2J syntax, whole topic names)"
                )

    @property
    def label(self) -> str:
        return self.name or self.instance_id or f"member-{os.getpid()}"


def _set_parent_death_signal() -> None:
    """Linux: ask the kernel to send SIGTERM when the parent dies (prctl PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


class Member:
    """A consumer-group member that emits an event at every step of the protocol."""

    def __init__(
        self,
        config: MemberConfig,
        settings: ClientSettings,
        sinks: list[Sink],
        *,
        stdin: IO[str] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.settings = settings
        self.sinks = list(sinks)
        self.stdin = stdin if stdin is not None else sys.stdin
        client_id = config.client_id or f"kgctl-{config.label}"
        self.client_id = client_id
        self.emitter = Emitter(config.group, config.label, client_id, config.instance_id)
        self.control = ControlQueue()
        self.stats = ConsumeStats()
        self.processing_ms = config.processing_ms
        self.paused = False
        # Set by anything the idle loop of a member that does not fetch must act on.
        self._idle_wake = threading.Event()
        # Events are written by the writer thread as soon as they are emitted, and by the
        # main thread at each flush; the lock keeps them one at a time and in order.
        self._write_lock = threading.RLock()
        self._events_waiting = threading.Event()
        self._writer: threading.Thread | None = None
        self._writer_error: BaseException | None = None
        self._trace_urgent = False
        # Events written before the trace topic's publisher exists (MemberStarted).
        self._trace_backlog: list[Event] = []
        self.emitter.on_emit = self._on_emit
        self._stop: str | None = None
        self._exit = ExitStatus.OK
        self._started = time.monotonic()
        self._ppid = os.getppid()
        self._consumer: Any = None
        self._coordinator: Any = None
        self._trace: Any = None
        self._control_reader: Any = None

    # -- events ---------------------------------------------------------------------------
    def emit(self, type_: str, **data: Any) -> None:
        self.emitter.emit(type_, **data)

    def _on_emit(self, event: Event) -> None:
        self._events_waiting.set()
        if event.type not in ROUTINE_EVENTS:
            # A step (an assignment to pause, a failure) is the idle loop's business; a
            # heartbeat's or a commit's answer is only written, by the writer: an idle
            # member's heartbeat wakes the I/O thread and the writer, not a third.
            self._idle_wake.set()

    def _write_pending(self) -> None:
        """Every queued event to the sinks, the totals and the trace topic's queue."""
        with self._write_lock:
            for event in self.emitter.drain():
                if event.type == "OffsetsCommitted":
                    self.stats.add_commit(
                        {
                            (t, int(p)): o
                            for t, ps in event.data.get("offsets", {}).items()
                            for p, o in ps.items()
                        }
                    )
                for sink in self.sinks:
                    sink(event)
                if self._trace is not None:
                    self._publish(event)
                elif self.config.trace_topic:
                    self._trace_backlog.append(event)

    def _publish(self, event: Event) -> None:
        self._trace.publish(event.group, event.to_json())
        self._trace_urgent = self._trace_urgent or event.type not in ROUTINE_EVENTS

    def _write_loop(self) -> None:
        # The main thread flushes only between polls, up to a poll (200 ms) after a step
        # happened on kafka-python's I/O thread: a reader of the events (kgctl chaos, a
        # script waiting for JoinCompleted) would learn of it that much later. This thread
        # writes each event when it is emitted; a sink that blocks (a full pipe) blocks
        # it, not the I/O thread's heartbeats.
        while self._writer is not None:
            self._events_waiting.wait()
            self._events_waiting.clear()
            try:
                self._write_pending()
            except BaseException as exc:  # raised again on the main thread, by flush
                self._writer_error = exc
                return

    def _start_writer(self) -> None:
        self._writer = threading.Thread(
            target=self._write_loop, name=f"kgctl-events-{self.config.label}", daemon=True
        )
        self._writer.start()

    def _stop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            self._events_waiting.set()
            writer.join()

    def flush(self) -> None:
        """Write what is queued (the writer thread may have written most of it)."""
        if self._writer_error is not None:
            error, self._writer_error = self._writer_error, None
            raise error
        self._write_pending()
        if self._trace is not None:
            with self._write_lock:
                urgent, self._trace_urgent = self._trace_urgent, False
                with contextlib.suppress(Exception):
                    self._trace.send_due(urgent=urgent)

    # -- stopping -------------------------------------------------------------------------
    def request_stop(self, reason: str, status: ExitStatus = ExitStatus.OK) -> None:
        self._mark_stop(reason, status)
        self._idle_wake.set()

    def _mark_stop(self, reason: str, status: ExitStatus) -> None:
        if self._stop is None:
            self._stop = reason
            self._exit = status

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # A handler runs on the main thread between two of its bytecodes, possibly inside
        # `_idle_wake.set()` (an event emitted there) with the event's lock held: setting
        # the event here would wait for that lock forever (seen: a SIGTERMed member hung
        # asleep, never leaving). It takes no lock; the loop sees the mark after its poll
        # (200 ms) or, with every partition paused, its idle wait (1 s).
        if signum == signal.SIGINT:
            self._mark_stop("SIGINT", ExitStatus.INTERRUPTED)
        else:
            self._mark_stop(signal.Signals(signum).name, ExitStatus.OK)

    def _install_signals(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            # SIGHUP: the terminal it ran in was closed. Java's shutdown hooks close the
            # consumer then too; without a handler the member died without LeaveGroup.
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    # -- the member ---------------------------------------------------------------------
    def run(self) -> ExitStatus:
        """Join, consume until told to stop, leave; return the exit status."""
        previous = self._install_signals()
        _set_parent_death_signal()
        self._start_writer()
        try:
            return self._run(previous)
        finally:
            self._stop_writer()  # every path out has flushed MemberStopped (`_stopped`)

    def _run(self, previous: dict[int, Any]) -> ExitStatus:
        cfg = self.config
        self.emit(
            "MemberStarted",
            config={k: v for k, v in asdict(cfg).items() if k != "read_stdin"},
            bootstrap=self.settings.bootstrap,
            client=self.settings.redacted()["properties"],
        )
        try:
            if cfg.trace_topic:
                trace = TracePublisher(self.settings, cfg.trace_topic)
                with self._write_lock:  # what was written before it existed goes first
                    self._trace = trace
                    for event in self._trace_backlog:
                        self._publish(event)
                    self._trace_backlog.clear()
            self._start()
            self.control.on_put = self._idle_wake.set
            if cfg.read_stdin:
                self.control.read_stream(self.stdin, "stdin")
            if cfg.control_topic:
                keys = {cfg.group, cfg.label}
                self._control_reader = ControlTopicReader(
                    self.settings,
                    cfg.control_topic,
                    keys,
                    lambda line: self.control.feed(line, "topic"),
                )
            self._loop()
        except KgctlError as exc:
            # A consumer-protocol member's fatal answer names the protocol error.
            error = getattr(exc, "protocol_error", None) or type(exc).__name__
            self._fail(error, str(exc), exc.status, leave=False, previous=previous)
            raise
        except Exception as exc:
            name = clients.error_name(exc)
            if name in ENDS_MEMBER or _is_kafka_error(exc):
                err = fatal_error(
                    name,
                    cfg.group,
                    str(exc)[:160],
                    principal=self.settings.principal,
                    topics=clients.topics_of(exc),
                )
                leave = name != "FENCED_INSTANCE_ID"
                self._fail(name, str(err), err.status, leave=leave, previous=previous)
                raise err from None
            # A bug (kgctl's or kafka-python's, e.g. a heartbeat loop that died: its
            # failure comes out of the next poll, as in Java). The member still says why
            # it ended and leaves the group; the CLI prints one line and exits 1.
            self._fail(name, str(exc)[:160], ExitStatus.ERROR, leave=True, previous=previous)
            raise
        self._close(leave=True)
        self._stopped(self._stop or "stopped")
        self._restore(previous)
        return self._exit

    def _start(self) -> None:
        """Build the consumer and subscribe (the classic protocol: kafka-python's
        coordinator, subclassed); the consumer-protocol member overrides this."""
        cfg = self.config
        consumer_config: dict[str, Any] = {
            "group_id": cfg.group,
            "client_id": self.client_id,
            "group_instance_id": cfg.instance_id,
            "enable_auto_commit": cfg.commit == "auto",
            "auto_offset_reset": cfg.offset_reset,
            "partition_assignment_strategy": [adapter.ASSIGNORS[a] for a in cfg.assignors],
            "fetch_max_bytes": 8 * 1024 * 1024,
        }
        if cfg.client_rack:
            consumer_config["client_rack"] = cfg.client_rack
        interval = self.settings.properties.get("auto.commit.interval.ms")
        if interval is not None:
            consumer_config["auto_commit_interval_ms"] = int(interval)
        for key in (
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "max_poll_interval_ms",
            "fetch_max_wait_ms",
        ):
            if getattr(cfg, key) is not None:
                consumer_config[key] = getattr(cfg, key)
        if cfg.max_records is not None:
            consumer_config["max_poll_records"] = max(1, min(500, cfg.max_records))
        consumer, coordinator = adapter.build_consumer(
            self.settings, self.emitter.emit, **consumer_config
        )
        self._consumer, self._coordinator = consumer, coordinator
        self.emitter.identity = coordinator.kg_identity
        if cfg.topics:
            existing = adapter.existing_topics(consumer, lambda: not self._should_stop())
            if existing is None:
                return  # asked to stop while the check was retrying: the loop stops
            self.topics_missing(sorted(set(cfg.topics) - existing))
        adapter.subscribe(consumer, self.emitter.emit, cfg.topics, cfg.pattern)

    def topics_missing(self, missing: list[str]) -> None:
        """Subscribed topics that do not exist yet: the member waits for them, saying so,
        or with --fail-on-missing ends."""
        if not missing:
            return
        if self.config.fail_on_missing:
            verb = "does not exist" if len(missing) == 1 else "do not exist"
            raise NotFoundError(
                f"topic {', '.join(missing)} {verb} (drop --fail-on-missing to wait for it)"
            )
        self.emit("TopicMissing", topics=missing)

    def _fail(
        self, error: str, message: str, status: ExitStatus, *, leave: bool, previous: dict[int, Any]
    ) -> None:
        """End a member that failed: say why, close (leaving the group if `leave`)."""
        self.emit("MemberFailed", error=error, message=message, exit_status=int(status))
        self._exit = status
        self._close(leave=leave)
        self._stopped("failed")
        self._restore(previous)

    def _restore(self, previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, handler)

    def _should_stop(self) -> bool:
        cfg = self.config
        if self._stop is None:
            if os.getppid() != self._ppid:
                self.request_stop("parent_exited")
            elif cfg.duration_s is not None and time.monotonic() - self._started >= cfg.duration_s:
                self.request_stop("duration")
            elif cfg.max_records is not None and self.stats.records >= cfg.max_records:
                self.request_stop("max_records")
        return self._stop is not None

    def _loop(self) -> None:
        consumer = self._consumer
        fetch = self.config.fetch
        assigned: set[Any] = set()
        while True:
            self._idle_wake.clear()
            self.flush()
            for command in self.control.drain():
                self._apply(command)
            if self._should_stop():
                return
            max_records = None
            if self.config.max_records is not None:
                max_records = max(1, self.config.max_records - self.stats.records)
            try:
                batches = consumer.poll(timeout_ms=POLL_MS if fetch else 0, max_records=max_records)
            except Exception as exc:
                if clients.retriable(exc) and clients.error_name(exc) not in ENDS_MEMBER:
                    time.sleep(0.1)
                    continue
                raise
            now_assigned = consumer.assignment()
            if (self.paused or not fetch) and now_assigned != assigned:
                consumer.pause(*now_assigned)
            assigned = set(now_assigned)
            if batches:
                self._consumed(batches)
            if not fetch:
                # kafka-python's poll with every partition paused sleeps 100 ms and returns:
                # ten wake-ups a second for nothing. Sleep until there is something to do.
                self._idle_wake.wait(IDLE_WAIT_MS / 1000)

    def _consumed(self, batches: dict[Any, list[Any]]) -> None:
        entries = []
        for tp, records in sorted(batches.items()):
            if records:
                entries.append(
                    self.stats.add_batch(tp.topic, tp.partition, [r.offset for r in records])
                )
        self.emit(
            "RecordsConsumed",
            batches=entries,
            count=sum(e["count"] for e in entries),
            duplicates=sum(e["duplicates"] for e in entries),
            total=self.stats.records,
        )
        self._process()
        self._commit(self.config.commit)

    def _process(self) -> None:
        """Simulated processing: sleep in slices, still writing events and obeying stops."""
        deadline = time.monotonic() + self.processing_ms / 1000
        while not self._stop:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))
            self.flush()

    def _commit(self, mode: str, timeout_s: float | None = None) -> None:
        try:
            if mode == "sync":
                timeout_s = self.settings.timeout_s if timeout_s is None else timeout_s
                self._consumer.commit(timeout_ms=int(timeout_s * 1000))
            elif mode == "async":
                self._consumer.commit_async()
        except Exception as exc:
            # The coordinator already emitted OffsetCommitFailed; only fencing is fatal.
            if clients.error_name(exc) in ENDS_MEMBER:
                raise

    def _apply(self, command: Command) -> None:
        info: dict[str, Any] = {"op": command.op, "source": command.source, "args": command.raw}
        if command.error:
            self.emit("ControlReceived", **info, applied=False, error=command.error)
            return
        applied, error = True, None
        try:
            if command.op == "subscribe":
                self._change_subscription(list(command.topics), command.pattern)
            elif command.op == "pause":
                self.paused = True
                self._consumer.pause(*self._consumer.assignment())
            elif command.op == "resume":
                if not self.config.fetch:
                    raise ValueError("this member does not fetch (--no-fetch): nothing to resume")
                self.paused = False
                self._consumer.resume(*self._consumer.paused())
            elif command.op == "processing_ms":
                self.processing_ms = float(command.value or 0)
            elif command.op == "commit":
                self.emit("ControlReceived", **info, applied=True)
                self._commit("sync")
                return
            elif command.op == "leave":
                self.request_stop("control_leave")
            elif command.op == "rejoin":
                self._rejoin()
        except (ValueError, TypeError) as exc:
            applied, error = False, str(exc)
        except Exception as exc:
            applied, error = False, f"{clients.error_name(exc)}: {exc}"
        self.emit("ControlReceived", **info, applied=applied, **({"error": error} if error else {}))

    # The two control requests whose meaning depends on the group protocol; a
    # consumer-protocol member overrides them, the rest of `_apply` serves both.
    def _change_subscription(self, topics: list[str], pattern: str | None) -> None:
        adapter.subscribe(self._consumer, self.emitter.emit, topics, pattern)

    def _rejoin(self) -> None:
        self._coordinator.request_rejoin("explicit_request")

    def _close_deadline(self) -> float:
        """When a stopping member gives up on its last commit and its leave (either
        protocol): CLOSE_BUDGET_S from now, or the client timeout when shorter."""
        return time.monotonic() + min(self.settings.timeout_s, CLOSE_BUDGET_S)

    def _close(self, leave: bool) -> None:
        consumer = self._consumer
        if consumer is not None:
            # One budget for the final commit and the close (LeaveGroup, auto-commit): with
            # the broker gone each would wait out its own timeout, and a stopped member
            # should be gone within seconds.
            deadline = self._close_deadline()
            coordinator = self._coordinator
            with contextlib.suppress(Exception):
                if leave and self.config.commit in ("sync", "async"):
                    self._commit("sync", timeout_s=deadline - time.monotonic())
            if coordinator is not None:
                coordinator._kg_why.leave = f"kgctl: member stopping ({self._stop or 'failed'})"
                if not leave:
                    coordinator._kg_closing = True
            with contextlib.suppress(Exception):
                consumer.close(
                    autocommit=leave and self.config.commit == "auto",
                    timeout_ms=max(int((deadline - time.monotonic()) * 1000), 1000),
                )
            self._consumer = None
        if self._control_reader is not None:
            self._control_reader.close()
            self._control_reader = None

    def _stopped(self, reason: str) -> None:
        self.flush()  # the totals include commits made while closing
        with self._write_lock:
            totals = self.stats.totals()
        self.emit("MemberStopped", reason=reason, exit_status=int(self._exit), **totals)
        self.flush()
        with self._write_lock:
            if self._trace is not None:
                with contextlib.suppress(Exception):
                    # A reachable broker takes the last events in milliseconds; an
                    # unreachable one would only add its wait to the budget the close
                    # already spent.
                    self._trace.close(timeout_s=TRACE_CLOSE_S)
                self._trace = None


def _is_kafka_error(exc: BaseException) -> bool:
    return any(c.__module__.startswith("kafka") for c in type(exc).__mro__[:-2])
