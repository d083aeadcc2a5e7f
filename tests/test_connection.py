"""Unit tests for :class:`txnats.connection.NatsProtocol` and :func:`classify_error`.

No sockets, no sleeps: the protocol talks to a ``CountingTransport`` and a
``FakeHandler`` (:mod:`txnats.testing.fakes`), and time moves only with ``clock.advance``.
"""

from __future__ import annotations

import json
from random import Random
from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txnats import Client, Options
from txnats.connection import NatsProtocol
from txnats.errors import (
    AuthorizationError,
    ConnectError,
    ConnectionClosedError,
    PermissionViolationError,
    ProtocolError,
    ServerError,
    StaleConnectionError,
)
from txnats.protocol.errors import classify_error
from txnats.testing import CountingTransport, FakeHandler

from .support.wire import INFO, info_line


class ProtocolTestMixin:
    def make(
        self, **kwargs: Any
    ) -> tuple[NatsProtocol, CountingTransport, FakeHandler, MemoryReactorClock]:
        clock = MemoryReactorClock()
        handler = FakeHandler()
        proto = NatsProtocol(handler, clock, **kwargs)
        transport = CountingTransport()
        proto.makeConnection(transport)
        return proto, transport, handler, clock

    def establish(
        self, **kwargs: Any
    ) -> tuple[NatsProtocol, CountingTransport, FakeHandler, MemoryReactorClock]:
        proto, transport, handler, clock = self.make(**kwargs)
        proto.dataReceived(info_line())
        proto.dataReceived(b"PONG\r\n")
        handler.run_scheduled()
        assert proto.ready and proto.handshake.called
        transport.reset()
        return proto, transport, handler, clock


