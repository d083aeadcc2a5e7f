"""From a server address to a Twisted client endpoint (``servers.py`` keeps the data)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.interfaces import IReactorCore, IStreamClientEndpoint

from txnats.servers import Server

__all__ = ["server_endpoint"]


def server_endpoint(
    server: Server,
    reactor: IReactorCore,
    timeout: float,
    tls_creator: Callable[[], Any] | None = None,
    *,
    compression: bool = False,
    headers: Mapping[str, str] | None = None,
) -> IStreamClientEndpoint:
    """A client endpoint reaching ``server``.

    For ``ws://`` and ``wss://`` servers it speaks WebSocket (``tls_creator`` makes the
    TLS options for ``wss://``; ``compression`` offers permessage-deflate). A server
    given as a client endpoint description (``tcp:host=...:port=...``) gets that
    endpoint; any other gets a ``HostnameEndpoint`` with ``timeout``. The description
    ``memory:name=<name>`` reaches the in-memory server of that name
    (:class:`txnats.testing.MemoryNats`), on ``reactor`` (which may be a test clock).
    """
    if server.scheme in ("ws", "wss"):
        # Imported here: autobahn is an optional dependency (the websocket extra).
        from txnats.websocket import websocket_endpoint

        return websocket_endpoint(
            reactor, server, timeout, tls_creator, compression=compression, headers=headers
        )
    description = server.endpoint_description
    if description is not None and description.startswith("memory:"):
        # Imported here: only tests dial the in-memory server.
        from txnats.testing._loopback import memory_endpoint

        return memory_endpoint(reactor, description)
    # Imported here: twisted.internet.endpoints loads OpenSSL, which costs a noticeable
    # part of a second at import time.
    from twisted.internet.endpoints import HostnameEndpoint, clientFromString

    if server.endpoint_description is not None:
        ep: IStreamClientEndpoint = clientFromString(  # type: ignore[no-untyped-call]
            reactor, server.endpoint_description
        )
        return ep
    return HostnameEndpoint(reactor, server.host.encode("idna"), server.port, timeout=timeout)
