"""
Deterministic time with the in-memory server: a client on a ``task.Clock``.

Everything here is synchronous: nothing happens until the test advances the clock, and
the clock's seconds are the only ones that pass. Timeouts, reconnection back-off and
PING/PONG in both directions are driven with ``clock.advance``; no test waits.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial import unittest

import txnats
from txnats import ClientState, NoServersError, StaleConnectionError
from txnats.testing import MemoryNats
from txnats.testing._loopback import MemoryEndpoint


class Recorder(Protocol):
    """A raw client that answers nothing: it records what the server sends."""

    def __init__(self) -> None:
        self.received = b""
        self.closed = False

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.closed = True


class ClockTestCase(unittest.SynchronousTestCase):
    """A MemoryNats and a clock; clients connect on the clock."""

    server_options: dict[str, Any] = {}

    def setUp(self) -> None:
        self.clock = Clock()
        self.server = MemoryNats(**self.server_options).start()
        self.addCleanup(self.server.stop)

    def connect(self, **options: Any) -> txnats.Client:
        """A client connected on the clock (one ``advance(0)``), closed at cleanup."""
        d = txnats.connect(self.clock, self.server.url, **options)
        self.clock.advance(0)
        nc = self.successResultOf(d)
        self.addCleanup(self.close, nc)
        return nc

    def close(self, nc: txnats.Client) -> None:
        d = nc.close()
        self.clock.advance(0)
        self.successResultOf(d)

    def raw(self) -> Recorder:
        """A raw connection on the clock (it sends nothing, answers nothing)."""
        proto = Recorder()
        d = MemoryEndpoint(self.clock, self.server.name).connect(Factory.forProtocol(lambda: proto))
        self.clock.advance(0)
        self.successResultOf(d)
        return proto


class TimeoutTests(ClockTestCase):
    """Client timeouts fire when the clock says so, not before."""

    def test_everything_in_one_advance(self) -> None:
        """Connect, subscribe, publish and receive: all done by advance(0)."""
        nc = self.connect()
        sub = nc.subscribe("greet.*")
        nc.publish("greet.joe", b"hi")
        d = ensureDeferred(sub.next_msg(timeout=1))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"hi")
        self.assertEqual(self.clock.seconds(), 0)

    def test_request_timeout(self) -> None:
        """A request to a silent subscriber fails at its timeout, not a moment before."""
        nc = self.connect()
        nc.subscribe("silent")
        self.clock.advance(0)
        d = nc.request("silent", b"?", timeout=1.5)
        self.clock.advance(1.4)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.failureResultOf(d, txnats.TimeoutError)

    def test_request_answered_before_timeout(self) -> None:
        """A reply that comes before the timeout wins; the timer is gone."""
        nc = self.connect()
        nc.subscribe("echo", lambda m: m.respond(m.data))
        self.clock.advance(0)
        d = nc.request("echo", b"x", timeout=1.0)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"x")
        self.clock.advance(5)  # nothing fires late

    def test_next_msg_timeout(self) -> None:
        """next_msg(timeout=3) fails after 3 clock seconds."""
        nc = self.connect()
        sub = nc.subscribe("nothing")
        d = ensureDeferred(sub.next_msg(timeout=3))
        self.clock.advance(2.9)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.failureResultOf(d, txnats.TimeoutError)

    def test_connect_timeout_against_a_paused_server(self) -> None:
        """A frozen server sends no INFO: the dial times out after connect_timeout."""
        self.server.pause()
        d = txnats.connect(self.clock, self.server.url, connect_timeout=2.0)
        self.clock.advance(0)  # the dial starts (a Clock runs calls at its new time)
        self.clock.advance(1.9)
        self.assertNoResult(d)
        self.clock.advance(0.2)
        self.failureResultOf(d, NoServersError)
        self.server.resume()
        self.clock.advance(0)


class ReconnectTests(ClockTestCase):
    """Reconnection back-off runs on the clock."""

    def test_back_off_after_a_crash(self) -> None:
        """The server dies at t=100: one attempt at once (refused), the next after
        reconnect_wait (+ jitter); the server is back meanwhile, and the client with it,
        its subscription restored."""
        events: list[str] = []
        nc = self.connect(
            reconnect_wait=2.0, reconnect_jitter=0.1,
            disconnected_cb=lambda e: events.append("disconnected"),
            reconnected_cb=lambda: events.append("reconnected"),
        )
        sub = nc.subscribe("after")
        self.clock.advance(100)
        self.server.kill()
        self.clock.advance(0)
        self.assertEqual(events, ["disconnected"])
        self.assertEqual(nc.state, ClientState.RECONNECTING)
        self.server.start()
        self.clock.advance(1.9)
        self.assertEqual(events, ["disconnected"])  # waiting out reconnect_wait
        self.clock.advance(0.25)
        self.assertEqual(events, ["disconnected", "reconnected"])
        nc.publish("after", b"restored")
        d = ensureDeferred(sub.next_msg(timeout=1))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"restored")

    def test_gives_up_after_max_attempts(self) -> None:
        """With the server gone for good, the client closes after its attempts (here
        3, 2 s apart) and no wall-clock second passes."""
        closed: list[None] = []
        nc = self.connect(
            max_reconnect_attempts=3, reconnect_wait=2.0, reconnect_jitter=0,
            closed_cb=lambda: closed.append(None),
        )
        self.clock.advance(10)
        self.server.kill()
        for _ in range(10):
            self.clock.advance(2.0)
        self.assertEqual(nc.state, ClientState.CLOSED)
        self.assertEqual(closed, [None])


class HeartbeatTests(ClockTestCase):
    """PING/PONG both ways, on the clock."""

    server_options = {"ping_interval": 10.0, "max_pings_out": 2}

    def test_client_detects_a_partition(self) -> None:
        """Blackholed, the client's PINGs go unanswered: stale after max_pings_out."""
        errors: list[Exception] = []
        nc = self.connect(ping_interval=5.0, max_pings_out=2,
                          disconnected_cb=errors.append, reconnect_wait=60)
        self.clock.advance(30)  # PINGs answered: still connected
        self.assertEqual(nc.state, ClientState.CONNECTED)
        self.server.blackhole()
        self.clock.advance(5)
        self.clock.advance(5)
        self.assertEqual(nc.state, ClientState.CONNECTED)
        self.clock.advance(5)
        self.assertIsInstance(errors[0], StaleConnectionError)

    def test_client_answers_server_pings(self) -> None:
        """The client answers the server's PINGs: 10 minutes of them keep it connected."""
        nc = self.connect()
        for _ in range(60):
            self.clock.advance(10)
        self.assertEqual(nc.state, ClientState.CONNECTED)
        self.assertEqual(len(self.server.connections), 1)

    def test_server_pings_and_declares_stale(self) -> None:
        """A client that answers nothing: PING at 2 s, then every 10 s; at the tick after
        two unanswered ones, -ERR 'Stale Connection' and the connection closed."""
        raw = self.raw()
        self.clock.advance(1.9)
        self.assertNotIn(b"PING", raw.received)
        self.clock.advance(0.1)
        self.assertEqual(raw.received.count(b"PING\r\n"), 1)
        self.clock.advance(10)
        self.assertEqual(raw.received.count(b"PING\r\n"), 2)
        self.assertFalse(raw.closed)
        self.clock.advance(10)
        self.assertTrue(raw.received.endswith(b"PING\r\n-ERR 'Stale Connection'\r\n"))
        self.assertTrue(raw.closed)


class AuthTimeoutTests(ClockTestCase):
    """A server that requires credentials waits auth_timeout for CONNECT."""

    server_options = {"token": "t0k", "auth_timeout": 2.0}

    def test_authentication_timeout(self) -> None:
        """No CONNECT within 2 s: -ERR 'Authentication Timeout' and a close."""
        raw = self.raw()
        self.clock.advance(1.9)
        self.assertFalse(raw.closed)
        self.clock.advance(0.1)
        self.assertTrue(raw.received.endswith(b"-ERR 'Authentication Timeout'\r\n"))
        self.assertTrue(raw.closed)

    def test_token_connects(self) -> None:
        """The token as an option connects; a wrong one is refused."""
        nc = self.connect(token="t0k")
        self.assertEqual(nc.state, ClientState.CONNECTED)
        d = txnats.connect(self.clock, self.server.url, token="wrong")
        self.clock.advance(0)
        self.failureResultOf(d, txnats.AuthorizationError)