class HandshakeTests(ProtocolTestMixin, SynchronousTestCase):
    def test_registers_as_streaming_producer(self) -> None:
        """connectionMade registers the protocol as a push (streaming) producer."""
        proto, transport, _, _ = self.make()
        self.assertIs(transport.producer, proto)
        self.assertTrue(transport.streaming)

    def test_nothing_written_before_info(self) -> None:
        """Until INFO arrives the protocol writes nothing, whatever the clock does."""
        proto, transport, handler, clock = self.make()
        clock.advance(0)
        clock.advance(1000)
        self.assertEqual(transport.writes, [])
        self.assertEqual(handler.infos, [])
        self.assertNoResult(proto.handshake)

    def test_info_answered_with_connect_and_ping_in_one_write(self) -> None:
        """INFO is answered by exactly CONNECT {json} + PING, in a single write."""
        proto, transport, handler, clock = self.make()
        handler.options = {"verbose": False, "name": "x", "protocol": 1}
        proto.dataReceived(info_line())
        self.assertEqual(len(transport.writes), 1)
        data = transport.writes[0]
        self.assertTrue(data.startswith(b"CONNECT {"))
        self.assertTrue(data.endswith(b"}\r\nPING\r\n"))
        self.assertEqual(data.count(b"\r\n"), 2)
        body = data[len(b"CONNECT ") : -len(b"\r\nPING\r\n")]
        sent = json.loads(body)
        # The protocol itself says whether the connection is TLS.
        self.assertIs(sent.pop("tls_required"), False)
        self.assertEqual(sent, handler.options)
        self.assertEqual(handler.infos, [INFO])
        clock.advance(0)
        self.assertEqual(len(transport.writes), 1)

    def test_handshake_fires_only_on_pong(self) -> None:
        """The handshake Deferred waits for PONG; +OK before it is ignored."""
        proto, transport, handler, clock = self.make()
        proto.dataReceived(info_line())
        self.assertNoResult(proto.handshake)
        proto.dataReceived(b"+OK\r\n")
        handler.run_scheduled()
        clock.advance(0)
        self.assertNoResult(proto.handshake)
        self.assertFalse(proto.ready)
        self.assertFalse(transport.disconnecting)
        proto.dataReceived(b"PONG\r\n")
        self.assertTrue(proto.ready)
        # The callbacks reach user code: they run in a scheduled turn, not in dataReceived.
        self.assertNoResult(proto.handshake)
        handler.run_scheduled()
        self.assertIs(self.successResultOf(proto.handshake), proto)
        self.assertEqual(proto.info, INFO)

    def test_handshake_in_one_chunk_byte_by_byte(self) -> None:
        """INFO and PONG fed one byte at a time still complete the handshake."""
        proto, transport, handler, _ = self.make()
        for b in info_line() + b"+OK\r\nPONG\r\n":
            proto.dataReceived(bytes([b]))
        handler.run_scheduled()
        self.assertIs(self.successResultOf(proto.handshake), proto)
        self.assertEqual(len(transport.writes), 1)

    def test_authorization_violation_fails_handshake(self) -> None:
        """-ERR 'Authorization Violation' in the handshake aborts with AuthorizationError."""
        proto, transport, handler, _ = self.make()
        proto.dataReceived(info_line(auth_required=True))
        proto.dataReceived(b"-ERR 'Authorization Violation'\r\n")
        self.assertTrue(transport.disconnected, "transport not aborted")
        self.assertNoResult(proto.handshake)
        proto.connectionLost(Failure(ConnectionDone()))
        f = self.failureResultOf(proto.handshake, AuthorizationError)
        self.assertEqual(f.value.server_message, "Authorization Violation")
        self.assertEqual(handler.lost, [])
        self.assertEqual(handler.errors, [])

    def test_other_err_in_handshake_is_connect_error(self) -> None:
        """A non-auth -ERR during the handshake fails it with a ConnectError."""
        proto, transport, _, _ = self.make()
        proto.dataReceived(info_line())
        proto.dataReceived(b"-ERR 'maximum connections exceeded'\r\n")
        self.assertTrue(transport.disconnected)
        proto.connectionLost(Failure(ConnectionDone()))
        f = self.failureResultOf(proto.handshake, ConnectError)
        self.assertNotIsInstance(f.value, AuthorizationError)
        self.assertIn("maximum connections exceeded", str(f.value))

    def test_pong_before_info_is_protocol_error(self) -> None:
        """A PONG as the first frame aborts the connection as a protocol error."""
        proto, transport, _handler, _ = self.make()
        proto.dataReceived(b"PONG\r\n")
        self.assertTrue(transport.disconnected)
        self.assertIsInstance(proto._close_reason, ProtocolError)
        self.assertEqual(transport.writes, [])
        proto.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(proto.handshake, ConnectError)

    def test_non_info_first_frames_are_protocol_errors(self) -> None:
        """MSG, PING or +OK as the first frame abort; nothing reaches the handler."""
        for first in (b"MSG foo 1 2\r\nhi\r\n", b"PING\r\n", b"+OK\r\n"):
            proto, transport, handler, clock = self.make()
            proto.dataReceived(first + info_line())
            clock.advance(0)
            self.assertTrue(transport.disconnected, first)
            self.assertIsInstance(proto._close_reason, ProtocolError, first)
            self.assertEqual(transport.writes, [], first)
            self.assertEqual(handler.msgs, [], first)
            self.assertEqual(handler.infos, [], first)
            proto.connectionLost(Failure(ConnectionDone()))
            self.failureResultOf(proto.handshake, ConnectError)

    def test_garbage_first_frame_aborts(self) -> None:
        """Unparseable bytes abort the connection and fail the handshake; no exception."""
        proto, transport, handler, _ = self.make()
        proto.dataReceived(b"\x00\xffHELLO THERE\r\n")
        self.assertTrue(transport.disconnected)
        self.assertIsInstance(proto._close_reason, ProtocolError)
        proto.dataReceived(info_line())  # ignored after the fault
        self.assertEqual(handler.infos, [])
        proto.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(proto.handshake, ConnectError)

    def test_invalid_info_aborts(self) -> None:
        """An INFO whose JSON is not an object or has wrong types is a protocol error."""
        for bad in (b"INFO [1,2]\r\n", b'INFO {"max_payload":"big"}\r\n', b"INFO {nope\r\n"):
            proto, transport, handler, _ = self.make()
            proto.dataReceived(bad)
            self.assertTrue(transport.disconnected, bad)
            self.assertIsInstance(proto._close_reason, ProtocolError, bad)
            self.assertEqual(handler.infos, [], bad)

    def test_connect_options_raising_never_escapes(self) -> None:
        """A handler (user credential callback) raising in connect_options aborts; no raise."""
        proto, transport, handler, _ = self.make()

        def broken(info: dict[str, Any]) -> dict[str, Any]:
            raise ValueError("token service down")

        handler.connect_options = broken  # type: ignore[method-assign]
        proto.dataReceived(info_line())
        self.assertTrue(transport.disconnected)
        self.assertEqual(transport.writes, [])
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)
        proto.connectionLost(Failure(ConnectionDone()))
        f = self.failureResultOf(proto.handshake, ConnectError)
        self.assertIn("token service down", str(f.value))

    def test_connect_options_nats_error_aborts(self) -> None:
        """A NatsError from connect_options fails the handshake with that error."""
        proto, transport, handler, _ = self.make()

        def refuse(info: dict[str, Any]) -> dict[str, Any]:
            raise ConnectError("server does not support no_echo")

        handler.connect_options = refuse  # type: ignore[method-assign]
        proto.dataReceived(info_line())
        self.assertTrue(transport.disconnected)
        proto.connectionLost(Failure(ConnectionDone()))
        f = self.failureResultOf(proto.handshake, ConnectError)
        self.assertIn("no_echo", str(f.value))

    def test_handshake_cancel_aborts(self) -> None:
        """Cancelling the handshake Deferred aborts the transport."""
        proto, transport, _, _ = self.make()
        proto.dataReceived(info_line())
        proto.handshake.cancel()
        self.assertTrue(transport.disconnected)
        self.failureResultOf(proto.handshake, CancelledError)
        proto.connectionLost(Failure(ConnectionDone()))
        # Nothing more is written or dispatched.
        self.assertEqual(len(transport.writes), 1)

    def test_lost_during_handshake_fails_it(self) -> None:
        """A connection lost before PONG fails the handshake with ConnectError."""
        proto, _, handler, _ = self.make()
        proto.dataReceived(info_line())
        proto.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(proto.handshake, ConnectError)
        self.assertEqual(handler.lost, [])

    def test_lost_between_pong_and_scheduled_turn(self) -> None:
        """A loss after PONG but before the handshake turn fails it (no late success)."""
        proto, _, handler, _ = self.make()
        proto.dataReceived(info_line() + b"PONG\r\n")
        proto.connectionLost(Failure(ConnectionDone()))
        handler.run_scheduled()
        self.failureResultOf(proto.handshake, ConnectError)

    def test_later_info_goes_to_handler(self) -> None:
        """INFO after the handshake is reported to info_received, not re-CONNECTed."""
        proto, transport, handler, clock = self.establish()
        proto.dataReceived(info_line(connect_urls=["10.0.0.1:4222"], max_payload=2048))
        clock.advance(0)
        self.assertEqual(transport.writes, [])
        self.assertEqual(len(handler.updates), 1)
        self.assertEqual(handler.updates[0]["connect_urls"], ["10.0.0.1:4222"])
        self.assertEqual(proto.info["max_payload"], 2048)


