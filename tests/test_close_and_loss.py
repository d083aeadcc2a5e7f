"""After close() or drain(), no handler runs; what the server would refuse is refused
(or reported) by the client; errors say what happened.

Unit tests: the client over fake transports (``MemoryReactorClock``), driven by hand.
"""

from __future__ import annotations

import array
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionRefusedError, DNSLookupError
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txnats import _connector
from txnats.errors import (
    BadHeaderError,
    ConnectError,
    HeadersNotSupportedError,
    MaxPayloadError,
    NoServersError,
)
from txnats.protocol.events import Msg
from txnats.testing import ServerSide

from .support.clients import ClientTestMixin
from .support.wire import info_line, msg_frame


class NoHandlerAfterCloseTests(ClientTestMixin, SynchronousTestCase):
    """Class 2: once close() or drain() has completed, no handler of the client runs."""

    def slow_sub(self, subject: str = "a") -> tuple[Any, list[bytes], list[Deferred[None]]]:
        """A subscription whose handler holds each message until released."""
        calls: list[bytes] = []
        held: list[Deferred[None]] = []

        def handler(msg: Msg) -> Deferred[None]:
            calls.append(msg.data)
            d: Deferred[None] = Deferred()
            held.append(d)
            return d

        return handler, calls, held

    def fill(self, server: ServerSide, sid: int, n: int, subject: str = "a") -> None:
        server.send(b"".join(msg_frame(subject, sid, b"%d" % i) for i in range(n)))
        self.clock.advance(0)

    def close_then_release(self, client: Any, server: ServerSide, held: list[Any]) -> None:
        """Close the client (it completes), then let the busy handler call finish."""
        closed = client.close()
        self.pump(server)
        self.successResultOf(closed)
        held[0].callback(None)
        self.pump(server)

    def test_unsubscribed_with_queue_then_close(self) -> None:
        """Unsubscribed with 9 messages queued behind a busy handler, then close():
        the queued messages are never handed out, even once the handler finishes."""
        client, server = self.connected()
        handler, calls, held = self.slow_sub()
        sub = client.subscribe("a", handler)
        self.clock.advance(0)
        self.fill(server, sub.sid, 10)
        self.assertEqual(calls, [b"0"])
        sub.unsubscribe()
        self.close_then_release(client, server, held)
        self.assertEqual(calls, [b"0"])
        self.assertFalse(sub.is_active)

    def test_draining_subscription_then_close(self) -> None:
        """A subscription draining (sub.drain) when close() comes is closed by it."""
        client, server = self.connected()
        handler, calls, held = self.slow_sub()
        sub = client.subscribe("a", handler)
        self.clock.advance(0)
        self.fill(server, sub.sid, 5)
        drained = sub.drain()
        server.answer_pings()  # the drain's PING: the subscription is now ending
        self.clock.advance(0)
        self.close_then_release(client, server, held)
        self.assertEqual(calls, [b"0"])
        self.failureResultOf(drained)  # ended by the close, not drained

    def test_max_msgs_reached_then_close(self) -> None:
        """A subscription that reached max_msgs (out of the registry, messages queued)
        is closed by close() too."""
        client, server = self.connected()
        handler, calls, held = self.slow_sub()
        sub = client.subscribe("a", handler, max_msgs=3)
        self.clock.advance(0)
        self.fill(server, sub.sid, 3)
        self.assertNotIn(sub, client.subscriptions)
        self.close_then_release(client, server, held)
        self.assertEqual(calls, [b"0"])

    def test_drain_waits_for_subscriptions_already_ending(self) -> None:
        """drain() also waits for a subscription unsubscribed before it, whose queued
        messages are all handled before drain() fires; none after."""
        client, server = self.connected()
        handler, calls, held = self.slow_sub()
        sub = client.subscribe("a", handler)
        self.clock.advance(0)
        self.fill(server, sub.sid, 3)
        sub.unsubscribe()
        drained = client.drain()
        for _ in range(3):
            self.pump(server)
            self.assertNoResult(drained)
            held[-1].callback(None)
        self.pump(server)
        self.successResultOf(drained)
        self.assertEqual(calls, [b"0", b"1", b"2"])
        self.assertTrue(client.is_closed)

    def test_drain_from_inside_a_coroutine_handler(self) -> None:
        """await nc.drain() inside a handler fires at once (it must not wait for that
        handler); the messages queued behind it are still handled, then the client
        closes, and no handler runs after that."""
        client, server = self.connected(drain_timeout=30)
        calls: list[tuple[bytes, bool]] = []
        returned: list[float] = []

        async def handler(msg: Msg) -> None:
            calls.append((msg.data, client.is_closed))
            if msg.data == b"stop":
                await client.drain()
                returned.append(self.clock.seconds())

        client.subscribe("a", handler)
        self.clock.advance(0)
        server.send(b"".join(msg_frame("a", 1, d) for d in (b"1", b"stop", b"2", b"3")))
        closed = client.when_closed()
        self.pump(server)
        self.assertEqual(returned, [0.0])  # no wait for drain_timeout
        self.successResultOf(closed)
        self.assertEqual(calls, [(b"1", False), (b"stop", False), (b"2", False), (b"3", False)])
        self.assertTrue(server.lost)

    def test_sub_drain_from_its_own_handler(self) -> None:
        """sub.drain() awaited in its own handler fires at once; the subscription then
        ends once that handler returns."""
        client, server = self.connected()
        done: list[bool] = []
        subs: list[Any] = []

        async def handler(msg: Msg) -> None:
            await subs[0].drain(timeout=5)
            done.append(True)

        subs.append(client.subscribe("a", handler))
        self.clock.advance(0)
        self.fill(server, 1, 1)
        self.assertEqual(done, [True])
        self.pump(server)
        self.assertFalse(subs[0].is_active)


