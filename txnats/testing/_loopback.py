"""
In-memory connections: a pair of transports that carry bytes between two protocols in
the same process, and the ``memory:name=...`` client endpoint that dials one.

Nothing here touches a socket. Bytes written on one end reach the other end's protocol
in a later turn of the clock the connection was dialled with (``callLater(0)``), at most
:data:`READ_SIZE` bytes a read, as a TCP socket hands them over: a test on the real
reactor runs as it would over loopback TCP, and one on a
:class:`~twisted.internet.task.Clock` moves only when the test calls ``clock.advance``.

Each end is a push producer (``pauseProducing`` stops delivery to its protocol: the
client's back-pressure) and a consumer (a producer registered on it is paused while more
than :data:`HIGH_WATER` bytes wait to be delivered). :meth:`MemoryTransport.freeze`
holds every byte in both directions, as a network partition would.
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from twisted.internet.defer import Deferred, fail
from twisted.internet.error import (
    ConnectionAborted,
    ConnectionDone,
    ConnectionLost,
    ConnectionRefusedError,
)
from twisted.internet.interfaces import (
    IAddress,
    IConsumer,
    IDelayedCall,
    IProducer,
    IProtocol,
    IProtocolFactory,
    IPushProducer,
    IReactorTime,
    IStreamClientEndpoint,
    ITransport,
)
from twisted.python.failure import Failure
from zope.interface import implementer

__all__ = [
    "HIGH_WATER",
    "MEMORY_PREFIX",
    "READ_SIZE",
    "Listener",
    "MemoryAddress",
    "MemoryEndpoint",
    "MemoryTransport",
    "connect_pair",
    "memory_endpoint",
    "register",
    "unregister",
]

#: The endpoint type of in-memory servers: ``memory:name=<server name>``.
MEMORY_PREFIX = "memory:"
#: The most bytes handed to a protocol in one ``dataReceived`` (Twisted reads 64 KiB).
READ_SIZE = 64 * 1024
#: Undelivered bytes above which the writer's registered producer is paused.
HIGH_WATER = 4 * 1024 * 1024


@implementer(IAddress)
@dataclass(frozen=True)
class MemoryAddress:
    """One end of an in-memory connection: the server's name, the connection's number,
    and which side (``"client"`` or ``"server"``)."""

    server: str
    connection: int
    side: str


class Listener(Protocol):
    """What a ``memory:`` endpoint dials (the in-memory server)."""

    def accept(self, clock: IReactorTime, address: MemoryAddress) -> IProtocol | None:
        """Take a new connection at ``address``, run on ``clock``: its protocol, made and
        not yet connected, or ``None`` to refuse it."""


@dataclass
class _Hold:
    """Whether a connection holds every byte, both ways (see
    :meth:`MemoryTransport.freeze`): one for both ends of the connection."""

    on: bool = False


_listeners: weakref.WeakValueDictionary[str, Listener] = weakref.WeakValueDictionary()
_numbers = itertools.count(1)


def register(name: str, listener: Listener) -> None:
    """Make ``memory:name=<name>`` dial ``listener`` (replacing any listener of that
    name). Only a weak reference is kept."""
    _listeners[name] = listener


def unregister(name: str, listener: Listener) -> None:
    """Forget ``name`` if ``listener`` still holds it."""
    if _listeners.get(name) is listener:
        del _listeners[name]


@implementer(ITransport, IConsumer, IPushProducer)
class MemoryTransport:
    """
    One end of an in-memory connection (see :func:`connect_pair`).

    :param clock: delivers bytes (``callLater(0)``) and runs the peer's side too.
    :param host: this end's address; the peer's is :meth:`getPeer`.
    :param hold: whether bytes are held, shared with the peer (:func:`connect_pair`
        gives both ends one); a new one by default.
    """

    def __init__(
        self, clock: IReactorTime, host: MemoryAddress, hold: _Hold | None = None
    ) -> None:
        self.clock = clock
        self.host = host
        self.peer: MemoryTransport | None = None
        self.protocol: IProtocol | None = None
        #: Set by :meth:`loseConnection`: closing once what was written is delivered.
        self.disconnecting = False
        #: Set once the connection is gone (``connectionLost`` called or scheduled).
        self.disconnected = False
        #: Bytes written on this end (its protocol wrote them), in all.
        self.bytes_written = 0
        self._outbox: deque[bytes] = deque()
        self._out_bytes = 0
        self._call: IDelayedCall | None = None
        self._reading = True
        self._hold = hold if hold is not None else _Hold()
        self._producer: IPushProducer | None = None
        self._producer_paused = False

    # ITransport
    def write(self, data: bytes) -> None:
        """Queue ``data`` for the peer (dropped once the connection is gone)."""
        if self.disconnected or not data:
            return
        self._outbox.append(bytes(data))
        self._out_bytes += len(data)
        self.bytes_written += len(data)
        if self._out_bytes > HIGH_WATER and self._producer is not None:
            if not self._producer_paused:
                self._producer_paused = True
                self._producer.pauseProducing()
        self.schedule_delivery()

    def writeSequence(self, data: Iterable[bytes]) -> None:
        """Queue each of ``data`` for the peer."""
        for chunk in data:
            self.write(chunk)

    def loseConnection(self) -> None:
        """Close once what was written has been delivered (both ends see
        ``ConnectionDone``)."""
        if self.disconnected or self.disconnecting:
            return
        self.disconnecting = True
        self.schedule_delivery()

    def abortConnection(self) -> None:
        """Close now, dropping what was not delivered: this end sees
        ``ConnectionAborted``, the peer ``ConnectionLost`` (a reset)."""
        self._close(Failure(ConnectionAborted()), Failure(ConnectionLost("connection reset")))

    def getPeer(self) -> MemoryAddress:
        """The other end's address."""
        assert self.peer is not None
        return self.peer.host

    def getHost(self) -> MemoryAddress:
        """This end's address."""
        return self.host

    # IPushProducer: pausing stops delivery to this end's protocol.
    def pauseProducing(self) -> None:
        """Stop handing bytes to this end's protocol (they wait, and so does the peer)."""
        self._reading = False

    def resumeProducing(self) -> None:
        """Hand bytes to this end's protocol again."""
        self._reading = True
        if self.peer is not None:
            self.peer.schedule_delivery()

    def stopProducing(self) -> None:
        """Abort the connection."""
        self.abortConnection()

    # IConsumer
    def registerProducer(self, producer: IProducer, streaming: bool) -> None:
        """Pause ``producer`` while more than :data:`HIGH_WATER` bytes wait for the peer
        (a push producer; a pull producer is never asked for more)."""
        self._producer = IPushProducer(producer) if streaming else None
        self._producer_paused = False

    def unregisterProducer(self) -> None:
        """Forget the producer."""
        self._producer = None

    # Faults
    @property
    def frozen(self) -> bool:
        """Whether bytes are held in both directions (see :meth:`freeze`)."""
        return self._hold.on

    def freeze(self) -> None:
        """Hold every byte, both ways, until :meth:`thaw` (a partition: nothing is lost,
        nothing arrives, the connection stays open)."""
        self._hold.on = True

    def thaw(self) -> None:
        """Deliver again what :meth:`freeze` held, and what follows."""
        self._hold.on = False
        self.schedule_delivery()
        if self.peer is not None:
            self.peer.schedule_delivery()

    @property
    def pending(self) -> int:
        """Bytes written on this end and not yet delivered to the peer."""
        return self._out_bytes

    # What the peer reads and calls
    @property
    def reading(self) -> bool:
        """Whether this end hands bytes to its protocol (:meth:`pauseProducing` stops
        that until :meth:`resumeProducing`)."""
        return self._reading

    def schedule_delivery(self) -> None:
        """Deliver what waits for the peer in a later turn of the clock (one call at a
        time; nothing once the connection is gone)."""
        if self._call is None and not self.disconnected:
            self._call = self.clock.callLater(0, self._deliver)

    def _deliver(self) -> None:
        self._call = None
        peer = self.peer
        if self.disconnected or peer is None:
            return
        if self._hold.on:
            return
        if self._outbox and peer.reading and peer.protocol is not None:
            data = self._take(READ_SIZE)
            peer.protocol.dataReceived(data)
            if self._producer_paused and self._out_bytes <= HIGH_WATER // 2:
                self._producer_paused = False
                if self._producer is not None:
                    self._producer.resumeProducing()
            if self._outbox:
                self.schedule_delivery()
                return
        if self.disconnecting and not self._outbox:
            self._close(Failure(ConnectionDone()), Failure(ConnectionDone()))

    def _take(self, limit: int) -> bytes:
        out: list[bytes] = []
        size = 0
        box = self._outbox
        while box and size < limit:
            chunk = box.popleft()
            if size + len(chunk) > limit:
                cut = limit - size
                box.appendleft(chunk[cut:])
                chunk = chunk[:cut]
            out.append(chunk)
            size += len(chunk)
        self._out_bytes -= size
        return out[0] if len(out) == 1 else b"".join(out)

    def _close(self, mine: Failure, theirs: Failure) -> None:
        if self.disconnected:
            return
        peer = self.peer
        self.close_end(mine)
        if peer is not None:
            peer.close_end(theirs)

    def close_end(self, reason: Failure) -> None:
        """Close this end now: what waits is dropped, and its protocol's
        ``connectionLost(reason)`` comes in a later turn, as a reactor calls it. Both
        ends are closed so when the connection closes; a closed end stays closed."""
        if self.disconnected:
            return
        self.disconnected = True
        self._outbox.clear()
        self._out_bytes = 0
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        protocol = self.protocol
        if protocol is not None:
            # As a reactor does: connectionLost comes in a later turn.
            self.clock.callLater(0, protocol.connectionLost, reason)