class ConnectOptionsTests(SynchronousTestCase):
    """The CONNECT JSON, as the client builds it."""

    def options(
        self,
        servers: str = "nats://127.0.0.1:4222",
        info: dict[str, Any] | None = None,
        **opts: Any,
    ) -> dict[str, Any]:
        client = Client(reactor=MemoryReactorClock(), servers=servers, options=Options(**opts))
        connector = client._connector
        server = connector.pool.servers[0]
        return connector.connect_options(dict(INFO if info is None else info), server)

    def test_defaults(self) -> None:
        """By default: protocol 1, echo on, verbose/pedantic off, no credentials."""
        o = self.options()
        self.assertEqual(o["protocol"], 1)
        self.assertIs(o["echo"], True)
        self.assertIs(o["verbose"], False)
        self.assertIs(o["pedantic"], False)
        self.assertEqual(o["lang"], "python-txnats")
        for key in ("user", "pass", "auth_token", "name"):
            self.assertNotIn(key, o)

    def test_headers_follow_info(self) -> None:
        """headers and no_responders are on exactly when INFO says headers: true."""
        self.assertIs(self.options(info={**INFO, "headers": True})["headers"], True)
        self.assertIs(self.options(info={**INFO, "headers": True})["no_responders"], True)
        off = self.options(info={**INFO, "headers": False})
        self.assertIs(off["headers"], False)
        self.assertIs(off["no_responders"], False)
        missing = {k: v for k, v in INFO.items() if k != "headers"}
        self.assertIs(self.options(info=missing)["headers"], False)

    def test_no_echo_and_name(self) -> None:
        """no_echo sends echo: false; name is passed through."""
        o = self.options(no_echo=True, name="svc-1")
        self.assertIs(o["echo"], False)
        self.assertEqual(o["name"], "svc-1")

    def test_no_echo_needs_proto_1(self) -> None:
        """no_echo against a server with proto 0 refuses to connect."""
        self.assertRaises(ConnectError, self.options, info={**INFO, "proto": 0}, no_echo=True)

    def test_user_password_from_options(self) -> None:
        """user/password options become user/pass."""
        o = self.options(user="alice", password="s3cret")
        self.assertEqual((o["user"], o["pass"]), ("alice", "s3cret"))
        self.assertNotIn("auth_token", o)

    def test_token_from_options(self) -> None:
        """A token option becomes auth_token."""
        o = self.options(token="tok")
        self.assertEqual(o["auth_token"], "tok")
        self.assertNotIn("user", o)

    def test_user_password_from_url(self) -> None:
        """user:pass@ in the URL (percent-decoded) wins over the options."""
        o = self.options("nats://bob:p%40ss@127.0.0.1:4222", user="alice", password="x")
        self.assertEqual((o["user"], o["pass"]), ("bob", "p@ss"))

    def test_token_from_url(self) -> None:
        """A user without password in the URL is a token."""
        o = self.options("nats://t0ken@127.0.0.1:4222")
        self.assertEqual(o["auth_token"], "t0ken")
        self.assertNotIn("user", o)

    def test_connect_frame_through_protocol(self) -> None:
        """The protocol sends the client's options verbatim as CONNECT JSON."""
        clock = MemoryReactorClock()
        client = Client(clock, "nats://u:p@127.0.0.1:4222", Options(name="n", no_echo=True))
        proto = client._connector.make_protocol(client._connector.pool.servers[0])
        transport = CountingTransport()
        proto.makeConnection(transport)
        proto.dataReceived(info_line(headers=False))
        (data,) = transport.writes
        sent = json.loads(data[len(b"CONNECT ") : data.index(b"\r\n")])
        self.assertEqual(sent["user"], "u")
        self.assertEqual(sent["pass"], "p")
        self.assertEqual(sent["name"], "n")
        self.assertIs(sent["echo"], False)
        self.assertIs(sent["headers"], False)
        self.assertEqual(sent["protocol"], 1)


