"""WebSocket: the same API over a server's ``websocket`` listener.

Run it from the project root (it starts a nats-server with a websocket block; needs
``pip install 'txnats[websocket]'``, which brings autobahn)::

    python examples/websocket.py

``ws://host:port/path`` and ``wss://...`` URLs reach the listener; everything else is
as over TCP. ``ws_compression=True`` offers permessage-deflate, used when the server's
websocket block enables ``compression``.
"""

from __future__ import annotations

import socket

from twisted.internet import task

import txnats
from txnats.testing import NatsServer


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main(reactor, ws_url):
    nc = await txnats.connect(reactor, ws_url, ws_compression=True)
    print(f"connected over WebSocket to {nc.connected_url}")
    nc.subscribe("echo", lambda msg: msg.respond(msg.data[::-1]))
    reply = await nc.request("echo", b"stressed", timeout=2.0)
    print(f"echo replied {reply.data!r}")
    await nc.drain()


if __name__ == "__main__":
    port = free_port()
    config = f'websocket {{ listen: "127.0.0.1:{port}", no_tls: true, compression: true }}'
    with NatsServer(config=config):
        task.react(main, [f"ws://127.0.0.1:{port}/nats"])
