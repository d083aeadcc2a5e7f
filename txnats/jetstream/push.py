"""Push consumers: ``js.subscribe(subject, handler)`` (the server sends to our inbox).

:func:`subscribe` finds the stream that takes ``subject``, binds to a durable push
consumer that exists (``durable=``) or creates one (ephemeral unless ``durable``)
delivering to a new inbox (in the deliver group ``queue``), and subscribes to it. The
resulting :class:`PushSubscription` answers the server's flow control requests once the
messages before them were processed (so the server never runs further ahead than the
application), answers stall notices, and watches the idle heartbeats: nothing for twice
the interval is reported to ``error_cb`` as a :class:`NoHeartbeatError` (the watch
pauses while disconnected), and asks whether the consumer still exists: one that is
gone (deleted, or an ephemeral one lost in a server's restart) ends the subscription
with :class:`ConsumerNotFoundError`. Reconnections need nothing of it: the client
subscribes the inbox again and the server's consumer goes on delivering to it.

With a ``handler`` each message is handed to it in order (a Deferred or coroutine it
returns is awaited) and acknowledged once it returns, unless ``manual_ack`` (or the
consumer acks nothing). Without one, read with ``await sub.next_msg()`` or ``async
for msg in sub``; nothing is acknowledged for you.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats._turns import call_user
from txnats.errors import (
    ConsumerNotFoundError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    JetStreamError,
    NatsError,
    NoHeartbeatError,
    SlowConsumerError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.jetstream._api import consumer_gone
from txnats.jetstream._gone import notices_for
from txnats.jetstream.config import ConsumerConfig
from txnats.jetstream.msg import JsMsg
from txnats.protocol.events import Msg

if TYPE_CHECKING:
    from txnats.jetstream.context import JetStreamContext
    from txnats.subscription import Subscription

__all__ = ["PushSubscription", "subscribe"]

log = Logger()

_NS = 1_000_000_000
#: The heartbeat asked for when ``flow_control`` is on and none was given (the server
#: wants both).
DEFAULT_FC_HEARTBEAT = 5.0


def field(obj: Any, name: str) -> Any:
    """A field of a server answer, a dict or a typed info (``None`` if absent)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def subscribe(
    js: JetStreamContext,
    subject: str,
    handler: Callable[[JsMsg], object] | None = None,
    *,
    durable: str | None = None,
    queue: str | None = None,
    stream: str | None = None,
    deliver_policy: str = "all",
    opt_start_seq: int | None = None,
    flow_control: bool = False,
    idle_heartbeat: float | None = None,
    manual_ack: bool = False,
    ack_policy: str = "explicit",
    ack_wait: float | None = None,
    max_ack_pending: int | None = None,
    headers_only: bool = False,
    config: Mapping[str, Any] | None = None,
    error_cb: Callable[[NatsError], object] | None = None,
    pending_msgs_limit: int | None = None,
) -> Deferred[PushSubscription]:
    """See :meth:`JetStreamContext.subscribe`."""
    try:
        limit = js.client.options.pending_msgs_limit if pending_msgs_limit is None else (
            check_count("pending_msgs_limit", pending_msgs_limit)
        )
        if handler is not None and not callable(handler):
            raise InvalidArgumentTypeError(f"handler must be callable, not {handler!r}")
        if not isinstance(subject, str) or not subject:
            raise InvalidArgumentError(f"subject must be a non-empty string, not {subject!r}")
        hb = None if idle_heartbeat is None else check_timeout(
            "idle_heartbeat", idle_heartbeat, allow_none=False
        )
        if flow_control and hb is None:
            hb = DEFAULT_FC_HEARTBEAT
        if opt_start_seq is not None:
            check_count("opt_start_seq", opt_start_seq)
        wait = None if ack_wait is None else check_timeout("ack_wait", ack_wait, allow_none=False)
        if max_ack_pending is not None:
            check_count("max_ack_pending", max_ack_pending, minimum=-1)
    except NatsError as e:
        return fail(e)
    cfg: dict[str, Any] = {
        "deliver_policy": deliver_policy,
        "ack_policy": ack_policy,
        "filter_subject": subject,
        "headers_only": headers_only,
    }
    if opt_start_seq is not None:
        cfg["opt_start_seq"] = opt_start_seq
    if flow_control:
        cfg["flow_control"] = True
    if hb is not None:  # a dict of ConsumerConfig fields: durations in seconds
        cfg["idle_heartbeat"] = hb
    if wait is not None:
        cfg["ack_wait"] = wait
    if max_ack_pending is not None:
        cfg["max_ack_pending"] = max_ack_pending
    if queue:
        cfg["deliver_group"] = queue
        durable = durable or queue  # as nats.go: a deliver group shares one durable
    if durable:
        cfg["durable_name"] = durable
    cfg.update(config or {})
    try:  # every field checked before a stream is looked up or an inbox subscribed
        ConsumerConfig.build(None, cfg, "config")
    except NatsError as e:
        return fail(e)
    binder = _Binder(js, subject, handler, queue, stream, durable, cfg, manual_ack, error_cb, hb)
    binder.limit = limit
    return binder.run()


