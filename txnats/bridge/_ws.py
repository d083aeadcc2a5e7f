"""``GET /v1/subscribe/<subject>`` as a WebSocket (autobahn), inside twisted.web.

Text frames, JSON: ``{"subscribed": subject}`` once the server has the subscription,
one message per NATS message (see :func:`~txnats.bridge._stream.message_dict`), and
``{"dropped": n}`` where n messages were dropped because the client did not keep up.
What the client sends is ignored, and so bounded: a frame or a message over
:data:`MAX_CLIENT_MESSAGE` bytes fails the connection with close code 1009 (message too
big) as soon as its header announces it, and the bytes that still come are read and
dropped, never held; per-message compression is not offered (no inflating a small frame
into a large one). The bridge pings an idle connection every
:data:`~txnats.bridge._sse.KEEPALIVE` seconds (as SSE streams get keep-alive comments) and
drops a client that has not answered for twice that.
"""

from __future__ import annotations

import json
from typing import Any

from autobahn.twisted.resource import WebSocketResource
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.server import Request

from txnats.bridge import _sse
from txnats.bridge._stream import Pump, dropped_json, message_dict
from txnats.bridge.context import BridgeContext
from txnats.errors import NatsError
from txnats.protocol.events import Msg

__all__ = ["MAX_CLIENT_MESSAGE", "serve_websocket"]

log = Logger()

#: The largest frame, and message, a client may send, in bytes (the bridge reads none:
#: pings, pongs and close frames are far smaller).
MAX_CLIENT_MESSAGE = 4096


class _SubscribeProtocol(WebSocketServerProtocol):  # type: ignore[misc]
    """One WebSocket client: a subscription feeding a :class:`Pump` on the transport."""

    def onOpen(self) -> None:
        ctx: BridgeContext = self.factory.bridge_ctx
        subject: str = self.factory.bridge_subject
        self._ctx = ctx
        self._closed = False
        metrics = ctx.metrics
        try:
            nc = ctx.nats()
        except Exception as e:
            self.sendClose(4503, str(e)[:100])  # 4000-4999: for applications
            return
        self.pump = Pump(
            self._send,
            lambda msg: json.dumps(message_dict(msg)).encode(), dropped_json,
            max_msgs=ctx.config.stream_queue, max_bytes=ctx.config.stream_queue_bytes,
            on_drop=metrics.drops.labels("websocket").inc,
        )

        def on_msg(msg: Msg) -> None:
            metrics.count("subscribe", "out", len(msg.data))
            self.pump.offer(msg)

        try:
            self._sub = nc.subscribe(subject, on_msg, queue=self.factory.bridge_queue)
        except NatsError as e:  # checked before the upgrade; the client may still refuse
            del self.pump
            self.sendClose(4400 if isinstance(e, ValueError) else 4503, str(e)[:100])
            return
        # The transport still has the HTTP channel it was taken from as its producer.
        self.transport.unregisterProducer()
        self.transport.registerProducer(self.pump, True)
        ctx.streams.add(self)
        metrics.streams.labels("websocket").inc()
        sent = json.dumps({"subscribed": subject}).encode()
        nc.flush().addCallbacks(lambda _: self._confirm(sent), self._flush_failed)

    def _send(self, frame: bytes) -> None:
        # Closing (the handshake under way: a close sent or received) until onClose: the
        # client will read nothing more, and autobahn refuses to send.
        if self.state == self.STATE_OPEN:
            self.sendMessage(frame, isBinary=False)

    def _confirm(self, frame: bytes) -> None:
        # A dropped connection is CLOSED at once, but onClose only follows once the
        # transport has gone.
        if not self._closed and self.state == self.STATE_OPEN:
            self.sendMessage(frame, isBinary=False)

    def _flush_failed(self, failure: Failure) -> None:
        log.info("WebSocket subscription not confirmed: {error}",
                 error=failure.getErrorMessage())
        self.close()

    # What the client sends is never assembled: autobahn's frame hooks count it (its
    # maxFramePayloadSize bounds each frame; this bounds the message) and drop it.
    # (autobahn's maxMessagePayloadSize would bound the messages the bridge sends too.)
    _incoming = 0

    def onMessageBegin(self, isBinary: bool) -> None:
        super().onMessageBegin(isBinary)
        self._incoming = 0

    def onMessageFrameBegin(self, length: int) -> None:
        super().onMessageFrameBegin(length)
        self._incoming += length
        if self._incoming > MAX_CLIENT_MESSAGE and not self.failedByMe:
            self._fail_connection(
                self.CLOSE_STATUS_CODE_MESSAGE_TOO_BIG,
                f"messages to nats-bridge are at most {MAX_CLIENT_MESSAGE} bytes")

    def onMessageFrameData(self, payload: bytes) -> None:
        """Dropped: the bridge does nothing with what the client sends."""

    def onMessageFrameEnd(self) -> None:
        """Nothing was kept."""

    def onMessageEnd(self) -> None:
        """Nothing to deliver."""
        self._incoming = 0

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        """Nothing to do with what the client sends."""

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if getattr(self, "_ctx", None) is None or self._closed or not hasattr(self, "pump"):
            return
        self._closed = True
        self.pump.stopProducing()
        self._ctx.streams.discard(self)
        self._ctx.metrics.streams.labels("websocket").dec()
        try:
            self._sub.unsubscribe()
        except Exception as e:  # the client is closed already: nothing to withdraw
            log.debug("unsubscribe after WebSocket end: {error}", error=e)

    def close(self) -> None:
        """Close (code 1000: autobahn lets applications send no 1001) as the bridge stops."""
        if not self._closed:
            self.sendClose(1000, "nats-bridge is stopping")


def serve_websocket(
    ctx: BridgeContext, request: Request, subject: str, queue: str | None
) -> Any:
    """Take the request's connection over as a WebSocket subscribed to ``subject``."""
    factory = WebSocketServerFactory()
    factory.protocol = _SubscribeProtocol
    # Proxies close quiet connections; a client that stopped answering pings is gone.
    factory.setProtocolOptions(
        autoPingInterval=_sse.KEEPALIVE, autoPingTimeout=2 * _sse.KEEPALIVE,
        maxFramePayloadSize=MAX_CLIENT_MESSAGE,
        failByDrop=False,  # a close frame (1009) first, so the client learns why
    )
    factory.bridge_ctx = ctx
    factory.bridge_subject = subject
    factory.bridge_queue = queue
    return WebSocketResource(factory).render(request)
