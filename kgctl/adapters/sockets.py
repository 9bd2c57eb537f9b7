"""A socket kafka-python abandons while connecting is closed, not left to the collector.

kafka-python 3.0.12 opens a connection in a coroutine on its I/O loop. When the loop is
closed (the client is closed) while the coroutine waits for the TCP connect to finish,
the coroutine is ended with GeneratorExit and the socket it opened is dropped unclosed:
the file descriptor lives until the garbage collector finds it, which then warns
(ResourceWarning). A client closed at the wrong moment leaks one; the real-broker tests,
which treat every warning as an error, saw it (docs/member.md, the departures list).

`close_abandoned_connects()` replaces the one method that owns the socket at that point
(`KafkaNetSocket.connect`, which the proxy connectors inherit) with one that closes it
whenever the connect does not complete. Nothing else about connecting changes.
"""

from __future__ import annotations

from typing import Any

_installed = False


def close_abandoned_connects() -> None:
    """Install the fix (idempotent). Call before building a kafka-python client."""
    global _installed
    if _installed:
        return
    from kafka.net.inet import KafkaNetSocket

    async def connect(
        self: Any, net: Any, addrinfo: Any, socket_options: Any = (), timeout_at: Any = None
    ) -> Any:
        family, sock_type, proto, _canonname, sockaddr = addrinfo
        sock = self.socket(family, sock_type, proto)
        try:
            sock.setblocking(False)
            for option in socket_options:
                sock.setsockopt(*option)
            return await self.sock_connect(net, sock, sockaddr, timeout_at=timeout_at)
        except BaseException:  # GeneratorExit from a closing loop included
            sock.close()
            raise

    KafkaNetSocket.connect = connect
    _installed = True
