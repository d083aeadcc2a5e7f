"""Testing your own code against a cluster, with pytest and txnats's plugin.

Run it from the project root::

    python -m pytest examples/test_cluster_fixtures.py

``nats_cluster`` is a ``NatsCluster`` of three nodes, formed before the test starts
and stopped after it (once per session with ``--nats-server-scope=session``).
"""

from __future__ import annotations


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


async def test_answered_across_the_cluster(nats_cluster, nats_connect):
    """The greeter on node 1, the caller on node 3: the request crosses routes."""
    service = await nats_connect(nats_cluster.urls[0])
    greeter(service)
    await service.flush()
    nats_cluster.wait_for_interest("greet.joe")  # every node knows the subscription
    caller = await nats_connect(nats_cluster.urls[2])
    reply = await caller.request("greet.joe", b"", timeout=2.0)
    assert reply.data == b"hello, joe"


async def test_greeter_moves_when_its_node_dies(nats_cluster, nats_connect):
    """The greeter's node crashes: it reconnects to another node and still answers."""
    service = await nats_connect(nats_cluster.urls, no_randomize=True, reconnect_wait=0.1)
    greeter(service)
    await service.flush()
    nats_cluster[0].kill()
    await service.flush(timeout=10.0)  # waits for the reconnection
    assert service.connected_url in nats_cluster.urls[1:]
    nats_cluster.wait_for_interest("greet.ann")
    caller = await nats_connect(nats_cluster.urls[2])
    reply = await caller.request("greet.ann", b"", timeout=2.0)
    assert reply.data == b"hello, ann"
