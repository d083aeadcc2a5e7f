"""The benchmark workloads behind ``txnats bench`` (and ``benchmarks/compare.py``).

Each workload is an ``async`` function that takes the reactor and the server URL(s),
runs every role (publishers, subscribers, responders) in this one process on
connections of their own, as ``nats bench`` does, and returns a result dict that
``--json`` prints as it is::

    {"client": "txnats", "workload": "pub", "msgs": 100000, "size": 128,
     "elapsed": 0.41, "msgs_per_sec": 243902.4, "mb_per_sec": 29.8, ...}

``msgs_per_sec`` is the headline figure of every workload: published messages for
``pub`` and ``pub-plain``, received messages (over all subscribers) for ``sub``,
``pubsub`` and ``fanout``, completed requests for ``req``. Latencies are in
microseconds.

Publishing loops keep the outbound buffer bounded: after each batch of about
:data:`HIGH_WATER` bytes they wait for :meth:`~txnats.Client.wait_for_room`, which
also lets the reactor run (and the subscribers of the same process read). The one
exception is ``pub-plain``, which measures the loop a user writes first: every
``publish()`` in one plain ``for`` loop, never yielding to the reactor.

Subscribers and responders run on connections of their own, so before the clock
starts each of those connections is flushed (:func:`_confirm`): the server has then
registered their subscriptions, and none of the first messages or requests can reach
it before them.
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

from txnats import __version__
from txnats._connect import connect
from txnats.client import Client
from txnats.errors import (
    ConnectionClosedError,
    InvalidArgumentError,
    NatsError,
    OutboundBufferFullError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.protocol.events import Msg
from txnats.subscription import Subscription

__all__ = [
    "HIGH_WATER",
    "MODES",
    "WORKLOADS",
    "ProgressSink",
    "Result",
    "bench_fanout",
    "bench_pub",
    "bench_pub_plain",
    "bench_pubsub",
    "bench_req",
    "bench_sub",
    "percentile",
    "run_workload",
]

#: A workload's result, ready for ``json.dumps``.
Result = dict[str, Any]

#: Bytes a publishing loop queues before it waits for the socket to take them.
HIGH_WATER = 1 << 20

#: How a subscriber reads: a handler callback, ``async for``, or ``next_msg()``.
MODES = ("handler", "iter", "next")

#: The workloads, with what each measures.
WORKLOADS: Mapping[str, str] = {
    "pub": "publish only; the clock stops when flush() returns",
    "pub-plain": "publish in one plain loop that never yields to the reactor, then flush()",
    "sub": "subscribe only; receive --msgs messages published by another process",
    "pubsub": "publishers and subscribers on separate connections; received msgs/s",
    "req": "request/reply on two connections; req/s and latency percentiles",
    "fanout": "1 publisher, --subs subscriber connections (default 5); deliveries/s",
    "js-pub": "JetStream publish_async to a memory stream, 4000 unacked at most; acked/s",
    "kv": "key-value: --msgs sequential puts, then as many gets (default 10000); ops/s",
    "obj": "object store: put one --size object (default 64 MiB), get it --msgs times (3)",
}

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


def _base(workload: str, reactor: object, **fields: Any) -> Result:
    return {
        "client": "txnats",
        "version": __version__,
        "workload": workload,
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "loop": type(reactor).__name__,
        **fields,
    }


def _rates(result: Result, count: int, nbytes: int, elapsed: float) -> Result:
    elapsed = max(elapsed, 1e-9)
    result["elapsed"] = round(elapsed, 6)
    result["msgs_per_sec"] = round(count / elapsed, 1)
    result["mb_per_sec"] = round(nbytes / elapsed / (1024 * 1024), 2)
    return result


async def _connect_many(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    n: int,
    name: str,
    options: Mapping[str, Any],
) -> list[Client]:
    clients: list[Client] = []
    try:
        for i in range(n):
            clients.append(await connect(reactor, servers, name=f"{name}-{i}", **options))
    except BaseException:
        await _close_all(clients)
        raise
    return clients


async def _close_all(clients: Sequence[Client]) -> None:
    for nc in clients:
        try:
            await nc.close()
        except NatsError:
            pass


async def _await_progress(
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


def _check_counts(
    msgs: int, size: int, *, pubs: int = 1, subs: int = 1, inflight: int = 1
) -> None:
    if msgs < 0 or size < 0:
        raise InvalidArgumentError("--msgs and --size must not be negative")
    if pubs < 1 or subs < 1 or inflight < 1:
        raise InvalidArgumentError("--pubs, --subs and --inflight must be at least 1")


def _split(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal shares."""
    share, extra = divmod(total, parts)
    return [share + (1 if i < extra else 0) for i in range(parts)]


