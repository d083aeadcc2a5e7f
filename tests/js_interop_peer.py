"""The nats-py side of the JetStream interoperability tests (tests/test_js_interop.py).

Run as a separate process, so that nats-py's asyncio loop and the Twisted reactor never
share a process::

    python tests/js_interop_peer.py make    URL STREAM CONSUMER COUNT
    python tests/js_interop_peer.py consume URL STREAM CONSUMER
    python tests/js_interop_peer.py info    URL STREAM CONSUMER

- ``make``: create the stream ``STREAM`` on ``STREAM.>`` (max_age one hour, duplicate
  window 30 s, as nats-py takes them: seconds), a durable pull consumer ``CONSUMER``
  (explicit acks, ack_wait 2 s, max_deliver 5), publish COUNT messages ``m0``, ``m1``...
- ``consume``: bind to the pull consumer and run the ack script (:data:`SCRIPT`): fetch
  4, ack the first, nak the second, term the third, in-progress then ack the fourth;
  fetch again and ack what comes (the nak'ed one, delivered twice); then a short fetch
  that must get nothing (the termed one never comes back). Print what happened.
- ``info``: print the stream's and the consumer's configuration as nats-py reads them
  (durations in seconds) and the consumer's state.

Each mode prints one JSON object per line. The whole run is bounded by PEER_TIMEOUT
seconds (exit status 3 if it is exceeded).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

PEER_TIMEOUT = 30.0

#: What the consumer does with the first four messages, in order.
SCRIPT = ("ack", "nak", "term", "in_progress+ack")


def emit(obj: object) -> None:
    print(json.dumps(obj, sort_keys=True), flush=True)


def consumer_state(ci: Any) -> dict[str, int]:
    """The consumer's state fields both clients must agree on."""
    return {
        "delivered_stream_seq": ci.delivered.stream_seq,
        "ack_floor_stream_seq": ci.ack_floor.stream_seq,
        "num_ack_pending": ci.num_ack_pending,
        "num_redelivered": ci.num_redelivered,
        "num_pending": ci.num_pending,
    }


async def make(js: Any, stream: str, consumer: str, count: int) -> None:
    from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

    await js.add_stream(StreamConfig(
        name=stream, subjects=[f"{stream}.>"], max_age=3600, duplicate_window=30,
        storage=StorageType.MEMORY,
    ))
    await js.add_consumer(stream, ConsumerConfig(
        durable_name=consumer, ack_policy=AckPolicy.EXPLICIT, ack_wait=2, max_deliver=5,
    ))
    for i in range(count):
        await js.publish(f"{stream}.x", b"m%d" % i)
    emit({"made": stream, "published": count})


async def consume(nc: Any, js: Any, stream: str, consumer: str) -> None:
    import nats.errors

    psub = await js.pull_subscribe_bind(consumer, stream)
    msgs = await psub.fetch(4, timeout=5)
    for msg, action in zip(msgs, SCRIPT, strict=True):
        emit({"got": msg.data.decode(), "delivered": msg.metadata.num_delivered,
              "action": action})
        if action == "ack":
            await msg.ack()
        elif action == "nak":
            await msg.nak()
        elif action == "term":
            await msg.term()
        else:
            await msg.in_progress()
            await msg.ack()
    [again] = await psub.fetch(1, timeout=5)
    emit({"got": again.data.decode(), "delivered": again.metadata.num_delivered,
          "action": "ack"})
    await again.ack()
    try:
        extra = await psub.fetch(1, timeout=1.5)
    except nats.errors.TimeoutError:
        extra = []
    emit({"after": [m.data.decode() for m in extra]})
    await nc.flush()


async def info(js: Any, stream: str, consumer: str) -> None:
    si = await js.stream_info(stream)
    ci = await js.consumer_info(stream, consumer)
    emit({
        "max_age": si.config.max_age, "duplicate_window": si.config.duplicate_window,
        "ack_wait": ci.config.ack_wait, "max_deliver": ci.config.max_deliver,
        "ack_policy": getattr(ci.config.ack_policy, "value", ci.config.ack_policy),
        "state": consumer_state(ci),
    })


async def run(mode: str, url: str, stream: str, consumer: str, rest: list[str]) -> int:
    import nats

    nc = await nats.connect(url, name=f"js-interop-peer-{mode}", allow_reconnect=False)
    try:
        js = nc.jetstream()
        if mode == "make":
            await make(js, stream, consumer, int(rest[0]))
        elif mode == "consume":
            await consume(nc, js, stream, consumer)
        elif mode == "info":
            await info(js, stream, consumer)
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
    finally:
        await nc.close()
    return 0


def main(argv: list[str]) -> int:
    mode, url, stream, consumer, *rest = argv
    try:
        return asyncio.run(asyncio.wait_for(run(mode, url, stream, consumer, rest),
                                            PEER_TIMEOUT))
    except TimeoutError:
        print(f"peer {mode} took over {PEER_TIMEOUT}s", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
