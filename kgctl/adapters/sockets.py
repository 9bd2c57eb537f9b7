"""A socket kafka-python abandons while connecting is closed, not left to the collector.

kafka-python 3.0.12 opens a connection in a coroutine on its I/O loop: the TCP connect,
then (SSL) the TLS handshake, and only then does a connection object own the socket.
When the loop is closed (the client is closed) while the coroutine waits in one of those
steps, the coroutine is ended with GeneratorExit and the socket is dropped unclosed; a
failed TLS set-up or handshake drops it the same way. The file descriptor then lives
until the garbage collector finds it, which warns (ResourceWarning). A client closed at
the wrong moment leaks one; the real-broker tests, which treat every warning as an error,
saw it (docs/member.md, the departures list).

`close_abandoned_connects()` wraps the three steps that hold the socket unowned (each
inherited by the proxy connectors) so that it is closed whenever the step does not
complete. The steps themselves are kafka-python's, unchanged.

Installing it patches kafka-python for the whole process: every adapter that builds a
client calls it first, and so does the test suite for its plain kafka-python clients.
"""

from __future__ import annotations

import functools
from typing import Any

_installed = False


def close_abandoned_connects() -> None:
    """Install the fix (idempotent). Call before building a kafka-python client."""
    global _installed
    if _installed:
        return
    from kafka.net.inet import KafkaNetSocket
    from kafka.net.transport import KafkaSSLTransport

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

    KafkaNetSocket.sock_connect = closing_sock_connect
    KafkaSSLTransport.__init__ = closing_ssl_init
    KafkaSSLTransport.handshake = closing_handshake
    _installed = True
