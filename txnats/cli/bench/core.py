"""The core workloads of ``txnats bench``: ``pub``, ``pub-plain``, ``sub``, ``pubsub``,
``req`` and ``fanout``.

Publishing loops keep the outbound buffer bounded: after each batch of about
:data:`~txnats.cli.bench.HIGH_WATER` bytes they wait for
:meth:`~txnats.Client.wait_for_room`, which also lets the reactor run (and the
subscribers of the same process read). The one exception is ``pub-plain``, which
measures the loop a user writes first: every ``publish()`` in one plain ``for`` loop,
never yielding to the reactor.

Subscribers and responders run on connections of their own, so before the clock
starts each of those connections is flushed (:func:`_confirm`): the server has then
registered their subscriptions, and none of the first messages or requests can reach
it before them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli.bench._common import (
    DEFAULT_SUBJECT,
    HIGH_WATER,
    MODES,
    STALL,
    ProgressSink,
    Result,
    await_progress,
    base,
    check_counts,
    close_all,
    connect_many,
    first_error,
    rates,
    request_result,
    run_requests,
    sleep,
)
from txnats.client import Client
from txnats.errors import (
    ConnectionClosedError,
    InvalidArgumentError,
    OutboundBufferFullError,
    SubscriptionClosedError,
)
from txnats.protocol.events import Msg
from txnats.subscription import Subscription

__all__ = [
    "bench_fanout",
    "bench_pub",
    "bench_pub_plain",
    "bench_pubsub",
    "bench_req",
    "bench_sub",
]


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
    ).addErrback(first_error)


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
    check_counts(msgs, size, pubs=pubs)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await connect_many(reactor, servers, pubs, "txnats-bench-pub", options or {})
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
            await await_progress(clock, done, lambda: sum(sent), "publishing")
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - start
    finally:
        await close_all(clients)
    result = base(
        "pub", reactor, msgs=msgs, size=size, pubs=pubs, subs=0, publish_loop="cooperative"
    )
    return rates(result, msgs, msgs * size, elapsed)


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
    check_counts(msgs, size)
    clients = await connect_many(reactor, servers, 1, "txnats-bench-pub-plain", options or {})
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
        await close_all(clients)
    result = base(
        "pub", reactor, msgs=msgs, size=size, pubs=1, subs=0, publish_loop="plain"
    )
    return rates(result, msgs, msgs * size, elapsed)


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
    check_counts(msgs, size, pubs=pubs, subs=subs)
    if mode not in MODES:
        raise InvalidArgumentError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    opts = options or {}
    sub_clients = await connect_many(reactor, servers, subs, f"txnats-bench-{workload}-sub", opts)
    clients = list(sub_clients)
    try:
        clients += await connect_many(
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
            ).addErrback(first_error)
            await await_progress(
                clock, everything, lambda: received() + sum(sent), "publish/subscribe"
            )
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - start
        dropped = sum(s.dropped for s in all_subs)
    finally:
        await close_all(clients)
    delivered = msgs * subs - dropped
    result = base(workload, reactor, msgs=msgs, size=size, pubs=pubs, subs=subs, mode=mode)
    rates(result, delivered, delivered * size, elapsed)
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
    check_counts(msgs, size, subs=subs)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await connect_many(reactor, servers, subs, "txnats-bench-sub", options or {})
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
        everything.addErrback(first_error)
        # Wait as long as it takes for the first message, then watch for stalls.
        while not first and not everything.called:
            await sleep(clock, 0.05)
        if progress is not None:
            progress.begin("Receiving", msgs * subs, received)
        try:
            await await_progress(clock, everything, received, "subscribing")
        finally:
            if progress is not None:
                progress.end()
        elapsed = time.perf_counter() - (first[0] if first else time.perf_counter())
        dropped = sum(s.dropped for s in all_subs)
    finally:
        await close_all(clients)
    delivered = msgs * subs - dropped
    result = base("sub", reactor, msgs=msgs, size=size, pubs=0, subs=subs, mode=mode)
    rates(result, delivered, delivered * size, elapsed)
    result["received"] = delivered
    result["dropped"] = dropped
    return result


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
    check_counts(msgs or 0, size, inflight=inflight)
    if duration is None and msgs is None:
        duration = 5.0
    if duration is not None and duration <= 0:
        raise InvalidArgumentError("--duration must be positive")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    clients = await connect_many(reactor, servers, 2, "txnats-bench-req", options or {})
    responder, requester = clients
    try:

        def respond(msg: Msg) -> None:
            msg.respond(msg.data)

        responder.subscribe(subject, respond)
        await _confirm([responder])
        latencies, elapsed = await run_requests(
            clock, requester, subject, b"x" * size, msgs=msgs, duration=duration,
            inflight=inflight, timeout=timeout, progress=progress,
        )
    finally:
        await close_all(clients)
    return request_result("req", reactor, latencies, size, inflight, duration, elapsed)


