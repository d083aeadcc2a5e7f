"""The Twisted ``Protocol`` for one connection to one NATS server: a thin adapter.

The protocol's state lives in the sans-IO :class:`~txnats.protocol.connection.Connection`
(the handshake, PINGs, what ``-ERR`` means, the outbox of frames). This adapter feeds it
the socket's bytes and passes on what they mean to its :class:`ConnectionHandler`
(the client), writes what its outbox holds (one ``transport.write`` per reactor turn; a
small flush is handed to the socket at once), starts TLS when the connection says so,
keeps the timers (keep-alive PINGs, the close deadline) and applies flow control both
ways: it is a push producer for its transport (a full send buffer pauses our writes),
and it pauses reading from the socket while a back-pressure subscription is full.

It never runs user code itself: messages go to the handler, which queues the work and
runs it once a whole read has been parsed and dispatched (``read_finished``), never in
the middle of parsing.
"""

from __future__ import annotations

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
    ConnectError,
    ConnectionClosedError,
    MalformedHeadersError,
    NatsError,
    ProtocolError,
    ServerError,
    TLSError,
)
from txnats.protocol.connection import (
    Closing,
    Connection,
    Established,
    Greeted,
    InfoUpdate,
    Phase,
    Ponged,
    Refused,
)
from txnats.protocol.events import BadHeaders, Msg
from txnats.protocol.outbox import Outbox
from txnats.tls import is_tls_failure

__all__ = ["ConnectionHandler", "NatsProtocol"]

log = Logger()

#: Seconds a graceful close may take before the connection is aborted.
CLOSE_TIMEOUT = 5.0
#: A flush of at most this many bytes over plain TCP is sent at once (see flush_now).
EAGER_WRITE_MAX = 16 * 1024
#: Over plain TCP, once this many bytes are queued, publish() hands them to the socket
#: itself (see write_through): a loop that never yields to the reactor keeps going.
WRITE_THROUGH_AT = 64 * 1024


