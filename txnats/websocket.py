"""NATS over WebSocket (``ws://`` and ``wss://`` servers), with autobahn's Twisted client.

nats-server's ``websocket { ... }`` block serves the ordinary NATS text protocol inside
WebSocket frames. :func:`websocket_endpoint` returns an ``IStreamClientEndpoint`` whose
``connect(factory)`` opens TCP (wrapped in TLS for ``wss://``), runs the WebSocket
opening handshake, and only then connects the protocol built by ``factory`` to a
:class:`WebSocketTransport`: a stream transport that carries bytes as WebSocket frames.
The NATS protocol on top cannot tell it from TCP.

The pieces:

- :class:`WebSocketTransport` is what the NATS protocol sees as its transport.
  ``write`` sends one binary message per call (the protocol coalesces its writes, so
  that is one frame per reactor turn; with permessage-deflate, large writes go as
  several compressed messages, as nats-server inflates each one whole and refuses one
  larger than its ``max_payload``); ``loseConnection`` runs the WebSocket closing
  handshake; ``abortConnection`` drops the TCP connection at once. Producer
  registration goes straight to the TCP (or TLS) transport underneath, so the usual
  outbound flow control holds: when the socket's send buffer fills, the NATS protocol
  is paused, however the bytes were framed. ``pauseProducing``/``resumeProducing``
  stop and restart reading from the socket (inbound back-pressure).
- Received frames are handed on as they arrive, frame by frame and without waiting for
  the end of a message: the NATS parser frames its own protocol, and the server may
  split or merge frames as it likes. Text frames are taken as data as well (as
  nats-server does for frames from clients); autobahn still checks that their
  payload is valid UTF-8, as RFC 6455 requires, and fails the connection if not.
- The endpoint's Deferred fires with the NATS protocol once the WebSocket handshake
  is done. A refused handshake (an HTTP status other than 101, a server that does not
  speak WebSocket, a timeout) fails it with :class:`~txnats.errors.ConnectError`; a
  failed TLS handshake or certificate check with :class:`~txnats.errors.TLSError`.
  Cancelling it drops the connection.
- The NATS protocol's ``connectionLost`` is called exactly once, when the TCP
  connection is gone, whether the server closed the WebSocket, the network failed or
  the client closed it.

All timers run on the reactor given to :func:`websocket_endpoint` (autobahn's own
timers, which use the global reactor, are switched off).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.interfaces import (
    IAddress,
    IConsumer,
    IDelayedCall,
    IProtocol,
    IProtocolFactory,
    IPushProducer,
    IReactorCore,
    IReactorTime,
    IStreamClientEndpoint,
    ITransport,
)
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from txnats.errors import ConnectError, NatsError, TLSError
from txnats.servers import Server
from txnats.tls import is_tls_failure

try:
    from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
    from autobahn.websocket.compress import (
        PerMessageDeflateOffer,
        PerMessageDeflateResponse,
        PerMessageDeflateResponseAccept,
    )
    from autobahn.websocket.types import ConnectingRequest
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "txnats needs autobahn for ws:// and wss:// servers: pip install 'txnats[websocket]'"
    ) from e

__all__ = ["WebSocketEndpoint", "WebSocketTransport", "websocket_endpoint"]

log = Logger()

#: The most bytes a server may send before its handshake response is complete.
MAX_HANDSHAKE_RESPONSE = 64 * 1024

#: Seconds to wait, after starting or answering a closing handshake, for the server
#: to close the TCP connection before dropping it ourselves.
CLOSE_TIMEOUT = 2.0

#: With permessage-deflate: the most bytes sent in one compressed message (a server
#: with a smaller max_payload gets pieces of that size), and the size up to which a
#: write is sent uncompressed (as nats-server does).
_COMPRESSED_MESSAGE_SIZE = 64 * 1024
_COMPRESS_THRESHOLD = 64

# WebSocket close status codes (RFC 6455, 7.4.1).
_CLOSE_NORMAL = 1000

# autobahn's protocol states.
_STATE_CLOSED = WebSocketClientProtocol.STATE_CLOSED
_STATE_CONNECTING = WebSocketClientProtocol.STATE_CONNECTING
_STATE_OPEN = WebSocketClientProtocol.STATE_OPEN


def websocket_endpoint(
    reactor: IReactorCore,
    server: Server,
    timeout: float,
    tls_creator: Callable[[], Any] | None = None,
    *,
    compression: bool = False,
    headers: Mapping[str, str] | None = None,
) -> IStreamClientEndpoint:
    """An endpoint reaching ``server`` (a ``ws://`` or ``wss://`` server) over WebSocket.

    ``timeout`` bounds the TCP connection, the TLS handshake and the WebSocket opening
    handshake together. ``tls_creator`` makes the TLS connection creator for ``wss://``
    (it is required there, and ignored for ``ws://``). ``compression`` offers the
    permessage-deflate extension (used when the server enables ``compression``);
    ``headers`` are extra HTTP headers for the upgrade request.
    """
    if server.scheme not in ("ws", "wss"):
        raise ConnectError(f"not a WebSocket server: {server}")
    if server.scheme == "wss" and tls_creator is None:
        raise TLSError(f"{server} needs TLS, and no TLS options were given")
    return WebSocketEndpoint(
        reactor,
        server,
        timeout,
        tls_creator if server.scheme == "wss" else None,
        compression=compression,
        headers=headers,
    )


@implementer(IStreamClientEndpoint)
class WebSocketEndpoint:
    """Connects a stream protocol to a NATS server over WebSocket. See the module."""

    def __init__(
        self,
        reactor: IReactorCore,
        server: Server,
        timeout: float,
        tls_creator: Callable[[], Any] | None,
        *,
        compression: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.reactor = reactor
        self.server = server
        self.timeout = timeout
        self.tls_creator = tls_creator
        self.compression = compression
        self.headers = dict(headers or {})
        host = f"[{server.host}]" if ":" in server.host else server.host
        path = server.path or "/"
        if not path.startswith("/"):
            path = "/" + path
        #: The URL of the upgrade request (never with credentials).
        self.url = f"{server.scheme}://{host}:{server.port}{path}"

    def connect(self, protocolFactory: IProtocolFactory) -> Deferred[IProtocol]:
        """Fires with the protocol from ``protocolFactory`` once the WebSocket is open."""
        try:
            return _Attempt(self, protocolFactory).start()
        except NatsError as e:
            return fail(e)
        except Exception as e:
            return fail(ConnectError(f"cannot connect to {self.url}: {e}"))

    def __repr__(self) -> str:
        return f"<WebSocketEndpoint {self.url}>"


class _Attempt:
    """One ``connect()``: TCP (+ TLS), the WebSocket handshake, then the stream protocol."""

    def __init__(self, endpoint: WebSocketEndpoint, factory: IProtocolFactory) -> None:
        self.endpoint = endpoint
        self.url = endpoint.url
        self.protocol_factory = factory
        clock: IReactorTime = endpoint.reactor  # type: ignore[assignment]
        self.clock = clock
        self.result: Deferred[IProtocol] = Deferred(self._cancel)
        self.ws: _WebSocketProtocol | None = None
        #: True once the result has fired, or is about to (cancelled, timed out).
        self.decided = False
        self._tcp_d: Deferred[Any] | None = None
        self._timer: IDelayedCall | None = None

    def start(self) -> Deferred[IProtocol]:
        ep = self.endpoint
        server = ep.server
        tcp: IStreamClientEndpoint = HostnameEndpoint(
            ep.reactor, server.host.encode("idna"), server.port, timeout=ep.timeout
        )
        if ep.tls_creator is not None:
            tcp = wrapClientTLS(ep.tls_creator(), tcp)
        factory = _WebSocketFactory(self, ep)
        if ep.timeout > 0:
            self._timer = self.clock.callLater(ep.timeout, self._timed_out)
        d = self._tcp_d = tcp.connect(factory)
        d.addCallbacks(self._tcp_connected, self._tcp_failed)
        return self.result

    # ---------------------------------------------------------------- outcomes
    def _fail(self, error: NatsError) -> None:
        if not self.decided:
            self.decided = True
            self._stop_timer()
            self.result.errback(Failure(error))

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _tcp_connected(self, _: object) -> None:
        self._tcp_d = None

    def _tcp_failed(self, failure: Failure) -> None:
        self._tcp_d = None
        if is_tls_failure(failure):
            self._fail(TLSError(f"TLS with {self.url} failed: {_tls_message(failure)}"))
        else:
            self._fail(ConnectError(f"cannot connect to {self.url}: {failure.getErrorMessage()}"))

    def _timed_out(self) -> None:
        self._timer = None
        if self.decided:
            return
        what = "connect" if self.ws is None else "opening handshake"
        error = ConnectError(f"{what} to {self.url} timed out after {self.endpoint.timeout}s")
        self.decided = True
        self._abort()
        self.result.errback(Failure(error))

    def _cancel(self, _: Deferred[IProtocol]) -> None:
        # Deferred.cancel() errbacks the result with CancelledError after this.
        self.decided = True
        self._stop_timer()
        self._abort()

    def _abort(self) -> None:
        """Stop connecting: cancel the TCP dial, or drop the connection."""
        tcp_d, self._tcp_d = self._tcp_d, None
        if tcp_d is not None:
            tcp_d.cancel()
        ws = self.ws
        if ws is not None and ws.transport is not None and ws.state != _STATE_CLOSED:
            ws.transport.abortConnection()

    # ---------------------------------------------------------------- from the WebSocket
    def ws_opened(self, ws: _WebSocketProtocol) -> None:
        """The opening handshake succeeded: connect the stream protocol."""
        if self.decided:  # pragma: no cover - cancelled, and the abort is under way
            return
        self._stop_timer()
        assert ws.transport is not None
        transport = WebSocketTransport(ws, self.clock)
        try:
            proto = self.protocol_factory.buildProtocol(ws.transport.getPeer())
        except Exception as e:
            ws.transport.abortConnection()
            self._fail(ConnectError(f"cannot build the protocol for {self.url}: {e!r}"))
            return
        if proto is None:
            ws.transport.abortConnection()
            self._fail(ConnectError(f"the factory refused the connection to {self.url}"))
            return
        ws.stream = transport
        transport.protocol = proto
        try:
            proto.makeConnection(transport)
        except Exception as e:
            ws.stream = None
            ws.transport.abortConnection()
            self._fail(ConnectError(f"cannot start the protocol for {self.url}: {e!r}"))
            return
        self.decided = True
        self.result.callback(proto)

    def ws_lost(self, ws: _WebSocketProtocol, reason: Failure) -> None:
        """The connection ended before the WebSocket opened."""
        if self.decided:
            return
        if is_tls_failure(reason):
            self._fail(TLSError(f"TLS with {self.url} failed: {_tls_message(reason)}"))
            return
        why = ws.wasNotCleanReason
        if not why or why.startswith("peer dropped the TCP connection"):
            why = f"the server closed the connection ({reason.getErrorMessage()})"
        received = getattr(ws, "data", b"")
        if isinstance(received, bytes) and received.startswith(b"INFO "):
            why = "the server speaks plain NATS on this port, not WebSocket"
        self._fail(ConnectError(f"WebSocket handshake with {self.url} failed: {why}"))


class _WebSocketFactory(WebSocketClientFactory):  # type: ignore[misc]
    """autobahn's client factory, building one :class:`_WebSocketProtocol` per attempt."""

    noisy = False  # no "Starting factory" log lines

    def __init__(self, attempt: _Attempt, endpoint: WebSocketEndpoint) -> None:
        from txnats._version import __version__

        super().__init__(
            url=endpoint.url,
            reactor=endpoint.reactor,
            useragent=f"txnats/{__version__}",
            headers=endpoint.headers,
        )
        self.attempt = attempt
        # Every timer of ours runs on our reactor (autobahn's use the global one): the
        # handshake deadline is the attempt's, and the close deadline the transport's.
        options: dict[str, Any] = {
            "openHandshakeTimeout": 0,
            "closeHandshakeTimeout": 0,
            "serverConnectionDropTimeout": 0,
            "autoPingInterval": 0,
            "maxFramePayloadSize": 0,
            "maxMessagePayloadSize": 0,
        }
        if endpoint.compression:
            options["perMessageCompressionOffers"] = [
                PerMessageDeflateOffer(accept_no_context_takeover=True, accept_max_window_bits=True)
            ]
            options["perMessageCompressionAccept"] = _accept_deflate
        self.setProtocolOptions(**options)

    def buildProtocol(self, addr: IAddress | None) -> _WebSocketProtocol:
        proto = _WebSocketProtocol(self.attempt)
        proto.factory = self
        return proto


def _accept_deflate(response: object) -> object:
    if isinstance(response, PerMessageDeflateResponse):
        return PerMessageDeflateResponseAccept(response)
    return None


class _WebSocketProtocol(WebSocketClientProtocol):  # type: ignore[misc]
    """The autobahn side: one WebSocket connection, feeding a :class:`WebSocketTransport`."""

    def __init__(self, attempt: _Attempt) -> None:
        super().__init__()
        self.attempt = attempt
        #: The transport given to the stream protocol, once the WebSocket is open.
        self.stream: WebSocketTransport | None = None

    # Frames are handed on as they arrive: no buffering of whole messages. (autobahn's
    # onMessageBegin/onMessageFrameBegin only keep counts, which decompression needs.)
    def onMessageFrameData(self, payload: bytes) -> None:
        stream = self.stream
        if stream is not None and payload and not self.failedByMe:
            stream.data_received(payload)

    def onMessageFrameEnd(self) -> None:
        pass

    def onMessageEnd(self) -> None:
        pass

    def onConnecting(self, transport_details: Any) -> ConnectingRequest:
        # As autobahn's default, but with an IPv6 address in brackets in the Host header.
        f = self.factory
        host = f"[{f.host}]" if ":" in f.host else f.host
        return ConnectingRequest(
            host=host,
            port=f.port,
            resource=f.resource,
            headers=f.headers,
            useragent=f.useragent,
            origin=f.origin,
            protocols=f.protocols,
        )

    def onOpen(self) -> None:
        self.attempt.ws_opened(self)

    def onCloseFrame(self, code: int, reasonRaw: bytes) -> bool | None:
        result: bool | None = super().onCloseFrame(code, reasonRaw)
        # The server should now close the TCP connection (RFC 6455, 7.1.1).
        if self.stream is not None:
            self.stream.start_close_deadline()
        elif self.transport is not None and self.state != _STATE_CLOSED:
            self.transport.abortConnection()
        return result

    def connectionMade(self) -> None:
        self.attempt.ws = self
        super().connectionMade()

    def dataReceived(self, data: bytes) -> None:
        if self.state == _STATE_CONNECTING and len(self.data) + len(data) > MAX_HANDSHAKE_RESPONSE:
            self.failHandshake(
                f"no complete HTTP response in the first {MAX_HANDSHAKE_RESPONSE} bytes"
                " (not a WebSocket server?)"
            )
            return
        super().dataReceived(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        stream = self.stream
        if stream is not None:
            stream.connection_lost(self._describe(reason))
        else:
            self.attempt.ws_lost(self, reason)

    def _describe(self, reason: Failure) -> Failure:
        """The reason to give the stream protocol: the WebSocket's own, when it has one."""
        if self.failedByMe and self.wasNotCleanReason:
            return Failure(ConnectionLost(f"WebSocket failed: {self.wasNotCleanReason}"))
        code = self.remoteCloseCode
        if code is not None and not self.closedByMe:
            text = f"WebSocket closed by the server (code {code}"
            if self.remoteCloseReason:
                text += f": {self.remoteCloseReason}"
            text += ")"
            # (Servers may reset the TCP connection after the closing handshake.)
            return Failure(ConnectionDone(text) if self.wasClean else ConnectionLost(text))
        return reason


@implementer(ITransport, IConsumer, IPushProducer)
class WebSocketTransport:
    """A stream transport over one open WebSocket connection (what the protocol sees).

    ``write`` sends a binary message; producers register with the TCP (or TLS)
    transport underneath; ``pauseProducing``/``resumeProducing`` stop and restart
    reading from the socket.
    """

    def __init__(self, ws: _WebSocketProtocol, clock: IReactorTime) -> None:
        self._ws = ws
        self._clock = clock
        self._lower: Any = ws.transport
        #: The protocol connected to this transport.
        self.protocol: IProtocol | None = None
        #: True once ``loseConnection`` or ``abortConnection`` was called, or the
        #: connection is closing for another reason.
        self._disconnecting = False
        self.lost = False
        self._close_deadline: IDelayedCall | None = None
        #: permessage-deflate was negotiated.
        self._compressed = bool(getattr(ws, "websocket_extensions_in_use", None))

    @property
    def disconnecting(self) -> bool:
        return self._disconnecting or self._ws.state != _STATE_OPEN

    @property
    def websocket(self) -> WebSocketClientProtocol:
        """The autobahn protocol underneath (for its details: extensions, statistics)."""
        return self._ws

    # ---------------------------------------------------------------- ITransport
    def write(self, data: bytes) -> None:
        if not data or self.disconnecting:
            return
        data = bytes(data)
        ws = self._ws
        if not self._compressed:
            ws.sendMessage(data, isBinary=True)
        elif len(data) <= _COMPRESS_THRESHOLD:
            ws.sendMessage(data, isBinary=True, doNotCompress=True)
        else:
            # nats-server inflates a compressed message whole, and refuses one that
            # inflates to more than its max_payload: send pieces of at most that.
            step = _COMPRESSED_MESSAGE_SIZE
            info = getattr(self.protocol, "info", None)
            max_payload = info.get("max_payload") if isinstance(info, dict) else None
            if isinstance(max_payload, int) and 0 < max_payload < step:
                step = max_payload
            for i in range(0, len(data), step):
                ws.sendMessage(data[i : i + step], isBinary=True)

    def writeSequence(self, data: Iterable[bytes]) -> None:
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        """Close the WebSocket (closing handshake); the server then closes TCP."""
        if self._disconnecting or self.lost:
            return
        self._disconnecting = True
        if self._ws.state == _STATE_OPEN:
            self._ws.sendClose(_CLOSE_NORMAL)
        self.start_close_deadline()

    def abortConnection(self) -> None:
        """Drop the TCP connection now, without a closing handshake."""
        self._disconnecting = True
        if not self.lost and self._ws.state != _STATE_CLOSED:
            self._lower.abortConnection()

    def getPeer(self) -> IAddress:
        peer: IAddress = self._lower.getPeer()
        return peer

    def getHost(self) -> IAddress:
        host: IAddress = self._lower.getHost()
        return host

    def setTcpNoDelay(self, enabled: bool) -> None:
        set_nodelay = getattr(self._lower, "setTcpNoDelay", None)
        if set_nodelay is not None:
            set_nodelay(enabled)

    # ---------------------------------------------------------------- IConsumer
    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """Register with the socket's transport: a full send buffer pauses ``producer``."""
        self._lower.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:
        if not self.lost:
            self._lower.unregisterProducer()

    # ---------------------------------------------------------------- IPushProducer
    def pauseProducing(self) -> None:
        """Stop reading from the socket."""
        if not self.lost:
            self._lower.pauseProducing()

    def resumeProducing(self) -> None:
        """Read from the socket again."""
        if not self.lost:
            self._lower.resumeProducing()

    def stopProducing(self) -> None:
        self.loseConnection()

    # ---------------------------------------------------------------- from the WebSocket
    def data_received(self, data: bytes) -> None:
        proto = self.protocol
        if proto is None or self.lost:
            return
        try:
            proto.dataReceived(data)
        except Exception:
            # As Twisted does for an exception from dataReceived (and autobahn may be
            # running this from a Deferred callback, where it would be lost).
            log.failure("Unexpected error from {protocol}.dataReceived", protocol=proto)
            self.abortConnection()

    def start_close_deadline(self) -> None:
        """Drop the TCP connection unless the server closes it within CLOSE_TIMEOUT."""
        if self._close_deadline is None and not self.lost:
            self._close_deadline = self._clock.callLater(CLOSE_TIMEOUT, self._close_overdue)

    def _close_overdue(self) -> None:
        self._close_deadline = None
        if not self.lost:
            log.debug("The server did not close the WebSocket's TCP connection in time")
            self._disconnecting = True
            self._lower.abortConnection()

    def connection_lost(self, reason: Failure) -> None:
        if self.lost:
            return
        self.lost = True
        self._disconnecting = True
        deadline, self._close_deadline = self._close_deadline, None
        if deadline is not None and deadline.active():
            deadline.cancel()
        proto, self.protocol = self.protocol, None
        if proto is not None:
            proto.connectionLost(reason)

    def __repr__(self) -> str:
        return f"<WebSocketTransport {self._ws.factory.url}>"


def _tls_message(reason: Failure) -> str:
    """A short text for a pyOpenSSL error (its args are nested lists of tuples)."""
    try:
        parts = [str(item[2]) for item in reason.value.args[0] if len(item) > 2]  # type: ignore[union-attr]
    except Exception:
        parts = []
    return ", ".join(parts) or reason.getErrorMessage()
