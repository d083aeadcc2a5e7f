"""Testing your own code against a real nats-server, with txnats.testing.

Run it from the project root with trial (or pytest)::

    python -m twisted.trial examples/greeter_tests.py

``NatsServer().start()`` runs a ``nats-server`` on a free loopback port and blocks
until it is ready; ``stop()`` ends it and removes its files. Neither touches the
reactor, so both fit in ``setUp``. ``kill()`` ends it as a crash would and a later
``start()`` brings it back on the same port.
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from txnats import connect
from txnats.testing import NatsServer


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


class GreeterTests(TestCase):
    def setUp(self):
        self.server = NatsServer().start()
        self.addCleanup(self.server.stop)

    async def test_greeting(self):
        """A request to greet.joe is answered "hello, joe"."""
        nc = await connect(reactor, self.server.url)
        self.addCleanup(nc.close)
        greeter(nc)
        reply = await nc.request("greet.joe", b"", timeout=2.0)
        self.assertEqual(reply.data, b"hello, joe")

    async def test_greeter_survives_a_restart(self):
        """After the server crashed and came back, the greeter still answers."""
        nc = await connect(reactor, self.server.url, reconnect_wait=0.1)
        self.addCleanup(nc.close)
        greeter(nc)
        await nc.flush()
        self.server.kill()
        self.server.start()
        await nc.flush(timeout=10.0)  # waits for the reconnection
        reply = await nc.request("greet.ann", b"", timeout=2.0)
        self.assertEqual(reply.data, b"hello, ann")
