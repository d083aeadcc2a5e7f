"""The nats-py side of the benchmark: the workloads of ``txnats bench``, through nats-py.

nats-py is the official asyncio client; this script runs the same workloads as
``txnats/cli/bench/`` with it, every role in this one process, and prints one result
(``--json``: one JSON object with the same keys as ``txnats bench --json``)::

    python benchmarks/natspy_bench.py pub --server nats://127.0.0.1:4222 --msgs 100000
    python benchmarks/natspy_bench.py pubsub --mode iter --uvloop --json ...

It does not import txnats or Twisted, so nothing but asyncio (or uvloop) runs here.

How each workload uses nats-py (its documented, ordinary usage):

- pub: ``await nc.publish(subject, payload)`` per message, then ``await nc.flush()``;
  the clock stops when the flush returns.
- pub-plain: the same loop with nothing else in it (no progress counter, no
  watchdog task), on one connection: nats-py's own plain loop, which yields to the
  event loop only when its pending buffer is full. Its result is a ``pub`` result
  with ``publish_loop`` ``"plain"``, as txnats's ``pub-plain`` is.
- pubsub / fanout: subscriber connections read with ``cb=`` (an ``async def``
  callback), with ``async for msg in sub.messages``, or with ``await sub.next_msg()``;
  one publisher connection publishes as above. Received msgs/s over all subscribers.
- req: a responder connection answers with ``await msg.respond(msg.data)`` in a
  ``cb=``; the requester makes ``await nc.request(...)`` sequentially, or keeps M in
  flight with M sequential loops under ``asyncio.gather`` (a bounded window).
- micro: as req, but the responder is a ``nats.micro`` service whose endpoint answers
  with ``await req.respond(req.data)``.

Every subscriber and responder connection is confirmed (:func:`_confirm`) before the
clock starts, so the server knows its subscription before the first message.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import math
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

WORKLOADS = (
    "pub", "pub-plain", "pubsub", "req", "fanout", "js-pub", "consume", "kv", "obj", "micro",
)
MODES = ("cb", "iter", "next")
STALL = 10.0


def _version() -> str:
    try:
        return importlib.metadata.version("nats-py")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), math.ceil(pct / 100.0 * len(sorted_values))))
    return sorted_values[rank - 1]


def _split(total: int, parts: int) -> list[int]:
    share, extra = divmod(total, parts)
    return [share + (1 if i < extra else 0) for i in range(parts)]


def _base(args: argparse.Namespace, workload: str, **fields: Any) -> dict[str, Any]:
    return {
        "client": "nats-py",
        "version": _version(),
        "workload": workload,
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "loop": "uvloop" if args.uvloop else "asyncio",
        **fields,
    }


def _rates(result: dict[str, Any], count: int, nbytes: int, elapsed: float) -> dict[str, Any]:
    elapsed = max(elapsed, 1e-9)
    result["elapsed"] = round(elapsed, 6)
    result["msgs_per_sec"] = round(count / elapsed, 1)
    result["mb_per_sec"] = round(nbytes / elapsed / (1024 * 1024), 2)
    return result


async def _watch(done: Awaitable[Any], current: Callable[[], int], what: str) -> None:
    """Await ``done``; fail if ``current()`` does not move for STALL seconds."""
    task = asyncio.ensure_future(done)
    last, since = current(), time.monotonic()
    try:
        while True:
            finished, _ = await asyncio.wait({task}, timeout=0.25)
            if finished:
                task.result()
                return
            now, cur = time.monotonic(), current()
            if cur != last:
                last, since = cur, now
            elif now - since > STALL:
                raise TimeoutError(f"{what}: no progress for {STALL:g}s ({cur} done)")
    finally:
        if not task.done():
            task.cancel()


async def _connect(args: argparse.Namespace, name: str) -> Any:
    import nats

    return await nats.connect(args.server, name=name)


async def _confirm(nc: Any) -> None:
    """Return once the server has processed every ``SUB`` that ``nc`` has sent.

    Call it on a subscriber's (or responder's) own connection before another connection
    starts publishing to it. One ``flush()`` is not enough with nats-py: ``subscribe()``
    leaves its ``SUB`` queued for the flusher task, while ``flush()`` writes its ``PING``
    straight to the socket, so the ``PING`` can overtake the ``SUB`` and its ``PONG``
    come back before the server knows the subscription (``compare.py --quick`` then
    failed about one run in 10, ``req`` with ``NoRespondersError``; ``pubsub`` and
    ``fanout`` can lose their first messages and stall the same way). The
    flusher task was woken by ``subscribe()``, so it has written the ``SUB`` by the time
    the first ``PONG`` is read; the second ``PING`` follows the ``SUB`` on the wire, and
    its ``PONG`` proves the subscription registered.
    """
    await nc.flush(timeout=STALL)
    await nc.flush(timeout=STALL)


async def _publish(nc: Any, subject: str, payload: bytes, count: int, sent: list[int]) -> None:
    publish = nc.publish
    for i in range(count):
        await publish(subject, payload)
        if not i & 1023:
            sent[0] = i
    sent[0] = count
    await nc.flush(timeout=STALL * 6)


async def bench_pub(args: argparse.Namespace) -> dict[str, Any]:
    clients = [await _connect(args, f"natspy-bench-pub-{i}") for i in range(args.pubs)]
    payload = b"x" * args.size
    sents = [[0] for _ in clients]
    try:
        start = time.perf_counter()
        work = asyncio.gather(
            *(
                _publish(nc, args.subject, payload, n, sent)
                for nc, n, sent in zip(clients, _split(args.msgs, args.pubs), sents, strict=True)
            )
        )
        await _watch(work, lambda: sum(s[0] for s in sents), "publishing")
        elapsed = time.perf_counter() - start
    finally:
        for nc in clients:
            await nc.close()
    result = _base(
        args, "pub", msgs=args.msgs, size=args.size, pubs=args.pubs, subs=0,
        publish_loop="cooperative",
    )
    return _rates(result, args.msgs, args.msgs * args.size, elapsed)


async def bench_pub_plain(args: argparse.Namespace) -> dict[str, Any]:
    nc = await _connect(args, "natspy-bench-pub-plain")
    subject, payload, msgs = args.subject, b"x" * args.size, args.msgs

    async def plain() -> None:
        publish = nc.publish
        for _ in range(msgs):
            await publish(subject, payload)
        await nc.flush(timeout=STALL * 6)

    try:
        start = time.perf_counter()
        await asyncio.wait_for(plain(), STALL * 6)
        elapsed = time.perf_counter() - start
    finally:
        await nc.close()
    result = _base(
        args, "pub", msgs=msgs, size=args.size, pubs=1, subs=0, publish_loop="plain"
    )
    return _rates(result, msgs, msgs * args.size, elapsed)


async def bench_pubsub(args: argparse.Namespace, workload: str = "pubsub") -> dict[str, Any]:
    target = args.msgs
    subs_n = args.subs
    sub_clients = [await _connect(args, f"natspy-bench-sub-{i}") for i in range(subs_n)]
    pub_clients = [await _connect(args, f"natspy-bench-pub-{i}") for i in range(args.pubs)]
    counts = [0] * subs_n
    readers: list[Awaitable[Any]] = []
    subs: list[Any] = []
    try:
        for i, nc in enumerate(sub_clients):
            if args.mode == "cb":
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

                def make_cb(slot: int, fut: asyncio.Future[None]) -> Any:
                    async def cb(msg: Any) -> None:
                        counts[slot] += 1
                        if counts[slot] == target and not fut.done():
                            fut.set_result(None)

                    return cb

                subs.append(await nc.subscribe(args.subject, cb=make_cb(i, done)))
                readers.append(done)
            elif args.mode == "iter":
                sub = await nc.subscribe(args.subject)
                subs.append(sub)

                async def iterate(slot: int, sub: Any) -> None:
                    if target == 0:
                        return
                    async for _msg in sub.messages:
                        counts[slot] += 1
                        if counts[slot] == target:
                            return

                readers.append(iterate(i, sub))
            else:
                sub = await nc.subscribe(args.subject)
                subs.append(sub)

                async def pull(slot: int, sub: Any) -> None:
                    next_msg = sub.next_msg
                    while counts[slot] < target:
                        await next_msg(timeout=STALL)
                        counts[slot] += 1

                readers.append(pull(i, sub))
            await _confirm(nc)
        if target == 0:
            for r in readers:
                if isinstance(r, asyncio.Future):
                    r.set_result(None)
        sents = [[0] for _ in pub_clients]
        payload = b"x" * args.size
        pub_elapsed = [0.0]

        async def publish() -> None:
            await asyncio.gather(
                *(
                    _publish(nc, args.subject, payload, n, sent)
                    for nc, n, sent in zip(
                        pub_clients, _split(target, args.pubs), sents, strict=True
                    )
                )
            )
            pub_elapsed[0] = time.perf_counter() - start

        start = time.perf_counter()
        await _watch(
            asyncio.gather(publish(), *readers),
            lambda: sum(counts) + sum(s[0] for s in sents),
            "publish/subscribe",
        )
        elapsed = time.perf_counter() - start
    finally:
        for nc in sub_clients + pub_clients:
            await nc.close()
    received = sum(counts)
    result = _base(
        args, workload, msgs=target, size=args.size, pubs=args.pubs, subs=subs_n, mode=args.mode
    )
    _rates(result, received, received * args.size, elapsed)
    result["received"] = received
    result["dropped"] = 0
    result["pub_msgs_per_sec"] = round(target / max(pub_elapsed[0], 1e-9), 1)
    return result


async def _serve_plain(responder: Any, subject: str) -> Any:
    async def respond(msg: Any) -> None:
        await msg.respond(msg.data)

    await responder.subscribe(subject, cb=respond)
    return None


async def _serve_micro(responder: Any, subject: str) -> Any:
    from nats.micro import add_service

    async def echo(req: Any) -> None:
        await req.respond(req.data)

    svc = await add_service(responder, name="natspy-bench", version="1.0.0")
    await svc.add_endpoint(name="echo", subject=subject, handler=echo)
    return svc


async def bench_req(args: argparse.Namespace, workload: str = "req") -> dict[str, Any]:
    """Requests to an echo responder: a plain subscription (``req``) or a ``nats.micro``
    service endpoint (``micro``)."""
    duration = args.duration
    if duration is None and args.msgs is None:
        duration = 5.0
    responder = await _connect(args, f"natspy-bench-{workload}-0")
    requester = await _connect(args, f"natspy-bench-{workload}-1")
    latencies: list[float] = []
    try:
        serve = _serve_micro if workload == "micro" else _serve_plain
        svc = await serve(responder, args.subject)
        await _confirm(responder)
        payload = b"x" * args.size
        perf = time.perf_counter
        remaining = [args.msgs or 0]
        deadline = [0.0]

        async def worker() -> None:
            request = requester.request
            append = latencies.append
            while True:
                if duration is not None:
                    if perf() >= deadline[0]:
                        return
                elif remaining[0] <= 0:
                    return
                else:
                    remaining[0] -= 1
                t0 = perf()
                await request(args.subject, payload, timeout=5.0)
                append(perf() - t0)

        start = perf()
        deadline[0] = start + (duration or 0.0)
        await _watch(
            asyncio.gather(*(worker() for _ in range(args.inflight))),
            lambda: len(latencies),
            "requesting",
        )
        elapsed = perf() - start
        if svc is not None:
            await svc.stop()
    finally:
        await responder.close()
        await requester.close()
    n = len(latencies)
    latencies.sort()
    result = _base(args, workload, msgs=n, size=args.size, pubs=1, subs=1,
                   inflight=args.inflight)
    _rates(result, n, n * args.size * 2, elapsed)
    result["requests"] = n
    result["duration"] = duration
    result["latency_us"] = {
        "p50": round(percentile(latencies, 50) * 1e6, 1),
        "p90": round(percentile(latencies, 90) * 1e6, 1),
        "p99": round(percentile(latencies, 99) * 1e6, 1),
        "max": round((latencies[-1] if latencies else 0.0) * 1e6, 1),
    }
    return result


BENCH_STREAM = "TXNATS_BENCH"
BENCH_BUCKET = "txnats_bench"


async def _fresh_stream(js: Any, subject: str) -> None:
    """An empty memory stream BENCH_STREAM taking ``subject`` (an old one deleted)."""
    from nats.js.api import StorageType
    from nats.js.errors import NotFoundError

    try:
        await js.delete_stream(BENCH_STREAM)
    except NotFoundError:
        pass
    await js.add_stream(name=BENCH_STREAM, subjects=[subject], storage=StorageType.MEMORY)


async def bench_js_pub(args: argparse.Namespace) -> dict[str, Any]:
    nc = await _connect(args, "natspy-bench-js")
    try:
        js = nc.jetstream(publish_async_max_pending=4000)
        await _fresh_stream(js, args.subject)
        payload = b"x" * args.size
        acked = [0]

        def count(fut: Any) -> None:
            if not fut.cancelled() and fut.exception() is None:
                acked[0] += 1

        async def work() -> None:
            publish = js.publish_async
            for _ in range(args.msgs):
                fut = await publish(args.subject, payload)
                fut.add_done_callback(count)
            await js.publish_async_completed()

        start = time.perf_counter()
        await _watch(work(), lambda: acked[0], "publishing to JetStream")
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0)  # let the last done-callbacks run
        if acked[0] != args.msgs:
            raise RuntimeError(f"only {acked[0]} of {args.msgs} publishes were acknowledged")
        await js.delete_stream(BENCH_STREAM)
    finally:
        await nc.close()
    result = _base(args, "js-pub", msgs=args.msgs, size=args.size, pubs=1, subs=0, window=4000)
    return _rates(result, args.msgs, args.msgs * args.size, elapsed)


async def bench_consume(args: argparse.Namespace, batch: int = 1000) -> dict[str, Any]:
    """Fill a memory stream (not timed), then drain a pull consumer (ack policy none)
    the fastest way nats-py offers: a loop of fetch(batch). The clock runs from the
    first fetch to the last message handled."""
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await _connect(args, "natspy-bench-consume")
    try:
        js = nc.jetstream(publish_async_max_pending=4000)
        await _fresh_stream(js, args.subject)
        payload = b"x" * args.size
        for _ in range(args.msgs):
            await js.publish_async(args.subject, payload)
        await js.publish_async_completed()
        await js.add_consumer(
            BENCH_STREAM, ConsumerConfig(durable_name="bench", ack_policy=AckPolicy.NONE)
        )
        psub = await js.pull_subscribe_bind("bench", BENCH_STREAM)
        got = [0]

        async def work() -> None:
            while got[0] < args.msgs:
                for _msg in await psub.fetch(min(batch, args.msgs - got[0]), timeout=5):
                    got[0] += 1

        start = time.perf_counter()
        await _watch(work(), lambda: got[0], "consuming from JetStream")
        elapsed = time.perf_counter() - start
        await js.delete_stream(BENCH_STREAM)
    finally:
        await nc.close()
    result = _base(args, "consume", msgs=args.msgs, size=args.size, pubs=1, subs=1,
                   batch=batch, received=got[0])
    return _rates(result, args.msgs, args.msgs * args.size, elapsed)


async def bench_kv(args: argparse.Namespace) -> dict[str, Any]:
    from nats.js.api import StorageType
    from nats.js.errors import NotFoundError

    nc = await _connect(args, "natspy-bench-kv")
    try:
        js = nc.jetstream()
        try:
            await js.delete_key_value(BENCH_BUCKET)
        except NotFoundError:
            pass
        kv = await js.create_key_value(bucket=BENCH_BUCKET, storage=StorageType.MEMORY)
        value = b"x" * args.size
        names = [f"k{i}" for i in range(min(1000, args.msgs))]
        n = len(names)
        start = time.perf_counter()
        for i in range(args.msgs):
            await kv.put(names[i % n], value)
        put_elapsed = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(args.msgs):
            entry = await kv.get(names[i % n])
            if len(entry.value) != args.size:
                raise RuntimeError(f"kv get returned {len(entry.value)} bytes")
        get_elapsed = time.perf_counter() - start
        await js.delete_key_value(BENCH_BUCKET)
    finally:
        await nc.close()
    result = _base(args, "kv", msgs=args.msgs, size=args.size, pubs=1, subs=0, keys=n)
    _rates(result, 2 * args.msgs, 2 * args.msgs * args.size, put_elapsed + get_elapsed)
    result["put_ops_per_sec"] = round(args.msgs / max(put_elapsed, 1e-9), 1)
    result["get_ops_per_sec"] = round(args.msgs / max(get_elapsed, 1e-9), 1)
    return result


async def bench_obj(args: argparse.Namespace) -> dict[str, Any]:
    from nats.js.api import StorageType
    from nats.js.errors import NotFoundError

    nc = await _connect(args, "natspy-bench-obj")
    try:
        js = nc.jetstream()
        try:
            await js.delete_object_store(BENCH_BUCKET)
        except NotFoundError:
            pass
        store = await js.create_object_store(BENCH_BUCKET, storage=StorageType.MEMORY)
        size = args.size
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        start = time.perf_counter()
        await store.put("bench", data)
        put_elapsed = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(args.msgs):
            res = await store.get("bench")
            if len(res.data) != size:
                raise RuntimeError(f"object get returned {len(res.data)} bytes")
        elapsed = time.perf_counter() - start
        await js.delete_object_store(BENCH_BUCKET)
    finally:
        await nc.close()
    result = _base(args, "obj", msgs=args.msgs, size=size, pubs=1, subs=0)
    _rates(result, args.msgs, args.msgs * size, elapsed)
    result["put_mb_per_sec"] = round(size / max(put_elapsed, 1e-9) / (1 << 20), 2)
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.workload == "js-pub":
        return await bench_js_pub(args)
    if args.workload == "consume":
        return await bench_consume(args)
    if args.workload == "kv":
        return await bench_kv(args)
    if args.workload == "obj":
        return await bench_obj(args)
    if args.workload == "micro":
        return await bench_req(args, "micro")
    if args.workload == "pub":
        return await bench_pub(args)
    if args.workload == "pub-plain":
        return await bench_pub_plain(args)
    if args.workload == "pubsub":
        return await bench_pubsub(args)
    if args.workload == "fanout":
        args.pubs = 1
        return await bench_pubsub(args, "fanout")
    return await bench_req(args)


def _human(r: dict[str, Any]) -> str:
    kind = " (plain loop)" if r.get("publish_loop") == "plain" else ""
    head = f"nats-py {r['version']} ({r['loop']}) {r['workload']}{kind}"
    text = f"{head}: {r['msgs_per_sec']:,.0f} msgs/sec ~ {r['mb_per_sec']:.2f} MB/sec"
    if r["workload"] in ("req", "micro"):
        lat = r["latency_us"]
        text += f"; latency p50 {lat['p50']:,.0f} µs, p90 {lat['p90']:,.0f} µs, "
        text += f"p99 {lat['p99']:,.0f} µs"
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run a txnats bench workload through nats-py (asyncio or uvloop).",
    )
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--server", "-s", required=True, help="server URL")
    parser.add_argument("--msgs", type=int, help="messages (default 100000; req: --duration)")
    parser.add_argument("--size", type=int, help="payload bytes (default 128; fanout 16)")
    parser.add_argument("--pubs", type=int, default=1, help="publisher connections")
    parser.add_argument("--subs", type=int, help="subscriber connections (fanout: 5)")
    parser.add_argument("--inflight", type=int, default=1, help="req: requests in flight")
    parser.add_argument("--duration", type=float, help="req: seconds to run")
    parser.add_argument(
        "--mode", default="cb", choices=(*MODES, "handler"),
        help="cb (a callback; 'handler' is an alias), iter (async for), next (next_msg)",
    )
    parser.add_argument("--subject", default="txnats.bench")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.mode == "handler":
        args.mode = "cb"
    if args.size is None:
        args.size = {"fanout": 16, "obj": 64 << 20}.get(args.workload, 128)
    if args.msgs is None and args.workload in ("kv", "obj"):
        args.msgs = 10_000 if args.workload == "kv" else 3
    if args.subs is None:
        args.subs = 5 if args.workload == "fanout" else 1
    if args.msgs is None and args.workload not in ("req", "micro"):
        args.msgs = 100_000
    if min(args.pubs, args.subs, args.inflight) < 1:
        parser.error("--pubs, --subs and --inflight must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.uvloop:
        try:
            import uvloop
        except ImportError:
            print("natspy_bench: error: --uvloop: uvloop is not installed", file=sys.stderr)
            return 2
        result = uvloop.run(run(args))
    else:
        result = asyncio.run(run(args))
    print(json.dumps(result, sort_keys=True) if args.json else _human(result), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line, as the txnats CLI does
        print(f"natspy_bench: error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
