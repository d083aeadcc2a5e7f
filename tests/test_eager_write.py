"""Over plain TCP, a flush reaches the socket at once, not on the reactor's next pass."""

from __future__ import annotations

import socket

from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from tests.test_connection import FakeHandler
from txnats.connection import NatsProtocol
from txnats.errors import ConnectError


class EagerWriteTests(TestCase):
    async def test_flush_sends_without_a_reactor_pass(self) -> None:
        """flush_now() puts the bytes in the kernel before returning: a blocking recv
        on the other end, made without letting the reactor run, gets them."""
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        proto = NatsProtocol(FakeHandler(), reactor)
        # No handshake happens here: closing fails it, which is expected.
        proto.handshake.addErrback(lambda f: f.trap(ConnectError))
        await connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), proto)
        self.addCleanup(proto.transport.loseConnection)  # type: ignore[union-attr]
        peer, _ = listener.accept()
        self.addCleanup(peer.close)
        peer.settimeout(2.0)
        proto.write(b"PING\r\n")
        proto.flush_now()
        # The reactor cannot run while this test blocks in recv().
        self.assertEqual(peer.recv(100), b"PING\r\n")


class NotEagerTests(SynchronousTestCase):
    def test_other_transports_are_left_to_the_reactor(self) -> None:
        """A transport that is not plain TCP (TLS, WebSocket, a test double) is only
        written to, never driven."""
        proto = NatsProtocol(FakeHandler(), reactor)
        transport = StringTransport()
        proto.makeConnection(transport)
        self.assertIsNone(proto._eager_transport)
        proto.write(b"PING\r\n")
        proto.flush_now()
        self.assertEqual(transport.value(), b"PING\r\n")
