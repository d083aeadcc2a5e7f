"""The client: the public API and its state machine.

A :class:`Client` is the public face; the work is done by the parts it holds (see
"How the code is laid out" in the contributing guide, ``docs/guide/contributing.rst``):

- :class:`~txnats._connector.Connector` -- the server pool, attempts with back-off,
  the dial (TCP, TLS, WebSocket) and the CONNECT fields;
- :class:`~txnats._outbox.Publisher` (a base class, for ``publish()``'s speed) -- the
  publish paths, the outbound bound and the reconnect buffer;
- :class:`~txnats._registry.Subscriptions` -- the subscriptions by sid and delivery
  to their mailboxes;
- :class:`~txnats._turns.Turns` -- the batches that run user code after each read;
- :class:`~txnats.request.RequestMux` -- requests on one shared inbox.

Each connection is a fresh :class:`~txnats.connection.NatsProtocol` reporting to the
client's parts (:class:`~txnats._hooks.ConnectionHooks`); the client survives its loss.
Its lifecycle is one state object at a time (:mod:`txnats._lifecycle`: the states, what
each holds, the moves allowed); ``Client.state`` shows it as a :class:`ClientState`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorCore, IReactorTime
from twisted.logger import Logger
from zope.interface import implementer

from txnats._args import MAX_SECONDS, check_reactor, check_timeout
from txnats._connector import Connector
from txnats._deadline import chain, within
from txnats._drain import Drain
from txnats._hooks import ConnectionHooks
from txnats._lameduck import Mover
from txnats._lifecycle import (
    MOVES,
    ClientState,
    Closed,
    Closing,
    Connected,
    Connecting,
    Draining,
    New,
    Reconnecting,
    State,
)
from txnats._outbox import Publisher
from txnats._registry import Subscriptions
from txnats._turns import Listeners, Turns, call_user
from txnats.connection import NatsProtocol
from txnats.errors import (
    ConnectError,
    ConnectionClosedError,
    ConnectionDrainingError,
    FlushTimeoutError,
    InvalidArgumentTypeError,
    NatsError,
    PermissionViolationError,
    ServerError,
)
from txnats.interfaces import IClient
from txnats.nuid import next_nuid
from txnats.options import (
    DEFAULT_URL,
    Options,
    Statistics,
)
from txnats.protocol.commands import encode_sub, encode_unsub, pub_frame, publish_subject
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput
from txnats.request import REPLY_ROOM, RequestMux, check_request_line, request_many
from txnats.servers import Server, parse_servers
from txnats.subscription import Handler, Subscription, check_subscribe, serving

if TYPE_CHECKING:
    from txnats.jetstream import JetStreamContext

__all__ = ["DEFAULT_URL", "Client", "ClientState", "Statistics"]

log = Logger()




@implementer(IClient)
class Client(Publisher):
    """A NATS client. Make one with :func:`connect` (or build one and :meth:`start` it)."""

    def __new__(
        cls,
        reactor: IReactorCore,
        servers: str | Sequence[str] = DEFAULT_URL,
        options: Options | None = None,
        *,
        rng: random.Random | None = None,
    ) -> Self:
        # Refusals run here, before the object exists: a client is never half-built.
        check_reactor("Client", reactor)
        (options or Options()).check()
        parse_servers(servers)
        return super().__new__(cls)

    def __init__(
        self,
        reactor: IReactorCore,
        servers: str | Sequence[str] = DEFAULT_URL,
        options: Options | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self._reactor = reactor
        clock: IReactorTime = reactor  # type: ignore[assignment]
        self._clock = clock
        self.options = opts = options or Options()
        # The lifecycle: one state object, holding what exists only in that state.
        self._now: State = New()
        #: INFO of the server we are (or were last) connected to.
        self.server_info: dict[str, Any] = {}
        self._reconnects = 0
        self._turns = turns = Turns(clock, lambda: self._proto)
        Publisher.__init__(
            self, opts, schedule=turns.schedule, report=self._report,
            refusal=self._publishing_refused, url=lambda: self.connected_url,
        )
        # Subjects up to this long leave room for a request's reply subject and sizes
        # in max_control_line; a longer one has its request's line checked exactly.
        self._request_room = opts.max_control_line - REPLY_ROOM - len(opts.inbox_prefix)
        self._subs = Subscriptions(
            clock, self._turns.schedule, self._report, self._respond, lambda: self._proto
        )
        self._mux: RequestMux | None = None
        # The sids of request_many()'s inboxes while they gather (a drain waits for them).
        self._reply_inboxes: set[int] = set()
        hooks = ConnectionHooks(
            msgs_received=self._subs.deliver, info_received=self._info_received,
            server_error=self._server_error, message_error=self._report,
            schedule=turns.schedule, read_started=turns.read_started,
            read_finished=turns.read_finished, outbound_drained=self._outbound_drained,
            connection_lost=self._connection_lost,
        )
        self._connector = Connector(
            reactor, clock, servers, opts, hooks, connected=self._connected,
            gave_up=self._gave_up, failed=self._attempt_failed,
            info=lambda: self.server_info, rng=rng or random.Random(),
        )
        # when_closed() callers: fired once the client is Closed, whatever came before.
        self._closed_waiters: list[Deferred[None]] = []
        self._listeners: Listeners[ClientState] = Listeners(self._turns.schedule)
        self._mover = Mover(
            self._connector, self._subs, hooks, self._moving_from, self._take_over,
            self.force_reconnect, clock, opts.inbox_prefix,
        )
        self._shutdown_trigger: object = None

    # ================================================================== state
    @property
    def clock(self) -> IReactorTime:
        """The clock the client times everything with (the reactor, or a test clock)."""
        return self._clock

    @property
    def state(self) -> ClientState:
        """One of the :class:`ClientState` names."""
        return self._now.public

    def _enter(self, new: State) -> None:
        """Move to ``new`` (one of the moves :data:`~txnats._lifecycle.MOVES` allows);
        listeners hear of it when what users see changes."""
        old = self._now
        if type(new) not in MOVES[type(old)]:
            raise AssertionError(f"bad move {old} -> {new}")  # pragma: no cover
        log.debug("State {old} -> {new}", old=type(old).__name__, new=type(new).__name__)
        self._now = new
        self._update_writer()
        if self._listeners and new.public != old.public:
            self._listeners.notify(new.public)

    @property
    def _proto(self) -> NatsProtocol | None:
        """The connection of the state the client is in, if it has one."""
        now = self._now
        if isinstance(now, (Connected, Draining, Closing)):
            return now.proto
        return None

    @property
    def _server(self) -> Server | None:
        """The server the client is connected to, if it is."""
        now = self._now
        if isinstance(now, (Connected, Draining)):
            return now.server
        return None

    def add_status_listener(self, fn: Callable[[ClientState], object]) -> Callable[[], None]:
        """Call ``fn(state)`` after every change of :attr:`state`, and with ``CONNECTED``
        again after a move to another server (lame duck mode): how code built on the
        client (consumers, watchers, services) learns of reconnections. Listeners run in
        the next batch, in the order added; what one raises is logged.

        :returns: a function that removes the listener (calling it twice is harmless).
        """
        if not callable(fn):
            raise InvalidArgumentTypeError(f"a status listener must be callable, not {fn!r}")
        return self._listeners.add(fn)

    def _update_writer(self) -> None:
        """Publishes go straight to the protocol only while connected (or draining subs)."""
        now = self._now
        writable = isinstance(now, Connected) or (isinstance(now, Draining) and not now.pubs)
        self._use_connection(self._proto, writable)

    def _publishing_refused(self) -> NatsError | None:
        now = self._now
        if isinstance(now, (Closing, Closed)):
            return ConnectionClosedError("client is closed")
        if isinstance(now, Draining) and now.pubs:
            return ConnectionDrainingError("client is draining")
        return None

    @property
    def stats(self) -> Statistics:
        """A snapshot of the counters (messages, and payload bytes without headers)."""
        subs = self._subs
        return Statistics(
            subs.in_msgs, self._out_msgs, subs.in_bytes, self._out_bytes, self._reconnects
        )

    @property
    def is_connected(self) -> bool:
        """True while a connection is up and not draining (``state`` is ``CONNECTED``)."""
        return isinstance(self._now, Connected)

    @property
    def is_closed(self) -> bool:
        """True once ``close()`` has begun or the client gave up reconnecting; a closed
        client never connects again."""
        return isinstance(self._now, (Closing, Closed))

    @property
    def is_reconnecting(self) -> bool:
        """True between the loss of a connection and the next one (publishes go to the
        reconnect buffer meanwhile)."""
        return isinstance(self._now, Reconnecting)

    @property
    def is_draining(self) -> bool:
        """True while ``drain()`` runs: subscriptions first, then the publishes."""
        return isinstance(self._now, Draining)

    @property
    def connected_url(self) -> str | None:
        """The URL of the current server, credentials redacted; None when not connected."""
        server = self._server
        return None if server is None else server.redacted

    @property
    def client_id(self) -> int | None:
        """The id the server gave this connection in its INFO; None before the first
        INFO or if the server sent none."""
        cid = self.server_info.get("client_id")
        return cid if isinstance(cid, int) else None

    @property
    def servers(self) -> list[str]:
        """The server pool, credentials redacted."""
        return [s.redacted for s in self._connector.pool.servers]

    @property
    def discovered_servers(self) -> list[str]:
        """The servers of the pool learnt from the cluster's INFO (``connect_urls``),
        not given to ``connect()``; credentials redacted."""
        return [s.redacted for s in self._connector.pool.servers if s.discovered]

    # ================================================================== scheduling
    def schedule(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` in the client's next batch of work: once the read being
        handled is over, or in the reactor's next turn (what the library built on the
        client, JetStream among it, uses to reach user code outside a read)."""
        self._turns.schedule(fn, *args)

    def _report(self, error: Exception) -> None:
        """Report an asynchronous error to ``error_cb`` (in a later turn)."""
        if isinstance(error, NatsError):
            log.info("Async error: {error}", error=str(error))
        self._turns.schedule(call_user, "error", self.options.error_cb, error)

    def _callback(self, name: str, cb: Callable[..., object] | None, *args: object) -> None:
        """Call a user's callback option in the next batch."""
        self._turns.schedule(call_user, name, cb, *args)

    # ================================================================== connecting
    def start(self) -> Deferred[Client]:
        """Make the first connection of a client built with ``Client(reactor, servers,
        options)``; fires with the client once connected (what :func:`connect` returns).

        Each server is tried once; with ``retry_on_failed_connect`` it fires at once
        instead, with the client still connecting, which goes through the pool as
        reconnecting would (``connected_cb`` tells when a server answered). Call it once.
        """
        now = self._now
        if not isinstance(now, New):
            raise ConnectError("the client was started already")
        d: Deferred[Client] = Deferred()
        retry = self.options.retry_on_failed_connect
        self._enter(Connecting(None if retry else d, now.flushes))
        if retry:
            d.callback(self)
        # Close cleanly when the reactor stops (task.react ending, Ctrl-C), instead of
        # seeing the socket die and trying to reconnect during shutdown.
        add = getattr(self._reactor, "addSystemEventTrigger", None)
        if add is not None:
            self._shutdown_trigger = add("before", "shutdown", self._reactor_stopping)
        self._connector.schedule()
        return d

    def _reactor_stopping(self) -> Deferred[None]:
        self._shutdown_trigger = None  # fired: must not be removed any more
        return self.close()

    def _attempt_failed(self, server: Server, error: NatsError) -> None:
        """A connection attempt failed: tell ``reconnect_error_cb``."""
        self._callback("reconnect_error", self.options.reconnect_error_cb, server.redacted, error)

    @property
    def last_error(self) -> NatsError | None:
        """Why the latest connection attempt failed, or the connection was lost (None
        until one did)."""
        return self._connector.last_error

    def _gave_up(self, error: NatsError) -> None:
        """The connector has no server left to try."""
        self._do_close(error)

    def _connected(self, proto: NatsProtocol, server: Server) -> None:
        """A connection's handshake is done (first connection, or a reconnection)."""
        before = self._now
        if not isinstance(before, (Connecting, Reconnecting)):
            proto.abort()  # (closed meanwhile)
            return
        self._enter(Connected(proto, server))
        self._adopt(proto, first=isinstance(before, Connecting))
        log.info("Connected to {url}", url=server)
        # Subscriptions first, then what was published while disconnected.
        frames = self._subs.frames()
        blocks, refused = self._reconnect_buf.take(self._max_payload, self._headers_supported)
        frames.extend(blocks)
        if frames:
            proto.write_many(frames, sum(len(f) for f in frames))
        if refused.msgs:
            self._report_refused(refused)
        for waiter in before.flushes:
            proto.ping().chainDeferred(waiter)
        self._outbound_drained()
        if isinstance(before, Connecting):
            if before.first is not None:
                before.first.callback(self)
            self._callback("connected", self.options.connected_cb)
        else:
            self._reconnects += 1
            self._callback("reconnected", self.options.reconnected_cb)
        if proto.info.get("ldm"):
            self._info_received(proto.info)

    def _adopt(self, proto: NatsProtocol, first: bool = False) -> None:
        """Take the INFO and limits of the server ``proto`` is connected to (on the
        ``first`` connection, the servers it announces are not new to report)."""
        self.server_info = proto.info
        self._adopt_limits(proto)
        self._merge_discovered(proto.info, report=not first)

    def _merge_discovered(self, info: dict[str, Any], report: bool = True) -> None:
        urls = info.get("connect_urls")
        server = self._server
        if not urls or self.options.ignore_discovered_servers or server is None:
            return
        new = self._connector.merge_discovered(urls, server)
        if new and report:
            self._callback(
                "discovered_servers",
                self.options.discovered_servers_cb,
                [s.redacted for s in new],
            )

    # What the connection reports (through its hooks) --------------------------------
    def _info_received(self, info: dict[str, Any]) -> None:
        self.server_info = info
        mp = info.get("max_payload")
        if isinstance(mp, int):
            self._set_max_payload(mp)
        self._merge_discovered(info)
        now = self._now
        if info.get("ldm") and isinstance(now, Connected) and not now.lame_duck_seen:
            now.lame_duck_seen = True
            log.info("Server {url} entered lame duck mode", url=self.connected_url)
            self._callback("lame_duck", self.options.lame_duck_cb)
            if self.options.allow_reconnect and len(self._connector.pool) > 1:
                self._turns.schedule(self._mover.start, now.server)

    def _server_error(self, error: ServerError) -> None:
        if isinstance(error, PermissionViolationError) and error.operation == "subscribe":
            self._subs.refused(error)
        elif isinstance(error, PermissionViolationError) and self._mux is not None:
            self._mux.fail_subject(error.subject, error)
        self._report(error)

    def _connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None:
        now = self._now
        if proto is not self._proto:
            return
        self._subs.connection_gone()
        if isinstance(now, Closing):
            if proto.established:
                self._callback("disconnected", self.options.disconnected_cb, reason)
            self._finish_close()
            return
        assert isinstance(now, (Connected, Draining))
        server = now.server
        self._connector.last_error = reason
        self._mover.cancel()
        log.info("Disconnected from {url}: {reason}", url=server, reason=str(reason))
        self._callback("disconnected", self.options.disconnected_cb, reason)
        if isinstance(now, Connected) and self.options.allow_reconnect:
            # Publishes accepted but never handed to the socket are kept, ahead of
            # anything published from now on (even past reconnect_buffer_size: they were
            # accepted); flushes wait for the next connection (or their timeout).
            self._reconnect_buf.prepend(proto.take_unsent_publishes())
            self._enter(Reconnecting(server, proto.take_pending_pings()))
            # wait_for_room() returns at once while disconnected: so do those pending now.
            self._outbound_drained()
            # The first retry goes to another server: servers discovered while connected
            # were appended behind the lost one, which would otherwise be dialled first
            # (and a frozen one answers the dial, then nothing until connect_timeout).
            self._connector.to_back(server)
            self._connector.schedule()
        else:
            self._do_close(reason)

    def set_servers(self, servers: str | Sequence[str]) -> None:
        """Replace the server pool (used from the next reconnection on).

        The current connection is kept. Raises :class:`ConnectError` for a bad URL,
        leaving the pool as it was.
        """
        self._connector.set_servers(servers)

    # ------------------------------------------------------------------ lame duck
    def _moving_from(self) -> NatsProtocol | None:
        """The connection a lame-duck move leaves (None: not connected, do not move)."""
        now = self._now
        return now.proto if isinstance(now, Connected) else None

    def _take_over(self, new: NatsProtocol, server: Server) -> None:
        """Make ``new`` (connected to ``server``) the client's connection (lame duck)."""
        old = self._now
        assert isinstance(old, Connected)
        self._now = Connected(new, server)  # (the same state: listeners hear CONNECTED below)
        self._connector.connected_to(server)
        self._adopt(new)
        self._update_writer()
        self._connector.to_back(old.server)
        self._subs.apply_backpressure(new)
        self._reconnects += 1
        log.info("Moved to {url}", url=server)
        self._callback("reconnected", self.options.reconnected_cb)
        self._listeners.notify(ClientState.CONNECTED)
        self._outbound_drained()
        if new.info.get("ldm"):
            self._info_received(new.info)

    def force_reconnect(self) -> None:
        """Close the current connection and reconnect (to another server if there is one).

        What was already published is sent to the old server before it is closed.
        """
        now = self._now
        if isinstance(now, Connected):
            now.proto.close(ConnectError("reconnect requested"))

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
        on_drop: Callable[[Msg], object] | None = None,
    ) -> Subscription:
        """Subscribe to ``subject`` (wildcards allowed), optionally in a queue group.

        With a ``handler``, each message is passed to it in order (a Deferred or coroutine
        result is awaited before the next; ``concurrency`` > 1 allows that many at once).
        Without one, read with ``await sub.next_msg()`` or ``async for msg in sub``.
        ``backpressure=True`` pauses reading from the socket while the mailbox is full
        instead of dropping messages. Every argument after ``handler`` is keyword-only
        (``subscribe(subject, handler, queue="workers")``).

        A message arriving while ``pending_msgs_limit`` messages or ``pending_bytes_limit``
        bytes wait is dropped (counted in ``dropped``; the first of a run goes to
        ``error_cb`` as a :class:`SlowConsumerError`) and, in the next batch of work,
        passed to ``on_drop(msg)`` if given, still answerable (``msg.respond()``).

        Raises, having changed nothing: :class:`BadSubjectError` for a bad subject or
        queue name, :class:`InvalidArgumentTypeError` for a handler or ``on_drop`` that
        is not callable, :class:`InvalidArgumentError` for a limit or count below 1,
        :class:`ConnectionClosedError` or :class:`ConnectionDrainingError`.
        """
        pending_msgs_limit, pending_bytes_limit = check_subscribe(
            handler, max_msgs, concurrency,
            self.options.pending_msgs_limit if pending_msgs_limit is None else pending_msgs_limit,
            self.options.pending_bytes_limit if pending_bytes_limit is None
            else pending_bytes_limit, on_drop,
        )
        if self.is_closed:
            raise ConnectionClosedError("client is closed")
        if self.is_draining:
            raise ConnectionDrainingError("client is draining")
        sid = self._subs.next_sid()
        frame = encode_sub(subject, sid, queue, self._max_line)  # validates all three
        sub = Subscription(
            self._subs, sid, subject, queue, handler, max_msgs=max_msgs,
            pending_msgs_limit=pending_msgs_limit, pending_bytes_limit=pending_bytes_limit,
            concurrency=concurrency, backpressure=backpressure, on_drop=on_drop,
        )
        proto = self._proto
        if proto is not None:
            proto.write(frame)
            if max_msgs is not None:
                proto.write(encode_unsub(sid, max_msgs))
        return sub

    @property
    def subscriptions(self) -> list[Subscription]:
        """The active subscriptions (the request inbox included)."""
        return self._subs.all()

    # ================================================================== requests
    def _mux_ended(self, mux: RequestMux) -> None:
        """The request inbox ended; the next request makes a new one."""
        if self._mux is mux:
            self._mux = None

    def jetstream(self, **options: Any) -> JetStreamContext:
        """A JetStream context on this connection (see :class:`txnats.jetstream.JetStreamContext`
        for ``domain``, ``prefix``, ``timeout`` and ``publish_async_max_pending``)."""
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
            if type(timeout) is not float or not 0.0 < timeout <= MAX_SECONDS:  # (NaN too)
                timeout = check_timeout("timeout", timeout)
            subj = publish_subject(subject)
            if headers is None and type(data) is bytes:
                payload, hdr = data, None
            else:
                payload, hdr = self._payload(data, headers)
            size = len(payload) if hdr is None else len(payload) + len(hdr)
            if size > self._max_payload:
                self._check_size(size)
            mux = self._mux
            if len(subj) > self._request_room:
                # (Without an inbox yet: its prefix, and the room its NUID will take.)
                prefix = mux.prefix if mux is not None else self.options.inbox_prefix + "." * 24
                check_request_line(subj, prefix, size, hdr, self._max_line)
        except NatsError as e:
            return fail(e)
        if self.is_closed:
            return fail(ConnectionClosedError("client is closed"))
        if mux is None:
            try:
                mux = self._mux = RequestMux(
                    self, f"{self.new_inbox()}.", watch_drops=self._subs.watch_drops,
                    ended=self._mux_ended,
                )
            except NatsError as e:
                return fail(e)
        reply, d = mux.new_reply(subject, timeout)
        # The reply subject is ours and known to be valid: no need to check it.
        frame, size = pub_frame(subj, payload, reply.encode(), hdr)
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
            sentinel=sentinel, headers=headers, inboxes=self._reply_inboxes,
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
        now = self._now
        if isinstance(now, (Closing, Closed)):
            return fail(ConnectionClosedError("client is closed"))
        if isinstance(now, (New, Connecting, Reconnecting)):
            d: Deferred[None] = Deferred()
            now.flushes.append(d)
        else:
            d = now.proto.ping()
        if timeout is None:
            return d
        expired = f"no PONG within {timeout}s"
        return within(d, timeout, self._clock, lambda: FlushTimeoutError(expired))

    def rtt(self, timeout: float | None = 10.0) -> Deferred[float]:
        """The round-trip time to the server, in seconds (one PING/PONG)."""
        start = self._clock.seconds()
        return self.flush(timeout).addCallback(lambda _: self._clock.seconds() - start)

    def drain(self) -> Deferred[None]:
        """Drain every subscription, then refuse publishes, let the requests already
        sent get their answers (or time out), flush and close.

        While subscriptions drain, handlers may still publish and make requests (to
        answer requests); new subscriptions are refused. Then new requests fail with
        :class:`ConnectionDrainingError`. Fails with :class:`DrainTimeoutError` after
        ``drain_timeout`` (the client is closed anyway). Called from inside one of the
        client's handlers (or a coroutine it started), it starts the drain and fires at
        once: waiting would wait for that very handler.
        """
        now = self._now
        if isinstance(now, (Closing, Closed)):
            return self.when_closed()
        caller = serving()
        if caller is not None and self._subs.owns(caller):
            # From inside one of our handlers: waiting would wait for that very handler
            # (until drain_timeout). The drain starts (or goes on); this fires now.
            if not isinstance(now, Draining):
                self._start_drain()
            return succeed(None)
        if isinstance(now, Draining):
            return chain(now.result)
        return self._start_drain()

    def _start_drain(self) -> Deferred[None]:
        now = self._now
        if not isinstance(now, Connected):
            return self.close()
        drain = Drain(
            self._clock, self.options.drain_timeout, self._subs, to_pubs=self._drain_pubs,
            replies=self._replies_pending, flush=lambda: self.flush(None), close=self.close,
        )
        self._enter(Draining(now.proto, now.server, drain.result))
        # Reply inboxes stay until the requests they answer have ended (Drain's step 2).
        mux, later = self._mux, set(self._reply_inboxes)
        if mux is not None:
            later.add(mux.subscription.sid)
        drain.start(now.proto, frozenset(later))
        return chain(drain.result)

    def _drain_pubs(self) -> bool:
        """The drain's subscriptions are done: refuse publishes (False: closed meanwhile)."""
        now = self._now
        if not isinstance(now, Draining) or now.pubs:
            return False
        self._enter(Draining(now.proto, now.server, now.result, pubs=True))
        return True

    def _replies_pending(self) -> list[Deferred[Any]]:
        """What fires once the requests in flight have ended (request_many()'s inboxes,
        and the request inbox's pending requests)."""
        waits = [s.when_ended() for s in self._subs.all() if s.sid in self._reply_inboxes]
        if self._mux is not None:
            waits.append(self._mux.when_idle())
        return waits

    # ================================================================== closing
    def close(self) -> Deferred[None]:
        """Close now (idempotent, any state); fires when the connection is gone.

        Pending flushes and requests fail with :class:`ConnectionClosedError`;
        subscriptions end (those already ending too) and messages not yet handed out
        are discarded (use :meth:`drain` to handle them first). No handler of the
        client runs after this fires.
        """
        self._do_close(None)
        return self.when_closed()

    def _do_close(self, reason: NatsError | None) -> None:
        """Close (the user asked, the connection was lost for good, or no server is
        left): end everything the state held, then the connection."""
        now = self._now
        if isinstance(now, (Closing, Closed)):
            return
        proto = self._proto
        if proto is not None and not proto.lost:
            self._enter(Closing(proto))  # _connection_lost() finishes the close
        else:
            self._enter(Closed())
        self._mover.close()
        self._connector.cancel()
        closed = ConnectionClosedError("client closed" + (f": {reason}" if reason else ""))
        if isinstance(now, Connecting) and now.first is not None:
            now.first.errback(reason if reason is not None else closed)
        elif isinstance(now, Connecting) and reason is not None:
            self._report(reason)  # (connect() fired already: say why no server answered)
        # (Pending requests fail as the request inbox subscription ends here.)
        self._subs.close_all(closed)
        for waiter in now.flushes if isinstance(now, (New, Connecting, Reconnecting)) else ():
            waiter.errback(closed)
        self._fail_room_waiters(closed)
        buf = self._reconnect_buf
        if buf.bytes:
            lost = ConnectionClosedError(
                f"closed while disconnected: {buf.msgs} buffered publishes "
                f"({buf.bytes} bytes) were never sent"
            )
            log.warn("{error}", error=str(lost))
            self._report(lost)
        buf.clear()
        if proto is not None and not proto.lost:
            proto.close()
        else:
            self._finish_close()

    def _finish_close(self) -> None:
        """The socket is gone: the client is Closed; tell who waits."""
        if not isinstance(self._now, Closed):
            self._enter(Closed())
        trigger, self._shutdown_trigger = self._shutdown_trigger, None
        if trigger is not None:
            remove = getattr(self._reactor, "removeSystemEventTrigger", None)
            if remove is not None:
                remove(trigger)
        log.info("Closed")
        self._callback("closed", self.options.closed_cb)
        waiters = self._closed_waiters
        self._closed_waiters = []
        for d in waiters:
            self._turns.schedule(d.callback, None)

    def when_closed(self) -> Deferred[None]:
        """A fresh Deferred that fires once the client is closed and its socket gone."""
        d: Deferred[None] = Deferred()
        if isinstance(self._now, Closed):
            self._turns.schedule(d.callback, None)
        else:
            self._closed_waiters.append(d)
        return d

    def __repr__(self) -> str:
        return f"<txnats.Client {self.state} {self.connected_url or ''}>"
