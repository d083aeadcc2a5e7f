"""What the key and object watchers share: a bounded queue of what an ordered consumer
delivered, read with ``async for`` or :meth:`Watcher.next_update`.

Overflow policy: items not yet read wait in the queue; once ``max_pending`` wait, the
server's flow control requests go unanswered, so the server stops sending until the
reader has taken the queue down to half (nothing is dropped; the queue may pass
``max_pending`` by what the server had sent before it asked).
"""

from __future__ import annotations

from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, Self, TypeVar

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import NatsError, StreamNotFoundError, SubscriptionClosedError, TimeoutError

if TYPE_CHECKING:
    from txnats.jetstream.ordered import OrderedConsumer

__all__ = ["Watcher"]

T = TypeVar("T")


class _End:
    """What a waiting reader gets once the watcher stopped."""


_END: Final = _End()


class Watcher(Generic[T]):
    """The reading half of a watcher: subclasses make ``self._consumer`` (an ordered
    consumer whose deliveries they :meth:`_push`) and say what a vanished stream means
    (:meth:`_gone`).

    :param clock: times :meth:`next_update`'s timeout.
    :param max_pending: items that may wait unread before flow control is held.
    """

    #: Names the watcher in errors ("the key watcher was stopped").
    _name = "watcher"
    #: Names an item in errors ("no key-value update within 1s").
    _update = "update"
    _consumer: OrderedConsumer

    def __init__(self, clock: IReactorTime, max_pending: int) -> None:
        self._clock = clock
        self._max_pending = check_count("max_pending", max_pending)
        self._queue: deque[T | None] = deque()
        self._waiters: deque[Deferred[T | _End | None]] = deque()
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

    def _push(self, item: T | None) -> None:
        if self._waiters:
            self._waiters.popleft().callback(item)
            return
        self._queue.append(item)
        if len(self._queue) >= self._max_pending:
            self._consumer.hold_flow_control = True

    def _taken(self) -> None:
        c = self._consumer
        if c.hold_flow_control and len(self._queue) <= self._max_pending // 2:
            c.hold_flow_control = False
            c.release_flow_control()

    def _on_error(self, e: NatsError) -> None:
        if self._stopped:
            return
        if isinstance(e, StreamNotFoundError):
            err = self._gone()
            err.__cause__ = e
            e = err
        self._error = e
        self._stopped = True
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.errback(Failure(e))

    # ------------------------------------------------------------------ reading
    @property
    def pending(self) -> int:
        """Items received and not read yet."""
        return len(self._queue)

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
        self._queue.clear()
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.callback(_END)

    def _next(self) -> Deferred[T | _End | None]:
        d: Deferred[T | _End | None]
        if self._queue:
            d = Deferred()
            d.callback(self._queue.popleft())
            self._taken()
            return d
        if self._error is not None:
            return fail(self._error)
        if self._stopped:
            d = Deferred()
            d.callback(_END)
            return d
        d = Deferred(self._waiters.remove)
        self._waiters.append(d)
        return d

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
        if self._queue:
            first = self._queue.popleft()
            self._taken()
            return first
        item = await self._next()
        if isinstance(item, _End):
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
