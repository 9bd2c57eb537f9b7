"""A socket kafka-python abandons while connecting is closed, not left to the collector.

kafka-python 3.0.12 opens a connection in a coroutine on its I/O loop: the TCP connect,
then (SSL) the TLS handshake, and only then does a connection object own the socket.
When the loop is closed (the client is closed) while the coroutine waits in one of those
steps, the coroutine is ended with GeneratorExit and the socket is dropped unclosed; a
failed TLS set-up or handshake drops it the same way. The file descriptor then lives
until the garbage collector finds it, which warns (ResourceWarning). A client closed at
the wrong moment leaks one; the real-broker tests, which treat every warning as an error,
saw it (docs/member.md, departure (o)).

`close_abandoned_connects()` wraps the three steps that hold the socket unowned (each
inherited by the proxy connectors) so that it is closed whenever the step does not
complete, and the loop's close, so that a transport whose deferred close (requests still
buffered) the loop will never run has its socket closed with the loop. The steps
themselves are kafka-python's, unchanged.

Installing it patches kafka-python for the whole process: every adapter that builds a
client calls it first, and so does the test suite for its plain kafka-python clients.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from kafka.net.inet import KafkaNetSocket
from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

_installed = False


def close_abandoned_connects() -> None:
    """Install the fix (idempotent). Call before building a kafka-python client."""
    global _installed
    if _installed:
        return
    sock_connect = KafkaNetSocket.sock_connect
    ssl_init = KafkaSSLTransport.__init__
    handshake = KafkaSSLTransport.handshake

    @functools.wraps(sock_connect)
    async def closing_sock_connect(self: Any, net: Any, sock: Any, *args: Any, **kw: Any) -> Any:
        try:
            return await sock_connect(self, net, sock, *args, **kw)
        except BaseException:  # GeneratorExit from a closing loop included
            sock.close()
            raise

    @functools.wraps(ssl_init)
    def closing_ssl_init(self: Any, net: Any, sock: Any, *args: Any, **kw: Any) -> None:
        try:
            ssl_init(self, net, sock, *args, **kw)
        except BaseException:  # a bad CA file or key: the plain socket is still open
            sock.close()
            raise

    @functools.wraps(handshake)
    async def closing_handshake(self: Any) -> Any:
        try:
            return await handshake(self)
        except BaseException:
            if self._sock is not None:
                self._sock.close()
            raise

    # A connection's transport can outlive its loop too: closed with requests still
    # buffered, it leaves the socket to a write task that the closing loop ends before it
    # runs. So a loop that closes closes the sockets of its transports.
    transports: weakref.WeakSet[Any] = weakref.WeakSet()
    tcp_init = KafkaTCPTransport.__init__
    loop_close = NetworkSelector.close

    @functools.wraps(tcp_init)
    def tracked_tcp_init(self: Any, net: Any, sock: Any, *args: Any, **kw: Any) -> None:
        tcp_init(self, net, sock, *args, **kw)
        transports.add(self)

    @functools.wraps(loop_close)
    def closing_loop_close(self: Any) -> None:
        loop_close(self)
        for transport in list(transports):
            sock = transport._sock
            if transport._net is self and sock is not None:
                sock.close()

    KafkaNetSocket.sock_connect = closing_sock_connect
    KafkaTCPTransport.__init__ = tracked_tcp_init
    NetworkSelector.close = closing_loop_close
    KafkaSSLTransport.__init__ = closing_ssl_init
    KafkaSSLTransport.handshake = closing_handshake
    _installed = True
