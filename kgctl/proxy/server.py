"""The proxy itself: one local listener per upstream broker, frames forwarded whole.

Each client connection gets its own upstream connection to the broker its listener
stands for. Three coroutines serve it: requests (client -> broker: header parsed, fault
decided, frame forwarded, delayed, answered or held back), answers (broker -> proxy:
addresses rewritten, group APIs traced, Metadata too if asked) and the writer, which
sends answers to the client strictly in request order, as Kafka clients require,
whether an answer came from the broker or from a fault rule.

A frame is forwarded only when all of it has arrived, so neither side ever sees half a
frame; a frame larger than `max_frame_bytes`, a request whose header is not Kafka's, or
an answer to nothing that was asked ends that connection alone, with one
`ProxyConnectionAborted` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgctl.adapters import wire
from kgctl.proxy.faults import FaultBook, Rule
from kgctl.proxy.trace import WireEmitter

log = logging.getLogger(__name__)

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # the broker's socket.request.max.bytes default
_HANG = object()  # the answer that never comes (hang, blackhole)


class FrameError(Exception):
    """The peer broke framing: the connection cannot go on."""


async def read_frame(
    reader: asyncio.StreamReader, limit: int, *, client: bool = False
) -> bytes | None:
    """One whole frame's payload; None at a clean end of stream (between frames)."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise FrameError("closed in the middle of a frame's size") from None
        return None
    if client and head[0] == 0x16 and head[1] == 0x03:
        # A TLS handshake record (ClientHello): the proxy listens in plaintext only.
        raise FrameError(
            "TLS from the client is refused: the proxy listens in plaintext; give the "
            "client security.protocol=PLAINTEXT (or SASL_PLAINTEXT)"
        )
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > limit:
        raise FrameError(f"frame of {size} bytes is over the {limit}-byte limit")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise FrameError(f"closed after {len(exc.partial)} of a {size}-byte frame") from None


@dataclass
class Pending:
    """A request waiting for its answer."""

    header: wire.RequestHeader
    t0: float
    request: Any = None  # decoded, for traced APIs
    group: str | None = None
    rule: Rule | None = None
    drop: bool = False
    answer: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    traced: bool = False


