"""``/v1``: the bridge's HTTP API.

- ``POST /v1/publish/<subject>``: the body is the payload, ``Nats-Header-*`` request
  headers become NATS headers; 202 once handed to the client.
- ``POST /v1/request/<subject>?timeout=SECS``: the reply's body, its headers as
  ``Nats-Header-*``; 504 on timeout, 503 when nobody listens.
- ``GET /v1/subscribe/<subject>[?queue=Q]``: Server-Sent Events, or a WebSocket when the
  request asks to upgrade.
- ``POST /v1/js/publish/<subject>[?msg_id=ID]``: the stream's acknowledgement as JSON.
- ``GET|PUT|DELETE /v1/kv/<bucket>/<key>``: read, write, delete a key.
- ``GET /v1/services[/ping|/stats][?name=N&timeout=SECS]``: the NATS services
  (ADR-32) that answer discovery: ``{"services": [...]}``, their INFO (default), PING
  or STATS answers.
- ``GET /v1/status``: what the status page shows, as JSON.

Bad subjects, headers and arguments are answered 400 with ``{"error", "code"}``, a
subject the allow/deny lists refuse 403, before anything is sent to NATS.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import resource, server

from txnats import errors
from txnats._args import check_timeout
from txnats.bridge._sse import SseStream
from txnats.bridge.context import BridgeContext
from txnats.bridge.security import check_subject
from txnats.bridge.status import status_dict
from txnats.protocol.commands import queue_name
from txnats.protocol.headers import Headers

__all__ = ["HEADER_PREFIX", "Api", "nats_headers"]

log = Logger()

#: HTTP headers with this prefix carry NATS headers, both ways.
HEADER_PREFIX = b"nats-header-"

DEFAULT_REQUEST_TIMEOUT = 5.0

#: Errors and how they are answered: (class, HTTP status, code). First match wins.
_ERRORS: tuple[tuple[type[BaseException], int, str], ...] = (
    (errors.BadSubjectError, 400, "bad_subject"),
    (errors.BadHeaderError, 400, "bad_header"),
    (errors.MaxPayloadError, 413, "max_payload"),
    (errors.InvalidArgumentError, 400, "bad_argument"),
    (errors.KeyNotFoundError, 404, "key_not_found"),
    (errors.BucketNotFoundError, 404, "bucket_not_found"),
    (errors.NoStreamResponseError, 503, "no_stream"),
    (errors.NoRespondersError, 503, "no_responders"),
    (errors.JetStreamNotEnabledError, 503, "jetstream_not_enabled"),
    (errors.TimeoutError, 504, "timeout"),
    (errors.APIError, 400, "jetstream_error"),
    (errors.OutboundBufferFullError, 503, "busy"),
    (errors.ConnectionClosedError, 503, "not_connected"),
    (errors.ConnectionDrainingError, 503, "not_connected"),
)


class HttpError(Exception):
    """An answer decided before any route ran (403, 404, 405)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def nats_headers(request: server.Request) -> Headers | None:
    """The ``Nats-Header-*`` request headers as NATS headers (None if there are none).

    :raises BadHeaderError: for a name or value NATS cannot carry.
    """
    found: Headers | None = None
    for raw_name, values in request.requestHeaders.getAllRawHeaders():
        if not raw_name.lower().startswith(HEADER_PREFIX):
            continue
        name = raw_name[len(HEADER_PREFIX):].decode("latin-1")
        for value in values:
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                raise errors.BadHeaderError(f"value of header {name!r} is not UTF-8") from None
            if found is None:
                found = Headers()
            found.add(name, text)
    return found


def _query(request: server.Request, name: str) -> str | None:
    values = (request.args or {}).get(name.encode())
    return values[0].decode("utf-8", "replace") if values else None


def _json(request: server.Request, status: int, body: object) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    return json.dumps(body).encode() + b"\n"


def _error(request: server.Request, status: int, code: str, message: str) -> bytes:
    return _json(request, status, {"error": message, "code": code})


