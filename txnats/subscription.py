"""Subscriptions as actors: a mailbox, pending limits and delivery in reactor turns.

Messages are put in a subscription's mailbox as they are parsed (no user code runs
then). When the mailbox goes from empty to non-empty the subscription asks the client
for a turn; the client runs all ready subscriptions together once the read being
dispatched is over (or in one ``callLater(0)`` when none is). In its turn
a subscription hands messages to its handler, in order, one at a time (or up to
``concurrency`` at a time); a handler that returns a Deferred or a coroutine is waited
for before the next message, so a slow handler slows only its own mailbox.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from txnats._args import MAX_SECONDS, check_count, check_timeout
from txnats._mailbox import Mailbox
from txnats._turns import call_user
from txnats.errors import (
    ConnectionClosedError,
    DrainTimeoutError,
    HandlerError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NatsError,
    SlowConsumerError,
    SubscriptionClosedError,
)
from txnats.interfaces import Handler, ISubscription
from txnats.protocol.events import Msg, Respond

__all__ = [
    "Control", "Handler", "Subscription", "SubscriptionHost", "check_subscribe",
    "serving",
]


log = Logger()


#: What ``subscribe(handler=...)`` accepts: a callable taking a :class:`Msg` that returns
#: ``None``, a Deferred or a coroutine.

#: Most messages one subscription hands out in one turn before yielding to the reactor.
_BATCH = 1024

class State(IntEnum):
    """Where a subscription stands."""

    #: Receiving and handing out messages.
    ACTIVE = 0
    #: Unsubscribed by drain(): what the server sent before is still coming.
    DRAINING = 1
    #: No more input; what is in the mailbox (and in flight) is still handed out.
    ENDING = 2
    #: Over.
    CLOSED = 3


# Module globals: read on every message, faster than State.X.
_ACTIVE, _DRAINING, _ENDING, _CLOSED = State.ACTIVE, State.DRAINING, State.ENDING, State.CLOSED


@dataclass(frozen=True, slots=True)
class Control:
    """How the client's registry drives one subscription: its private steps, handed
    over as callables when it is made (they are not part of its public API)."""

    sub: Subscription
    #: Take a message the server sent (called while parsing: no user code).
    enqueue: Callable[[Msg], None]
    #: The client drains: hand out what is held, input still comes until its PONG.
    begin_drain: Callable[[], None]
    #: No more messages will arrive.
    input_done: Callable[[], None]
    #: The client closed: discard what is left and end now.
    close: Callable[[NatsError], None]
    #: End now for ``reason`` (the server refused the subscription).
    finish: Callable[[NatsError], None]


class SubscriptionHost(Protocol):
    """What a subscription asks of its client (:class:`txnats._registry.Subscriptions`)."""

    @property
    def clock(self) -> IReactorTime: ...
    @property
    def responder(self) -> Respond: ...
    def schedule(self, fn: Callable[..., object], *args: object) -> None: ...
    def report(self, error: Exception) -> None: ...
    def add(self, control: Control) -> None: ...
    def dropped(self, sub: Subscription, msg: Msg) -> None: ...
    def forget(self, sub: Subscription) -> None: ...
    def send_unsub(self, sub: Subscription, max_msgs: int | None) -> None: ...
    def drain_subscription(self, sub: Subscription) -> None: ...
    def backpressure(self, sub: Subscription, full: bool) -> None: ...

#: The subscription whose handler is running (set for a turn; coroutines and
#: inlineCallbacks started by a handler keep it in their copy of the context).
_serving: ContextVar[Subscription | None] = ContextVar("txnats_serving", default=None)


def check_subscribe(
    handler: object, max_msgs: int | None, concurrency: int,
    pending_msgs_limit: int, pending_bytes_limit: int, on_drop: object = None,
) -> tuple[int, int]:
    """Check ``subscribe()``'s arguments; return the pending limits.

    :raises InvalidArgumentTypeError: a handler that is not callable (a string: the
        queue group given in its place, as nats-py's order has it), or an ``on_drop``
        that is not.
    :raises InvalidArgumentError: a count or limit below 1.
    """
    if on_drop is not None and not callable(on_drop):
        raise InvalidArgumentTypeError(f"on_drop must be callable, not {on_drop!r}")
    if handler is not None and not callable(handler):
        raise InvalidArgumentTypeError(
            f"handler must be callable, not {type(handler).__name__} {handler!r}"
            + (" (the queue group is a keyword argument: queue=...)"
               if isinstance(handler, str) else "")
        )
    check_count("concurrency", concurrency)
    if max_msgs is not None:
        check_count("max_msgs", max_msgs)
    return (
        check_count("pending_msgs_limit", pending_msgs_limit),
        check_count("pending_bytes_limit", pending_bytes_limit),
    )


def serving() -> Subscription | None:
    """The subscription whose handler (or a coroutine it started) is running, if any."""
    return _serving.get()


@implementer(ISubscription)
class Subscription(Mailbox[Msg]):
    """Interest in a subject; see :meth:`txnats.Client.subscribe`."""

    __slots__ = (
        "_end_reason",
        "_ended",
        "_handler",
        "_host",
        "_inflight",
        "_on_drop",
        "_responder",
        "_running",
        "_scheduled",
        "_slow",
        "_state",
        "backpressure",
        "concurrency",
        "delivered",
        "dropped",
        "max_msgs",
        "pending_bytes",
        "pending_bytes_limit",
        "pending_msgs",
        "pending_msgs_limit",
        "queue",
        "received",
        "sid",
        "subject",
    )

    def __init__(
        self,
        host: SubscriptionHost,
        sid: int,
        subject: str,
        queue: str | None,
        handler: Handler | None,
        *,
        max_msgs: int | None,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        concurrency: int = 1,
        backpressure: bool = False,
        on_drop: Callable[[Msg], object] | None = None,
    ) -> None:
        Mailbox.__init__(self, host.clock, f"message on {subject!r}")
        self._host = host
        self._responder = host.responder  # bound to each message: read once here
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self._handler = handler
        self.max_msgs = max_msgs
        self.pending_msgs_limit = pending_msgs_limit
        self.pending_bytes_limit = pending_bytes_limit
        self.concurrency = concurrency
        self.backpressure = backpressure
        self._on_drop = on_drop
        #: Messages and payload bytes waiting in the mailbox.
        self.pending_msgs = 0
        self.pending_bytes = 0
        #: Messages handed to the handler or a reader.
        self.delivered = 0
        #: Messages dropped because the pending limits were reached.
        self.dropped = 0
        #: Messages the server sent to this subscription (delivered+dropped+pending).
        self.received = 0
        self._inflight = 0
        self._scheduled = False
        self._running = False
        self._slow = False
        self._state: State = _ACTIVE
        self._ended: list[Deferred[None]] = []
        self._end_reason: NatsError | None = None
        host.add(Control(
            self, self._enqueue, self._begin_drain, self._input_done, self._close, self._finish
        ))

    # ------------------------------------------------------------------ inbound
    def _enqueue(self, msg: Msg) -> None:
        """Called while parsing: put ``msg`` in the mailbox (or drop it). No user code."""
        self.received += 1
        size = len(msg.data)
        msg._respond = self._responder  # private-reach: bind each message to its client
        if (
            self.pending_msgs >= self.pending_msgs_limit
            or self.pending_bytes + size > self.pending_bytes_limit
        ) and not self.backpressure:
            self.dropped += 1
            self._host.dropped(self, msg)
            if self._on_drop is not None:
                self._host.schedule(call_user, "on_drop", self._on_drop, msg)
            if not self._slow:
                self._slow = True
                self._host.report(
                    SlowConsumerError(
                        f"slow consumer on {self.subject!r} (sid {self.sid}): pending limits "
                        f"{self.pending_msgs_limit} msgs / {self.pending_bytes_limit} bytes "
                        "reached, dropping messages",
                        sid=self.sid,
                        subject=self.subject,
                        dropped=self.dropped,
                    )
                )
            return
        self._items.append(msg)
        self.pending_msgs += 1
        self.pending_bytes += size
        if self.backpressure and (
            self.pending_msgs >= self.pending_msgs_limit
            or self.pending_bytes >= self.pending_bytes_limit
        ):
            self._host.backpressure(self, True)
        if not self._scheduled and not self._running:
            self._scheduled = True
            self._host.schedule(self._turn)

    def _below_low_water(self) -> None:
        """End a slow-consumer episode, or resume reading, once the mailbox is half empty."""
        if (
            self.pending_msgs <= self.pending_msgs_limit // 2
            and self.pending_bytes <= self.pending_bytes_limit // 2
        ):
            # Ending the episode as soon as one message is taken would report once per
            # message while overloaded.
            self._slow = False
            if self.backpressure:
                self._host.backpressure(self, False)

    def _turn(self) -> None:
        self._scheduled = False
        if self._state == _CLOSED:
            return
        self._running = True
        # Handler calls made in this turn, and the coroutines they start (Twisted runs
        # each in a copy of this context), see which subscription they serve: drain()
        # called from one must not wait for it (see in_handler_of).
        token = _serving.set(self)
        try:
            mailbox = self._items
            # (The end check of _taken waits for _running to drop, below.)
            self._serve()
            handler = self._handler
            if handler is not None:
                n = 0
                popleft = mailbox.popleft
                while mailbox and self._inflight < self.concurrency and self._state != _CLOSED:
                    # self._take(), inlined: this loop runs once per message.
                    msg = popleft()
                    self.pending_msgs -= 1
                    self.pending_bytes -= len(msg.data)
                    self.delivered += 1
                    if self._slow or self.backpressure:
                        self._below_low_water()
                    try:
                        result = handler(msg)
                    except Exception as e:
                        self._handler_failed(Failure(e))
                        continue
                    if result is not None:
                        if inspect.iscoroutine(result):
                            result = Deferred.fromCoroutine(result)
                        if isinstance(result, Deferred):
                            self._inflight += 1
                            result.addBoth(self._handler_done)
                    n += 1
                    if n >= _BATCH and mailbox:
                        self._scheduled = True
                        self._host.schedule(self._turn)
                        break
        finally:
            _serving.reset(token)
            self._running = False
        self._check_end()

    def _handler_done(self, result: object) -> None:
        self._inflight -= 1
        if isinstance(result, Failure):
            self._handler_failed(result)
        if self._running:
            return
        if self._items and not self._scheduled and self._state != _CLOSED:
            self._scheduled = True
            self._host.schedule(self._turn)
        else:
            self._check_end()

    def _handler_failed(self, failure: Failure) -> None:
        log.failure(
            "Handler for {subject!r} (sid {sid}) raised", failure, subject=self.subject,
            sid=self.sid,
        )
        cause = failure.value
        err = HandlerError(
            f"handler for {self.subject!r} (sid {self.sid}) raised "
            f"{type(cause).__name__}: {cause}",
            subject=self.subject,
            sid=self.sid,
        )
        err.__cause__ = cause
        self._host.report(err)

    # ------------------------------------------------------------------ ending
    def _check_end(self) -> None:
        """End the subscription once no more input comes and the mailbox is handled."""
        if (
            self._state == _ENDING
            and not self._items
            and self._inflight == 0
            and not self._running
        ):
            self._finish(SubscriptionClosedError(f"subscription {self.sid} ended"))

    def _begin_drain(self) -> None:
        """The client drains: keep handing out what is in the mailbox, input goes on
        until the client's drain sees the server's PONG."""
        if self._state == _ACTIVE:
            self._state = _DRAINING

    def _input_done(self) -> None:
        """No more messages will arrive (unsubscribed, drained or max reached)."""
        if self._state in (_ACTIVE, _DRAINING):
            self._state = _ENDING
            self._host.forget(self)
            self._check_end()

    def _finish(self, reason: NatsError) -> None:
        if self._state == _CLOSED:
            return
        self._state = _CLOSED
        self._end_reason = reason
        self._host.forget(self)
        if self.backpressure:
            self._host.backpressure(self, False)
        self._end(reason, clean=self._clean_end(reason))
        ended = self._ended
        self._ended = []
        for d in ended:
            d.callback(None)

    def _close(self, reason: NatsError) -> None:
        """The client closed: discard what is left (reported) and end now."""
        if self._state == _CLOSED:
            return
        left = self._discard()
        if left:
            log.info(
                "Subscription {subject!r} (sid {sid}) closed with {n} undelivered messages",
                subject=self.subject, sid=self.sid, n=left,
            )
        self.pending_msgs = self.pending_bytes = 0
        self._finish(reason)

    # ------------------------------------------------------------------ public API
    @property
    def end_reason(self) -> NatsError | None:
        """Why the subscription ended (None while it has not): a
        :class:`SubscriptionClosedError` when it ended by itself (unsubscribed, drained,
        ``max_msgs``), else the error that ended it (closed, refused by the server)."""
        return self._end_reason

    @property
    def is_active(self) -> bool:
        """True until the subscription has ended."""
        return self._state != _CLOSED

    def unsubscribe(self) -> None:
        """Stop interest now. Messages already received are still handed out."""
        if self._state in (_ACTIVE, _DRAINING):
            self._host.send_unsub(self, None)
            self._input_done()

    def auto_unsubscribe(self, max_msgs: int) -> None:
        """Unsubscribe after ``max_msgs`` messages in total (counting those received)."""
        check_count("max_msgs", max_msgs)
        if self._state != _ACTIVE:
            raise SubscriptionClosedError(f"subscription {self.sid} is not active")
        self.max_msgs = max_msgs
        if self.received >= max_msgs:
            self.unsubscribe()
            return
        self._host.send_unsub(self, max_msgs)

    def drain(self, timeout: float | None = None) -> Deferred[None]:
        """Unsubscribe, and fire once every message the server sent before is handled.

        Fails with the reason (:class:`ConnectionClosedError`, say) if the subscription
        is ended another way first: the client closed or the connection was lost.

        With a ``timeout``, fails with :class:`DrainTimeoutError` if that takes longer
        (the subscription keeps draining; :meth:`unsubscribe` has already happened).
        Called from this subscription's own handler (or a coroutine it started), it
        starts the drain and fires at once: waiting would wait for that very handler.
        A ``timeout`` that is not a finite number above zero raises
        :class:`InvalidArgumentError`, having changed nothing.
        """
        timeout = check_timeout("timeout", timeout)
        if self._state == _CLOSED:
            return succeed(None)
        if self._state == _ACTIVE:
            self._state = _DRAINING
            self._host.drain_subscription(self)
        if _serving.get() is self:
            # From this subscription's own handler: waiting for the end would wait for
            # that very handler. The drain goes on; this fires now.
            return succeed(None)
        d = self.when_ended().addCallback(self._drained)
        if timeout is not None:
            subject = self.subject

            def on_timeout(result: object, after: float) -> object:
                if isinstance(result, Failure) and result.check(CancelledError):
                    return Failure(
                        DrainTimeoutError(f"subscription {subject!r} not drained in {after}s")
                    )
                return result

            d.addTimeout(timeout, self._host.clock, onTimeoutCancel=on_timeout)
        return d

    def _drained(self, _: object) -> None:
        """A drain succeeds only if the subscription ended by itself: ended by a close
        or a lost connection (messages may have been discarded) or refused by the
        server, the drain fails with that reason."""
        reason = self._end_reason
        if reason is not None and not isinstance(reason, SubscriptionClosedError):
            raise reason.with_traceback(None)

    def when_ended(self) -> Deferred[None]:
        """A fresh Deferred that fires when this subscription has ended."""
        if self._state == _CLOSED:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._ended.append(d)
        return d

    def next_msg(self, timeout: float | None = 1.0) -> Deferred[Msg]:
        """The next message from the mailbox (pull style).

        :param timeout: seconds to wait for one, or None to wait for as long as it
            takes.
        :returns: a Deferred (``msg = await sub.next_msg()``) that fires with the next
            message; at once (already fired) when one is queued. Cancelling it while it
            waits withdraws the read: no message is lost.

        The Deferred fails with :class:`TimeoutError` after ``timeout``; with the
        reason the subscription ended (:class:`SubscriptionClosedError`,
        :class:`ConnectionClosedError`, the server's
        :class:`PermissionViolationError`) once it has ended and nothing is queued;
        with :class:`InvalidArgumentError` for a bad ``timeout`` or on a subscription
        with a handler (whose messages go to the handler).
        """
        mailbox = self._items
        if mailbox and not self._waiters and self._handler is None and (
            timeout is None or (type(timeout) is float and 0.0 < timeout <= MAX_SECONDS)
        ):
            # A queued message: Mailbox's fast path, with _take() and _taken() inlined
            # (this runs once per message read).
            msg = mailbox.popleft()
            self.pending_msgs -= 1
            self.pending_bytes -= len(msg.data)
            self.delivered += 1
            if self._slow or self.backpressure:
                self._below_low_water()
            if self._state == _ENDING:
                self._check_end()
            return succeed(msg)
        try:
            if timeout is not None:
                timeout = check_timeout("timeout", timeout)  # (NaN and inf refused)
        except NatsError as e:
            return fail(e)
        if mailbox and not self._waiters and self._handler is None:
            return succeed(self._take())
        return self._read(timeout)

    def _taken(self, msg: Msg) -> None:
        """A message was handed to a reader: count it; the mailbox's low water; an
        ending subscription whose mailbox is now empty is over."""
        self.pending_msgs -= 1
        self.pending_bytes -= len(msg.data)
        self.delivered += 1
        if self._slow or self.backpressure:
            self._below_low_water()
        if self._state == _ENDING:
            self._check_end()

    def _refusal(self) -> NatsError | None:
        """A read finding nothing queued: refused for a handler subscription, failed
        with the reason once ended (or ending with an empty mailbox), else it waits."""
        if self._handler is not None:
            return InvalidArgumentError("next_msg() is for subscriptions without a handler")
        if self._state == _CLOSED or (self._state == _ENDING and not self._items):
            return self._end_reason or SubscriptionClosedError(f"subscription {self.sid} ended")
        return None

    def _clean_end(self, error: NatsError) -> bool:
        """``async for`` stops when the subscription ended by itself or the client
        closed; it raises any other reason (the server refused it, say)."""
        return isinstance(error, (SubscriptionClosedError, ConnectionClosedError))

    async def __anext__(self) -> Msg:
        # A queued message is returned at once: no Deferred, and the coroutine running
        # the loop does not suspend (this is what keeps async for as fast as a handler).
        mailbox = self._items
        if mailbox and not self._waiters and self._handler is None:
            # Mailbox's fast path with _take() and _taken() inlined: once per message.
            msg = mailbox.popleft()
            self.pending_msgs -= 1
            self.pending_bytes -= len(msg.data)
            self.delivered += 1
            if self._slow or self.backpressure:
                self._below_low_water()
            if self._state == _ENDING:
                self._check_end()
            return msg
        return await self._next_or_stop()

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription sid={self.sid} subject={self.subject!r}{q}>"
