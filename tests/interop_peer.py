"""The nats-py side of the interoperability tests (tests/test_interop.py).

Run as a separate process so that nats-py's asyncio loop and the Twisted reactor
never share a process::

    python tests/interop_peer.py sub     URL SUBJECT COUNT   # print COUNT messages, exit
    python tests/interop_peer.py pub     URL SUBJECT COUNT   # publish COUNT messages, exit
    python tests/interop_peer.py reply   URL SUBJECT COUNT   # answer COUNT requests, exit
    python tests/interop_peer.py request URL SUBJECT [COUNT] # make requests, print replies

Every mode prints ``ready`` once it is connected and (for ``sub`` and ``reply``)
its subscription is flushed to the server, then one JSON object per line.
Payloads are base64 (``data``); ``headers`` is exactly the dict nats-py gives
(``msg.headers``), or null. The whole run is bounded by PEER_TIMEOUT seconds
(exit status 3 if it is exceeded).

This module is not a test module; the test imports :func:`payload` from it, so
nats-py is only imported inside :func:`main`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

PEER_TIMEOUT = 30.0
MSG_TIMEOUT = 10.0


def payload(i: int) -> bytes:
    """The payload of the ``i``-th message ``pub`` sends: empty first, then binary."""
    if i == 0:
        return b""
    return bytes(range(256)) + b"\r\nPUB x 1\r\n\x00" + i.to_bytes(4, "big")


def emit(obj: object) -> None:
    print(obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True), flush=True)


def describe(msg) -> dict:
    return {
        "subject": msg.subject,
        "reply": msg.reply or None,
        "data": base64.b64encode(msg.data).decode(),
        "headers": msg.headers,
    }


async def confirm(nc: Any) -> None:
    """Return once the server has our SUB (or UNSUB). One flush() is not enough with nats-py: its
    PING is written at once while subscribe() leaves the SUB to its flusher task, so the
    PONG can come back first (a txnats request then met NoRespondersError, once in a
    clean-clone CI run). By the first PONG the flusher has written the SUB; the second
    PING follows it on the wire. (benchmarks/natspy_bench.py does the same.)"""
    await nc.flush()
    await nc.flush()


async def run(mode: str, url: str, subject: str, count: int) -> int:
    import nats
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeoutError

    nc = await nats.connect(url, name=f"interop-peer-{mode}", allow_reconnect=False)
    try:
        if mode == "sub":
            sub = await nc.subscribe(subject)
            await confirm(nc)
            emit("ready")
            for _ in range(count):
                emit(describe(await sub.next_msg(timeout=MSG_TIMEOUT)))
        elif mode == "pub":
            emit("ready")
            for i in range(count):
                headers = {"X-Seq": str(i), "X-Origin": "nats-py"}
                await nc.publish(subject, payload(i), headers=headers)
            await nc.flush()
            emit({"published": count})
        elif mode == "reply":
            sub = await nc.subscribe(subject)
            await confirm(nc)
            emit("ready")
            for _ in range(count):
                msg = await sub.next_msg(timeout=MSG_TIMEOUT)
                emit(describe(msg))
                seen = (msg.headers or {}).get("X-Req", "")
                await nc.publish(
                    msg.reply,
                    b"nats-py:" + msg.data,
                    headers={"X-Responder": "nats-py", "X-Seen-Req": seen},
                )
            await sub.unsubscribe()
            await confirm(nc)  # the server has processed the UNSUB before we exit
        elif mode == "request":
            emit("ready")
            for i in range(count):
                try:
                    reply = await nc.request(
                        subject, b"ping %d" % i, timeout=MSG_TIMEOUT, headers={"X-Req": str(i)}
                    )
                except NoRespondersError:
                    emit({"error": "no_responders"})
                except NatsTimeoutError:
                    emit({"error": "timeout"})
                else:
                    emit(describe(reply))
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
    finally:
        await nc.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    mode, url, subject = argv[:3]
    count = int(argv[3]) if len(argv) == 4 else 1
    try:
        return asyncio.run(asyncio.wait_for(run(mode, url, subject, count), PEER_TIMEOUT))
    except TimeoutError:
        print(f"interop peer {mode} timed out after {PEER_TIMEOUT}s", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
