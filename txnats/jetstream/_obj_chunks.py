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
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorThreads, IReactorTime
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure

from txnats.errors import (
    DigestMismatchError,
    ObjectStoreError,
    OutboundBufferFullError,
    TooManyStalledMsgsError,
)

if TYPE_CHECKING:
    from txnats.jetstream._obj_info import ObjectInfo
    from txnats.jetstream._obj_put import PieceSource
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.context import JetStreamContext

__all__ = [
    "Hasher",
        "encode_digest",
    "nothing_to_deliver",
    "send_chunks",
    "verify",
]

_DIGEST_PREFIX = "SHA-256="


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


#: Bytes a :class:`Hasher` may have waiting before its user waits for it.
HASH_BACKLOG = 4 * 1024 * 1024


class Hasher:
    """The SHA-256 of a sequence of pieces, computed in order in the reactor's thread
    pool (in place without one): hashing hundreds of MiB would otherwise hold the
    reactor thread for as long (hashlib lets other threads run meanwhile)."""

    def __init__(
        self, reactor: object, on_progress: Callable[[], object] | None = None
    ) -> None:
        self._h = hashlib.sha256()
        self._threads: Any = reactor if IReactorThreads.providedBy(reactor) else None
        self._on_progress = on_progress
        self._pending: list[bytes] = []
        self._running = False
        self._error: Failure | None = None
        self._idle: list[Deferred[None]] = []
        self._room: list[Deferred[None]] = []
        #: Bytes given and not hashed yet (they stay referenced until then).
        self.backlog = 0
        self._in_batch = 0

    def update(self, piece: bytes) -> None:
        if self._threads is None:
            self._h.update(piece)
            return
        self._pending.append(piece)
        self.backlog += len(piece)
        if not self._running:
            self._run()

    def room(self) -> Deferred[None]:
        """Fires once the backlog is below :data:`HASH_BACKLOG` bytes."""
        if self.backlog < HASH_BACKLOG:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._room.append(d)
        return d

    def _run(self) -> None:
        batch, self._pending = self._pending, []
        self._in_batch = sum(len(p) for p in batch)
        self._running = True
        deferToThreadPool(
            self._threads, self._threads.getThreadPool(), self._hash_all, batch
        ).addBoth(self._ran)

    def _hash_all(self, batch: list[bytes]) -> None:
        update = self._h.update
        for piece in batch:
            update(piece)

    def _ran(self, result: object) -> None:
        self.backlog -= self._in_batch
        if isinstance(result, Failure) and self._error is None:
            self._error = result
        # One batch at a time, in order: start the next before waking anyone (a
        # waiter may give more pieces at once).
        if self._pending:
            self._run()
        else:
            self._running = False
        if self._room and self.backlog < HASH_BACKLOG:
            waiters, self._room = self._room, []
            for r in waiters:
                r.callback(None)
        if self._on_progress is not None:
            self._on_progress()
        if not self._running and not self._pending and self._idle:
            idle, self._idle = self._idle, []
            for d in idle:
                d.callback(None)

    def digest(self) -> Deferred[bytes]:
        """The digest of every piece given so far, once they are all hashed."""

        def done(_: object) -> bytes:
            if self._error is not None:
                self._error.raiseException()
            return self._h.digest()

        if not self._running and not self._pending:
            return succeed(None).addCallback(done)
        d: Deferred[None] = Deferred()
        self._idle.append(d)
        return d.addCallback(done)


#: The longest a put works without letting the reactor run (seconds).
TURN_SECONDS = 0.004


def _next_turn(clock: IReactorTime) -> Deferred[None]:
    d: Deferred[None] = Deferred()
    clock.callLater(0, d.callback, None)
    return d


async def send_chunks(
    js: JetStreamContext, subject: str, source: PieceSource, window_size: int
) -> tuple[int, int, bytes]:
    """Publish the chunks ``source`` gives to ``subject``, at most ``window_size`` of
    them awaiting their acknowledgement at once; return the size, the number of chunks
    and the SHA-256. On any failure, stop the source, wait until none is pending (so
    that nothing lands after the caller's purge) and raise it."""
    client = js.client
    clock = client.clock
    window = _Window(window_size, client.schedule)
    h = Hasher(clock)
    size = chunks = 0
    turn_began = clock.seconds()
    try:
        while True:
            piece = await source.next()
            if not piece:
                break
            if clock.seconds() - turn_began > TURN_SECONDS:
                # Framing and sending chunks ready at once (a window's worth) is CPU
                # work: let the reactor run between slices of it.
                await _next_turn(clock)
                turn_began = clock.seconds()
            if h.backlog >= HASH_BACKLOG:
                await h.room()
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
        sha = await h.digest()
    except BaseException as e:
        source.abort(e)
        await window.drained()  # nothing may land after the purge
        raise
    return size, chunks, sha


def nothing_to_deliver(cinfo: ConsumerInfo) -> bool:
    """Whether a new consumer's info says it has nothing pending and delivered nothing
    (so no message will come: deliveries may overtake the create answer, hence both)."""
    return cinfo.num_pending == 0 and cinfo.delivered.consumer_seq == 0


def verify(info: ObjectInfo, size: int, sha: bytes, count: int) -> None:
    """Check an object's bytes (``h`` their SHA-256 so far) and chunk count against
    its metadata; :class:`DigestMismatchError` (or :class:`ObjectStoreError`) if not."""
    if count != info.chunks:
        raise DigestMismatchError(
            f"object {info.name!r}: {count} chunks stored, its metadata says {info.chunks}"
        )
    if size != info.size:
        raise DigestMismatchError(
            f"object {info.name!r}: {size} bytes stored, its metadata says {info.size}"
        )
    if not info.digest:
        if info.size:
            raise ObjectStoreError(f"object {info.name!r} has no digest in its metadata")
        return
    if sha != _decode_digest(info.digest):
        raise DigestMismatchError(f"object {info.name!r}: SHA-256 does not match its digest")
