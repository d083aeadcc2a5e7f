"""Publish/subscribe: a handler on a wildcard subject receives messages with headers.

A handler subscribed to ``sensors.*`` receives readings published to
``sensors.<room>``, each with an ``X-Unit`` header, in the order they were sent.
The program checks that every reading arrived, drains and exits 0 (1 on failure).

    python examples/pubsub.py [--server nats://127.0.0.1:4222]

Without ``--server`` it starts its own ``nats-server`` on a free port.
"""

from __future__ import annotations

import argparse

from twisted.internet import defer, task

import txnats
from txnats.testing import NatsServer

READINGS = [("kitchen", b"21.5"), ("hall", b"19.0"), ("attic", b"25.1"), ("cellar", b"12.4")]


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="pubsub-example")
    received = []
    all_received = defer.Deferred()

    def on_reading(msg):
        room = msg.subject.split(".", 1)[1]
        print(f"{room}: {msg.data.decode()} {msg.headers['X-Unit']}")
        received.append((room, msg.data))
        if len(received) == len(READINGS):
            all_received.callback(None)

    nc.subscribe("sensors.*", on_reading)
    for room, value in READINGS:
        nc.publish(f"sensors.{room}", value, headers={"X-Unit": "celsius"})

    await all_received.addTimeout(5, reactor)
    await nc.drain()
    if received != READINGS:
        raise SystemExit(f"expected {READINGS}, got {received}")
    print(f"received all {len(received)} readings, in order")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats publish/subscribe example")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer() as server:
            task.react(main, [server.url])