def connect_pair(
    clock: IReactorTime,
    client: IProtocol,
    server: IProtocol,
    client_address: MemoryAddress,
    server_address: MemoryAddress,
) -> tuple[MemoryTransport, MemoryTransport]:
    """Join ``client`` and ``server`` by a new pair of transports; both protocols are
    connected (``makeConnection``), the server first. Returns (client's, server's)."""
    hold = _Hold()
    ct = MemoryTransport(clock, client_address, hold)
    st = MemoryTransport(clock, server_address, hold)
    ct.peer, st.peer = st, ct
    ct.protocol, st.protocol = client, server
    server.makeConnection(st)
    client.makeConnection(ct)
    return ct, st


@implementer(IStreamClientEndpoint)
class MemoryEndpoint:
    """
    Dials the in-memory server registered as ``name``, on ``clock``.

    The dial completes in a later turn of ``clock``; it fails with
    ``ConnectionRefusedError`` when no server of that name exists or it refuses
    connections (stopped), and with ``CancelledError`` when cancelled first.
    """

    def __init__(self, clock: IReactorTime, name: str) -> None:
        self.clock = clock
        self.name = name

    def connect(self, protocolFactory: IProtocolFactory) -> Deferred[IProtocol]:
        """Connect a protocol of ``protocolFactory`` to the server."""
        if _listeners.get(self.name) is None:
            return fail(ConnectionRefusedError(  # type: ignore[no-untyped-call]
                f"no in-memory NATS server named {self.name!r}"
            ))
        number = next(_numbers)
        d: Deferred[IProtocol] = Deferred(lambda _: call.cancel())

        def dial() -> None:
            listener = _listeners.get(self.name)
            client_address = MemoryAddress(self.name, number, "client")
            server_address = MemoryAddress(self.name, number, "server")
            proto = protocolFactory.buildProtocol(server_address)
            if proto is None:
                d.errback(ConnectionRefusedError(  # type: ignore[no-untyped-call]
                    "the factory built no protocol"
                ))
                return
            server = listener.accept(self.clock, server_address) if listener is not None else None
            if server is None:
                d.errback(ConnectionRefusedError(  # type: ignore[no-untyped-call]
                    f"in-memory NATS server {self.name!r} refused"
                ))
                return
            connect_pair(self.clock, proto, server, client_address, server_address)
            d.callback(proto)

        call = self.clock.callLater(0, dial)
        return d


def memory_endpoint(reactor: object, description: str) -> MemoryEndpoint:
    """
    The endpoint of a ``memory:name=<name>`` description.

    :param reactor: the clock the connection runs on (a reactor, or a
        :class:`~twisted.internet.task.Clock`).
    :raises ValueError: for a description that names no server.
    """
    rest = description[len(MEMORY_PREFIX) :] if description.startswith(MEMORY_PREFIX) else ""
    fields = dict(part.partition("=")[::2] for part in rest.split(":") if part)
    name = fields.get("name", "")
    if not name:
        raise ValueError(f"an in-memory server address is memory:name=<name>, not {description!r}")
    return MemoryEndpoint(IReactorTime(reactor), name)