class Api(resource.Resource):
    """Everything under ``/v1``, dispatched on the method and the path's first parts."""

    isLeaf = True

    def __init__(self, ctx: BridgeContext) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._ctx = ctx

    # -- dispatch -------------------------------------------------------------------
    def render(self, request: server.Request) -> bytes | int:
        method = request.method.decode("ascii", "replace")
        parts = [p.decode("utf-8", "replace") for p in request.postpath or []]
        try:
            return self._dispatch(request, method, parts)
        except HttpError as e:
            return _error(request, e.status, e.code, str(e))
        except Exception as e:
            return self._answer_error(request, e)

    def _dispatch(self, request: server.Request, method: str, parts: list[str]) -> bytes | int:
        kind = parts[0] if parts else ""
        routes: dict[tuple[str, str], Callable[[server.Request, list[str]], bytes | int]] = {
            ("POST", "publish"): self._publish,
            ("POST", "request"): self._request,
            ("GET", "subscribe"): self._subscribe,
            ("POST", "js"): self._js,
            ("GET", "kv"): self._kv,
            ("PUT", "kv"): self._kv,
            ("DELETE", "kv"): self._kv,
            ("GET", "status"): self._status,
            ("GET", "services"): self._services,
        }
        handler = routes.get((method, kind))
        if handler is not None:
            request.route = kind  # type: ignore[attr-defined]
            return handler(request, parts[1:])
        if any(k == kind for _, k in routes):
            allowed = ", ".join(sorted(m for m, k in routes if k == kind))
            request.setHeader(b"allow", allowed.encode())
            raise HttpError(405, "method_not_allowed", f"{method} not allowed here: {allowed}")
        raise HttpError(404, "not_found", f"no such route: /v1/{'/'.join(parts)}")

    def _subject(self, route: str, parts: list[str], *, wildcards: bool = False) -> str:
        """The subject from the rest of the path (``/`` is a subject character), checked
        and allowed for ``route``."""
        subject = "/".join(parts)
        check_subject(subject, wildcards=wildcards)
        if not self._ctx.config.policy.permits(route, subject):
            raise HttpError(403, "forbidden", f"subject {subject!r} is not allowed for {route}")
        return subject

    def _answer_error(self, request: server.Request, error: BaseException) -> bytes:
        for cls, status, code in _ERRORS:
            if isinstance(error, cls):
                return _error(request, status, code, str(error))
        log.failure("nats-bridge: unexpected error on {path}", Failure(error),
                    path=request.path.decode("utf-8", "replace"))
        return _error(request, 500, "internal", "internal error")

    def _later(self, request: server.Request, d: Deferred[Any],
               done: Callable[[Any], bytes]) -> int:
        """Answer from ``d``: ``done(result)``, or the error; cancel it if the client leaves."""
        finished = [False]

        def gone(_: object) -> None:
            finished[0] = True
            d.cancel()

        request.notifyFinish().addErrback(gone)

        def write(body: bytes) -> None:
            if not finished[0]:
                finished[0] = True
                request.write(body)
                request.finish()

        def ok(result: Any) -> None:
            write(done(result))

        def failed(f: Failure) -> None:
            if not finished[0]:
                write(self._answer_error(request, f.value or Exception(f.getErrorMessage())))

        d.addCallbacks(ok, failed)
        return server.NOT_DONE_YET

    # -- routes ---------------------------------------------------------------------
    def _publish(self, request: server.Request, parts: list[str]) -> bytes:
        subject = self._subject("publish", parts)
        headers = nats_headers(request)
        data = request.content.read() if request.content is not None else b""
        self._ctx.nats().publish(subject, data, headers=headers)
        self._ctx.metrics.count("publish", "in", len(data))
        return _json(request, 202, {"published": subject, "bytes": len(data)})

    def _timeout(self, request: server.Request) -> float:
        text = _query(request, "timeout")
        if text is None:
            return DEFAULT_REQUEST_TIMEOUT
        try:
            value = float(text)
        except ValueError:
            raise errors.InvalidArgumentError(f"timeout must be seconds, not {text!r}") from None
        timeout = check_timeout("timeout", value, allow_none=False)
        assert timeout is not None
        limit = self._ctx.config.max_request_timeout
        if timeout > limit:
            raise errors.InvalidArgumentError(f"timeout must be at most {limit:g} seconds")
        return timeout

    def _request(self, request: server.Request, parts: list[str]) -> int:
        subject = self._subject("request", parts)
        headers = nats_headers(request)
        timeout = self._timeout(request)
        data = request.content.read() if request.content is not None else b""
        d = self._ctx.nats().request(subject, data, timeout=timeout, headers=headers)
        self._ctx.metrics.count("request", "in", len(data))

        def done(msg: Any) -> bytes:
            self._ctx.metrics.count("request", "out", len(msg.data))
            request.setResponseCode(200)
            request.setHeader(b"content-type", b"application/octet-stream")
            for name, value in (msg.headers.multi_items() if msg.headers else []):
                request.responseHeaders.addRawHeader(
                    b"Nats-Header-" + name.encode("latin-1", "replace"),
                    value.encode("utf-8"),
                )
            body: bytes = msg.data
            return body

        return self._later(request, d, done)

    def _subscribe(self, request: server.Request, parts: list[str]) -> bytes | int:
        subject = self._subject("subscribe", parts, wildcards=True)
        queue = _query(request, "queue")
        if queue is not None:
            try:
                queue_name(queue)
            except errors.BadSubjectError as e:
                raise errors.InvalidArgumentError(str(e)) from None
        self._ctx.nats()
        upgrade = request.getHeader(b"upgrade")
        if upgrade is not None and upgrade.lower() == b"websocket":
            from txnats.bridge._ws import serve_websocket

            result: bytes | int = serve_websocket(self._ctx, request, subject, queue)
            return result
        SseStream(self._ctx, request, subject, queue)
        return server.NOT_DONE_YET

    def _js(self, request: server.Request, parts: list[str]) -> int:
        if not parts or parts[0] != "publish":
            raise HttpError(404, "not_found", "the JetStream route is /v1/js/publish/<subject>")
        subject = self._subject("js", parts[1:])
        headers = nats_headers(request)
        data = request.content.read() if request.content is not None else b""
        js = self._ctx.nats().jetstream()
        d = ensureDeferred(js.publish(subject, data, headers=headers,
                                      msg_id=_query(request, "msg_id")))
        self._ctx.metrics.count("js", "in", len(data))

        def done(ack: Any) -> bytes:
            return _json(request, 200, {"stream": ack.stream, "seq": ack.seq,
                                        "duplicate": ack.duplicate, "domain": ack.domain})

        return self._later(request, d, done)

    def _kv(self, request: server.Request, parts: list[str]) -> int:
        if len(parts) < 2:
            raise HttpError(404, "not_found", "the key-value route is /v1/kv/<bucket>/<key>")
        bucket, key = parts[0], "/".join(parts[1:])
        from txnats.jetstream.kv import check_bucket, check_key

        check_bucket(bucket)
        check_key(key)
        if not self._ctx.config.policy.permits("kv", f"{bucket}.{key}"):
            raise HttpError(403, "forbidden", f"key {bucket}/{key} is not allowed")
        method = request.method
        data = request.content.read() if request.content is not None else b""
        d = ensureDeferred(self._kv_call(bucket, key, method, data))
        return self._later(request, d, lambda body: self._kv_done(request, method, body))

    async def _kv_call(self, bucket: str, key: str, method: bytes, data: bytes) -> Any:
        kv = self._ctx.kv.get(bucket)
        if kv is None:
            kv = await self._ctx.nats().jetstream().key_value(bucket)
            self._ctx.kv[bucket] = kv
        try:
            if method == b"GET":
                return await kv.get(key)
            if method == b"PUT":
                self._ctx.metrics.count("kv", "in", len(data))
                return await kv.put(key, data)
            return await kv.delete(key)
        except errors.BucketNotFoundError:
            self._ctx.kv.pop(bucket, None)
            raise

    def _kv_done(self, request: server.Request, method: bytes, result: Any) -> bytes:
        if method != b"GET":
            return _json(request, 200, {"revision": result})
        self._ctx.metrics.count("kv", "out", len(result.value))
        request.setHeader(b"content-type", b"application/octet-stream")
        request.setHeader(b"kv-revision", str(result.revision).encode())
        body: bytes = result.value
        return body

    def _services(self, request: server.Request, parts: list[str]) -> int:
        from txnats import micro

        verbs = {"": micro.info, "info": micro.info, "ping": micro.ping, "stats": micro.stats}
        verb = "/".join(parts)
        ask = verbs.get(verb)
        if ask is None:
            raise HttpError(404, "not_found", f"no such discovery: {verb!r} (ping, info, stats)")
        text = _query(request, "timeout")
        timeout = self._timeout(request) if text is not None else 1.0
        d = ensureDeferred(ask(self._ctx.nats(), _query(request, "name"), timeout=timeout,
                               stall=min(timeout, 0.25)))
        return self._later(request, d, lambda found: _json(
            request, 200, {"services": [r.to_dict() for r in found]}))

    def _status(self, request: server.Request, parts: list[str]) -> bytes:
        return _json(request, 200, status_dict(self._ctx))
