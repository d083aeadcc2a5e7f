"""Watching a key-value bucket: :class:`KeyWatcher`, an ordered consumer's deliveries
as :class:`~txnats.jetstream.kv.Entry` objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from txnats._args import check_count
from txnats.errors import BucketNotFoundError, KeyValueError, NatsError
from txnats.jetstream._api import bucket_not_found
from txnats.jetstream._kv_entry import PUT, Entry, operation, time_from_ns
from txnats.jetstream._watch import StopOnExit, Watcher
from txnats.jetstream.ordered import OrderedConsumer

if TYPE_CHECKING:
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.kv import KeyValue
    from txnats.jetstream.msg import JsMsg

__all__ = ["KeyLister", "KeyWatcher"]


class KeyWatcher(Watcher[Entry]):
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

    Overflow policy: entries not yet read wait in a queue of at most ``max_pending``;
    once it is full the consumer underneath is paused, and made again after the last
    entry queued once the reader has taken the queue down to half. As after a
    reconnection, a watch of the latest values whose initial entries were cut so may
    then also give older revisions of keys changed since (in increasing order: each
    key's last entry is its latest value), and ``None`` comes once they are all given.
    """

    _name = "key watcher"
    _update = "key-value update"

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
        super().__init__(kv.js.client.clock, max_pending)
        self.kv = kv
        #: The revision of the last entry given (0: none yet).
        self.last_revision = 0
        self._prefix = kv.subject_prefix
        self._ignore_deletes = ignore_deletes
        self._updates_only = updates_only
        self._init_target = 0  # entries received once the initial ones are all in
        self._started = False
        policy = "new" if updates_only else ("all" if include_history else "last_per_subject")
        start: int | None = None
        if resume_from_revision is not None:
            start = check_count("resume_from_revision", resume_from_revision)
            policy = "by_start_sequence"
        self._held_by(OrderedConsumer(
            kv.js, kv.stream, self._on_msg, filter_subjects=subjects,
            deliver_policy=policy, opt_start_seq=start, headers_only=meta_only,
            on_error=self._on_error,
        ))

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
            if meta.sequence.consumer == 1:  # a consumer's first: it says what is left
                self._init_target = self._received + meta.num_pending
            if meta.num_pending == 0 or self._received >= self._init_target:
                self._initial_done()

    def _gone(self) -> NatsError:
        return BucketNotFoundError(f"key-value bucket {self.kv.bucket!r} is gone")


class KeyLister(StopOnExit):
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

