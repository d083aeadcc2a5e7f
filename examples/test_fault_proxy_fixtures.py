"""Testing your own code through network faults, with pytest and txnats's plugin.

Run it from the project root::

    python -m pytest examples/test_fault_proxy_fixtures.py

``nats_fault_proxy`` is a ``FaultProxy`` listening in front of ``nats_server``:
clients that dial its ``url`` go through it, clients that dial ``nats_server.url``
do not.
"""

from __future__ import annotations

import pytest

import txnats


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


async def test_partition_times_out_then_heals(nats_server, nats_fault_proxy, nats_connect):
    """Through a partition the request times out; once it heals, the greeter
    answers again, on the same connection."""
    service = await nats_connect(nats_fault_proxy.url)
    greeter(service)
    await service.flush()
    caller = await nats_connect(nats_server.url)  # not through the proxy
    nats_fault_proxy.blackhole()
    with pytest.raises(txnats.TimeoutError):
        await caller.request("greet.joe", b"", timeout=0.5)
    nats_fault_proxy.pass_through()
    reply = await caller.request("greet.joe", b"", timeout=5.0)
    assert reply.data == b"hello, joe"
    assert nats_fault_proxy.accepted == 1


async def test_greeter_survives_a_reset(nats_server, nats_fault_proxy, nats_connect):
    """Every connection through the proxy is reset: the client reconnects through
    it and subscribes again; the proxy recorded what it sent."""
    service = await nats_connect(nats_fault_proxy.url, reconnect_wait=0.1)
    greeter(service)
    await service.flush()
    assert nats_fault_proxy.reset_all() == 1
    await service.flush(timeout=10.0)  # waits for the reconnection
    assert nats_fault_proxy.accepted == 2
    assert b"SUB greet.* greeters" in nats_fault_proxy.client_data[1]
    caller = await nats_connect(nats_server.url)
    reply = await caller.request("greet.ann", b"", timeout=2.0)
    assert reply.data == b"hello, ann"
