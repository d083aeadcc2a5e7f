"""Reconnection: what a client does when its server dies and comes back.

Run it from the project root (it starts, kills and restarts its own nats-server)::

    python examples/reconnect.py

The subscription is made again on the new connection before anything else is sent,
and what was published while disconnected waits in the reconnect buffer (8 MiB by
default) and is sent, in order, once connected. Core NATS is at most once: what others
published meanwhile is not delivered.
"""

from __future__ import annotations

from twisted.internet import defer, task
from twisted.internet.threads import deferToThread

import txnats
from txnats.testing import NatsServer


async def main(reactor, server):
    lost, back = defer.Deferred(), defer.Deferred()
    nc = await txnats.connect(
        reactor, server.url, name="reconnect",
        reconnect_wait=0.2,              # seconds between attempts at one server
        max_reconnect_attempts=-1,       # for ever (the default is 60 per server)
        disconnected_cb=lambda reason: lost.callback(None) if not lost.called else None,
        reconnected_cb=lambda: back.callback(None) if not back.called else None,
    )
    got = []
    nc.subscribe("events", lambda msg: got.append(msg.data))
    nc.publish("events", b"before")
    await nc.flush()

    await deferToThread(server.kill)     # as a crash would
    await lost
    print(f"disconnected: state {nc.state.name}")
    for i in range(3):                   # kept in the reconnect buffer
        nc.publish("events", b"while-down-%d" % i)

    await deferToThread(server.start)    # the same port again
    await back
    print(f"reconnected: state {nc.state.name}, reconnects {nc.stats.reconnects}")
    await nc.flush()
    print(f"received {[d.decode() for d in got]}")
    await nc.drain()


if __name__ == "__main__":
    with NatsServer() as server:
        task.react(main, [server])
