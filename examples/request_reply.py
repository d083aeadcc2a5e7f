"""Request/reply: a responder service, concurrent requests, and no responders.

A responder subscribes to ``math.double`` and answers each request with
``msg.respond()``. Its handler is a coroutine: txnats awaits it before handing
over the next request. The client sends three requests at once and awaits all
replies, then asks ``math.triple``, which nobody serves: the request fails at
once with ``NoRespondersError`` instead of waiting for its timeout.

    python examples/request_reply.py [--server nats://127.0.0.1:4222]

Without ``--server`` it starts its own ``nats-server`` on a free port.
"""

from __future__ import annotations

import argparse

from twisted.internet import defer, task

import txnats
from txnats.testing import NatsServer


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="request-reply-example")

    async def double(msg):
        await task.deferLater(reactor, 0.01)  # pretend to do some work
        msg.respond(b"%d" % (2 * int(msg.data)), headers={"X-Served-By": "doubler"})

    nc.subscribe("math.double", double)

    numbers = [1, 2, 3]
    replies = await defer.gatherResults(
        [nc.request("math.double", b"%d" % n, timeout=2.0) for n in numbers],
        consumeErrors=True,
    )
    for n, reply in zip(numbers, replies, strict=True):
        print(f"double({n}) = {reply.data.decode()} (X-Served-By: {reply.headers['X-Served-By']})")

    try:
        await nc.request("math.triple", b"3", timeout=5.0)
    except txnats.NoRespondersError:
        print("math.triple: no responders (reported at once, not after the timeout)")
    else:
        raise SystemExit("math.triple should have had no responders")

    await nc.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats request/reply example")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer() as server:
            task.react(main, [server.url])
