"""The ``twistd nats-bridge`` service: HTTP, Server-Sent Events and WebSocket clients
reach NATS through it, built on txnats' public API.

Run it with ``twistd -n nats-bridge`` (see ``tap.py`` for the options), or inside a
Twisted program with :class:`~txnats.bridge.service.BridgeService` and a
:class:`~txnats.bridge.config.BridgeConfig`. Needs ``pip install 'txnats[bridge]'``.
"""

from txnats.bridge.config import DEFAULT_LISTEN, BridgeConfig

__all__ = ["DEFAULT_LISTEN", "BridgeConfig"]
