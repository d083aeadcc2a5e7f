"""The client: what outlives one TCP connection.

A :class:`Client` owns the server pool, the reconnect loop, the subscription registry,
the request multiplexer and the statistics. Each connection attempt builds a fresh
:class:`~txnats.connection.NatsProtocol`; the client survives its loss.

States and the transitions allowed between them are in ``_TRANSITIONS``; data that only
one state has (the connected protocol, the pending attempt) is set on entering that
state and cleared on leaving it.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import (
    Deferred,
    DeferredList,
    fail,
    succeed,
)
from twisted.internet.interfaces import IDelayedCall, IReactorCore, IReactorTime
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from txnats import __version__
from txnats._args import check_count, check_delay, check_timeout
from txnats._outbox import ReconnectBuffer, Refused
from txnats.auth import Credentials
from txnats.connection import WRITE_THROUGH_AT, NatsProtocol
from txnats.errors import (
    AuthorizationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionDrainingError,
    CredentialsError,
    DrainTimeoutError,
    FlushTimeoutError,
    HeadersNotSupportedError,
    InvalidArgumentTypeError,
    MaxPayloadError,
    NatsError,
    NoServersError,
    OutboundBufferFullError,
    PermissionViolationError,
    ServerError,
    TLSError,
)
from txnats.interfaces import IClient
from txnats.nuid import next_nuid
from txnats.options import (
    DEFAULT_MAX_OUTBOUND,
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_PENDING_BYTES,
    DEFAULT_PENDING_MSGS,
    DEFAULT_RECONNECT_BUFFER,
    DEFAULT_URL,
    Options,
    Statistics,
)
from txnats.protocol.commands import (
    SIZE_TAILS,
    _pub_cache,
    encode_sub,
    encode_unsub,
    pub_prefix,
    publish_subject,
    reply_subject,
)
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput, encode_headers
from txnats.request import RequestMux, request_many
from txnats.servers import Server, ServerPool, parse_servers
from txnats.subscription import Handler, Subscription, serving
from txnats.tls import TLSConfig

if TYPE_CHECKING:
    from txnats.jetstream import JetStreamContext

__all__ = ["DEFAULT_URL", "Client", "ClientState", "Options", "Statistics", "connect"]

log = Logger()

class ClientState:
    """The states of a client (plain strings, for logging)."""

    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    RECONNECTING = "RECONNECTING"
    DRAINING_SUBS = "DRAINING_SUBS"
    DRAINING_PUBS = "DRAINING_PUBS"
    CLOSED = "CLOSED"


_S = ClientState
_TRANSITIONS: dict[str, frozenset[str]] = {
    _S.CONNECTING: frozenset({_S.CONNECTED, _S.CLOSED}),
    _S.CONNECTED: frozenset({_S.RECONNECTING, _S.DRAINING_SUBS, _S.CLOSED}),
    _S.RECONNECTING: frozenset({_S.CONNECTED, _S.CLOSED}),
    _S.DRAINING_SUBS: frozenset({_S.DRAINING_PUBS, _S.CLOSED}),
    _S.DRAINING_PUBS: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
}


class _OneProtocolFactory(Factory):
    """Hands out the one protocol instance made for this attempt."""

    def __init__(self, proto: NatsProtocol) -> None:
        self._proto = proto

    def buildProtocol(self, addr: object) -> NatsProtocol:
        return self._proto


@implementer(IClient)
class Client:
    """A NATS client. Make one with :func:`connect`."""

    def __init__(
        self,
        reactor: IReactorCore,
        servers: str | Sequence[str] = DEFAULT_URL,
        options: Options | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        _check_reactor("Client", reactor)
        self._reactor = reactor
        clock: IReactorTime = reactor  # type: ignore[assignment]
        self._clock = clock
        self.options = opts = options or Options()
        _check_options(opts)
        self._rng = rng or random.Random()
        self._credentials = Credentials(
            user=opts.user,
            password=opts.password,
            token=opts.token,
            token_handler=opts.token_handler,
            nkeys_seed=opts.nkeys_seed,
            nkeys_seed_file=opts.nkeys_seed_file,
            user_credentials=opts.user_credentials,
            user_jwt_cb=opts.user_jwt_cb,
            signature_cb=opts.signature_cb,
        )
        self._pool = ServerPool(
            parse_servers(servers), randomize=not opts.no_randomize, rng=self._rng
        )
        self._in_msgs = self._in_bytes = self._out_msgs = self._out_bytes = 0
        self._reconnects = 0
        self._state = _S.CONNECTING
        self._proto: NatsProtocol | None = None
        # The protocol publishes go to, or None (not connected, or no longer publishing).
        self._writer: NatsProtocol | None = None
        self._max_outbound = opts.max_outbound_bytes
        # publish()'s fast path queues up to _through_at bytes; past it, the slow path
        # hands the queue to the socket itself over plain TCP (see _write_through), so
        # a loop that never yields keeps going. _through_base is where it starts.
        self._through_base = self._through_at = self._max_outbound
        self._server: Server | None = None
        #: INFO of the server we are (or were last) connected to.
        self.server_info: dict[str, Any] = {}
        self._max_payload = DEFAULT_MAX_PAYLOAD
        # Payloads below this size take publish()'s fast path (see _set_max_payload).
        self._fast_size = min(len(SIZE_TAILS), DEFAULT_MAX_PAYLOAD + 1)
        self._subs: dict[int, Subscription] = {}
        # Subscriptions out of the registry (unsubscribed, drained, max reached) that
        # have not ended yet: their mailboxes may still hold messages.
        self._ending: dict[int, Subscription] = {}
        self._next_sid = 0
        self._mux: RequestMux | None = None
        self._soon: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        self._soon_call: IDelayedCall | None = None
        # True while a protocol dispatches a read (see read_finished).
        self._reading = False
        self._blocked: set[int] = set()
        self._room_waiters: list[Deferred[None]] = []
        # Reconnecting: frames to send once connected, and flushes waiting for it.
        self._reconnect_buf = ReconnectBuffer()
        # Whether the server (the current one, or the last) accepts HPUB.
        self._headers_supported = True
        self._offline_flushes: list[Deferred[None]] = []
        self._attempt_call: IDelayedCall | None = None
        self._attempt_d: Deferred[NatsProtocol] | None = None
        self._first_connect: Deferred[Client] | None = None
        self._last_error: NatsError | None = None
        self._closed_waiters: list[Deferred[None]] = []
        self._fully_closed = False
        self._drain_d: Deferred[None] | None = None
        self._lame_duck_seen = False
        # A move off a lame-duck server under way: the dial to the next server.
        self._moving: Deferred[NatsProtocol] | None = None
        self._shutdown_trigger: object = None
        self._started = False

    # ================================================================== state
    @property
    def clock(self) -> IReactorTime:
        """The clock the client times everything with (the reactor, or a test clock)."""
        return self._clock

    @property
    def state(self) -> str:
        """One of the :class:`ClientState` names."""
        return self._state

    def _set_state(self, new: str) -> None:
        if new not in _TRANSITIONS[self._state]:
            raise AssertionError(f"bad transition {self._state} -> {new}")  # pragma: no cover
        log.debug("State {old} -> {new}", old=self._state, new=new)
        self._state = new
        self._update_writer()

    def _update_writer(self) -> None:
        """Publishes go straight to the protocol only while connected (or draining subs)."""
        writable = self._state in (_S.CONNECTED, _S.DRAINING_SUBS)
        self._writer = self._proto if writable else None

    @property
    def stats(self) -> Statistics:
        """A snapshot of the counters (messages, and payload bytes without headers)."""
        return Statistics(
            self._in_msgs, self._out_msgs, self._in_bytes, self._out_bytes, self._reconnects
        )

    @property
    def is_connected(self) -> bool:
        return self._state == _S.CONNECTED

    @property
    def is_closed(self) -> bool:
        return self._state == _S.CLOSED

    @property
    def is_reconnecting(self) -> bool:
        return self._state == _S.RECONNECTING

    @property
    def is_draining(self) -> bool:
        return self._state in (_S.DRAINING_SUBS, _S.DRAINING_PUBS)

    @property
    def connected_url(self) -> str | None:
        """The URL of the current server, credentials redacted; None when not connected."""
        if self._proto is None or self._server is None:
            return None
        return self._server.redacted

    @property
    def client_id(self) -> int | None:
        cid = self.server_info.get("client_id")
        return cid if isinstance(cid, int) else None

    @property
    def max_payload(self) -> int:
        """The largest message (headers included) the server accepts."""
        return self._max_payload

    @property
    def servers(self) -> list[str]:
        """The server pool, credentials redacted."""
        return [s.redacted for s in self._pool.servers]

    @property
    def discovered_servers(self) -> list[str]:
        return [s.redacted for s in self._pool.servers if s.discovered]

    @property
    def pending_bytes(self) -> int:
        """Bytes accepted by publish() that are not yet handed to the socket."""
        if self._proto is not None:
            return self._proto.out_bytes
        return self._reconnect_buf.bytes

    # ================================================================== scheduling
    def schedule(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` soon: once the read being dispatched is over, or else in the
        next turn of the reactor (one ``callLater(0)`` per batch)."""
        self._soon.append((fn, args))
        if self._soon_call is None and not self._reading:
            self._soon_call = self._clock.callLater(0, self._run_soon)

    def read_started(self) -> None:
        self._reading = True

    def read_finished(self) -> None:
        """The protocol dispatched a whole read: run what it queued now, saving the
        reactor a pass (and a timed call) per batch of messages."""
        self._reading = False
        if self._soon:
            self._run_soon()

    def _run_soon(self) -> None:
        if self._soon_call is not None:
            if self._soon_call.active():
                self._soon_call.cancel()
            self._soon_call = None
        batch = self._soon
        self._soon = []
        # What the batch publishes (replies, above all) leaves at its end, below, rather
        # than from a timed call one reactor iteration later.
        held = self._proto
        if held is not None:
            held.flush_held = True
        try:
            for fn, args in batch:
                try:
                    fn(*args)
                except Exception:
                    log.failure("Unexpected error in a scheduled call")
        finally:
            if held is not None:
                held.flush_held = False
        proto = self._proto
        if proto is not None and proto._out:
            proto.flush_now()

    def _call_user(self, name: str, cb: Callable[..., object] | None, *args: object) -> None:
        if cb is None:
            return
        try:
            result = cb(*args)
        except Exception:
            log.failure("The {name} callback raised", name=name)
            return
        if isinstance(result, Deferred):
            result.addErrback(lambda f: log.failure("The {name} callback failed", f, name=name))

    def _report(self, error: Exception) -> None:
        """Report an asynchronous error to ``error_cb`` (in a later turn)."""
        if isinstance(error, NatsError):
            log.info("Async error: {error}", error=str(error))
        self.schedule(self._call_user, "error", self.options.error_cb, error)

    # ================================================================== connecting
    def start(self) -> Deferred[Client]:
        """Make the first connection of a client built with ``Client(reactor, servers,
        options)``; fires with the client once connected (what :func:`connect` returns).

        Each server is tried once (or, with ``retry_on_failed_connect``, as often as
        reconnecting would). Call it once.
        """
        if self._started:
            raise ConnectError("the client was started already")
        self._started = True
        d: Deferred[Client] = Deferred()
        self._first_connect = d
        # Close cleanly when the reactor stops (task.react ending, Ctrl-C), instead of
        # seeing the socket die and trying to reconnect during shutdown.
        add = getattr(self._reactor, "addSystemEventTrigger", None)
        if add is not None:
            self._shutdown_trigger = add("before", "shutdown", self._reactor_stopping)
        self._schedule_attempt()
        return d

    def _reactor_stopping(self) -> Deferred[None]:
        self._shutdown_trigger = None  # fired: must not be removed any more
        return self.close()

    # ConnectionHandler: what NatsProtocol calls -----------------------------------
    def connect_options(self, info: dict[str, Any]) -> dict[str, Any]:
        """The CONNECT fields for this server's INFO (credentials included)."""
        opts = self.options
        server = self._attempt_server
        if opts.no_echo and int(info.get("proto", 0)) < 1:
            raise ConnectError("server does not support no_echo")
        headers = bool(info.get("headers", False))
        out: dict[str, Any] = {
            "verbose": opts.verbose,
            "pedantic": opts.pedantic,
            "tls_required": False,
            "lang": "python-txnats",
            "version": __version__,
            "protocol": 1,
            "echo": not opts.no_echo,
            "headers": headers,
            "no_responders": headers,
        }
        if opts.name:
            out["name"] = opts.name
        creds = self._credentials
        out.update(
            creds.connect_fields(
                info,
                url_user=server.user if server else None,
                url_password=server.password if server else None,
                url_token=server.token if server else None,
            )
        )
        return out

    def msgs_received(self, msgs: list[Msg]) -> None:
        """Put messages in their subscriptions' mailboxes (called while parsing)."""
        subs = self._subs
        nbytes = 0
        last_sid = -1
        sub: Subscription | None = None
        for msg in msgs:
            nbytes += len(msg.data)
            sid = msg.sid
            if sid != last_sid:
                sub = subs.get(sid)
                last_sid = sid
            if sub is None:
                continue  # late message for a subscription that already ended
            sub._enqueue(msg)
            mx = sub.max_msgs
            if mx is not None and sub.received >= mx:
                sub._input_done()
                last_sid = -1  # it is gone from the registry now
        self._in_msgs += len(msgs)
        self._in_bytes += nbytes

    def _set_max_payload(self, mp: int) -> None:
        self._max_payload = mp
        # The fast path needs a prebuilt size line and no max_payload check.
        self._fast_size = min(len(SIZE_TAILS), mp + 1)

    def info_received(self, info: dict[str, Any]) -> None:
        self.server_info = info
        mp = info.get("max_payload")
        if isinstance(mp, int):
            self._set_max_payload(mp)
        self._merge_discovered(info)
        if info.get("ldm") and not self._lame_duck_seen:
            self._lame_duck_seen = True
            log.info("Server {url} entered lame duck mode", url=self.connected_url)
            self.schedule(self._call_user, "lame_duck", self.options.lame_duck_cb)
            if self.options.allow_reconnect and len(self._pool) > 1:
                self.schedule(self._move)

    def server_error(self, error: ServerError) -> None:
        if isinstance(error, PermissionViolationError) and error.operation == "subscribe":
            for sub in list(self._subs.values()):
                if sub.subject == error.subject and (
                    f'"{sub.queue}"' in error.server_message if sub.queue else True
                ):
                    self.schedule(sub._finish, error)
        elif isinstance(error, PermissionViolationError) and self._mux is not None:
            self._mux.fail_subject(error.subject, error)
        self._report(error)

    def outbound_drained(self) -> None:
        self._through_at = self._through_base
        if self._room_waiters:
            waiters = self._room_waiters
            self._room_waiters = []
            for d in waiters:
                self.schedule(d.callback, None)

    def connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None:
        if proto is not self._proto:
            return
        self._proto = None
        self._update_writer()
        self._blocked.clear()
        state = self._state
        if state == _S.CLOSED:
            if proto.established:
                self.schedule(
                    self._call_user, "disconnected", self.options.disconnected_cb, reason
                )
            self._finish_close()
            return
        self._last_error = reason
        self._cancel_move()
        log.info("Disconnected from {url}: {reason}", url=self._server, reason=str(reason))
        self.schedule(self._call_user, "disconnected", self.options.disconnected_cb, reason)
        if state == _S.CONNECTED and self.options.allow_reconnect:
            # Publishes accepted but never handed to the socket are kept, ahead of
            # anything published from now on (even past reconnect_buffer_size: they were
            # accepted); flushes wait for the next connection (or their timeout).
            self._reconnect_buf.prepend(proto.take_unsent_publishes())
            self._offline_flushes[:0] = proto.take_pending_pings()
            # wait_for_room() returns at once while disconnected: so do those pending now.
            self.outbound_drained()
            # The first retry goes to another server: servers discovered while connected
            # were appended behind the lost one, which would otherwise be dialled first
            # (and a frozen one answers the dial, then nothing until connect_timeout).
            lost, pool = self._server, self._pool.servers
            if lost in pool and len(pool) > 1:
                pool.remove(lost)
                pool.append(lost)
            self._set_state(_S.RECONNECTING)
            self._schedule_attempt()
        else:
            self._do_close(reason)

    # ------------------------------------------------------------------ attempts
    _attempt_server: Server | None = None

    def _pick_server(self) -> Server | None:
        max_attempts = self.options.max_reconnect_attempts
        first = self._first_connect is not None and not self.options.retry_on_failed_connect
        for _ in range(len(self._pool)):
            server = self._pool.next_server()
            limit = 1 if first else max_attempts
            if limit >= 0 and server.attempts >= limit:
                continue
            return server
        return None

    def _schedule_attempt(self) -> None:
        server = self._pick_server()
        if server is None:
            err = NoServersError(
                "no server could be reached"
                + (f"; last error: {self._last_error}" if self._last_error else "")
            )
            last = self._last_error
            # A refusal that retrying cannot mend is the more useful error.
            if isinstance(last, (AuthorizationError, TLSError, CredentialsError)):
                self._do_close(last)
            else:
                err.__cause__ = last
                self._do_close(err)
            return
        delay = 0.0
        if server.last_attempt is not None:
            elapsed = self._clock.seconds() - server.last_attempt
            wait = self.options.reconnect_wait
            if elapsed < wait:
                delay = wait - elapsed + self._rng.uniform(0, self.options.reconnect_jitter)
        self._attempt_call = self._clock.callLater(delay, self._attempt, server)

    def _attempt(self, server: Server) -> None:
        self._attempt_call = None
        d = self._dial(server)
        self._attempt_d = d
        d.addCallbacks(
            self._attempt_succeeded, self._attempt_failed, (server,), errbackArgs=(server,)
        )

    def _dial(self, server: Server) -> Deferred[NatsProtocol]:
        """Connect to ``server``: fires with the protocol once its handshake is done,
        or fails (within ``connect_timeout``)."""
        server.attempts += 1
        server.last_attempt = self._clock.seconds()
        opts = self.options
        tls = opts.tls or TLSConfig()
        tls_name = server.tls_hostname or server.host

        def tls_creator() -> Any:
            return tls.client_creator(tls_name)

        websocket = server.scheme in ("ws", "wss")
        # For wss:// TLS is under the WebSocket layer: started by the endpoint, first.
        tls_first = server.scheme == "wss" or (
            opts.tls is not None and opts.tls.handshake_first and not websocket
        )
        proto = NatsProtocol(
            self,
            self._clock,
            ping_interval=opts.ping_interval,
            max_pings_out=opts.max_pings_out,
            tls_creator=tls_creator,
            # TLS options make a nats:// server TLS-only; for ws:// they mean nothing
            # (a WebSocket has no in-band upgrade: use wss://).
            tls_wanted=server.scheme in ("tls", "wss") or (opts.tls is not None and not websocket),
            tls_first=tls_first,
        )
        self._attempt_server = server
        try:
            if websocket:
                endpoint = server.endpoint(
                    self._reactor,
                    opts.connect_timeout,
                    tls_creator if tls_first else None,
                    compression=opts.ws_compression,
                )
            else:
                endpoint = server.endpoint(self._reactor, opts.connect_timeout)
                if tls_first:
                    from twisted.internet.endpoints import wrapClientTLS

                    endpoint = wrapClientTLS(tls_creator(), endpoint)
        except NatsError as e:
            return fail(e)
        except Exception as e:
            return fail(ConnectError(f"bad endpoint: {e}"))
        connected = endpoint.connect(_OneProtocolFactory(proto))
        d: Deferred[NatsProtocol] = connected.addCallback(lambda _: proto.handshake)

        def on_timeout(result: object, timeout: float) -> object:
            # Called only when the timeout fired. Cancelling fails the dial with
            # whatever its current step says (ConnectingCancelledError, or a
            # DNSLookupError from the resolver): report a timeout, naming the step.
            if isinstance(result, Failure):
                phase = proto.phase
                if phase == "TCP connect" and not _is_ip(server.host):
                    phase = "name resolution or TCP connect"
                err = ConnectError(f"connect to {server} timed out after {timeout}s ({phase})")
                err.__cause__ = result.value
                return Failure(err)
            return result

        d.addTimeout(opts.connect_timeout, self._clock, onTimeoutCancel=on_timeout)
        return d

    def _attempt_failed(self, failure: Failure, server: Server) -> None:
        self._attempt_d = None
        if self._state == _S.CLOSED:
            return
        err = failure.value
        if not isinstance(err, NatsError):
            err = ConnectError(f"cannot connect to {server}: {failure.getErrorMessage()}")
        self._last_error = err
        log.info("Connect to {url} failed: {error}", url=server, error=str(err))
        if isinstance(err, AuthorizationError):
            if server.last_auth_error == str(err):
                log.warn("{url} refused the same credentials twice; removed", url=server)
                self._pool.servers.remove(server)
            server.last_auth_error = str(err)
        else:
            server.last_auth_error = None
        self._schedule_attempt()

    def _attempt_succeeded(self, proto: NatsProtocol, server: Server) -> None:
        self._attempt_d = None
        if self._state == _S.CLOSED:
            proto.abort()
            return
        reconnected = self._state == _S.RECONNECTING
        self._proto = proto
        self._set_state(_S.CONNECTED)
        self._server = server
        server.attempts = 0
        server.last_auth_error = None
        self._lame_duck_seen = False
        self._adopt_info(proto)
        log.info("Connected to {url}", url=server)
        # Subscriptions first, then what was published while disconnected.
        frames = self._subscribe_frames()
        blocks, refused = self._reconnect_buf.take(self._max_payload, self._headers_supported)
        frames.extend(blocks)
        if frames:
            proto.write_many(frames, sum(len(f) for f in frames))
        if refused.msgs:
            self._report_refused(refused)
        for waiter in self._offline_flushes:
            proto.ping().chainDeferred(waiter)
        self._offline_flushes = []
        self.outbound_drained()
        if self._first_connect is not None:
            first, self._first_connect = self._first_connect, None
            first.callback(self)
        if reconnected:
            self._reconnects += 1
            self.schedule(self._call_user, "reconnected", self.options.reconnected_cb)
        if proto.info.get("ldm"):
            self.info_received(proto.info)

    def _adopt_info(self, proto: NatsProtocol) -> None:
        """Take the limits of the server ``proto`` is connected to (now the client's)."""
        info = proto.info
        self.server_info = info
        mp = info.get("max_payload")
        self._set_max_payload(mp if isinstance(mp, int) else DEFAULT_MAX_PAYLOAD)
        self._headers_supported = bool(info.get("headers", False))
        self._through_base = self._through_at = (
            min(WRITE_THROUGH_AT, self._max_outbound)
            if proto.can_write_through
            else self._max_outbound
        )
        self._merge_discovered(info)

    def _subscribe_frames(self) -> list[bytes]:
        """SUB (and UNSUB with what is left of max_msgs) for every subscription."""
        frames = []
        for sub in self._subs.values():
            frames.append(encode_sub(sub.subject, sub.sid, sub.queue))
            if sub.max_msgs is not None:
                frames.append(encode_unsub(sub.sid, sub.max_msgs - sub.received))
        return frames

    def _report_refused(self, refused: Refused) -> None:
        """Report buffered publishes the new server would have refused (not sent)."""
        parts = []
        if refused.too_large:
            parts.append(
                f"{refused.too_large} over its max_payload of {self._max_payload} bytes "
                f"({refused.too_large_bytes} bytes)"
            )
        if refused.with_headers:
            parts.append(
                f"{refused.with_headers} with headers, which it does not support "
                f"({refused.with_headers_bytes} bytes)"
            )
        err = MaxPayloadError if refused.too_large else HeadersNotSupportedError
        error = err(
            f"{refused.msgs} publishes buffered while disconnected were not sent to "
            f"{self.connected_url}: " + "; ".join(parts) + ". The others were sent."
        )
        log.warn("{error}", error=str(error))
        self._report(error)

    def _merge_discovered(self, info: dict[str, Any]) -> None:
        urls = info.get("connect_urls")
        if not urls or self.options.ignore_discovered_servers or self._server is None:
            return
        new = self._pool.add_discovered(urls, self._server)
        if new and self._first_connect is None:
            self.schedule(
                self._call_user,
                "discovered_servers",
                self.options.discovered_servers_cb,
                [s.redacted for s in new],
            )

    def set_servers(self, servers: str | Sequence[str]) -> None:
        """Replace the server pool (used from the next reconnection on).

        The current connection is kept. Raises :class:`ConnectError` for a bad URL,
        leaving the pool as it was.
        """
        parsed = parse_servers(servers)
        self._pool = ServerPool(parsed, randomize=not self.options.no_randomize, rng=self._rng)

    # ------------------------------------------------------------------ lame duck
    def _move(self) -> None:
        """Move off a server in lame duck mode without a gap.

        The next server is dialled while the old connection keeps working. Once the
        new one is up, every subscription is made on it and confirmed (PONG); then
        publishes switch to it, the old connection unsubscribes everything, and it is
        closed once its server has answered a last PING. Until then, whatever the old
        server sends (replies to requests made before the switch among it) is still
        delivered: pending requests and flushes complete where they were sent. In the
        instant both connections are subscribed a message may arrive on both (a plain
        subscription sees it twice; requests take the first reply); none is lost. If
        the new server cannot be reached, the client reconnects as after a loss.
        """
        if self._state != _S.CONNECTED or self._moving is not None or self._proto is None:
            return
        current = self._server
        server = None
        for _ in range(len(self._pool)):
            candidate = self._pool.next_server()
            if candidate is not current:
                server = candidate
                break
        if server is None:
            return
        log.info("Moving from {old} to {new} (lame duck)", old=current, new=server)
        d = self._moving = self._dial(server)
        d.addCallbacks(self._move_connected, self._move_failed, (server,), errbackArgs=(server,))

    def _move_connected(self, new: NatsProtocol, server: Server) -> None:
        if self._state != _S.CONNECTED or self._proto is None:
            self._moving = None
            new.abort()
            return
        old = self._proto
        frames = self._subscribe_frames()
        if frames:
            new.write_many(frames, sum(len(f) for f in frames))
        new.ping().addCallbacks(
            lambda _: self._switch(old, new, server),
            self._move_failed,
            errbackArgs=(server,),
        )

    def _move_failed(self, failure: Failure, server: Server) -> None:
        self._moving = None
        if self._state != _S.CONNECTED:
            return
        log.info(
            "Could not move to {url}: {error}; reconnecting instead",
            url=server, error=failure.getErrorMessage(),
        )
        self.force_reconnect()

    def _switch(self, old: NatsProtocol, new: NatsProtocol, server: Server) -> None:
        """The new connection has every subscription: make it the client's."""
        self._moving = None
        if self._state != _S.CONNECTED or self._proto is not old or new.lost:
            new.abort()
            return
        old.handler = _Retired(self)
        for sid in self._subs:
            old.write(encode_unsub(sid))
        old.ping().addBoth(lambda _: old.close())
        # Behind what was published to it. (Now, not at the end of this turn: the
        # client flushes only its current connection then.)
        old.flush_now()
        lost = self._server
        self._proto = new
        self._server = server
        server.attempts = 0
        server.last_auth_error = None
        self._lame_duck_seen = False
        self._adopt_info(new)
        self._update_writer()
        pool = self._pool.servers
        if lost in pool and len(pool) > 1:
            pool.remove(lost)
            pool.append(lost)
        if self._blocked:
            new.pause_reading()
        self._reconnects += 1
        log.info("Moved to {url}", url=server)
        self.schedule(self._call_user, "reconnected", self.options.reconnected_cb)
        self.outbound_drained()
        if new.info.get("ldm"):
            self.info_received(new.info)

    def force_reconnect(self) -> None:
        """Close the current connection and reconnect (to another server if there is one).

        What was already published is sent to the old server before it is closed.
        """
        if self._state == _S.CONNECTED and self._proto is not None:
            self._proto.close(ConnectError("reconnect requested"))

    # ================================================================== publishing
    def publish(
        self,
        subject: str,
        data: bytes = b"",
        reply: str | None = None,
        headers: HeaderInput | None = None,
    ) -> None:
        """Publish ``data`` to ``subject``; buffered, written at the end of the turn.

        Raises :class:`BadSubjectError`, :class:`BadHeaderError`,
        :class:`MaxPayloadError` (headers included), :class:`OutboundBufferFullError`,
        :class:`ConnectionDrainingError` or :class:`ConnectionClosedError`; when it raises,
        nothing was queued.
        """
        try:
            entry = _pub_cache[subject]
        except (KeyError, TypeError):  # new, or unhashable: pub_prefix() checks it
            entry = pub_prefix(subject)
        if headers is None and type(data) is bytes:
            size = len(data)
            proto = self._writer
            if proto is not None and size < self._fast_size:
                # The hot path: NatsProtocol.write() inlined; _send() has the rest. The
                # frame's parts go on the out-list as they are: joining them there, once
                # per flush, is the only copy of the payload.
                prefix, plen = entry
                line, rest = SIZE_TAILS[size]
                if reply is None:
                    pending = proto.out_bytes + plen + rest
                    if pending <= self._through_at:
                        out = proto._out
                        if not out:
                            proto.schedule_flush()
                        out += (prefix, line, data, b"\r\n")
                        proto.out_bytes = pending
                        self._out_msgs += 1
                        self._out_bytes += size
                        return
                else:
                    # With a reply subject (JetStream publishes, requests made by
                    # hand): validated each time, since replies are rarely repeated.
                    rep = reply_subject(reply)
                    pending = proto.out_bytes + plen + len(rep) + 1 + rest
                    if pending <= self._through_at:
                        out = proto._out
                        if not out:
                            proto.schedule_flush()
                        out += (prefix, rep, b" ", line, data, b"\r\n")
                        proto.out_bytes = pending
                        self._out_msgs += 1
                        self._out_bytes += size
                        return
        frame, size, payload = self._encode(entry[0][4:-1], data, reply, headers)
        self._send(frame, size, payload)

    def _respond(
        self, reply: str, data: bytes, headers: HeaderInput | None
    ) -> None:
        """Publish to a reply subject: validated, but never put in the subject cache."""
        subj = reply_subject(reply)
        if headers is None and type(data) is bytes:
            size = payload = len(data)
            frame = b"PUB %s %d\r\n%s\r\n" % (subj, size, data)
        else:
            frame, size, payload = self._encode(subj, data, None, headers)
        self._send(frame, size, payload)

    def _send(self, frame: bytes, size: int, payload: int) -> None:
        """Queue an encoded PUB/HPUB frame (the tail of publish(), for the slower paths)."""
        if size > self._max_payload:
            raise MaxPayloadError(
                f"message of {size} bytes exceeds the server's max_payload {self._max_payload}"
            )
        proto = self._writer
        if proto is not None:
            pending = proto.out_bytes + len(frame)
            if pending > self._through_at:
                self._write_through(proto)
                pending = proto.out_bytes + len(frame)
            if pending > self._max_outbound:
                raise OutboundBufferFullError(
                    f"outbound buffer full ({proto.out_bytes} bytes pending); "
                    "wait for wait_for_room()"
                )
            proto.write(frame)
        else:
            self._publish_offline(frame, size)
        self._out_msgs += 1
        self._out_bytes += payload

    def _payload(self, data: bytes, headers: HeaderInput | None) -> tuple[bytes, bytes | None]:
        """Check a message's data and headers; return the data as bytes and the encoded
        header block (None without headers)."""
        if type(data) is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise InvalidArgumentTypeError(
                    f"data must be bytes, not {type(data).__name__}"
                )
            data = bytes(data)  # (a memoryview's len() counts items, not bytes)
        if headers is None:
            return data, None
        if not self._headers_supported:
            raise HeadersNotSupportedError(
                f"the server ({self.connected_url or 'last connected'}) does not support "
                "headers; the message was not sent"
            )
        return data, encode_headers(headers)

    @staticmethod
    def _frame(subj: bytes, data: bytes, rep: bytes | None, hdr: bytes | None) -> tuple[bytes, int]:
        """PUB or HPUB for checked parts; return the frame and the message size."""
        n = len(data)
        if hdr is None:
            if rep is None:
                return b"PUB %s %d\r\n%s\r\n" % (subj, n, data), n
            return b"PUB %s %s %d\r\n%s\r\n" % (subj, rep, n, data), n
        hl = len(hdr)
        total = hl + n
        if rep is None:
            return b"HPUB %s %d %d\r\n%s%s\r\n" % (subj, hl, total, hdr, data), total
        return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subj, rep, hl, total, hdr, data), total

    def _encode(
        self, subj: bytes, data: bytes, reply: str | None, headers: HeaderInput | None
    ) -> tuple[bytes, int, int]:
        """Encode PUB with a reply, or HPUB; return the frame, the message size (headers
        included) and the payload's size in bytes."""
        payload, hdr = self._payload(data, headers)
        rep = None if reply is None else reply_subject(reply)
        frame, size = self._frame(subj, payload, rep, hdr)
        return frame, size, len(payload)

    def _write_through(self, proto: NatsProtocol) -> None:
        """Past ``_through_at`` queued bytes: hand the queue to the socket (plain TCP).

        If the socket takes nothing (the server is not keeping up), the next attempt
        waits for another :data:`WRITE_THROUGH_AT` bytes, so a full socket costs one
        system call per 64 KiB published, not one per message.
        """
        proto.write_through()  # (a flush resets _through_at, in outbound_drained)
        if proto.out_bytes:
            self._through_at = min(self._max_outbound, proto.out_bytes + WRITE_THROUGH_AT)

    def _publish_offline(self, frame: bytes, size: int) -> None:
        state = self._state
        if state == _S.CLOSED:
            raise ConnectionClosedError("client is closed")
        if state == _S.DRAINING_PUBS:
            raise ConnectionDrainingError("client is draining")
        limit = self.options.reconnect_buffer_size
        buf = self._reconnect_buf
        if buf.bytes + len(frame) > limit:
            raise OutboundBufferFullError(
                f"reconnect buffer full ({buf.bytes} of {limit} bytes) while disconnected"
            )
        buf.append(frame, size)

    def wait_for_room(self) -> Deferred[None]:
        """Fire when the outbound buffer has been handed to the socket.

        While disconnected it fires at once (publishes go to the bounded reconnect
        buffer, or raise), and so does a call pending when the connection is lost.
        """
        if self._state == _S.CLOSED:
            return fail(ConnectionClosedError("client is closed"))
        proto = self._proto
        if proto is None or proto.out_bytes == 0:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._room_waiters.append(d)
        return d

    # ================================================================== subscribing
    def subscribe(
        self,
        subject: str,
        handler: Handler | None = None,
        *,
        queue: str | None = None,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        concurrency: int = 1,
        backpressure: bool = False,
    ) -> Subscription:
        """Subscribe to ``subject`` (wildcards allowed), optionally in a queue group.

        With a ``handler``, each message is passed to it in order (a Deferred or coroutine
        result is awaited before the next; ``concurrency`` > 1 allows that many at once).
        Without one, read with ``await sub.next_msg()`` or ``async for msg in sub``.
        ``backpressure=True`` pauses reading from the socket while the mailbox is full
        instead of dropping messages. Every argument after ``handler`` is keyword-only
        (``subscribe(subject, handler, queue="workers")``).

        Raises, having changed nothing: :class:`BadSubjectError` for a bad subject or
        queue name, :class:`InvalidArgumentTypeError` for a handler that is not
        callable, :class:`InvalidArgumentError` for a limit or count below 1,
        :class:`ConnectionClosedError` or :class:`ConnectionDrainingError`.
        """
        if handler is not None and not callable(handler):
            raise InvalidArgumentTypeError(
                f"handler must be callable, not {type(handler).__name__} {handler!r}"
                + (" (the queue group is a keyword argument: queue=...)"
                   if isinstance(handler, str) else "")
            )
        concurrency = check_count("concurrency", concurrency)
        if max_msgs is not None:
            check_count("max_msgs", max_msgs)
        if pending_msgs_limit is None:
            pending_msgs_limit = self.options.pending_msgs_limit
        else:
            check_count("pending_msgs_limit", pending_msgs_limit)
        if pending_bytes_limit is None:
            pending_bytes_limit = self.options.pending_bytes_limit
        else:
            check_count("pending_bytes_limit", pending_bytes_limit)
        if self._state == _S.CLOSED:
            raise ConnectionClosedError("client is closed")
        if self.is_draining:
            raise ConnectionDrainingError("client is draining")
        sid = self._next_sid + 1
        frame = encode_sub(subject, sid, queue)  # validates subject and queue
        self._next_sid = sid
        sub = Subscription(
            self,
            sid,
            subject,
            queue,
            handler,
            max_msgs=max_msgs,
            pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
            concurrency=concurrency,
            backpressure=backpressure,
        )
        self._subs[sid] = sub
        proto = self._proto
        if proto is not None:
            proto.write(frame)
            if max_msgs is not None:
                proto.write(encode_unsub(sid, max_msgs))
        return sub

    def _forget(self, sub: Subscription) -> None:
        """``sub`` gets no more messages; until it has ended it stays in ``_ending``
        (close() must end it too: its mailbox may still hold messages)."""
        if self._subs.get(sub.sid) is sub:
            del self._subs[sub.sid]
        if sub.is_active:
            self._ending[sub.sid] = sub
        elif self._ending.get(sub.sid) is sub:
            del self._ending[sub.sid]

    def _send_unsub(self, sub: Subscription, max_msgs: int | None) -> None:
        proto = self._proto
        if proto is not None:
            proto.write(encode_unsub(sub.sid, max_msgs))

    def _drain_subscription(self, sub: Subscription) -> None:
        proto = self._proto
        if proto is None:
            sub._input_done()
            return
        proto.write(encode_unsub(sub.sid))
        d = proto.ping()
        d.addCallbacks(
            lambda _: sub._input_done(),
            lambda f: sub._close(ConnectionClosedError("connection lost while draining")),
        )

    def _backpressure(self, sub: Subscription, full: bool) -> None:
        if full:
            self._blocked.add(sub.sid)
        else:
            self._blocked.discard(sub.sid)
        proto = self._proto
        if proto is None:
            return
        if self._blocked:
            proto.pause_reading()
        else:
            proto.resume_reading()

    @property
    def subscriptions(self) -> list[Subscription]:
        """The active subscriptions (the request inbox included)."""
        return list(self._subs.values())

    # ================================================================== requests
    def _mux_ended(self, mux: RequestMux) -> None:
        """The request inbox ended; the next request makes a new one."""
        if self._mux is mux:
            self._mux = None

    def jetstream(self, **options: Any) -> JetStreamContext:
        """A JetStream context on this connection (see :class:`txnats.jetstream.JetStreamContext`
        for ``domain``, ``prefix``, ``timeout`` and ``publish_async_max_pending``).
        """
        # Imported here: JetStream is built on the client's public API, never the reverse.
        from txnats.jetstream import JetStreamContext

        return JetStreamContext(self, **options)

    def new_inbox(self) -> str:
        """A unique subject under the inbox prefix."""
        return f"{self.options.inbox_prefix}.{next_nuid()}"

    def request(
        self,
        subject: str,
        data: bytes = b"",
        timeout: float | None = 1.0,
        headers: HeaderInput | None = None,
    ) -> Deferred[Msg]:
        """Publish a request and fire with the first response.

        Fails with :class:`TimeoutError` after ``timeout`` seconds, with
        :class:`NoRespondersError` at once if nobody subscribes to ``subject``, and with
        :class:`ConnectionClosedError` if the client closes first. Cancelling the
        Deferred withdraws the request; a response arriving later is dropped.
        """
        # Everything about the call is checked before the request inbox is made or a
        # deadline armed.
        try:
            timeout = check_timeout("timeout", timeout)
            subj = publish_subject(subject)
            payload, hdr = self._payload(data, headers)
            size = len(payload) if hdr is None else len(payload) + len(hdr)
            if size > self._max_payload:
                raise MaxPayloadError(
                    f"message of {size} bytes exceeds the server's max_payload "
                    f"{self._max_payload}"
                )
        except NatsError as e:
            return fail(e)
        if self._state == _S.CLOSED:
            return fail(ConnectionClosedError("client is closed"))
        mux = self._mux
        if mux is None:
            try:
                mux = self._mux = RequestMux(self, f"{self.new_inbox()}.")
            except NatsError as e:
                return fail(e)
        reply, d = mux.new_reply(subject, timeout)
        # The reply subject is ours and known to be valid: no need to check it.
        frame, size = self._frame(subj, payload, reply.encode(), hdr)
        try:
            self._send(frame, size, len(payload))
        except NatsError as e:
            mux.forget(reply)
            return fail(e)
        return d

    def request_many(
        self,
        subject: str,
        data: bytes = b"",
        *,
        timeout: float = 1.0,
        stall: float | None = None,
        max_msgs: int | None = None,
        sentinel: Callable[[Msg], bool] | None = None,
        headers: HeaderInput | None = None,
    ) -> Deferred[list[Msg]]:
        """Publish a request and gather responses (ADR-47).

        Gathering ends at ``timeout`` after the request, ``stall`` seconds after the
        latest response, at ``max_msgs`` responses, or at a response for which
        ``sentinel(msg)`` is true (not included). Fails with :class:`NoRespondersError`
        if the server reports no subscriber; the inbox is always unsubscribed.
        """
        return request_many(
            self, subject, data, timeout=timeout, stall=stall, max_msgs=max_msgs,
            sentinel=sentinel, headers=headers,
        )

    # ================================================================== flush & drain
    def flush(self, timeout: float | None = 10.0) -> Deferred[None]:
        """Fire once the server has processed everything sent so far (PING -> PONG).

        While reconnecting, waits for the reconnection (within ``timeout``). Fails with
        :class:`FlushTimeoutError` or :class:`ConnectionClosedError`.
        """
        try:
            timeout = check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        if self._state == _S.CLOSED:
            return fail(ConnectionClosedError("client is closed"))
        proto = self._proto
        if proto is not None:
            d = proto.ping()
        else:
            d = Deferred()
            self._offline_flushes.append(d)
        if timeout is None:
            return d
        outer: Deferred[None] = Deferred(lambda _: d.cancel() if not d.called else None)

        def expire() -> None:
            if not outer.called:
                outer.errback(FlushTimeoutError(f"no PONG within {timeout}s"))

        timer = self._clock.callLater(timeout, expire)

        def done(result: object) -> None:
            if timer.active():
                timer.cancel()
            if not outer.called:
                if isinstance(result, Failure):
                    outer.errback(result)
                else:
                    outer.callback(None)

        d.addBoth(done)
        return outer

    def rtt(self, timeout: float | None = 10.0) -> Deferred[float]:
        """The round-trip time to the server, in seconds (one PING/PONG)."""
        start = self._clock.seconds()
        return self.flush(timeout).addCallback(lambda _: self._clock.seconds() - start)

    def drain(self) -> Deferred[None]:
        """Drain every subscription, then refuse publishes, flush and close.

        While subscriptions drain, handlers may still publish (to answer requests); new
        subscriptions are refused. Fails with :class:`DrainTimeoutError` after
        ``drain_timeout`` (the client is closed anyway).
        """
        state = self._state
        if state == _S.CLOSED:
            return self.when_closed()
        caller = serving()
        if caller is not None and (
            self._subs.get(caller.sid) is caller or self._ending.get(caller.sid) is caller
        ):
            # From inside one of our handlers: waiting would wait for that very handler
            # (until drain_timeout). The drain starts (or goes on); this fires now.
            if self._drain_d is None:
                self._start_drain()
            return succeed(None)
        if self._drain_d is not None:
            return _chain(self._drain_d)
        return self._start_drain()

    def _start_drain(self) -> Deferred[None]:
        if self._state != _S.CONNECTED or self._proto is None:
            return self.close()
        self._set_state(_S.DRAINING_SUBS)
        result: Deferred[None] = Deferred()
        self._drain_d = result
        proto = self._proto
        subs = list(self._subs.values())
        # Those already ending (unsubscribed with messages left) are waited for too.
        ended = [s.when_ended() for s in [*subs, *self._ending.values()]]
        for s in subs:
            s._state = 1  # _DRAINING: keep delivering what is in the mailbox
            proto.write(encode_unsub(s.sid))

        def subs_flushed(_: object) -> Deferred[Any]:
            for s in subs:
                s._input_done()
            return DeferredList(ended)

        def subs_done(_: object) -> Deferred[None] | None:
            if self._state != _S.DRAINING_SUBS:
                return None
            self._set_state(_S.DRAINING_PUBS)
            return self.flush(None)

        def finished(res: object) -> None:
            timer_cancel()
            if result.called:
                return
            if isinstance(res, Failure):
                err = res.value
                self.close()
                result.errback(res if isinstance(err, NatsError) else Failure(NatsError(str(err))))
                return
            self.close().chainDeferred(result)

        def expire() -> None:
            if not result.called:
                log.warn("Drain did not finish within {t}s; closing", t=self.options.drain_timeout)
                self.close()
                result.errback(
                    DrainTimeoutError(f"drain did not finish in {self.options.drain_timeout}s")
                )

        timer = self._clock.callLater(self.options.drain_timeout, expire)

        def timer_cancel() -> None:
            if timer.active():
                timer.cancel()

        proto.ping().addCallback(subs_flushed).addCallback(subs_done).addBoth(finished)
        return _chain(result)

    # ================================================================== closing
    def close(self) -> Deferred[None]:
        """Close now (idempotent, any state); fires when the connection is gone.

        Pending flushes and requests fail with :class:`ConnectionClosedError`;
        subscriptions end and messages not yet handed out are discarded (use
        :meth:`drain` to handle them first).
        """
        if self._state != _S.CLOSED:
            self._do_close(None)
        return self.when_closed()

    def _cancel_move(self) -> None:
        if self._moving is not None:
            d, self._moving = self._moving, None
            d.cancel()

    def _do_close(self, reason: NatsError | None) -> None:
        if self._state == _S.CLOSED:
            return
        self._set_state(_S.CLOSED)
        self._cancel_move()
        if self._attempt_call is not None and self._attempt_call.active():
            self._attempt_call.cancel()
        self._attempt_call = None
        if self._attempt_d is not None:
            d, self._attempt_d = self._attempt_d, None
            d.cancel()
        closed = ConnectionClosedError("client closed" + (f": {reason}" if reason else ""))
        if self._first_connect is not None:
            fc, self._first_connect = self._first_connect, None
            fc.errback(reason if reason is not None else closed)
        for sub in [*self._subs.values(), *self._ending.values()]:
            sub._close(closed)
        self._subs.clear()
        self._ending.clear()
        # (Pending requests fail as the request inbox subscription ends just above.)
        for waiter in self._offline_flushes + self._room_waiters:
            waiter.errback(closed)
        self._offline_flushes = []
        self._room_waiters = []
        buf = self._reconnect_buf
        if buf.bytes:
            lost = ConnectionClosedError(
                f"closed while disconnected: {buf.msgs} buffered publishes "
                f"({buf.bytes} bytes) were never sent"
            )
            log.warn("{error}", error=str(lost))
            self._report(lost)
        buf.clear()
        proto = self._proto
        if proto is not None and not proto.lost:
            proto.close()  # connection_lost() finishes the close
        else:
            self._proto = None
            self._finish_close()

    def _finish_close(self) -> None:
        if self._fully_closed:
            return
        self._fully_closed = True
        trigger, self._shutdown_trigger = self._shutdown_trigger, None
        if trigger is not None:
            remove = getattr(self._reactor, "removeSystemEventTrigger", None)
            if remove is not None:
                remove(trigger)
        self._proto = None
        log.info("Closed")
        self.schedule(self._call_user, "closed", self.options.closed_cb)
        waiters = self._closed_waiters
        self._closed_waiters = []
        for d in waiters:
            self.schedule(d.callback, None)

    def when_closed(self) -> Deferred[None]:
        """A fresh Deferred that fires once the client is closed and its socket gone."""
        d: Deferred[None] = Deferred()
        if self._fully_closed:
            self.schedule(d.callback, None)
        else:
            self._closed_waiters.append(d)
        return d

    def __repr__(self) -> str:
        return f"<txnats.Client {self._state} {self.connected_url or ''}>"


