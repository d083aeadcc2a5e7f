"""What every benchmark workload shares: the result dict, the progress sink, the
constants, and the helpers to connect, watch for stalls and compute the rates.

The core workloads (:mod:`txnats.cli.bench.core`) and the JetStream ones
(:mod:`txnats.cli.bench.jetstream`) both import from here, and nothing here imports
them.
"""

from __future__ import annotations

import math
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.internet.interfaces import IReactorCore, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from txnats._connect import connect
from txnats._version import __version__
from txnats.client import Client
from txnats.errors import InvalidArgumentError, NatsError, TimeoutError

__all__ = [
    "DEFAULT_SUBJECT",
    "HIGH_WATER",
    "MODES",
    "STALL",
    "ProgressSink",
    "Result",
    "await_progress",
    "base",
    "check_counts",
    "close_all",
    "connect_many",
    "first_error",
    "percentile",
    "rates",
    "request_result",
    "run_requests",
    "sleep",
]

#: A workload's result, ready for ``json.dumps``.
Result = dict[str, Any]

#: Bytes a publishing loop queues before it waits for the socket to take them.
HIGH_WATER = 1 << 20

#: How a subscriber reads: a handler callback, ``async for``, or ``next_msg()``.
MODES = ("handler", "iter", "next")

#: Seconds without progress after which a workload gives up (lost messages, say).
STALL = 10.0

#: The subject used unless one is given.
DEFAULT_SUBJECT = "txnats.bench"


class ProgressSink(Protocol):
    """Something that shows progress (``txnats bench`` draws a bar on a terminal).

    The workloads call :meth:`begin` with a function that returns how much is done
    (they never report per message), and :meth:`end` when the phase is over.
    """

    def begin(self, label: str, total: float, current: Callable[[], float]) -> None: ...

    def end(self) -> None: ...


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The ``pct``-th percentile (nearest rank) of values sorted in ascending order."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), math.ceil(pct / 100.0 * len(sorted_values))))
    return sorted_values[rank - 1]


def base(workload: str, reactor: object, **fields: Any) -> Result:
    """A result's common fields (client, versions, reactor), then ``fields``."""
    return {
        "client": "txnats",
        "version": __version__,
        "workload": workload,
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "loop": type(reactor).__name__,
        **fields,
    }


def rates(result: Result, count: int, nbytes: int, elapsed: float) -> Result:
    """Add ``elapsed``, ``msgs_per_sec`` and ``mb_per_sec`` to ``result``; return it."""
    elapsed = max(elapsed, 1e-9)
    result["elapsed"] = round(elapsed, 6)
    result["msgs_per_sec"] = round(count / elapsed, 1)
    result["mb_per_sec"] = round(nbytes / elapsed / (1024 * 1024), 2)
    return result


def check_counts(
    msgs: int, size: int, *, pubs: int = 1, subs: int = 1, inflight: int = 1
) -> None:
    """Refuse negative counts and sizes, and fewer than one connection or request.

    :raises InvalidArgumentError: if any is out of range.
    """
    if msgs < 0 or size < 0:
        raise InvalidArgumentError("--msgs and --size must not be negative")
    if pubs < 1 or subs < 1 or inflight < 1:
        raise InvalidArgumentError("--pubs, --subs and --inflight must be at least 1")


async def connect_many(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    n: int,
    name: str,
    options: Mapping[str, Any],
) -> list[Client]:
    """``n`` connections named ``name-0``, ``name-1``...; none left open on failure."""
    clients: list[Client] = []
    try:
        for i in range(n):
            clients.append(await connect(reactor, servers, name=f"{name}-{i}", **options))
    except BaseException:
        await close_all(clients)
        raise
    return clients


async def close_all(clients: Sequence[Client]) -> None:
    """Close every client, ignoring the errors of those already closed or lost."""
    for nc in clients:
        try:
            await nc.close()
        except NatsError:
            pass


