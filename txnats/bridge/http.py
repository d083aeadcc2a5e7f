"""The bridge's HTTP side: the site, the request with a body limit, and the resource
tree (operations endpoints, the status page, and ``/v1``, the API in ``routes.py``).

Every response but a stream's is counted per status code, and its duration observed
per route; access lines go to ``twisted.logger`` with the path only (never the query,
where a browser's token may be).
"""

from __future__ import annotations

import inspect
import json
from typing import Any, cast
from weakref import WeakSet

from prometheus_client.twisted import MetricsResource
from twisted.logger import Logger
from twisted.web import resource, server

from txnats.bridge._answers import error_body
from txnats.bridge._channel import BridgeChannel
from txnats.bridge.context import BridgeContext
from txnats.bridge.routes import Api
from txnats.bridge.security import token_matches
from txnats.bridge.status import StatusPage

__all__ = ["BridgeRequest", "BridgeSite", "Root", "error_body", "make_site"]

log = Logger()

#: Routes whose responses are streams: counted, but not in the latency histogram.
STREAM_ROUTES = frozenset({"subscribe"})


class BridgeRequest(server.Request):
    """A request whose body is held only up to the site's limit.

    A ``Content-Length`` over the limit, or more bytes than it as a chunked body
    streams in: the request is answered 413 ``body_too_large`` at once, before any route
    runs, and the connection closed; the rest of the body is never held (see
    :meth:`~txnats.bridge._channel.BridgeChannel.refuse`). A client that sent ``Expect:
    100-continue`` with a ``Content-Length`` over the limit (as curl does for large
    bodies) never gets ``100 Continue``, so it never sends the body. While the bridge
    stops, every response ends its connection (``Connection: close``).
    """

    too_large = False
    body_seen = 0
    route = "other"
    started = 0.0

    def _site(self) -> Any:
        channel: Any = self.channel
        return channel.site

    def _limit(self) -> int:
        limit: int = self._site().max_body
        return limit

    def _too_large(self) -> None:
        self.too_large = True
        channel: Any = self.channel
        channel.refuse(413, "body_too_large",
                       f"request body over the limit of {self._limit()} bytes")

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > self._limit():
            self.requestHeaders.removeHeader(b"expect")  # no 100 Continue: no body
            self._too_large()
            length = 0
        super().gotLength(length)  # type: ignore[no-untyped-call]

    def handleContentChunk(self, data: bytes) -> None:
        if self.too_large:
            return
        self.body_seen += len(data)
        if self.body_seen > self._limit():
            self._too_large()
            return
        super().handleContentChunk(data)  # type: ignore[no-untyped-call]

    def process(self) -> None:
        if self.too_large:  # answered already, by the channel
            return
        site = self._site()
        self.started = site.ctx.reactor.seconds()
        if site.ctx.stopping:
            channel: Any = self.channel
            channel.close_after_response()
            self.setHeader(b"connection", b"close")  # type: ignore[no-untyped-call]
        super().process()  # type: ignore[no-untyped-call]


