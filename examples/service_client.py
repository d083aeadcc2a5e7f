"""Find the ``calc`` service of examples/service.py and call it.

It pings every instance of ``calc`` (``txnats.micro.ping``), reads one's endpoints
(``info``), makes requests (a service endpoint is a plain request/reply subject; an
error comes back with the ``Nats-Service-Error`` headers), then reads the request
counts (``stats``).

    python examples/service_client.py --server nats://127.0.0.1:4222

Without ``--server`` it starts its own ``nats-server`` and runs the service of
examples/service.py in this process, on a connection of its own.
"""

from __future__ import annotations

import argparse
import os
import sys

from twisted.internet import task

import txnats
from txnats import micro
from txnats.micro import ERROR_CODE_HEADER, ERROR_HEADER
from txnats.testing import NatsServer


async def call(nc, subject, data):
    reply = await nc.request(subject, data, timeout=2.0)
    if reply.headers is not None and ERROR_HEADER in reply.headers:
        code, text = reply.headers[ERROR_CODE_HEADER], reply.headers[ERROR_HEADER]
        print(f"{subject} {data.decode()} -> error {code}: {text}")
    else:
        print(f"{subject} {data.decode()} -> {reply.data.decode()}")


async def main(reactor, url, with_service):
    if with_service:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from service import start_service

        server_side = await txnats.connect(reactor, url, name="calc-service")
        start_service(server_side)
        await server_side.flush(timeout=5.0)

    nc = await txnats.connect(reactor, url, name="calc-client")
    found = await micro.ping(nc, "calc", timeout=5.0, stall=0.25)
    if not found:
        raise SystemExit("no calc service answered")
    for svc in found:
        print(f"found calc {svc.version}, instance {svc.id}")
    (info,) = await micro.info(nc, "calc", found[0].id, timeout=5.0)
    print(f"calc: {info.description}")
    for e in info.endpoints:
        print(f"  endpoint {e.name} on {e.subject} (queue group {e.queue_group})")

    await call(nc, "calc.add", b"[1, 2, 3.5]")
    await call(nc, "calc.divide", b"[7, 2]")
    await call(nc, "calc.divide", b"[1, 0]")
    await call(nc, "calc.add", b"not json")

    total = errors = 0
    for stats in await micro.stats(nc, "calc", timeout=5.0, stall=0.25):
        for e in stats.endpoints:
            total += e.num_requests
            errors += e.num_errors
    print(f"calc counted {total} requests, {errors} errors")
    await nc.drain()
    if with_service:
        await server_side.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="find and call the calc service")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server, False])
    else:
        with NatsServer() as server:
            task.react(main, [server.url, True])