async def await_progress(
    clock: IReactorTime,
    d: Deferred[Any],
    current: Callable[[], int],
    what: str,
    stall: float = STALL,
) -> None:
    """Wait for ``d``; fail with TimeoutError if ``current()`` stops moving for ``stall`` s."""
    out: Deferred[None] = Deferred()
    last = [current(), time.monotonic()]

    def check() -> None:
        now = time.monotonic()
        cur = current()
        if cur != last[0]:
            last[0], last[1] = cur, now
        elif now - last[1] > stall and not out.called:
            out.errback(TimeoutError(f"{what}: no progress for {stall:g}s ({cur} done)"))

    def relay(result: object) -> None:
        if out.called:
            return
        if isinstance(result, Failure):
            out.errback(result)
        else:
            out.callback(None)

    d.addBoth(relay)
    watchdog = LoopingCall(check)
    watchdog.clock = clock
    watchdog.start(0.25, now=False)
    try:
        await out
    finally:
        watchdog.stop()


def first_error(failure: Failure) -> Failure:
    """Unwrap the FirstError of gatherResults so the real error reaches the user."""
    sub = getattr(failure.value, "subFailure", None)
    return sub if isinstance(sub, Failure) else failure


def sleep(clock: IReactorTime, seconds: float) -> Deferred[None]:
    """A Deferred that fires with None after ``seconds``."""
    d: Deferred[None] = Deferred()
    clock.callLater(seconds, d.callback, None)
    return d


async def run_requests(
    clock: IReactorTime,
    requester: Client,
    subject: str,
    payload: bytes,
    *,
    msgs: int | None,
    duration: float | None,
    inflight: int,
    timeout: float,
    progress: ProgressSink | None,
) -> tuple[list[float], float]:
    """``inflight`` sequential request loops to ``subject`` until ``duration`` seconds
    have passed or ``msgs`` requests were made (``duration`` wins); returns the
    latencies (seconds, from ``request()`` to its Deferred firing) and the elapsed time.
    """
    latencies: list[float] = []
    perf = time.perf_counter
    remaining = [msgs or 0]
    started = [perf()]

    async def worker() -> None:
        request = requester.request
        append = latencies.append
        deadline = started[0] + (duration or 0.0)
        while True:
            if duration is not None:
                if perf() >= deadline:
                    return
            elif remaining[0] <= 0:
                return
            else:
                remaining[0] -= 1
            t0 = perf()
            await request(subject, payload, timeout)
            append(perf() - t0)

    if progress is not None:
        if duration is None:
            progress.begin("Requesting", msgs or 0, lambda: len(latencies))
        else:
            span = duration
            progress.begin(
                "Requesting", span, lambda: min(span, max(0.0, perf() - started[0]))
            )
    started[0] = perf()
    try:
        everything = gatherResults(
            [ensureDeferred(worker()) for _ in range(inflight)], consumeErrors=True
        ).addErrback(first_error)
        await await_progress(clock, everything, lambda: len(latencies), "requesting")
    finally:
        if progress is not None:
            progress.end()
    return latencies, perf() - started[0]


def request_result(
    workload: str, reactor: object, latencies: list[float], size: int, inflight: int,
    duration: float | None, elapsed: float,
) -> Result:
    """The result of a request workload: rates, and latency percentiles in µs."""
    latencies.sort()
    n = len(latencies)
    result = base(workload, reactor, msgs=n, size=size, pubs=1, subs=1, inflight=inflight)
    rates(result, n, n * size * 2, elapsed)
    result["requests"] = n
    result["duration"] = duration
    top = latencies[-1] if latencies else 0.0
    result["latency_us"] = {
        "p50": round(percentile(latencies, 50) * 1e6, 1),
        "p90": round(percentile(latencies, 90) * 1e6, 1),
        "p99": round(percentile(latencies, 99) * 1e6, 1),
        "max": round(top * 1e6, 1),
    }
    return result
