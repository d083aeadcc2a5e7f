"""
Fakes for testing code that uses txnats without a socket, a server or a sleep.

Everything here runs on :mod:`twisted.internet.testing`: a
:class:`~twisted.internet.testing.MemoryReactorClock` records each dial of a
:class:`txnats.Client` and a :class:`CountingTransport` stands for the socket.
Time moves only when the test calls ``clock.advance``.

- :class:`ServerSide` plays the server of one recorded dial: it feeds the client
  bytes and reads what the client wrote.
- :class:`CountingTransport` is a ``StringTransport`` that also keeps each
  ``write`` call apart.
- :class:`FakeHandler` stands in for the client above a bare
  :class:`txnats.connection.NatsProtocol`: it records what the protocol reports.

A client connected over a fake transport::

    from twisted.internet.testing import MemoryReactorClock
    from txnats import Client
    from txnats.testing import ServerSide

    clock = MemoryReactorClock()
    client = Client(clock, ["tcp:host=127.0.0.1:port=4222"])
    d = client.start()
    clock.advance(0)                  # the client dials
    server = ServerSide(clock)        # ... and the dial is answered
    server.send(b'INFO {"server_id": "S", "max_payload": 1048576}\\r\\n')
    server.send(b"PONG\\r\\n")        # answers the PING of the handshake
    clock.advance(0)                  # d has fired: the client is connected
    client.publish("greet", b"hi")
    clock.advance(0)
    assert b"PUB greet 2\\r\\nhi\\r\\n" in server.transport.value()

This module imports no reactor and nothing of :mod:`twisted.trial`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IConnector, IProtocol
from twisted.internet.protocol import ClientFactory
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from txnats.connection import NatsProtocol
from txnats.errors import NatsError, ServerError
from txnats.protocol.events import Msg

__all__ = ["CountingTransport", "FakeHandler", "ServerSide"]


class CountingTransport(StringTransport):
    """
    A :class:`~twisted.internet.testing.StringTransport` that also remembers
    each ``write`` call, so a test can tell one write of two frames from two
    writes of one frame each.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        #: The data of each ``write`` call, in order.
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Record ``data`` as one write, then buffer it like ``StringTransport``."""
        self.writes.append(data)
        super().write(data)  # type: ignore[no-untyped-call]

    def reset(self) -> None:
        """Forget everything written so far (the bytes and the write calls)."""
        self.clear()  # type: ignore[no-untyped-call]
        self.writes = []


class ServerSide:
    """
    The far end of one dial recorded by a
    :class:`~twisted.internet.testing.MemoryReactorClock`.

    Building it completes the dial: the protocol is made from the recorded
    factory and connected to a fresh :class:`CountingTransport`. The server's
    part (``INFO``, ``PONG``, ``MSG`` ...) is then played with :meth:`send`,
    and what the client wrote is read from :attr:`transport`.

    :param clock: The reactor the client dials through.
    :param index: Which of the recorded dials (``clock.tcpClients``) to answer;
        the latest by default.
    """

    def __init__(self, clock: MemoryReactorClock, index: int = -1) -> None:
        host, port, factory, _, _ = clock.tcpClients[index]
        #: The host and port the client dialled.
        self.host: str = host
        self.port: int = port
        #: The factory the client handed to ``connectTCP``.
        self.factory: ClientFactory = factory
        #: The connector of the dial (``stopConnecting`` is recorded on it).
        self.connector: IConnector = clock.connectors[index]
        protocol = factory.buildProtocol(None)
        if protocol is None:
            raise ValueError("the dial's factory built no protocol")
        #: The client's end of the connection.
        self.protocol: IProtocol = protocol
        #: What the client wrote, and whether it closed the connection.
        self.transport = CountingTransport()
        protocol.makeConnection(self.transport)
        #: Whether :meth:`lose` ended the connection.
        self.lost = False
        self._answered = 0

    def send(self, data: bytes) -> None:
        """Deliver ``data`` to the client as one read from the socket."""
        self.protocol.dataReceived(data)

    def lose(self) -> None:
        """End the connection cleanly (``ConnectionDone``); only the first call counts."""
        if not self.lost:
            self.lost = True
            self.protocol.connectionLost(Failure(ConnectionDone()))

    def reset(self) -> None:
        """Forget what the client wrote so far; the PINGs in it count as answered."""
        self.transport.reset()
        self._answered = 0

    def answer_pings(self) -> int:
        """
        Answer with a ``PONG`` every ``PING`` the client wrote since the last
        :meth:`reset` and that is not answered yet.

        :return: How many ``PONG`` were sent (none once the connection is lost).
        """
        written: bytes = self.transport.value()  # type: ignore[no-untyped-call]
        n = written.count(b"PING\r\n") - self._answered
        if n and not self.lost:
            self._answered += n
            self.send(b"PONG\r\n" * n)
        return n


class FakeHandler:
    """
    Stands in for the client above a :class:`txnats.connection.NatsProtocol`
    (it provides the protocol's ``ConnectionHandler``) and records what the
    protocol reports.

    Calls the protocol asks to schedule are kept in :attr:`scheduled` and run
    only by :meth:`run_scheduled`.

    :param options: What :meth:`connect_options` answers (a copy each time);
        by default ``{"verbose": False, "protocol": 1}``.
    """

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        #: The ``CONNECT`` options given to the protocol.
        self.options: dict[str, Any] = (
            options if options is not None else {"verbose": False, "protocol": 1}
        )
        #: The ``INFO`` of each handshake.
        self.infos: list[dict[str, Any]] = []
        #: Every message delivered, in order.
        self.msgs: list[Msg] = []
        #: Every ``INFO`` received after the handshake.
        self.updates: list[dict[str, Any]] = []
        #: Every ``-ERR`` reported.
        self.errors: list[ServerError] = []
        #: Every message the protocol could not take whole (unparsable headers).
        self.message_errors: list[NatsError] = []
        #: Each lost connection, with its reason.
        self.lost: list[tuple[NatsProtocol, NatsError]] = []
        #: How many times the outbound buffer was reported drained.
        self.drained = 0
        #: Scheduled calls not run yet, oldest first.
        self.scheduled: list[tuple[Callable[..., object], tuple[object, ...]]] = []

    def connect_options(self, info: dict[str, Any]) -> dict[str, Any]:
        """Record ``info``; answer a copy of :attr:`options`."""
        self.infos.append(info)
        return dict(self.options)

    def msgs_received(self, msgs: list[Msg]) -> None:
        """Record the messages of one read."""
        self.msgs.extend(msgs)

    def info_received(self, info: dict[str, Any]) -> None:
        """Record an ``INFO`` received after the handshake."""
        self.updates.append(info)

    def server_error(self, error: ServerError) -> None:
        """Record a ``-ERR`` the connection survives."""
        self.errors.append(error)

    def message_error(self, error: NatsError) -> None:
        """Record a message the protocol delivered with unparsable headers."""
        self.message_errors.append(error)

    def schedule(self, fn: Callable[..., object], *args: object) -> None:
        """Keep ``fn(*args)`` for :meth:`run_scheduled`."""
        self.scheduled.append((fn, args))

    def read_started(self) -> None:
        """Nothing: reads are not tracked."""

    def read_finished(self) -> None:
        """Nothing: reads are not tracked."""

    def outbound_drained(self) -> None:
        """Count a drained outbound buffer."""
        self.drained += 1

    def connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None:
        """Record the lost connection and its reason."""
        self.lost.append((proto, reason))

    def run_scheduled(self) -> int:
        """
        Run every scheduled call, and those they schedule, oldest first.

        :return: How many calls ran.
        """
        n = 0
        while self.scheduled:
            fn, args = self.scheduled.pop(0)
            fn(*args)
            n += 1
        return n
