"""The one reader machinery: a mailbox of items and the readers waiting for them.

Every reader of txnats (a subscription without a handler, ``consume()``/``messages()``,
push and ordered consumers, key and object watchers, key listers, object readers) is a
:class:`Mailbox`: items go in (:meth:`Mailbox._put`, or :meth:`Mailbox._push` then
:meth:`Mailbox._serve` where items must not reach user code at once), and readers take
them with ``await reader.next_msg(timeout)`` or ``async for item in reader``, with the
same meaning everywhere:

- an item waiting is handed over at once (``next_msg`` returns a fired Deferred;
  ``async for`` does not suspend);
- ``next_msg(timeout)`` fails with :class:`~txnats.errors.TimeoutError` after
  ``timeout`` seconds (None: no limit); cancelling it withdraws the read, and no item
  is lost;
- once the mailbox has ended (:meth:`Mailbox._end`) and is empty, ``next_msg`` fails
  with the reason it ended, and ``async for`` stops (an end that is the reader's
  normal end: stopped, drained, unsubscribed) or raises the reason (any other end:
  a consumer deleted, a stream gone, the connection closed for good).

An owner sees each take (:meth:`Mailbox._taken`, for its low-water mark) and decides
its own high-water policy at :meth:`Mailbox._put`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from txnats._args import MAX_SECONDS, check_timeout
from txnats.errors import NatsError, TimeoutError

__all__ = ["Mailbox"]

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Items and the readers waiting for them (see the module).

    :param clock: what read timeouts are timed with.
    :param what: what an item is, for the timeout's message (``"message on 'x'"``).
    """

    # Slots, here and in the readers deriving from it: a reader's attributes are read
    # once per item, and an instance dict of 30 keys or more is no longer shared, so
    # every one of those reads gets slower (a subscription's delivery cost 7% more).
    __slots__ = ("_clock", "_end_clean", "_end_error", "_items", "_waiters", "_what")

    def __init__(self, clock: IReactorTime, what: str) -> None:
        self._clock = clock
        self._what = what
        #: The items not taken yet, oldest first.
        self._items: deque[T] = deque()
        #: Readers waiting, oldest first.
        self._waiters: deque[Deferred[T]] = deque()
        # Why the mailbox ended (None while it has not), and whether that is the normal
        # end of the stream (async for stops) or an error (async for raises it).
        self._end_error: NatsError | None = None
        self._end_clean = True

    # ------------------------------------------------------------------ for owners
    def _put(self, item: T) -> None:
        """Hand ``item`` to the oldest waiting reader at once, or keep it."""
        waiters = self._waiters
        if waiters:
            waiters.popleft().callback(item)
        else:
            self._items.append(item)

    def _push(self, item: T) -> None:
        """Keep ``item`` for a reader; waiting readers get it at :meth:`_serve`."""
        self._items.append(item)

    def _serve(self) -> None:
        """Hand kept items to the readers waiting, oldest first."""
        items, waiters = self._items, self._waiters
        while items and waiters:
            waiters.popleft().callback(self._take())

    def _end(self, reason: NatsError, *, clean: bool) -> None:
        """No more items will come. Readers waiting on an empty mailbox fail with
        ``reason`` now; later reads, once what is kept has been taken. ``clean``: this
        is the stream's normal end (``async for`` stops instead of raising)."""
        if self._end_error is not None:
            return
        self._end_error = reason
        self._end_clean = clean
        if not self._items:
            self._fail_waiters(reason)

    def _discard(self) -> int:
        """Drop the kept items; return how many there were."""
        n = len(self._items)
        self._items.clear()
        return n

    def _fail_waiters(self, reason: NatsError) -> None:
        waiters = list(self._waiters)
        self._waiters.clear()
        for w in waiters:
            w.errback(reason)

    def _taken(self, item: T) -> None:
        """Called after each item is taken (owners count, or check a low-water mark)."""

    def _refusal(self) -> NatsError | None:
        """Why a read that finds nothing waiting fails now, or None: it waits. By
        default, the reason the mailbox ended, once it has."""
        return self._end_error

    def _clean_end(self, error: NatsError) -> bool:
        """Whether ``error``, failing a read, is the stream's normal end (``async for``
        stops) rather than an error it raises."""
        return error is self._end_error and self._end_clean

    def _take(self) -> T:
        item = self._items.popleft()
        self._taken(item)
        if not self._items and self._end_error is not None and self._waiters:
            self._fail_waiters(self._end_error)
        return item

    # ------------------------------------------------------------------ for readers
    @property
    def pending(self) -> int:
        """Items waiting to be taken."""
        return len(self._items)

    def next_msg(self, timeout: float | None = 1.0) -> Deferred[T]:
        """The next item: a Deferred that fires with it (at once if one is waiting).

        :param timeout: seconds to wait (None: as long as it takes).
        :returns: a Deferred; it fails with :class:`TimeoutError` after ``timeout``,
            with the reason the reader ended once it has ended and nothing is left,
            and with :class:`InvalidArgumentError` for a bad ``timeout``. Cancelling
            it while it waits withdraws the read: nothing is lost.
        """
        if self._items and not self._waiters and (
            timeout is None or (type(timeout) is float and 0.0 < timeout <= MAX_SECONDS)
        ):
            return succeed(self._take())
        try:
            timeout = check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        if self._items and not self._waiters:
            return succeed(self._take())
        return self._read(timeout)

    def _read(self, timeout: float | None) -> Deferred[T]:
        """A read that finds nothing to take at once: it fails (see :meth:`_refusal`),
        or waits."""
        refused = self._refusal()
        if refused is not None:
            # The same error may fail many reads: do not let its traceback grow.
            return fail(refused.with_traceback(None))
        return self._wait(timeout)

    def _wait(self, timeout: float | None) -> Deferred[T]:
        timer: list[IDelayedCall] = []

        def cancel(d: Deferred[T]) -> None:
            try:
                self._waiters.remove(d)
            except ValueError:
                pass
            if timer and timer[0].active():
                timer[0].cancel()

        d: Deferred[T] = Deferred(cancel)
        self._waiters.append(d)
        if timeout is None:
            return d

        def expire() -> None:
            try:
                self._waiters.remove(d)
            except ValueError:
                return
            d.errback(TimeoutError(f"no {self._what} within {timeout}s"))

        timer.append(self._clock.callLater(timeout, expire))

        def stop_timer(result: object) -> object:
            if timer[0].active():
                timer[0].cancel()
            return result

        d.addBoth(stop_timer)
        return d

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        # A waiting item is returned at once: no Deferred, and the coroutine running the
        # loop does not suspend.
        if self._items and not self._waiters:
            return self._take()
        return await self._next_or_stop()

    async def _next_or_stop(self) -> T:
        """``async for``'s slow path: wait for the next item, or end the loop (normal
        end) or raise (any other)."""
        try:
            return await self._read(None)
        except NatsError as e:
            if self._clean_end(e):
                raise StopAsyncIteration from None
            raise
