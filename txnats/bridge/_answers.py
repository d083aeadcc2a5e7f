"""How ``/v1`` answers: errors as statuses, NATS headers as HTTP headers, and exactly
one response for every request that waits on NATS.

Errors: each class in :data:`ERRORS` has its status and code; any other
:class:`~txnats.errors.NatsError` is 502 ``nats_error`` (something on the NATS side
the bridge has no better word for), never a 500, and while the bridge stops every
"not connected" kind of error is 503 ``stopping``. Only an error outside the
:class:`~txnats.errors.NatsError` tree (a defect) is 500 ``internal``, and logged.

NATS headers in HTTP responses (:func:`add_nats_headers`): HTTP cannot carry every
header NATS can. A header whose name is an HTTP token and whose value is UTF-8 text
without control characters goes as ``Nats-Header-<name>: <value>``; any other (a name
such as ``a(b)``, a value holding bytes that are not UTF-8, or a control character)
goes as ``Nats-Headers-Encoded: <name>=<value>``, both percent-encoded (RFC 3986) from
the bytes NATS carried, so nothing is lost or changed. A header block that does not
parse goes whole as ``Nats-Headers-Unparsed: <base64>``. Past
:data:`MAX_REPLY_HEADERS` bytes of headers, the rest are left out and
``Nats-Headers-Omitted: <n>`` says how many.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web.http_headers import Headers as HttpHeaders

from txnats import errors
from txnats.bridge.context import BridgeContext
from txnats.protocol.headers import Headers

__all__ = ["ERRORS", "HEADER_PREFIX", "MAX_REPLY_HEADERS", "HttpError", "add_nats_headers",
           "answer_later", "classify", "error_body", "json_body"]

log = Logger()

#: HTTP headers with this prefix carry NATS headers, both ways.
HEADER_PREFIX = b"nats-header-"
_ENCODED = b"Nats-Headers-Encoded"
_OMITTED = b"Nats-Headers-Omitted"
_UNPARSED = b"Nats-Headers-Unparsed"
#: The most bytes of NATS headers (names and values as written) put in one response.
MAX_REPLY_HEADERS = 16 * 1024

#: Errors and how they are answered: (class, HTTP status, code). First match wins.
ERRORS: tuple[tuple[type[BaseException], int, str], ...] = (
    (errors.ControlLineTooLongError, 400, "subject_too_long"),
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
    (errors.SubscriptionClosedError, 503, "not_connected"),
    (errors.StaleConnectionError, 503, "not_connected"),
    (errors.NatsError, 502, "nats_error"),
)
#: Codes that become 503 ``stopping`` while the bridge stops.
_STOPPING = frozenset({"not_connected", "busy", "nats_error"})

_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789"
                   b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class HttpError(Exception):
    """An answer decided before any NATS operation (403, 404, 405, a bad encoding)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def classify(error: BaseException, *, stopping: bool) -> tuple[int, str]:
    """The status and code for ``error`` (500 ``internal`` outside the NATS tree)."""
    if isinstance(error, HttpError):
        return error.status, error.code
    for cls, status, code in ERRORS:
        if isinstance(error, cls):
            if stopping and code in _STOPPING:
                return 503, "stopping"
            return status, code
    return 500, "internal"


def json_body(request: server.Request, status: int, body: object) -> bytes:
    """Set ``status`` and a JSON content type; return ``body`` as strict JSON.

    :raises ValueError: for a value JSON cannot hold (NaN, a loop).
    """
    data = json.dumps(body, allow_nan=False).encode() + b"\n"
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    return data


def error_body(request: server.Request, status: int, code: str, message: str) -> bytes:
    """Set an error response: ``{"error": message, "code": code}``."""
    return json_body(request, status, {"error": message, "code": code})


