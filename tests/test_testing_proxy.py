"""
Tests for L{txnats.testing.FaultProxy}, with real sockets: an in-process echo
server where a fault needs exact control of what the server sends, and a
real C{nats-server} where the NATS handshake matters.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.error import ConnectionDone, ConnectionLost, ConnectionRefusedError
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from txnats.testing import BLACKHOLE, DROP, PASS, FaultProxy, NatsServer, ProxyMode

#: Seconds any single wait in these tests may take.
TIMEOUT = 5.0

#: Seconds a test watches to see that nothing arrives.
QUIET = 0.3

#: What nats-server sends for PUB cut.subject 10 to a subscriber with sid 1.
MSG_FRAME = b"MSG cut.subject 1 10\r\n0123456789\r\n"


class Peer(Protocol):
    """
    One end of a test connection: records what it receives and lets a test
    wait for data or for the connection to end, each with a timeout.
    """

    def __init__(self) -> None:
        self.received = bytearray()
        self.reason: Failure | None = None
        self._data_waiters: list[tuple[Callable[[bytes], bool], defer.Deferred[bytes]]] = []
        self._lost_waiters: list[defer.Deferred[None]] = []

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        for entry in list(self._data_waiters):
            predicate, waiter = entry
            if predicate(bytes(self.received)):
                self._data_waiters.remove(entry)
                waiter.callback(bytes(self.received))

    def connectionLost(self, reason: Failure = ConnectionDone) -> None:  # type: ignore[assignment]
        self.reason = reason
        waiters, self._lost_waiters = self._lost_waiters, []
        for waiter in waiters:
            waiter.callback(None)

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def wait_for(self, predicate: Callable[[bytes], bool]) -> defer.Deferred[bytes]:
        """Fire with everything received once C{predicate} holds for it."""
        if predicate(bytes(self.received)):
            return defer.succeed(bytes(self.received))
        waiter: defer.Deferred[bytes] = defer.Deferred()
        self._data_waiters.append((predicate, waiter))
        return waiter.addTimeout(TIMEOUT, reactor)

    def wait_for_bytes(self, expected: bytes) -> defer.Deferred[bytes]:
        return self.wait_for(lambda data: expected in data)

    def _lost(self) -> defer.Deferred[None]:
        if self.reason is not None:
            return defer.succeed(None)
        waiter: defer.Deferred[None] = defer.Deferred()
        self._lost_waiters.append(waiter)
        return waiter.addTimeout(TIMEOUT, reactor)

    async def when_lost(self) -> Failure:
        """Wait until the connection is gone; return why it ended."""
        await self._lost()
        assert self.reason is not None
        return self.reason

    def close(self) -> defer.Deferred[None]:
        """Abort the connection and wait until it is gone."""
        if self.reason is None and self.transport is not None:
            self.transport.abortConnection()  # type: ignore[attr-defined]
        return self._lost()


class Echo(Peer):
    """The server side of the echo server; C{bye} makes it close cleanly."""

    def dataReceived(self, data: bytes) -> None:
        super().dataReceived(data)
        assert self.transport is not None
        self.transport.write(data)
        if b"bye" in data:
            self.transport.loseConnection()


class EchoFactory(Factory):
    def __init__(self) -> None:
        self.peers: list[Echo] = []

    def buildProtocol(self, addr: Any) -> Echo:
        peer = Echo()
        self.peers.append(peer)
        return peer


def assertReset(case: TestCase, reason: Failure) -> None:
    """The connection ended abruptly, not with a clean close."""
    case.assertIsNotNone(reason.check(ConnectionLost), reason)
    case.assertIsNone(reason.check(ConnectionDone), reason)


class ProxyTestsMixin:
    """Helpers shared by the proxy tests."""

    def proxyTo(self, port: int) -> FaultProxy:
        proxy = FaultProxy(reactor, "127.0.0.1", port)
        proxy.listen()
        self.addCleanup(proxy.stop)  # type: ignore[attr-defined]
        return proxy

    async def connect(self, port: int) -> Peer:
        peer = Peer()
        await connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), peer)
        self.addCleanup(peer.close)  # type: ignore[attr-defined]
        return peer

    async def quiet(self) -> None:
        """Let the reactor run for a moment, for tests that nothing arrives."""
        await deferLater(reactor, QUIET, lambda: None)


class EchoProxyTests(ProxyTestsMixin, TestCase):
    """
    L{FaultProxy} in front of an in-process echo server.
    """

    def setUp(self) -> None:
        self.echo = EchoFactory()
        self.echoPort = reactor.listenTCP(0, self.echo, interface="127.0.0.1")
        self.addCleanup(self.echoPort.stopListening)
        self.addCleanup(self.closeEchoPeers)
        self.proxy = self.proxyTo(self.echoPort.getHost().port)

    def closeEchoPeers(self) -> defer.Deferred[Any]:
        return defer.gatherResults([peer.close() for peer in self.echo.peers])

    async def test_passThrough(self) -> None:
        """
        By default bytes flow both ways unchanged, and the proxy counts
        them per connection and in total.
        """
        self.assertEqual(self.proxy.mode, PASS)
        client = await self.connect(self.proxy.port)
        client.send(b"hello")
        await client.wait_for_bytes(b"hello")
        self.assertEqual(self.proxy.connections, 1)
        self.assertEqual(self.proxy.accepted, 1)
        [session] = self.proxy.sessions
        self.assertEqual(session.client_data, b"hello")
        self.assertEqual(session.server_data, b"hello")
        counts = (
            self.proxy.bytes_from_client,
            self.proxy.bytes_to_server,
            self.proxy.bytes_from_server,
            self.proxy.bytes_to_client,
        )
        self.assertEqual(counts, (5, 5, 5, 5))
        self.assertEqual(self.proxy.url, f"nats://127.0.0.1:{self.proxy.port}")

    async def test_drop(self) -> None:
        """
        In C{drop} mode the proxy reads and records what the client sends
        but forwards nothing; back in C{pass} mode, new bytes flow again and
        the dropped ones stay lost.
        """
        client = await self.connect(self.proxy.port)
        self.proxy.drop()
        self.assertEqual(self.proxy.mode, DROP)
        client.send(b"lost")
        await self.quiet()
        self.assertEqual(bytes(client.received), b"")
        [session] = self.proxy.sessions
        self.assertEqual(session.client_data, b"lost")
        self.assertEqual((session.bytes_from_client, session.bytes_to_server), (4, 0))

        self.proxy.pass_through()
        client.send(b"kept")
        await client.wait_for_bytes(b"kept")
        self.assertEqual(bytes(client.received), b"kept")

    async def test_blackhole(self) -> None:
        """
        In C{blackhole} mode the proxy neither reads nor forwards: the
        connection stays open, the client hears nothing, and the proxy has
        not even read the bytes. Back in C{pass} mode the held bytes flow.
        """
        client = await self.connect(self.proxy.port)
        client.send(b"before")
        await client.wait_for_bytes(b"before")
        self.proxy.blackhole()
        self.assertEqual(self.proxy.mode, BLACKHOLE)
        client.send(b"during")
        await self.quiet()
        self.assertEqual(bytes(client.received), b"before")
        self.assertIsNone(client.reason)
        self.assertEqual(self.proxy.connections, 1)
        self.assertEqual(self.proxy.bytes_from_client, len(b"before"))

        self.proxy.pass_through()
        await client.wait_for_bytes(b"during")
        self.assertEqual(bytes(client.received), b"beforeduring")

    async def test_delay(self) -> None:
        """
        In C{delay} mode every chunk is forwarded that many seconds after it
        arrived, each way, and chunks keep their order.
        """
        client = await self.connect(self.proxy.port)
        self.proxy.delay(0.1)
        self.assertEqual(self.proxy.mode, ProxyMode.delay(0.1))
        started = time.monotonic()
        for chunk in (b"one,", b"two,", b"three"):
            client.send(chunk)
            await deferLater(reactor, 0.01, lambda: None)
        received = await client.wait_for_bytes(b"three")
        self.assertGreaterEqual(time.monotonic() - started, 0.2)
        self.assertEqual(received, b"one,two,three")
        self.assertRaises(ValueError, ProxyMode.delay, -1)

    async def test_resetAll(self) -> None:
        """
        L{FaultProxy.reset_all} aborts every proxied connection: clients and
        the server see a reset, not a clean close. New connections still
        work.
        """
        first = await self.connect(self.proxy.port)
        second = await self.connect(self.proxy.port)
        first.send(b"1")
        second.send(b"2")
        await first.wait_for_bytes(b"1")
        await second.wait_for_bytes(b"2")
        self.assertEqual(self.proxy.reset_all(), 2)
        for peer in [first, second, *self.echo.peers]:
            assertReset(self, await peer.when_lost())
        await defer.gatherResults([session.when_closed() for session in self.proxy.sessions])
        self.assertEqual(self.proxy.connections, 0)

        third = await self.connect(self.proxy.port)
        third.send(b"3")
        await third.wait_for_bytes(b"3")

    async def test_refuse(self) -> None:
        """
        With C{refuse} set, new connections are closed at once without a
        byte, while open ones carry on; clearing it lets new ones through.
        """
        open_one = await self.connect(self.proxy.port)
        self.proxy.refuse = True
        refused = await self.connect(self.proxy.port)
        assertReset(self, await refused.when_lost())
        self.assertEqual(bytes(refused.received), b"")
        self.assertEqual(self.proxy.refused, 1)
        self.assertEqual(self.proxy.accepted, 1)
        open_one.send(b"still here")
        await open_one.wait_for_bytes(b"still here")

        self.proxy.refuse = False
        later = await self.connect(self.proxy.port)
        later.send(b"welcome")
        await later.wait_for_bytes(b"welcome")

    async def test_cleanCloseForwarded(self) -> None:
        """
        When the server closes cleanly, the client sees a clean close after
        the last bytes, and the proxied connection reports itself closed.
        """
        client = await self.connect(self.proxy.port)
        client.send(b"bye")
        reason = await client.when_lost()
        self.assertIsNotNone(reason.check(ConnectionDone))
        self.assertEqual(bytes(client.received), b"bye")
        [session] = self.proxy.sessions
        await session.when_closed()
        self.assertFalse(session.open)
        self.assertEqual(self.proxy.connections, 0)

    async def test_stop(self) -> None:
        """
        L{FaultProxy.stop} closes the listening port and aborts every
        connection; its Deferred fires once all are gone, and stopping again
        is harmless.
        """
        client = await self.connect(self.proxy.port)
        client.send(b"x")
        await client.wait_for_bytes(b"x")
        port = self.proxy.port
        await self.proxy.stop()
        self.assertEqual(self.proxy.connections, 0)
        assertReset(self, await client.when_lost())
        with self.assertRaises(ConnectionRefusedError):
            await connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), Peer())
        await self.proxy.stop()

    async def waitUntil(self, predicate: Callable[[], bool]) -> None:
        """Poll C{predicate} until it holds; fail after L{TIMEOUT} seconds."""
        deadline = time.monotonic() + TIMEOUT
        while not predicate():
            if time.monotonic() > deadline:
                self.fail(f"still false after {TIMEOUT}s: {predicate}")
            await deferLater(reactor, 0.01, lambda: None)

    async def test_cutSkipsSessionWithClientGone(self) -> None:
        """
        A session whose client side has closed while its server side is still
        open (in C{delay} mode the proxy closes the server side only once the
        client's last bytes are delivered) does not take an armed cut when the
        server sends on it: no frame of it can reach a client, and its client
        side is already lost, so the cut's Deferred would never fire. The cut
        stays armed, and the next server chunk on a live session takes it.
        """
        gone = await self.connect(self.proxy.port)
        gone.send(b"a")
        await gone.wait_for_bytes(b"a")
        live = await self.connect(self.proxy.port)
        live.send(b"b")
        await live.wait_for_bytes(b"b")
        gone_session, live_session = self.proxy.sessions
        gone_server, live_server = self.echo.peers

        # The client's last bytes wait in the proxy far longer than the test
        # runs, so the server side stays open after the client closes; stop()
        # (a cleanup) aborts it and cancels the delivery.
        self.proxy.delay(TIMEOUT * 4)
        gone.send(b"last")
        assert gone.transport is not None
        gone.transport.loseConnection()
        await gone.when_lost()
        # Private, as nothing public shows the proxy has seen the client's close.
        await self.waitUntil(lambda: gone_session._client is None)
        self.proxy.pass_through()

        cut = self.proxy.cut_next_frame()
        gone_server.send(b"to nobody")
        await self.waitUntil(lambda: gone_session.server_data.endswith(b"to nobody"))
        self.assertNoResult(cut)
        self.assertFalse(gone_session.cut)
        self.assertTrue(gone_session.open)
        self.assertEqual(gone_server.reason, None)

        live_server.send(b"0123456789")
        session = await cut.addTimeout(TIMEOUT, reactor)
        self.assertIs(session, live_session)
        self.assertTrue(live_session.cut)
        assertReset(self, await live.when_lost())
        self.assertEqual(bytes(live.received), b"b01234")


class TargetDownTests(ProxyTestsMixin, TestCase):
    """
    L{FaultProxy} in front of a port where nothing listens.
    """

    async def test_targetRefuses(self) -> None:
        """
        When the target refuses the proxy's connection, the client's
        connection is aborted and the session ends.
        """
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        # Nothing listens on the port now.
        proxy = self.proxyTo(port)
        client = await self.connect(proxy.port)
        assertReset(self, await client.when_lost())
        [session] = proxy.sessions
        await session.when_closed()
        self.assertEqual(proxy.connections, 0)


class NatsProxyTests(ProxyTestsMixin, TestCase):
    """
    L{FaultProxy} in front of a real C{nats-server}.
    """

    def setUp(self) -> None:
        self.server = NatsServer().start()
        self.addCleanup(self.server.stop)
        self.proxy = self.proxyTo(self.server.port)

    async def handshake(self, peer: Peer) -> None:
        await peer.wait_for(lambda data: data.startswith(b"INFO ") and b"\r\n" in data)
        peer.send(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        await peer.wait_for_bytes(b"PONG\r\n")

    async def test_handshakeThroughProxy(self) -> None:
        """
        A NATS handshake works through the proxy: the server's C{INFO}
        arrives, naming the server's own port, and C{PING} is answered. The
        proxy recorded exactly what the client sent.
        """
        client = await self.connect(self.proxy.port)
        await self.handshake(client)
        self.assertIn(f'"port":{self.server.port}'.encode(), bytes(client.received))
        self.assertEqual(
            self.proxy.client_data,
            [b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n'],
        )
        [session] = self.proxy.sessions
        self.assertTrue(session.server_data.startswith(b"INFO "))
        self.assertEqual(session.bytes_to_client, len(client.received))

    async def test_recordsEachConnection(self) -> None:
        """
        The proxy records client bytes per connection, so a test can assert
        what was, and was not, ever sent in plaintext.
        """
        first = await self.connect(self.proxy.port)
        await self.handshake(first)
        second = await self.connect(self.proxy.port)
        await second.wait_for_bytes(b"\r\n")
        second.send(b"PING\r\n")
        await second.wait_for_bytes(b"PONG\r\n")
        self.assertEqual(len(self.proxy.client_data), 2)
        self.assertIn(b"CONNECT ", self.proxy.client_data[0])
        self.assertNotIn(b"CONNECT", self.proxy.client_data[1])
        self.assertFalse(any(b"secret" in data for data in self.proxy.client_data))
        self.assertEqual(
            self.proxy.bytes_from_client, sum(len(data) for data in self.proxy.client_data)
        )

    async def test_blackholeHidesInfo(self) -> None:
        """
        A client connecting through a blackholed proxy gets a TCP connection
        but no C{INFO}; once the proxy passes again the greeting arrives.
        """
        self.proxy.blackhole()
        client = await self.connect(self.proxy.port)
        await self.quiet()
        self.assertEqual(bytes(client.received), b"")
        self.assertIsNone(client.reason)
        self.proxy.pass_through()
        await client.wait_for(lambda data: data.startswith(b"INFO "))

    async def test_cutNextFrame(self) -> None:
        """
        After L{FaultProxy.cut_next_frame}, the next chunk from the server
        (here a C{MSG} frame) reaches the client only in its first half, and
        then the client's connection is reset.
        """
        client = await self.connect(self.proxy.port)
        await self.handshake(client)
        client.send(b"SUB cut.subject 1\r\nPING\r\n")
        await client.wait_for(lambda data: data.endswith(b"PONG\r\nPONG\r\n"))
        before = len(client.received)

        cut = self.proxy.cut_next_frame()
        client.send(b"PUB cut.subject 10\r\n0123456789\r\n")
        session = await cut.addTimeout(TIMEOUT, reactor)
        assertReset(self, await client.when_lost())

        self.assertTrue(session.cut)
        self.assertTrue(session.server_data.endswith(MSG_FRAME))
        self.assertEqual(bytes(client.received[before:]), MSG_FRAME[: len(MSG_FRAME) // 2])
        self.assertEqual(session.bytes_to_client, len(client.received))
        await session.when_closed()

    async def test_cutDisarmedByCancel(self) -> None:
        """
        Cancelling the Deferred of L{FaultProxy.cut_next_frame} disarms the
        cut: the next frame arrives whole.
        """
        client = await self.connect(self.proxy.port)
        await self.handshake(client)
        cut = self.proxy.cut_next_frame()
        cut.cancel()
        self.failureResultOf(cut, defer.CancelledError)
        client.send(b"PING\r\n")
        await client.wait_for(lambda data: data.endswith(b"PONG\r\nPONG\r\n"))
        self.assertIsNone(client.reason)
