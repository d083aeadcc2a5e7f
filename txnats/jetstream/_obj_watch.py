"""Watching an object store: :class:`ObjectWatcher`, the bucket's metadata messages as
:class:`~txnats.jetstream.object_store.ObjectInfo` objects, read with an ordered
consumer (made again after a reconnection or a server restart).
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Final

from twisted.internet.defer import Deferred, fail
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import (
    BucketNotFoundError,
    NatsError,
    ObjectStoreError,
    StreamNotFoundError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.jetstream._obj_info import ObjectInfo
from txnats.jetstream.ordered import OrderedConsumer

if TYPE_CHECKING:
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.context import JetStreamContext
    from txnats.jetstream.msg import JsMsg

__all__ = ["ObjectWatcher"]

log = Logger()


class _End:
    """What a waiting reader gets once the watcher stopped."""


_END: Final = _End()


class ObjectWatcher:
    """Changes to the objects of a bucket: from ``store.watch()``.

    ``async for info in watcher`` gives an :class:`ObjectInfo` for every object (its
    latest info; with ``include_history`` every kept one), then ``None`` once when the
    initial values are all given (at once if there are none), then one per change:
    a put, a change of metadata, a link, a delete (``info.deleted``; left out with
    ``ignore_deletes``). ``updates_only`` gives ``None`` first and changes only.
    :meth:`stop` (or leaving ``async with``) ends it and never waits.

    Overflow policy, as for key watchers: once ``max_pending`` infos wait unread, the
    server's flow control requests go unanswered until the reader has taken half.
    """

    def __init__(
        self, js: JetStreamContext, bucket: str, *, include_history: bool = False,
        ignore_deletes: bool = False, updates_only: bool = False, max_pending: int = 4096,
    ) -> None:
        self.bucket = bucket
        self._clock = js.client.clock
        self._max = check_count("max_pending", max_pending)
        self._ignore_deletes = ignore_deletes
        self._updates_only = updates_only
        self._queue: deque[ObjectInfo | None] = deque()
        self._waiters: deque[Deferred[ObjectInfo | _End | None]] = deque()
        self._error: NatsError | None = None
        self._stopped = False
        self._init_done = False
        self._received = 0
        self._last_seq = 0
        policy = "new" if updates_only else ("all" if include_history else "last_per_subject")
        self._consumer = OrderedConsumer(
            js, f"OBJ_{bucket}", self._on_msg, filter_subjects=[f"$O.{bucket}.M.>"],
            deliver_policy=policy, on_error=self._on_error,
        )

    def start(self) -> Deferred[ObjectWatcher]:
        """Create the consumer; fires with this watcher (:class:`BucketNotFoundError`
        if there is no such bucket)."""

        def started(info: ConsumerInfo) -> ObjectWatcher:
            if self._updates_only or (
                info.num_pending == 0 and self._received >= info.delivered.consumer_seq
            ):
                self._initial_done()
            return self

        def failed(f: Failure) -> Failure:
            self.stop()
            if f.check(StreamNotFoundError):
                return Failure(BucketNotFoundError(f"no object store {self.bucket!r}"))
            return f

        return self._consumer.start().addCallbacks(started, failed)

    def _on_msg(self, msg: JsMsg) -> None:
        if self._stopped:
            return
        meta = msg.metadata
        self._received += 1
        if meta.sequence.stream > self._last_seq:
            self._last_seq = meta.sequence.stream
            try:
                info = ObjectInfo.from_json(
                    msg.data, datetime.fromtimestamp(meta.timestamp_ns / 1e9, UTC)
                )
            except ObjectStoreError as e:
                log.warn("Object store {bucket}: skipping {error}", bucket=self.bucket, error=e)
            else:
                if not (info.deleted and self._ignore_deletes):
                    self._push(info)
        if not self._init_done and meta.num_pending == 0:
            self._initial_done()

    def _initial_done(self) -> None:
        if not self._init_done:
            self._init_done = True
            self._push(None)

    def _push(self, item: ObjectInfo | None) -> None:
        if self._waiters:
            self._waiters.popleft().callback(item)
            return
        self._queue.append(item)
        if len(self._queue) >= self._max:
            self._consumer.hold_flow_control = True

    def _take(self) -> ObjectInfo | None:
        item = self._queue.popleft()
        c = self._consumer
        if c.hold_flow_control and len(self._queue) <= self._max // 2:
            c.hold_flow_control = False
            c.release_flow_control()
        return item

    def _on_error(self, e: NatsError) -> None:
        if self._stopped:
            return
        if isinstance(e, StreamNotFoundError):
            err: NatsError = BucketNotFoundError(f"object store {self.bucket!r} is gone")
            err.__cause__ = e
            e = err
        self._error = e
        self._stopped = True
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.errback(Failure(e))

    def stop(self) -> None:
        """Stop watching (the consumer is deleted in the background); what was not read
        is dropped and ``async for`` ends. Stopping twice is harmless."""
        if self._stopped:
            return
        self._stopped = True
        self._consumer.stop()
        self._queue.clear()
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.callback(_END)

    def _next(self) -> Deferred[ObjectInfo | _End | None]:
        d: Deferred[ObjectInfo | _End | None]
        if self._queue:
            d = Deferred()
            d.callback(self._take())
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

    def next_update(self, timeout: float | None = None) -> Deferred[ObjectInfo | None]:
        """The next info (or the ``None`` marker); :class:`TimeoutError` after
        ``timeout`` seconds, :class:`SubscriptionClosedError` once stopped."""
        try:
            check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)

        def ended(item: ObjectInfo | _End | None) -> ObjectInfo | None:
            if isinstance(item, _End):
                raise SubscriptionClosedError("the object watcher was stopped")
            return item

        out = self._next().addCallback(ended)
        if timeout is not None and not out.called:

            def timed_out(result: object, t: float) -> Failure:
                return Failure(TimeoutError(f"no object store update within {t}s"))

            out.addTimeout(timeout, self._clock, onTimeoutCancel=timed_out)
        return out

    def __aiter__(self) -> ObjectWatcher:
        return self

    async def __anext__(self) -> ObjectInfo | None:
        item = await self._next()
        if isinstance(item, _End):
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> ObjectWatcher:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