class _Binder:
    """Find the stream, bind to or create the consumer, subscribe its inbox."""

    def __init__(
        self, js: JetStreamContext, subject: str, handler: Callable[[JsMsg], object] | None,
        queue: str | None, stream: str | None, durable: str | None, cfg: dict[str, Any],
        manual_ack: bool, error_cb: Callable[[NatsError], object] | None,
        heartbeat: float | None,
    ) -> None:
        self.js, self.subject, self.handler = js, subject, handler
        self.queue, self.stream, self.durable, self.cfg = queue, stream, durable, cfg
        self.manual_ack, self.error_cb, self.heartbeat = manual_ack, error_cb, heartbeat
        self.limit = js.client.options.pending_msgs_limit

    def run(self) -> Deferred[PushSubscription]:
        d: Deferred[Any] = succeed(self.stream) if self.stream else self.js.stream_names(
            subject=self.subject
        ).addCallback(self._one_stream)
        return d.addCallback(self._with_stream)

    def _one_stream(self, names: list[str]) -> str:
        if len(names) != 1:
            raise JetStreamError(
                f"no stream takes {self.subject!r}" if not names
                else f"several streams take {self.subject!r}: {', '.join(names)} (give stream=)"
            )
        return names[0]

    def _with_stream(self, stream: str) -> Deferred[PushSubscription]:
        self.stream = stream
        if not self.durable:
            return self._create(stream)
        d = self.js.consumer_info(stream, self.durable)

        def missing(f: Failure) -> Deferred[PushSubscription]:
            f.trap(ConsumerNotFoundError)
            return self._create(stream)

        return d.addCallbacks(lambda info: self._bind(stream, info, False), missing)

    def _create(self, stream: str) -> Deferred[PushSubscription]:
        inbox = self.js.client.new_inbox()
        cfg = dict(self.cfg, deliver_subject=inbox)
        # Subscribe before the consumer exists: its first messages must find us.
        push = PushSubscription(
            self.js, stream, self.subject, self.handler, self.manual_ack,
            self.cfg.get("ack_policy") != "none", self.error_cb, self.heartbeat, self.limit,
        )
        push.listen(inbox, self.queue)
        d = self.js.add_consumer(stream, cfg)

        def created(info: Any) -> PushSubscription:
            push.bound(str(field(info, "name")), not self.durable)
            return push

        def failed(f: Failure) -> Failure:
            push.unsubscribe()
            return f

        return d.addCallbacks(created, failed)

    def _bind(self, stream: str, info: Any, created: bool) -> PushSubscription:
        cfg = field(info, "config")
        deliver = field(cfg, "deliver_subject")
        if not deliver:
            raise JetStreamError(f"consumer {stream}/{self.durable} is a pull consumer")
        group = field(cfg, "deliver_group") or None
        if group != (self.queue or None):
            raise JetStreamError(
                f"consumer {stream}/{self.durable} delivers to group {group!r},"
                f" not {self.queue!r}"
            )
        push = PushSubscription(
            self.js, stream, self.subject, self.handler, self.manual_ack,
            str(field(cfg, "ack_policy") or "explicit").lower() != "none", self.error_cb,
            _seconds(field(cfg, "idle_heartbeat")), self.limit,
        )
        push.listen(str(deliver), self.queue)
        push.bound(str(field(info, "name")), created)
        return push


