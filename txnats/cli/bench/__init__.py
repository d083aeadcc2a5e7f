"""The benchmark workloads behind ``txnats bench`` (and ``benchmarks/compare.py``).

Each workload is an ``async`` function that takes the reactor and the server URL(s),
runs every role (publishers, subscribers, responders) in this one process on
connections of their own, as ``nats bench`` does, and returns a result dict that
``--json`` prints as it is::

    {"client": "txnats", "workload": "pub", "msgs": 100000, "size": 128,
     "elapsed": 0.41, "msgs_per_sec": 243902.4, "mb_per_sec": 29.8, ...}

``msgs_per_sec`` is the headline figure of every workload: published messages for
``pub`` and ``pub-plain``, received messages (over all subscribers) for ``sub``,
``pubsub`` and ``fanout``, completed requests for ``req`` and ``micro``. Latencies are in
microseconds.

The package's modules: ``_common`` (the result, the progress sink, the helpers every
workload uses), ``core`` (``pub``, ``pub-plain``, ``sub``, ``pubsub``, ``req``,
``fanout``), ``jetstream`` (``js-pub``, ``kv``, ``obj``) and ``micro`` (``micro``); each
imports ``_common``, none imports another. :func:`run_workload` runs one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from twisted.internet.interfaces import IReactorCore

from txnats.cli.bench._common import (
    DEFAULT_SUBJECT,
    HIGH_WATER,
    MODES,
    ProgressSink,
    Result,
    percentile,
)
from txnats.cli.bench.core import (
    bench_fanout,
    bench_pub,
    bench_pub_plain,
    bench_pubsub,
    bench_req,
    bench_sub,
)
from txnats.errors import InvalidArgumentError

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

#: The workloads, with what each measures.
WORKLOADS: Mapping[str, str] = {
    "pub": "publish only; the clock stops when flush() returns",
    "pub-plain": "publish in one plain loop that never yields to the reactor, then flush()",
    "sub": "subscribe only; receive --msgs messages published by another process",
    "pubsub": "publishers and subscribers on separate connections; received msgs/s",
    "req": "request/reply on two connections; req/s and latency percentiles",
    "fanout": "1 publisher, --subs subscriber connections (default 5); deliveries/s",
    "js-pub": "JetStream publish_async to a memory stream, 4000 unacked at most; acked/s",
    "consume": "JetStream consume() draining a pull consumer of a memory stream; msgs/s",
    "kv": "key-value: --msgs sequential puts, then as many gets (default 10000); ops/s",
    "obj": "object store: put one --size object (default 64 MiB), get it --msgs times (3)",
    "micro": "a service endpoint (txnats.micro) answering echo requests; req/s and latency",
}

#: The payload size (bytes) of a workload not given one, when it is not 128.
_DEFAULT_SIZE = {"fanout": 16, "obj": 64 << 20}

#: The message count of a workload not given one, when it is not 100,000 (``req``
#: runs for a duration instead).
_DEFAULT_MSGS = {"kv": 10_000, "obj": 3}


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
    """Run one workload by name, with the defaults ``txnats bench`` documents.

    :raises InvalidArgumentError: for an unknown workload, or ``pubs`` other than 1
        for ``pub-plain``.
    """
    if workload not in WORKLOADS:
        raise InvalidArgumentError(
            f"unknown workload {workload!r}; expected one of {', '.join(WORKLOADS)}"
        )
    n = _DEFAULT_MSGS.get(workload, 100_000) if msgs is None else msgs
    size = _DEFAULT_SIZE.get(workload, 128) if size is None else size
    if workload in ("js-pub", "consume", "kv", "obj"):
        return await _run_jetstream(reactor, servers, workload, n, size, subject, options, progress)
    if workload == "micro":
        # Imported when asked for, as the JetStream workloads are.
        from txnats.cli.bench.micro import bench_micro

        return await bench_micro(
            reactor, servers, msgs=msgs, duration=duration, size=size, inflight=inflight,
            subject=subject, options=options, progress=progress,
        )
    common: dict[str, Any] = {"subject": subject, "options": options, "progress": progress}
    if workload == "pub":
        return await bench_pub(reactor, servers, msgs=n, size=size, pubs=pubs, **common)
    if workload == "pub-plain":
        if pubs != 1:
            raise InvalidArgumentError("pub-plain publishes on one connection: no --pubs")
        return await bench_pub_plain(reactor, servers, msgs=n, size=size, **common)
    if workload == "req":
        return await bench_req(
            reactor, servers, msgs=msgs, duration=duration, size=size, inflight=inflight,
            **common,
        )
    if workload == "fanout":
        return await bench_fanout(
            reactor, servers, msgs=n, size=size, subs=subs or 5, mode=mode, **common
        )
    if workload == "sub":
        return await bench_sub(
            reactor, servers, msgs=n, size=size, subs=subs or 1, mode=mode, ready=ready,
            **common,
        )
    return await bench_pubsub(  # the one left: pubsub
        reactor, servers, msgs=n, size=size, pubs=pubs, subs=subs or 1, mode=mode, **common
    )


async def _run_jetstream(
    reactor: IReactorCore,
    servers: str | Sequence[str],
    workload: str,
    msgs: int,
    size: int,
    subject: str,
    options: Mapping[str, Any] | None,
    progress: ProgressSink | None,
) -> Result:
    """Run ``js-pub``, ``consume``, ``kv`` or ``obj``.

    Their module is imported here, when one is asked for: it imports
    :mod:`txnats.jetstream`, which every other command would load for nothing.
    """
    from txnats.cli.bench.jetstream import bench_js_pub, bench_kv, bench_obj

    if workload == "consume":
        from txnats.cli.bench.jetstream import bench_consume

        return await bench_consume(
            reactor, servers, msgs=msgs, size=size, subject=subject, options=options,
            progress=progress,
        )
    if workload == "js-pub":
        return await bench_js_pub(
            reactor, servers, msgs=msgs, size=size, subject=subject, options=options,
            progress=progress,
        )
    if workload == "kv":
        return await bench_kv(
            reactor, servers, msgs=msgs, size=size, options=options, progress=progress
        )
    return await bench_obj(
        reactor, servers, msgs=msgs, size=size, options=options, progress=progress
    )