@dataclass
class Listener:
    node_id: int
    upstream: list[tuple[str, int]]
    server: asyncio.AbstractServer | None = None
    host: str = ""
    port: int = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class Proxy:
    """A Kafka-aware TCP proxy in front of one cluster (asyncio; start, then serve)."""

    def __init__(
        self,
        upstream: list[tuple[str, int]],
        emitter: WireEmitter,
        *,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        faults: FaultBook | None = None,
        upstream_ssl: ssl.SSLContext | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connect_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        version_caps: dict[int, int] | None = None,
        trace_metadata: bool = False,
        trace_fetch: bool = False,
    ) -> None:
        if not upstream:
            raise ValueError("no upstream address")
        # What ApiVersions may advertise: what this codec follows, lowered further on
        # request (a cap below a key's minimum removes the key, as a broker without it).
        self.version_caps = wire.max_versions()
        for key, cap in (version_caps or {}).items():
            self.version_caps[key] = min(cap, self.version_caps.get(key, cap))
        self.upstream = upstream
        self.emit = emitter
        self.listen_host, self.listen_port = listen
        self.faults = faults if faults is not None else FaultBook()
        self.upstream_ssl = upstream_ssl
        self.max_frame_bytes = max_frame_bytes
        self.connect_timeout_s = connect_timeout_s
        self.clock = clock
        # The APIs whose exchanges become events: the group APIs, and Metadata when asked
        # (every client sends it, and decoding each answer twice more costs).
        self.traced = wire.TRACED | (wire.TRACED_ON_REQUEST if trace_metadata else frozenset())
        # Fetch answers' batch ranges (FetchTraced), walked from the bytes, never decoded
        # as objects: off unless asked (kgctl chaos turns it on for app members).
        self.trace_fetch = trace_fetch
        self.bootstrap: Listener | None = None
        self._by_upstream: dict[tuple[str, int], Listener] = {}
        self._conn_ids = itertools.count(1)
        # Each connection's task and the client's writer it was accepted with.
        self._tasks: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self._closing = False
        self._lowered: set[tuple[tuple[str, tuple[int, int]], ...]] = set()
        self._listener_lock: asyncio.Lock | None = None
        self.connections = 0
        self.requests = 0

    # -- listeners ---------------------------------------------------------------------

    async def start(self) -> str:
        """Open the bootstrap listener; returns the address to give clients."""
        self._listener_lock = asyncio.Lock()
        self.bootstrap = await self._open(
            -1, list(self.upstream), self.listen_host, self.listen_port
        )
        for addr in self.upstream:
            self._by_upstream[addr] = self.bootstrap
        return self.bootstrap.address

    async def _open(
        self, node_id: int, upstream: list[tuple[str, int]], host: str, port: int
    ) -> Listener:
        listener = Listener(node_id, upstream)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await self._serve(listener, reader, writer)
            except asyncio.CancelledError:
                # close() cancels the connections; asyncio would log a cancelled
                # connection task as an error in its callback.
                writer.close()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # A plain callback, not a coroutine: asyncio would wrap a coroutine in a task
            # of its own, which close() cannot see until it first runs; cancelled or
            # dropped before that, its StreamWriter was never closed (a ResourceWarning
            # in CI, twice, each time a client connected as the proxy closed).
            if self._closing:
                writer.close()
                return
            task = asyncio.get_running_loop().create_task(serve(reader, writer))
            self._tasks[task] = writer
            task.add_done_callback(self._connection_done)

        if self._closing:
            raise ConnectionError("the proxy is closing")
        listener.server = await asyncio.start_server(accepted, host, port, reuse_address=True)
        sock = listener.server.sockets[0].getsockname()
        # The address clients are told: a wildcard listen address is no address to
        # connect to, so they get this host's name instead.
        shown = str(sock[0])
        if shown in ("0.0.0.0", "::", ""):
            shown = socket.gethostname()
        listener.host, listener.port = shown, int(sock[1])
        if node_id >= 0:
            self.emit.emit(
                "ListenerOpened",
                node=node_id,
                upstream=f"{upstream[0][0]}:{upstream[0][1]}",
                address=listener.address,
            )
        return listener

    async def _listener_for(self, node_id: int, host: str, port: int) -> Listener:
        assert self._listener_lock is not None
        async with self._listener_lock:
            listener = self._by_upstream.get((host, port))
            if listener is None:
                listener = await self._open(node_id, [(host, port)], self.listen_host, 0)
                self._by_upstream[(host, port)] = listener
            return listener

    def _connection_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.debug("connection task failed", exc_info=task.exception())

    async def close(self) -> None:
        self._closing = True  # no connection is served, no listener opened, from now
        for listener in self._listeners():
            if listener.server is not None:
                listener.server.close()
        held = dict(self._tasks)
        for task in held:
            task.cancel()
        if held:
            await asyncio.gather(*held, return_exceptions=True)
        for writer in held.values():
            writer.close()  # a task cancelled before it ran never closed its own
        for listener in self._listeners():
            if listener.server is not None:
                with contextlib.suppress(Exception):
                    await listener.server.wait_closed()

    def _listeners(self) -> list[Listener]:
        return list({id(v): v for v in self._by_upstream.values()}.values())

    # -- one connection ----------------------------------------------------------------

    async def _connect_upstream(
        self, listener: Listener
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, tuple[str, int]]:
        last: Exception | None = None
        for host, port in listener.upstream:
            try:
                reader, writer = await self._open_within(host, port)
                return reader, writer, (host, port)
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
                last = exc
        raise ConnectionError(
            f"cannot reach upstream {listener.upstream[0][0]}:{listener.upstream[0][1]}: {last}"
        )

    async def _open_within(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """An upstream connection within `connect_timeout_s`. Not `asyncio.wait_for`: on
        Python 3.11 a connection made just as it times out or is cancelled is dropped
        unclosed; here one made after it was given up is closed."""
        opening = asyncio.ensure_future(
            asyncio.open_connection(
                host,
                port,
                ssl=self.upstream_ssl,
                server_hostname=host if self.upstream_ssl else None,
            )
        )
        try:
            done, _ = await asyncio.wait({opening}, timeout=self.connect_timeout_s)
        except asyncio.CancelledError:
            _give_up(opening)
            raise
        if not done:
            _give_up(opening)
            raise asyncio.TimeoutError(f"no connection within {self.connect_timeout_s:g} s")
        return opening.result()

    async def _serve(
        self, listener: Listener, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter
    ) -> None:
        conn = f"c{next(self._conn_ids)}"
        self.connections += 1
        peer = c_writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            u_reader, u_writer, upstream = await self._connect_upstream(listener)
        except ConnectionError as exc:
            self._aborted(conn, peer_s, "upstream", str(exc))
            c_writer.close()
            return
        session = _Session(self, conn, peer_s, upstream, c_reader, c_writer, u_reader, u_writer)
        await session.run()

    def _aborted(self, conn: str, peer: str, side: str, error: str) -> None:
        log.warning("connection %s from %s closed: %s: %s", conn, peer, side, error)
        self.emit.emit("ProxyConnectionAborted", connection=conn, peer=peer, side=side, error=error)


def _give_up(opening: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    """Stop waiting for a connection; should it be made after all, close it."""

    def close_if_made(f: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
        if not f.cancelled() and f.exception() is None:
            f.result()[1].close()

    opening.cancel()
    opening.add_done_callback(close_if_made)


class _Session:
    """One client connection and its upstream connection."""

    def __init__(
        self,
        proxy: Proxy,
        conn: str,
        peer: str,
        upstream: tuple[str, int],
        c_reader: asyncio.StreamReader,
        c_writer: asyncio.StreamWriter,
        u_reader: asyncio.StreamReader,
        u_writer: asyncio.StreamWriter,
    ) -> None:
        self.proxy, self.conn, self.peer, self.upstream = proxy, conn, peer, upstream
        self.c_reader, self.c_writer = c_reader, c_writer
        self.u_reader, self.u_writer = u_reader, u_writer
        self.inflight: dict[int, Pending] = {}
        self.order: asyncio.Queue[Pending] = asyncio.Queue()
        self.client_id = ""

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(self._requests()),
            asyncio.create_task(self._answers()),
            asyncio.create_task(self._writer()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if isinstance(exc, FrameError | wire.WireError):
                    side = "client" if task is tasks[0] else "upstream"
                    self.proxy._aborted(self.conn, self.peer, side, str(exc))
                elif isinstance(exc, ConnectionError | OSError):
                    pass  # a peer went away: an ordinary end of a connection
                elif exc is not None:
                    self.proxy._aborted(
                        self.conn, self.peer, "proxy", f"{type(exc).__name__}: {exc}"
                    )
        finally:
            for task in tasks:
                task.cancel()
            # Closed before this block's first await: close() cancels a session that may
            # be here already, and a cancel in the gather below skipped the closing; the
            # upstream writer, which nothing else holds, was left to the collector (the
            # ResourceWarning "unclosed StreamWriter" in CI, a client having just left).
            for writer in (self.c_writer, self.u_writer):
                writer.close()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._unanswered()
            for writer in (self.c_writer, self.u_writer):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), 1.0)

    # -- client -> broker --------------------------------------------------------------

    async def _requests(self) -> None:
        proxy = self.proxy
        while True:
            frame = await read_frame(self.c_reader, proxy.max_frame_bytes, client=True)
            if frame is None:
                return
            header = wire.parse_request_header(frame)
            if wire.API_NAMES.get(header.api_key) is None:
                raise wire.WireError(f"api key {header.api_key} is not a Kafka API")
            self.client_id = header.client_id
            proxy.requests += 1
            pending = Pending(header, proxy.clock())
            if header.api_key == wire.SASL_HANDSHAKE and header.api_version == 0:
                # Version 0 is followed by raw SASL tokens, not Kafka requests: the proxy
                # could no longer tell a request from a token (clients since Kafka 1.0
                # send version 1 and SaslAuthenticate).
                raise wire.WireError("SaslHandshake v0 (raw SASL tokens) is not supported")
            if header.api_key == wire.API_VERSIONS and header.api_version > wire.API_VERSIONS_MAX:
                pending.answer.set_result(wire.unsupported_api_versions(header))
                self.order.put_nowait(pending)
                continue
            if header.api_key in proxy.traced:
                self._decode(pending, frame)
            rule = None
            if header.api_key not in wire.SASL:
                rule = proxy.faults.decide(
                    proxy.clock(), header.api_key, header.client_id, pending.group
                )
            expects = wire.expects_response(header, frame)
            if rule is not None and await self._apply(pending, rule, expects):
                continue  # answered (or swallowed) here: the broker never sees it
            if expects:
                self.inflight[header.correlation_id] = pending
                self.order.put_nowait(pending)
            await self._forward(frame)

    def _decode(self, pending: Pending, frame: bytes) -> None:
        header = pending.header
        try:
            pending.request = wire.decode_request(header, frame)
            pending.group = wire.request_group(header.api_key, header.api_version, pending.request)
        except wire.WireError as exc:
            log.warning("%s: not traced: %s", self.conn, exc)
            pending.request = None

    async def _apply(self, pending: Pending, rule: Rule, expects: bool) -> bool:
        """Apply a fault rule's effect; True when the request must not be forwarded."""
        pending.rule = rule
        self._fault_applied(pending, rule)
        if rule.effect == "delay":
            await asyncio.sleep(rule.delay_ms / 1000)
        elif rule.effect == "error":
            if pending.request is not None:
                pending.answer.set_result(
                    wire.error_response(pending.header, pending.request, int(rule.error_code or 0))
                )
                self._trace(pending, None, synthesized=True)
                self.order.put_nowait(pending)
                return True
        elif rule.effect == "blackhole":
            pending.answer.set_result(_HANG)
            if expects:
                self.order.put_nowait(pending)
            return True
        elif rule.effect == "hang":
            pending.answer.set_result(_HANG)  # the broker's answer will be dropped
        elif rule.effect == "drop":
            pending.drop = True
        return False

    async def _forward(self, frame: bytes) -> None:
        self.u_writer.write(struct.pack(">i", len(frame)))
        self.u_writer.write(frame)
        await self.u_writer.drain()

    def _fault_applied(self, pending: Pending, rule: Rule) -> None:
        h = pending.header
        data: dict[str, Any] = {
            "rule": rule.id,
            "text": rule.text,
            "api": wire.api_name(h.api_key),
            "effect": rule.effect,
            "connection": self.conn,
            "correlation_id": h.correlation_id,
            "applied": rule.applied,
        }
        if rule.error:
            data["error"] = rule.error
        if rule.effect == "delay":
            data["delay_ms"] = rule.delay_ms
        self.proxy.emit.emit("FaultInjected", _envelope=self._envelope(pending), **data)

    # -- broker -> client --------------------------------------------------------------

    async def _answers(self) -> None:
        proxy = self.proxy
        while True:
            frame = await read_frame(self.u_reader, proxy.max_frame_bytes)
            if frame is None:
                raise ConnectionResetError("upstream closed")
            corr = wire.correlation_id(frame)
            pending = self.inflight.pop(corr, None)
            if pending is None:
                raise wire.WireError(
                    f"an answer with correlation id {corr} to no request in flight"
                )
            key, version = pending.header.api_key, pending.header.api_version
            out: bytes = frame
            if key == wire.API_VERSIONS:
                out = self._cap_versions(frame, version)
            elif key in wire.REWRITTEN:
                out = await self._rewrite(key, version, frame)
            if key in proxy.traced:
                self._trace(pending, frame)
            elif key == wire.FETCH and proxy.trace_fetch:
                self._trace_fetch(pending, frame)
            if not pending.answer.done():
                pending.answer.set_result(out)

    def _cap_versions(self, frame: bytes, version: int) -> bytes:
        try:
            capped, lowered = wire.cap_api_versions(frame, version, self.proxy.version_caps)
        except wire.WireError as exc:
            log.warning("%s: ApiVersions answer not capped: %s", self.conn, exc)
            return frame
        if lowered:
            sig = tuple(sorted(lowered.items()))
            if sig not in self.proxy._lowered:
                self.proxy._lowered.add(sig)
                self.proxy.emit.emit(
                    "ApiVersionsLowered",
                    upstream=f"{self.upstream[0]}:{self.upstream[1]}",
                    lowered={
                        name: {"broker_max": b, "advertised": a} for name, (b, a) in lowered.items()
                    },
                )
        return capped if capped is not None else frame

    async def _rewrite(self, key: int, version: int, frame: bytes) -> bytes:
        seen: list[tuple[int, str, int]] = []

        def collect(node: int, host: str, port: int) -> tuple[str, int]:
            seen.append((node, host, port))
            return host, port

        wire.rewrite_addresses(key, version, frame, collect)
        mapping: dict[tuple[str, int], tuple[str, int]] = {}
        for node, host, port in seen:
            listener = await self.proxy._listener_for(node, host, port)
            mapping[(host, port)] = (listener.host, listener.port)
        return wire.rewrite_addresses(key, version, frame, lambda n, h, p: mapping[(h, p)])

    async def _writer(self) -> None:
        while True:
            pending = await self.order.get()
            out = await pending.answer
            if out is _HANG:
                await asyncio.Event().wait()  # nothing after it is answered either
            if pending.drop:
                raise ConnectionResetError("dropped by a fault rule")
            await self._write(out)

    async def _write(self, frame: bytes) -> None:
        self.c_writer.write(struct.pack(">i", len(frame)))
        self.c_writer.write(frame)
        await self.c_writer.drain()

    # -- trace -------------------------------------------------------------------------

    def _envelope(self, pending: Pending) -> dict[str, Any]:
        env: dict[str, Any] = {"client_id": pending.header.client_id, "group": pending.group or ""}
        req = pending.request
        if req is not None:
            env["member_id"] = str(getattr(req, "member_id", "") or "")
            members = getattr(req, "members", None)
            if not env["member_id"] and pending.header.api_key == wire.LEAVE_GROUP and members:
                env["member_id"] = str(members[0].member_id)
            inst = getattr(req, "group_instance_id", None) or getattr(req, "instance_id", None)
            env["instance_id"] = inst
            gen = getattr(req, "generation_id", None)
            if gen is None:
                gen = getattr(req, "member_epoch", None)
            if gen is None:
                gen = getattr(req, "generation_id_or_member_epoch", None)
            if gen is not None:
                env["generation"] = int(gen)
        return env

    def _trace(self, pending: Pending, frame: bytes | None, *, synthesized: bool = False) -> None:
        if pending.request is None or pending.traced:
            return
        pending.traced = True
        h = pending.header
        data: dict[str, Any] = {
            "api_version": h.api_version,
            "connection": self.conn,
            "peer": self.peer,
            "broker": f"{self.upstream[0]}:{self.upstream[1]}",
            "correlation_id": h.correlation_id,
            "latency_ms": round((self.proxy.clock() - pending.t0) * 1000, 3),
            "request": wire.request_fields(h.api_key, h.api_version, pending.request),
        }
        env = self._envelope(pending)
        if pending.rule is not None:
            data["fault"] = pending.rule.id
        if synthesized:
            data["injected"] = True
            data["error"] = pending.rule.error if pending.rule else "UNKNOWN"
            data["response"] = None
        elif frame is None:
            data["error"] = "NO_RESPONSE"
            data["response"] = None
        else:
            try:
                resp = wire.decode_response(h.api_key, h.api_version, frame)
                fields = wire.response_fields(h.api_key, h.api_version, resp)
            except wire.WireError as exc:
                log.warning("%s: answer not traced: %s", self.conn, exc)
                fields = {"error": "UNDECODED"}
            data["error"] = fields.get("error", "NONE")
            data["response"] = fields
            if h.api_key == wire.JOIN_GROUP and fields.get("member_id"):
                env["member_id"] = fields["member_id"]
            if h.api_key in (wire.JOIN_GROUP,) and fields.get("generation", -1) >= 0:
                env["generation"] = fields["generation"]
            if h.api_key == wire.CONSUMER_GROUP_HEARTBEAT:
                if fields.get("member_id"):
                    env["member_id"] = fields["member_id"]
                if fields.get("member_epoch", -1) >= 0:
                    env["generation"] = fields["member_epoch"]
        if pending.drop:
            data["dropped"] = True
        if pending.rule is not None and pending.rule.effect == "hang":
            data["withheld"] = True
        self.proxy.emit.emit(f"{wire.api_name(h.api_key)}Traced", _envelope=env, **data)

    def _trace_fetch(self, pending: Pending, frame: bytes) -> None:
        h = pending.header
        try:
            fields = wire.fetch_response_fields(h.api_version, frame)
        except wire.WireError as exc:
            log.warning("%s: Fetch answer not traced: %s", self.conn, exc)
            return
        given = fields["partitions"].values()
        if not any(p.get("batches") for parts in given for p in parts.values()):
            return  # an empty long poll: nothing given, nothing to say
        self.proxy.emit.emit(
            "FetchTraced",
            _envelope={"client_id": h.client_id, "group": ""},
            api_version=h.api_version,
            connection=self.conn,
            broker=f"{self.upstream[0]}:{self.upstream[1]}",
            latency_ms=round((self.proxy.clock() - pending.t0) * 1000, 3),
            error=fields["error"],
            partitions=fields["partitions"],
        )

    def _unanswered(self) -> None:
        pending_all = list(self.inflight.values())
        while not self.order.empty():
            pending_all.append(self.order.get_nowait())
        for pending in pending_all:
            if pending.header.api_key in self.proxy.traced:
                self._trace(pending, None)
