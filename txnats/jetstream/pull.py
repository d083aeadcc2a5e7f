"""Pull consumers: ``fetch`` a batch and ``next`` one message on request
(``CONSUMER.MSG.NEXT``), ``consume`` and ``messages`` continuously (ADR-37, in
:mod:`txnats.jetstream.consume`), with the priority groups of ADR-42."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger

from txnats._args import check_count, check_timeout
from txnats.errors import (
    APIError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NatsError,
    NoHeartbeatError,
    TimeoutError,
)
from txnats.jetstream.consume import (
    DEFAULT_EXPIRES,
    ConsumeContext,
    MessagesContext,
    check_priority,
    priority_fields,
    pull_options,
)
from txnats.jetstream.msg import JsMsg
from txnats.protocol.events import Msg

if TYPE_CHECKING:
    from txnats.jetstream.config import ConsumerInfo
    from txnats.jetstream.context import JetStreamContext
    from txnats.subscription import Subscription

__all__ = ["PullConsumer"]

log = Logger()

#: How long after a pull request's ``expires`` we give up on the server's own
#: end-of-request status (408) and end the fetch ourselves.
_GRACE = 1.0
#: A fetch whose ``expires`` is at least this long asks for idle heartbeats (as
#: nats.go does), every :data:`FETCH_HEARTBEAT` seconds.
FETCH_HEARTBEAT_FROM = 10.0
FETCH_HEARTBEAT = 5.0


class PullConsumer:
    """A handle on a pull consumer of ``stream`` named ``name``.

    ``fetch`` asks the server for up to ``batch`` messages and fires with those that
    came within ``expires`` seconds (possibly none). Messages it gathered are never
    dropped: they are handed over when the fetch ends, however it ends short of an
    error; unacknowledged ones are redelivered after the consumer's ``ack_wait``.
    ``consume`` and ``messages`` pull continuously (ADR-37); ``next`` reads one.

    ``pin_id`` is the pin the server gave this client in a priority group with the
    ``pinned_client`` policy (ADR-42; "" when none): later pulls send it back, a 423
    status clears it.
    """

    def __init__(self, js: JetStreamContext, stream: str, name: str) -> None:
        self.js = js
        self.stream = stream
        self.name = name
        self.pin_id = ""

    def info(self) -> Deferred[ConsumerInfo]:
        """The consumer's configuration and state."""
        return self.js.consumer_info(self.stream, self.name)

    def fetch(
        self, batch: int = 1, *, expires: float = 5.0, no_wait: bool = False,
        max_bytes: int | None = None, idle_heartbeat: float | None = None,
        group: str | None = None, min_pending: int | None = None,
        min_ack_pending: int | None = None, priority: int | None = None,
    ) -> Deferred[list[JsMsg]]:
        """Fetch up to ``batch`` messages, waiting at most ``expires`` seconds.

        ``no_wait=True`` returns at once with what is available. Fails with
        :class:`APIError` when the server refuses the pull (a 409: consumer deleted,
        too many waiting pulls, max bytes exceeded before any message). Cancelling the
        Deferred ends the pull: it fires with the messages that came, if any, else fails
        with ``CancelledError``.

        A fetch of ``expires`` 10 s or more asks for an idle heartbeat every 5 s (as
        nats.go does; ``idle_heartbeat`` chooses another, at most half ``expires``):
        when nothing arrives for twice that, it ends with what came, or fails with
        :class:`NoHeartbeatError` when nothing did. ``group`` (with ``min_pending``,
        ``min_ack_pending``, ``priority``) pulls as a member of a priority group
        (ADR-42).

        ``batch`` is a whole number of at least 1, ``expires`` finite seconds above zero
        (it also bounds a ``no_wait`` fetch), ``max_bytes`` a whole number of bytes (0 or
        ``None``: no limit); anything else fails with :class:`InvalidArgumentError`
        before anything is subscribed or sent.
        """
        try:
            check_count("batch", batch)
            check_timeout("expires", expires, allow_none=False)
            if max_bytes is not None:
                check_count("max_bytes", max_bytes, minimum=0)
            hb = _fetch_heartbeat(expires, idle_heartbeat, no_wait)
            check_priority(group, min_pending, min_ack_pending, priority)
        except NatsError as e:
            return fail(e)
        req: dict[str, Any] = {"batch": batch}
        if no_wait:
            # Alone: with "expires" too, the server waits for it when nothing is pending.
            req["no_wait"] = True
        else:
            req["expires"] = int(expires * 1e9)
        if max_bytes:
            req["max_bytes"] = max_bytes
        if hb:
            req["idle_heartbeat"] = int(hb * 1e9)
        req.update(priority_fields(group, min_pending, min_ack_pending, priority, self.pin_id))
        return _Fetch(self, batch, hb).start(json.dumps(req).encode(), expires)

    def next(
        self, timeout: float = DEFAULT_EXPIRES, *, idle_heartbeat: float | None = None,
        group: str | None = None, min_pending: int | None = None,
        min_ack_pending: int | None = None, priority: int | None = None,
    ) -> Deferred[JsMsg]:
        """One message: a pull of one that waits up to ``timeout`` seconds (default 30),
        sent only now (ADR-37). Fails with :class:`TimeoutError` when none came, and
        as :meth:`fetch` does otherwise."""

        try:
            check_timeout("timeout", timeout, allow_none=False)
        except NatsError as e:
            return fail(e)

        def one(msgs: list[JsMsg]) -> JsMsg:
            if not msgs:
                raise TimeoutError(f"no message from {self.stream}/{self.name} within {timeout}s")
            return msgs[0]

        return self.fetch(
            1, expires=timeout, idle_heartbeat=idle_heartbeat, group=group,
            min_pending=min_pending, min_ack_pending=min_ack_pending, priority=priority,
        ).addCallback(one)

    def consume(
        self, handler: Callable[[JsMsg], object], *, max_messages: int | None = None,
        max_bytes: int | None = None, expires: float = DEFAULT_EXPIRES,
        idle_heartbeat: float | None = None, threshold_messages: int | None = None,
        threshold_bytes: int | None = None, error_cb: Callable[[NatsError], object] | None = None,
        group: str | None = None, min_pending: int | None = None,
        min_ack_pending: int | None = None, priority: int | None = None,
    ) -> ConsumeContext:
        """Hand every message to ``handler`` as it comes, pulling continuously (ADR-37).

        ``handler(msg)`` runs once per message, in order; a Deferred or coroutine it
        returns is awaited before the next message. Up to ``max_messages`` (default
        1000) or ``max_bytes`` (not both) are asked for ahead; more are asked for when
        fewer than ``threshold_messages`` (``threshold_bytes``; default half) are left.
        Each pull lasts ``expires`` seconds (default 30, at least 1) with an idle
        heartbeat every ``idle_heartbeat`` seconds (default half ``expires``, at most
        30). Warnings (missed heartbeats, refused pulls) and the error that ends it go
        to ``error_cb`` (default: the client's). It survives reconnections and server
        restarts: it pulls again after each. ``group``, ``min_pending``,
        ``min_ack_pending`` and ``priority`` pull in a priority group (ADR-42).

        :returns: a :class:`ConsumeContext` (``stop()``, ``drain()``, ``when_done()``).
        :raises InvalidArgumentError: for a bad option, before any I/O.
        """
        if not callable(handler):
            raise InvalidArgumentTypeError(f"handler must be callable, not {handler!r}")
        opts = pull_options(
            max_messages=max_messages, max_bytes=max_bytes, expires=expires,
            idle_heartbeat=idle_heartbeat, threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes, group=group, min_pending=min_pending,
            min_ack_pending=min_ack_pending, priority=priority,
        )
        ctx = ConsumeContext(self, opts, handler, error_cb)
        ctx.start()
        return ctx

    def messages(
        self, *, max_messages: int | None = None, max_bytes: int | None = None,
        expires: float = DEFAULT_EXPIRES, idle_heartbeat: float | None = None,
        threshold_messages: int | None = None, threshold_bytes: int | None = None,
        error_cb: Callable[[NatsError], object] | None = None, group: str | None = None,
        min_pending: int | None = None, min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> MessagesContext:
        """The same continuous pull as :meth:`consume`, read with ``async for msg in
        consumer.messages()`` or ``await it.next(timeout)``. A message counts as
        processed (no longer pending) once the loop has taken it.

        :raises InvalidArgumentError: for a bad option, before any I/O.
        """
        opts = pull_options(
            max_messages=max_messages, max_bytes=max_bytes, expires=expires,
            idle_heartbeat=idle_heartbeat, threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes, group=group, min_pending=min_pending,
            min_ack_pending=min_ack_pending, priority=priority,
        )
        ctx = MessagesContext(self, opts, error_cb)
        ctx.start()
        return ctx


def _fetch_heartbeat(expires: float, idle_heartbeat: float | None, no_wait: bool) -> float:
    """The idle heartbeat a fetch asks for (0: none)."""
    if no_wait:
        return 0.0
    if idle_heartbeat is None:
        return FETCH_HEARTBEAT if expires >= FETCH_HEARTBEAT_FROM else 0.0
    hb = check_timeout("idle_heartbeat", idle_heartbeat, allow_none=False)
    assert hb is not None
    if hb > expires / 2:
        raise InvalidArgumentError(
            f"idle_heartbeat ({hb:g} s) must be at most half of expires ({expires:g} s)"
        )
    return hb


class _Fetch:
    """One ``fetch`` under way: its inbox, the messages it gathered, its Deferred, and
    the timer ending it if the server never says the pull is over."""

    def __init__(self, consumer: PullConsumer, batch: int, heartbeat: float = 0.0) -> None:
        self.consumer = consumer
        self.heartbeat = heartbeat
        self.hb_timer: IDelayedCall | None = None
        self.last = 0.0
        self.stream = consumer.stream
        self.name = consumer.name
        self.prefix = consumer.js.prefix
        self.client = consumer.js.client
        self.batch = batch
        self.got: list[JsMsg] = []
        self.done = False
        self.timer: IDelayedCall | None = None
        self.sub: Subscription | None = None
        self.d: Deferred[list[JsMsg]] = Deferred(self._cancel)

    def start(self, request: bytes, expires: float) -> Deferred[list[JsMsg]]:
        """Subscribe to a new inbox and send the pull request; the Deferred fires with
        the messages once the fetch ends."""
        client = self.client
        try:
            inbox = client.new_inbox()
            self.sub = client.subscribe(inbox, self._on_msg)
            client.publish(
                f"{self.prefix}.CONSUMER.MSG.NEXT.{self.stream}.{self.name}",
                request, reply=inbox,
            )
        except NatsError as e:
            self._end()
            return fail(e)
        self.timer = client.clock.callLater(expires + _GRACE, self._expire)
        if self.heartbeat:
            self.last = client.clock.seconds()
            self.hb_timer = client.clock.callLater(2 * self.heartbeat, self._check_heartbeat)
        return self.d

    def _check_heartbeat(self) -> None:
        self.hb_timer = None
        if self.done:
            return
        clock = self.client.clock
        quiet = clock.seconds() - self.last
        if quiet < 2 * self.heartbeat:
            self.hb_timer = clock.callLater(2 * self.heartbeat - quiet, self._check_heartbeat)
            return
        self._fail_with(NoHeartbeatError(
            f"fetch from {self.stream}/{self.name}: nothing received for {quiet:.1f} s"
            f" (idle heartbeat {self.heartbeat:g} s)"
        ))

    def _end(self) -> None:
        self.done = True
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        if self.hb_timer is not None and self.hb_timer.active():
            self.hb_timer.cancel()
        if self.sub is not None:
            self.sub.unsubscribe()

    def _finish(self) -> None:
        if not self.done:
            self._end()
            self.d.callback(self.got)

    def _fail_with(self, e: NatsError) -> None:
        if not self.done:
            self._end()
            if self.got:  # never lose what we hold: hand it over, the error is logged
                self.d.callback(self.got)
            else:
                self.d.errback(e)

    def _on_msg(self, msg: Msg) -> None:
        h = msg.headers
        if self.done:
            if h is None or h.status is None:
                # Delivered after the fetch ended (before our UNSUB reached the
                # server): not handed to anyone. Say so; an acking consumer will
                # redeliver it after its ack wait.
                log.warn(
                    "Fetch from {stream}/{consumer} had ended: a message on {subject} "
                    "was not handed over",
                    stream=self.stream, consumer=self.name, subject=msg.subject,
                )
            return
        if self.heartbeat:
            self.last = self.client.clock.seconds()
        status = None if h is None else h.status
        if status is None:
            if h is not None:
                pin = h.get("Nats-Pin-Id")
                if pin:
                    self.consumer.pin_id = pin
            self.got.append(JsMsg(msg, self.client))
            if len(self.got) >= self.batch:
                self._finish()
            return
        if status == 100:  # idle heartbeat
            return
        if status in (404, 408):  # no messages / the request expired
            self._finish()
            return
        assert h is not None
        if status == 423:  # ADR-42: the pin went to another client; the next pull asks anew
            self.consumer.pin_id = ""
        if status == 503:  # nobody takes pulls on that subject
            self._fail_with(APIError(
                f"no responders: no consumer {self.stream}/{self.name}"
                " (or no JetStream)", 503, 0,
            ))
            return
        desc = h.description or f"pull request ended with status {status}"
        if status == 409 and "Leadership Change" in desc:
            self._finish()
            return
        self._fail_with(APIError(desc, status, 0))

    def _cancel(self, d: Deferred[list[JsMsg]]) -> None:
        self._end()
        if self.got:  # as nats.go: what came is handed over; nothing came, CancelledError
            d.callback(self.got)

    def _expire(self) -> None:
        if self.got:
            self._finish()
        else:
            self._fail_with(TimeoutError(f"pull from {self.stream}/{self.name} got no answer"))