class _Retired:
    """The handler of a connection the client moved away from (lame duck).

    Its messages are still delivered and its errors reported until it closes; its
    INFO, room and loss no longer concern the client.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def connect_options(self, info: dict[str, Any]) -> dict[str, Any]:
        raise ConnectError("a retired connection does not connect again")  # pragma: no cover

    def msgs_received(self, msgs: list[Msg]) -> None:
        self._client.msgs_received(msgs)

    def info_received(self, info: dict[str, Any]) -> None:
        pass

    def server_error(self, error: ServerError) -> None:
        self._client.server_error(error)

    def schedule(self, fn: Callable[..., object], *args: object) -> None:
        self._client.schedule(fn, *args)

    def read_started(self) -> None:
        self._client.read_started()

    def read_finished(self) -> None:
        self._client.read_finished()

    def outbound_drained(self) -> None:
        pass

    def connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None:
        pass


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _check_reactor(what: str, reactor: object) -> None:
    """Refuse a first argument that is not a reactor (``connect("nats://...")``)."""
    if isinstance(reactor, (str, bytes)) or not callable(getattr(reactor, "callLater", None)):
        raise InvalidArgumentTypeError(
            f"{what}(reactor, servers, ...): the first argument must be a reactor, "
            f"not {type(reactor).__name__}"
        )


def _check_options(opts: Options) -> None:
    """Check every number in ``opts`` (see :mod:`txnats._args`); raise on the first bad one."""
    check_timeout("connect_timeout", opts.connect_timeout, allow_none=False)
    check_delay("ping_interval", opts.ping_interval)  # 0: no PINGs
    check_count("max_pings_out", opts.max_pings_out)  # (0 would drop a healthy connection)
    check_count("pending_msgs_limit", opts.pending_msgs_limit)
    check_count("pending_bytes_limit", opts.pending_bytes_limit)
    check_timeout("drain_timeout", opts.drain_timeout, allow_none=False)
    check_count("max_outbound_bytes", opts.max_outbound_bytes)
    check_count("max_reconnect_attempts", opts.max_reconnect_attempts, minimum=-1)  # -1: forever
    check_delay("reconnect_wait", opts.reconnect_wait)
    check_delay("reconnect_jitter", opts.reconnect_jitter)
    check_count("reconnect_buffer_size", opts.reconnect_buffer_size, minimum=0)  # 0: none
    for name in (
        "error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "lame_duck_cb",
        "discovered_servers_cb", "token_handler", "user_jwt_cb", "signature_cb",
    ):
        cb = getattr(opts, name)
        if cb is not None and not callable(cb):
            raise InvalidArgumentTypeError(f"{name} must be callable, not {type(cb).__name__}")


def _chain(d: Deferred[None]) -> Deferred[None]:
    """A fresh Deferred with ``d``'s result, leaving ``d`` untouched."""
    out: Deferred[None] = Deferred()

    def relay(result: object) -> object:
        if isinstance(result, Failure):
            out.errback(result)
        else:
            out.callback(None)
        return result

    d.addBoth(relay)
    d.addErrback(lambda _: None)
    return out


