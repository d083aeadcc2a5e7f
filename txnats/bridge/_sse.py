"""``GET /v1/subscribe/<subject>`` as Server-Sent Events.

Events: ``subscribed`` once the server has the subscription, ``message`` per NATS
message (JSON, see :func:`~txnats.bridge._stream.message_dict`), and ``dropped`` with
``{"dropped": n}`` where n messages were dropped because the client did not keep up.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.server import Request

from txnats.bridge._stream import Pump, dropped_json, message_dict
from txnats.bridge.context import BridgeContext
from txnats.protocol.events import Msg
from txnats.subscription import Subscription

__all__ = ["KEEPALIVE", "SseStream"]

log = Logger()

#: Seconds between keep-alive comments on an idle stream (proxies close quiet
#: connections; a write to a vanished client ends the stream).
KEEPALIVE = 15.0


def _event(name: str, data: bytes) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def _message_event(msg: Msg) -> bytes:
    return _event("message", json.dumps(message_dict(msg)).encode())


def _dropped_event(count: int) -> bytes:
    return _event("dropped", dropped_json(count))


class SseStream:
    """One SSE client: a subscription feeding a :class:`Pump` registered on the request.

    :param ctx: the bridge's shared state.
    :param request: the HTTP request, answered with ``text/event-stream``.
    :param subject: the subject to subscribe to (checked already).
    :param queue: a queue group, or None.
    """

    def __init__(
        self, ctx: BridgeContext, request: Request, subject: str, queue: str | None
    ) -> None:
        self._ctx = ctx
        self._request = request
        self._finished = False
        nc = ctx.nats()
        metrics = ctx.metrics
        self.pump = Pump(
            request.write, _message_event, _dropped_event,
            max_msgs=ctx.config.stream_queue, max_bytes=ctx.config.stream_queue_bytes,
            on_drop=metrics.drops.labels("sse").inc,
        )

        def on_msg(msg: Msg) -> None:
            metrics.count("subscribe", "out", len(msg.data))
            self.pump.offer(msg)

        self._sub: Subscription = nc.subscribe(subject, on_msg, queue=queue)
        request.setHeader(b"content-type", b"text/event-stream; charset=utf-8")
        request.setHeader(b"cache-control", b"no-cache")
        request.setHeader(b"x-accel-buffering", b"no")
        request.registerProducer(self.pump, True)
        request.write(b": nats-bridge\n\n")
        ctx.streams.add(self)
        metrics.streams.labels("sse").inc()
        self._beat = LoopingCall(self._keepalive)
        self._beat.clock = ctx.reactor
        self._beat.start(KEEPALIVE, now=False)
        request.notifyFinish().addBoth(self._gone)
        nc.flush().addCallbacks(lambda _: self._subscribed(subject), self._flush_failed)

    def _keepalive(self) -> None:
        if not self.pump.paused and not self._finished:
            self._request.write(b": keep-alive\n\n")

    def _subscribed(self, subject: str) -> None:
        if not self._finished:
            self._request.write(_event("subscribed", json.dumps({"subject": subject}).encode()))

    def _flush_failed(self, failure: Failure) -> None:
        log.info("SSE subscription not confirmed: {error}", error=failure.getErrorMessage())
        self.close()

    def _gone(self, _: object) -> None:
        """The client went away (or the response ended): unsubscribe."""
        if self._finished:
            return
        self._finished = True
        if self._beat.running:
            self._beat.stop()
        self.pump.stopProducing()
        self._ctx.streams.discard(self)
        self._ctx.metrics.streams.labels("sse").dec()
        try:
            self._sub.unsubscribe()
        except Exception as e:  # the client is closed already: nothing to withdraw
            log.debug("unsubscribe after SSE end: {error}", error=e)

    def close(self) -> None:
        """End the response (the bridge is stopping)."""
        if self._finished:
            return
        request: Any = self._request
        self._gone(None)
        channel = request.channel  # finish() lets go of it
        request.unregisterProducer()
        request.finish()
        if channel is not None:
            channel.loseConnection()  # no keep-alive: the bridge is going away
