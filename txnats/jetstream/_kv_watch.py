"""Watching a key-value bucket: :class:`KeyWatcher`, an ordered consumer's deliveries
as :class:`~txnats.jetstream.kv.Entry` objects.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Final

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import (
    BucketNotFoundError,
    KeyValueError,
    NatsError,
    StreamNotFoundError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.jetstream._api import bucket_not_found
from txnats.jetstream._kv_entry import PUT, Entry, operation, time_from_ns
from txnats.jetstream.ordered import OrderedConsumer

if TYPE_CHECKING:
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.kv import KeyValue
    from txnats.jetstream.msg import JsMsg

__all__ = ["KeyLister", "KeyWatcher"]


class _End:
    """What a waiting reader gets when the watcher stops."""


_END: Final = _End()


class KeyWatcher:
    """Entries of the watched keys as they change; from :meth:`KeyValue.watch`.

    ``async for entry in watcher`` gives :class:`Entry` objects, and ``None`` once
    when the initial entries have all been given (at once if there were none). It
    ends when :meth:`stop` is called (which never waits: the consumer is deleted in
    the background); if the ordered consumer underneath gives up (the bucket was
    deleted, the connection closed for good) it raises that error. ``async with``
    stops it on leaving.

    It survives reconnections and server restarts: the consumer underneath is made
    again after the last revision given (a revision is never given twice, and always
    in increasing order).

    Overflow policy: entries not yet read wait in a queue; once ``max_pending`` wait,
    the server's flow control requests go unanswered, so the server stops sending until
    the reader has taken the queue down to half (nothing is dropped; the queue may
    pass ``max_pending`` by what the server had sent before it asked).
    """

    def __init__(
        self,
        kv: KeyValue,
        subjects: list[str],
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
        max_pending: int = 4096,
    ) -> None:
        self.kv = kv
        self._max_pending = check_count("max_pending", max_pending)
        #: The revision of the last entry given (0: none yet).
        self.last_revision = 0
        self._prefix = kv.subject_prefix
        self._ignore_deletes = ignore_deletes
        self._updates_only = updates_only
        self._queue: deque[Entry | None] = deque()
        self._waiters: deque[Deferred[Entry | _End | None]] = deque()
        self._error: NatsError | None = None
        self._stopped = False
        self._init_done = False
        self._init_pending: int | None = None
        self._received = 0
        self._started = False
        policy = "new" if updates_only else ("all" if include_history else "last_per_subject")
        start: int | None = None
        if resume_from_revision is not None:
            start = check_count("resume_from_revision", resume_from_revision)
            policy = "by_start_sequence"
        self._consumer = OrderedConsumer(
            kv.js, kv.stream, self._on_msg, filter_subjects=subjects,
            deliver_policy=policy, opt_start_seq=start, headers_only=meta_only,
            on_error=self._on_error,
        )

    def start(self) -> Deferred[KeyWatcher]:
        """Create the consumer underneath; fires with this watcher once the server is
        delivering (:class:`BucketNotFoundError` if the bucket is gone).

        :meth:`KeyValue.watch` calls it: call it only on a watcher made by hand, and
        once (again fails with :class:`KeyValueError`).
        """
        if self._started:
            return fail(KeyValueError("this key watcher was started already"))
        self._started = True

        def started(info: ConsumerInfo) -> KeyWatcher:
            if self._updates_only:
                self._initial_done()
            elif not self._init_done and info.num_pending == 0:
                # Nothing to deliver, unless deliveries raced ahead of this answer
                # (then the last of them has pending 0 and ends the initial values).
                sent = info.delivered.consumer_seq
                if self._received >= sent:
                    self._initial_done()
            return self

        def failed(f: Failure) -> Failure:
            self.stop()
            return bucket_not_found(f"key-value bucket {self.kv.bucket!r}")(f)

        return self._consumer.start().addCallbacks(started, failed)

    # ------------------------------------------------------------------ delivery
    def _on_msg(self, msg: JsMsg) -> None:
        if self._stopped:
            return
        prefix = self._prefix
        subject = msg.subject
        if not subject.startswith(prefix):
            return
        meta = msg.metadata
        self._received += 1
        revision = meta.sequence.stream
        if revision <= self.last_revision:
            return  # given already (before a reset of the consumer)
        self.last_revision = revision
        op = operation(msg.headers)
        if op == PUT or not self._ignore_deletes:
            self._push(Entry(
                self.kv.bucket, subject[len(prefix):], msg.data, revision,
                time_from_ns(meta.timestamp_ns), meta.num_pending, op,
            ))
        if not self._init_done:
            if self._init_pending is None:
                self._init_pending = meta.num_pending
            if meta.num_pending == 0 or self._received > self._init_pending:
                self._initial_done()

    def _initial_done(self) -> None:
        if not self._init_done:
            self._init_done = True
            self._push(None)

    def _push(self, item: Entry | None) -> None:
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

    @property
    def pending(self) -> int:
        """Entries received and not read yet."""
        return len(self._queue)

    def _on_error(self, e: NatsError) -> None:
        if self._stopped:
            return
        if isinstance(e, StreamNotFoundError):
            err: NatsError = BucketNotFoundError(f"key-value bucket {self.kv.bucket!r} is gone")
            err.__cause__ = e
            e = err
        self._error = e
        self._stopped = True
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.errback(Failure(e))

    # ------------------------------------------------------------------ reading
    def stop(self) -> None:
        """Stop watching (the consumer is deleted); entries not yet read are dropped
        and ``async for`` ends. Stopping twice is harmless."""
        if self._stopped:
            return
        self._stopped = True
        self._consumer.stop()
        self._queue.clear()
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.callback(_END)

    @property
    def stopped(self) -> bool:
        """True once stopped, by :meth:`stop` or by an error."""
        return self._stopped

    def _next(self) -> Deferred[Entry | _End | None]:
        if self._queue:
            d: Deferred[Entry | _End | None] = Deferred()
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

    def next_update(self, timeout: float | None = None) -> Deferred[Entry | None]:
        """The next entry (or the ``None`` marker). Fails with :class:`TimeoutError`
        after ``timeout`` seconds, with :class:`SubscriptionClosedError` once stopped.
        Cancelling it withdraws the read; no entry is lost. A bad ``timeout`` (finite
        and above zero, or ``None`` for no limit) fails it with
        :class:`InvalidArgumentError` and takes nothing from the queue."""
        try:
            check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        d = self._next()

        def ended(item: Entry | _End | None) -> Entry | None:
            if isinstance(item, _End):
                raise SubscriptionClosedError("the key watcher was stopped")
            return item

        out = d.addCallback(ended)
        if timeout is not None and not out.called:

            def timed_out(result: object, t: float) -> Failure:
                return Failure(TimeoutError(f"no key-value update within {t}s"))

            out.addTimeout(timeout, self.kv.js.client.clock, onTimeoutCancel=timed_out)
        return out

    def __aiter__(self) -> KeyWatcher:
        return self

    async def __anext__(self) -> Entry | None:
        if self._queue:
            first = self._queue.popleft()
            self._taken()
            return first
        item = await self._next()
        if isinstance(item, _End):
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> KeyWatcher:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class KeyLister:
    """``async for key in kv.list_keys()``: the keys whose latest entry is a value, as
    a watcher reads them (no list is built). It ends after the last; :meth:`stop` (or
    leaving ``async with``) ends it early."""

    def __init__(self, start: Callable[[], Deferred[KeyWatcher]]) -> None:
        self._start = start
        self._watcher: KeyWatcher | None = None
        self._done = False

    def __aiter__(self) -> KeyLister:
        return self

    async def __anext__(self) -> str:
        if self._done:
            raise StopAsyncIteration
        if self._watcher is None:
            self._watcher = await self._start()
        while True:
            try:
                entry = await self._watcher.__anext__()
            except BaseException:
                self.stop()
                raise
            if entry is None:
                self.stop()
                raise StopAsyncIteration
            if entry.operation == PUT:
                return entry.key

    def stop(self) -> None:
        """Stop listing (the watcher underneath is stopped)."""
        self._done = True
        if self._watcher is not None:
            self._watcher.stop()

    async def __aenter__(self) -> KeyLister:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