async def _confirm(clients: Sequence[Client]) -> None:
    """Return once the server has processed every ``SUB`` these connections have sent.

    Call it on the subscribers' (or the responder's) own connections before another
    connection starts publishing to them: the server reads each connection on its own,
    so a publisher's first messages could otherwise reach it before a subscription,
    and be dropped (a request answered "no responders"). ``SUB`` and ``PING`` leave a
    txnats connection through one ordered queue, so the ``PONG`` of a flush on that
    connection proves its subscriptions registered.
    """
    for nc in clients:
        await nc.flush(STALL)


async def _publish(
    nc: Client, subject: str, payload: bytes, count: int, sent: list[int], slot: int
) -> None:
    """Publish ``count`` messages, waiting for room after every ~HIGH_WATER bytes."""
    publish = nc.publish
    batch = max(1, HIGH_WATER // (len(payload) + len(subject) + 16))
    done = 0
    while done < count:
        k = min(batch, count - done)
        for _ in range(k):
            publish(subject, payload)
        done += k
        sent[slot] = done
        if nc.pending_bytes:
            await nc.wait_for_room()


async def _publish_all(
    clients: Sequence[Client],
    subject: str,
    payload: bytes,
    msgs: int,
    sent: list[int],
    flush_timeout: float,
) -> None:
    """Every client publishes its share concurrently, then flushes."""

    async def one(i: int, nc: Client, count: int) -> None:
        await _publish(nc, subject, payload, count, sent, i)
        await nc.flush(flush_timeout)

    shares = _split(msgs, len(clients))
    pairs = enumerate(zip(clients, shares, strict=True))
    await gatherResults(
        [ensureDeferred(one(i, nc, n)) for i, (nc, n) in pairs],
        consumeErrors=True,
    ).addErrback(_first_error)


def _first_error(failure: Failure) -> Failure:
    """Unwrap the FirstError of gatherResults so the real error reaches the user."""
    sub = getattr(failure.value, "subFailure", None)
    return sub if isinstance(sub, Failure) else failure


def _ignore(msg: Msg) -> None:
    return None


def _consume(
    nc: Client, subject: str, target: int, mode: str, first: list[float]
) -> tuple[Subscription, Deferred[None]]:
    """Subscribe for ``target`` messages; the Deferred fires when they are handled.

    The subscription unsubscribes itself after ``target`` messages (``max_msgs``) and
    ends once they are handled, so every mode simply runs until the subscription ends.
    ``first`` receives the time of the first message (for ``sub``, whose clock starts
    there) unless it already holds one.
    """
    if mode == "handler":
        if first:
            handler: Callable[[Msg], None] = _ignore
        else:
            perf = time.perf_counter

            def handler(msg: Msg) -> None:
                if not first:
                    first.append(perf())

        sub = nc.subscribe(subject, handler, max_msgs=target)
        return sub, sub.when_ended()
    sub = nc.subscribe(subject, max_msgs=target)

    async def iterate() -> None:
        if not first:
            msg = await _next_or_none(sub)
            if msg is None:
                return
            first.append(time.perf_counter())
        async for _msg in sub:
            pass

    async def pull() -> None:
        next_msg = sub.next_msg
        try:
            while True:
                await next_msg(None)
                if not first:
                    first.append(time.perf_counter())
        except (SubscriptionClosedError, ConnectionClosedError):
            return

    if mode == "iter":
        return sub, ensureDeferred(iterate())
    if mode == "next":
        return sub, ensureDeferred(pull())
    raise InvalidArgumentError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")


async def _next_or_none(sub: Subscription) -> Msg | None:
    try:
        return await sub.next_msg(None)
    except (SubscriptionClosedError, ConnectionClosedError):
        return None


# ====================================================================== workloads
async def bench_pub(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 128,
    pubs: int = 1,
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """Publish ``msgs`` messages of ``size`` bytes over ``pubs`` connections.

    The clock starts before the first publish and stops when every connection's
    ``flush()`` has returned, i.e. when the server has processed every message.
    """
    _check_counts(msgs, size, pubs=pubs)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await _connect_many(reactor, servers, pubs, "txnats-bench-pub", options or {})
    sent = [0] * pubs
    payload = b"x" * size
    try:
        if progress is not None:
            progress.begin("Publishing", msgs, lambda: sum(sent))
        start = time.perf_counter()
        try:
            done = ensureDeferred(
                _publish_all(clients, subject, payload, msgs, sent, STALL * 6)
            )
            await _await_progress(clock, done, lambda: sum(sent), "publishing")
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - start
    finally:
        await _close_all(clients)
    result = _base(
        "pub", reactor, msgs=msgs, size=size, pubs=pubs, subs=0, publish_loop="cooperative"
    )
    return _rates(result, msgs, msgs * size, elapsed)


async def bench_pub_plain(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 128,
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """Publish ``msgs`` messages of ``size`` bytes in one plain loop, then flush.

    The loop is the one a user writes first, ``for ...: nc.publish(subject, data)``:
    it never yields to the reactor and never calls
    :meth:`~txnats.Client.wait_for_room`, so every message is queued before the
    first byte is written. The clock starts before the first publish and stops when
    ``flush()`` has returned. The result is a ``pub`` result with ``publish_loop``
    ``"plain"`` (``bench_pub``'s is ``"cooperative"``).

    If a ``publish()`` raises (:class:`~txnats.errors.OutboundBufferFullError` when
    the loop outgrows the outbound buffer's bound), the workload fails with that
    error, saying at which message.
    """
    _check_counts(msgs, size)
    clients = await _connect_many(reactor, servers, 1, "txnats-bench-pub-plain", options or {})
    nc = clients[0]
    payload = b"x" * size
    done = [0]  # set after the loop: nothing can read it during one
    try:
        if progress is not None:
            progress.begin("Publishing", msgs, lambda: done[0])
        try:
            publish = nc.publish
            i = -1
            start = time.perf_counter()
            try:
                for i in range(msgs):  # noqa: B007 (the except clause reads i)
                    publish(subject, payload)
            except OutboundBufferFullError as e:
                raise OutboundBufferFullError(
                    f"plain loop: publish() raised OutboundBufferFullError at message "
                    f"{i + 1:,} of {msgs:,}, {nc.pending_bytes:,} bytes queued: {e}"
                ) from e
            done[0] = msgs
            await nc.flush(STALL * 6)
            elapsed = time.perf_counter() - start
        finally:
            if progress is not None:
                progress.end()
    finally:
        await _close_all(clients)
    result = _base(
        "pub", reactor, msgs=msgs, size=size, pubs=1, subs=0, publish_loop="plain"
    )
    return _rates(result, msgs, msgs * size, elapsed)


async def bench_pubsub(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 128,
    pubs: int = 1,
    subs: int = 1,
    mode: str = "handler",
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
    workload: str = "pubsub",
) -> Result:
    """``pubs`` connections publish ``msgs`` messages in all; ``subs`` connections each
    receive all of them (read through ``mode``).

    The clock starts before the first publish and stops when every subscriber has
    handled every message; ``msgs_per_sec`` counts deliveries (``msgs * subs``).
    ``pub_msgs_per_sec`` is the publishers' own rate (until their flush returned).
    """
    _check_counts(msgs, size, pubs=pubs, subs=subs)
    if mode not in MODES:
        raise InvalidArgumentError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    opts = options or {}
    sub_clients = await _connect_many(reactor, servers, subs, f"txnats-bench-{workload}-sub", opts)
    clients = list(sub_clients)
    try:
        clients += await _connect_many(
            reactor, servers, pubs, f"txnats-bench-{workload}-pub", opts
        )
        pub_clients = clients[subs:]
        first = [0.0]  # the clock starts at the first publish, not the first message
        readers = [_consume(nc, subject, msgs, mode, first) for nc in sub_clients]
        await _confirm(sub_clients)
        all_subs = [s for s, _ in readers]

        def received() -> int:
            return sum(s.delivered for s in all_subs)

        sent = [0] * pubs
        pub_elapsed = [0.0]

        async def publish() -> None:
            await _publish_all(pub_clients, subject, b"x" * size, msgs, sent, STALL * 6)
            pub_elapsed[0] = time.perf_counter() - start

        if progress is not None:
            progress.begin("Receiving", msgs * subs, received)
        start = time.perf_counter()
        try:
            everything = gatherResults(
                [ensureDeferred(publish())] + [d for _, d in readers], consumeErrors=True
            ).addErrback(_first_error)
            await _await_progress(
                clock, everything, lambda: received() + sum(sent), "publish/subscribe"
            )
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - start
        dropped = sum(s.dropped for s in all_subs)
    finally:
        await _close_all(clients)
    delivered = msgs * subs - dropped
    result = _base(workload, reactor, msgs=msgs, size=size, pubs=pubs, subs=subs, mode=mode)
    _rates(result, delivered, delivered * size, elapsed)
    result["received"] = delivered
    result["dropped"] = dropped
    result["pub_msgs_per_sec"] = round(msgs / max(pub_elapsed[0], 1e-9), 1)
    return result


async def bench_fanout(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 16,
    subs: int = 5,
    mode: str = "handler",
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
) -> Result:
    """One publisher, ``subs`` subscriber connections; deliveries per second."""
    return await bench_pubsub(
        reactor, servers, msgs=msgs, size=size, pubs=1, subs=subs, mode=mode,
        subject=subject, options=options, progress=progress, workload="fanout",
    )


async def bench_sub(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    *,
    msgs: int = 100_000,
    size: int = 0,
    subs: int = 1,
    mode: str = "handler",
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
    ready: Callable[[], None] | None = None,
) -> Result:
    """``subs`` connections each receive ``msgs`` messages that another process publishes
    (``txnats bench pub --server URL``, ``nats bench pub``...).

    ``ready`` is called once the subscriptions are registered with the server. The clock
    starts at the first message and stops when every subscriber has handled ``msgs``.
    ``size`` is only used to compute MB/s.
    """
    _check_counts(msgs, size, subs=subs)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await _connect_many(reactor, servers, subs, "txnats-bench-sub", options or {})
    try:
        first: list[float] = []
        readers = [_consume(nc, subject, msgs, mode, first) for nc in clients]
        await _confirm(clients)
        all_subs = [s for s, _ in readers]

        def received() -> int:
            return sum(s.delivered for s in all_subs)

        if ready is not None:
            ready()
        everything = gatherResults([d for _, d in readers], consumeErrors=True)
        everything.addErrback(_first_error)
        # Wait as long as it takes for the first message, then watch for stalls.
        while not first and not everything.called:
            await _sleep(clock, 0.05)
        if progress is not None:
            progress.begin("Receiving", msgs * subs, received)
        try:
            await _await_progress(clock, everything, received, "subscribing")
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - (first[0] if first else time.perf_counter())
        dropped = sum(s.dropped for s in all_subs)
    finally:
        await _close_all(clients)
    delivered = msgs * subs - dropped
    result = _base("sub", reactor, msgs=msgs, size=size, pubs=0, subs=subs, mode=mode)
    _rates(result, delivered, delivered * size, elapsed)
    result["received"] = delivered
    result["dropped"] = dropped
    return result


def _sleep(clock: IReactorTime, seconds: float) -> Deferred[None]:
    d: Deferred[None] = Deferred()
    clock.callLater(seconds, d.callback, None)
    return d


async def bench_req(
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
    """Request/reply: one responder connection echoes, one requester connection asks.

    With ``inflight`` 1 the requests are sequential; with M, M requests are always
    outstanding (M sequential loops). The run ends after ``duration`` seconds or after
    ``msgs`` requests (``duration`` wins if both are given; 5 s if neither is).
    Latencies (µs) are from ``request()`` to its Deferred firing.
    """
    _check_counts(msgs or 0, size, inflight=inflight)
    if duration is None and msgs is None:
        duration = 5.0
    if duration is not None and duration <= 0:
        raise InvalidArgumentError("--duration must be positive")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await _connect_many(reactor, servers, 2, "txnats-bench-req", options or {})
    responder, requester = clients
    latencies: list[float] = []
    try:

        def respond(msg: Msg) -> None:
            msg.respond(msg.data)

        responder.subscribe(subject, respond)
        await _confirm([responder])
        payload = b"x" * size
        perf = time.perf_counter
        remaining: list[int] = [msgs or 0]
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

        started = _begin_requesting(progress, duration, msgs or 0, lambda: len(latencies))
        start = started[0] = perf()
        deadline[0] = start + (duration or 0.0)
        try:
            everything = gatherResults(
                [ensureDeferred(worker()) for _ in range(inflight)], consumeErrors=True
            ).addErrback(_first_error)
            await _await_progress(clock, everything, lambda: len(latencies), "requesting")
        finally:
            if progress is not None:
                progress.end()
        elapsed = perf() - start
    finally:
        await _close_all(clients)
    n = len(latencies)
    latencies.sort()
    result = _base("req", reactor, msgs=n, size=size, pubs=1, subs=1, inflight=inflight)
    _rates(result, n, n * size * 2, elapsed)
    result["requests"] = n
    result["duration"] = duration
    result["latency_us"] = _latency_us(latencies)
    return result


def _begin_requesting(
    progress: ProgressSink | None, duration: float | None, msgs: int, done: Callable[[], int]
) -> list[float]:
    """Start ``req``'s progress display; return the start time its callback reads.

    The caller stores its clock's start in the list once the clock starts. A sink may
    call the callback as soon as :meth:`ProgressSink.begin` is given it (the terminal
    bar draws at once), so the list holds a time from the start.
    """
    started = [time.perf_counter()]
    if progress is None:
        return started
    if duration is None:
        progress.begin("Requesting", msgs, done)
    else:
        span = duration
        perf = time.perf_counter
        progress.begin("Requesting", span, lambda: min(span, max(0.0, perf() - started[0])))
    return started


def _latency_us(sorted_latencies: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and max of latencies in seconds (sorted), in microseconds."""
    top = sorted_latencies[-1] if sorted_latencies else 0.0
    return {
        "p50": round(percentile(sorted_latencies, 50) * 1e6, 1),
        "p90": round(percentile(sorted_latencies, 90) * 1e6, 1),
        "p99": round(percentile(sorted_latencies, 99) * 1e6, 1),
        "max": round(top * 1e6, 1),
    }


async def run_workload(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    workload: str,
    *,
    msgs: int | None = None,
    size: int | None = None,
    pubs: int = 1,
    subs: int | None = None,
    inflight: int = 1,
    duration: float | None = None,
    mode: str = "handler",
    subject: str = DEFAULT_SUBJECT,
    options: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
    ready: Callable[[], None] | None = None,
) -> Result:
    """Run one workload by name, with the defaults ``txnats bench`` documents."""
    common: dict[str, Any] = {"subject": subject, "options": options, "progress": progress}
    n = 100_000 if msgs is None else msgs
    if workload == "pub":
        return await bench_pub(
            reactor, servers, msgs=n, size=128 if size is None else size, pubs=pubs, **common
        )
    if workload == "pub-plain":
        if pubs != 1:
            raise InvalidArgumentError("pub-plain publishes on one connection: no --pubs")
        return await bench_pub_plain(
            reactor, servers, msgs=n, size=128 if size is None else size, **common
        )
    if workload == "pubsub":
        return await bench_pubsub(
            reactor, servers, msgs=n, size=128 if size is None else size, pubs=pubs,
            subs=subs or 1, mode=mode, **common,
        )
    if workload == "fanout":
        return await bench_fanout(
            reactor, servers, msgs=n, size=16 if size is None else size, subs=subs or 5,
            mode=mode, **common,
        )
    if workload == "sub":
        return await bench_sub(
            reactor, servers, msgs=n, size=128 if size is None else size, subs=subs or 1,
            mode=mode, ready=ready, **common,
        )
    if workload == "req":
        return await bench_req(
            reactor, servers, msgs=msgs, duration=duration, size=128 if size is None else size,
            inflight=inflight, **common,
        )
    if workload in ("js-pub", "kv", "obj"):
        from txnats._bench_js import bench_js_pub, bench_kv, bench_obj

        js_common: dict[str, Any] = {"options": options, "progress": progress}
        if workload == "js-pub":
            return await bench_js_pub(
                reactor, servers, msgs=n, size=128 if size is None else size,
                subject=subject, **js_common,
            )
        if workload == "kv":
            return await bench_kv(
                reactor, servers, msgs=10_000 if msgs is None else msgs,
                size=128 if size is None else size, **js_common,
            )
        return await bench_obj(
            reactor, servers, msgs=3 if msgs is None else msgs,
            size=64 << 20 if size is None else size, **js_common,
        )
    raise InvalidArgumentError(
        f"unknown workload {workload!r}; expected one of {', '.join(WORKLOADS)}"
    )
