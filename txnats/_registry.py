"""The client's subscriptions: the registry by sid, delivery of parsed messages to their
mailboxes, and what a subscription asks of its client (a
:class:`~txnats.subscription.SubscriptionHost`).
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from txnats.connection import NatsProtocol
from txnats.errors import ConnectionClosedError, PermissionViolationError
from txnats.protocol.commands import encode_sub, encode_unsub
from txnats.protocol.events import Msg, Respond
from txnats.subscription import Control, Subscription

__all__ = ["Subscriptions"]

class Subscriptions:
    """One client's subscriptions (the host every one of them talks to)."""

    def __init__(
        self,
        clock: IReactorTime,
        schedule: Callable[..., None],
        report: Callable[[Exception], None],
        responder: Respond,
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
        #: Live subscriptions by sid, as the controls each handed over when it was made.
        self.by_sid: dict[int, Control] = {}
        #: Subscriptions out of the registry (unsubscribed, drained, at max_msgs) that
        #: have not ended yet: their mailboxes may still hold messages.
        self.ending: dict[int, Control] = {}
        # Who wants to hear of each message a subscription drops (the request inbox).
        self._drop_watchers: dict[int, Callable[[Msg], None]] = {}
        self._last_sid = 0
        # Back-pressure subscriptions whose mailbox is full (reading is paused).
        self._blocked: set[int] = set()
        #: Messages and payload bytes received.
        self.in_msgs = 0
        self.in_bytes = 0

    def next_sid(self) -> int:
        """The sid the next subscription will get (taken by :meth:`add`)."""
        return self._last_sid + 1

    def add(self, control: Control) -> None:
        """A new subscription registers itself, with the controls it is driven by."""
        sid = control.sub.sid
        self._last_sid = sid
        self.by_sid[sid] = control

    def all(self) -> list[Subscription]:
        """The live subscriptions."""
        return [c.sub for c in self.by_sid.values()]

    def _control(self, sub: Subscription) -> Control | None:
        """``sub``'s controls, if it is still this registry's."""
        c = self.by_sid.get(sub.sid) or self.ending.get(sub.sid)
        return c if c is not None and c.sub is sub else None

    def watch_drops(self, sub: Subscription, fn: Callable[[Msg], None]) -> None:
        """Call ``fn(msg)`` for each message ``sub`` drops over its pending limits."""
        self._drop_watchers[sub.sid] = fn

    # ------------------------------------------------------------------ delivery
    def deliver(self, msgs: list[Msg]) -> None:
        """Put messages in their subscriptions' mailboxes (called while parsing)."""
        controls = self.by_sid
        nbytes = 0
        last_sid = -1
        c: Control | None = None
        for msg in msgs:
            nbytes += len(msg.data)
            sid = msg.sid
            if sid != last_sid:
                # A run of messages for one subscription: look it up once.
                c = controls.get(sid)
                last_sid = sid
                if c is not None:
                    enqueue, sub = c.enqueue, c.sub
            if c is None:
                continue  # late message for a subscription that already ended
            enqueue(msg)
            mx = sub.max_msgs
            if mx is not None and sub.received >= mx:
                c.input_done()
                last_sid = -1  # it is gone from the registry now
        self.in_msgs += len(msgs)
        self.in_bytes += nbytes

    def frames(self) -> list[bytes]:
        """SUB (and UNSUB with what is left of max_msgs) for every live subscription."""
        frames = []
        for sub in self.all():
            frames.append(encode_sub(sub.subject, sub.sid, sub.queue))
            if sub.max_msgs is not None:
                frames.append(encode_unsub(sub.sid, sub.max_msgs - sub.received))
        return frames

    def refused(self, error: PermissionViolationError) -> None:
        """The server refused a subscription: end the ones it names."""
        for c in list(self.by_sid.values()):
            sub = c.sub
            if sub.subject == error.subject and (
                f'"{sub.queue}"' in error.server_message if sub.queue else True
            ):
                self.schedule(c.finish, error)

    def begin_drain(
        self, proto: NatsProtocol, later: frozenset[int] = frozenset()
    ) -> tuple[list[Subscription], list[Deferred[None]]]:
        """Unsubscribe every live subscription on ``proto`` but those whose sid is in
        ``later`` (reply inboxes, which must outlive the requests they answer), keeping
        what they hold.

        Returns them, and a Deferred per subscription to wait for (those already
        ending included), each fired when it has ended.
        """
        live = [c for sid, c in self.by_sid.items() if sid not in later]
        ending = [c for sid, c in self.ending.items() if sid not in later]
        ended = [c.sub.when_ended() for c in [*live, *ending]]
        for c in live:
            c.begin_drain()
            proto.write(encode_unsub(c.sub.sid))
        return [c.sub for c in live], ended

    def input_done(self, subs: list[Subscription]) -> None:
        """The server has seen the drain's UNSUBs: no more input for ``subs``."""
        for sub in subs:
            c = self._control(sub)
            if c is not None:
                c.input_done()

    def close_all(self, reason: ConnectionClosedError) -> None:
        """End every subscription not ended yet, discarding what it holds."""
        for c in [*self.by_sid.values(), *self.ending.values()]:
            c.close(reason)
        self.by_sid.clear()
        self.ending.clear()
        self._drop_watchers.clear()

    # ------------------------------------------------------------------ SubscriptionHost
    def forget(self, sub: Subscription) -> None:
        """``sub`` gets no more messages; until it has ended it stays in :attr:`ending`
        (a close must end it too: its mailbox may still hold messages)."""
        c = self._control(sub)
        if c is None:
            return
        sid = sub.sid
        self.by_sid.pop(sid, None)
        if sub.is_active:
            self.ending[sid] = c
        else:
            self.ending.pop(sid, None)
            self._drop_watchers.pop(sid, None)

    def dropped(self, sub: Subscription, msg: Msg) -> None:
        """``sub`` dropped ``msg`` over its pending limits: tell who watches."""
        watcher = self._drop_watchers.get(sub.sid)
        if watcher is not None:
            watcher(msg)

    def owns(self, sub: Subscription) -> bool:
        """True for a subscription of this client that has not ended."""
        return self._control(sub) is not None

    def send_unsub(self, sub: Subscription, max_msgs: int | None) -> None:
        proto = self._current()
        if proto is not None:
            proto.write(encode_unsub(sub.sid, max_msgs))

    def drain_subscription(self, sub: Subscription) -> None:
        c = self._control(sub)
        if c is None:
            return
        proto = self._current()
        if proto is None:
            c.input_done()
            return
        proto.write(encode_unsub(sub.sid))
        proto.ping().addCallbacks(
            lambda _: c.input_done(),
            lambda f: c.close(ConnectionClosedError("connection lost while draining")),
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
