"""Publishing to JetStream: acknowledgements, deduplication, optimistic concurrency,
the asynchronous window, and reading a message back.

Run it from the project root::

    python examples/js_publish.py                       # starts its own nats-server -js
    python examples/js_publish.py --server nats://127.0.0.1:4222
"""

from __future__ import annotations

import argparse

from twisted.internet import task

import txnats
from txnats.errors import NoStreamResponseError, WrongLastSequenceError
from txnats.testing import NatsServer


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="js-publish")
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"], storage="memory",
                        duplicate_window=120, allow_direct=True)  # seconds

    ack = await js.publish("orders.new", b"order 17", msg_id="order-17")
    print(f"stored: stream={ack.stream} seq={ack.seq} duplicate={ack.duplicate}")
    again = await js.publish("orders.new", b"order 17", msg_id="order-17")
    print(f"same msg_id again: seq={again.seq} duplicate={again.duplicate}")

    await js.publish("orders.new", b"order 18", expected_last_seq=ack.seq)
    try:  # the stream's last sequence is no longer ack.seq
        await js.publish("orders.new", b"order 19", expected_last_seq=ack.seq)
    except WrongLastSequenceError:
        print("expected_last_seq out of date: WrongLastSequenceError")

    # Pipelined: at most publish_async_max_pending (4000) wait for their ack.
    failed = []
    for i in range(10_000):
        if js.publish_async_pending >= js.publish_async_max_pending:
            await js.publish_async_room()               # wakes at half the window
        js.publish_async("orders.bulk", b"%d" % i).addErrback(failed.append)
    await js.publish_async_complete()
    info = await js.stream_info("ORDERS")
    print(f"after publish_async: {info.state.messages} messages, {len(failed)} failed")

    msg = await js.get_msg("ORDERS", last_by_subject="orders.new", direct=True)
    print(f"last on orders.new: {msg.data!r} at seq {msg.seq}")

    try:  # no stream takes the subject (retried twice, 0.25 s apart, first)
        await js.publish("nowhere.new", b"x")
    except NoStreamResponseError:
        print("no stream for nowhere.new: NoStreamResponseError")
    await js.delete_stream("ORDERS")
    await nc.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats JetStream publishing")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer(jetstream=True) as server:
            task.react(main, [server.url])
