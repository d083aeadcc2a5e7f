"""Memory under a slow consumer: 1,000,000 messages into a handler that cannot keep up.

A publisher connection sends N messages of S bytes to a subscriber whose handler takes
its time (a Deferred fired a little later, per message). The subscription's pending
limits must bound what the client holds: over them it drops and counts, so RSS growth
stays near ``pending_bytes_limit`` plus per-message overhead, whatever N is. With
``--backpressure`` nothing is dropped; reading pauses instead.

    python benchmarks/slow_consumer_memory.py --msgs 1000000 --size 128 \\
        --pending-msgs 10000 --pending-bytes 8388608

Prints one JSON object: received, delivered, dropped, pending, RSS before and after
(from /proc/self/statm), and the growth.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from twisted.internet import defer, task

import txnats
from txnats.testing import NatsServer


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def run(reactor: Any, args: argparse.Namespace, url: str) -> dict[str, Any]:
    sub_nc = await txnats.connect(reactor, url, name="slow-sub")
    pub_nc = await txnats.connect(reactor, url, name="fast-pub")
    handled = 0

    def slow(msg: txnats.Msg) -> defer.Deferred[None]:
        nonlocal handled
        handled += 1
        return task.deferLater(reactor, args.handler_delay, lambda: None)

    sub = sub_nc.subscribe(
        "mem.slow",
        slow,
        pending_msgs_limit=args.pending_msgs,
        pending_bytes_limit=args.pending_bytes,
        backpressure=args.backpressure,
    )
    await sub_nc.flush()
    before = rss_bytes()
    peak = before
    payload = b"x" * args.size
    t0 = time.perf_counter()
    for _ in range(args.msgs):
        pub_nc.publish("mem.slow", payload)
        if pub_nc.pending_bytes > 1 << 20:
            await pub_nc.wait_for_room()
            peak = max(peak, rss_bytes())
    await pub_nc.flush(60)
    # Let the server hand over what it still has (bounded), then measure.
    deadline = reactor.seconds() + args.settle
    while sub.received < args.msgs and reactor.seconds() < deadline:
        await task.deferLater(reactor, 0.05, lambda: None)
        peak = max(peak, rss_bytes())
    result = {
        "msgs": args.msgs,
        "size": args.size,
        "pending_msgs_limit": args.pending_msgs,
        "pending_bytes_limit": args.pending_bytes,
        "backpressure": args.backpressure,
        "received": sub.received,
        "delivered": sub.delivered,
        "dropped": sub.dropped,
        "pending_msgs": sub.pending_msgs,
        "pending_bytes": sub.pending_bytes,
        "accounting_holds": sub.received == sub.delivered + sub.dropped + sub.pending_msgs,
        "rss_before_mib": round(before / 2**20, 1),
        "rss_peak_mib": round(peak / 2**20, 1),
        "rss_growth_mib": round((peak - before) / 2**20, 1),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    await pub_nc.close()
    await sub_nc.close()
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--msgs", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--pending-msgs", type=int, default=10_000)
    p.add_argument("--pending-bytes", type=int, default=8 << 20)
    p.add_argument("--handler-delay", type=float, default=0.0005)
    p.add_argument("--settle", type=float, default=10.0, help="seconds to wait at the end")
    p.add_argument("--backpressure", action="store_true")
    p.add_argument("--server", help="use this server instead of an embedded one")
    args = p.parse_args(argv)
    server = None
    url = args.server
    if url is None:
        server = NatsServer().start()
        url = server.url
    out: dict[str, Any] = {}

    async def go(reactor: Any) -> None:
        out.update(await run(reactor, args, url))

    try:
        task.react(lambda r: defer.ensureDeferred(go(r)), [])
    except SystemExit as e:
        if e.code:
            raise
    finally:
        if server is not None:
            server.stop()
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
