"""kafka-python's abandoned connects close their socket (kgctl/adapters/sockets.py).

Each test suspends one step of kafka-python's connection set-up where its I/O loop would
(waiting for a socket to be ready), then ends it the way a closing loop does."""

from __future__ import annotations

import errno
import socket
from collections.abc import Generator
from typing import Any

import pytest

from kgctl.adapters.sockets import close_abandoned_connects


class _Suspended:
    """What kafka-python's loop hands a coroutine waiting for a socket to be ready."""

    def __await__(self) -> Generator[Any, None, None]:
        yield self


class _Loop:
    def wait_write(self, sock: socket.socket, timeout_at: float | None = None) -> _Suspended:
        return _Suspended()

    def wait_read(self, sock: socket.socket, timeout_at: float | None = None) -> _Suspended:
        return _Suspended()


def test_a_connect_ended_by_a_closing_loop_closes_its_socket() -> None:
    close_abandoned_connects()
    from kafka.net.inet import KafkaNetSocket

    made: list[socket.socket] = []
    factory: Any = KafkaNetSocket()
    real_socket = factory.socket

    def socket_made(*args: Any) -> socket.socket:
        made.append(real_socket(*args))
        return made[-1]

    factory.socket = socket_made
    factory.connect_ex = lambda sock, addr: errno.EINPROGRESS  # the TCP connect is pending
    addrinfo = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 9))
    connecting = factory.connect(_Loop(), addrinfo)
    try:
        connecting.send(None)  # suspended, waiting for the connect to finish
        assert made and made[0].fileno() != -1
        connecting.close()  # what the loop does to it when the client is closed
        assert made[0].fileno() == -1
    finally:
        for sock in made:
            sock.close()


def test_a_tls_handshake_ended_by_a_closing_loop_closes_its_socket() -> None:
    close_abandoned_connects()
    from kafka.net.transport import KafkaSSLTransport

    ours, peer = socket.socketpair()  # the peer never answers: the handshake waits
    ours.setblocking(False)
    try:
        transport = KafkaSSLTransport(_Loop(), ours, host="broker", ssl_check_hostname=False)
        handshaking = transport.handshake()
        handshaking.send(None)  # suspended, waiting for the server's hello
        assert transport._sock.fileno() != -1
        handshaking.close()
        assert transport._sock.fileno() == -1
    finally:
        ours.close()
        peer.close()


def test_a_tls_set_up_that_fails_closes_the_plain_socket() -> None:
    close_abandoned_connects()
    from kafka.net.transport import KafkaSSLTransport

    ours, peer = socket.socketpair()
    try:
        with pytest.raises(OSError):
            KafkaSSLTransport(_Loop(), ours, host="broker", ssl_cafile="/no/such/ca.pem")
        assert ours.fileno() == -1
    finally:
        ours.close()
        peer.close()


def test_a_closing_loop_closes_the_sockets_of_its_transports() -> None:
    # A transport closed with a request still buffered leaves its socket to a write task;
    # when the client closes, its loop ends that task before it runs.
    close_abandoned_connects()
    from kafka.net.selector import NetworkSelector
    from kafka.net.transport import KafkaTCPTransport

    loop = NetworkSelector()
    ours, peer = socket.socketpair()
    try:
        transport = KafkaTCPTransport(loop, ours)
        transport._write_buffer.append(b"a request not yet written")
        transport.close()  # deferred: the buffer is not empty
        assert ours.fileno() != -1
        loop.close()
        assert ours.fileno() == -1
    finally:
        ours.close()
        peer.close()
