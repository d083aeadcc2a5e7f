"""The nats-py side of the object store interoperability tests (tests/test_object_store.py).

Run as a separate process so that nats-py's asyncio loop and the Twisted reactor
never share a process::

    python tests/obj_interop_peer.py get URL BUCKET NAME            # get, print what came
    python tests/obj_interop_peer.py put URL BUCKET NAME SIZE SEED  # put payload(SIZE, SEED)
    python tests/obj_interop_peer.py exchange URL BUCKET -          # read txnats's, write back

Both print ``ready`` once connected, then one JSON object: for ``get`` the object's
``size``, ``sha256`` (hex) and nats-py's view of its info; for ``put`` the info nats-py
returned. ``exchange`` reads what txnats stored (``plain``, the link ``alias`` to it,
the deleted ``removed``: size and SHA-256, or the error's class name; the listing with
the deleted flags), then
puts ``py.obj`` (``payload(EXCHANGE_SIZE, 7)``) and ``py.removed``, deletes the latter
and prints their infos (nats-py 2.16 cannot make links). The run is bounded by
PEER_TIMEOUT seconds (exit status 3 past it).

This module is not a test module; the test imports :func:`payload` from it, so nats-py
is only imported inside :func:`run`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys

PEER_TIMEOUT = 30.0

#: The size of what ``exchange`` puts (more than two 128 KiB chunks).
EXCHANGE_SIZE = 300_000

#: What ``put`` stores besides the bytes.
DESCRIPTION = "put by nats-py"
HEADERS = {"X-Origin": "nats-py"}


def payload(size: int, seed: int) -> bytes:
    """The bytes ``put`` stores: ``size`` pseudo-random bytes from ``seed``."""
    return random.Random(seed).randbytes(size)


def emit(obj: object) -> None:
    print(obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True), flush=True)


def describe(info) -> dict:
    return {
        "name": info.name,
        "bucket": info.bucket,
        "nuid": info.nuid,
        "size": info.size,
        "chunks": info.chunks,
        "digest": info.digest,
        "deleted": bool(info.deleted),
        "description": info.description,
        "headers": info.headers,
        "max_chunk_size": info.options.max_chunk_size if info.options else None,
    }


async def run(mode: str, url: str, bucket: str, name: str, rest: list[str]) -> int:
    import nats
    from nats.js.api import ObjectMeta

    nc = await nats.connect(url, name=f"obj-interop-peer-{mode}", allow_reconnect=False)
    try:
        js = nc.jetstream()
        obs = await js.object_store(bucket)
        emit("ready")
        if mode == "get":
            result = await obs.get(name)
            data = result.data or b""
            emit({
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "info": describe(result.info),
            })
        elif mode == "exchange":
            for obj in ("plain", "alias", "removed"):
                try:
                    result = await obs.get(obj)
                except Exception as err:  # the class name is what is compared
                    emit({obj: type(err).__name__})
                else:
                    data = result.data or b""
                    emit({obj: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}})
            emit({"list": sorted([i.name, bool(i.deleted)] for i in await obs.list())})
            info = await obs.put("py.obj", payload(EXCHANGE_SIZE, 7))
            emit({"py.obj": describe(info)})
            await obs.put("py.removed", b"soon gone")
            await obs.delete("py.removed")
            emit({"py.removed": "deleted"})
        elif mode == "put":
            size, seed = int(rest[0]), int(rest[1])
            meta = ObjectMeta(name=name, description=DESCRIPTION, headers=dict(HEADERS))
            info = await obs.put(name, payload(size, seed), meta=meta)
            emit(describe(info))
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
    finally:
        await nc.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    mode, url, bucket, name, *rest = argv
    try:
        return asyncio.run(asyncio.wait_for(run(mode, url, bucket, name, rest), PEER_TIMEOUT))
    except TimeoutError:
        print(f"object store interop peer {mode} timed out after {PEER_TIMEOUT}s", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
