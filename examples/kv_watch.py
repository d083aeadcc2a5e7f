"""Key-value watch and per-key TTL.

Run it from the project root::

    python examples/kv_watch.py                         # starts its own nats-server
    python examples/kv_watch.py --server nats://127.0.0.1:4222

It makes a bucket with limit markers (``limit_marker_ttl``, ADR-48), watches it, puts
and deletes keys, creates one with a one-second TTL and waits for the marker its
expiry leaves, then deletes the bucket. A watcher survives reconnections and server
restarts; ``last_revision`` lets a later one pick up where it stopped. Without
``--server`` it starts a JetStream ``nats-server`` with ``txnats.testing.NatsServer``.
"""

from __future__ import annotations

import argparse

from twisted.internet import task

import txnats
from txnats.testing import NatsServer


def show(entry):
    if entry is None:
        return "-- initial values done --"
    return f"{entry.operation:<5} {entry.key} = {entry.value!r} (revision {entry.revision})"


async def main(reactor, url):
    nc = await txnats.connect(reactor, url, name="kv-watch")
    js = nc.jetstream()
    try:
        kv = await js.create_key_value("example_watch", limit_marker_ttl=5)
        await kv.put("config.color", b"blue")

        watcher = await kv.watch("config.>")
        print(show(await watcher.next_update(timeout=5)))  # the current value
        print(show(await watcher.next_update(timeout=5)))  # None: initial values done

        await kv.put("config.color", b"green")
        await kv.delete("config.color")
        await kv.create("config.session", b"short-lived", ttl=1)
        for _ in range(4):  # green, the delete, the session, its expiry marker
            print(show(await watcher.next_update(timeout=5)))

        resume_at = watcher.last_revision
        watcher.stop()  # never waits
        print(f"stopped at revision {resume_at}")

        await kv.put("config.color", b"red")
        later = await kv.watch("config.>", resume_from_revision=resume_at + 1)
        print(show(await later.next_update(timeout=5)))  # red: nothing missed
        later.stop()
        print("keys:", [key async for key in kv.list_keys()])
    finally:
        await js.delete_key_value("example_watch")
        await nc.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats key-value watch and TTL")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server])
    else:
        with NatsServer(jetstream=True) as server:
            task.react(main, [server.url])