def connect(
    reactor: IReactorCore,
    servers: str | Sequence[str] = DEFAULT_URL,
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    verbose: bool = False,
    pedantic: bool = False,
    no_echo: bool = False,
    connect_timeout: float = 2.0,
    ping_interval: float = 120.0,
    max_pings_out: int = 2,
    inbox_prefix: str = "_INBOX",
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
    drain_timeout: float = 30.0,
    max_outbound_bytes: int = DEFAULT_MAX_OUTBOUND,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_wait: float = 2.0,
    reconnect_jitter: float = 0.1,
    reconnect_buffer_size: int = DEFAULT_RECONNECT_BUFFER,
    no_randomize: bool = False,
    ignore_discovered_servers: bool = False,
    retry_on_failed_connect: bool = False,
    token_handler: Callable[[], str] | None = None,
    nkeys_seed: str | None = None,
    nkeys_seed_file: str | None = None,
    user_credentials: str | None = None,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[str], bytes] | None = None,
    tls: TLSConfig | None = None,
    tls_ca_file: str | None = None,
    tls_cert_file: str | None = None,
    tls_key_file: str | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    ws_compression: bool = False,
    error_cb: Callable[[Exception], object] | None = None,
    disconnected_cb: Callable[[NatsError], object] | None = None,
    reconnected_cb: Callable[[], object] | None = None,
    closed_cb: Callable[[], object] | None = None,
    lame_duck_cb: Callable[[], object] | None = None,
    discovered_servers_cb: Callable[[list[str]], object] | None = None,
) -> Deferred[Client]:
    """Connect to a NATS server; the Deferred fires with a connected :class:`Client`.

    ``servers`` is a URL (``nats://[user:pass@|token@]host:port``), a comma-separated
    string of them, a list, or Twisted client endpoint strings (``tcp:host=...:port=...``).
    Fails with :class:`AuthorizationError` if the server refuses the credentials and
    :class:`NoServersError` if no server can be reached. ``ws_compression`` offers
    permessage-deflate on ``ws://``/``wss://`` connections (used if the server enables
    WebSocket compression).
    """
    if tls is None and (
        tls_ca_file or tls_cert_file or tls_key_file or tls_hostname or tls_handshake_first
    ):
        tls = TLSConfig(
            ca_file=tls_ca_file,
            cert_file=tls_cert_file,
            key_file=tls_key_file,
            hostname=tls_hostname,
            handshake_first=tls_handshake_first,
        )
    opts = Options(
        token_handler=token_handler, nkeys_seed=nkeys_seed, nkeys_seed_file=nkeys_seed_file,
        user_credentials=user_credentials, user_jwt_cb=user_jwt_cb, signature_cb=signature_cb,
        tls=tls, ws_compression=ws_compression,
        name=name, user=user, password=password, token=token, verbose=verbose,
        pedantic=pedantic, no_echo=no_echo, connect_timeout=connect_timeout,
        ping_interval=ping_interval, max_pings_out=max_pings_out, inbox_prefix=inbox_prefix,
        pending_msgs_limit=pending_msgs_limit, pending_bytes_limit=pending_bytes_limit,
        drain_timeout=drain_timeout, max_outbound_bytes=max_outbound_bytes,
        allow_reconnect=allow_reconnect, max_reconnect_attempts=max_reconnect_attempts,
        reconnect_wait=reconnect_wait, reconnect_jitter=reconnect_jitter,
        reconnect_buffer_size=reconnect_buffer_size, no_randomize=no_randomize,
        ignore_discovered_servers=ignore_discovered_servers,
        retry_on_failed_connect=retry_on_failed_connect, error_cb=error_cb,
        disconnected_cb=disconnected_cb, reconnected_cb=reconnected_cb, closed_cb=closed_cb,
        lame_duck_cb=lame_duck_cb, discovered_servers_cb=discovered_servers_cb,
    )
    _check_reactor("connect", reactor)  # a programming error: raised, not a failed Deferred
    try:
        client = Client(reactor, servers, opts)
    except NatsError as e:
        return fail(e)
    return client.start()
