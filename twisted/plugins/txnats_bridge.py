"""The ``nats-bridge`` plugin for ``twistd`` and ``twist`` (no ``__init__.py`` here:
Twisted finds this file by scanning ``twisted/plugins/`` directories on ``sys.path``)."""

from twisted.application.service import ServiceMaker

nats_bridge = ServiceMaker(
    "nats-bridge",
    "txnats.bridge.tap",
    "An HTTP, Server-Sent Events and WebSocket bridge to NATS (txnats)",
    "nats-bridge",
)
