"""The ``micro`` workload: a service endpoint (ADR-32, :mod:`txnats.micro`) answered on
one connection, requested on another, sequentially or with M requests in flight.

It is ``req`` with the responder written as a service: each request passes through
the endpoint's bookkeeping (a :class:`~txnats.micro.Request`, the counters and the
handler's time) before the echo goes back. The run checks the endpoint counted every
request it answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli.bench._common import (
    DEFAULT_SUBJECT,
    STALL,
    ProgressSink,
    Result,
    check_counts,
    close_all,
    connect_many,
    request_result,
    run_requests,
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
    try:
        svc = add_service(responder, name="txnats-bench", version="1.0.0")
        endpoint = svc.add_endpoint("echo", _echo, subject=subject)
        await responder.flush(STALL)
        latencies, elapsed = await run_requests(
            clock, requester, subject, b"x" * size, msgs=msgs, duration=duration,
            inflight=inflight, timeout=timeout, progress=progress,
        )
        counted = endpoint.num_requests
        await svc.stop()
    finally:
        await close_all(clients)
    n = len(latencies)
    if counted != n:
        raise NatsError(f"the endpoint counted {counted} requests, {n} were answered")
    return request_result("micro", reactor, latencies, size, inflight, duration, elapsed)
