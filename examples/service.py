"""A service (the NATS service API, ADR-32): ``calc``, which adds and divides.

Its endpoints ``calc.add`` and ``calc.divide`` take a JSON list of numbers. Any NATS
tool that knows services finds it (``txnats micro ls``, ``nats micro ls``, nats.go's
and nats-py's ``micro``), and every instance you start joins queue group ``q``, so
requests are spread over them. Errors are answered with the ``Nats-Service-Error``
headers: raise ``ServiceError(code, description)`` in a handler.

    python examples/service.py                            # starts its own nats-server
    python examples/service.py --server nats://127.0.0.1:4222
    python examples/service_client.py --server nats://127.0.0.1:4222   # finds and calls it

It runs until Ctrl-C (or ``--duration`` seconds), then stops: requests already
received are answered first.
"""

from __future__ import annotations

import argparse
import json

from twisted.internet import task

import txnats
from txnats import micro
from txnats.micro import ServiceError
from txnats.testing import NatsServer


def numbers(data):
    """The request's JSON list of numbers, or a 400 error for the caller."""
    try:
        values = json.loads(data)
    except ValueError:
        values = None
    if not isinstance(values, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        raise ServiceError(400, "expected a JSON list of numbers")
    return values


def add(request):
    """calc.add: the sum. A plain function: it answers before it returns."""
    request.respond(json.dumps(sum(numbers(request.data))).encode())


async def divide(request):
    """calc.divide: the first number divided by the others. A coroutine handler."""
    values = numbers(request.data)
    if len(values) < 2:
        raise ServiceError(400, "expected at least two numbers")
    first, *others = values
    for n in others:
        if n == 0:
            raise ServiceError(400, "division by zero")
        first /= n
    request.respond(json.dumps(first).encode())


def start_service(nc):
    """Add the calc service and its endpoints to the connection ``nc``."""
    svc = micro.add_service(
        nc, name="calc", version="1.0.0", description="adds and divides numbers",
        metadata={"example": "examples/service.py"},
    )
    group = svc.add_group("calc")
    group.add_endpoint("add", add, metadata={"input": "JSON list of numbers"})
    group.add_endpoint("divide", divide, metadata={"input": "JSON list of numbers"})
    return svc


async def main(reactor, url, duration):
    nc = await txnats.connect(reactor, url, name="calc-service")
    svc = start_service(nc)
    await nc.flush(timeout=5.0)
    print(f"service calc {svc.version} running on {url}, id {svc.id}", flush=True)

    def stop():
        if not svc.is_stopped:
            return svc.stop()  # Ctrl-C: the reactor waits for the drain
        return None

    reactor.addSystemEventTrigger("before", "shutdown", stop)
    if duration:
        reactor.callLater(duration, stop)
    await svc.when_stopped()
    requests = sum(e.num_requests for e in svc.endpoints)
    errors = sum(e.num_errors for e in svc.endpoints)
    print(f"service stopped after {requests} requests ({errors} errors)", flush=True)
    await nc.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats service example")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    parser.add_argument("--duration", type=float, metavar="SECS", help="stop after SECS")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server, args.duration])
    else:
        with NatsServer() as server:
            print(f"started nats-server on {server.url}", flush=True)
            task.react(main, [server.url, args.duration])
