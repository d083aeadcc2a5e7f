"""The nats-py side of the key-value interoperability tests (tests/test_kv.py).

Run as a separate process so that nats-py's asyncio loop and the Twisted reactor never
share a process::

    python tests/kv_interop_peer.py exchange URL BUCKET   # read what txnats wrote, write back
    python tests/kv_interop_peer.py create   URL BUCKET   # create a bucket, put one key
    python tests/kv_interop_peer.py ttl      URL BUCKET   # read expired keys, put one with a TTL

``exchange`` binds to BUCKET (made by txnats), prints the entry of ``from.txnats``,
what ``get`` of the deleted key ``gone`` raises, ``keys()`` and the history of
``from.txnats``; then puts :data:`NATSPY_VALUE` at ``from.natspy`` and deletes
``natspy.deleted`` (put first), printing their revisions. ``create`` makes BUCKET with
``history=3, ttl=30`` and puts ``b"made by nats-py"`` at ``k``. ``ttl`` reads ``short``
(expired by its TTL: what nats-py's ``get`` says) and ``long``, then publishes
``frompy`` with the header ``Nats-TTL: 1`` (nats-py's KV has no TTL argument) and
prints its revision. Each step prints one JSON
object per line; values are base64. The run is bounded by PEER_TIMEOUT seconds (exit
status 3 if exceeded).

Not a test module; nats-py is only imported inside :func:`run`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

PEER_TIMEOUT = 30.0

#: What ``exchange`` puts at ``from.natspy``: binary, with bytes a text protocol might trip on.
NATSPY_VALUE = bytes(range(256)) + b"\r\nPUB x 1\r\n\x00nats-py"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def emit(obj: object) -> None:
    print(json.dumps(obj, sort_keys=True), flush=True)


#: How many times :func:`read_all` asks.
READ_ATTEMPTS = 5


async def read_all(read: Callable[[], Awaitable[T]]) -> T:
    """``await read()`` (``kv.keys`` or ``kv.history``), asked again on NoKeysError.

    Only for a bucket known not to be empty, as here: txnats's puts were acknowledged
    before this process started. nats-py's watcher can still say "no more entries"
    before the entries the server already sent have reached it (nats-py issue #842:
    the consumer info says nothing is pending, the subscription has counted nothing
    yet), and keys() and history() then raise NoKeysError: 61 times in 20,000 calls on
    a busy machine. Each call makes a fresh watcher; an empty answer every time still
    fails the test.
    """
    from nats.js.errors import NoKeysError

    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            return await read()
        except NoKeysError:
            if attempt == READ_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def run(mode: str, url: str, bucket: str) -> int:
    import nats

    nc = await nats.connect(url, name=f"kv-interop-peer-{mode}", allow_reconnect=False)
    try:
        js = nc.jetstream()
        if mode == "exchange":
            kv = await js.key_value(bucket)
            e = await kv.get("from.txnats")
            emit({"get": {"key": e.key, "value": b64(e.value or b""), "revision": e.revision}})
            try:
                await kv.get("gone")
            except Exception as err:  # the class name is what is compared
                emit({"gone": type(err).__name__})
            else:
                emit({"gone": None})
            emit({"keys": sorted(await read_all(kv.keys))})
            hist = await read_all(lambda: kv.history("from.txnats"))
            emit({"history": [[h.revision, b64(h.value or b""), h.operation] for h in hist]})
            emit({"put": await kv.put("from.natspy", NATSPY_VALUE)})
            await kv.put("natspy.deleted", b"short-lived")
            await kv.delete("natspy.deleted")
            emit({"deleted": True})
        elif mode == "ttl":
            kv = await js.key_value(bucket)
            try:
                e = await kv.get("short")
            except Exception as err:  # the class name is what is compared
                emit({"short": type(err).__name__})
            else:
                emit({"short": {"value": b64(e.value or b""), "operation": e.operation}})
            e = await kv.get("long")
            emit({"long": b64(e.value or b"")})
            ack = await js.publish(
                f"$KV.{bucket}.frompy", b"from nats-py", headers={"Nats-TTL": "1"}
            )
            emit({"frompy": ack.seq})
        elif mode == "create":
            kv = await js.create_key_value(bucket=bucket, history=3, ttl=30)
            emit({"put": await kv.put("k", b"made by nats-py")})
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
    finally:
        await nc.close()
    return 0


def peer_main(
    argv: list[str], run_peer: Callable[..., Awaitable[int]], what: str, nargs: int = 3
) -> int:
    """Run ``run_peer(*argv)`` bounded by PEER_TIMEOUT (exit status 3 past it; 2 and the
    calling script's doc for a wrong argument count)."""
    if len(argv) != nargs:
        print(sys.modules["__main__"].__doc__, file=sys.stderr)
        return 2
    try:
        return asyncio.run(asyncio.wait_for(run_peer(*argv), PEER_TIMEOUT))
    except TimeoutError:
        print(f"{what} timed out after {PEER_TIMEOUT}s", file=sys.stderr)
        return 3


def main(argv: list[str]) -> int:
    return peer_main(argv, run, "kv interop peer")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
