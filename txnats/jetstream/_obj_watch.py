"""Watching an object store: :class:`ObjectWatcher`, the bucket's metadata messages as
:class:`~txnats.jetstream.object_store.ObjectInfo` objects, read with an ordered
consumer (made again after a reconnection or a server restart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats.errors import BucketNotFoundError, NatsError, ObjectStoreError, StreamNotFoundError
from txnats.jetstream._api import report
from txnats.jetstream._kv_entry import time_from_ns
from txnats.jetstream._obj_info import ObjectInfo
from txnats.jetstream._watch import Watcher
from txnats.jetstream.ordered import OrderedConsumer

if TYPE_CHECKING:
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.context import JetStreamContext
    from txnats.jetstream.msg import JsMsg

__all__ = ["ObjectWatcher"]

log = Logger()


class ObjectWatcher(Watcher[ObjectInfo]):
    """Changes to the objects of a bucket: from ``store.watch()``.

    ``async for info in watcher`` gives an :class:`ObjectInfo` for every object (its
    latest info; with ``include_history`` every kept one), then ``None`` once when the
    initial values are all given (at once if there are none), then one per change:
    a put, a change of metadata, a link, a delete (``info.deleted``; left out with
    ``ignore_deletes``). ``updates_only`` gives ``None`` first and changes only.
    :meth:`stop` (or leaving ``async with``) ends it and never waits.

    Overflow policy, as for key watchers: at most ``max_pending`` infos wait unread;
    the consumer underneath pauses while the queue is full, until the reader has taken
    half.
    """

    _name = "object watcher"
    _update = "object store update"

    def __init__(
        self, js: JetStreamContext, bucket: str, *, include_history: bool = False,
        ignore_deletes: bool = False, updates_only: bool = False, max_pending: int = 4096,
    ) -> None:
        super().__init__(js.client.clock, max_pending)
        self.bucket = bucket
        self._ignore_deletes = ignore_deletes
        self._updates_only = updates_only
        self._last_seq = 0
        policy = "new" if updates_only else ("all" if include_history else "last_per_subject")
        self._held_by(OrderedConsumer(
            js, f"OBJ_{bucket}", self._on_msg, filter_subjects=[f"$O.{bucket}.M.>"],
            deliver_policy=policy, on_error=self._on_error,
        ))

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
                    msg.data, time_from_ns(meta.timestamp_ns)
                )
            except ObjectStoreError as e:  # another client's bytes: reported, skipped
                log.warn("Object store {bucket}: skipping {error}", bucket=self.bucket, error=e)
                report(self._consumer.js.client, ObjectStoreError(
                    f"object watcher of {self.bucket!r} skipped {msg.subject!r}: {e}"
                ))
            else:
                if not (info.deleted and self._ignore_deletes):
                    self._push(info)
        if not self._init_done and meta.num_pending == 0:
            self._initial_done()

    def _gone(self) -> NatsError:
        return BucketNotFoundError(f"object store {self.bucket!r} is gone")
