"""The status page at ``/`` (``status.html``, shipped as package data) and the JSON it
reads from ``/v1/status``: connection state, counters, and a live tail of messages over
Server-Sent Events."""

from __future__ import annotations

import importlib.resources
from typing import Any

from twisted.web import resource, server

from txnats._version import __version__
from txnats.bridge.context import BridgeContext

__all__ = ["StatusPage", "status_dict"]


def _sum(ctx: BridgeContext, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include ``labels``."""
    total = 0.0
    for metric in ctx.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == name and all(sample.labels.get(k) == v
                                           for k, v in labels.items()):
                total += sample.value
    return total


def status_dict(ctx: BridgeContext) -> dict[str, Any]:
    """What the status page shows. Credentials appear nowhere (the client's
    ``connected_url`` shows them as ``***``)."""
    client = ctx.client
    stats = client.stats if client is not None else None
    m = "nats_bridge_messages_total"
    return {
        "version": __version__,
        "state": str(client.state) if client is not None else "STARTING",
        "ready": ctx.ready(),
        "server": client.connected_url if client is not None else None,
        "embedded": ctx.embedded_url is not None,
        "data_dir": ctx.data_dir,
        "uptime": round(ctx.reactor.seconds() - ctx.started_at, 3),
        "nats": {
            "in_msgs": stats.in_msgs, "out_msgs": stats.out_msgs,
            "in_bytes": stats.in_bytes, "out_bytes": stats.out_bytes,
            "reconnects": stats.reconnects,
        } if stats is not None else None,
        "counters": {
            "published": _sum(ctx, m, route="publish", direction="in"),
            "requests": _sum(ctx, m, route="request", direction="in"),
            "js_published": _sum(ctx, m, route="js", direction="in"),
            "streamed": _sum(ctx, m, route="subscribe", direction="out"),
            "dropped": _sum(ctx, "nats_bridge_slow_consumer_drops_total"),
            "forwarded": _sum(ctx, "nats_bridge_forwarded_total"),
            "stream_clients": _sum(ctx, "nats_bridge_stream_clients"),
        },
    }


def page_html() -> bytes:
    """The status page's HTML (with its script inline)."""
    return importlib.resources.files("txnats.bridge").joinpath("status.html").read_bytes()


class StatusPage(resource.Resource):
    """``GET /``: the status page. It holds no data itself, so it needs no token; its
    script sends the token it is given in the URL fragment (``#token=...``)."""

    isLeaf = True

    def __init__(self, ctx: BridgeContext) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._ctx = ctx
        self._html = page_html()

    def render_GET(self, request: server.Request) -> bytes:
        if request.postpath not in ([], [b""]):
            request.setResponseCode(404)
            request.setHeader(b"content-type", b"application/json")
            return b'{"error": "no such resource", "code": "not_found"}\n'
        request.route = "status_page"  # type: ignore[attr-defined]
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"cache-control", b"no-cache")
        return self._html
