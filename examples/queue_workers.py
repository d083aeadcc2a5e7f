"""Queue groups: three workers share the jobs sent to one subject.

Each worker has its own connection and subscribes to ``jobs`` in the queue group
``workers``; the server gives each job to exactly one member of the group. A
producer sends 30 jobs as requests, so it knows when each one is done, and the
program prints how many jobs each worker handled. The split varies from run to
run; the total is always 30.

    python examples/queue_workers.py [--server nats://127.0.0.1:4222]

Without ``--server`` it starts its own ``nats-server`` on a free port.
"""

from __future__ import annotations

import argparse
from collections import Counter

from twisted.internet import defer, task

import txnats
from txnats.testing import NatsServer

WORKERS = 3
JOBS = 30


async def main(reactor, url):
    handled = Counter()
    workers = []
    for i in range(1, WORKERS + 1):
        name = f"worker-{i}"
        nc = await txnats.connect(reactor, url, name=name)

        def work(msg, name=name):
            handled[name] += 1
            msg.respond(name.encode())

        nc.subscribe("jobs", work, queue="workers")
        await nc.flush()  # the server knows the worker before any job is sent
        workers.append(nc)

    producer = await txnats.connect(reactor, url, name="producer")
    replies = await defer.gatherResults(
        [producer.request("jobs", b"job %d" % n, timeout=5.0) for n in range(JOBS)],
        consumeErrors=True,
    )

    for i in range(1, WORKERS + 1):
        name = f"worker-{i}"
        print(f"{name} handled {handled[name]} jobs")
    if Counter(reply.data.decode() for reply in replies) != handled:
        raise SystemExit("the replies do not match the workers' counts")
    print(f"all {sum(handled.values())} jobs done, each by exactly one worker")

    await producer.drain()
    await defer.gatherResults([nc.drain() for nc in workers], consumeErrors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats queue group example")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer() as server:
            task.react(main, [server.url])