class PingTests(ProtocolTestMixin, SynchronousTestCase):
    def test_server_ping_answered(self) -> None:
        """A server PING is answered with PONG at the end of the turn."""
        proto, transport, _, clock = self.establish()
        proto.dataReceived(b"PING\r\n")
        self.assertEqual(transport.writes, [])
        clock.advance(0)
        self.assertEqual(transport.writes, [b"PONG\r\n"])

    def check_stale(self, p: float, n: int, start: float = 0.0) -> None:
        eps = 1 / 64
        proto, transport, handler, clock = self.make(ping_interval=p, max_pings_out=n)
        clock.advance(start)
        proto.dataReceived(info_line() + b"PONG\r\n")
        handler.run_scheduled()
        transport.reset()
        label = f"P={p} N={n}"
        for k in range(1, n + 1):
            clock.advance(p - eps)
            self.assertEqual(transport.value().count(b"PING\r\n"), k - 1, label)
            clock.advance(eps)
            self.assertEqual(transport.value().count(b"PING\r\n"), k, label)
            self.assertFalse(transport.disconnected, label)
        clock.advance(p - eps)
        self.assertFalse(transport.disconnected, f"{label}: aborted early")
        clock.advance(eps)
        self.assertEqual(clock.seconds(), start + (n + 1) * p, label)
        self.assertTrue(transport.disconnected, f"{label}: not aborted at (N+1)*P")
        self.assertEqual(transport.value(), b"PING\r\n" * n, label)
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(len(handler.lost), 1, label)
        self.assertIsInstance(handler.lost[0][1], StaleConnectionError, label)
        clock.advance(10 * p)
        self.assertEqual(transport.value(), b"PING\r\n" * n, label)

    def test_stale_at_exactly_n_plus_one_intervals(self) -> None:
        """PINGs go out at P, 2P, ..., NP; the connection is stale at exactly (N+1)P."""
        for p, n in [(120.0, 2), (1.0, 1), (0.5, 0), (3.25, 5)]:
            self.check_stale(p, n)

    def test_stale_random_parameters(self) -> None:
        """The stale schedule holds for random (P, N) and handshake times (seeded)."""
        rng = Random(20240611)
        for _ in range(25):
            p = rng.randint(1, 960) / 8
            n = rng.randint(0, 6)
            start = rng.randint(0, 1000) / 4
            self.check_stale(p, n, start)

    def test_pong_resets_count(self) -> None:
        """Any PONG resets the outstanding count, postponing the stale verdict."""
        p, n = 10.0, 2
        proto, transport, _handler, clock = self.establish(ping_interval=p, max_pings_out=n)
        clock.advance(p)
        clock.advance(p)
        self.assertEqual(proto.pings_out, 2)
        proto.dataReceived(b"PONG\r\n")
        self.assertEqual(proto.pings_out, 0)
        # Ticks at 3P and 4P send PINGs; 5P is the (N+1)th unanswered tick.
        clock.advance(p)
        clock.advance(p)
        clock.advance(p - 1)
        self.assertFalse(transport.disconnected)
        self.assertEqual(transport.value().count(b"PING\r\n"), 4)
        clock.advance(1)
        self.assertTrue(transport.disconnected)
        self.assertIsInstance(proto._close_reason, StaleConnectionError)

    def test_regular_pongs_keep_connection_alive(self) -> None:
        """A server that answers every PING is never declared stale."""
        proto, transport, _, clock = self.establish(ping_interval=5.0, max_pings_out=1)
        for _ in range(50):
            clock.advance(5.0)
            proto.dataReceived(b"PONG\r\n")
        self.assertFalse(transport.disconnected)
        self.assertEqual(transport.value().count(b"PING\r\n"), 50)

    def test_ping_interval_zero_disables(self) -> None:
        """ping_interval 0 sends no PINGs and never goes stale."""
        _proto, transport, _, clock = self.establish(ping_interval=0, max_pings_out=0)
        self.assertEqual(clock.getDelayedCalls(), [])
        clock.advance(10_000)
        self.assertEqual(transport.writes, [])
        self.assertFalse(transport.disconnected)

    def test_ping_deferreds_fire_in_order_on_pongs(self) -> None:
        """ping() Deferreds fire, in a scheduled turn, on their own PONGs, in order."""
        proto, transport, handler, clock = self.establish()
        d1, d2 = proto.ping(), proto.ping()
        clock.advance(0)
        self.assertEqual(transport.writes, [b"PING\r\nPING\r\n"])
        proto.dataReceived(b"PONG\r\n")
        self.assertNoResult(d1)
        handler.run_scheduled()
        self.successResultOf(d1)
        self.assertNoResult(d2)
        proto.dataReceived(b"PONG\r\n")
        handler.run_scheduled()
        self.successResultOf(d2)

    def test_timer_ping_and_user_ping_share_the_queue(self) -> None:
        """A PONG answers the oldest PING, whether it came from the timer or ping()."""
        proto, _, handler, clock = self.establish(ping_interval=1.0, max_pings_out=5)
        clock.advance(1.0)  # timer PING
        d = proto.ping()
        proto.dataReceived(b"PONG\r\n")  # answers the timer's PING
        handler.run_scheduled()
        self.assertNoResult(d)
        proto.dataReceived(b"PONG\r\n")
        handler.run_scheduled()
        self.successResultOf(d)


