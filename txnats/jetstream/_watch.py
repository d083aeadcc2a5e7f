"""What the key and object watchers share: a bounded queue of what an ordered consumer
delivered, read with ``async for`` or :meth:`Watcher.next_update`.

Overflow policy (:class:`~txnats.jetstream.ordered.HeldBuffer`'s, as for
``OrderedMessages``): items not yet read wait in the queue, at most ``max_pending`` of
them; once it is full the consumer underneath is paused (deleted, what was on its way
dropped) and made again after the last item queued once the reader has taken the queue
down to half. Nothing is lost or given twice.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, Self, TypeVar

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import NatsError, StreamNotFoundError, SubscriptionClosedError, TimeoutError
from txnats.jetstream.ordered import HeldBuffer

if TYPE_CHECKING:
    from txnats.jetstream.ordered import OrderedConsumer

__all__ = ["StopOnExit", "Watcher"]

T = TypeVar("T")


class StopOnExit:
    """``async with reader:``: the reader is stopped on the way out, however it ends."""

    def stop(self) -> None:
        raise NotImplementedError  # pragma: no cover

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _End:
    """What a waiting reader gets once the watcher stopped."""


_END: Final = _End()


class Watcher(StopOnExit, Generic[T]):
    """The reading half of a watcher: subclasses make ``self._consumer`` (an ordered
    consumer whose deliveries they :meth:`_push`, after calling :meth:`_held_by`) and
    say what a vanished stream means (:meth:`_gone`).

    :param clock: times :meth:`next_update`'s timeout.
    :param max_pending: the most items that wait unread (the consumer pauses then).
    """

    #: Names the watcher in errors ("the key watcher was stopped").
    _name = "watcher"
    #: Names an item in errors ("no key-value update within 1s").
    _update = "update"
    _consumer: OrderedConsumer

    def __init__(self, clock: IReactorTime, max_pending: int) -> None:
        self._clock = clock
        self._buffer: HeldBuffer[T | None] = HeldBuffer(check_count("max_pending", max_pending))
        self._error: NatsError | None = None
        self._stopped = False
        self._init_done = False
        self._received = 0

    def _gone(self) -> NatsError:
        """The error for a stream deleted under the watcher."""
        raise NotImplementedError  # pragma: no cover

    # ------------------------------------------------------------------ filling
    def _initial_done(self) -> None:
        if not self._init_done:
            self._init_done = True
            self._push(None)

    def _held_by(self, consumer: OrderedConsumer) -> None:
        """``consumer`` feeds the queue: its flow control is held while the queue is full."""
        self._consumer = self._buffer.consumer = consumer

    def _push(self, item: T | None) -> None:
        self._buffer.push(item)

    def _on_error(self, e: NatsError) -> None:
        if self._stopped:
            return
        if isinstance(e, StreamNotFoundError):
            err = self._gone()
            err.__cause__ = e
            e = err
        self._error = e
        self._stopped = True
        for w in self._buffer.release_waiters():
            w.errback(Failure(e))

    # ------------------------------------------------------------------ reading
    @property
    def pending(self) -> int:
        """Items received and not read yet."""
        return len(self._buffer.items)

    @property
    def stopped(self) -> bool:
        """True once stopped, by :meth:`stop` or by an error."""
        return self._stopped

    def stop(self) -> None:
        """Stop watching (the consumer is deleted in the background); what was not
        read is dropped and ``async for`` ends. Stopping twice is harmless."""
        if self._stopped:
            return
        self._stopped = True
        self._consumer.stop()
        self._buffer.items.clear()
        for w in self._buffer.release_waiters():
            w.callback(_END)

    def _next(self) -> Deferred[T | _End | None]:
        if self._buffer.items:
            return succeed(self._buffer.take())
        if self._error is not None:
            return fail(self._error)
        if self._stopped:
            return succeed(_END)
        return self._buffer.wait()

    def next_update(self, timeout: float | None = None) -> Deferred[T | None]:
        """The next item (or the ``None`` marker). Fails with :class:`TimeoutError`
        after ``timeout`` seconds, with :class:`SubscriptionClosedError` once stopped.
        Cancelling it withdraws the read; nothing is lost. A bad ``timeout`` (finite
        and above zero, or ``None`` for no limit) fails it with
        :class:`InvalidArgumentError` and takes nothing from the queue."""
        try:
            check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)

        def ended(item: T | _End | None) -> T | None:
            if isinstance(item, _End):
                raise SubscriptionClosedError(f"the {self._name} was stopped")
            return item

        out = self._next().addCallback(ended)
        if timeout is not None and not out.called:

            def timed_out(result: object, t: float) -> Failure:
                return Failure(TimeoutError(f"no {self._update} within {t}s"))

            out.addTimeout(timeout, self._clock, onTimeoutCancel=timed_out)
        return out

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T | None:
        if self._buffer.items:
            return self._buffer.take()
        item = await self._next()
        if isinstance(item, _End):
            raise StopAsyncIteration
        return item

