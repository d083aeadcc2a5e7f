"""An object's bytes (ADR-20): sent as chunks under a window of acknowledgements, read
back with an ordered consumer, checked against the object's size, count and digest.

The object store (:mod:`txnats.jetstream.object_store`) builds on it; it needs nothing
of the store at run time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

from txnats.errors import (
    DigestMismatchError,
    InvalidArgumentError,
    NatsError,
    ObjectStoreError,
    OutboundBufferFullError,
    TooManyStalledMsgsError,
)
from txnats.jetstream.msg import JsMsg
from txnats.jetstream.ordered import OrderedConsumer

if TYPE_CHECKING:
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.context import JetStreamContext
    from txnats.jetstream.object_store import ObjectInfo

__all__ = [
    "ChunkReader",
    "ObjectData",
    "encode_digest",
    "nothing_to_deliver",
    "send_chunks",
    "verify",
]

_DIGEST_PREFIX = "SHA-256="


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


ObjectData = bytes | bytearray | memoryview | _Readable


def encode_digest(sha: bytes) -> str:
    """A SHA-256 as an object's digest: ``SHA-256=<padded base64 URL>``."""
    return _DIGEST_PREFIX + base64.urlsafe_b64encode(sha).decode()


def _decode_digest(digest: str) -> bytes:
    """The SHA-256 in ``SHA-256=<b64url>``; padding optional, the name any case."""
    algo, sep, value = digest.partition("=")
    if not sep or algo.upper() != "SHA-256":
        raise ObjectStoreError(f"object digest {digest!r} is not SHA-256=<base64>")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ObjectStoreError(f"object digest {digest!r} is not valid base64") from None
    if len(raw) != 32:
        raise ObjectStoreError(f"object digest {digest!r} is not 32 bytes")
    return raw


class _Window:
    """One put's unacknowledged chunk publishes: how many, the first failure, a waiter."""

    def __init__(self, limit: int, schedule: Callable[[Callable[[], None]], None]) -> None:
        self.limit = limit
        self.pending = 0
        self.error: Failure | None = None
        self._schedule = schedule
        self._waiter: Deferred[None] | None = None
        self._upto = 0  # the waiter fires once pending <= this

    def add(self, d: Deferred[Any]) -> None:
        self.pending += 1
        d.addBoth(self._done)

    def _ready(self) -> bool:
        # Waiting for room ends early on a failure; waiting for none pending does not.
        return self.pending <= self._upto or (self.error is not None and self._upto > 0)

    def _done(self, result: object) -> None:
        self.pending -= 1
        if isinstance(result, Failure) and self.error is None:
            self.error = result
        if self._waiter is not None and self._ready():
            d, self._waiter = self._waiter, None
            # Not from inside the acknowledgement's callbacks: the put goes on soon.
            self._schedule(lambda: None if d.called else d.callback(None))

    def _wait(self, upto: int) -> Deferred[None]:
        self._upto = upto
        if self._ready():
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._waiter = d
        return d

    def room(self) -> Deferred[None]:
        """Fires once fewer than ``limit`` are pending (or one failed)."""
        return self._wait(self.limit - 1)

    def drained(self) -> Deferred[None]:
        """Fires once none is pending."""
        return self._wait(0)


