"""Bounded waits on the global reactor; nothing here sleeps the thread.

Every wait ends: a Deferred by ``Deferred.addTimeout``, a poll by a deadline on the
reactor's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet import reactor as _reactor
from twisted.internet.defer import Deferred
from twisted.internet.defer import TimeoutError as DeferTimeoutError
from twisted.internet.task import deferLater
from twisted.python.failure import Failure

__all__ = ["WAIT", "bounded", "reactor", "sleep", "turn", "wait_until"]

#: The global reactor, typed loosely (its interfaces are many).
reactor: Any = _reactor
T = TypeVar("T")

#: The longest any single wait may take, unless a test says otherwise.
WAIT = 5.0


def bounded(d: Deferred[T], seconds: float = WAIT, what: str | None = None) -> Deferred[T]:
    """``d``, cancelled after ``seconds``.

    It then fails with ``twisted.internet.defer.TimeoutError``; or, when ``what`` names
    the awaited event, with an ``AssertionError`` saying that ``what`` did not happen
    within ``seconds``.
    """
    d.addTimeout(seconds, reactor)
    if what is None:
        return d

    def name_it(failure: Failure) -> Failure:
        if failure.check(DeferTimeoutError):
            raise AssertionError(f"{what} did not happen within {seconds:g} s")
        return failure

    return d.addErrback(name_it)


async def sleep(seconds: float) -> None:
    """Let the reactor run for ``seconds`` (a timed reactor call, not a thread sleep)."""
    await deferLater(reactor, seconds, lambda: None)


async def turn() -> None:
    """Yield to the reactor for one iteration."""
    await deferLater(reactor, 0, lambda: None)


async def wait_until(
    predicate: Callable[[], bool],
    seconds: float = WAIT,
    what: str = "condition",
    interval: float = 0.01,
) -> float:
    """Poll ``predicate`` every ``interval`` seconds until it is true; return how long it took.

    Fails with an ``AssertionError`` naming ``what`` after ``seconds``. For state outside
    the reactor's knowledge (another process, the kernel); what the reactor runs itself
    is better awaited through a Deferred.
    """
    start = reactor.seconds()
    while not predicate():
        if reactor.seconds() - start > seconds:
            raise AssertionError(f"{what} did not happen within {seconds:g} s")
        await sleep(interval)
    return float(reactor.seconds() - start)
