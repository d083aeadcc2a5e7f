"""Helpers of the consumer tests (consume, push, ordered, restarts): fill a stream,
count what a handler saw."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import TestCase

import txnats
from txnats.jetstream import JetStreamContext
from txnats.testing import NatsServer

from .waits import bounded, reactor

__all__ = ["fill", "info_field"]


async def fill(
    js: JetStreamContext, subject: str, n: int, *, start: int = 0, window: int = 1000,
    seconds: float = 30.0, size: int = 0,
) -> None:
    """Publish payloads ``b"<i>"`` (padded with spaces to ``size`` bytes) for ``i`` in
    ``start..start+n-1`` to ``subject``, at most ``window`` unacknowledged at a time;
    wait until all are acknowledged. ``int(payload)`` reads ``i`` back."""
    for lo in range(start, start + n, window):
        for i in range(lo, min(lo + window, start + n)):
            js.publish_async(subject, (b"%d" % i).ljust(size))
        await bounded(js.publish_async_complete(), seconds)


def info_field(info: Any, name: str) -> Any:
    """A field of an info, a dict or a typed record."""
    return info[name] if isinstance(info, dict) else getattr(info, name)


async def restartable(case: TestCase) -> tuple[NatsServer, JetStreamContext]:
    """A JetStream server of the test's own (free to restart) and a context on a client
    that reconnects to it for ever, 0.1 s apart; both end with the test."""
    server = NatsServer(jetstream=True).start()
    case.addCleanup(server.stop)
    nc = await bounded(txnats.connect(reactor, server.url, reconnect_wait=0.1,
                                      max_reconnect_attempts=-1))
    case.addCleanup(lambda: bounded(nc.close()))
    return server, nc.jetstream()

