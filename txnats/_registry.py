"""The client's subscriptions: the registry by sid, delivery of parsed messages to their
mailboxes, and what a subscription asks of its client (a
:class:`~txnats.subscription.SubscriptionHost`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from txnats.connection import NatsProtocol
from txnats.errors import ConnectionClosedError, NatsError, PermissionViolationError
from txnats.protocol.commands import encode_sub, encode_unsub
from txnats.protocol.events import Msg
from txnats.subscription import Responder, Subscription

__all__ = ["Subscriptions"]

#: The subscription internals this module uses, declared by :class:`_Mailbox`.
HOUSE_PRIVATE_OK = {"_enqueue", "_input_done", "_close", "_finish", "_begin_drain"}


class _Mailbox(Protocol):
    """What the registry calls on a :class:`Subscription` (not part of its public API)."""

    def _enqueue(self, msg: Msg) -> None: ...
    def _input_done(self) -> None: ...
    def _close(self, reason: NatsError) -> None: ...
    def _finish(self, reason: NatsError) -> None: ...
    def _begin_drain(self) -> None: ...


class Subscriptions:
    """One client's subscriptions (the host every one of them talks to)."""

    def __init__(
        self,
        clock: IReactorTime,
        schedule: Callable[..., None],
        report: Callable[[Exception], None],
        responder: Responder,
        current: Callable[[], NatsProtocol | None],
    ) -> None:
        #: The clock subscriptions time their waits with.
        self.clock = clock
        #: Run a function in a later batch (:meth:`txnats._turns.Turns.schedule`).
        self.schedule = schedule
        #: Report an asynchronous error to the client's ``error_cb``.
        self.report = report
        #: What a delivered message's ``respond()`` publishes through.
        self.responder = responder
        self._current = current
        #: Live subscriptions by sid.
        self.by_sid: dict[int, Subscription] = {}
        #: Subscriptions out of the registry (unsubscribed, drained, at max_msgs) that
        #: have not ended yet: their mailboxes may still hold messages.
        self.ending: dict[int, Subscription] = {}
        self._last_sid = 0
        # Back-pressure subscriptions whose mailbox is full (reading is paused).
        self._blocked: set[int] = set()
        #: Messages and payload bytes received.
        self.in_msgs = 0
        self.in_bytes = 0

    def next_sid(self) -> int:
        """The sid the next subscription will get (taken by :meth:`add`)."""
        return self._last_sid + 1

    def add(self, sub: Subscription) -> None:
        self._last_sid = sub.sid
        self.by_sid[sub.sid] = sub

    def all(self) -> list[Subscription]:
        return list(self.by_sid.values())

    # ------------------------------------------------------------------ delivery
    def deliver(self, msgs: list[Msg]) -> None:
        """Put messages in their subscriptions' mailboxes (called while parsing)."""
        subs = self.by_sid
        nbytes = 0
        last_sid = -1
        sub: Subscription | None = None
        for msg in msgs:
            nbytes += len(msg.data)
            sid = msg.sid
            if sid != last_sid:
                sub = subs.get(sid)
                last_sid = sid
            if sub is None:
                continue  # late message for a subscription that already ended
            sub._enqueue(msg)
            mx = sub.max_msgs
            if mx is not None and sub.received >= mx:
                sub._input_done()
                last_sid = -1  # it is gone from the registry now
        self.in_msgs += len(msgs)
        self.in_bytes += nbytes

    def frames(self) -> list[bytes]:
        """SUB (and UNSUB with what is left of max_msgs) for every live subscription."""
        frames = []
        for sub in self.by_sid.values():
            frames.append(encode_sub(sub.subject, sub.sid, sub.queue))
            if sub.max_msgs is not None:
                frames.append(encode_unsub(sub.sid, sub.max_msgs - sub.received))
        return frames

    def refused(self, error: PermissionViolationError) -> None:
        """The server refused a subscription: end the ones it names."""
        for sub in list(self.by_sid.values()):
            if sub.subject == error.subject and (
                f'"{sub.queue}"' in error.server_message if sub.queue else True
            ):
                self.schedule(sub._finish, error)

    def begin_drain(
        self, proto: NatsProtocol, later: frozenset[int] = frozenset()
    ) -> tuple[list[Subscription], list[Deferred[None]]]:
        """Unsubscribe every live subscription on ``proto`` but those whose sid is in
        ``later`` (reply inboxes, which must outlive the requests they answer), keeping
        what they hold.

        Returns them, and a Deferred per subscription to wait for (those already
        ending included), each fired when it has ended.
        """
        subs = [s for s in self.by_sid.values() if s.sid not in later]
        ending = [s for s in self.ending.values() if s.sid not in later]
        ended = [s.when_ended() for s in [*subs, *ending]]
        for s in subs:
            s._begin_drain()
            proto.write(encode_unsub(s.sid))
        return subs, ended

    def input_done(self, subs: list[Subscription]) -> None:
        """The server has seen the drain's UNSUBs: no more input for ``subs``."""
        for sub in subs:
            sub._input_done()

    def close_all(self, reason: ConnectionClosedError) -> None:
        """End every subscription not ended yet, discarding what it holds."""
        for sub in [*self.by_sid.values(), *self.ending.values()]:
            sub._close(reason)
        self.by_sid.clear()
        self.ending.clear()

    # ------------------------------------------------------------------ SubscriptionHost
    def forget(self, sub: Subscription) -> None:
        """``sub`` gets no more messages; until it has ended it stays in :attr:`ending`
        (a close must end it too: its mailbox may still hold messages)."""
        if self.by_sid.get(sub.sid) is sub:
            del self.by_sid[sub.sid]
        if sub.is_active:
            self.ending[sub.sid] = sub
        elif self.ending.get(sub.sid) is sub:
            del self.ending[sub.sid]

    def owns(self, sub: Subscription) -> bool:
        """True for a subscription of this client that has not ended."""
        return self.by_sid.get(sub.sid) is sub or self.ending.get(sub.sid) is sub

    def send_unsub(self, sub: Subscription, max_msgs: int | None) -> None:
        proto = self._current()
        if proto is not None:
            proto.write(encode_unsub(sub.sid, max_msgs))

    def drain_subscription(self, sub: Subscription) -> None:
        proto = self._current()
        if proto is None:
            sub._input_done()
            return
        proto.write(encode_unsub(sub.sid))
        proto.ping().addCallbacks(
            lambda _: sub._input_done(),
            lambda f: sub._close(ConnectionClosedError("connection lost while draining")),
        )

    def backpressure(self, sub: Subscription, full: bool) -> None:
        if full:
            self._blocked.add(sub.sid)
        else:
            self._blocked.discard(sub.sid)
        self.apply_backpressure(self._current())

    def apply_backpressure(self, proto: NatsProtocol | None) -> None:
        """Pause reading on ``proto`` while a back-pressure mailbox is full."""
        if proto is None:
            return
        if self._blocked:
            proto.pause_reading()
        else:
            proto.resume_reading()

    def connection_gone(self) -> None:
        """The connection was lost: nothing is paused any more."""
        self._blocked.clear()
