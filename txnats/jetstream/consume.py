"""Continuous pull (ADR-37): ``consume()`` with a handler, ``messages()`` to iterate.

One inbox subscription takes the answers to every pull request. The engine counts the
messages (and bytes) it has asked for and not yet handed out; when that falls below the
threshold it asks for enough to fill the buffer again. Each pull asks for idle
heartbeats; when nothing at all arrives within twice the heartbeat interval it warns
(``error_cb``, :class:`NoHeartbeatError`) and pulls a full batch again. On a disconnect
it stops pulling and pauses that alarm; on every ``CONNECTED`` (a reconnection, or a
move to another server) it pulls a full batch afresh. The status codes of the ADR's
table are handled as it says: 404/408/409 "Message Size Exceeds MaxBytes"/"Batch
Completed" give back what they did not deliver; 400, 409 "Consumer Deleted" and 409
"Consumer is push based" end it (``when_done()`` fails, ``error_cb`` is told); every
other status is a warning after which it goes on, and a 503 (no responders) also asks
whether the consumer still exists: one (or its stream) deleted or lost while the
client was away ends it with :class:`ConsumerNotFoundError`. It never ends silently: it ends on
``stop()``, ``drain()``, a terminal status, the end of its inbox subscription or the
client's close, and each says why through ``when_done()`` and ``error_cb``.

A message is "pending" from the pull that asked for it until it is processed: until
the handler returned (or the Deferred or coroutine it returned fired) for
``consume()``, until the iterator handed it out for ``messages()``. So
``max_messages`` (or ``max_bytes``) bounds what waits in memory however slow the
handler is.
"""

from __future__ import annotations

