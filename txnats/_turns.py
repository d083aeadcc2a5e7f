"""The turn scheduler that subscriptions and the connection share.

User code never runs while bytes are being parsed. Work that reaches user code
(a subscription's delivery turn, a Deferred's callbacks, a callback option) is queued
with :meth:`Turns.schedule` and run in a batch: at once when the read being dispatched
is over (:meth:`Turns.read_finished`), or else in one ``callLater(0)`` per batch.
Whatever the batch publishes leaves in one write at its end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger

__all__ = ["Listeners", "Turns", "call_user"]

T = TypeVar("T")

log = Logger()


class Flushable(Protocol):
    """The connection a batch writes to (a :class:`~txnats.connection.NatsProtocol`)."""

    def hold_flush(self) -> None: ...
    def release_flush(self) -> None: ...


class Turns:
    """Runs queued work in batches; one per client."""

    def __init__(self, clock: IReactorTime, connection: Callable[[], Flushable | None]) -> None:
        self._clock = clock
        #: The client's connection now (or None): what a batch writes to.
        self._connection = connection
        self._soon: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        self._soon_call: IDelayedCall | None = None
        # True while a connection dispatches a read (see read_finished).
        self._reading = False

    def schedule(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` soon: once the read being dispatched is over, or else in the
        next turn of the reactor (one ``callLater(0)`` per batch)."""
        self._soon.append((fn, args))
        if self._soon_call is None and not self._reading:
            self._soon_call = self._clock.callLater(0, self.run)

    def read_started(self) -> None:
        self._reading = True

    def read_finished(self) -> None:
        """A connection dispatched a whole read: run what it queued now, saving the
        reactor a pass (and a timed call) per batch of messages."""
        self._reading = False
        if self._soon:
            self.run()

    def run(self) -> None:
        """Run the queued batch (work it queues waits for the next batch)."""
        if self._soon_call is not None:
            if self._soon_call.active():
                self._soon_call.cancel()
            self._soon_call = None
        batch = self._soon
        self._soon = []
        # What the batch publishes (replies, above all) leaves at its end, below, rather
        # than from a timed call one reactor iteration later.
        held = self._connection()
        if held is not None:
            held.hold_flush()
        try:
            for fn, args in batch:
                try:
                    fn(*args)
                except Exception:
                    log.failure("Unexpected error in a scheduled call")
        finally:
            if held is not None:
                held.release_flush()
        proto = self._connection()
        if proto is not None and proto is not held:
            proto.release_flush()  # (the batch moved the client to another connection)


def call_user(name: str, cb: Callable[..., object] | None, *args: object) -> None:
    """Call a user's callback option: what it raises (or its Deferred fails with) is
    logged, never passed on."""
    if cb is None:
        return
    try:
        result = cb(*args)
    except Exception:
        log.failure("The {name} callback raised", name=name)
        return
    if isinstance(result, Deferred):
        result.addErrback(lambda f: log.failure("The {name} callback failed", f, name=name))


class Listeners(Generic[T]):
    """Functions told of events in a later batch, each on its own (a raise is logged)."""

    def __init__(self, schedule: Callable[..., None]) -> None:
        self._schedule = schedule
        self._fns: list[Callable[[T], object]] = []

    def __bool__(self) -> bool:
        return bool(self._fns)

    def add(self, fn: Callable[[T], object]) -> Callable[[], None]:
        """Add ``fn``; returns the function that removes it again."""
        fns = self._fns
        fns.append(fn)

        def remove() -> None:
            if fn in fns:
                fns.remove(fn)

        return remove

    def notify(self, event: T) -> None:
        for fn in tuple(self._fns):
            self._schedule(call_user, "listener", fn, event)
