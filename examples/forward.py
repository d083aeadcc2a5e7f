"""Forwarding between two NATS systems from Python, as ``--forward`` does in the bridge.

Run it from the project root (it starts two nats-servers with JetStream)::

    python examples/forward.py

A core route copies ``orders.>`` to ``archive.orders.>`` on the other system, at most
once; a JetStream route reads the stream ORDERS through a durable consumer and
acknowledges each message only once the target's stream stored it, at least once.
"""

from __future__ import annotations

from twisted.internet import task

import txnats
from txnats.bridge.forward import Forwarder, parse_forward
from txnats.testing import NatsServer


async def main(reactor, source_url, target_url):
    source = await txnats.connect(reactor, source_url, name="source")
    target = await txnats.connect(reactor, target_url, name="target")

    # Core: orders.<rest> -> archive.orders.<rest>, subject mapping in the spec.
    archived = target.subscribe("archive.orders.>")
    core = Forwarder(reactor, parse_forward(f"orders.>:archive.orders.>={target_url}"),
                     source)
    await core.start()                   # subscribed on the source; target connected
    source.publish("orders.eu.7", b"core order")
    msg = await archived.next_msg(timeout=5.0)
    print(f"core: {msg.subject} {msg.data!r}")
    await core.stop()

    # JetStream: from stream ORDERS on the source to stream ARCHIVE on the target.
    sjs, tjs = source.jetstream(), target.jetstream()
    await sjs.add_stream(name="ORDERS", subjects=["shop.>"], storage="memory")
    await tjs.add_stream(name="ARCHIVE", subjects=["shop.>"], storage="memory")
    for i in range(10):
        await sjs.publish(f"shop.order.{i}", b"order %d" % i)
    route = parse_forward(f"js:ORDERS:shop.>={target_url}?batch=5")
    js_route = Forwarder(reactor, route, source)
    await js_route.start()               # the durable consumer created or joined
    for _ in range(100):
        if (await tjs.stream_info("ARCHIVE")).state.messages == 10:
            break
        await task.deferLater(reactor, 0.1)
    await js_route.stop()                # publishes under way answered and acked
    print(f"jetstream: {(await tjs.stream_info('ARCHIVE')).state.messages} stored, "
          f"forwarded {js_route.stats.forwarded}, dropped {js_route.stats.dropped}")
    await source.drain()
    await target.drain()


if __name__ == "__main__":
    with NatsServer(jetstream=True) as source, NatsServer(jetstream=True) as target:
        task.react(main, [source.url, target.url])
