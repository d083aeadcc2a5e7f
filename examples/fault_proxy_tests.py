"""Testing your own code through network faults, with txnats.testing.FaultProxy.

Run it from the project root with trial (or pytest)::

    python -m twisted.trial examples/fault_proxy_tests.py

A ``FaultProxy`` listens on a free loopback port and forwards every connection to a
server; the client dials ``proxy.url``. While the connection is open the test changes
how bytes flow: ``blackhole()`` (a partition: nothing read, nothing forwarded, the
connection stays open), ``drop()``, ``delay(seconds)``, ``pass_through()``, and
``reset_all()`` (every connection reset at once).
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

import txnats
from txnats.testing import FaultProxy, NatsServer


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


class GreeterFaultTests(TestCase):
    def setUp(self):
        self.server = NatsServer().start()
        self.addCleanup(self.server.stop)
        self.proxy = FaultProxy(reactor, self.server.host, self.server.port)
        self.proxy.listen()
        self.addCleanup(self.proxy.stop)

    async def connect(self, url, **options):
        nc = await txnats.connect(reactor, url, **options)
        self.addCleanup(nc.close)
        return nc

    async def test_partition_times_out_then_heals(self):
        """Through a partition the request times out; once it heals, the greeter
        answers again, on the same connection."""
        service = await self.connect(self.proxy.url)
        greeter(service)
        await service.flush()
        caller = await self.connect(self.server.url)  # not through the proxy
        self.proxy.blackhole()
        with self.assertRaises(txnats.TimeoutError):
            await caller.request("greet.joe", b"", timeout=0.5)
        self.proxy.pass_through()
        reply = await caller.request("greet.joe", b"", timeout=5.0)
        self.assertEqual(reply.data, b"hello, joe")
        self.assertEqual(self.proxy.accepted, 1)

    async def test_greeter_survives_a_reset(self):
        """Every connection through the proxy is reset: the client reconnects
        through it and subscribes again; the proxy recorded what it sent."""
        service = await self.connect(self.proxy.url, reconnect_wait=0.1)
        greeter(service)
        await service.flush()
        self.assertEqual(self.proxy.reset_all(), 1)
        await service.flush(timeout=10.0)  # waits for the reconnection
        self.assertEqual(self.proxy.accepted, 2)
        self.assertIn(b"SUB greet.* greeters", self.proxy.client_data[1])
        caller = await self.connect(self.server.url)
        reply = await caller.request("greet.ann", b"", timeout=2.0)
        self.assertEqual(reply.data, b"hello, ann")
