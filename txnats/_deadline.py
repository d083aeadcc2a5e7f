"""Deferred helpers: a deadline that fails with an error of the caller's choosing, and a
fresh Deferred for each caller waiting on one result."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

__all__ = ["chain", "within"]

T = TypeVar("T")


def within(
    d: Deferred[T], timeout: float, clock: IReactorTime, error: Callable[[], Exception]
) -> Deferred[T]:
    """A fresh Deferred with ``d``'s result, or failing with ``error()`` once ``timeout``
    seconds have passed first. ``d`` itself is left to run (a late result is ignored);
    cancelling the fresh Deferred cancels ``d``."""
    outer: Deferred[T] = Deferred(lambda _: d.cancel() if not d.called else None)

    def expire() -> None:
        if not outer.called:
            outer.errback(error())

    timer = clock.callLater(timeout, expire)

    def done(result: object) -> None:
        if timer.active():
            timer.cancel()
        if not outer.called:
            if isinstance(result, Failure):
                outer.errback(result)
            else:
                outer.callback(result)  # type: ignore[arg-type]

    d.addBoth(done)
    return outer


def chain(d: Deferred[None]) -> Deferred[None]:
    """A fresh Deferred with ``d``'s result, leaving ``d`` untouched (for as many
    callers as ask)."""
    out: Deferred[None] = Deferred()

    def relay(result: object) -> object:
        if isinstance(result, Failure):
            out.errback(result)
        else:
            out.callback(None)
        return result

    d.addBoth(relay)
    d.addErrback(lambda _: None)
    return out
