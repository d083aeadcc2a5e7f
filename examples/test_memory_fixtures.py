"""Testing your own code with no server process, with pytest and txnats's plugin.

Run it from the project root::

    python -m pytest examples/test_memory_fixtures.py

``memory_nats`` is a started ``MemoryNats``: a NATS server inside the test's process
(core NATS, no JetStream), needing no nats-server binary. ``memory_nats_client`` is a
client connected to it on the reactor. A client that dials with a ``task.Clock``
instead runs on that clock: the plain (not async) tests below are synchronous, and
the only seconds that pass are the clock's.
"""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock
from twisted.python.failure import Failure

import txnats


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


def result_of(d):
    """The result of a Deferred that has fired (its failure raised)."""
    results = []
    d.addBoth(results.append)
    assert results, "the Deferred has not fired"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def nc(memory_nats, clock):
    """A client of memory_nats on the clock, closed after the test."""
    d = txnats.connect(clock, memory_nats.url)
    clock.advance(0)  # the handshake: INFO, CONNECT, PING, PONG
    client = result_of(d)
    yield client
    d = client.close()
    clock.advance(0)
    result_of(d)


def test_greeting(nc, clock):
    """A request to greet.joe is answered "hello, joe", within one advance(0)."""
    greeter(nc)
    d = nc.request("greet.joe", b"", timeout=2.0)
    clock.advance(0)
    assert result_of(d).data == b"hello, joe"
    assert clock.seconds() == 0


def test_request_times_out_on_the_clock(nc, clock):
    """A subscriber that never answers: the request fails at 2 clock seconds."""
    nc.subscribe("greet.*")  # listens, answers nothing
    d = nc.request("greet.joe", b"", timeout=2.0)
    clock.advance(1.9)
    assert not d.called
    clock.advance(0.1)
    with pytest.raises(txnats.TimeoutError):
        result_of(d)


def test_greeter_survives_a_dropped_connection(nc, clock, memory_nats):
    """The server resets the connection: the client reconnects after reconnect_wait
    (2 s, plus up to 0.1 s of jitter), subscribes again, and the greeter answers."""
    greeter(nc)
    clock.advance(0)
    assert memory_nats.drop_connections() == 1
    clock.advance(1.9)
    assert nc.state == txnats.ClientState.RECONNECTING
    clock.advance(0.3)
    assert nc.state == txnats.ClientState.CONNECTED
    d = nc.request("greet.ann", b"", timeout=2.0)
    clock.advance(0)
    assert result_of(d).data == b"hello, ann"


async def test_on_the_reactor(memory_nats_client, memory_nats):
    """memory_nats_client runs on the reactor: bytes cross in its next turn."""
    greeter(memory_nats_client)
    reply = await memory_nats_client.request("greet.bob", b"", timeout=2.0)
    assert reply.data == b"hello, bob"
    assert memory_nats.messages[0].subject == "greet.bob"
