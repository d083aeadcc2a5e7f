"""Testing your own code against a cluster of real nats-servers, with txnats.testing.

Run it from the project root with trial (or pytest)::

    python -m twisted.trial examples/cluster_tests.py

``NatsCluster(3).start()`` runs three ``nats-server`` processes on free loopback
ports, joined by routes, and blocks until the cluster has formed; ``stop()`` ends
them all and removes their files. Each node (``cluster[0]``...) is a ``NatsServer``:
it can be killed, paused and started again.
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from txnats import connect
from txnats.testing import NatsCluster


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


class GreeterClusterTests(TestCase):
    def setUp(self):
        self.cluster = NatsCluster(3).start()
        self.addCleanup(self.cluster.stop)

    async def test_answered_across_the_cluster(self):
        """The greeter on node 1, the caller on node 3: the request crosses routes."""
        service = await connect(reactor, self.cluster.urls[0])
        self.addCleanup(service.close)
        greeter(service)
        await service.flush()
        self.cluster.wait_for_interest("greet.joe")  # every node knows the subscription
        caller = await connect(reactor, self.cluster.urls[2])
        self.addCleanup(caller.close)
        reply = await caller.request("greet.joe", b"", timeout=2.0)
        self.assertEqual(reply.data, b"hello, joe")

    async def test_greeter_moves_when_its_node_dies(self):
        """The node the greeter is connected to crashes: the client reconnects to
        another node, subscribes again there, and still answers."""
        service = await connect(reactor, self.cluster.urls, no_randomize=True,
                                reconnect_wait=0.1)
        self.addCleanup(service.close)
        greeter(service)
        await service.flush()
        self.assertEqual(service.connected_url, self.cluster.urls[0])
        self.cluster[0].kill()
        await service.flush(timeout=10.0)  # waits for the reconnection
        self.assertIn(service.connected_url, self.cluster.urls[1:])
        self.cluster.wait_for_interest("greet.ann")
        caller = await connect(reactor, self.cluster.urls[2])
        self.addCleanup(caller.close)
        reply = await caller.request("greet.ann", b"", timeout=2.0)
        self.assertEqual(reply.data, b"hello, ann")
