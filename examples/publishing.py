"""Publishing: headers, what publish() refuses at the call, and flow control.

Run it from the project root::

    python examples/publishing.py                       # starts its own nats-server
    python examples/publishing.py --server nats://127.0.0.1:4222

``publish()`` is synchronous and buffered: what a turn of the reactor publishes leaves
in one write. It raises, having queued nothing, when it cannot take a message. A plain
loop of a million publishes works; ``await nc.wait_for_room()`` now and then lets the
reactor write (and is what long loops over TLS or WebSocket need).
"""

from __future__ import annotations

import argparse

from twisted.internet import task

import txnats
from txnats.errors import BadSubjectError, MaxPayloadError
from txnats.testing import NatsServer


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="publishing")
    received = []
    nc.subscribe("sensor.>", received.append)
    await nc.flush()  # the server has the subscription

    # Headers: a txnats.Headers (multi-valued, ordered) or a plain mapping.
    headers = txnats.Headers()
    headers.add("X-Unit", "celsius")
    headers.add("X-Tag", "kitchen")
    headers.add("X-Tag", "ground-floor")
    nc.publish("sensor.kitchen", b"21.5", headers=headers)
    nc.publish("sensor.hall", b"19.0", headers={"X-Unit": "celsius"})
    await nc.flush()
    for msg in received:
        print(f"{msg.subject}: {msg.data.decode()} {msg.headers.get_all('X-Tag') or ''}"
              .rstrip())

    # Refused at the call, nothing queued: a bad subject, a message over max_payload.
    try:
        nc.publish("sensor kitchen", b"x")
    except BadSubjectError as e:
        print(f"refused: {type(e).__name__}")
    try:
        nc.publish("sensor.big", b"x" * (nc.server_info["max_payload"] + 1))
    except MaxPayloadError as e:
        print(f"refused: {type(e).__name__}")

    # A plain loop: publish() hands 64 KiB at a time to the socket by itself.
    for i in range(100_000):
        nc.publish("bulk", b"0123456789abcdef")
    # A loop that yields to the reactor past some amount: needed over TLS/WebSocket.
    for i in range(100_000):
        nc.publish("bulk", b"0123456789abcdef")
        if i % 10_000 == 0:
            await nc.wait_for_room()
    await nc.flush(timeout=10.0)  # the server has processed everything sent
    print(f"published {nc.stats.out_msgs} messages")
    await nc.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats publishing")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer() as server:
            task.react(main, [server.url])
