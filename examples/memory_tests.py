"""Testing your own code with no server process: txnats.testing.MemoryNats on a clock.

Run it from the project root with trial (or pytest)::

    python -m twisted.trial examples/memory_tests.py

``MemoryNats`` is a NATS server inside the test's process: a client dials its ``url``
(``memory:name=...``) and speaks the real protocol to it. A client that dials with a
``task.Clock`` in place of the reactor runs on that clock: nothing moves until the
test calls ``clock.advance(seconds)``, so these tests are synchronous, and the only
seconds that pass are the clock's. Each test takes a few milliseconds.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

import txnats
from txnats.testing import MemoryNats


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


class GreeterOnAClockTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.server = MemoryNats().start()
        self.addCleanup(self.server.stop)
        d = txnats.connect(self.clock, self.server.url)
        self.clock.advance(0)  # the handshake: INFO, CONNECT, PING, PONG
        self.nc = self.successResultOf(d)
        self.addCleanup(self.close)

    def close(self):
        d = self.nc.close()
        self.clock.advance(0)
        self.successResultOf(d)

    def test_greeting(self):
        """A request to greet.joe is answered "hello, joe", within one advance(0)."""
        greeter(self.nc)
        d = self.nc.request("greet.joe", b"", timeout=2.0)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"hello, joe")
        self.assertEqual(self.clock.seconds(), 0)

    def test_request_times_out_on_the_clock(self):
        """A subscriber that never answers: the request fails at 2 clock seconds."""
        self.nc.subscribe("greet.*")  # listens, answers nothing
        d = self.nc.request("greet.joe", b"", timeout=2.0)
        self.clock.advance(1.9)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.failureResultOf(d, txnats.TimeoutError)

    def test_greeter_survives_a_dropped_connection(self):
        """The server resets the connection: the client waits reconnect_wait (2 s,
        plus up to 0.1 s of jitter) since its last attempt, reconnects, subscribes
        again, and the greeter answers."""
        greeter(self.nc)
        self.clock.advance(0)
        self.assertEqual(self.server.drop_connections(), 1)
        self.clock.advance(1.9)
        self.assertEqual(self.nc.state, txnats.ClientState.RECONNECTING)
        self.clock.advance(0.3)
        self.assertEqual(self.nc.state, txnats.ClientState.CONNECTED)
        d = self.nc.request("greet.ann", b"", timeout=2.0)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"hello, ann")

    def test_what_the_server_saw(self):
        """The server keeps what clients published (and how many subscriptions each
        message reached) and every connection's subscriptions."""
        greeter(self.nc)
        self.nc.publish("audit.login", b"joe")
        self.clock.advance(0)
        [published] = self.server.messages
        self.assertEqual((published.subject, published.data, published.heard),
                         ("audit.login", b"joe", 0))
        [connection] = self.server.connections
        self.assertEqual(connection.subscriptions, [("1", "greet.*", "greeters")])

    def test_no_jetstream(self):
        """The in-memory server has no JetStream, as a nats-server run without -js."""
        d = self.nc.jetstream().account_info()
        self.clock.advance(0)
        self.failureResultOf(d, txnats.JetStreamNotEnabledError)
