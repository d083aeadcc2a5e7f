"""``/v1``: the bridge's HTTP API.

- ``POST /v1/publish/<subject>``: the body is the payload, ``Nats-Header-*`` request
  headers become NATS headers; 202 once handed to the client.
- ``POST /v1/request/<subject>?timeout=SECS``: the reply's body, its headers as
  ``Nats-Header-*`` (or ``Nats-Headers-Encoded``: see :mod:`txnats.bridge._answers`);
  504 on timeout, 503 when nobody listens.
- ``GET /v1/subscribe/<subject>[?queue=Q]``: Server-Sent Events, or a WebSocket when the
  request asks to upgrade.
- ``POST /v1/js/publish/<subject>[?msg_id=ID]``: the stream's acknowledgement as JSON.
- ``GET|PUT|DELETE /v1/kv/<bucket>/<key>``: read, write, delete a key.
- ``GET /v1/services[/ping|/stats][?name=N&timeout=SECS]``: the NATS services
  (ADR-32) that answer discovery: ``{"services": [...]}``, their INFO (default), PING
  or STATS answers.
- ``GET /v1/status``: what the status page shows, as JSON.

Refused before anything is sent to NATS, with ``{"error", "code"}``: a path (after
percent-decoding) or a query parameter that is not UTF-8, 400 ``bad_encoding`` (two
byte sequences must never name one subject); bad subjects, headers and arguments, 400
(``bad_subject``, ``bad_header``, ``bad_argument``); a subject too long for the
server's control line, 400 ``subject_too_long`` (see
:func:`~txnats.bridge.security.check_fits`: the server would close the connection);
a subject the allow/deny lists refuse, 403. Every request answered later (request, JS
publish, key-value, services) gets exactly one response, whatever NATS answers (see
:func:`~txnats.bridge._answers.answer_later`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.web import resource, server

from txnats import errors
from txnats._args import check_timeout
from txnats.bridge._answers import (
    HEADER_PREFIX,
    HttpError,
    add_nats_headers,
    answer_error,
    answer_later,
    json_body,
)
from txnats.bridge._sse import SseStream
from txnats.bridge.context import BridgeContext
from txnats.bridge.security import check_fits, check_subject
from txnats.bridge.status import status_dict
from txnats.protocol.commands import queue_name
from txnats.protocol.headers import Headers

__all__ = ["HEADER_PREFIX", "Api", "nats_headers"]

log = Logger()

DEFAULT_REQUEST_TIMEOUT = 5.0


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
    """The first value of query parameter ``name``, or None.

    :raises HttpError: 400 ``bad_encoding`` if it is not UTF-8 (after percent-decoding).
    """
    values = (request.args or {}).get(name.encode())
    if not values:
        return None
    try:
        text: str = values[0].decode("utf-8")
    except UnicodeDecodeError:
        raise HttpError(400, "bad_encoding", f"query parameter {name!r} is not UTF-8") from None
    return text


def _body(request: server.Request) -> bytes:
    return request.content.read() if request.content is not None else b""


class Api(resource.Resource):
    """Everything under ``/v1``, dispatched on the method and the path's first parts."""

    isLeaf = True

    def __init__(self, ctx: BridgeContext) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._ctx = ctx

    # -- dispatch -------------------------------------------------------------------
    def render(self, request: server.Request) -> bytes | int:
        method = request.method.decode("ascii", "replace")
        try:
            try:
                parts = [p.decode("utf-8") for p in request.postpath or []]
            except UnicodeDecodeError:
                raise HttpError(400, "bad_encoding",
                                "the path is not UTF-8 (after percent-decoding)") from None
            return self._dispatch(request, method, parts)
        except Exception as e:
            return answer_error(self._ctx, request, e)

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

    def _subject(self, route: str, parts: list[str], *, wildcards: bool = False,
                 queue: str = "") -> str:
        """The subject from the rest of the path (``/`` is a subject character), checked,
        short enough for the server's control line, and allowed for ``route``."""
        subject = "/".join(parts)
        check_subject(subject, wildcards=wildcards)
        check_fits(subject, self._ctx.max_control_line(), extra=queue)
        if not self._ctx.config.policy.permits(route, subject):
            raise HttpError(403, "forbidden", f"subject {subject!r} is not allowed for {route}")
        return subject

    def _later(self, request: server.Request, d: Deferred[Any],
               done: Callable[[Any], bytes]) -> int:
        return answer_later(self._ctx, request, d, done)

    # -- routes ---------------------------------------------------------------------
    def _publish(self, request: server.Request, parts: list[str]) -> bytes:
        """202 ``{"published", "bytes"}`` once the client took the message."""
        subject = self._subject("publish", parts)
        headers = nats_headers(request)
        data = _body(request)
        self._ctx.nats().publish(subject, data, headers=headers)
        self._ctx.metrics.count("publish", "in", len(data))
        return json_body(request, 202, {"published": subject, "bytes": len(data)})

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
        """200 with the reply's body. Its headers: ``Nats-Header-<name>`` when HTTP can
        carry them as they are, else ``Nats-Headers-Encoded: <name>=<value>``
        percent-encoded, past 16 KiB left out and counted in ``Nats-Headers-Omitted``
        (see :func:`~txnats.bridge._answers.add_nats_headers`)."""
        subject = self._subject("request", parts)
        headers = nats_headers(request)
        timeout = self._timeout(request)
        data = _body(request)
        d = self._ctx.nats().request(subject, data, timeout=timeout, headers=headers)
        self._ctx.metrics.count("request", "in", len(data))

        def done(msg: Any) -> bytes:
            body: bytes = msg.data
            request.setResponseCode(200)
            request.setHeader(b"content-type", b"application/octet-stream")
            add_nats_headers(request, msg.headers)
            self._ctx.metrics.count("request", "out", len(body))
            return body

        return self._later(request, d, done)

    def _subscribe(self, request: server.Request, parts: list[str]) -> bytes | int:
        """SSE or WebSocket; a message's subject, reply or header value that is not
        UTF-8 is sent base64-encoded (see :func:`~txnats.bridge._stream.message_dict`)."""
        queue = _query(request, "queue")
        if queue is not None:
            try:
                queue_name(queue)
            except errors.BadSubjectError as e:
                raise errors.InvalidArgumentError(str(e)) from None
        subject = self._subject("subscribe", parts, wildcards=True, queue=queue or "")
        self._ctx.nats()
        upgrade = request.getHeader(b"upgrade")
        if upgrade is not None and upgrade.lower() == b"websocket":
            from txnats.bridge._ws import serve_websocket

            result: bytes | int = serve_websocket(self._ctx, request, subject, queue)
            return result
        SseStream(self._ctx, request, subject, queue)
        return server.NOT_DONE_YET

    def _js(self, request: server.Request, parts: list[str]) -> int:
        """200 ``{"stream", "seq", "duplicate", "domain"}``; an answer that is not a
        stream's acknowledgement is 502 ``nats_error``."""
        if not parts or parts[0] != "publish":
            raise HttpError(404, "not_found", "the JetStream route is /v1/js/publish/<subject>")
        subject = self._subject("js", parts[1:])
        headers = nats_headers(request)
        msg_id = _query(request, "msg_id")
        data = _body(request)
        js = self._ctx.nats().jetstream()
        d = ensureDeferred(js.publish(subject, data, headers=headers, msg_id=msg_id))
        self._ctx.metrics.count("js", "in", len(data))

        def done(ack: Any) -> bytes:
            return json_body(request, 200, {"stream": ack.stream, "seq": ack.seq,
                                            "duplicate": ack.duplicate, "domain": ack.domain})

        return self._later(request, d, done)

    def _kv(self, request: server.Request, parts: list[str]) -> int:
        """GET: the value (bytes as stored) with ``Kv-Revision``; PUT, DELETE:
        ``{"revision": n}``. The key's API subjects must fit the control line."""
        if len(parts) < 2:
            raise HttpError(404, "not_found", "the key-value route is /v1/kv/<bucket>/<key>")
        bucket, key = parts[0], "/".join(parts[1:])
        from txnats.jetstream.kv import check_bucket, check_key

        check_bucket(bucket)
        check_key(key)
        # The longest subject a key's operations send: a direct get of its last value.
        check_fits(f"$JS.API.DIRECT.GET.KV_{bucket}.$KV.{bucket}.{key}",
                   self._ctx.max_control_line())
        if not self._ctx.config.policy.permits("kv", f"{bucket}.{key}"):
            raise HttpError(403, "forbidden", f"key {bucket}/{key} is not allowed")
        method = request.method
        data = _body(request)
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
            return json_body(request, 200, {"revision": result})
        body: bytes = result.value
        request.setHeader(b"content-type", b"application/octet-stream")
        request.setHeader(b"kv-revision", b"%d" % result.revision)
        self._ctx.metrics.count("kv", "out", len(body))
        return body

    def _services(self, request: server.Request, parts: list[str]) -> int:
        """200 ``{"services": [...]}``: each answer as the service gave it. One JSON
        cannot hold (NaN, nesting too deep to write) is left out, and ``"omitted": n``
        says how many were."""
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
        return self._later(request, d, lambda found: _services_body(request, found))

    def _status(self, request: server.Request, parts: list[str]) -> bytes:
        return json_body(request, 200, status_dict(self._ctx))


def _services_body(request: server.Request, found: list[Any]) -> bytes:
    services: list[Any] = []
    omitted = 0
    for response in found:
        try:
            entry = response.to_dict()
            json.dumps(entry, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            omitted += 1
            continue
        services.append(entry)
    body: dict[str, Any] = {"services": services}
    if omitted:
        body["omitted"] = omitted
        log.warn("nats-bridge: {n} service answers left out (JSON cannot hold them)",
                 n=omitted)
    return json_body(request, 200, body)

