"""Shared helpers for the resilience tests (``tests/test_resilience.py``).

Every wait here is bounded: by ``Deferred.addTimeout`` or by a polling deadline on the
reactor's clock. Nothing sleeps the thread.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet import reactor as _reactor
from twisted.internet.defer import Deferred
from twisted.internet.defer import TimeoutError as DeferTimeoutError
from twisted.internet.task import deferLater
from twisted.logger import globalLogPublisher

from txnats import Client

reactor: Any = _reactor
T = TypeVar("T")

__all__ = [
    "ClientEvents",
    "FailureLog",
    "bounded",
    "figure",
    "rss_bytes",
    "sleep",
    "turn",
    "wait_until",
]


def figure(n: int, **values: object) -> str:
    """Print (and return) the one line ``FIGURE <n>: key=value ...`` a figure test records."""

    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(fmt(x) for x in v) + "]"
        return str(v)

    line = f"FIGURE {n}: " + " ".join(f"{k}={fmt(v)}" for k, v in values.items())
    sys.stdout.write("\n" + line + "\n")
    sys.stdout.flush()
    return line


async def bounded(d: Deferred[T], seconds: float, what: str) -> T:
    """Await ``d``; fail with an AssertionError naming ``what`` after ``seconds``."""
    try:
        return await d.addTimeout(seconds, reactor)
    except DeferTimeoutError:
        raise AssertionError(f"{what} did not happen within {seconds:g} s") from None


async def sleep(seconds: float) -> None:
    """Let the reactor run for ``seconds`` (a timed reactor call, not a thread sleep)."""
    await deferLater(reactor, seconds, lambda: None)


async def turn() -> None:
    """Yield to the reactor for one iteration."""
    await deferLater(reactor, 0, lambda: None)


async def wait_until(
    predicate: Callable[[], bool], seconds: float, what: str, interval: float = 0.01
) -> float:
    """Poll ``predicate`` on the reactor until true; return the seconds it took."""
    start = reactor.seconds()
    while not predicate():
        if reactor.seconds() - start > seconds:
            raise AssertionError(f"{what} did not happen within {seconds:g} s")
        await sleep(interval)
    return float(reactor.seconds() - start)


def rss_bytes() -> int:
    """The resident set size of this process now (``/proc/self/statm``), after a full GC."""
    gc.collect()
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


class ClientEvents:
    """Records a client's callbacks with reactor timestamps; awaitable per kind."""

    KINDS = ("disconnected", "reconnected", "closed", "lame_duck", "error")

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {k: [] for k in self.KINDS}
        self.errors: list[Exception] = []
        self.disconnect_reasons: list[Exception] = []
        self._waiters: dict[str, list[tuple[int, Deferred[float]]]] = {k: [] for k in self.KINDS}
        #: Extra hooks run on reconnection (before waiters fire).
        self.on_reconnected: list[Callable[[], None]] = []

    def _record(self, kind: str) -> None:
        now = float(reactor.seconds())
        self.times[kind].append(now)
        n = len(self.times[kind])
        ready = [d for (k, d) in self._waiters[kind] if k <= n]
        self._waiters[kind] = [(k, d) for (k, d) in self._waiters[kind] if k > n]
        for d in ready:
            d.callback(now)

    def count(self, kind: str) -> int:
        return len(self.times[kind])

    def wait(self, kind: str, nth: int | None = None) -> Deferred[float]:
        """Fires with the time of the ``nth`` event of ``kind`` (default: the next one)."""
        n = self.count(kind) + 1 if nth is None else nth
        if self.count(kind) >= n:
            d: Deferred[float] = Deferred()
            d.callback(self.times[kind][n - 1])
            return d
        d = Deferred()
        self._waiters[kind].append((n, d))
        return d

    def callbacks(self) -> dict[str, Any]:
        def disconnected(err: Exception) -> None:
            self.disconnect_reasons.append(err)
            self._record("disconnected")

        def reconnected() -> None:
            for hook in self.on_reconnected:
                hook()
            self._record("reconnected")

        def error(err: Exception) -> None:
            self.errors.append(err)
            self._record("error")

        return {
            "disconnected_cb": disconnected,
            "reconnected_cb": reconnected,
            "closed_cb": lambda: self._record("closed"),
            "lame_duck_cb": lambda: self._record("lame_duck"),
            "error_cb": error,
        }


class FailureLog:
    """Collects every logged failure and error-level event while installed."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        level = event.get("log_level")
        if "log_failure" in event or (level is not None and level.name in ("error", "critical")):
            self.events.append(event)

    def install(self) -> Callable[[], None]:
        globalLogPublisher.addObserver(self)
        return lambda: globalLogPublisher.removeObserver(self)


def server_of(nc: Client, urls: dict[str, str]) -> str | None:
    """The name (key of ``urls``) of the server ``nc`` is connected to, or None."""
    current = nc.connected_url
    for name, url in urls.items():
        if url == current:
            return name
    return None
