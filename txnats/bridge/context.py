"""What the HTTP side of a running bridge shares: the client (once connected), the
configuration, the metrics and the open streams."""

from __future__ import annotations

from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.logger import Logger

from txnats.bridge.config import BridgeConfig
from txnats.bridge.metrics import BridgeMetrics
from txnats.bridge.security import max_control_line
from txnats.client import Client, ClientState
from txnats.errors import ConnectionClosedError

__all__ = ["BridgeContext", "Stream"]

log = Logger()


class Stream(Protocol):
    """An open SSE or WebSocket subscription."""

    def close(self) -> None:
        """End the stream (the bridge is stopping)."""


class BridgeContext:
    """The state one bridge's resources share.

    :param reactor: the reactor (clock, endpoints).
    :param config: the bridge's configuration.
    :param metrics: its metrics.
    """

    def __init__(self, reactor: Any, config: BridgeConfig, metrics: BridgeMetrics) -> None:
        self.reactor = reactor
        self.config = config
        self.metrics = metrics
        self.client: Client | None = None
        self.streams: set[Stream] = set()
        self.kv: dict[str, Any] = {}
        self.started_at: float = reactor.seconds()
        #: The embedded server's URL and JetStream directory, when there is one.
        self.embedded_url: str | None = None
        self.data_dir: str | None = None
        self.stopping = False
        #: Fired when each HTTP request waiting for NATS has been answered (or its
        #: client left): what a stopping bridge waits for before it drains.
        self.in_flight: set[Deferred[None]] = set()

    def max_control_line(self) -> int:
        """The longest control line the NATS server takes, in bytes."""
        return max_control_line(self.client)

    def answered(self) -> Deferred[None]:
        """Fires once no HTTP request is waiting for NATS (at once if none is)."""
        waiting = list(self.in_flight)
        if not waiting:
            return succeed(None)
        return DeferredList(waiting, consumeErrors=True).addCallback(lambda _: None)

    def ready(self) -> bool:
        """Whether the bridge is connected to NATS (and not stopping)."""
        return (
            not self.stopping and self.client is not None
            and self.client.state == ClientState.CONNECTED
        )

    def nats(self) -> Client:
        """The NATS client.

        :raises ConnectionClosedError: before the bridge has connected, or while it stops.
        """
        if self.stopping:
            raise ConnectionClosedError("the bridge is stopping")
        if self.client is None:
            raise ConnectionClosedError("the bridge is not connected to NATS")
        return self.client

    def close_streams(self) -> None:
        """End every open stream."""
        for stream in list(self.streams):
            try:
                stream.close()
            except Exception:
                log.failure("nats-bridge: ending a stream failed")
        self.streams.clear()
