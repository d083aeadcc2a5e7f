"""The Twisted ``Protocol`` for one connection to one NATS server.

It frames bytes through the sans-IO :class:`~txnats.protocol.parser.Parser`, runs the
handshake (INFO -> CONNECT + PING -> PONG), keeps PING/PONG liveness, coalesces writes
into one ``transport.write`` per reactor turn (a small one is sent at once), and applies
flow control both ways: it is a push producer for its transport (a full send buffer
pauses our writes), and it can pause reading from the socket when a back-pressure
subscription is full.

It never runs user code itself: events go to its :class:`ConnectionHandler` (the
client), which queues the work and runs it once a whole read has been parsed and
dispatched (``read_finished``), never in the middle of parsing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any
from typing import Protocol as TypingProtocol

from twisted.internet import tcp
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from txnats.errors import (
    AuthorizationError,
    ConnectError,
    ConnectionClosedError,
    MalformedHeadersError,
    NatsError,
    ProtocolError,
    ServerError,
    StaleConnectionError,
    TLSError,
)
from txnats.protocol.commands import PING, PONG, encode_connect, split_frames
from txnats.protocol.errors import classify_error
from txnats.protocol.events import BadHeaders, Err, Info, Msg, Ping, Pong
from txnats.protocol.parser import HARD_MAX_PAYLOAD, Parser
from txnats.tls import is_tls_failure

__all__ = ["ConnectionHandler", "NatsProtocol"]

log = Logger()

# Leeway above the server's max_payload for headers the server itself adds
# (JetStream direct get, republish) to messages that were at the limit.
_INBOUND_PAYLOAD_SLACK = 64 * 1024
#: Seconds a graceful close may take before the connection is aborted.
CLOSE_TIMEOUT = 5.0
#: A flush of at most this many bytes over plain TCP is sent at once (see flush_now).
EAGER_WRITE_MAX = 16 * 1024
#: Over plain TCP, once this many bytes are queued, publish() hands them to the socket
#: itself (see write_through): a loop that never yields to the reactor keeps going.
WRITE_THROUGH_AT = 64 * 1024


class ConnectionHandler(TypingProtocol):
    """What a :class:`NatsProtocol` reports to (implemented by the client)."""

    def connect_options(self, info: dict[str, Any]) -> dict[str, Any]: ...
    def msgs_received(self, msgs: list[Msg]) -> None: ...
    def info_received(self, info: dict[str, Any]) -> None: ...
    def server_error(self, error: ServerError) -> None: ...
    def message_error(self, error: NatsError) -> None: ...
    def schedule(self, fn: Callable[..., object], *args: object) -> None: ...
    def read_started(self) -> None: ...
    def read_finished(self) -> None: ...
    def outbound_drained(self) -> None: ...
    def connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None: ...


@implementer(IPushProducer)
class NatsProtocol(Protocol):
    """One connection. Created per attempt by the client; never reused."""

    def __init__(
        self,
        handler: ConnectionHandler,
        clock: IReactorTime,
        *,
        ping_interval: float = 120.0,
        max_pings_out: int = 2,
        max_control_line: int = 64 * 1024,
        server_max_control_line: int = 4096,
        tls_creator: Callable[[], Any] | None = None,
        tls_wanted: bool = False,
        tls_first: bool = False,
    ) -> None:
        self.handler = handler
        #: Makes the TLS connection creator (verifying the server's name) when needed.
        self.tls_creator = tls_creator
        #: The client insists on TLS (``tls://`` URL or TLS options).
        self.tls_wanted = tls_wanted
        #: TLS started before INFO (the endpoint is wrapped in TLS already).
        self.tls_active = tls_first
        #: The transport while it is plain TCP, no TLS (small flushes are sent at once).
        self._eager: tcp.Connection | None = None
        self.clock = clock
        self.ping_interval = ping_interval
        self.max_pings_out = max_pings_out
        self.parser = Parser(max_control_line=max_control_line)
        #: The longest control line the server accepts from us (CONNECT included).
        self.server_max_control_line = server_max_control_line
        #: INFO from the server (the latest one).
        self.info: dict[str, Any] = {}
        self._got_info = False
        #: Fires with this protocol once the server answered CONNECT+PING with PONG.
        self.handshake: Deferred[NatsProtocol] = Deferred(self._cancel_handshake)
        self.ready = False
        #: True once the handshake completed (stays True after the connection is lost).
        self.established = False
        self.lost = False
        self.pings_out = 0
        #: Outbound: what waits for the end of this reactor turn (or for the transport
        #: to ask for more), as whole frames or a frame's parts, and its size in bytes.
        #: ``write()`` appends here; the client's publish() hot path appends a frame's
        #: parts itself (no call per message), keeping
        #: ``out_bytes`` right and calling :meth:`schedule_flush` when the list was
        #: empty. The list object stays the same for the whole connection.
        self.out_parts: list[bytes] = []
        self.out_bytes = 0
        #: Set while the handler runs a batch of work after which it calls flush_now()
        #: itself: no timed call is needed for what the batch writes.
        self.flush_held = False
        self._flush_call: IDelayedCall | None = None
        self._producer_paused = False
        self._reading_paused = False
        # One entry per PING we sent: a Deferred to fire on its PONG, or None.
        self._pongs: deque[Deferred[None] | None] = deque()
        self._ping_call: IDelayedCall | None = None
        self._close_call: IDelayedCall | None = None
        self._close_reason: NatsError | None = None
        self._in_data = False

    # ------------------------------------------------------------------ lifecycle
    def connectionMade(self) -> None:
        transport = self.transport
        assert transport is not None
        set_nodelay = getattr(transport, "setTcpNoDelay", None)
        if set_nodelay is not None:
            try:
                set_nodelay(True)
            except OSError:  # pragma: no cover - e.g. a UNIX socket
                pass
        transport.registerProducer(self, True)  # type: ignore[attr-defined]
        if isinstance(transport, tcp.Connection) and not self.tls_active:
            self._eager = transport

    def connectionLost(self, reason: Failure = Failure(ConnectionClosedError())) -> None:  # noqa: B008
        self.lost = True
        was_ready = self.ready
        self.ready = False
        for call in (self._ping_call, self._flush_call, self._close_call):
            if call is not None and call.active():
                call.cancel()
        self._ping_call = self._flush_call = self._close_call = None
        err = self._close_reason
        if err is None:
            if self.tls_active and is_tls_failure(reason):
                err = TLSError(f"TLS failed: {reason.getErrorMessage()}")
            else:
                err = ConnectionClosedError(f"connection lost: {reason.getErrorMessage()}")
        if not self.handshake.called:
            fail = err if isinstance(err, ConnectError) else ConnectError(str(err))
            self.handshake.errback(fail)
        elif was_ready or self._got_info:
            # The handler may take the unsent publishes and the pending PINGs first.
            self.handler.connection_lost(self, err)
        self.out_parts.clear()
        self.out_bytes = 0
        pongs = list(self._pongs)
        self._pongs.clear()
        for d in pongs:
            if d is not None and not d.called:
                self.handler.schedule(d.errback, ConnectionClosedError(str(err)))

    def take_unsent_publishes(self) -> list[bytes]:
        """Remove and return the PUB/HPUB frames never handed to the transport."""
        # The out-list holds frames and pieces of frames (publish() appends a frame's
        # parts): cut the bytes back into frames.
        queued = split_frames(b"".join(self.out_parts))
        frames = [f for f in queued if f[:4] == b"PUB " or f[:5] == b"HPUB "]
        self.out_parts.clear()
        self.out_bytes = 0
        return frames

    def take_pending_pings(self) -> list[Deferred[None]]:
        """Remove and return the Deferreds still waiting for a PONG."""
        waiting = [d for d in self._pongs if d is not None and not d.called]
        self._pongs.clear()
        return waiting

    def _handshake_done(self) -> None:
        if not self.handshake.called and not self.lost:
            self.handshake.callback(self)

    def _cancel_handshake(self, d: Deferred[NatsProtocol]) -> None:
        self._close_reason = ConnectError("connection attempt cancelled")
        self.abort()

    def abort(self, reason: NatsError | None = None) -> None:
        """Drop the connection now, without sending what is buffered."""
        if reason is not None and self._close_reason is None:
            self._close_reason = reason
        if self.transport is not None and not self.lost:
            self.transport.abortConnection()  # type: ignore[attr-defined]

    def close(self, reason: NatsError | None = None) -> None:
        """Send what is buffered, then close the connection."""
        self._producer_paused = False
        self.flush_now()
        if self.transport is not None and not self.lost:
            if self._close_reason is None:
                self._close_reason = reason or ConnectionClosedError("connection closed by client")
            # TLS waits for a registered producer to go before it shuts down.
            self.transport.unregisterProducer()  # type: ignore[attr-defined]
            self.transport.loseConnection()
            # A peer that stops reading must not keep us waiting forever.
            self._close_call = self.clock.callLater(CLOSE_TIMEOUT, self.abort)

    # ------------------------------------------------------------------ inbound
    def dataReceived(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or self._close_reason is not None or getattr(
            transport, "disconnecting", False
        ):
            return
        handler = self.handler
        handler.read_started()
        try:
            try:
                events = self.parser.feed(data)
            except ProtocolError as e:
                self._dispatch(e.events)
                log.warn("Protocol error from server: {error}", error=str(e))
                self.abort(e)
                return
            self._dispatch(events)
        finally:
            handler.read_finished()

    def _dispatch(self, events: list[Any] | list[object]) -> None:
        if not events:
            return
        if not self._got_info and events and type(events[0]) not in (Info, Err):
            # The server speaks first, with INFO; anything else is not a NATS server.
            self.abort(ProtocolError(f"expected INFO first, got {type(events[0]).__name__}"))
            return
        if self.parser.controls == 0:
            # Only messages (the common case): hand them over in one call.
            self.handler.msgs_received(events)  # type: ignore[arg-type]
            return
        msgs_received = self.handler.msgs_received
        run: list[Msg] = []
        for ev in events:
            if type(ev) is Msg:
                run.append(ev)
                continue
            if run:
                msgs_received(run)
                run = []
            if type(ev) is Ping:
                self.write(PONG)
            elif type(ev) is Pong:
                self._on_pong()
            elif type(ev) is Info:
                self._on_info(ev.options)
            elif type(ev) is Err:
                self._on_err(ev.message)
            elif type(ev) is BadHeaders:
                self.handler.message_error(MalformedHeadersError(
                    f"message on {ev.subject!r} (sid {ev.sid}) carries a header block that "
                    f"cannot be parsed ({ev.reason}); delivered with the block in "
                    "headers.raw",
                    subject=ev.subject, sid=ev.sid,
                ))
            if self.closing:
                return  # only control events can end the connection; stop at once
        if run:
            msgs_received(run)

    @property
    def phase(self) -> str:
        """Where the connection stands, in words (for errors: a timeout names it)."""
        if self.transport is None:
            return "TCP connect"
        if self.ready:
            return "connected"
        if not self._got_info:
            return "TLS handshake" if self.tls_active else "NATS handshake (waiting for INFO)"
        if self.tls_active and not self.handshake.called:
            return "TLS or NATS handshake (CONNECT sent, waiting for PONG)"
        return "NATS handshake (CONNECT sent, waiting for PONG)"

    @property
    def closing(self) -> bool:
        """True once this connection is being closed or aborted."""
        return self._close_reason is not None

    def _on_info(self, info: dict[str, Any]) -> None:
        first = not self._got_info
        self._got_info = True
        self.info = info
        mp = info.get("max_payload")
        if isinstance(mp, int):
            self.parser.max_payload = min(mp + _INBOUND_PAYLOAD_SLACK, HARD_MAX_PAYLOAD)
        if first:
            if not self._start_tls(info):
                return
            try:
                options = self.handler.connect_options(info)
            except NatsError as e:
                self.abort(e)
                return
            except Exception as e:
                # User credential callbacks (token_handler, user_jwt_cb, signature_cb)
                # run here: their errors must not escape dataReceived.
                log.failure("Building CONNECT failed")
                self.abort(ConnectError(f"cannot build CONNECT: {e!r}"))
                return
            options["tls_required"] = self.tls_active
            connect = encode_connect(options)
            length = len(connect) - len(b"CONNECT \r\n")
            if length > self.server_max_control_line:
                # The server would only answer "maximum control line exceeded". (The
                # options hold credentials: the message names none of them.)
                self.abort(ConnectError(
                    f"CONNECT would be {length} bytes, over the server's max_control_line "
                    f"of {self.server_max_control_line} bytes (a long name or JWT? raise "
                    "the max_control_line connect option if the server allows more)"
                ))
                return
            self._write_now(connect + PING)
            return
        if self.ready:
            self.handler.info_received(info)

    def _start_tls(self, info: dict[str, Any]) -> bool:
        """Upgrade to TLS after INFO when either side requires it; False if we aborted."""
        if self.tls_active:
            return True
        server_requires = bool(info.get("tls_required"))
        server_offers = server_requires or bool(info.get("tls_available"))
        if not (self.tls_wanted or server_requires):
            return True
        if not server_offers:
            self.abort(TLSError("TLS required by the client, but the server offers none"))
            return False
        if self.tls_creator is None:
            self.abort(TLSError("the server requires TLS, and TLS is not available"))
            return False
        try:
            creator = self.tls_creator()
        except NatsError as e:
            self.abort(e)
            return False
        start = getattr(self.transport, "startTLS", None)
        if start is None:
            self.abort(TLSError("this transport cannot start TLS"))
            return False
        start(creator)
        self.tls_active = True
        self._eager = None  # TLS now sits between us and the socket
        return True

    def _on_pong(self) -> None:
        if not self.ready:
            if not self._got_info:
                self.abort(ProtocolError("PONG before INFO"))
                return
            self.ready = True
            self.established = True
            self.pings_out = 0
            self._schedule_ping()
            # The handshake's callbacks reach user code: not from inside dataReceived.
            self.handler.schedule(self._handshake_done)
            return
        self.pings_out = 0
        if self._pongs:
            d = self._pongs.popleft()
            if d is not None and not d.called:
                self.handler.schedule(d.callback, None)

    def _on_err(self, message: str) -> None:
        error, survives = classify_error(message)
        if not self.ready:
            # Any -ERR during the handshake ends this attempt.
            self.abort(error if isinstance(error, AuthorizationError) else _as_connect_error(error))
            return
        if survives:
            self.handler.server_error(error)
            return
        if message.lower().startswith("stale connection"):
            self.abort(StaleConnectionError(f"server: {message}"))
        else:
            self.abort(error)

    # ------------------------------------------------------------------ pings
    def _schedule_ping(self) -> None:
        if self.ping_interval > 0 and not self.lost:
            self._ping_call = self.clock.callLater(self.ping_interval, self._ping_tick)

    def _ping_tick(self) -> None:
        self._ping_call = None
        self.pings_out += 1
        if self.pings_out > self.max_pings_out:
            log.info("No PONG for {n} PINGs: stale connection", n=self.max_pings_out)
            self.abort(StaleConnectionError(f"{self.max_pings_out} PINGs without a PONG"))
            return
        self._pongs.append(None)
        self.write(PING)
        self.flush_now()
        self._schedule_ping()

    def ping(self) -> Deferred[None]:
        """Send a PING; the Deferred fires (in a later turn) on its PONG."""
        d: Deferred[None] = Deferred()
        self._pongs.append(d)
        self.write(PING)
        return d

    # ------------------------------------------------------------------ outbound
    def _write_now(self, data: bytes) -> None:
        if self.transport is not None and not self.lost:
            self.transport.write(data)

    def write(self, data: bytes) -> None:
        """Queue ``data``; it goes out, with everything else queued, at the turn's end."""
        self.write_many([data], len(data))

    def write_many(self, frames: list[bytes], nbytes: int) -> None:
        """Queue several frames at once (``Client.publish`` inlines this)."""
        self.out_parts.extend(frames)
        self.out_bytes += nbytes
        self.schedule_flush()

    def schedule_flush(self) -> None:
        """Make sure what is queued leaves at the end of this turn."""
        if self._flush_call is None and not self._producer_paused and not self.flush_held:
            self._flush_call = self.clock.callLater(0, self._flush_turn)

    def _flush_turn(self) -> None:
        self._flush_call = None
        self.flush_now()

    @property
    def can_write_through(self) -> bool:
        """True while :meth:`write_through` can hand data to the socket (plain TCP)."""
        return self._eager is not None

    def write_through(self) -> None:
        """Hand everything queued to the socket now, without waiting for the reactor.

        For a publisher that never yields (a plain loop): called by the client once
        :data:`WRITE_THROUGH_AT` bytes are queued on a plain TCP connection. If the
        transport's buffer is still full from the last time, the socket is tried first;
        while the kernel takes nothing, the queue stays here (and the client's outbound
        bound applies). What this hands over and the kernel has not yet sent is lost
        if the connection dies: at most the kernel's send buffer and one write.
        """
        eager = self._eager
        if eager is None or self.lost or eager.disconnecting or not self.out_parts:
            return
        if self._producer_paused:
            # The transport resumes us (resumeProducing) once its buffer is empty.
            eager.doWrite()  # type: ignore[no-untyped-call]
            if self._producer_paused:
                return
        self.flush_now(bulk=True)

    def flush_now(self, bulk: bool = False) -> None:
        """Hand everything queued to the transport now (unless it asked us to pause).

        Over plain TCP a small flush (or, with ``bulk``, any flush) is also handed to
        the socket at once instead of on the reactor's next writable event.
        """
        if self._producer_paused or not self.out_parts or self.lost or self.transport is None:
            return
        out = self.out_parts
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()  # the same list object for the whole connection (the client appends to it)
        self.out_bytes = 0
        self.transport.write(data)
        eager = self._eager
        if (
            eager is not None
            and (bulk or len(data) <= EAGER_WRITE_MAX)
            and not eager.disconnecting
        ):
            # A small flush (a request, a reply, a few publishes) is latency-bound: send
            # it now rather than on the reactor's next "writable" event, which saves
            # a pass of the event loop per hop. doWrite() is what the reactor would
            # call; what it cannot send stays queued for the reactor, and an error it
            # meets is left to the reactor too. A big flush at the end of a turn is
            # throughput-bound and waits for the reactor, so a socket that has just
            # died can swallow no more of it than it could without this; a bulk one
            # (write_through) is there because the reactor is not running.
            eager.doWrite()  # type: ignore[no-untyped-call]
        self.handler.outbound_drained()

    # IPushProducer: the transport's send buffer is full / has room again.
    def pauseProducing(self) -> None:
        self._producer_paused = True

    def resumeProducing(self) -> None:
        self._producer_paused = False
        if self.out_parts:
            self.schedule_flush()

    def stopProducing(self) -> None:
        self._producer_paused = True

    @property
    def write_paused(self) -> bool:
        """True while the transport's send buffer is full."""
        return self._producer_paused

    # Inbound back-pressure.
    def pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self.lost:
            self._reading_paused = True
            self.transport.pauseProducing()  # type: ignore[attr-defined]

    def resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self.lost:
            self._reading_paused = False
            self.transport.resumeProducing()  # type: ignore[attr-defined]

    @property
    def reading_paused(self) -> bool:
        return self._reading_paused


def _as_connect_error(error: ServerError) -> ConnectError:
    err = ConnectError(f"server refused the connection: {error.server_message}")
    err.__cause__ = error
    return err
