"""Over plain TCP a small flush reaches the socket at once, not on the reactor's next
pass; a big one is left to the reactor (see ``NatsProtocol.flush_now``)."""

from __future__ import annotations

import socket

from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.ssl import optionsForClientTLS
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txnats.connection import EAGER_WRITE_MAX, NatsProtocol
from txnats.errors import ConnectError
from txnats.testing import FakeHandler


class EagerWriteTests(TestCase):
    async def connected(self) -> tuple[NatsProtocol, socket.socket]:
        """A protocol on a real TCP connection to a plain socket of ours (no server:
        nothing here needs one, and the handshake is never answered)."""
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        proto = NatsProtocol(FakeHandler(), reactor)
        # Closing at the end fails the handshake, which is expected.
        proto.handshake.addErrback(lambda f: f.trap(ConnectError))
        await connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), proto)
        self.addCleanup(proto.transport.abortConnection)  # type: ignore[union-attr]
        peer, _ = listener.accept()
        self.addCleanup(peer.close)
        return proto, peer

    async def test_small_flush_sends_without_a_reactor_pass(self) -> None:
        """flush_now() puts a small flush in the kernel before returning: a recv on the
        other end, made without letting the reactor run, gets it."""
        proto, peer = await self.connected()
        peer.settimeout(2.0)  # the bytes are there already; this only bounds a failure
        proto.write(b"PING\r\n")
        proto.flush_now()
        self.assertEqual(peer.recv(100), b"PING\r\n")

    async def test_big_flush_waits_for_the_reactor(self) -> None:
        """A flush over EAGER_WRITE_MAX is handed to the transport only: until the
        reactor runs, nothing of it is in the socket."""
        proto, peer = await self.connected()
        peer.setblocking(False)
        proto.write(b"x" * (EAGER_WRITE_MAX + 1))
        proto.flush_now()
        with self.assertRaises(BlockingIOError):
            peer.recv(100)

    async def test_no_eager_write_once_tls_started(self) -> None:
        """After the upgrade to TLS the transport is left to the reactor: the TLS
        layer's own bytes (its ClientHello) and ours are not in the socket before the
        reactor runs."""
        proto, peer = await self.connected()
        peer.setblocking(False)
        proto._tls_creator = lambda: optionsForClientTLS("localhost")
        self.assertTrue(proto._start_tls())
        proto.write(b"PING\r\n")
        proto.flush_now()
        with self.assertRaises(BlockingIOError):
            peer.recv(100)


class NotEagerTests(SynchronousTestCase):
    def test_other_transports_are_left_to_the_reactor(self) -> None:
        """A transport that is not plain TCP (TLS, WebSocket, a test double) is only
        written to, never driven."""
        proto = NatsProtocol(FakeHandler(), reactor)
        transport = StringTransport()
        proto.makeConnection(transport)
        self.assertIsNone(proto._eager)
        proto.write(b"PING\r\n")
        proto.flush_now()
        self.assertEqual(transport.value(), b"PING\r\n")
