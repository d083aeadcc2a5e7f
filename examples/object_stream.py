"""Object store streaming: put a file and get it back to a file, never whole in memory.

Run it from the project root::

    python examples/object_stream.py                    # starts its own nats-server
    python examples/object_stream.py --size-mib 64 --server nats://127.0.0.1:4222

It writes a file of ``--size-mib`` MiB, puts it (read in a thread, sent chunk by
chunk under a window of acknowledgements), gets it back to another file (written in a
thread, renamed once the SHA-256 matches), streams it once more chunk by chunk, then
deletes the bucket and the files. Without ``--server`` it starts a JetStream
``nats-server`` with ``txnats.testing.NatsServer``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time

from twisted.internet import task

import txnats
from txnats.testing import NatsServer

MIB = 1024 * 1024


def write_file(path, size_mib):
    """``size_mib`` MiB of pseudo-random bytes; their SHA-256."""
    h = hashlib.sha256()
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for i in range(size_mib):
            piece = i.to_bytes(8, "big") + block[8:]
            h.update(piece)
            f.write(piece)
    return h.hexdigest()


async def main(reactor, url, size_mib):
    workdir = tempfile.mkdtemp(prefix="txnats-example-")
    nc = await txnats.connect(reactor, url, name="object-stream")
    js = nc.jetstream()
    try:
        src, out = os.path.join(workdir, "in.bin"), os.path.join(workdir, "out.bin")
        digest = write_file(src, size_mib)
        store = await js.create_object_store("example_stream")

        start = time.monotonic()
        with open(src, "rb") as f:
            info = await store.put("big.bin", f, description="streamed from a file")
        print(f"put {info.size / MIB:.0f} MiB in {info.chunks} chunks "
              f"({info.size / MIB / (time.monotonic() - start):.0f} MiB/s)")

        start = time.monotonic()
        await store.get_to_file("big.bin", out)
        print(f"got it back to a file ({size_mib / (time.monotonic() - start):.0f} MiB/s)")
        with open(out, "rb") as f:
            same = hashlib.file_digest(f, "sha256").hexdigest() == digest
        print(f"SHA-256 matches: {same}")

        chunks = size = 0
        async for chunk in store.get_chunks("big.bin"):  # bytes, one chunk at a time
            chunks += 1
            size += len(chunk)
        print(f"streamed {chunks} chunks, {size} bytes")
    finally:
        await js.delete_object_store("example_stream")
        await nc.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="txnats object store streaming")
    parser.add_argument("--server", metavar="URL", help="NATS server (default: start one)")
    parser.add_argument("--size-mib", type=int, default=16, help="object size (MiB)")
    args = parser.parse_args()
    if args.server:
        task.react(main, [args.server, args.size_mib])
    else:
        with NatsServer(jetstream=True) as server:
            task.react(main, [server.url, args.size_mib])
