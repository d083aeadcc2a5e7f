"""Subscriptions as actors: order, concurrency, pending limits, back-pressure, readers.

Run it from the project root::

    python examples/subscriptions.py                    # starts its own nats-server
    python examples/subscriptions.py --server nats://127.0.0.1:4222

Each subscription has a mailbox of its own. Its handler gets the messages in order, one
at a time (a Deferred or coroutine it returns is awaited first); ``concurrency=N`` lets
N run at once. Over its pending limits a subscription drops and counts, and reports a
``SlowConsumerError``, unless ``backpressure=True``, which stops reading the socket
instead. A subscription without a handler is read with ``next_msg()`` or ``async for``.
"""

from __future__ import annotations

import argparse

from twisted.internet import task

import txnats
from txnats.errors import SlowConsumerError
from txnats.testing import NatsServer


async def main(reactor, url):
    errors = []
    nc = await txnats.connect(reactor, url, name="subscriptions", error_cb=errors.append)

    # 1. In order, one at a time: each handler call waits 1 ms, none overtakes another.
    seen = []

    async def slow_handler(msg):
        await task.deferLater(reactor, 0.001)
        seen.append(int(msg.data))

    ordered = nc.subscribe("jobs.ordered", slow_handler)
    # 2. A worker pool: up to 4 handler calls at once, no order promised.
    running, most = [0], [0]

    async def worker(msg):
        running[0] += 1
        most[0] = max(most[0], running[0])
        await task.deferLater(reactor, 0.01)
        running[0] -= 1

    pool = nc.subscribe("jobs.pool", worker, concurrency=4)
    await nc.flush()
    for i in range(20):
        nc.publish("jobs.ordered", b"%d" % i)
        nc.publish("jobs.pool", b"%d" % i)
    await ordered.drain()  # unsubscribe, and fire once every message received is handled
    await pool.drain()
    print(f"ordered handler saw {seen == list(range(20)) and 'all 20 in order'}")
    print(f"pool ran at most {most[0]} handlers at once")

    # 3. Pending limits: 10,000 messages into a mailbox of 100 that is never read.
    lossy = nc.subscribe("feed", pending_msgs_limit=100)
    for i in range(10_000):
        nc.publish("feed", b"tick")
    await nc.flush()
    await task.deferLater(reactor, 0.2)
    print(f"lossy: {lossy.pending_msgs} pending, dropped some: {lossy.dropped > 0}, "
          f"received == delivered + dropped + pending: "
          f"{lossy.received == lossy.delivered + lossy.dropped + lossy.pending_msgs}")
    print(f"error_cb heard: {sorted({type(e).__name__ for e in errors})}")
    assert all(isinstance(e, SlowConsumerError) for e in errors)
    lossy.unsubscribe()  # what it already holds is still handed out:
    left = [msg async for msg in lossy]  # read it, or drain() would wait for a reader
    print(f"lossy: read the {len(left)} it held after unsubscribing")

    # 4. Back-pressure: the same flood into the same small mailbox loses nothing.
    careful = nc.subscribe("feed2", pending_msgs_limit=100, backpressure=True)
    for i in range(10_000):
        nc.publish("feed2", b"tick")
    count = 0
    async for msg in careful:  # a reader: ends when the subscription ends
        count += 1
        if count == 10_000:
            careful.unsubscribe()
    print(f"back-pressure: read {count}, dropped {careful.dropped}")

    # 5. next_msg(): one message, or TimeoutError after the timeout (seconds).
    inbox = nc.subscribe("updates")
    nc.publish("updates", b"first")
    msg = await inbox.next_msg(timeout=2.0)
    print(f"next_msg: {msg.data!r}")
    try:
        await inbox.next_msg(timeout=0.1)
    except txnats.TimeoutError:
        print("next_msg: TimeoutError after 0.1 s")
    await nc.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats subscriptions")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer() as server:
            task.react(main, [server.url])