def _seconds(value: Any) -> float | None:
    """A duration from a consumer config: nanoseconds (dict), seconds or a timedelta."""
    if not value:
        return None
    if hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    if isinstance(value, int):
        return value / _NS
    return float(value)


class PushSubscription:
    """A push consumer's deliveries to this client: iterate it, or let its handler run.

    ``stream`` and ``consumer`` name it, ``deliver_subject`` is its inbox; counters:
    ``delivered``, ``flow_control_answered``, ``heartbeat_alarms``, ``dropped``.

    Without a handler at most ``pending_msgs_limit`` messages wait unread (the
    client's option unless given): past it a message is dropped, unacknowledged (a
    consumer that acks sends it again after its ack wait; one that acks nothing has lost
    it), and a :class:`SlowConsumerError` reported once until the reader catches up.
    A consumer that acks also bounds what it sends by its ``max_ack_pending`` (the
    server's default is 1,000): keep that below the limit and nothing is dropped.
    Flow control does not bound it: the server runs on to its next request (20,000 of
    20,000 messages were waiting unread with ``ack_policy="none"``).
    """

    def __init__(
        self, js: JetStreamContext, stream: str, subject: str,
        handler: Callable[[JsMsg], object] | None, manual_ack: bool, acks: bool,
        error_cb: Callable[[NatsError], object] | None, heartbeat: float | None,
        pending_msgs_limit: int | None = None,
    ) -> None:
        self.js = js
        self._limit = pending_msgs_limit or js.client.options.pending_msgs_limit
        self._overflowing = False
        self.dropped = 0
        self.stream = stream
        self.subject = subject
        self.consumer = ""
        self.deliver_subject = ""
        self._client = js.client
        self._handler = handler
        self._auto_ack = handler is not None and not manual_ack and acks
        self._error_cb = error_cb
        self._heartbeat = heartbeat
        self._delete_on_end = False
        self._sub: Subscription | None = None
        self._queue: deque[JsMsg | str] = deque()
        self._unread = 0  # messages in _queue (it holds flow control replies too)
        self._read_waiters: list[Deferred[None]] = []
        self._waiters: deque[Deferred[JsMsg]] = deque()
        self._timer: IDelayedCall | None = None
        self._last = 0.0
        self._connected = True
        self._unlisten: Callable[[], None] | None = None
        self._checking = False  # a consumer-info request is under way
        self._asked = False  # asked once in this silence already
        self._unwatch: Callable[[], None] | None = None
        self._end_error: NatsError | None = None
        self.delivered = 0
        self.flow_control_answered = 0
        self.heartbeat_alarms = 0

    # ------------------------------------------------------------------ setup
    def listen(self, inbox: str, queue: str | None) -> None:
        """Subscribe to the deliver subject (before or after the consumer exists)."""
        self.deliver_subject = inbox
        # With a handler the inbox's mailbox holds what waits: it takes the limit.
        # Without, the mailbox only passes messages on to our queue, which takes it.
        limit = self._limit if self._handler is not None else None
        self._sub = sub = self._client.subscribe(
            inbox, self._on_msg, queue=queue, pending_msgs_limit=limit
        )
        # However it ends (the client's drain or close too), readers waiting are told.
        sub.when_ended().addBoth(lambda _: self._ended())
        self._unlisten = self._client.add_status_listener(self._on_state)
        self._unwatch = notices_for(self._client).watch(self.stream, self._notice)
        self._last = self._client.clock.seconds()
        self._arm()

    def _notice(self, consumer: str) -> None:
        """A deletion advisory for our stream, or for a consumer of it: ask."""
        if not consumer or consumer == self.consumer:
            self._check_consumer()

    def bound(self, consumer: str, delete_on_end: bool) -> None:
        """The consumer exists: remember its name (and whether we made it ephemeral)."""
        self.consumer = consumer
        self._delete_on_end = delete_on_end

    @property
    def is_active(self) -> bool:
        return self._sub is not None and self._sub.is_active

    def consumer_info(self) -> Deferred[Any]:
        """The consumer's info."""
        return self.js.consumer_info(self.stream, self.consumer)

    # ------------------------------------------------------------------ ending
    def unsubscribe(self) -> None:
        """Stop now; an ephemeral consumer made by :func:`subscribe` is deleted."""
        if self._sub is not None and self._sub.is_active:
            self._sub.unsubscribe()
        self._ended()

    def drain(self) -> Deferred[None]:
        """Unsubscribe once what was delivered is handled (or, without a handler, read:
        fires once the reader has taken the last message)."""
        if self._sub is None or not self._sub.is_active:
            self._ended()
            return succeed(None)
        d = self._sub.drain()

        def done(result: object) -> object:
            if self._handler is None and self._unread:
                read: Deferred[None] = Deferred()
                self._read_waiters.append(read)
                return read.addBoth(lambda _: self._ended())
            self._ended()
            return None

        return d.addBoth(done)

    def _ended(self) -> None:
        self._disarm()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.errback(self._end_error or SubscriptionClosedError("push subscription ended"))
        if self._delete_on_end and self.consumer and not self._client.is_closed:
            self._delete_on_end = False
            self.js.delete_consumer(self.stream, self.consumer).addErrback(lambda _: None)

    # ------------------------------------------------------------------ heartbeats
    def _on_state(self, state: str) -> None:
        if state == "CONNECTED":
            self._connected = True
            self._last = self._client.clock.seconds()
            self._arm()
        elif state == "CLOSED":
            self._ended()
        else:
            self._connected = False
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        if self._heartbeat and self._connected and self.is_active:
            self._timer = self._client.clock.callLater(self._heartbeat, self._check)

    def _disarm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _check(self) -> None:
        self._timer = None
        if not self._heartbeat or not self._connected or not self.is_active:
            return
        clock = self._client.clock
        quiet = clock.seconds() - self._last
        hb = self._heartbeat
        limit = 2 * hb
        if quiet >= limit:
            self.heartbeat_alarms += 1
            self._report(NoHeartbeatError(
                f"push consumer {self.stream}/{self.consumer}: nothing received for"
                f" {quiet:.1f} s (idle heartbeat {hb:g} s)"
            ))
            self._last = clock.seconds()
            quiet = 0.0
            if not self._asked:
                self._check_consumer()
            self._asked = False
        elif quiet >= hb and not self._asked:
            # The first missed heartbeat: is the consumer (or its stream) gone?
            self._asked = True
            self._check_consumer()
        self._timer = clock.callLater((hb if quiet < hb else limit) - quiet, self._check)

    def _check_consumer(self) -> None:
        """Silence: ask whether the consumer still exists. One that is gone (deleted,
        or lost with a server's restart) will deliver nothing more: end, saying so."""
        if self._checking or not self.consumer:
            return
        self._checking = True

        def answered(gone: ConsumerNotFoundError | None) -> None:
            self._checking = False
            if gone is not None and self.is_active:
                self._end_error = gone
                self._report(gone)
                self.unsubscribe()

        consumer_gone(self.consumer_info(), self.stream, self.consumer,
                      "push consumer").addCallback(answered)

    def _report(self, error: NatsError) -> None:
        cb = self._error_cb if self._error_cb is not None else self._client.options.error_cb
        log.info("Push consumer {stream}/{consumer}: {error}", stream=self.stream,
                 consumer=self.consumer, error=str(error))
        self._client.schedule(call_user, "error", cb, error)

    # ------------------------------------------------------------------ delivery
    def _on_msg(self, msg: Msg) -> Deferred[Any] | None:
        self._last = self._client.clock.seconds()
        self._asked = False
        h = msg.headers
        if h is not None and h.status is not None:
            if h.status == 100:
                stalled = h.get("Nats-Consumer-Stalled")
                if stalled:
                    self._client.publish(stalled, b"")
                if msg.reply:  # a flow control request: answer once what came before is done
                    if self._handler is None and self._queue:
                        self._queue.append(msg.reply)
                    else:
                        self._answer_fc(msg.reply)
                return None
            self._report(JetStreamError(
                f"push consumer {self.stream}/{self.consumer}: status {h.status}"
                f" {h.description or ''}".strip()
            ))
            return None
        m = JsMsg(msg, self._client)
        if self._handler is None:
            if self._waiters:
                self.delivered += 1
                self._waiters.popleft().callback(m)
            elif self._unread >= self._limit:
                self._overflow(m)
            else:
                self._queue.append(m)
                self._unread += 1
            return None
        self.delivered += 1
        return self._handle(m)

    def _overflow(self, m: JsMsg) -> None:
        self.dropped += 1
        if not self._overflowing:
            self._overflowing = True
            sid = self._sub.sid if self._sub is not None else 0
            self._report(SlowConsumerError(
                f"push consumer {self.stream}/{self.consumer}: {self._unread} messages"
                f" unread (pending_msgs_limit); dropping {m.subject!r} and what follows"
                " until the reader catches up", sid=sid, subject=self.deliver_subject,
                dropped=self.dropped,
            ))

    def _answer_fc(self, reply: str) -> None:
        try:
            self._client.publish(reply, b"")
            self.flow_control_answered += 1
        except NatsError as e:
            self._report(e)

    def _handle(self, m: JsMsg) -> Deferred[Any] | None:
        assert self._handler is not None
        try:
            result = self._handler(m)
        except Exception as e:
            self._failed(Failure(e), m)
            return None
        if isinstance(result, Deferred) or inspect.iscoroutine(result):
            d = result if isinstance(result, Deferred) else ensureDeferred(result)
            return d.addCallbacks(lambda _: self._ack(m), lambda f: self._failed(f, m))
        self._ack(m)
        return None

    def _ack(self, m: JsMsg) -> None:
        if self._auto_ack:
            try:
                m.ack()
            except JetStreamError:
                pass  # the handler acknowledged it itself

    def _failed(self, f: Failure, m: JsMsg) -> None:
        """A handler failure: reported, and the message not acknowledged (the server
        sends it again after its ack wait)."""
        log.failure("Push consumer handler failed on {subject}", f, subject=m.subject)
        err = JetStreamError(f"push consumer handler failed on {m.subject!r}: {f.value!r}")
        err.__cause__ = f.value
        self._report(err)

    # ------------------------------------------------------------------ reading
    def _take(self) -> JsMsg | None:
        q = self._queue
        while q:
            item = q.popleft()
            if isinstance(item, str):
                self._answer_fc(item)
                continue
            self.delivered += 1
            self._unread -= 1
            if self._unread < self._limit:
                self._overflowing = False
            while q and isinstance(q[0], str):  # answer what this message was waiting on
                self._answer_fc(q.popleft())  # type: ignore[arg-type]
            if not self._unread and self._read_waiters:
                waiters, self._read_waiters = self._read_waiters, []
                for w in waiters:
                    w.callback(None)
            return item
        return None

    def next_msg(self, timeout: float | None = None) -> Deferred[JsMsg]:
        """The next message (for a subscription without a handler); fails with
        :class:`TimeoutError` after ``timeout`` seconds, with
        :class:`SubscriptionClosedError` once unsubscribed and nothing is left (with
        :class:`ConsumerNotFoundError` if it ended because its consumer was gone)."""
        try:
            check_timeout("timeout", timeout)
            if self._handler is not None:
                raise InvalidArgumentError("next_msg() is for subscriptions without a handler")
        except NatsError as e:
            return fail(e)
        m = self._take()
        if m is not None:
            return succeed(m)
        if not self.is_active:
            return fail(self._end_error or SubscriptionClosedError("push subscription ended"))
        d: Deferred[JsMsg] = Deferred(lambda d: self._waiters.remove(d))
        self._waiters.append(d)
        if timeout is not None:
            timer = self._client.clock.callLater(timeout, self._expire, d, timeout)

            def stop_timer(result: Any) -> Any:
                if timer.active():
                    timer.cancel()
                return result

            d.addBoth(stop_timer)
        return d

    def _expire(self, d: Deferred[JsMsg], timeout: float) -> None:
        if d in self._waiters:
            self._waiters.remove(d)
            d.errback(TimeoutError(f"no message on {self.subject!r} within {timeout:g} s"))

    def __aiter__(self) -> PushSubscription:
        return self

    async def __anext__(self) -> JsMsg:
        try:
            return await self.next_msg()
        except SubscriptionClosedError:
            raise StopAsyncIteration from None