class HeadersNotSupportedTests(ClientTestMixin, SynchronousTestCase):
    """Class 3: a server without headers support never receives an HPUB."""

    def test_publish_with_headers_refused(self) -> None:
        """publish/request with headers to a headers: false server raise (or fail)
        HeadersNotSupportedError, send nothing, and the connection stays up."""
        client, server = self.connected(info={"headers": False})
        for call in (
            lambda: client.publish("a", b"x", headers={"K": "v"}),
            lambda: client.publish("a", b"x", reply="r", headers={"K": "v"}),
        ):
            self.assertRaises(HeadersNotSupportedError, call)
        self.failureResultOf(
            client.request("a", b"x", headers={"K": "v"}), HeadersNotSupportedError
        )
        self.clock.advance(0)
        self.assertNotIn(b"HPUB", server.transport.value())
        client.publish("a", b"plain")
        self.clock.advance(0)
        self.assertIn(b"PUB a 5\r\nplain", server.transport.value())
        self.assertTrue(client.is_connected)

    def test_publish_with_headers_accepted_when_supported(self) -> None:
        """The same publish to a server with headers goes out as HPUB."""
        client, server = self.connected()
        client.publish("a", b"x", headers={"K": "v"})
        self.clock.advance(0)
        self.assertIn(b"HPUB a ", server.transport.value())


class BufferedAgainstNewLimitsTests(ClientTestMixin, SynchronousTestCase):
    """Class 3: publishes buffered while disconnected meet the new server's limits."""

    def reconnect_with(self, **info: Any) -> tuple[Any, ServerSide, list[Exception]]:
        errors: list[Exception] = []
        client, server = self.connected(error_cb=errors.append, reconnect_jitter=0)
        server.lose()
        self.clock.advance(0)
        self.assertTrue(client.is_reconnecting)
        return client, server, errors

    def finish_reconnect(self, **info: Any) -> ServerSide:
        self.clock.advance(2.0)  # reconnect_wait
        server = self.accept(reset=False, **info)
        self.clock.advance(0)
        return server

    def test_too_large_for_new_server_reported_rest_sent(self) -> None:
        """Buffered: small, 2 KiB, small, with the new server's max_payload at 1 KiB:
        the 2 KiB one is reported (count in the error), the two others sent in order."""
        client, _, errors = self.reconnect_with()
        client.publish("a", b"first")
        client.publish("a", b"x" * 2048)
        client.publish("a", b"last")
        server = self.finish_reconnect(max_payload=1024)
        sent = server.transport.value()
        self.assertIn(b"PUB a 5\r\nfirst\r\nPUB a 4\r\nlast\r\n", sent)
        self.assertNotIn(b"x" * 100, sent)
        self.assertEqual([type(e) for e in errors], [MaxPayloadError])
        self.assertIn("1 publishes buffered", str(errors[0]))
        self.assertTrue(client.is_connected)

    def test_headers_for_server_without_them(self) -> None:
        """Buffered HPUBs are reported, not sent, to a server without headers."""
        client, _, errors = self.reconnect_with()
        client.publish("a", b"1")
        client.publish("a", b"2", headers={"K": "v"})
        client.publish("a", b"3", headers={"K": "v"})
        client.publish("a", b"4")
        server = self.finish_reconnect(headers=False)
        sent = server.transport.value()
        self.assertNotIn(b"HPUB", sent)
        self.assertIn(b"PUB a 1\r\n1\r\nPUB a 1\r\n4\r\n", sent)
        self.assertEqual([type(e) for e in errors], [HeadersNotSupportedError])
        self.assertIn("2 publishes buffered", str(errors[0]))

    def test_everything_fits_nothing_reported(self) -> None:
        """With limits that fit, every buffered publish is sent and nothing reported."""
        client, _, errors = self.reconnect_with()
        for i in range(100):
            client.publish("a", b"%d" % i, headers={"K": "v"} if i % 2 else None)
        server = self.finish_reconnect()
        sent = server.transport.value()
        self.assertEqual(sent.count(b"HPUB a "), 50)
        self.assertEqual(sent.count(b"\r\nPUB a "), 50)
        self.assertEqual(errors, [])


