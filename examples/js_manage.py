"""JetStream management with typed configurations: streams and consumers, in seconds.

Run it from the project root::

    python examples/js_manage.py                        # starts its own nats-server -js
    python examples/js_manage.py --server nats://127.0.0.1:4222

It makes a stream (messages kept an hour: ``max_age=3600``, seconds as everywhere in
txnats), publishes to it, makes a durable consumer and shows that creating it again with
another configuration is refused while ``update_consumer`` changes it, lists the
stream's consumers lazily, pauses and resumes one, then deletes the stream.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from twisted.internet import task

import txnats
from txnats.errors import ConsumerExistsError
from txnats.jetstream import AckPolicy, ConsumerConfig, StreamConfig
from txnats.testing import NatsServer


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="js-manage")
    js = nc.jetstream()

    # A typed configuration (a dict or keyword arguments work the same: seconds).
    config = StreamConfig(
        "ORDERS", subjects=["orders.>"], max_age=3600, storage="memory",
        duplicate_window=timedelta(minutes=2),
    )
    info = await js.add_stream(config)
    print(f"stream {info.config.name}: max_age={info.config.max_age}s "
          f"storage={info.config.storage}")

    for i in range(3):
        ack = await js.publish(f"orders.{i}", b"order %d" % i, msg_id=f"order-{i}")
        print(f"published seq={ack.seq}")
    again = await js.publish("orders.0", b"order 0", msg_id="order-0")
    print(f"published again: duplicate={again.duplicate} seq={again.seq}")

    durable = ConsumerConfig(durable_name="billing", ack_policy=AckPolicy.EXPLICIT,
                             ack_wait=30)
    cinfo = await js.create_consumer("ORDERS", durable)
    print(f"consumer {cinfo.name}: ack_wait={cinfo.config.ack_wait}s "
          f"pending={cinfo.num_pending}")
    try:
        await js.create_consumer("ORDERS", durable_name="billing", ack_wait=10,
                                 ack_policy="explicit")
    except ConsumerExistsError:
        print("create with another config: refused (ConsumerExistsError)")
    cinfo = await js.update_consumer("ORDERS", cinfo.config, ack_wait=10)
    print(f"updated: ack_wait={cinfo.config.ack_wait}s")

    await js.create_consumer("ORDERS", name="audit", filter_subject="orders.1")
    async for c in js.consumers("ORDERS"):  # read lazily, a page at a time
        print(f"listed consumer {c.name} (pending {c.num_pending})")

    paused = await js.pause_consumer("ORDERS", "audit", 60)
    print(f"audit paused: {paused.paused}")
    resumed = await js.resume_consumer("ORDERS", "audit")
    print(f"audit paused after resume: {resumed.paused}")

    state = (await js.stream_info("ORDERS", subjects_filter="orders.>")).state
    print(f"messages={state.messages} subjects={state.subjects}")
    await js.delete_stream("ORDERS")
    await nc.drain()
    print("done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats JetStream management")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer(jetstream=True) as server:
            task.react(main, [server.url])
