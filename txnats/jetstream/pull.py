"""Pull consumers: ``fetch`` a batch of messages on request (``CONSUMER.MSG.NEXT``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger

from txnats._args import check_count, check_timeout
from txnats.errors import APIError, NatsError, TimeoutError
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


class PullConsumer:
    """A handle on a pull consumer of ``stream`` named ``name``.

    ``fetch`` asks the server for up to ``batch`` messages and fires with those that
    came within ``expires`` seconds (possibly none). Messages it gathered are never
    dropped: they are handed over when the fetch ends, however it ends short of an
    error; unacknowledged ones are redelivered after the consumer's ``ack_wait``.
    """

    def __init__(self, js: JetStreamContext, stream: str, name: str) -> None:
        self.js = js
        self.stream = stream
        self.name = name

    def info(self) -> Deferred[ConsumerInfo]:
        """The consumer's configuration and state."""
        return self.js.consumer_info(self.stream, self.name)

    def fetch(
        self, batch: int = 1, *, expires: float = 5.0, no_wait: bool = False,
        max_bytes: int | None = None,
    ) -> Deferred[list[JsMsg]]:
        """Fetch up to ``batch`` messages, waiting at most ``expires`` seconds.

        ``no_wait=True`` returns at once with what is available. Fails with
        :class:`APIError` when the server refuses the pull (a 409: consumer deleted,
        too many waiting pulls, max bytes exceeded before any message). Cancelling the
        Deferred ends the pull: it fires with the messages that came, if any, else fails
        with ``CancelledError``.

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
        return _Fetch(self, batch).start(json.dumps(req).encode(), expires)


class _Fetch:
    """One ``fetch`` under way: its inbox, the messages it gathered, its Deferred, and
    the timer ending it if the server never says the pull is over."""

    def __init__(self, consumer: PullConsumer, batch: int) -> None:
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
        return self.d

    def _end(self) -> None:
        self.done = True
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
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
        status = None if h is None else h.status
        if status is None:
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
