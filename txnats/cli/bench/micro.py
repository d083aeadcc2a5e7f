"""The ``micro`` workload: a service endpoint (ADR-32, :mod:`txnats.micro`) answered on
one connection, requested on another, sequentially or with M requests in flight.

It is ``req`` with the responder written as a service: each request passes through
the endpoint's bookkeeping (a :class:`~txnats.micro.Request`, the counters and the
handler's time) before the echo goes back. The run checks the endpoint counted every
request it answered.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults
from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli.bench._common import (
    DEFAULT_SUBJECT,
    STALL,
    ProgressSink,
    Result,
    await_progress,
    base,
    check_counts,
    close_all,
    connect_many,
    first_error,
    percentile,
    rates,
)
from txnats.errors import InvalidArgumentError, NatsError
from txnats.micro import Request, add_service

__all__ = ["bench_micro"]


def _echo(req: Request) -> None:
    req.respond(req.data)


async def bench_micro(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int | None = None,
    duration: float | None = None,
    size: int = 128,
    inflight: int = 1,
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
    timeout: float = 5.0,
) -> Result:
    """Requests to a service endpoint that echoes: req/s and latency percentiles (µs,
    from ``request()`` to its Deferred firing). Ends after ``duration`` seconds or
    ``msgs`` requests (``duration`` wins; 5 s if neither is given).

    :raises InvalidArgumentError: for negative counts, ``inflight`` below 1 or a
        duration that is not positive.
    :raises NatsError: if the endpoint did not count every request it answered.
    """
    check_counts(msgs or 0, size, inflight=inflight)
    if duration is None and msgs is None:
        duration = 5.0
    if duration is not None and duration <= 0:
        raise InvalidArgumentError("--duration must be positive")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await connect_many(reactor, servers, 2, "txnats-bench-micro", options or {})
    responder, requester = clients
    latencies: list[float] = []
    perf = time.perf_counter
    try:
        svc = add_service(responder, name="txnats-bench", version="1.0.0")
        endpoint = svc.add_endpoint("echo", _echo, subject=subject)
        await responder.flush(STALL)
        payload = b"x" * size
        remaining = [msgs or 0]
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
                await request(subject, payload, timeout)
                append(perf() - t0)

        _begin(progress, duration, msgs or 0, lambda: len(latencies))
        start = perf()
        deadline[0] = start + (duration or 0.0)
        try:
            everything = gatherResults(
                [ensureDeferred(worker()) for _ in range(inflight)], consumeErrors=True
            ).addErrback(first_error)
            await await_progress(clock, everything, lambda: len(latencies), "requesting")
        finally:
            if progress is not None:
                progress.end()
        elapsed = perf() - start
        counted = endpoint.num_requests
        await svc.stop()
    finally:
        await close_all(clients)
    n = len(latencies)
    if counted != n:
        raise NatsError(f"the endpoint counted {counted} requests, {n} were answered")
    return _result(reactor, n, size, inflight, duration, elapsed, latencies)


def _begin(
    progress: ProgressSink | None, duration: float | None, msgs: int, done: Any
) -> None:
    if progress is None:
        return
    if duration is None:
        progress.begin("Requesting", msgs, done)
        return
    start = time.perf_counter()
    span = duration
    progress.begin(
        "Requesting", span, lambda: min(span, max(0.0, time.perf_counter() - start))
    )


def _result(
    reactor: object, n: int, size: int, inflight: int, duration: float | None,
    elapsed: float, latencies: list[float],
) -> Result:
    latencies.sort()
    result = base("micro", reactor, msgs=n, size=size, pubs=1, subs=1, inflight=inflight)
    rates(result, n, n * size * 2, elapsed)
    result["requests"] = n
    result["duration"] = duration
    result["latency_us"] = {
        "p50": round(percentile(latencies, 50) * 1e6, 1),
        "p90": round(percentile(latencies, 90) * 1e6, 1),
        "p99": round(percentile(latencies, 99) * 1e6, 1),
        "max": round((latencies[-1] if latencies else 0.0) * 1e6, 1),
    }
    return result
