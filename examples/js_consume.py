"""Consuming a JetStream stream: consume(), messages(), a push consumer and an ordered
consumer.

Run it from the project root::

    python examples/js_consume.py                        # starts its own nats-server -js
    python examples/js_consume.py --server nats://127.0.0.1:4222

It fills a stream with 100 orders, then reads them four ways: ``consume()`` hands each
to a handler and pulls more as the buffer empties (it survives reconnections and
server restarts by itself); ``messages()`` is the same pull read with ``async for``; a
push consumer (``js.subscribe``) lets the server send them, with flow control; an
ordered consumer reads the stream in order, each message once, without acks.
"""

from __future__ import annotations

import argparse

from twisted.internet import defer, task

import txnats
from txnats.testing import NatsServer

N = 100


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="js-consume")
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
    for i in range(N):
        js.publish_async(f"orders.{i % 3}", b"order %d" % i)
    await js.publish_async_complete()

    # 1. consume(): a handler per message; acked here, so each is handled once.
    await js.create_consumer("ORDERS", durable_name="billing", ack_policy="explicit")
    billing = js.pull_consumer("ORDERS", "billing")
    done = defer.Deferred()
    handled = []

    def bill(msg):
        handled.append(msg.data)
        msg.ack()
        if len(handled) == N:
            done.callback(None)

    ctx = billing.consume(bill, max_messages=20)  # 20 buffered, more pulled at 10
    await done
    await ctx.drain()
    print(f"consume: {len(handled)} orders handled in {ctx.pulls} pulls")

    # 2. messages(): the same continuous pull, read with async for.
    await js.create_consumer("ORDERS", durable_name="audit", ack_policy="explicit")
    audited = 0
    it = js.pull_consumer("ORDERS", "audit").messages(max_messages=50)
    async for msg in it:
        await msg.ack_sync()  # the server confirms the ack
        audited += 1
        if audited == N:
            break
    await it.drain()
    print(f"messages: {audited} orders audited")

    # 3. A push consumer: the server sends; flow control and heartbeats watched.
    got = defer.Deferred()
    shipped = []

    def ship(msg):  # acknowledged once it returns
        shipped.append(msg.metadata.sequence.stream)
        if len(shipped) == N:
            got.callback(None)

    push = await js.subscribe("orders.>", ship, durable="shipping", flow_control=True,
                              idle_heartbeat=1.0)
    await got
    await push.drain()
    print(f"push: {len(shipped)} orders shipped, last stream sequence {shipped[-1]}")

    # 4. An ordered consumer: in stream order, each once; async for without a handler.
    ordered = await js.ordered_consumer("ORDERS", filter_subjects=["orders.0"])
    seqs = []
    async for msg in ordered:
        seqs.append(msg.metadata.sequence.stream)
        if msg.metadata.num_pending == 0:
            ordered.stop()
    print(f"ordered: {len(seqs)} orders on orders.0, in order: {seqs == sorted(seqs)}")

    await js.delete_stream("ORDERS")
    await nc.drain()
    print("done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats JetStream consumers")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(lambda r: defer.ensureDeferred(main(r, args.server)))
    else:
        with NatsServer(jetstream=True) as server:
            task.react(lambda r: defer.ensureDeferred(main(r, server.url)))
