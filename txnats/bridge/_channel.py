"""The bridge's HTTP connection: a bound on every part of a request, and an answer for
each refusal.

Twisted's ``HTTPChannel`` closes a connection whose header line is too long without a
word, and answers a head over its size or header count with a bare 400. This channel
answers instead, each time with a JSON body (``{"error", "code"}``) and
``Connection: close``:

- a request line longer than :data:`MAX_LINE` bytes: **414** ``uri_too_long``;
- a header line longer than :data:`MAX_LINE`, a head (request line and headers) over
  :data:`MAX_HEAD` bytes: **431** ``header_too_large``; more than :data:`MAX_HEADERS`
  header lines: **431** ``too_many_headers``;
- a malformed request (a bad request line, header or chunked framing, two lengths):
  **400** ``bad_request``;
- a request whose head or body stops arriving for the idle timeout: **408**
  ``request_timeout``;
- a body over the limit (:class:`~txnats.bridge.http.BridgeRequest` calls
  :meth:`BridgeChannel.refuse` with 413 as soon as it knows).

After a refusal nothing more is parsed: what the client still sends is read and
discarded (never held) for at most :data:`LINGER` seconds while the answer reaches it,
then the connection is closed. So memory per connection stays within ``MAX_HEAD`` plus
one read, whatever a client sends.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.interfaces import IDelayedCall, ISSLTransport
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import http

__all__ = ["LINGER", "MAX_HEAD", "MAX_HEADERS", "MAX_LINE", "BridgeChannel", "refusal"]

log = Logger()

#: The longest request line, and the longest header line, in bytes.
MAX_LINE = 16 * 1024
#: The most bytes of a request's head: its request line and all its header lines.
MAX_HEAD = 32 * 1024
#: The most header lines in one request.
MAX_HEADERS = 100
#: Seconds a refused connection is still read (and what comes discarded) before it is
#: closed: closing at once, with the client's bytes unread, could reset the connection
#: before the client has read the answer.
LINGER = 2.0

_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 413: b"Request Entity Too Large",
            414: b"Request-URI Too Long", 431: b"Request Header Fields Too Large",
            503: b"Service Unavailable"}


def refusal(status: int, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 response saying no: JSON body, ``Connection: close``."""
    body = json.dumps({"error": message, "code": code}).encode() + b"\n"
    reason = _REASONS.get(status, b"Error")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, reason, len(body), body))


class BridgeChannel(http.HTTPChannel):
    """One HTTP connection to the bridge, with the bounds above.

    Its ``site`` (a :class:`~txnats.bridge.http.BridgeSite`) is set by the site that
    builds it.
    """

    MAX_LENGTH = MAX_LINE
    # Twisted's own checks, one past ours: ours answer first (431), so theirs (a bare
    # 400) never fire.
    totalHeadersSize = MAX_HEAD + MAX_LINE
    maxHeaders = MAX_HEADERS + 1

    site: Any = None
    #: True once a refusal was sent: nothing more is parsed on this connection.
    refused = False
    _head_lines = 0
    _head_bytes = 0
    _headers = 0
    _in_body = False
    _linger: IDelayedCall | None = None

    # -- reading --------------------------------------------------------------------
    def dataReceived(self, data: bytes) -> None:
        if self.refused:
            return  # discarded: the answer is sent, the connection closing
        super().dataReceived(data)  # type: ignore[no-untyped-call]

    def rawDataReceived(self, data: bytes) -> None:
        if self.refused:
            return
        super().rawDataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self.refused:
            return
        if not line:
            if self._head_lines:  # the end of a head: the body (if any) comes next
                self._head_lines = self._head_bytes = self._headers = 0
                self._in_body = True
            super().lineReceived(line)  # type: ignore[no-untyped-call]
            return
        self._head_lines += 1
        self._head_bytes += len(line) + 2
        if self._head_bytes > MAX_HEAD:
            self.refuse(431, "header_too_large",
                        f"request line and headers over {MAX_HEAD} bytes")
            return
        if self._head_lines > 1 and line[:1] not in (b" ", b"\t"):
            self._headers += 1
            if self._headers > MAX_HEADERS:
                self.refuse(431, "too_many_headers", f"more than {MAX_HEADERS} headers")
                return
        super().lineReceived(line)  # type: ignore[no-untyped-call]

    def lineLengthExceeded(self, line: bytes) -> None:
        if self._head_lines == 0:
            self.refuse(414, "uri_too_long", f"request line over {MAX_LINE} bytes")
        else:
            self.refuse(431, "header_too_large", f"a header line over {MAX_LINE} bytes")

    def allContentReceived(self) -> None:
        self._in_body = False
        super().allContentReceived()  # type: ignore[no-untyped-call]

    def _respondToBadRequestAndDisconnect(self) -> None:
        # Twisted's answer to what it cannot parse (a bare 400): ours has a body.
        self.refuse(400, "bad_request", "malformed HTTP request")

    def timeoutConnection(self) -> None:
        if self.refused:
            self._close_now()
        elif self._head_lines or self._in_body:
            self.refuse(408, "request_timeout", "the request did not arrive in time")
        else:
            super().timeoutConnection()  # type: ignore[no-untyped-call]

    # -- refusing -------------------------------------------------------------------
    def refuse(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` with a JSON error, parse nothing more, and close once the
        answer is out (reading and discarding for at most :data:`LINGER` seconds).

        :param status: the HTTP status (400, 408, 413, 414, 431, 503).
        :param code: the ``code`` of the JSON body.
        :param message: its ``error``.
        """
        if self.refused or self.transport is None:
            return
        self.refused = True
        self._buffer = b""  # (LineReceiver's) lines not yet parsed: never parsed now
        self.setRawMode()  # type: ignore[no-untyped-call]
        self.transport.write(refusal(status, code, message))
        site = self.site
        if site is not None:
            site.ctx.metrics.responses.labels(str(status)).inc()
        log.info("{status} refused before any route ({code}): {message}",
                 status=status, code=code, message=message)
        transport = self.transport
        if ISSLTransport.providedBy(transport) or not hasattr(transport, "loseWriteConnection"):
            transport.loseConnection()  # TLS: its own close (close_notify first)
            return
        transport.loseWriteConnection()  # the answer, then FIN; reading goes on
        self._linger = self.callLater(LINGER, self._close_now)  # type: ignore[no-untyped-call]

    def _close_now(self) -> None:
        self._linger = None
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    def close_after_response(self) -> None:
        """End the connection once the current response is out (the bridge stops)."""
        self.persistent = False

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        self._linger = None
        super().connectionLost(reason)  # type: ignore[no-untyped-call]