class OutboundTests(ProtocolTestMixin, SynchronousTestCase):
    def test_writes_coalesced_into_one_per_turn(self) -> None:
        """1000 write() calls in one turn become exactly one transport write, in order."""
        proto, transport, handler, clock = self.establish()
        frames = [b"PUB s.%d %d\r\n%s\r\n" % (i, len(b"%d" % i), b"%d" % i) for i in range(1000)]
        for f in frames:
            proto.write(f)
        self.assertEqual(transport.writes, [])
        self.assertEqual(proto.outbox.nbytes, sum(map(len, frames)))
        clock.advance(0)
        self.assertEqual(transport.writes, [b"".join(frames)])
        self.assertEqual(proto.outbox.nbytes, 0)
        self.assertEqual(handler.drained, 1)
        clock.advance(0)
        self.assertEqual(len(transport.writes), 1)

    def test_write_many_coalesced(self) -> None:
        """write_many and write in one turn share one transport write."""
        proto, transport, _, clock = self.establish()
        proto.write(b"A\r\n")
        proto.write_many([b"B\r\n", b"C\r\n"], 6)
        proto.write(b"D\r\n")
        clock.advance(0)
        self.assertEqual(transport.writes, [b"A\r\nB\r\nC\r\nD\r\n"])

    def test_one_turn_per_batch(self) -> None:
        """Many writes schedule a single callLater(0)."""
        proto, _, _, clock = self.establish(ping_interval=0)
        for _ in range(100):
            proto.write(b"X\r\n")
        self.assertEqual(len(clock.getDelayedCalls()), 1)

    def test_paused_producer_writes_nothing(self) -> None:
        """After pauseProducing nothing is written; resumeProducing sends all, in order."""
        proto, transport, _, clock = self.establish()
        proto.write(b"1\r\n")  # a flush turn is already scheduled
        proto.pauseProducing()
        self.assertTrue(proto.write_paused)
        proto.write(b"2\r\n")
        clock.advance(0)
        proto.write(b"3\r\n")
        clock.advance(0)
        self.assertEqual(transport.writes, [])
        proto.resumeProducing()
        self.assertFalse(proto.write_paused)
        self.assertEqual(transport.writes, [])
        clock.advance(0)
        self.assertEqual(transport.writes, [b"1\r\n2\r\n3\r\n"])

    def test_paused_before_any_write(self) -> None:
        """Writes made while paused schedule no turn and go out after resume."""
        proto, transport, _, clock = self.establish(ping_interval=0)
        proto.pauseProducing()
        for i in range(10):
            proto.write(b"%d\r\n" % i)
        self.assertEqual(clock.getDelayedCalls(), [])
        proto.resumeProducing()
        clock.advance(0)
        self.assertEqual(transport.writes, [b"".join(b"%d\r\n" % i for i in range(10))])

    def test_stop_producing_stops_writes(self) -> None:
        """stopProducing stops writes like a pause."""
        proto, transport, _, clock = self.establish()
        proto.stopProducing()
        proto.write(b"X\r\n")
        clock.advance(0)
        self.assertEqual(transport.writes, [])

    def test_pause_and_resume_reading(self) -> None:
        """pause_reading/resume_reading pause and resume the transport once each."""
        proto, transport, _, _ = self.establish()
        self.assertEqual(transport.producerState, "producing")
        proto.pause_reading()
        proto.pause_reading()
        self.assertTrue(proto.reading_paused)
        self.assertEqual(transport.producerState, "paused")
        proto.resume_reading()
        proto.resume_reading()
        self.assertFalse(proto.reading_paused)
        self.assertEqual(transport.producerState, "producing")

    def test_close_flushes_then_loses_connection(self) -> None:
        """close() hands queued bytes to the transport, then loseConnection (not abort)."""
        proto, transport, _, _ = self.establish()
        proto.write(b"PUB a 0\r\n\r\n")
        proto.close()
        self.assertEqual(transport.writes, [b"PUB a 0\r\n\r\n"])
        self.assertTrue(transport.disconnecting)
        self.assertFalse(transport.disconnected)

    def test_nothing_written_after_loss(self) -> None:
        """After connectionLost, queued and new writes are dropped, timers cancelled."""
        proto, transport, _, clock = self.establish()
        proto.write(b"X\r\n")
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(clock.getDelayedCalls(), [])
        proto.flush_now()
        self.assertEqual(transport.writes, [])
        self.assertEqual(proto.outbox.nbytes, 0)


