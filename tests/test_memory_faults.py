"""
Faults on demand with the in-memory server, seen by a real txnats client on a Clock:
dropped connections, restarts, ``-ERR``, a frozen server, a partition, lame duck mode,
a slow consumer; and what the server refuses (JetStream, unknown addresses).
"""

from __future__ import annotations

from twisted.internet.defer import ensureDeferred
from twisted.trial import unittest

import txnats
from txnats import (
    ClientState,
    ConnectionClosedError,
    JetStreamNotEnabledError,
    NoServersError,
    PermissionViolationError,
    ServerError,
)
from txnats.testing import MemoryNats

from .test_memory_clock import ClockTestCase


class DropAndRestartTests(ClockTestCase):
    """The client reconnects, and its subscriptions come back."""

    def test_drop_connections(self) -> None:
        """drop_connections(): the client sees the loss, reconnects at once (its last
        attempt was long ago), resubscribes, and messages flow."""
        events: list[object] = []
        nc = self.connect(disconnected_cb=events.append,
                          reconnected_cb=lambda: events.append("reconnected"))
        sub = nc.subscribe("s")
        self.clock.advance(10)
        self.assertEqual(self.server.drop_connections(), 1)
        self.clock.advance(0)
        self.assertIsInstance(events[0], ConnectionClosedError)
        self.assertEqual(events[1:], ["reconnected"])
        self.assertEqual([s[1] for s in self.server.connections[0].subscriptions], ["s"])
        nc.publish("s", b"again")
        d = ensureDeferred(sub.next_msg(timeout=1))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"again")
        self.assertEqual(self.server.accepted, 2)

    def test_restart(self) -> None:
        """restart(): a new server_id; the client reconnects and resubscribes."""
        nc = self.connect()
        nc.subscribe("r")
        first = self.server.server_id
        self.clock.advance(10)
        self.server.restart()
        self.clock.advance(0)
        self.assertNotEqual(self.server.server_id, first)
        self.assertEqual(nc.state, ClientState.CONNECTED)
        self.assertEqual(nc.server_info["server_id"], self.server.server_id)
        self.assertEqual([s[1] for s in self.server.connections[0].subscriptions], ["r"])

    def test_stopped_server_refuses(self) -> None:
        """A stopped server refuses new clients: NoServersError."""
        self.server.stop()
        d = txnats.connect(self.clock, self.server.url)
        self.clock.advance(0)
        self.failureResultOf(d, NoServersError)

    def test_unknown_name(self) -> None:
        """An address no server has: NoServersError naming it."""
        d = txnats.connect(self.clock, "memory:name=nobody-here")
        self.clock.advance(0)
        self.assertIn("nobody-here", str(self.failureResultOf(d, NoServersError).value))


class ErrorTests(ClockTestCase):
    """send_error(): what the client makes of an -ERR."""

    def test_survivable_error(self) -> None:
        """A permissions violation reaches error_cb; the connection stays."""
        errors: list[Exception] = []
        nc = self.connect(error_cb=errors.append)
        self.server.send_error('Permissions Violation for Publish to "secret"')
        self.clock.advance(0)
        self.assertIsInstance(errors[0], PermissionViolationError)
        self.assertEqual(nc.state, ClientState.CONNECTED)
        self.assertEqual(len(self.server.connections), 1)

    def test_fatal_error(self) -> None:
        """Any other -ERR ends the connection (server and client close it); the client
        reconnects."""
        lost: list[Exception] = []
        nc = self.connect(disconnected_cb=lost.append)
        self.clock.advance(10)
        self.assertEqual(self.server.send_error("Something Broke"), 1)
        self.clock.advance(0)
        self.assertIsInstance(lost[0], ServerError)
        self.assertIn("Something Broke", str(lost[0]))
        self.assertEqual(nc.state, ClientState.CONNECTED)  # reconnected