class ErrorsSayWhatHappenedTests(ClientTestMixin, SynchronousTestCase):
    """Class 5: a timeout is reported as a timeout naming the phase; byte counts."""

    def test_timeout_during_tcp_connect_names_it(self) -> None:
        """A dial that never completes times out as 'timed out ... (TCP connect)'."""
        client = self.make_client(connect_timeout=0.5)
        d = client.start()
        self.clock.advance(0)
        self.clock.advance(0.5)
        err = self.failureResultOf(d, NoServersError).value
        self.assertIn("timed out after 0.5s (", str(err))
        self.assertTrue(str(err).endswith("TCP connect)"), str(err))

    def test_timeout_whose_cancel_looks_like_dns_failure(self) -> None:
        """If cancelling the dial fails it with DNSLookupError (a resolver cut short),
        the timeout is still reported as a timeout, naming the name resolution."""
        dials: list[Deferred[Any]] = []

        class Resolving:
            """An endpoint still resolving: cancelled, it fails as a resolver does."""

            def connect(self, factory: object) -> Deferred[Any]:
                d: Deferred[Any] = Deferred(
                    lambda d: d.errback(DNSLookupError("Couldn't find the hostname"))
                )
                dials.append(d)
                return d

        self.patch(_connector, "server_endpoint", lambda *a, **k: Resolving())
        client = self.make_client(["nats://nats.example:4222"], connect_timeout=0.25)
        d = client.start()
        self.clock.advance(0)
        self.assertEqual(len(dials), 1)
        self.clock.advance(0.25)
        err = self.failureResultOf(d, NoServersError).value
        self.assertIn("timed out after 0.25s", str(err))
        self.assertIn("(name resolution or TCP connect)", str(err))
        self.assertNotIn("DNS lookup failed", str(err))

    def test_timeout_during_handshake_names_it(self) -> None:
        """Connected, INFO never comes: 'timed out ... (NATS handshake (waiting for INFO))'."""
        client = self.make_client(connect_timeout=1.0)
        d = client.start()
        self.clock.advance(0)
        ServerSide(self.clock)  # TCP up, silent
        self.clock.advance(1.0)
        err = self.failureResultOf(d, NoServersError).value
        self.assertIn("(NATS handshake (waiting for INFO))", str(err))

    def test_timeout_waiting_for_pong_names_it(self) -> None:
        """INFO came, CONNECT sent, no PONG: the phase says so."""
        client = self.make_client(connect_timeout=1.0)
        d = client.start()
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line())
        self.clock.advance(1.0)
        err = self.failureResultOf(d, NoServersError).value
        self.assertIn("waiting for PONG", str(err))
        self.assertIsInstance(err.__cause__, ConnectError)

    def test_refused_is_not_a_timeout(self) -> None:
        """A refused dial says refused, not timed out."""
        client = self.make_client()
        d = client.start()
        self.clock.advance(0)
        _, _, factory, _, _ = self.clock.tcpClients[-1]
        factory.clientConnectionFailed(self.clock.connectors[-1], Failure(ConnectionRefusedError()))
        self.clock.advance(0)
        err = self.failureResultOf(d, NoServersError).value
        self.assertNotIn("timed out", str(err))

    def test_out_bytes_counts_bytes_of_a_memoryview(self) -> None:
        """stats.out_bytes counts a memoryview's bytes, not its items."""
        client, server = self.connected()
        words = array.array("I", [1, 2, 3, 4])  # 4 items of 4 bytes
        client.publish("a", memoryview(words))
        client.publish("a", memoryview(words), headers={"K": "v"})
        client.publish("a", bytearray(b"abc"))
        self.assertEqual(client.stats.out_bytes, 16 + 16 + 3)
        self.clock.advance(0)
        self.assertIn(b"PUB a 16\r\n", server.transport.value())


class HeadersTypeTests(ClientTestMixin, SynchronousTestCase):
    """A headers argument that is no mapping is refused clearly, sending nothing."""

    def test_headers_not_a_mapping(self) -> None:
        """publish/request/request_many with headers=1 (or "x") raise BadHeaderError,
        not an AttributeError from deep inside, and send nothing."""
        client, server = self.connected()
        for bad in (1, "x", 1.5, [("K", "v")]):
            self.assertRaises(BadHeaderError, client.publish, "a", b"", headers=bad)
            self.failureResultOf(client.request("a", b"", headers=bad), BadHeaderError)
            self.failureResultOf(client.request_many("a", b"", headers=bad), BadHeaderError)
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"")
        self.assertEqual(client.subscriptions, [])