class ClassifyErrorTests(SynchronousTestCase):
    SURVIVING = [
        "Permissions Violation for Subscription to foo.bar",
        'Permissions Violation for Subscription to "foo.bar"',
        'Permissions Violation for Subscription to "foo.bar" using queue "q"',
        "Permissions Violation for Publish to foo.bar",
        'Permissions Violation for Publish to "foo.bar"',
        "Invalid Subject",
        "Maximum Subscriptions Exceeded",
    ]
    FATAL_AUTH = [
        "Authorization Violation",
        "Authorization Timeout",
        "User Authentication Expired",
        "User Authentication Revoked",
        "Account Authentication Expired",
    ]
    FATAL_OTHER = [
        "Stale Connection",
        "Unknown Protocol Operation",
        "Maximum Payload Violation",
        "Slow Consumer",
        "Parser Error",
        "Secure Connection - TLS Required",
        "maximum connections exceeded",
    ]

    def test_permission_violations(self) -> None:
        """Permissions violations survive and carry operation and (unquoted) subject."""
        expected = [
            ("subscribe", "foo.bar"),
            ("subscribe", "foo.bar"),
            ("subscribe", "foo.bar"),
            ("publish", "foo.bar"),
            ("publish", "foo.bar"),
        ]
        for message, (op, subject) in zip(self.SURVIVING, expected, strict=False):
            err, survives = classify_error(message)
            self.assertTrue(survives, message)
            self.assertIsInstance(err, PermissionViolationError, message)
            assert isinstance(err, PermissionViolationError)
            self.assertEqual((err.operation, err.subject), (op, subject), message)
            self.assertEqual(err.server_message, message)

    def test_surviving_errors(self) -> None:
        """Invalid Subject and maximum subscriptions exceeded leave the connection up."""
        for message in self.SURVIVING:
            err, survives = classify_error(message)
            self.assertTrue(survives, message)
            self.assertIsInstance(err, ServerError, message)
            self.assertFalse(isinstance(err, AuthorizationError), message)

    def test_auth_errors_are_fatal(self) -> None:
        """Authorization/authentication errors close the connection as AuthorizationError."""
        for message in self.FATAL_AUTH:
            err, survives = classify_error(message)
            self.assertFalse(survives, message)
            self.assertIsInstance(err, AuthorizationError, message)

    def test_other_fatal_errors(self) -> None:
        """Stale, unknown op, max payload, slow consumer, parser, TLS required: close."""
        for message in self.FATAL_OTHER:
            err, survives = classify_error(message)
            self.assertFalse(survives, message)
            self.assertIsInstance(err, ServerError, message)
            self.assertFalse(isinstance(err, AuthorizationError), message)
            self.assertFalse(isinstance(err, PermissionViolationError), message)
            self.assertEqual(err.server_message, message)