class PauseTests(ClockTestCase):
    """pause() freezes the server; blackhole() freezes the connections."""

    def test_pause_holds_and_resume_handles(self) -> None:
        """While paused, a flush waits and a message stays undelivered; resume() handles
        both, in order."""
        nc = self.connect()
        sub = nc.subscribe("p")
        self.clock.advance(0)
        self.server.pause()
        nc.publish("p", b"1")
        nc.publish("p", b"2")
        flushed = nc.flush(timeout=30)
        self.clock.advance(5)
        self.assertNoResult(flushed)
        self.assertEqual(sub.pending_msgs, 0)
        self.server.resume()
        self.clock.advance(0)
        self.successResultOf(flushed)
        self.assertEqual(sub.pending_msgs, 2)

    def test_blackhole_and_pass_through(self) -> None:
        """A partition holds the flush; pass_through() delivers what was held."""
        nc = self.connect()
        self.server.blackhole()
        flushed = nc.flush(timeout=30)
        self.clock.advance(5)
        self.assertNoResult(flushed)
        self.server.pass_through()
        self.clock.advance(0)
        self.successResultOf(flushed)

    def test_lame_duck(self) -> None:
        """lame_duck(): the client's lame_duck_cb runs; new connections are refused."""
        seen: list[None] = []
        self.connect(lame_duck_cb=lambda: seen.append(None))
        self.server.lame_duck()
        self.clock.advance(0)
        self.assertEqual(seen, [None])
        d = txnats.connect(self.clock, self.server.url)
        self.clock.advance(0)
        self.failureResultOf(d, NoServersError)


class LimitsTests(ClockTestCase):
    """What the server refuses, seen from the client."""

    server_options = {"max_pending": 64 * 1024}

    def test_jetstream_is_not_there(self) -> None:
        """JetStream calls fail with JetStreamNotEnabledError: nobody answers $JS.API."""
        nc = self.connect()
        self.assertFalse(nc.server_info["jetstream"])
        d = nc.jetstream().account_info()
        self.clock.advance(0)
        self.failureResultOf(d, JetStreamNotEnabledError)

    def test_slow_consumer(self) -> None:
        """A subscriber that stops reading (back-pressure, its handler stuck) while more
        than max_pending bytes wait for it: the server closes its connection."""
        lost: list[Exception] = []
        nc = self.connect(disconnected_cb=lost.append, reconnect_wait=60)
        from twisted.internet.defer import Deferred

        stuck: Deferred[None] = Deferred()
        nc.subscribe("flood", lambda m: stuck, backpressure=True, pending_msgs_limit=1)
        self.clock.advance(0)
        pub = self.connect()
        for _ in range(200):
            pub.publish("flood", b"x" * 1024)
        self.clock.advance(0)
        self.assertEqual(len(lost), 1)
        self.assertEqual(len(self.server.connections), 1)  # the publisher's
        stuck.callback(None)
        self.clock.advance(0)


class BookkeepingTests(unittest.SynchronousTestCase):
    """What the server records for a test to assert on."""

    def test_connections_and_messages(self) -> None:
        """connections show CONNECT options and subscriptions; messages what was
        published, with how many subscriptions heard it."""
        from twisted.internet.task import Clock

        clock = Clock()
        server = MemoryNats().start()
        d = txnats.connect(clock, server.url, name="recorder")
        clock.advance(0)
        nc = self.successResultOf(d)
        nc.subscribe("heard", queue="workers")
        nc.publish("heard", b"1", headers={"K": "v"})
        nc.publish("unheard", b"2", reply="r")
        clock.advance(0)
        [conn] = server.connections
        self.assertEqual(conn.name, "recorder")
        self.assertEqual(conn.connect_options["lang"], "python-txnats")
        self.assertEqual(conn.subscriptions, [("1", "heard", "workers")])
        self.assertEqual(
            [(m.subject, m.reply, m.data, m.heard) for m in server.messages],
            [("heard", None, b"1", 1), ("unheard", "r", b"2", 0)],
        )
        self.assertTrue(server.messages[0].headers.startswith(b"NATS/1.0"))
        closed = nc.close()
        idle = server.when_idle()
        clock.advance(0)
        self.successResultOf(closed)
        self.successResultOf(idle)
        self.assertEqual(server.connections, [])
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_names(self) -> None:
        """Names are unique by default; a name that cannot be in an address is refused."""
        self.assertNotEqual(MemoryNats().url, MemoryNats().url)
        self.assertEqual(MemoryNats(name="svc-1").url, "memory:name=svc-1")
        for bad in ("", "a:b", "a b", "a=b"):
            self.assertRaises(ValueError, MemoryNats, name=bad)
        self.assertRaises(ValueError, MemoryNats, user="u")