import inspect
import json
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats._turns import call_user
from txnats.errors import (
    APIError,
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    HandlerError,
    InvalidArgumentError,
    JetStreamError,
    NatsError,
    NoHeartbeatError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.jetstream._api import consumer_gone
from txnats.jetstream.msg import JsMsg, whole_number
from txnats.protocol.events import Msg
from txnats.protocol.headers import Headers, encode_headers

if TYPE_CHECKING:
    from txnats.jetstream.pull import PullConsumer
    from txnats.subscription import Subscription

__all__ = [
    "ConsumeContext",
    "MessagesContext",
    "PullOptions",
    "priority_fields",
    "pull_options",
]

log = Logger()

#: Default buffer of ``consume()`` and ``messages()``, in messages.
DEFAULT_MAX_MESSAGES = 1000
#: Default lifetime of one pull request, in seconds (ADR-37: 30 s, at least 1 s).
DEFAULT_EXPIRES = 30.0
MIN_EXPIRES = 1.0
#: Bounds of the idle heartbeat (ADR-37: 0.5 s to 30 s, default half the expiry).
MIN_HEARTBEAT = 0.5
MAX_HEARTBEAT = 30.0
#: The batch a pull asks for when ``max_bytes`` is the limit (ADR-37: a large value).
BYTES_MODE_BATCH = 1_000_000

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class PullOptions:
    """The settled options of a continuous pull (see :func:`pull_options`)."""

    max_messages: int
    max_bytes: int  # 0: messages are the limit
    expires: float
    idle_heartbeat: float
    threshold_messages: int
    threshold_bytes: int
    group: str | None = None
    min_pending: int | None = None
    min_ack_pending: int | None = None
    priority: int | None = None


def pull_options(
    *,
    max_messages: int | None = None,
    max_bytes: int | None = None,
    expires: float = DEFAULT_EXPIRES,
    idle_heartbeat: float | None = None,
    threshold_messages: int | None = None,
    threshold_bytes: int | None = None,
    group: str | None = None,
    min_pending: int | None = None,
    min_ack_pending: int | None = None,
    priority: int | None = None,
) -> PullOptions:
    """Check and complete the options of ``consume()``/``messages()`` as ADR-37 says.

    ``max_messages`` and ``max_bytes`` exclude each other (neither: 1000 messages);
    a threshold defaults to half its limit and may not exceed it; ``expires`` is at
    least 1 s; ``idle_heartbeat`` defaults to half ``expires`` (capped at 30 s) and must
    lie in 0.5..30 s and be at most half ``expires``.

    :raises InvalidArgumentError: for anything else, before any I/O.
    """
    if max_messages is not None and max_bytes is not None:
        raise InvalidArgumentError("give max_messages or max_bytes, not both")
    exp = check_timeout("expires", expires, allow_none=False)
    assert exp is not None
    if exp < MIN_EXPIRES:
        raise InvalidArgumentError(f"expires must be at least {MIN_EXPIRES:g} s, not {expires!r}")
    if idle_heartbeat is None:
        hb = min(exp / 2, MAX_HEARTBEAT)
    else:
        hb_checked = check_timeout("idle_heartbeat", idle_heartbeat, allow_none=False)
        assert hb_checked is not None
        hb = hb_checked
        if not MIN_HEARTBEAT <= hb <= MAX_HEARTBEAT:
            raise InvalidArgumentError(
                f"idle_heartbeat must lie in {MIN_HEARTBEAT:g}..{MAX_HEARTBEAT:g} s,"
                f" not {idle_heartbeat!r}"
            )
        if hb > exp / 2:
            raise InvalidArgumentError(
                f"idle_heartbeat ({hb:g} s) must be at most half of expires ({exp:g} s)"
            )
    nbytes = 0
    if max_bytes is not None:
        nbytes = check_count("max_bytes", max_bytes)
        msgs = BYTES_MODE_BATCH
    else:
        msgs = DEFAULT_MAX_MESSAGES if max_messages is None else check_count(
            "max_messages", max_messages
        )
    t_msgs = _threshold("threshold_messages", threshold_messages, msgs)
    t_bytes = _threshold("threshold_bytes", threshold_bytes, nbytes) if nbytes else 0
    check_priority(group, min_pending, min_ack_pending, priority)
    return PullOptions(
        msgs, nbytes, exp, hb, t_msgs, t_bytes, group, min_pending, min_ack_pending, priority
    )


def _threshold(name: str, value: int | None, limit: int) -> int:
    if value is None:
        return math.ceil(limit / 2)
    check_count(name, value, minimum=0)
    if value > limit:
        raise InvalidArgumentError(f"{name} ({value}) may not exceed its limit ({limit})")
    return value


def check_priority(
    group: str | None, min_pending: int | None, min_ack_pending: int | None,
    priority: int | None,
) -> None:
    if group is not None and (not isinstance(group, str) or not group):
        raise InvalidArgumentError(f"group must be a non-empty string, not {group!r}")
    for name, value in (("min_pending", min_pending), ("min_ack_pending", min_ack_pending)):
        if value is not None:
            check_count(name, value)
            if group is None:
                raise InvalidArgumentError(f"{name} needs a priority group (group=)")
    if priority is not None:
        check_count("priority", priority, minimum=0)
        if group is None:
            raise InvalidArgumentError("priority needs a priority group (group=)")


def priority_fields(
    group: str | None, min_pending: int | None, min_ack_pending: int | None,
    priority: int | None, pin_id: str,
) -> dict[str, Any]:
    """The ADR-42 fields of a pull request (none without a ``group``)."""
    if group is None:
        return {}
    fields: dict[str, Any] = {"group": group}
    if min_pending is not None:
        fields["min_pending"] = min_pending
    if min_ack_pending is not None:
        fields["min_ack_pending"] = min_ack_pending
    if priority is not None:
        fields["priority"] = priority
    if pin_id:
        fields["id"] = pin_id
    return fields


def msg_size(msg: JsMsg) -> int:
    """A delivery's size as the server counts it against ``max_bytes``."""
    h = msg.headers
    return (
        len(msg.subject) + len(msg.reply or "") + len(msg.data)
        + (len(encode_headers(h)) if h is not None else 0)
    )


def _pending_header(h: Headers, name: str) -> int:
    n = whole_number(h.get(name))
    return 0 if n is None else n


#: Substrings of 409 descriptions (lower case), and what each means for a continuous pull.
_GIVES_BACK = ("message size exceeds maxbytes", "batch completed")
_TERMINAL = ("consumer deleted", "consumer is push based")
_RESETS = ("leadership change", "server shutdown")

_RUNNING, _DRAINING, _ENDED = 0, 1, 2


class _PullEngine:
    """What ``consume()`` and ``messages()`` share: the inbox, the pending counts, the
    heartbeat alarm, the status table and the reconnection handling."""

    def __init__(
        self, consumer: PullConsumer, opts: PullOptions,
        error_cb: Callable[[NatsError], object] | None,
    ) -> None:
        js = consumer.js
        self.consumer = consumer
        self.options = opts
        self._client = client = js.client
        self._clock = client.clock
        self._seconds = client.clock.seconds
        self._subject = f"{js.prefix}.CONSUMER.MSG.NEXT.{consumer.stream}.{consumer.name}"
        self._error_cb = error_cb
        self._buffer: deque[JsMsg] = deque()
        self._pending_msgs = 0
        self._pending_bytes = 0
        self._state = _RUNNING
        self._connected = False
        self._last = 0.0
        self._timer: IDelayedCall | None = None
        self._sub: Subscription | None = None
        self._inbox = ""
        self._unlisten: Callable[[], None] | None = None
        self._done_waiters: list[Deferred[None]] = []
        self._end_error: NatsError | None = None
        self._checking = False  # a consumer-info request is under way
        #: Messages processed (handled, or handed out by the iterator).
        self.delivered = 0
        #: Pull requests sent.
        self.pulls = 0
        #: Times the heartbeat alarm went off.
        self.heartbeat_alarms = 0
        #: Warnings reported (statuses that did not end it, missed heartbeats).
        self.warnings = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Subscribe to the inbox, listen for connection changes, send the first pull."""
        client = self._client
        self._inbox = client.new_inbox()
        self._sub = sub = client.subscribe(
            self._inbox, self._on_msg,
            pending_msgs_limit=max(self.options.max_messages, 65536) * 2,
        )
        sub.when_ended().addBoth(self._sub_ended)
        self._unlisten = client.add_status_listener(self._on_state)
        self._connected = client.is_connected
        self._last = self._clock.seconds()
        if self._connected:
            self._pull_full()
        self._arm()

    @property
    def is_active(self) -> bool:
        """True until it has ended (a draining one is still active)."""
        return self._state != _ENDED

    @property
    def pending_messages(self) -> int:
        """Messages asked for and not yet processed (in flight or buffered)."""
        return self._pending_msgs

    @property
    def pending_bytes(self) -> int:
        """Bytes asked for and not yet processed (with ``max_bytes``; else 0)."""
        return self._pending_bytes

    @property
    def buffered(self) -> int:
        """Messages received and not yet processed."""
        return len(self._buffer)

    def when_done(self) -> Deferred[None]:
        """A new Deferred firing when it has ended: with ``None`` after ``stop()``,
        ``drain()`` or the client's close, failing with the error that ended it
        otherwise (a terminal status, its inbox subscription ending)."""
        if self._state == _ENDED:
            return succeed(None) if self._end_error is None else fail(self._end_error)
        d: Deferred[None] = Deferred(self._done_waiters.remove)
        self._done_waiters.append(d)
        return d

    def stop(self) -> None:
        """End now: no more pulls, nothing more processed. Messages received and not
        processed are dropped (logged): with an acking consumer the server delivers
        them again after its ``ack_wait``."""
        if self._state == _ENDED:
            return
        dropped = len(self._buffer)
        if dropped:
            log.warn(
                "Pull from {stream}/{consumer} stopped: {n} received messages not processed",
                stream=self.consumer.stream, consumer=self.consumer.name, n=dropped,
            )
        self._end(None)

    def drain(self) -> Deferred[None]:
        """Stop pulling, process what was received (and what is still arriving until
        the inbox is drained), then end; fires when it has."""
        d = self.when_done()
        if self._state == _RUNNING:
            self._state = _DRAINING
            self._disarm()
            if self._sub is not None and self._sub.is_active:
                self._sub.drain()
            self._check_drained()
        return d

    def _sub_ended(self, result: object) -> None:
        """The inbox subscription is over: a drain finishes, anything else ends it."""
        if self._state == _DRAINING:
            self._check_drained()
            return
        if self._state == _RUNNING:
            reason = self._sub.end_reason if self._sub is not None else None
            client = self._client
            if isinstance(reason, ConnectionClosedError) or client.is_closed or client.is_draining:
                self._end(None)  # the client's close or drain ended it: nothing went wrong
            else:
                self._end(reason or SubscriptionClosedError("the pull's inbox ended"))

    def _check_drained(self) -> None:
        if self._state == _DRAINING and self._idle() and (
            self._sub is None or not self._sub.is_active
        ):
            self._end(None)

    def _idle(self) -> bool:
        return not self._buffer

    def _end(self, error: NatsError | None) -> None:
        if self._state == _ENDED:
            return
        self._state = _ENDED
        self._end_error = error
        self._disarm()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._sub is not None and self._sub.is_active:
            self._sub.unsubscribe()
        self._buffer.clear()
        if error is not None:
            self._report(error)
        self._ended(error)
        waiters, self._done_waiters = self._done_waiters, []
        for w in waiters:
            if error is None:
                w.callback(None)
            else:
                w.errback(error)

    def _ended(self, error: NatsError | None) -> None:
        """Hook: what a subclass does when it ends (before ``when_done`` fires)."""

    def _report(self, error: NatsError) -> None:
        """Tell ``error_cb`` (this pull's, else the client's) in the next batch."""
        cb = self._error_cb if self._error_cb is not None else self._client.options.error_cb
        log.info(
            "Pull from {stream}/{consumer}: {error}",
            stream=self.consumer.stream, consumer=self.consumer.name, error=str(error),
        )
        self._client.schedule(call_user, "error", cb, error)

    def _warn(self, error: NatsError) -> None:
        self.warnings += 1
        self._report(error)

    # ------------------------------------------------------------------ connection
    def _on_state(self, state: str) -> None:
        if self._state == _ENDED:
            return
        if state == "CONNECTED":  # a ClientState (a str enum)
            # Reconnected, or moved to another server: the pulls waiting on the old
            # connection are gone. Ask afresh (ADR-37: no consumer check).
            self._connected = True
            self._last = self._clock.seconds()
            self._pending_msgs = self._pending_bytes = 0
            if self._state == _RUNNING:
                self._pull_full()
                self._arm()
        elif state == "CLOSED":
            self._end(None)
        else:
            self._connected = False
            self._disarm()

    def _check_consumer(self) -> None:
        if self._checking or self._state != _RUNNING:
            return
        self._checking = True
        c = self.consumer

        def answered(gone: ConsumerNotFoundError | None) -> None:
            self._checking = False
            if gone is not None and self._state == _RUNNING:
                self._end(gone)
            # Otherwise (there, or no leader yet) it goes on pulling; the alarm warns.

        consumer_gone(c.js.consumer_info(c.stream, c.name), c.stream, c.name,
                      "pull from").addCallback(answered)

    # ------------------------------------------------------------------ heartbeats
    def _arm(self) -> None:
        self._disarm()
        if self._state == _RUNNING and self._connected:
            wait = 2 * self.options.idle_heartbeat
            self._timer = self._clock.callLater(wait, self._check_heartbeat)

    def _disarm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _check_heartbeat(self) -> None:
        self._timer = None
        if self._state != _RUNNING or not self._connected:
            return
        now = self._clock.seconds()
        limit = 2 * self.options.idle_heartbeat
        quiet = now - self._last
        if quiet < limit:
            self._timer = self._clock.callLater(limit - quiet, self._check_heartbeat)
            return
        self.heartbeat_alarms += 1
        self._warn(NoHeartbeatError(
            f"pull from {self.consumer.stream}/{self.consumer.name}: nothing received"
            f" for {quiet:.1f} s (idle heartbeat {self.options.idle_heartbeat:g} s);"
            " pulling again"
        ))
        self._last = now
        self._pending_msgs = self._pending_bytes = 0
        self._pull_full()
        self._arm()

    # ------------------------------------------------------------------ pulling
    def _pull_full(self) -> None:
        self._pending_msgs = self._pending_bytes = 0
        self._maybe_pull()

    def _maybe_pull(self) -> None:
        o = self.options
        if o.max_bytes:
            if self._pending_bytes >= o.threshold_bytes:
                return
            batch, nbytes = o.max_messages, o.max_bytes - self._pending_bytes
        else:
            if self._pending_msgs >= o.threshold_messages:
                return
            batch, nbytes = o.max_messages - self._pending_msgs, 0
        if self._state != _RUNNING or not self._connected or not self._client.is_connected:
            return
        req: dict[str, Any] = {
            "batch": batch,
            "expires": int(o.expires * _NS),
            "idle_heartbeat": int(o.idle_heartbeat * _NS),
        }
        if nbytes:
            req["max_bytes"] = nbytes
        if o.group is not None:
            req.update(priority_fields(
                o.group, o.min_pending, o.min_ack_pending, o.priority, self.consumer.pin_id
            ))
        try:
            self._client.publish(self._subject, json.dumps(req).encode(), reply=self._inbox)
        except NatsError as e:
            if self._client.is_closed:
                self._end(None)
            else:  # refused while the connection changes: the next CONNECTED pulls again
                self._warn(e)
            return
        self.pulls += 1
        if nbytes:
            self._pending_msgs = batch
            self._pending_bytes += nbytes
        else:
            self._pending_msgs += batch

    def _processed(self, msg: JsMsg) -> None:
        """One message processed: it is no longer pending; pull if below threshold."""
        self.delivered += 1
        # Never below zero: a message received before a reset (reconnection, alarm) was
        # counted by a pull that no longer is.
        if self._pending_msgs > 0:
            self._pending_msgs -= 1
        if self.options.max_bytes:
            self._pending_bytes = max(0, self._pending_bytes - msg_size(msg))
        self._maybe_pull()

    # ------------------------------------------------------------------ arrivals
    def _on_msg(self, msg: Msg) -> None:
        self._last = self._seconds()
        h = msg.headers
        if h is not None and h.status is not None:
            self._on_status(h)
            return
        if self._state == _ENDED:
            return
        if h is not None:
            pin = h.get("Nats-Pin-Id")
            if pin:
                self.consumer.pin_id = pin
        self._arrived(JsMsg(msg, self._client))

    def _arrived(self, msg: JsMsg) -> None:
        """Hook: a user message arrived (a subclass hands it out or buffers it)."""
        raise NotImplementedError

    def _on_status(self, h: Headers) -> None:
        status = h.status
        if status == 100 or self._state == _ENDED:
            return  # an idle heartbeat: only proof of life
        desc = h.description or ""
        low = desc.lower()
        if status in (404, 408) or (status == 409 and any(s in low for s in _GIVES_BACK)):
            # A pull ended short: what it did not deliver is no longer pending.
            self._pending_msgs = max(0, self._pending_msgs - _pending_header(
                h, "Nats-Pending-Messages"))
            if self.options.max_bytes:
                self._pending_bytes = max(0, self._pending_bytes - _pending_header(
                    h, "Nats-Pending-Bytes"))
            self._maybe_pull()
            return
        where = f"{self.consumer.stream}/{self.consumer.name}"
        if status == 400 or (status == 409 and any(s in low for s in _TERMINAL)):
            cls = ConsumerDeletedError if "deleted" in low else APIError
            self._end(cls(f"pull from {where} ended: {status} {desc}".strip(), status or 0, 0))
            return
        if status == 503:  # no leader now, or no consumer: ask which (as nats.go)
            self._check_consumer()
        if status == 423:  # ADR-42: another client holds the pin; ask without ours
            self.consumer.pin_id = ""
            self._pending_msgs = self._pending_bytes = 0
        elif status == 409 and any(s in low for s in _RESETS):
            self._pending_msgs = self._pending_bytes = 0
        self._warn(APIError(f"pull from {where}: {status} {desc}".strip(), status or 0, 0))
        if self._state == _RUNNING and self._connected:
            self._maybe_pull()


class ConsumeContext(_PullEngine):
    """A running ``consumer.consume(handler)``: ``stop()``, ``drain()``,
    ``when_done()``, and counters (``delivered``, ``pulls``, ``heartbeat_alarms``,
    ``warnings``, ``pending_messages``).

    The handler gets each :class:`JsMsg` in order, one at a time; a Deferred or
    coroutine it returns is awaited before the next. What it raises (or what its
    Deferred fails with) goes to ``error_cb`` as a :class:`HandlerError`; consuming
    goes on.
    """

    def __init__(
        self, consumer: PullConsumer, opts: PullOptions,
        handler: Callable[[JsMsg], object],
        error_cb: Callable[[NatsError], object] | None,
    ) -> None:
        super().__init__(consumer, opts, error_cb)
        self._handler = handler
        self._busy = False
        self._looping = False

    def _idle(self) -> bool:
        return not self._buffer and not self._busy

    def _arrived(self, msg: JsMsg) -> None:
        if self._busy or self._buffer:
            self._buffer.append(msg)
            return
        self._handle(msg)

    def _on_msg(self, msg: Msg) -> None:
        # The engine's _on_msg, _arrived, _handle and _processed in one for the common
        # case (a plain message, nothing buffered, a handler returning None): this runs
        # once per message.
        self._last = self._seconds()
        if msg.headers is not None or self._busy or self._buffer or self._state == _ENDED:
            _PullEngine._on_msg(self, msg)
            return
        m = JsMsg(msg, self._client)
        try:
            result = self._handler(m)
        except Exception as e:
            self._handler_failed(Failure(e), m)
            result = None
        if result is not None:
            self._went_async(result, m)
            return
        self.delivered += 1  # what _processed does, inline
        if self._pending_msgs > 0:
            self._pending_msgs -= 1
        o = self.options
        if o.max_bytes:
            self._pending_bytes = max(0, self._pending_bytes - msg_size(m))
            self._maybe_pull()
        elif self._pending_msgs < o.threshold_messages:
            self._maybe_pull()

    def _handle(self, msg: JsMsg) -> None:
        """Call the handler; a pending result makes it busy until that fires."""
        try:
            result = self._handler(msg)
        except Exception as e:
            self._handler_failed(Failure(e), msg)
            result = None
        if result is not None:
            self._went_async(result, msg)
            return
        self._processed(msg)

    def _went_async(self, result: object, msg: JsMsg) -> None:
        """The handler returned something: wait for a Deferred or coroutine."""
        d: Deferred[Any] | None = None
        if isinstance(result, Deferred):
            d = result
        elif inspect.iscoroutine(result):
            d = ensureDeferred(result)
        if d is None:
            self._processed(msg)
            return
        self._busy = True
        d.addCallbacks(
            self._resume, self._resume_failed, callbackArgs=(msg,), errbackArgs=(msg,)
        )

    def _resume(self, _: object, msg: JsMsg) -> None:
        self._busy = False
        self._after(msg)

    def _resume_failed(self, f: Failure, msg: JsMsg) -> None:
        self._busy = False
        self._handler_failed(f, msg)
        self._after(msg)

    def _after(self, msg: JsMsg) -> None:
        if self._state == _ENDED:
            return
        self._processed(msg)
        if self._looping:
            return  # a handler whose Deferred had fired already: the loop below goes on
        self._looping = True
        try:
            buf = self._buffer
            while buf and not self._busy and self._state != _ENDED:
                self._handle(buf.popleft())
        finally:
            self._looping = False
        self._check_drained()

    def _handler_failed(self, f: Failure, msg: JsMsg) -> None:
        err = HandlerError(
            f"consume handler failed on {msg.subject!r}: {f.value!r}", subject=msg.subject,
        )
        err.__cause__ = f.value
        log.failure("Consume handler failed on {subject}", f, subject=msg.subject)
        self._report(err)


class MessagesContext(_PullEngine):
    """A running ``consumer.messages()``: ``async for msg in it``, or
    ``await it.next(timeout)``; ``stop()``, ``drain()``, ``when_done()``.

    Iteration ends (``StopAsyncIteration``) once it has ended and its buffer is
    empty; if a terminal error ended it, the loop raises that error instead.
    """

    def __init__(
        self, consumer: PullConsumer, opts: PullOptions,
        error_cb: Callable[[NatsError], object] | None,
    ) -> None:
        super().__init__(consumer, opts, error_cb)
        self._waiters: deque[Deferred[JsMsg]] = deque()

    def _arrived(self, msg: JsMsg) -> None:
        if self._waiters:
            self._processed(msg)
            self._waiters.popleft().callback(msg)
            return
        self._buffer.append(msg)

    def _end(self, error: NatsError | None) -> None:
        # Unlike stop() from the handler side, what was received stays readable after
        # a drain: keep the buffer out of the engine's clear().
        kept = self._buffer if error is None and self._state == _DRAINING else deque()
        self._buffer = deque()
        super()._end(error)
        self._buffer = kept

    def _ended(self, error: NatsError | None) -> None:
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.errback(error or _Finished())

    def _check_drained(self) -> None:
        if self._state == _DRAINING and (self._sub is None or not self._sub.is_active):
            self._end(None)

    def next(self, timeout: float | None = None) -> Deferred[JsMsg]:
        """The next message; fails with :class:`TimeoutError` after ``timeout``
        seconds, with :class:`SubscriptionClosedError` once it has ended and nothing
        is left (with the terminal error if one ended it)."""
        try:
            check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        if self._buffer:
            msg = self._buffer.popleft()
            if self._state != _ENDED:
                self._processed(msg)
            return succeed(msg)
        if self._state == _ENDED or (self._state == _DRAINING and not (
            self._sub is not None and self._sub.is_active
        )):
            return fail(self._end_error or SubscriptionClosedError("messages() has ended"))
        timer: list[IDelayedCall] = []

        def cancel(d: Deferred[JsMsg]) -> None:
            if d in self._waiters:
                self._waiters.remove(d)

        d: Deferred[JsMsg] = Deferred(cancel)
        self._waiters.append(d)
        if timeout is not None:
            def expire() -> None:
                if d in self._waiters:
                    self._waiters.remove(d)
                    d.errback(TimeoutError(f"no message within {timeout:g} s"))

            timer.append(self._clock.callLater(timeout, expire))

        def finished(result: Any) -> Any:
            if timer and timer[0].active():
                timer[0].cancel()
            if isinstance(result, Failure) and result.check(_Finished):
                return Failure(SubscriptionClosedError("messages() has ended"))
            return result

        return d.addBoth(finished)

    def __aiter__(self) -> MessagesContext:
        return self

    async def __anext__(self) -> JsMsg:
        buf = self._buffer
        if buf:
            msg = buf.popleft()
            if self._state != _ENDED:
                self._processed(msg)
            return msg
        try:
            return await self.next()
        except SubscriptionClosedError:
            if self._end_error is not None and not isinstance(
                self._end_error, SubscriptionClosedError
            ):
                raise self._end_error.with_traceback(None) from None
            raise StopAsyncIteration from None


class _Finished(JetStreamError):
    """Internal: the iterator ended while a read waited."""