class ErrAfterHandshakeTests(ProtocolTestMixin, SynchronousTestCase):
    def test_surviving_err_goes_to_handler(self) -> None:
        """A surviving -ERR is reported to server_error and the transport stays open."""
        for message in ClassifyErrorTests.SURVIVING:
            proto, transport, handler, _ = self.establish()
            proto.dataReceived(b"-ERR '" + message.encode() + b"'\r\nMSG a 1 0\r\n\r\n")
            self.assertFalse(transport.disconnecting, message)
            self.assertEqual(len(handler.errors), 1, message)
            self.assertEqual(handler.errors[0].server_message, message)
            self.assertEqual(len(handler.msgs), 1, message)

    def test_fatal_err_aborts(self) -> None:
        """A fatal -ERR aborts the transport, reports nothing and stops dispatch."""
        for message in ClassifyErrorTests.FATAL_AUTH + ClassifyErrorTests.FATAL_OTHER:
            proto, transport, handler, _ = self.establish()
            proto.dataReceived(b"-ERR '" + message.encode() + b"'\r\nMSG a 1 0\r\n\r\n")
            self.assertTrue(transport.disconnected, message)
            self.assertEqual(handler.errors, [], message)
            self.assertEqual(handler.msgs, [], message)
            proto.connectionLost(Failure(ConnectionDone()))
            self.assertEqual(len(handler.lost), 1, message)
            reason = handler.lost[0][1]
            if message == "Stale Connection":
                self.assertIsInstance(reason, StaleConnectionError)
            elif message in ClassifyErrorTests.FATAL_AUTH:
                self.assertIsInstance(reason, AuthorizationError)
            else:
                self.assertIsInstance(reason, ServerError)