class BridgeSite(server.Site):
    """The site: its connections are :class:`~txnats.bridge._channel.BridgeChannel` objects
    (bounded heads, an answer for each refusal), its requests :class:`BridgeRequest` objects;
    it logs and counts them. A connection idle for ``ctx.config.idle_timeout`` seconds
    is closed (408 if a request on it was partly sent).

    :param root: the resource tree.
    :param ctx: the bridge's shared state.
    """

    protocol = BridgeChannel  # type: ignore[assignment]  # (no HTTP/2 negotiation)

    def __init__(self, root: resource.Resource, ctx: BridgeContext) -> None:
        kwargs: dict[str, Any] = {"timeout": ctx.config.idle_timeout, "reactor": ctx.reactor}
        if "parsePOSTFormSubmission" in inspect.signature(server.Site.__init__).parameters:
            kwargs["parsePOSTFormSubmission"] = False  # bodies are payloads, not forms
        super().__init__(root, requestFactory=BridgeRequest, **kwargs)  # type: ignore[no-untyped-call]
        self.ctx = ctx
        self.max_body = ctx.config.max_body
        #: The open connections (weakly: one a WebSocket took over is never closed here).
        self.channels: WeakSet[BridgeChannel] = WeakSet()

    def buildProtocol(self, addr: Any) -> Any:
        channel = super().buildProtocol(addr)  # type: ignore[no-untyped-call]
        self.channels.add(channel)
        return channel

    def close_idle(self) -> int:
        """Close every connection that has no request under way (the bridge stops);
        returns how many."""
        closed = 0
        for channel in list(self.channels):
            if channel.transport is not None and not channel.requests:
                channel.transport.loseConnection()
                closed += 1
        return closed

    def log(self, request: Any) -> None:
        code = int(request.code)
        route = getattr(request, "route", "other")
        metrics = self.ctx.metrics
        metrics.responses.labels(str(code)).inc()
        started = getattr(request, "started", 0.0)
        if started and route not in STREAM_ROUTES:
            metrics.latency.labels(route).observe(self.ctx.reactor.seconds() - started)
        if code < 400 and not self.ctx.config.access_log:
            return
        log.info(
            "{method} {path} {code} {route}", method=request.method.decode("ascii", "replace"),
            path=request.path.decode("utf-8", "replace"), code=code, route=route,
        )


class _Error(resource.Resource):
    isLeaf = True

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._args = (status, code, message)

    def render(self, request: server.Request) -> bytes:
        return error_body(request, *self._args)


class _Health(resource.Resource):
    """``/healthz``: 200 while the process serves; ``/readyz``: 200 while connected."""

    isLeaf = True

    def __init__(self, ctx: BridgeContext, *, ready: bool) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._ctx = ctx
        self._ready = ready

    def render_GET(self, request: server.Request) -> bytes:
        request.route = "readyz" if self._ready else "healthz"  # type: ignore[attr-defined]
        request.setHeader(b"content-type", b"application/json")
        if not self._ready:
            return b'{"status": "ok"}\n'
        client = self._ctx.client
        state = str(client.state) if client is not None else "STARTING"
        if self._ctx.stopping:
            state = "STOPPING"
        ok = self._ctx.ready()
        request.setResponseCode(200 if ok else 503)
        return json.dumps({"ready": ok, "state": state}).encode() + b"\n"


def _given_token(request: server.Request) -> bytes | None:
    """The token the client presents, as the bytes it sent: ``Authorization: Bearer``,
    else ``?access_token=`` (browsers cannot set headers on EventSource or WebSocket)."""
    header = request.getHeader(b"authorization")
    if header is not None:
        scheme, _, value = header.partition(b" ")
        if scheme.lower() == b"bearer":
            return value.strip()
        return None
    values = (request.args or {}).get(b"access_token")
    return values[0] if values else None


class Root(resource.Resource):
    """``/`` (status page), ``/healthz``, ``/readyz``, ``/metrics`` and ``/v1/...``;
    the last two behind the token when there is one."""

    def __init__(self, ctx: BridgeContext) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._ctx = ctx
        self._open: dict[bytes, resource.Resource] = {
            b"": StatusPage(ctx),
            b"healthz": _Health(ctx, ready=False),
            b"readyz": _Health(ctx, ready=True),
        }
        self._guarded: dict[bytes, resource.Resource] = {
            b"metrics": cast(resource.Resource, MetricsResource(  # type: ignore[no-untyped-call]
                registry=ctx.metrics.registry)),
            b"v1": Api(ctx),
        }

    def getChild(self, path: bytes, request: server.Request) -> resource.Resource:
        found = self._open.get(path)
        if found is not None:
            return found
        guarded = self._guarded.get(path)
        if guarded is None:
            return _Error(404, "not_found", "no such resource")
        request.route = path.decode()  # type: ignore[attr-defined]
        token = self._ctx.config.auth_token
        if token is not None and not token_matches(token, _given_token(request)):
            request.setHeader(b"www-authenticate", b'Bearer realm="nats-bridge"')
            return _Error(401, "unauthorized", "a valid token is required")
        return guarded


def make_site(ctx: BridgeContext) -> BridgeSite:
    """The bridge's whole site."""
    return BridgeSite(Root(ctx), ctx)