async def send_chunks(
    js: JetStreamContext, subject: str, data: ObjectData, chunk_size: int, window_size: int
) -> tuple[int, int, bytes]:
    """Publish ``data`` to ``subject`` in chunks of ``chunk_size`` bytes, at most
    ``window_size`` of them awaiting their acknowledgement at once; return the size, the
    number of chunks and the SHA-256. On any failure, wait until none is pending (so that
    nothing lands after the caller's purge) and raise it."""
    client = js.client
    window = _Window(window_size, client.schedule)
    h = hashlib.sha256()
    size = chunks = 0
    read: Callable[[int], object]
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        view = (view if view.c_contiguous else memoryview(view.tobytes())).cast("B")
        offset = 0

        def read_view(n: int) -> bytes:
            nonlocal offset
            piece = bytes(view[offset:offset + n])
            offset += len(piece)
            return piece

        read = read_view
    else:
        read = data.read
    try:
        while True:
            got = read(chunk_size)
            if type(got) is bytes:
                piece = got
            elif isinstance(got, (bytes, bytearray, memoryview)):
                piece = bytes(got)
            else:
                raise InvalidArgumentError(
                    f"data.read() returned {type(got).__name__}, not bytes"
                )
            if not piece:
                break
            h.update(piece)
            size += len(piece)
            chunks += 1
            while True:
                await window.room()
                if window.error is not None:
                    window.error.raiseException()
                await js.publish_async_room()
                try:
                    window.add(js.publish_async(subject, piece))
                    break
                except TooManyStalledMsgsError:
                    continue  # another publisher took the room first
                except OutboundBufferFullError:
                    room = client.wait_for_room()
                    if room.called:  # disconnected, reconnect buffer full: give up
                        raise
                    await room
        await window.drained()
        if window.error is not None:
            window.error.raiseException()
    except BaseException:
        await window.drained()  # nothing may land after the purge
        raise
    return size, chunks, h.digest()


def nothing_to_deliver(cinfo: ConsumerInfo) -> bool:
    """Whether a new consumer's info says it has nothing pending and delivered nothing
    (so no message will come: deliveries may overtake the create answer, hence both)."""
    return cinfo.num_pending == 0 and cinfo.delivered.consumer_seq == 0


def verify(info: ObjectInfo, data: bytes, h: Any, count: int) -> None:
    """Check an object's bytes (``h`` their SHA-256 so far) and chunk count against
    its metadata; :class:`DigestMismatchError` (or :class:`ObjectStoreError`) if not."""
    if count != info.chunks:
        raise DigestMismatchError(
            f"object {info.name!r}: {count} chunks stored, its metadata says {info.chunks}"
        )
    if len(data) != info.size:
        raise DigestMismatchError(
            f"object {info.name!r}: {len(data)} bytes stored, its metadata says {info.size}"
        )
    if not info.digest:
        if info.size:
            raise ObjectStoreError(f"object {info.name!r} has no digest in its metadata")
        return
    if h.digest() != _decode_digest(info.digest):
        raise DigestMismatchError(f"object {info.name!r}: SHA-256 does not match its digest")


class ChunkReader:
    """Read one object's chunks with an ordered consumer; check and join them."""

    def __init__(
        self, js: JetStreamContext, stream: str, subject: str, info: ObjectInfo
    ) -> None:
        self.info = info
        self.parts: list[bytes] = []
        self.h = hashlib.sha256()
        self.done: Deferred[bytes] = Deferred(self._cancel)
        self.consumer = OrderedConsumer(
            js, stream, self._on_msg, filter_subjects=[subject], on_error=self._fail,
        )

    def start(self) -> Deferred[bytes]:
        self.consumer.start().addCallbacks(self._started, self._start_failed)
        return self.done

    def _cancel(self, _: object) -> None:
        self.consumer.stop()

    def _started(self, cinfo: ConsumerInfo) -> None:
        if not self.done.called and not self.parts and nothing_to_deliver(cinfo):
            self._finish()

    def _start_failed(self, f: Failure) -> None:
        if not self.done.called:
            self.done.errback(f)

    def _on_msg(self, msg: JsMsg) -> None:
        parts = self.parts
        data = msg.data
        parts.append(data)
        self.h.update(data)
        if msg.metadata.num_pending == 0 or len(parts) > self.info.chunks:
            self._finish()

    def _finish(self) -> None:
        self.consumer.stop()
        if self.done.called:
            return
        count = len(self.parts)
        data = b"".join(self.parts)
        self.parts = []
        try:
            verify(self.info, data, self.h, count)
        except NatsError as e:
            self.done.errback(Failure(e))
            return
        self.done.callback(data)

    def _fail(self, e: NatsError) -> None:
        if not self.done.called:
            self.done.errback(Failure(e))
