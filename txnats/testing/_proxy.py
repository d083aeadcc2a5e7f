"""
A TCP proxy that puts network faults between a client and a server.

:class:`FaultProxy` listens on a free loopback port and forwards every
connection to a target (usually a :class:`txnats.testing.NatsServer`). While
connections are open a test can change how bytes flow: pass them, drop them,
stop them (blackhole), delay them, reset every connection, cut the next server
frame in half, or refuse new connections. It records what each client sent, so
a test can also assert on the bytes themselves (for instance that no plaintext
``CONNECT`` ever crossed the wire).

It runs in the Twisted reactor given to it and imports no global reactor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from twisted.internet import defer
from twisted.internet.abstract import isIPAddress
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.endpoints import HostnameEndpoint, TCP4ClientEndpoint
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import (
    IAddress,
    IConsumer,
    IDelayedCall,
    IListeningPort,
    IPullProducer,
    IPushProducer,
    IReactorTCP,
    IReactorTime,
    IStreamClientEndpoint,
    ITCPTransport,
)
from twisted.internet.protocol import Factory, Protocol, ServerFactory, connectionDone
from twisted.python.failure import Failure
from zope.interface import implementer

__all__ = ["BLACKHOLE", "DROP", "PASS", "FaultProxy", "ProxiedConnection", "ProxyMode"]

ModeName = Literal["pass", "drop", "blackhole", "delay"]

@dataclass(frozen=True)
class ProxyMode:
    """
    How a :class:`FaultProxy` treats bytes on open connections, in both directions.

      - ``pass``: forward at once.
      - ``drop``: keep reading (and recording) but forward nothing.
      - ``blackhole``: stop reading and forwarding; the connections stay open
        and bytes wait in the kernels' buffers, as in a network partition.
        Bytes delayed before the switch wait too.
      - ``delay``: forward each chunk ``seconds`` after it arrived, in order.

    Use the constants :data:`PASS`, :data:`DROP`, :data:`BLACKHOLE` and
    :meth:`ProxyMode.delay`.
    """

    name: ModeName
    seconds: float = 0.0

    @classmethod
    def delay(cls, seconds: float) -> ProxyMode:
        """The mode that forwards each chunk ``seconds`` after it arrived."""
        if seconds < 0:
            raise ValueError(f"a delay cannot be negative: {seconds!r}")
        return cls("delay", float(seconds))


#: Forward at once.
PASS = ProxyMode("pass")
#: Read and discard, both ways.
DROP = ProxyMode("drop")
#: Neither read nor forward; connections stay open.
BLACKHOLE = ProxyMode("blackhole")


@implementer(IPullProducer)
class _AbortWhenFlushed:
    """
    Write some bytes, then abort the connection (RST) once Twisted has
    handed all of them to the kernel.

    A transport asks a registered pull producer for more each time its write
    buffer runs empty; the first request comes at registration. So the first
    call writes, and the second (the buffer has drained) aborts. Calling
    ``abortConnection`` right after ``write`` would discard the bytes unsent.
    """

    def __init__(self, transport: ITCPTransport, data: bytes) -> None:
        self._transport = transport
        self._data = data
        self._written = False

    def resumeProducing(self) -> None:
        if not self._written and self._data:
            self._written = True
            self._transport.write(self._data)
            return
        IConsumer(self._transport).unregisterProducer()
        self._transport.abortConnection()

    def stopProducing(self) -> None:
        pass


@dataclass(frozen=True)
class _ProxyHooks:
    """What a :class:`ProxiedConnection` needs of its :class:`FaultProxy`: the proxy
    makes one and hands it to each connection it accepts."""

    #: What due times are measured and waited for with.
    clock: IReactorTime
    #: The proxy's mode now.
    mode: Callable[[], ProxyMode]
    #: The connection is open; the callable holds (``True``) or releases (``False``)
    #: both its sides as the proxy enters or leaves blackhole mode.
    opened: Callable[[ProxiedConnection, Callable[[bool], None]], None]
    #: The Deferreds an armed cut fires (the caller fires them once it has cut), or
    #: ``None`` when no cut is armed.
    take_cut_waiters: Callable[[], list[defer.Deferred[ProxiedConnection]] | None]
    #: Both sides of the connection are closed.
    closed: Callable[[ProxiedConnection], None]


class _Pipe:
    """
    One direction of a proxied connection: bytes waiting to be written to
    one transport, delivered in order, each no earlier than its due time.

    :param clock: what due times are measured and waited for with.
    :param held: whether delivery is held back now (the proxy is a blackhole).
    :param forwarded: called with the size of each chunk as it is delivered.
    """

    def __init__(
        self, clock: IReactorTime, held: Callable[[], bool], forwarded: Callable[[int], None]
    ) -> None:
        self._clock = clock
        self._held = held
        self._forwarded = forwarded
        self._transport: ITCPTransport | None = None
        #: (due time, bytes, cut the connection after writing them)
        self._queue: deque[tuple[float, bytes, bool]] = deque()
        self._call: IDelayedCall | None = None
        self._finishing = False
        self._done = False

    def attach(self, transport: ITCPTransport) -> None:
        """Start delivering to ``transport``."""
        self._transport = transport
        self.flush()

    def send(self, data: bytes, delay: float, cut: bool = False) -> None:
        """Queue ``data`` for delivery ``delay`` seconds from now."""
        if self._done:
            return
        self._queue.append((self._clock.seconds() + delay, data, cut))
        self.flush()

    def finish(self) -> None:
        """Close the destination cleanly once everything queued is delivered."""
        self._finishing = True
        self.flush()

    def discard(self) -> None:
        """Deliver nothing more."""
        self._done = True
        self._queue.clear()
        self._cancel_call()

    def flush(self) -> None:
        """Deliver what is due; schedule a call for what is not yet."""
        self._cancel_call()
        transport = self._transport
        if transport is None or self._done or self._held():
            return
        now = self._clock.seconds()
        while self._queue:
            due, data, cut = self._queue[0]
            if due > now:
                self._call = self._clock.callLater(due - now, self.flush)
                return
            self._queue.popleft()
            if cut:
                self._done = True
                self._queue.clear()
                self._forwarded(len(data))
                if data:
                    IConsumer(transport).registerProducer(_AbortWhenFlushed(transport, data), False)
                else:
                    transport.abortConnection()
                return
            self._forwarded(len(data))
            transport.write(data)
        if self._finishing:
            self._done = True
            transport.loseConnection()

    def _cancel_call(self) -> None:
        call, self._call = self._call, None
        if call is not None and call.active():
            call.cancel()


class ProxiedConnection:
    """
    One client connection through a :class:`FaultProxy` and the proxy's own
    connection to the target for it.

    :ivar number: the order in which the proxy accepted it, from 0.
    :ivar bytes_from_client: bytes read from the client.
    :ivar bytes_to_server: bytes forwarded to the server.
    :ivar bytes_from_server: bytes read from the server.
    :ivar bytes_to_client: bytes forwarded to the client.
    :ivar cut: whether :meth:`FaultProxy.cut_next_frame` cut this connection.
    """

    def __init__(
        self, proxy: _ProxyHooks, number: int, client: _ClientSide,
        endpoint: IStreamClientEndpoint,
    ) -> None:
        self._proxy = proxy
        self.number = number
        self.bytes_from_client = 0
        self.bytes_to_server = 0
        self.bytes_from_server = 0
        self.bytes_to_client = 0
        self.cut = False
        self._client_chunks: list[bytes] = []
        self._server_chunks: list[bytes] = []
        transport = ITCPTransport(client.transport)
        self._client: ITCPTransport | None = transport
        self._server: ITCPTransport | None = None
        self._connecting: defer.Deferred[Any] | None = None
        self._to_server = _Pipe(proxy.clock, self._blackholed, self._forwarded_to_server)
        self._to_client = _Pipe(proxy.clock, self._blackholed, self._forwarded_to_client)
        self._to_client.attach(transport)
        self._cut_waiters: list[defer.Deferred[ProxiedConnection]] = []
        self._close_waiters: list[defer.Deferred[None]] = []
        self._closed = False
        client.attach(self._from_client, self._client_lost)
        proxy.opened(self, self._hold)
        if self._blackholed():
            IPushProducer(transport).pauseProducing()
        self._connect(endpoint)

    @property
    def client_data(self) -> bytes:
        """Every byte the client sent, whether forwarded or not."""
        return b"".join(self._client_chunks)

    @property
    def server_data(self) -> bytes:
        """Every byte the server sent, whether forwarded or not."""
        return b"".join(self._server_chunks)

    @property
    def open(self) -> bool:
        """Whether either side of the connection is still open."""
        return not self._closed

    def when_closed(self) -> defer.Deferred[None]:
        """A new Deferred that fires once both sides are closed."""
        if self._closed:
            return defer.succeed(None)
        waiter: defer.Deferred[None] = defer.Deferred()
        self._close_waiters.append(waiter)
        return waiter

    def abort(self) -> None:
        """Abort both sides now (RST), dropping anything not yet forwarded."""
        self._to_client.discard()
        self._to_server.discard()
        connecting, self._connecting = self._connecting, None
        if connecting is not None:
            connecting.cancel()
        for transport in (self._client, self._server):
            if transport is not None:
                transport.abortConnection()

    def __repr__(self) -> str:
        state = "open" if self.open else "closed"
        return (
            f"<ProxiedConnection #{self.number} {state} "
            f"c->s {self.bytes_from_client}/{self.bytes_to_server} "
            f"s->c {self.bytes_from_server}/{self.bytes_to_client}>"
        )

    # -- driven by the protocols and the proxy ---------------------------

    def _connect(self, endpoint: IStreamClientEndpoint) -> None:
        factory = _ServerSideFactory(self._server_made, self._from_server, self._server_lost)
        connecting = endpoint.connect(factory)
        self._connecting = connecting
        connecting.addErrback(self._connect_failed)

    def _connect_failed(self, reason: Failure) -> None:
        self._connecting = None
        self._to_server.discard()
        if self._client is not None:
            self._client.abortConnection()
        self._maybe_closed()

    def _server_made(self, transport: ITCPTransport) -> None:
        self._connecting = None
        self._server = transport
        if self._proxy.mode() == BLACKHOLE:
            IPushProducer(transport).pauseProducing()
        self._to_server.attach(transport)

    def _from_client(self, data: bytes) -> None:
        self._client_chunks.append(data)
        self.bytes_from_client += len(data)
        mode = self._proxy.mode()
        if mode == DROP:
            return
        self._to_server.send(data, mode.seconds)

    def _from_server(self, data: bytes) -> None:
        self._server_chunks.append(data)
        self.bytes_from_server += len(data)
        mode = self._proxy.mode()
        if mode == DROP:
            return
        if self._client is None:
            # The client side is gone: no frame of this session can be cut any more, so
            # an armed cut waits for a live one (taking it here left it never fired).
            return
        waiters = self._proxy.take_cut_waiters()
        if waiters is None:
            self._to_client.send(data, mode.seconds)
            return
        self.cut = True
        self._cut_waiters.extend(waiters)
        self._to_client.send(data[: len(data) // 2], mode.seconds, cut=True)
        self._to_server.discard()
        if self._server is not None:
            self._server.abortConnection()

    def _client_lost(self, reason: Failure) -> None:
        self._client = None
        self._to_client.discard()
        if reason.check(ConnectionDone):
            # Forward what is queued (once connected, if still connecting),
            # then close the server side cleanly too.
            self._to_server.finish()
        else:
            connecting, self._connecting = self._connecting, None
            if connecting is not None:
                connecting.cancel()
            self._to_server.discard()
            if self._server is not None:
                self._server.abortConnection()
        if self.cut:
            waiters, self._cut_waiters = self._cut_waiters, []
            for waiter in waiters:
                waiter.callback(self)
        self._maybe_closed()

    def _server_lost(self, reason: Failure) -> None:
        self._server = None
        self._to_server.discard()
        if self.cut:
            pass  # the client side is closed by the cut itself
        elif reason.check(ConnectionDone):
            self._to_client.finish()
        else:
            self._to_client.discard()
            if self._client is not None:
                self._client.abortConnection()
        self._maybe_closed()

    def _hold(self, held: bool) -> None:
        """Stop reading both sides (``held``), or read them again and forward what
        waits."""
        for transport in (self._client, self._server):
            if transport is not None:
                if held:
                    IPushProducer(transport).pauseProducing()
                else:
                    IPushProducer(transport).resumeProducing()
        if not held:
            self._to_server.flush()
            self._to_client.flush()

    def _blackholed(self) -> bool:
        return self._proxy.mode() == BLACKHOLE

    def _forwarded_to_server(self, count: int) -> None:
        self.bytes_to_server += count

    def _forwarded_to_client(self, count: int) -> None:
        self.bytes_to_client += count

    def _maybe_closed(self) -> None:
        if self._closed or self._client is not None:
            return
        if self._server is not None or self._connecting is not None:
            return
        self._closed = True
        self._proxy.closed(self)
        waiters, self._close_waiters = self._close_waiters, []
        for waiter in waiters:
            waiter.callback(None)


def _ignore(arg: object) -> None:
    pass


class _ClientSide(Protocol):
    """
    A connection from a client to the proxy: what it reads and its loss go to the
    :class:`ProxiedConnection` made for it, once that calls :meth:`attach`.

    :param accept: called once connected; makes the proxied connection for this
        client, or refuses the client.
    """

    def __init__(self, accept: Callable[[_ClientSide], None]) -> None:
        self._accept = accept
        self._received: Callable[[bytes], None] = _ignore
        self._lost: Callable[[Failure], None] = _ignore

    def attach(self, received: Callable[[bytes], None], lost: Callable[[Failure], None]
               ) -> None:
        """Report each chunk read to ``received`` and the connection's loss to ``lost``."""
        self._received, self._lost = received, lost

    def connectionMade(self) -> None:
        self._accept(self)

    def dataReceived(self, data: bytes) -> None:
        self._received(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._lost(reason)


class _ServerSide(Protocol):
    """The proxy's connection to the target for one client, reporting its transport,
    each chunk read and its loss to the callables given."""

    def __init__(
        self, made: Callable[[ITCPTransport], None], received: Callable[[bytes], None],
        lost: Callable[[Failure], None],
    ) -> None:
        self._made, self._received, self._lost = made, received, lost

    def connectionMade(self) -> None:
        self._made(ITCPTransport(self.transport))

    def dataReceived(self, data: bytes) -> None:
        self._received(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._lost(reason)


class _ProxyFactory(ServerFactory):
    """Builds a :class:`_ClientSide` for each client, which reports to ``accept``."""

    def __init__(self, accept: Callable[[_ClientSide], None]) -> None:
        self._accept = accept

    def buildProtocol(self, addr: IAddress | None) -> _ClientSide:
        return _ClientSide(self._accept)


class _ServerSideFactory(Factory[_ServerSide]):
    """Builds the one protocol for the proxy's connection to the target."""

    def __init__(
        self, made: Callable[[ITCPTransport], None], received: Callable[[bytes], None],
        lost: Callable[[Failure], None],
    ) -> None:
        self._made, self._received, self._lost = made, received, lost

    def buildProtocol(self, addr: IAddress | None) -> _ServerSide:
        return _ServerSide(self._made, self._received, self._lost)


class FaultProxy:
    """
    A TCP proxy on a free loopback port that forwards to ``host:port`` and
    injects faults on request.

    Typical use in a trial test::

        proxy = FaultProxy(reactor, "127.0.0.1", server.port)
        proxy.listen()
        self.addCleanup(proxy.stop)
        nc = await txnats.connect(reactor, proxy.url)
        proxy.blackhole()          # the client now hears nothing
        ...
        proxy.pass_through()

    Switching modes affects open connections at once and new ones as they
    come. The proxy buffers in memory without flow control: it is meant for
    test-sized traffic.

    :param reactor: provides ``IReactorTCP`` and ``IReactorTime``.
    :param host: the target's address.
    :param port: the target's port.
    :param listen_host: the address to listen on.
    :param connect_timeout: seconds to wait for the target to accept.
    """

    def __init__(
        self,
        reactor: IReactorTCP,
        host: str,
        port: int,
        *,
        listen_host: str = "127.0.0.1",
        connect_timeout: float = 5.0,
    ) -> None:
        self._reactor = reactor
        self._clock = IReactorTime(reactor)
        self.target = (host, port)
        self._listen_host = listen_host
        self._connect_timeout = connect_timeout
        self._mode = PASS
        #: When true, new connections are accepted and aborted at once (RST).
        self.refuse = False
        #: How many connections were refused because of :attr:`refuse`.
        self.refused = 0
        self._listening: IListeningPort | None = None
        self._port: int | None = None
        self._sessions: list[ProxiedConnection] = []
        #: The open connections, each with what holds or releases its sides.
        self._open: dict[ProxiedConnection, Callable[[bool], None]] = {}
        self._cut_waiters: list[defer.Deferred[ProxiedConnection]] = []
        self._hooks = _ProxyHooks(
            clock=self._clock, mode=lambda: self._mode, opened=self._opened,
            take_cut_waiters=self._take_cut_waiters, closed=self._forget,
        )

    # -- lifecycle --------------------------------------------------------

    def listen(self) -> int:
        """
        Start listening on a free port of ``listen_host``.

        :returns: the port.
        """
        if self._listening is not None:
            raise RuntimeError(f"{self!r} is already listening")
        self._listening = self._reactor.listenTCP(
            0, _ProxyFactory(self._accept), interface=self._listen_host
        )
        address = self._listening.getHost()
        assert isinstance(address, IPv4Address | IPv6Address)
        self._port = address.port
        return address.port

    def stop(self) -> defer.Deferred[None]:
        """
        Stop listening and abort every connection.

        :returns: a Deferred that fires once the port is closed and every
            connection is gone. Calling it again is harmless.
        """
        listening, self._listening = self._listening, None
        waiting: list[defer.Deferred[Any]] = []
        if listening is not None:
            waiting.append(defer.maybeDeferred(listening.stopListening))
        for connection in list(self._open):
            waiting.append(connection.when_closed())
            connection.abort()
        gathered = defer.gatherResults(waiting, consumeErrors=True)

        def done(_: object) -> None:
            return None

        return gathered.addCallback(done)

    # -- where --------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        if self._port is None:
            raise RuntimeError("the proxy has no port yet; call listen() first")
        return self._port

    @property
    def host(self) -> str:
        """The address the proxy listens on."""
        return self._listen_host

    @property
    def url(self) -> str:
        """A NATS URL for the proxy, such as ``nats://127.0.0.1:40123``."""
        host = f"[{self._listen_host}]" if ":" in self._listen_host else self._listen_host
        return f"nats://{host}:{self.port}"

    # -- faults -------------------------------------------------------------

    @property
    def mode(self) -> ProxyMode:
        """The current :class:`ProxyMode`; assign one to change it."""
        return self._mode

    @mode.setter
    def mode(self, mode: ProxyMode) -> None:
        old, self._mode = self._mode, mode
        if (mode == BLACKHOLE) != (old == BLACKHOLE):
            for hold in list(self._open.values()):
                hold(mode == BLACKHOLE)

    def pass_through(self) -> None:
        """Forward everything at once (the initial mode)."""
        self.mode = PASS

    def drop(self) -> None:
        """Read and discard everything, both ways."""
        self.mode = DROP

    def blackhole(self) -> None:
        """Stop reading and forwarding; connections stay open."""
        self.mode = BLACKHOLE

    def delay(self, seconds: float) -> None:
        """Forward each chunk ``seconds`` after it arrived."""
        self.mode = ProxyMode.delay(seconds)

    def reset_all(self) -> int:
        """
        Abort every open connection now: both the client and the server see
        a reset (RST). New connections are still accepted.

        :returns: how many connections were reset.
        """
        connections = list(self._open)
        for connection in connections:
            connection.abort()
        return len(connections)

    def cut_next_frame(self) -> defer.Deferred[ProxiedConnection]:
        """
        Arm a cut: the next chunk the server sends on any connection is
        forwarded only in its first half, then that client connection is
        aborted once those bytes are written (and the server connection at
        once). A NATS frame arrives cut in half.

        :returns: a Deferred that fires with the connection once it is cut.
            Cancelling it disarms the cut if it has not happened yet.
        """

        def disarm(waiter: defer.Deferred[ProxiedConnection]) -> None:
            if waiter in self._cut_waiters:
                self._cut_waiters.remove(waiter)

        waiter: defer.Deferred[ProxiedConnection] = defer.Deferred(disarm)
        self._cut_waiters.append(waiter)
        return waiter

    # -- what happened ---------------------------------------------------

    @property
    def connections(self) -> int:
        """How many proxied connections are open now."""
        return len(self._open)

    @property
    def accepted(self) -> int:
        """How many connections were proxied in all (refused ones excepted)."""
        return len(self._sessions)

    @property
    def sessions(self) -> list[ProxiedConnection]:
        """Every proxied connection, open or closed, in the order accepted."""
        return list(self._sessions)

    @property
    def client_data(self) -> list[bytes]:
        """What each client sent, one entry per connection, in order."""
        return [session.client_data for session in self._sessions]

    @property
    def bytes_from_client(self) -> int:
        """Bytes read from clients on all connections."""
        return sum(session.bytes_from_client for session in self._sessions)

    @property
    def bytes_to_server(self) -> int:
        """Bytes forwarded to the server on all connections."""
        return sum(session.bytes_to_server for session in self._sessions)

    @property
    def bytes_from_server(self) -> int:
        """Bytes read from the server on all connections."""
        return sum(session.bytes_from_server for session in self._sessions)

    @property
    def bytes_to_client(self) -> int:
        """Bytes forwarded to clients on all connections."""
        return sum(session.bytes_to_client for session in self._sessions)

    def __repr__(self) -> str:
        where = f"{self._listen_host}:{self.port}" if self._listening is not None else "closed"
        host, port = self.target
        return (
            f"<FaultProxy {where} -> {host}:{port} mode={self._mode.name} open={self.connections}>"
        )

    # -- internals --------------------------------------------------------

    def _endpoint(self) -> IStreamClientEndpoint:
        host, port = self.target
        if isIPAddress(host):
            return TCP4ClientEndpoint(self._reactor, host, port, timeout=self._connect_timeout)
        # IPv6 addresses and names; this endpoint resolves in a thread.
        return HostnameEndpoint(self._reactor, host, port, timeout=self._connect_timeout)

    def _accept(self, client: _ClientSide) -> None:
        if self.refuse:
            self.refused += 1
            ITCPTransport(client.transport).abortConnection()
            return
        ProxiedConnection(self._hooks, len(self._sessions), client, self._endpoint())

    def _opened(self, connection: ProxiedConnection, hold: Callable[[bool], None]) -> None:
        self._sessions.append(connection)
        self._open[connection] = hold

    def _forget(self, connection: ProxiedConnection) -> None:
        self._open.pop(connection, None)

    def _take_cut_waiters(self) -> list[defer.Deferred[ProxiedConnection]] | None:
        if not self._cut_waiters:
            return None
        waiters, self._cut_waiters = self._cut_waiters, []
        return waiters