class InboundTests(ProtocolTestMixin, SynchronousTestCase):
    def test_messages_dispatched_in_order(self) -> None:
        """MSG and HMSG frames reach msgs_received in order, with their fields."""
        proto, _, handler, _ = self.establish()
        proto.dataReceived(
            b"MSG a 1 2\r\nhi\r\nMSG b 2 r.1 0\r\n\r\n"
            b"HMSG c 3 20 22\r\nNATS/1.0\r\nX-A: 1\r\n\r\nyo\r\n"
        )
        self.assertEqual([m.subject for m in handler.msgs], ["a", "b", "c"])
        self.assertEqual(handler.msgs[0].data, b"hi")
        self.assertEqual(handler.msgs[1].reply, "r.1")
        self.assertEqual(handler.msgs[2].headers["X-A"], "1")
        self.assertEqual(handler.msgs[2].data, b"yo")

    def test_garbage_never_raises(self) -> None:
        """Garbage after the handshake aborts the connection; dataReceived never raises."""
        rng = Random(7)
        for _ in range(50):
            proto, transport, handler, _ = self.establish()
            junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + b"\r\n"
            if junk[:1].isalpha():
                junk = b"!" + junk
            proto.dataReceived(junk)
            proto.dataReceived(b"MSG a 1 0\r\n\r\n")
            self.assertTrue(transport.disconnected, junk)
            self.assertEqual(handler.msgs, [], junk)

    def test_events_before_fault_in_chunk_are_dispatched(self) -> None:
        """Frames completed before a protocol error in the same chunk still reach the handler."""
        proto, transport, handler, _ = self.establish()
        proto.dataReceived(b"MSG a 1 0\r\n\r\nBOGUS\r\nMSG b 1 0\r\n\r\n")
        self.assertEqual([m.subject for m in handler.msgs], ["a"])
        self.assertTrue(transport.disconnected)

    def test_oversized_payload_aborts(self) -> None:
        """A MSG announcing more than max_payload (plus slack) is a protocol error."""
        proto, transport, handler, _ = self.make()
        proto.dataReceived(info_line(max_payload=1024) + b"PONG\r\n")
        handler.run_scheduled()
        proto.dataReceived(b"MSG a 1 %d\r\n" % (10 * 1024 * 1024))
        self.assertTrue(transport.disconnected)
        self.assertIsInstance(proto._close_reason, ProtocolError)

    def test_nothing_dispatched_after_lose_connection(self) -> None:
        """Once the transport is disconnecting, no more events are dispatched."""
        proto, transport, handler, clock = self.establish()
        transport.loseConnection()
        proto.dataReceived(b"MSG a 1 0\r\n\r\nPING\r\n-ERR 'Invalid Subject'\r\n")
        proto.dataReceived(info_line(ldm=True))
        clock.advance(0)
        self.assertEqual(handler.msgs, [])
        self.assertEqual(handler.errors, [])
        self.assertEqual(handler.updates, [])
        self.assertEqual(transport.writes, [])

    def test_nothing_dispatched_after_close(self) -> None:
        """After close() no further frames of the same or later chunks are dispatched."""
        proto, _transport, handler, _ = self.establish()
        proto.close()
        proto.dataReceived(b"MSG a 1 0\r\n\r\n")
        self.assertEqual(handler.msgs, [])

    def test_data_after_connection_lost_ignored(self) -> None:
        """dataReceived after connectionLost is ignored without raising."""
        proto, _transport, handler, _ = self.establish()
        proto.abort(ProtocolError("test"))
        proto.connectionLost(Failure(ConnectionDone()))
        proto.dataReceived(b"MSG a 1 0\r\n\r\n")
        self.assertEqual(handler.msgs, [])


class ConnectionLostTests(ProtocolTestMixin, SynchronousTestCase):
    def test_pending_pings_fail_via_schedule(self) -> None:
        """connectionLost fails every pending ping() with ConnectionClosedError, scheduled."""
        proto, _, handler, clock = self.establish(ping_interval=1.0, max_pings_out=10)
        pings = [proto.ping() for _ in range(3)]
        clock.advance(1.0)  # a timer PING is pending too
        proto.connectionLost(Failure(ConnectionDone()))
        for d in pings:
            self.assertNoResult(d)
        handler.run_scheduled()
        for d in pings:
            self.failureResultOf(d, ConnectionClosedError)

    def test_connection_lost_reported_once(self) -> None:
        """connection_lost is called exactly once, with this protocol and a NatsError."""
        proto, _, handler, clock = self.establish()
        proto.connectionLost(Failure(ConnectionDone()))
        handler.run_scheduled()
        clock.advance(1000)
        self.assertEqual(len(handler.lost), 1)
        lost_proto, reason = handler.lost[0]
        self.assertIs(lost_proto, proto)
        self.assertIsInstance(reason, ConnectionClosedError)
        self.assertTrue(proto.lost)
        self.assertFalse(proto.ready)

    def test_abort_reason_is_reported(self) -> None:
        """The reason given to abort() is the one connection_lost reports."""
        proto, transport, handler, _ = self.establish()
        proto.abort(StaleConnectionError("x"))
        proto.abort(ProtocolError("later reasons do not replace the first"))
        self.assertTrue(transport.disconnected)
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertIsInstance(handler.lost[0][1], StaleConnectionError)

    def test_ping_after_loss_never_written(self) -> None:
        """Timers are cancelled on loss: no PING is attempted afterwards."""
        proto, transport, _, clock = self.establish(ping_interval=1.0)
        proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(clock.getDelayedCalls(), [])
        clock.advance(100)
        self.assertEqual(transport.writes, [])
