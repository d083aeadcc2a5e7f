"""A :class:`txnats.Client` on a ``MemoryReactorClock``, played against fake servers.

The client dials through endpoint strings (``tcp:host=...:port=...``), which end in
``reactor.connectTCP``; ``MemoryReactorClock`` records each dial and a
:class:`txnats.testing.ServerSide` answers it. Time moves only with ``clock.advance``.
"""

from __future__ import annotations

import re
from random import Random
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from txnats import Client, ClientState, Options
from txnats.testing import ServerSide

from .wire import info_line

__all__ = ["CLIENT_STATES", "ClientTestMixin", "endpoint"]

#: Every state :meth:`ClientTestMixin.setup_state` can put a client in.
CLIENT_STATES = [
    "CONNECTING-scheduled",
    "CONNECTING-dialing",
    "CONNECTING-handshake",
    "CONNECTED",
    "RECONNECTING-waiting",
    "RECONNECTING-dialing",
    "RECONNECTING-handshake",
    "CLOSED",
]


def endpoint(port: int = 4222) -> str:
    """The endpoint string of a loopback server on ``port``."""
    return f"tcp:host=127.0.0.1:port={port}"


def no_responders(server: ServerSide, answered: set[bytes]) -> None:
    """Answer each request the client wrote to ``server`` (a PUB whose reply subject
    falls under one of its wildcard subscriptions) with nats-server's no-responders
    status, once (``answered`` holds the reply subjects already answered)."""
    wire = server.transport.value()
    inboxes = re.findall(rb"SUB (\S+)\.\* (\d+)\r\n", wire)
    for reply in re.findall(rb"H?PUB \S+ (\S+) (?:\d+ )?\d+\r\n", wire):
        for prefix, sid in inboxes:
            if reply.startswith(prefix + b".") and reply not in answered:
                answered.add(reply)
                block = b"NATS/1.0 503\r\n\r\n"
                server.send(b"HMSG %s %s %d %d\r\n%s\r\n" % (
                    reply, sid, len(block), len(block), block))


class ClientTestMixin:
    """Mix in before a trial ``SynchronousTestCase``: make clients, answer their dials."""

    clock: MemoryReactorClock
    client: Client

    def make_client(self, servers: list[str] | None = None, **opts: Any) -> Client:
        """A client on a fresh ``MemoryReactorClock`` (servers in order, unless told)."""
        self.clock = MemoryReactorClock()
        opts.setdefault("no_randomize", True)
        self.client = Client(self.clock, servers or [endpoint()], Options(**opts), rng=Random(1))
        return self.client

    def accept(self, index: int = -1, reset: bool = True, **info: Any) -> ServerSide:
        """Complete the pending dial and the handshake; return the server side."""
        server = ServerSide(self.clock, index)
        server.send(info_line(**info))
        server.send(b"PONG\r\n")
        self.clock.advance(0)
        if reset:
            server.reset()
        return server

    def connected(self, **opts: Any) -> tuple[Client, ServerSide]:
        """A connected client (``info``: fields of the server's INFO) and its server."""
        info = opts.pop("info", {})
        client = self.make_client(**opts)
        d = client.start()
        self.clock.advance(0)
        server = self.accept(**info)
        assert self.successResultOf(d) is client  # type: ignore[attr-defined]
        return client, server

    def fail_dials(self, refuse: bool = True) -> list[tuple[float, int]]:
        """Fail every new dial until the client stops trying; return (time, port) of each.

        Each dial is refused at once, or with ``refuse=False`` never answered (only the
        client's connect timeout ends it).
        """
        clock = self.clock
        attempts: list[tuple[float, int]] = []
        seen = len(clock.tcpClients)
        for _ in range(10_000):
            while seen < len(clock.tcpClients):
                _, port, factory, _, _ = clock.tcpClients[seen]
                attempts.append((clock.seconds(), port))
                if refuse:
                    factory.clientConnectionFailed(
                        clock.connectors[seen], Failure(ConnectionRefusedError())
                    )
                seen += 1
            calls = clock.getDelayedCalls()
            if not calls:
                break
            clock.advance(max(0.0, min(c.getTime() for c in calls) - clock.seconds()))
        return attempts

    def pump(self, server: ServerSide | None, turns: int = 20) -> None:
        """Play a cooperative server: answer PINGs, answer requests as nats-server does
        when nobody subscribes (a 503 status), close when the client closes."""
        answered: set[bytes] = set()
        for _ in range(turns):
            self.clock.advance(0)
            if server is None or server.lost:
                continue
            server.answer_pings()
            no_responders(server, answered)
            if server.transport.disconnecting:
                server.lose()

    def setup_state(self, state: str) -> tuple[ServerSide | None, Deferred[Client] | None]:
        """A client (``self.client``) in ``state``, one of :data:`CLIENT_STATES`.

        Its ``closed_cb`` calls are counted in ``self.closed_calls`` (from 0 in every
        state). Returns the server side of its connection or handshake, if any, and its
        first connect's Deferred while that has not fired.
        """
        self.closed_calls: list[None] = []
        client = self.make_client(
            closed_cb=lambda: self.closed_calls.append(None),
            reconnect_wait=1.0,
            reconnect_jitter=0.0,
        )
        first: Deferred[Client] | None = client.start()
        server: ServerSide | None = None
        if state == "CONNECTING-scheduled":
            pass
        elif state == "CONNECTING-dialing":
            self.clock.advance(0)
        elif state == "CONNECTING-handshake":
            self.clock.advance(0)
            server = ServerSide(self.clock)
            server.send(info_line())
        else:
            self.clock.advance(0)
            server = self.accept()
            assert first is not None
            self.successResultOf(first)  # type: ignore[attr-defined]
            first = None
            client.subscribe("a", lambda m: None)
            client.request("svc", b"", timeout=30.0).addErrback(lambda f: None)
            self.clock.advance(0)
            if state.startswith("RECONNECTING"):
                server.lose()
                self.assertEqual(client.state, ClientState.RECONNECTING)  # type: ignore[attr-defined]
                server = None
                if state != "RECONNECTING-waiting":
                    self.clock.advance(1.0)
                    self.assertEqual(len(self.clock.tcpClients), 2)  # type: ignore[attr-defined]
                if state == "RECONNECTING-handshake":
                    server = ServerSide(self.clock)
                    server.send(info_line())
            elif state == "CLOSED":
                client.close()
                self.pump(server)
                self.assertEqual(client.state, ClientState.CLOSED)  # type: ignore[attr-defined]
                self.closed_calls.clear()
        return server, first