def _carried_as_is(raw_name: bytes, value: str, raw_value: bytes) -> bool:
    if not raw_name or not all(b in _TOKEN for b in raw_name):
        return False
    if any((b < 0x20 and b != 0x09) or b == 0x7F for b in raw_value):
        return False
    try:
        value.encode("utf-8")  # (a value that was not UTF-8 holds lone surrogates)
    except UnicodeEncodeError:
        return False
    return raw_value == raw_value.strip(b" \t")  # HTTP would strip the ends


def add_nats_headers(request: server.Request, headers: Headers | None) -> None:
    """Put ``headers`` (a NATS message's) on the response, as the module says."""
    if headers is None:
        return
    room = MAX_REPLY_HEADERS
    omitted = 0
    if headers.raw is not None and not headers:  # a block that did not parse
        block = base64.b64encode(headers.raw)
        if len(block) + len(_UNPARSED) + 4 <= room:
            request.responseHeaders.addRawHeader(_UNPARSED, block)
        else:
            omitted += 1
    for name, value in headers.multi_items():
        raw_name = name.encode("utf-8", "surrogateescape")
        raw_value = value.encode("utf-8", "surrogateescape")
        if _carried_as_is(raw_name, value, raw_value):
            line_name, line_value = b"Nats-Header-" + raw_name, raw_value
        else:
            line_name = _ENCODED
            line_value = (quote(raw_name, safe="") + "=" + quote(raw_value, safe="")).encode()
        size = len(line_name) + len(line_value) + 4
        if size > room:
            omitted += 1
            continue
        room -= size
        request.responseHeaders.addRawHeader(line_name, line_value)
    if omitted:
        request.responseHeaders.setRawHeaders(_OMITTED, [b"%d" % omitted])


def _fresh(ctx: BridgeContext, request: server.Request) -> None:
    """Forget the headers a failed rendering had set."""
    request.responseHeaders = HttpHeaders()
    if ctx.stopping:
        request.setHeader(b"connection", b"close")


def answer_error(ctx: BridgeContext, request: server.Request, error: BaseException) -> bytes:
    """The error response for ``error`` (logged if it is a defect)."""
    status, code = classify(error, stopping=ctx.stopping)
    if status == 500:
        log.failure("nats-bridge: unexpected error on {path}", Failure(error),
                    path=request.path.decode("utf-8", "replace"))
        return error_body(request, 500, "internal", "internal error")
    return error_body(request, status, code, str(error))


def answer_later(ctx: BridgeContext, request: server.Request, d: Deferred[Any],
                 done: Callable[[Any], bytes]) -> int:
    """Answer from ``d``: ``done(result)``, or the error; cancel it if the client leaves.

    Exactly one response: if ``done`` raises (a NATS answer HTTP cannot carry), the
    headers it set are dropped and the answer is 502 ``bad_reply``. The request counts
    as in flight (:attr:`BridgeContext.in_flight`) until answered.
    """
    finished = [False]
    answered: Deferred[None] = Deferred()
    ctx.in_flight.add(answered)

    def end() -> None:
        finished[0] = True
        ctx.in_flight.discard(answered)
        answered.callback(None)

    def gone(_: object) -> None:
        if not finished[0]:
            end()
            d.cancel()

    request.notifyFinish().addErrback(gone)

    def write(body: bytes) -> None:
        if not finished[0]:
            end()
            request.write(body)
            request.finish()

    def ok(result: Any) -> None:
        if finished[0]:
            return
        try:
            body = done(result)
        except Exception:
            log.failure("nats-bridge: the NATS answer on {path} cannot be rendered",
                        path=request.path.decode("utf-8", "replace"))
            _fresh(ctx, request)
            body = error_body(request, 502, "bad_reply",
                              "the NATS answer cannot be carried over HTTP")
        write(body)

    def failed(f: Failure) -> None:
        if not finished[0]:
            error = f.value if f.value is not None else Exception(f.getErrorMessage())
            write(answer_error(ctx, request, error))

    d.addCallbacks(ok, failed).addErrback(
        lambda f: log.failure("nats-bridge: answering {path} failed", f,
                              path=request.path.decode("utf-8", "replace")))
    return server.NOT_DONE_YET