class ConnectionHandler(TypingProtocol):
    """What a :class:`NatsProtocol` reports to (the client's parts; see
    :class:`txnats._hooks.ConnectionHooks`)."""

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
        self.clock = clock
        self.ping_interval = ping_interval
        #: The protocol's state: handshake, PINGs, the outbox.
        self.conn: Connection[Deferred[None]] = Connection(
            tls_wanted=tls_wanted,
            tls_active=tls_first,
            tls_possible=tls_creator is not None,
            max_control_line=server_max_control_line,
            max_inbound_line=max_control_line,
            max_pings_out=max_pings_out,
        )
        self.parser = self.conn.parser
        #: What waits to be written (the publish fast path appends to it; see Outbox).
        self.outbox: Outbox = self.conn.outbox
        #: Makes the TLS connection creator (verifying the server's name) when needed.
        self._tls_creator = tls_creator
        #: The transport while it is plain TCP, no TLS (small flushes are sent at once).
        self._eager: tcp.Connection | None = None
        #: Fires with this protocol once the server answered CONNECT+PING with PONG.
        self.handshake: Deferred[NatsProtocol] = Deferred(self._cancel_handshake)
        #: True once the handshake completed (stays True after the connection is lost).
        self.established = False
        self.lost = False
        # Set by hold_flush() while the handler runs a batch that ends with a flush.
        self._flush_held = False
        self._flush_call: IDelayedCall | None = None
        self._producer_paused = False
        self._reading_paused = False
        self._ping_call: IDelayedCall | None = None
        self._close_call: IDelayedCall | None = None
        self._close_reason: NatsError | None = None

    # ------------------------------------------------------------------ state
    @property
    def info(self) -> dict[str, Any]:
        """The server's latest INFO."""
        return self.conn.info

    @property
    def ready(self) -> bool:
        """True between the handshake's end and the connection's."""
        return self.conn.ready and not self.lost

    @property
    def tls_active(self) -> bool:
        return self.conn.tls_active

    @property
    def closing(self) -> bool:
        """True once this connection is being closed or aborted."""
        return self._close_reason is not None

    @property
    def phase(self) -> str:
        """Where the connection stands, in words (for errors: a timeout names it)."""
        if self.transport is None:
            return "TCP connect"
        phase = self.conn.phase
        if phase is Phase.GREETING and self.tls_active:
            return "TLS handshake"
        if phase is Phase.AWAITING_PONG and self.tls_active:
            return "TLS or NATS handshake (CONNECT sent, waiting for PONG)"
        return phase.value

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
        self.conn.close()
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
        elif self.conn.greeted:
            # The handler may take the unsent publishes and the pending PINGs first.
            self.handler.connection_lost(self, err)
        self.outbox.take()
        for d in self.conn.take_pings():
            if not d.called:
                self.handler.schedule(d.errback, ConnectionClosedError(str(err)))

    def take_unsent_publishes(self) -> list[bytes]:
        """Remove and return the PUB/HPUB frames never handed to the transport."""
        return self.outbox.take_publishes()

    def take_pending_pings(self) -> list[Deferred[None]]:
        """Remove and return the Deferreds still waiting for a PONG."""
        return [d for d in self.conn.take_pings() if not d.called]

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
        self.conn.close()
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
            conn = self.conn
            events = conn.receive_data(data)
            if conn.messages_only:
                # Only messages (the common case): hand them over in one call.
                handler.msgs_received(events)
            else:
                if events:
                    self._dispatch(events)
                if self.outbox.parts and self._close_reason is None:
                    self.schedule_flush()  # (PONGs)
        finally:
            handler.read_finished()

    def _dispatch(self, events: list[Any]) -> None:
        """Pass on a read's events in order: messages in runs, the rest one by one."""
        msgs_received = self.handler.msgs_received
        run: list[Msg] = []
        for ev in events:
            if type(ev) is Msg:
                run.append(ev)
                continue
            if run:
                msgs_received(run)
                run = []
            self._event(ev)
            if self.closing:
                return  # only control events can end the connection; stop at once
        if run:
            msgs_received(run)

    def _event(self, ev: object) -> None:
        handler = self.handler
        if type(ev) is Ponged:
            handler.schedule(ev.token.callback, None)
        elif type(ev) is InfoUpdate:
            handler.info_received(ev.info)
        elif type(ev) is Refused:
            handler.server_error(ev.error)
        elif type(ev) is BadHeaders:
            handler.message_error(MalformedHeadersError(
                f"message on {ev.subject!r} (sid {ev.sid}) carries a header block that "
                f"cannot be parsed ({ev.reason}); delivered with the block in headers.raw",
                subject=ev.subject, sid=ev.sid,
            ))
        elif type(ev) is Established:
            self.established = True
            self._schedule_ping()
            # The handshake's callbacks reach user code: not from inside dataReceived.
            handler.schedule(self._handshake_done)
        elif type(ev) is Greeted:
            self._greeted(ev)
            if not self.closing:
                self._dispatch(self.conn.resume())
        elif type(ev) is Closing:
            if isinstance(ev.error, ProtocolError):
                log.warn("Protocol error from server: {error}", error=str(ev.error))
            self.abort(ev.error)

    def _greeted(self, ev: Greeted) -> None:
        """The first INFO: start TLS if the connection says so, then send CONNECT."""
        if ev.start_tls and not self._start_tls():
            return
        try:
            options = self.handler.connect_options(ev.info)
            self.conn.send_connect(options)
            if self.transport is not None:
                self.transport.write(self.outbox.take())  # (the handshake: not the client's)
        except NatsError as e:
            self.abort(e)
        except Exception as e:
            # User credential callbacks (token_handler, user_jwt_cb, signature_cb) run
            # here: their errors must not escape dataReceived.
            log.failure("Building CONNECT failed")
            self.abort(ConnectError(f"cannot build CONNECT: {e!r}"))

    def _start_tls(self) -> bool:
        """Upgrade to TLS after INFO; False if that failed (the connection is aborted)."""
        assert self._tls_creator is not None  # (the connection checked tls_possible)
        try:
            creator = self._tls_creator()
        except NatsError as e:
            self.abort(e)
            return False
        except Exception as e:  # (a user's TLS callback: it must not escape dataReceived)
            log.failure("Making the TLS connection creator failed")
            self.abort(TLSError(f"cannot set up TLS: {type(e).__name__}"))
            return False
        start = getattr(self.transport, "startTLS", None)
        if start is None:
            self.abort(TLSError("this transport cannot start TLS"))
            return False
        start(creator)
        self.conn.tls_started()
        self._eager = None  # TLS now sits between us and the socket
        return True

    # ------------------------------------------------------------------ pings
    def _schedule_ping(self) -> None:
        if self.ping_interval > 0 and not self.lost:
            self._ping_call = self.clock.callLater(self.ping_interval, self._ping_tick)

    def _ping_tick(self) -> None:
        self._ping_call = None
        stale = self.conn.keepalive()
        if stale is not None:
            log.info("No PONG for {n} PINGs: stale connection", n=self.conn.max_pings_out)
            self.abort(stale)
            return
        self.flush_now()
        self._schedule_ping()

    def ping(self) -> Deferred[None]:
        """Send a PING; the Deferred fires (in a later turn) on its PONG."""
        d: Deferred[None] = Deferred()
        self.conn.ping(d)
        self.schedule_flush()
        return d

    @property
    def pings_out(self) -> int:
        """Keep-alive PINGs sent since the last PONG."""
        return self.conn.pings_out

    # ------------------------------------------------------------------ outbound
    def write(self, frame: bytes) -> None:
        """Queue a frame; it goes out, with everything else queued, at the turn's end."""
        outbox = self.outbox
        outbox.parts.append(frame)
        outbox.nbytes += len(frame)
        self.schedule_flush()

    def write_many(self, frames: list[bytes], nbytes: int) -> None:
        """Queue several frames at once."""
        self.outbox.write_frames(frames, nbytes)
        self.schedule_flush()

    def schedule_flush(self) -> None:
        """Make sure what is queued leaves at the end of this turn."""
        if self._flush_call is None and not self._producer_paused and not self._flush_held:
            self._flush_call = self.clock.callLater(0, self._flush_turn)

    def hold_flush(self) -> None:
        """A batch of work runs that ends with :meth:`release_flush`: what it writes
        needs no timed flush of its own."""
        self._flush_held = True

    def release_flush(self) -> None:
        """The batch is over: what it wrote leaves now."""
        self._flush_held = False
        if self.outbox:
            self.flush_now()

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
        if eager is None or self.lost or eager.disconnecting or not self.outbox:
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
        if self._producer_paused or not self.outbox or self.lost or self.transport is None:
            return
        data = self.outbox.take()
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
        if self.outbox:
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
