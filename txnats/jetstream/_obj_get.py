"""Reading an object's chunks as a stream: never more than two batches in memory.

:class:`ChunkStream` reads the chunk messages of one object in order with batched
Direct Get requests (ADR-31: ``{"seq": s, "next_by_subj": subject, "batch": n}``; the
server answers with up to ``n`` messages, then a ``204`` end-of-batch status), asking
for the next batch only once fewer than one batch waits unread: that is the flow
control, and the memory bound. A bucket whose stream has no ``allow_direct`` is read
with an ordered consumer instead (no flow control: what is not read yet waits).
The size, the chunk count and the SHA-256 are checked once the last chunk is in; a
mismatch is raised after the chunks already read.

:class:`ObjectReader` (``store.get_chunks(name)``) is the async iterator over it;
:func:`write_to_file` and :class:`ConsumerSink` (``store.get_to_file``,
``store.get_to_consumer``) take chunks from it as fast as a file (written in a thread)
or an :class:`~twisted.internet.interfaces.IConsumer` takes them.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IConsumer, IDelayedCall, IPushProducer, IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from zope.interface import implementer

from txnats.errors import (
    BucketNotFoundError,
    ObjectStoreError,
    StreamNotFoundError,
    TimeoutError,
)
from txnats.jetstream._gone import notices_for
from txnats.jetstream._obj_chunks import Hasher, verify
from txnats.jetstream._watch import StopOnExit
from txnats.jetstream.msg import whole_number
from txnats.jetstream.ordered import ONE_SHOT_RESETS, OrderedConsumer
from txnats.nuid import next_nuid
from txnats.protocol.events import Msg

if TYPE_CHECKING:
    from txnats.jetstream._obj_info import ObjectInfo
    from txnats.jetstream.context import JetStreamContext
    from txnats.jetstream.msg import JsMsg
    from txnats.subscription import Subscription

__all__ = ["BATCH_BYTES", "ChunkStream", "ConsumerSink", "ObjectReader", "write_to_file"]

#: Bytes one Direct Get batch asks for (rounded down to whole chunks, at least one).
BATCH_BYTES = 4 * 1024 * 1024


class ChunkStream:
    """One object's chunks, in order, each once; ``next()`` gives them."""

    def __init__(
        self, js: JetStreamContext, stream: str, subject: str, info: ObjectInfo,
        *, direct: bool = True,
    ) -> None:
        self.js = js
        self.info = info
        self._stream = stream
        self._subject = subject
        self._direct = direct
        chunk = max(1, info.max_chunk_size or (info.size // max(1, info.chunks)) or 1)
        self._batch = max(1, BATCH_BYTES // chunk)
        self._queue: deque[bytes] = deque()
        self._waiter: Deferred[None] | None = None
        self._error: BaseException | None = None
        self._finished = False  # every chunk is in (and checked)
        self._checking = False  # every chunk is in: hashing the last ones
        self._in_flight = False
        self._next_seq = 1
        self._received = 0
        self._size = 0
        self._h = Hasher(js.client.clock, self._maybe_request)
        self._sub: Subscription | None = None
        self._timer: IDelayedCall | None = None
        self._consumer: OrderedConsumer | None = None
        self._stopped = False
        self._asking = False  # a stream-info request is under way
        self._unwatch: Callable[[], None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self.info.chunks == 0:
            self._complete()
            return
        self._unwatch = notices_for(self.js.client).watch(self._stream, self._notice)
        if not self._direct:
            self._consumer = OrderedConsumer(
                self.js, self._stream, self._on_ordered, filter_subjects=[self._subject],
                on_error=self._ordered_failed, max_resets=ONE_SHOT_RESETS,
            )
            self._consumer.start().addErrback(self._start_failed)
            return
        client = self.js.client
        self._inbox = client.new_inbox()
        self._sub = client.subscribe(self._inbox, self._on_msg)
        self._request()

    def _start_failed(self, f: Failure) -> None:
        self._ordered_failed(f.value or ObjectStoreError("could not start reading"))

    def _ordered_failed(self, e: BaseException) -> None:
        self._fail(self._gone(e) if isinstance(e, StreamNotFoundError) else e)

    def _gone(self, cause: BaseException) -> BucketNotFoundError:
        bucket = self._stream.removeprefix("OBJ_")
        err = BucketNotFoundError(
            f"object store {bucket!r} is gone (reading {self.info.name!r})"
        )
        err.__cause__ = cause
        return err

    def _notice(self, consumer: str) -> None:
        if not consumer:  # the stream's deletion (a consumer's is the ordered reader's)
            self._ask(None)

    def _ask(self, otherwise: BaseException | None) -> None:
        """Ask whether the bucket's stream still exists: fail with
        :class:`BucketNotFoundError` if not, else with ``otherwise`` (if any)."""
        if self._asking or self._stopped or self._finished or self._error is not None:
            return
        self._asking = True

        def answered(result: object) -> None:
            self._asking = False
            if isinstance(result, Failure) and result.check(StreamNotFoundError):
                self._fail(self._gone(result.value or StreamNotFoundError("gone")))
            elif otherwise is not None:
                self._fail(otherwise)

        self.js.stream_info(self._stream).addBoth(answered)

    def stop(self) -> None:
        """Stop reading (what is queued is dropped); ``next()`` then ends."""
        if self._stopped:
            return
        self._stopped = True
        self._queue.clear()
        self._teardown()
        self._wake()

    def _teardown(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self._sub is not None:
            self._sub.unsubscribe()
            self._sub = None
        if self._consumer is not None:
            self._consumer.stop()
            self._consumer = None

    # ------------------------------------------------------------------ direct get
    def _request(self) -> None:
        # One more than the object has, at the end: a chunk past the metadata's count
        # is a mismatch, as for nats.go, which reads until nothing is pending.
        want = min(self._batch, self.info.chunks - self._received + 1)
        self._in_flight = True
        req = {"seq": self._next_seq, "next_by_subj": self._subject, "batch": want}
        self.js.client.publish(
            f"{self.js.prefix}.DIRECT.GET.{self._stream}", json.dumps(req).encode(),
            reply=self._inbox,
        )
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.reset(self.js.timeout)
        else:
            self._timer = self.js.client.clock.callLater(self.js.timeout, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        self._ask(TimeoutError(
            f"object {self.info.name!r}: no chunk within {self.js.timeout}s"
        ))

    def _maybe_request(self) -> None:
        if (
            not self._in_flight and not self._finished and not self._checking
            and self._error is None and not self._stopped and len(self._queue) < self._batch
            and self._h.backlog < BATCH_BYTES and self._direct
        ):
            self._request()

    def _on_msg(self, msg: Msg) -> None:
        if self._finished or self._error is not None or self._stopped:
            return
        h = msg.headers
        status = h.status if h is not None else None
        if status is not None:
            self._in_flight = False
            if status == 204:  # end of this batch
                if self._received >= self.info.chunks:
                    self._complete()
                else:
                    self._maybe_request()
                    if not self._in_flight and self._timer is not None:
                        self._timer.cancel()
                        self._timer = None
            elif status == 404:  # no chunk at or after next_seq: the rest is missing
                self._complete()
            else:  # (503: no stream answers, deleted or between leaders)
                desc = h.description if h is not None else ""
                self._ask(ObjectStoreError(
                    f"object {self.info.name!r}: direct get answered {status} {desc}".strip()
                ))
            return
        seq = whole_number(h.get("Nats-Sequence") if h is not None else None)
        if seq is None or seq < self._next_seq:
            self._fail(ObjectStoreError(
                "direct get answered a message without its sequence (or with one before"
                f" the next chunk's, {self._next_seq})"
            ))
            return
        self._next_seq = seq + 1
        self._arm()
        self._chunk(msg.data)
        if h is not None and h.get("Nats-Num-Pending") is None:
            # A server before 2.11 answers one message, no batch and no end-of-batch
            # status: ask for the next one now.
            self._in_flight = False
            self._batch = 1
            self._maybe_request()

    # ------------------------------------------------------------------ ordered consumer
    def _on_ordered(self, msg: JsMsg) -> None:
        if self._finished or self._error is not None or self._stopped:
            return
        self._chunk(msg.data)
        if msg.metadata.num_pending == 0:
            self._complete()

    # ------------------------------------------------------------------ both
    def _chunk(self, data: bytes) -> None:
        self._received += 1
        self._size += len(data)
        self._h.update(data)
        self._queue.append(data)
        if self._received >= self.info.chunks and not self._direct:
            self._complete()
        self._wake()

    def _complete(self) -> None:
        if self._finished or self._checking:
            return
        self._checking = True
        self._teardown()
        self._h.digest().addBoth(self._check)

    def _check(self, sha: bytes | Failure) -> None:
        self._finished = True
        try:
            if isinstance(sha, Failure):
                sha.raiseException()
            verify(self.info, self._size, sha, self._received)
        except BaseException as e:
            self._error = e
        self._wake()

    def _fail(self, e: BaseException) -> None:
        if self._error is None and not self._finished and not self._checking:
            self._error = e
            self._teardown()
            self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            d, self._waiter = self._waiter, None
            d.callback(None)

    # ------------------------------------------------------------------ reading
    async def next_chunks(self) -> list[bytes]:
        """Every chunk waiting (at least one); ``[]`` at the end. Raises the error
        that ended the read (a digest mismatch once the chunks before it are read)."""
        while not self._queue:
            if self._stopped or (self._finished and self._error is None):
                return []
            if self._error is not None:
                raise self._error
            self._waiter = Deferred()
            await self._waiter
        out = list(self._queue)
        self._queue.clear()
        if self._direct:
            self._maybe_request()
        return out

    async def next(self) -> bytes:
        """The next chunk; ``b""`` at the end."""
        while not self._queue:
            if self._stopped or (self._finished and self._error is None):
                return b""
            if self._error is not None:
                raise self._error
            self._waiter = Deferred()
            await self._waiter
        piece = self._queue.popleft()
        if self._direct:
            self._maybe_request()
        return piece


Opener = Callable[[], Deferred[ChunkStream]]


class ObjectReader(StopOnExit):
    """``async for chunk in store.get_chunks(name)``: an object's bytes chunk by chunk.

    :attr:`info` is the object's info once the first chunk is asked for (``await
    reader.open()`` gives it earlier). The iteration ends after the last chunk, once
    the size and the SHA-256 match; if they do not, it raises
    :class:`DigestMismatchError` instead. :meth:`stop` (or leaving ``async with``)
    ends it early.
    """

    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self._opening: Deferred[ChunkStream] | None = None
        self._chunks: ChunkStream | None = None
        self._stopped = False
        #: The object's info (after :meth:`open`); links are followed.
        self.info: ObjectInfo | None = None

    async def open(self) -> ObjectInfo:
        """Find the object (following a link) and start reading; its info."""
        if self._chunks is None:
            if self._opening is None:
                self._opening = self._opener()
            chunks = await self._opening
            if self._chunks is None:
                self._chunks = chunks
                self.info = chunks.info
                if self._stopped:
                    chunks.stop()
        assert self.info is not None
        return self.info

    @property
    def chunk_stream(self) -> ChunkStream | None:
        """The chunks being read, once :meth:`open` is done."""
        return self._chunks

    async def next_chunks(self) -> list[bytes]:
        """Every chunk read and not yet taken (at least one); ``[]`` at the end."""
        await self.open()
        assert self._chunks is not None
        return await self._chunks.next_chunks()

    def stop(self) -> None:
        """Stop reading; ``async for`` ends."""
        self._stopped = True
        if self._chunks is not None:
            self._chunks.stop()

    def __aiter__(self) -> ObjectReader:
        return self

    async def __anext__(self) -> bytes:
        if self._chunks is None:
            await self.open()
        assert self._chunks is not None
        piece = await self._chunks.next()
        if not piece:
            raise StopAsyncIteration
        return piece



def _in_thread(reactor: Any, f: Callable[..., Any], *args: Any) -> Deferred[Any]:
    """``f(*args)`` in the reactor's thread pool (in place without one)."""
    if IReactorThreads.providedBy(reactor):
        return deferToThreadPool(reactor, reactor.getThreadPool(), f, *args)
    try:
        return succeed(f(*args))
    except Exception as e:
        d: Deferred[Any] = Deferred()
        d.errback(Failure(e))
        return d


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


async def write_to_file(
    reader: ObjectReader, target: str | os.PathLike[str] | BinaryIO, reactor: object
) -> ObjectInfo:
    """Write the object ``reader`` reads to ``target``, every write in a thread.

    A path is written as ``<path>.<nuid>.part`` and renamed to ``path`` once the digest
    matches; on any failure the part file is removed (``path`` is left as it was). A
    binary file object is written to as the chunks come and left open; on a failure
    what was written stays (the caller owns it).
    """
    info = await reader.open()
    if isinstance(target, (str, os.PathLike)):
        path = os.fspath(target)
        part = f"{path}.{next_nuid()}.part"
        f: BinaryIO = await _in_thread(reactor, open, part, "wb")
        try:
            await _copy(reader, f, reactor)
            await _in_thread(reactor, f.close)
            await _in_thread(reactor, os.replace, part, path)
        except BaseException:
            reader.stop()
            await _in_thread(reactor, f.close)
            await _in_thread(reactor, _remove, part)
            raise
        return info
    if not callable(getattr(target, "write", None)):
        raise ObjectStoreError(f"cannot write an object to {type(target).__name__}")
    try:
        await _copy(reader, target, reactor)
    except BaseException:
        reader.stop()
        raise
    await _in_thread(reactor, target.flush)
    return info


async def _copy(reader: ObjectReader, f: BinaryIO, reactor: object) -> None:
    while True:
        chunks = await reader.next_chunks()
        if not chunks:
            return
        await _in_thread(reactor, f.writelines, chunks)


@implementer(IPushProducer)
class ConsumerSink:
    """Write an object to an :class:`~twisted.internet.interfaces.IConsumer`, as its
    push producer: paused while the consumer says so. :attr:`done` fires with the
    object's info after the last chunk (and the producer is unregistered), or fails
    (:class:`DigestMismatchError` after the bytes were written, or an error of the
    read); ``stopProducing()`` from the consumer fails it with
    :class:`ObjectStoreError`."""

    def __init__(self, reader: ObjectReader, consumer: IConsumer) -> None:
        self._reader = reader
        self._consumer = consumer
        self._paused = False
        self._resume: Deferred[None] | None = None
        self._stopped = False
        self.done: Deferred[ObjectInfo] = Deferred.fromCoroutine(self._run())

    async def _run(self) -> ObjectInfo:
        info = await self._reader.open()
        self._consumer.registerProducer(self, True)
        try:
            while True:
                while self._paused and not self._stopped:
                    self._resume = Deferred()
                    await self._resume
                if self._stopped:
                    raise ObjectStoreError("the consumer stopped the object transfer")
                chunks = await self._reader.next_chunks()
                if not chunks:
                    break
                for c in chunks:
                    self._consumer.write(c)
        except BaseException:
            self._reader.stop()
            raise
        finally:
            self._consumer.unregisterProducer()
        return info

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        self._kick()

    def stopProducing(self) -> None:
        self._stopped = True
        self._reader.stop()
        self._kick()

    def _kick(self) -> None:
        if self._resume is not None:
            d, self._resume = self._resume, None
            d.callback(None)

