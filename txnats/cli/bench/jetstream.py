"""The JetStream workloads of ``txnats bench``: ``js-pub``, ``kv`` and ``obj``.

Each creates what it measures (a memory stream, a key-value bucket, an object store)
under a name of its own, deletes it afterwards, and returns a result dict as the core
workloads in :mod:`txnats.cli.bench.core` do. Storage is ``memory`` (as ``nats bench``
uses by default), so the figures are the clients' and the server's, not the disk's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorCore

from txnats.cli.bench._common import (
    DEFAULT_SUBJECT,
    ProgressSink,
    Result,
    base,
    check_counts,
    connect_many,
    rates,
)
from txnats.errors import InvalidArgumentError, StreamNotFoundError
from txnats.jetstream import JetStreamContext, JsMsg

__all__ = [
    "BENCH_BUCKET",
    "BENCH_STREAM",
    "bench_consume",
    "bench_js_pub",
    "bench_kv",
    "bench_obj",
]

#: The stream ``js-pub`` creates (and deletes); its bucket for ``kv`` and ``obj``.
BENCH_STREAM = "TXNATS_BENCH"
BENCH_BUCKET = "txnats_bench"


async def _fresh_stream(js: JetStreamContext, subject: str) -> None:
    try:
        await js.delete_stream(BENCH_STREAM)
    except StreamNotFoundError:
        pass
    await js.add_stream(name=BENCH_STREAM, subjects=[subject], storage="memory")


async def bench_js_pub(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 128,
    window: int = 4000,
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """``publish_async`` ``msgs`` messages to a memory stream, at most ``window``
    unacknowledged; the clock stops when the last acknowledgement is in."""
    check_counts(msgs, size)
    (nc,) = await connect_many(reactor, servers, 1, "txnats-bench-js", options or {})
    try:
        js = nc.jetstream(publish_async_max_pending=window)
        await _fresh_stream(js, subject)
        payload = b"x" * size
        acked = [0]

        def count(_: object) -> None:
            acked[0] += 1

        if progress is not None:
            progress.begin("Publishing", msgs, lambda: acked[0])
        publish = js.publish_async
        start = time.perf_counter()
        try:
            for _ in range(msgs):
                if js.publish_async_pending >= window:
                    await js.publish_async_room()
                publish(subject, payload).addCallback(count)
            await js.publish_async_complete()
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - start
        if acked[0] != msgs:
            raise InvalidArgumentError(f"only {acked[0]} of {msgs} publishes were acknowledged")
        await js.delete_stream(BENCH_STREAM)
    finally:
        await nc.close()
    result = base("js-pub", reactor, msgs=msgs, size=size, pubs=1, subs=0, window=window)
    return rates(result, msgs, msgs * size, elapsed)


async def bench_consume(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 128,
    batch: int = 1000,
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """Fill a memory stream with ``msgs`` messages (not timed), then drain it through a
    pull consumer (ack policy none) with ``consume()``, ``batch`` messages buffered;
    the clock runs from ``consume()`` to the last message handled."""
    check_counts(msgs, size)
    (nc,) = await connect_many(reactor, servers, 1, "txnats-bench-consume", options or {})
    try:
        js = nc.jetstream(publish_async_max_pending=4000)
        await _fresh_stream(js, subject)
        payload = b"x" * size
        for lo in range(0, msgs, 4000):
            for _ in range(min(4000, msgs - lo)):
                js.publish_async(subject, payload)
            await js.publish_async_complete()
        await js.add_consumer(BENCH_STREAM, durable_name="bench", ack_policy="none")
        got = [0]
        done: Deferred[None] = Deferred()

        def handler(msg: JsMsg) -> None:
            got[0] += 1
            if got[0] == msgs:
                done.callback(None)

        if progress is not None:
            progress.begin("Consuming", msgs, lambda: got[0])
        start = time.perf_counter()
        try:
            ctx = js.pull_consumer(BENCH_STREAM, "bench").consume(handler, max_messages=batch)
            if msgs:
                await done
            elapsed = time.perf_counter() - start
            ctx.stop()
        finally:
            if progress is not None:
                progress.end()
        await js.delete_stream(BENCH_STREAM)
    finally:
        await nc.close()
    result = base(
        "consume", reactor, msgs=msgs, size=size, pubs=1, subs=1, batch=batch,
        received=got[0], mode="consume",
    )
    return rates(result, msgs, msgs * size, elapsed)


async def bench_kv(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 10_000,
    size: int = 128,
    keys: int = 1000,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """``msgs`` sequential puts over ``keys`` keys, then ``msgs`` sequential gets.

    ``put_ops_per_sec`` and ``get_ops_per_sec`` are each phase's rate;
    ``msgs_per_sec`` is all operations over both phases.
    """
    check_counts(msgs, size)
    (nc,) = await connect_many(reactor, servers, 1, "txnats-bench-kv", options or {})
    try:
        js = nc.jetstream()
        try:
            await js.delete_key_value(BENCH_BUCKET)
        except StreamNotFoundError:
            pass
        kv = await js.create_key_value(BENCH_BUCKET, storage="memory")
        value = b"x" * size
        names = [f"k{i}" for i in range(min(keys, msgs))]
        n = len(names)
        done = [0]
        if progress is not None:
            progress.begin("Put, then get", 2 * msgs, lambda: done[0])
        try:
            start = time.perf_counter()
            for i in range(msgs):
                await kv.put(names[i % n], value)
                done[0] += 1
            put_elapsed = time.perf_counter() - start
            start = time.perf_counter()
            for i in range(msgs):
                entry = await kv.get(names[i % n])
                if len(entry.value) != size:
                    raise InvalidArgumentError(f"kv get returned {len(entry.value)} bytes")
                done[0] += 1
            get_elapsed = time.perf_counter() - start
        finally:
            if progress is not None:
                progress.end()
        await js.delete_key_value(BENCH_BUCKET)
    finally:
        await nc.close()
    result = base("kv", reactor, msgs=msgs, size=size, pubs=1, subs=0, keys=n)
    rates(result, 2 * msgs, 2 * msgs * size, put_elapsed + get_elapsed)
    result["put_ops_per_sec"] = round(msgs / max(put_elapsed, 1e-9), 1)
    result["get_ops_per_sec"] = round(msgs / max(get_elapsed, 1e-9), 1)
    return result


async def bench_obj(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 3,
    size: int = 64 << 20,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """Put one object of ``size`` bytes, then get it ``msgs`` times, streamed with
    ``get_chunks`` (size and digest checked).

    ``mb_per_sec`` and ``msgs_per_sec`` are the gets' (MiB/s, objects/s);
    ``put_mb_per_sec`` is the put's.
    """
    check_counts(msgs, size)
    if size < 1:
        raise InvalidArgumentError("--size must be at least 1 byte for obj")
    (nc,) = await connect_many(reactor, servers, 1, "txnats-bench-obj", options or {})
    try:
        js = nc.jetstream()
        try:
            await js.delete_object_store(BENCH_BUCKET)
        except StreamNotFoundError:
            pass
        store = await js.create_object_store(BENCH_BUCKET, storage="memory")
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        got = [0]
        if progress is not None:
            progress.begin("Get", msgs, lambda: got[0])
        try:
            start = time.perf_counter()
            await store.put("bench", data)
            put_elapsed = time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(msgs):
                # Streamed, as a large object is meant to be read (the size and the
                # digest are checked at the end all the same).
                n = 0
                async for chunk in store.get_chunks("bench"):
                    n += len(chunk)
                if n != size:
                    raise InvalidArgumentError(f"object get returned {n} bytes")
                got[0] += 1
            elapsed = time.perf_counter() - start
        finally:
            if progress is not None:
                progress.end()
        await js.delete_object_store(BENCH_BUCKET)
    finally:
        await nc.close()
    result = base("obj", reactor, msgs=msgs, size=size, pubs=1, subs=0)
    rates(result, msgs, msgs * size, elapsed)
    result["put_mb_per_sec"] = round(size / max(put_elapsed, 1e-9) / (1 << 20), 2)
    return result
