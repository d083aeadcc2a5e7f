"""The nats-py side of tests/test_kv_domains.py: read a bucket of another JetStream
domain through that domain's API prefix::

    python tests/kv_domains_peer.py URL DOMAIN BUCKET

Connects to URL (the leaf), takes ``nc.jetstream(domain=DOMAIN)``, binds BUCKET and
prints, one JSON object a line: the entry of ``k`` (value in base64), what ``get`` of
the deleted key ``gone`` raises, and ``keys()``. Bounded by PEER_TIMEOUT seconds (exit
status 3 if exceeded). Not a test module; nats-py is only imported inside :func:`run`.
"""

from __future__ import annotations

import sys

from kv_interop_peer import b64, emit, peer_main, read_all


async def run(url: str, domain: str, bucket: str) -> int:
    import nats

    nc = await nats.connect(url, name="kv-domains-peer", allow_reconnect=False)
    try:
        kv = await nc.jetstream(domain=domain).key_value(bucket)
        e = await kv.get("k")
        emit({"key": e.key, "value": b64(e.value or b""), "revision": e.revision})
        try:
            await kv.get("gone")
        except Exception as err:  # the class name is what is compared
            emit({"key": "gone", "error": type(err).__name__})
        else:
            emit({"key": "gone", "error": None})
        emit({"keys": sorted(await read_all(kv.keys))})
    finally:
        await nc.close()
    return 0


def main(argv: list[str]) -> int:
    return peer_main(argv, run, "kv domains peer")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
