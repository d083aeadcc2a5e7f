"""The bridge's Prometheus metrics, in a registry of its own (never the global one, so
two bridges in one process, as in the tests, count apart).

Labels carry route names, directions and status codes only: never a subject, a header
or a credential.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["BridgeMetrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0, 30.0)


class BridgeMetrics:
    """Every metric the bridge exports, all named ``nats_bridge_*``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages = Counter(
            "nats_bridge_messages", "Messages through the bridge, per route and direction "
            "(in: from HTTP to NATS; out: from NATS to HTTP, for streams counted as the "
            "bridge takes them, dropped ones included)",
            ["route", "direction"], registry=r)
        self.bytes = Counter(
            "nats_bridge_bytes", "Payload bytes through the bridge, per route and direction",
            ["route", "direction"], registry=r)
        self.latency = Histogram(
            "nats_bridge_request_duration_seconds",
            "Time from an HTTP request to its response, per route",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.reconnects = Counter(
            "nats_bridge_reconnects", "Reconnections of the bridge's NATS connection",
            registry=r)
        self.drops = Counter(
            "nats_bridge_slow_consumer_drops",
            "Messages dropped because an SSE or WebSocket client did not keep up",
            ["transport"], registry=r)
        self.responses = Counter(
            "nats_bridge_http_responses", "HTTP responses, per status code", ["code"],
            registry=r)
        self.connected = Gauge(
            "nats_bridge_connected", "1 while the bridge is connected to NATS, else 0",
            registry=r)
        self.streams = Gauge(
            "nats_bridge_stream_clients", "Open SSE and WebSocket subscriptions",
            ["transport"], registry=r)
        self.forwarded = Counter(
            "nats_bridge_forwarded", "Messages forwarded to another NATS system, per route",
            ["route"], registry=r)
        self.forwarded_bytes = Counter(
            "nats_bridge_forwarded_bytes", "Payload bytes forwarded, per forward route",
            ["route"], registry=r)

    def count(self, route: str, direction: str, size: int) -> None:
        """One message of ``size`` bytes through ``route`` in ``direction``."""
        self.messages.labels(route, direction).inc()
        self.bytes.labels(route, direction).inc(size)

    def on_forward(self, route: str, size: int) -> None:
        """What a :class:`~txnats.bridge.forward.Forwarder` reports per message."""
        self.forwarded.labels(route).inc()
        self.forwarded_bytes.labels(route).inc(size)

    def value(self, name: str, **labels: Any) -> float:
        """One sample's current value (0 if it was never set), for the status page."""
        found = self.registry.get_sample_value(name, labels or None)
        return float(found or 0.0)
