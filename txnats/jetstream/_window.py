"""The window of ``publish_async``: how many publishes may await their acknowledgement,
the calls waiting for room (stalled), and who waits for room or for completion.

The context checks a call's arguments and builds its headers; :class:`PublishWindow`
sends it through the :class:`~txnats.jetstream._acks.AckInbox` when the window has
room, or holds it (in call order, for at most its ``stall_wait``) until it has.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall

from txnats._args import check_count, check_delay
from txnats.errors import TooManyStalledMsgsError
from txnats.jetstream._acks import AckInbox, _AckHost
from txnats.jetstream.config import PubAck
from txnats.protocol.headers import HeaderInput

if TYPE_CHECKING:
    from txnats.client import Client

__all__ = ["PublishWindow"]


class _Stalled:
    """A publish_async call waiting for room in the window."""

    __slots__ = ("d", "data", "hdrs", "sent", "subject", "timer")

    def __init__(self, subject: str, data: bytes, hdrs: HeaderInput | None) -> None:
        self.subject = subject
        self.data = data
        self.hdrs = hdrs
        self.d: Deferred[PubAck] = Deferred()
        self.timer: IDelayedCall | None = None
        self.sent: Deferred[PubAck] | None = None


class PublishWindow:
    """At most ``max_pending`` publishes awaiting their acknowledgement; calls beyond
    wait up to their ``stall_wait`` for room, oldest first."""

    def __init__(self, host: _AckHost, max_pending: int, stall_wait: float) -> None:
        self._host = host
        self._max = check_count("publish_async_max_pending", max_pending)
        self._low_water = max_pending // 2
        self._stall_wait = check_delay("publish_async_stall_wait", stall_wait)
        self._pending = 0
        self._room_waiters: list[Deferred[None]] = []
        self._complete_waiters: list[Deferred[None]] = []
        self._notify_due = False
        self._acks: AckInbox | None = None
        #: Calls waiting for room, in call order.
        self._stalled: deque[_Stalled] = deque()

    @property
    def _client(self) -> Client:
        return self._host.client

    # ------------------------------------------------------------------ options
    @property
    def max_pending(self) -> int:
        return self._max

    @max_pending.setter
    def max_pending(self, value: int) -> None:
        self._max = check_count("publish_async_max_pending", value)
        self._low_water = value // 2

    @property
    def stall_wait(self) -> float:
        return self._stall_wait

    @stall_wait.setter
    def stall_wait(self, value: float) -> None:
        self._stall_wait = check_delay("publish_async_stall_wait", value)

    @property
    def pending(self) -> int:
        """Publishes sent whose acknowledgement has not come yet."""
        return self._pending

    @property
    def waiting(self) -> int:
        """Calls waiting for room, and waiters of :meth:`room` and :meth:`complete`."""
        return len(self._stalled) + len(self._room_waiters) + len(self._complete_waiters)

    # ------------------------------------------------------------------ publishing
    def publish(
        self, subject: str, data: bytes, hdrs: HeaderInput | None, stall_wait: float | None
    ) -> Deferred[PubAck]:
        """Send now if there is room and nobody waits; else wait (``stall_wait``
        checked by the caller; ``None``: the window's)."""
        if self._pending >= self._max or self._stalled:
            return self._stall(subject, data, hdrs,
                               self._stall_wait if stall_wait is None else stall_wait)
        return self._send(subject, data, hdrs)

    def _send(self, subject: str, data: bytes, hdrs: HeaderInput | None) -> Deferred[PubAck]:
        acks = self._acks
        if acks is None:
            acks = self._acks = AckInbox(self._host, self._done)
        self._pending += 1  # the inbox calls _done when it ends
        try:
            return acks.publish(subject, data, hdrs)
        except BaseException:
            self._pending -= 1  # refused by the client: nothing was sent
            raise

    def _stall(
        self, subject: str, data: bytes, hdrs: HeaderInput | None, wait: float
    ) -> Deferred[PubAck]:
        """Queue a call until there is room, for at most ``wait`` seconds."""
        if wait <= 0:
            return fail(TooManyStalledMsgsError(
                f"{self._pending} publishes await their acknowledgement"
            ))
        entry = _Stalled(subject, data, hdrs)

        def cancel(_: Deferred[PubAck]) -> None:
            if entry.sent is not None:  # sent already: cancel its wait for the ack
                entry.sent.cancel()
                return
            self._stalled.remove(entry)
            if entry.timer is not None and entry.timer.active():
                entry.timer.cancel()

        def expire() -> None:
            self._stalled.remove(entry)
            entry.d.errback(TooManyStalledMsgsError(
                f"no room for {wait}s: {self._pending} publishes await their acknowledgement"
            ))

        entry.d = Deferred(cancel)
        entry.timer = self._client.clock.callLater(wait, expire)
        self._stalled.append(entry)
        return entry.d

    def _release_stalled(self) -> None:
        """Send the waiting calls, oldest first, while there is room."""
        while self._stalled and self._pending < self._max:
            entry = self._stalled.popleft()
            if entry.timer is not None and entry.timer.active():
                entry.timer.cancel()
            try:
                sent = self._send(entry.subject, entry.data, entry.hdrs)
            except Exception as e:  # the client refused it (closed, buffer full, ...)
                entry.d.errback(e)
                continue
            entry.sent = sent
            sent.chainDeferred(entry.d)

    def _done(self) -> None:
        """One publish ended (acknowledged, refused, timed out or cancelled)."""
        self._pending -= 1
        if (
            (self._complete_waiters and not self._pending)
            or (self._room_waiters and self._pending <= self._low_water)
            or self._stalled
        ) and not self._notify_due:
            # Waiters run once this acknowledgement's own callbacks (the caller's,
            # added to the Deferred we returned) have run, not in the middle of them.
            self._notify_due = True
            self._client.schedule(self._notify_waiters)

    def _notify_waiters(self) -> None:
        self._notify_due = False
        if self._stalled:
            self._release_stalled()
        if self._room_waiters and self._pending <= self._low_water:
            waiters, self._room_waiters = self._room_waiters, []
            for w in waiters:
                w.callback(None)
        if self._complete_waiters and not self._pending:
            waiters, self._complete_waiters = self._complete_waiters, []
            for w in waiters:
                w.callback(None)

    # ------------------------------------------------------------------ waiting
    def room(self) -> Deferred[None]:
        """At once if a call would be sent now; else once no more than half the window
        awaits acknowledgement."""
        if self._pending < self._max and not self._stalled:
            return succeed(None)
        d: Deferred[None] = Deferred(self._room_waiters.remove)
        self._room_waiters.append(d)
        return d

    def complete(self) -> Deferred[None]:
        """Once every publish so far has its acknowledgement (or failed)."""
        if not self._pending:
            return succeed(None)
        d: Deferred[None] = Deferred(self._complete_waiters.remove)
        self._complete_waiters.append(d)
        return d
