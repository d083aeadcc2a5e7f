"""Where an object's bytes come from when it is put: cut into chunks, never whole.

Every kind of input the object store takes becomes a :class:`PieceSource`: an async
``next()`` giving the next chunk (``chunk_size`` bytes, the last one shorter) and
``b""`` at the end.

- bytes, bytearray, memoryview: sliced.
- :class:`io.BytesIO`: read in place (its reads never block).
- any other binary file object (``read(n)``): read in a thread of the reactor's pool,
  :data:`READ_BLOCK` bytes at a time with one read ahead, so that a slow disk or pipe
  never blocks the reactor (without a thread pool, as on a test clock, in place).
- an async iterator of bytes-like pieces of any size: re-cut into chunks.
- an :class:`~twisted.web.iweb.IBodyProducer` (Twisted's ``FileBodyProducer``...):
  started with an :class:`ObjectWriter` as its consumer, paused while more than
  :data:`HIGH_WATER` bytes wait.
- an :class:`ObjectWriter` itself (``store.put_writer(name)``): the consumer any
  :class:`~twisted.internet.interfaces.IPushProducer` or pull producer registers with,
  or that the caller ``write()``s to.

At most about :data:`HIGH_WATER` bytes (plus one read ahead) wait in a source.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IConsumer, IPullProducer, IPushProducer, IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer

from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError, ObjectStoreError

__all__ = ["HIGH_WATER", "READ_BLOCK", "ObjectWriter", "PieceSource", "source_for"]

#: Bytes a file object is read by per thread call (rounded down to whole chunks).
READ_BLOCK = 1024 * 1024
#: Bytes a writer or producer source holds before it pauses its producer.
HIGH_WATER = 4 * 1024 * 1024


class PieceSource(Protocol):
    """The chunks of one object, in order."""

    async def next(self) -> bytes:
        """The next chunk, or ``b""`` at the end."""
        ...

    def abort(self, reason: BaseException) -> None:
        """The put failed: stop producing (nothing more will be read)."""
        ...


def _as_bytes(piece: object, what: str) -> bytes:
    if type(piece) is bytes:
        return piece
    if isinstance(piece, (bytes, bytearray, memoryview)):
        return bytes(piece)
    raise InvalidArgumentTypeError(f"{what} gave {type(piece).__name__}, not bytes")


class _BytesSource:
    def __init__(self, data: bytes | bytearray | memoryview, chunk_size: int) -> None:
        view = memoryview(data)
        self._view = (view if view.c_contiguous else memoryview(view.tobytes())).cast("B")
        self._offset = 0
        self._chunk = chunk_size

    async def next(self) -> bytes:
        start = self._offset
        piece = bytes(self._view[start:start + self._chunk])
        self._offset = start + len(piece)
        return piece

    def abort(self, reason: BaseException) -> None:
        self._offset = len(self._view)


class _Rechunker:
    """Cut pieces of any size from ``pull()`` (``b""`` at the end) into chunks."""

    def __init__(self, chunk_size: int, pull: Callable[[], Deferred[bytes]]) -> None:
        self._chunk = chunk_size
        self._pull = pull
        self._buf = bytearray()
        self._eof = False

    async def next(self) -> bytes:
        n = self._chunk
        buf = self._buf
        while len(buf) < n and not self._eof:
            piece = await self._pull()
            if not piece:
                self._eof = True
            elif not buf and len(piece) == n:
                return piece  # the common case: no copy
            else:
                buf += piece
        out = bytes(buf[:n])
        del buf[:n]
        return out


class _FileSource(_Rechunker):
    """Read a binary file object in a thread (in place if there is no thread pool)."""

    def __init__(self, f: Any, chunk_size: int, reactor: object) -> None:
        super().__init__(chunk_size, self._take)
        self._read = f.read
        self._block = max(chunk_size, READ_BLOCK // chunk_size * chunk_size)
        inline = isinstance(f, io.BytesIO) or not IReactorThreads.providedBy(reactor)
        self._threads: Any = None if inline else reactor
        self._ahead: Deferred[bytes] | None = None
        self._done = False

    def _start_read(self) -> Deferred[bytes]:
        if self._done:
            return succeed(b"")
        if self._threads is None:
            try:
                return succeed(_as_bytes(self._read(self._block), "data.read()"))
            except Exception as e:  # the put fails with it
                return _failed(e)
        pool = self._threads.getThreadPool()
        return deferToThreadPool(self._threads, pool, self._read, self._block).addCallback(
            _as_bytes, "data.read()"
        )

    def _take(self) -> Deferred[bytes]:
        d = self._ahead if self._ahead is not None else self._start_read()
        self._ahead = None

        def got(piece: bytes) -> bytes:
            if not piece:
                self._done = True
            else:
                self._ahead = self._start_read()  # one read ahead
            return piece

        return d.addCallback(got)

    def abort(self, reason: BaseException) -> None:
        self._done = True
        if self._ahead is not None:
            self._ahead.addErrback(lambda _: None)
            self._ahead = None


def _failed(e: BaseException) -> Deferred[bytes]:
    d: Deferred[bytes] = Deferred()
    d.errback(Failure(e))
    return d


class _IterSource(_Rechunker):
    def __init__(self, it: AsyncIterator[Any], chunk_size: int) -> None:
        super().__init__(chunk_size, self._take)
        self._it = it

    def _take(self) -> Deferred[bytes]:
        async def one() -> bytes:
            try:
                piece = await self._it.__anext__()
            except StopAsyncIteration:
                return b""
            return _as_bytes(piece, "the async iterator")

        return Deferred.fromCoroutine(one())

    def abort(self, reason: BaseException) -> None:
        close = getattr(self._it, "aclose", None)
        if close is not None:
            Deferred.fromCoroutine(close()).addErrback(lambda _: None)


@implementer(IConsumer)
class ObjectWriter:
    """A consumer (:class:`~twisted.internet.interfaces.IConsumer`) whose bytes become
    one object: from ``store.put_writer(name)``, or made by ``put()`` for a producer.

    Register a push producer (``registerProducer(p, True)``: paused while more than
    :data:`HIGH_WATER` bytes wait) or a pull producer (``False``: asked for more when
    the bytes run low), or ``write()`` directly, waiting for :meth:`room` between
    writes. :meth:`close` ends the object; :attr:`done` fires with its
    :class:`~txnats.jetstream.object_store.ObjectInfo` once stored, or fails.
    :meth:`abort` gives up (nothing is stored; chunks already sent are purged).
    """

    def __init__(self, chunk_size: int) -> None:
        self._chunk = chunk_size
        self._pieces: deque[bytes] = deque()
        self._buffered = 0
        self._closed = False
        self._error: BaseException | None = None
        self._want: Deferred[bytes] | None = None
        self._room: list[Deferred[None]] = []
        self._producer: Any = None
        self._streaming = False
        self._paused = False
        self._rechunk = _Rechunker(chunk_size, self._take)
        #: Fires with the stored object's info, or fails (set by the store).
        self.done: Deferred[Any] = Deferred()

    # ------------------------------------------------------------------ IConsumer
    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self._producer is not None:
            raise ObjectStoreError("a producer is registered already")
        self._producer, self._streaming = producer, bool(streaming)
        if self._streaming and self._buffered >= HIGH_WATER:
            self._pause()
        elif not self._streaming and self._want is not None:
            producer.resumeProducing()

    def unregisterProducer(self) -> None:
        self._producer = None
        self._paused = False

    def write(self, data: bytes) -> None:
        """Add bytes to the object (raises after :meth:`close` or a failure)."""
        if self._closed or self._error is not None:
            raise ObjectStoreError("the object writer is closed")
        piece = _as_bytes(data, "write()")
        if not piece:
            return
        if self._want is not None and not self._pieces:
            d, self._want = self._want, None
            d.callback(piece)
            return
        self._pieces.append(piece)
        self._buffered += len(piece)
        if self._buffered >= HIGH_WATER and self._streaming:
            self._pause()

    # ------------------------------------------------------------------ the caller
    def room(self) -> Deferred[None]:
        """Fires once fewer than :data:`HIGH_WATER` bytes wait to be sent."""
        if self._buffered < HIGH_WATER or self._error is not None:
            return succeed(None)
        d: Deferred[None] = Deferred(self._room.remove)
        self._room.append(d)
        return d

    def close(self) -> Deferred[Any]:
        """No more bytes: the object is complete. Returns :attr:`done`."""
        self._closed = True
        if self._want is not None and not self._pieces:
            d, self._want = self._want, None
            d.callback(b"")
        return self.done

    def abort(self, reason: BaseException | None = None) -> None:
        """Give up on this object; :attr:`done` fails with ``reason``."""
        self._fail(reason or ObjectStoreError("the object writer was aborted"))

    @property
    def failed(self) -> bool:
        """True once the object failed or was aborted."""
        return self._error is not None

    def _pause(self) -> None:
        if not self._paused and self._producer is not None:
            self._paused = True
            self._producer.pauseProducing()

    # ------------------------------------------------------------------ PieceSource
    async def next(self) -> bytes:
        return await self._rechunk.next()

    def _take(self) -> Deferred[bytes]:
        if self._error is not None:
            return _failed(self._error)
        if self._pieces:
            piece = self._pieces.popleft()
            self._buffered -= len(piece)
            self._drained()
            return succeed(piece)
        if self._closed:
            return succeed(b"")
        self._want = Deferred()
        if self._producer is not None and not self._streaming:
            self._producer.resumeProducing()
        self._drained()
        return self._want

    def _drained(self) -> None:
        if self._buffered >= HIGH_WATER // 2:
            return
        if self._paused and self._producer is not None:
            self._paused = False
            self._producer.resumeProducing()
        if self._room:
            waiters, self._room = self._room, []
            for w in waiters:
                w.callback(None)

    def _fail(self, reason: BaseException) -> None:
        if self._error is not None:
            return
        self._error = reason
        self._pieces.clear()
        self._buffered = 0
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.stopProducing()
        if self._want is not None:
            d, self._want = self._want, None
            d.errback(Failure(reason))
        for w in self._room:
            w.callback(None)
        self._room = []

    def abort_source(self, reason: BaseException) -> None:
        """The put failed (the store calls this): stop the producer, refuse writes."""
        self._fail(reason)


class _WriterSource:
    """A :class:`PieceSource` over an :class:`ObjectWriter`."""

    def __init__(self, writer: ObjectWriter) -> None:
        self._writer = writer

    async def next(self) -> bytes:
        return await self._writer.next()

    def abort(self, reason: BaseException) -> None:
        self._writer.abort_source(reason)


def source_for(data: Any, chunk_size: int, reactor: object) -> PieceSource:
    """The :class:`PieceSource` for what ``put()`` was given; raises
    :class:`InvalidArgumentTypeError` for anything else."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return _BytesSource(data, chunk_size)
    if isinstance(data, ObjectWriter):
        return _WriterSource(data)
    if IBodyProducer.providedBy(data):
        writer = ObjectWriter(chunk_size)
        writer.registerProducer(data, True)
        body: Any = data  # IBodyProducer's methods are untyped
        started: Deferred[object] = body.startProducing(writer)

        def finished(_: object) -> None:
            writer.unregisterProducer()
            if not writer.failed:
                writer.close()

        def failed(f: Failure) -> None:
            writer.abort_source(f.value or ObjectStoreError("the producer failed"))

        started.addCallbacks(finished, failed)
        return _WriterSource(writer)
    if hasattr(data, "__aiter__"):
        return _IterSource(data.__aiter__(), chunk_size)
    if callable(getattr(data, "read", None)):
        return _FileSource(data, chunk_size, reactor)
    if IPushProducer.providedBy(data) or IPullProducer.providedBy(data):
        raise InvalidArgumentTypeError(
            "a push or pull producer has no way to start: register it with "
            "store.put_writer(name) instead (or give an IBodyProducer)"
        )
    raise InvalidArgumentError(
        "data must be bytes, a binary file object, an async iterator of bytes, an "
        f"IBodyProducer or an ObjectWriter, not {type(data).__name__}"
    )
