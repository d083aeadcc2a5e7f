"""Unit tests for :class:`txnats.Client` with no sockets, no sleeps and no server.

The client dials through endpoint strings (``tcp:host=...:port=...``), which end in
``reactor.connectTCP``; ``MemoryReactorClock`` records each dial, and the test plays the
server with :class:`txnats.testing.ServerSide` (through :mod:`tests.support.clients`).
Time moves only with ``clock.advance``.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Generator
from random import Random
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, fail, inlineCallbacks
from twisted.internet.error import ConnectionRefusedError
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txnats import Client, ClientState
from txnats._lameduck import LINGER
from txnats.errors import (
    AuthorizationError,
    BadSubjectError,
    ConnectError,
    ConnectionClosedError,
    ConnectionDrainingError,
    FlushTimeoutError,
    HandlerError,
    InvalidArgumentError,
    MaxPayloadError,
    NoRespondersError,
    NoServersError,
    OutboundBufferFullError,
    PermissionViolationError,
    SlowConsumerError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.protocol.events import Msg
from txnats.protocol.headers import encode_headers
from txnats.testing import ServerSide

from .support.clients import CLIENT_STATES, ClientTestMixin, endpoint
from .support.wire import info_line, msg_frame


class ConnectTests(ClientTestMixin, SynchronousTestCase):
    def test_connect_fires_after_handshake(self) -> None:
        """The connect Deferred fires only after INFO, CONNECT+PING and PONG."""
        client = self.make_client()
        d = client.start()
        self.assertEqual(self.clock.tcpClients, [])
        self.clock.advance(0)
        self.assertEqual(len(self.clock.tcpClients), 1)
        self.assertEqual(client.state, ClientState.CONNECTING)
        server = ServerSide(self.clock)
        self.assertNoResult(d)
        server.send(info_line())
        self.assertNoResult(d)
        self.assertTrue(server.transport.value().startswith(b"CONNECT "))
        server.send(b"+OK\r\n")
        self.clock.advance(0)
        self.assertNoResult(d)
        server.send(b"PONG\r\n")
        # Fired once the read carrying the PONG was dispatched: no reactor turn needed.
        self.assertIs(self.successResultOf(d), client)
        self.assertEqual(client.state, ClientState.CONNECTED)
        self.assertTrue(client.is_connected)
        self.assertEqual(client.connected_url, endpoint())
        self.assertEqual(client.server_info["server_id"], "NTEST")

    def test_first_connect_auth_error(self) -> None:
        """A server refusing the credentials fails connect with AuthorizationError."""
        client = self.make_client(user="u", password="bad")
        d = client.start()
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line(auth_required=True))
        server.send(b"-ERR 'Authorization Violation'\r\n")
        self.assertTrue(server.transport.disconnected)
        server.lose()
        self.clock.advance(0)
        self.failureResultOf(d, AuthorizationError)
        self.assertTrue(client.is_closed)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_failing_token_handler(self) -> None:
        """A token_handler that raises fails the attempt (logged), never dataReceived."""

        def token_handler() -> str:
            raise ValueError("token service down")

        client = self.make_client(token_handler=token_handler)
        d = client.start()
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line(auth_required=True))
        self.assertTrue(server.transport.disconnected)
        self.assertEqual(server.transport.value(), b"")
        server.lose()
        self.clock.advance(0)
        f = self.failureResultOf(d, ConnectError)
        self.assertIn("token service down", str(f.value))
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)
        self.assertTrue(client.is_closed)

    def test_first_connect_tries_each_server_once(self) -> None:
        """Without retry_on_failed_connect each server is dialled once, then NoServersError."""
        client = self.make_client([endpoint(4222), endpoint(4223), endpoint(4224)])
        d = client.start()
        attempts = self.fail_dials()
        self.assertEqual([p for _, p in attempts], [4222, 4223, 4224])
        self.assertEqual({t for t, _ in attempts}, {0.0})
        self.failureResultOf(d, NoServersError)
        self.assertTrue(client.is_closed)

    def test_connect_timeout(self) -> None:
        """A dial that never completes is cancelled after connect_timeout."""
        client = self.make_client(connect_timeout=1.5)
        d = client.start()
        self.clock.advance(0)
        connector = self.clock.connectors[0]
        self.clock.advance(1.5 - 1 / 64)
        self.assertNoResult(d)
        self.assertFalse(connector.stoppedConnecting)
        self.clock.advance(1 / 64)
        self.assertTrue(connector.stoppedConnecting)
        f = self.failureResultOf(d, NoServersError)
        self.assertIn("timed out after 1.5s", str(f.value))
        self.clock.advance(0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_handshake_timeout(self) -> None:
        """A server that never sends PONG is aborted after connect_timeout."""
        client = self.make_client(connect_timeout=2.0)
        d = client.start()
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line())
        self.clock.advance(2.0)
        self.assertTrue(server.transport.disconnected)
        server.lose()
        self.failureResultOf(d, ConnectError)
        self.clock.advance(0)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class ReconnectScheduleTests(ClientTestMixin, SynchronousTestCase):
    def test_attempts_and_waits(self) -> None:
        """3 dead servers x max_reconnect_attempts=5 -> 15 dials, reconnect_wait honoured;
        with retry_on_failed_connect the start fires at once, and giving up closes the
        client and reports NoServersError to error_cb."""
        closed: list[None] = []
        errors: list[Exception] = []
        wait, jitter = 2.0, 0.25
        client = self.make_client(
            [endpoint(4222), endpoint(4223), endpoint(4224)],
            max_reconnect_attempts=5,
            retry_on_failed_connect=True,
            reconnect_wait=wait,
            reconnect_jitter=jitter,
            closed_cb=lambda: closed.append(None),
            error_cb=errors.append,
        )
        d = client.start()
        self.assertIs(self.successResultOf(d), client)
        self.assertEqual(client.state, ClientState.CONNECTING)
        attempts = self.fail_dials()
        self.assertEqual(len(attempts), 15)
        self.assertEqual(Counter(p for _, p in attempts), {4222: 5, 4223: 5, 4224: 5})
        self.assertEqual([p for _, p in attempts[:6]], [4222, 4223, 4224] * 2)
        for port in (4222, 4223, 4224):
            times = [t for t, p in attempts if p == port]
            for a, b in itertools.pairwise(times):
                self.assertGreaterEqual(b - a, wait)
                self.assertLessEqual(b - a, wait + jitter + 1e-9)
        self.clock.advance(0)
        self.assertEqual([type(e) for e in errors], [NoServersError])
        self.assertIsInstance(errors[0], ConnectError)
        self.assertIs(client.last_error, errors[0].__cause__)
        self.assertEqual(client.state, ClientState.CLOSED)
        self.assertEqual(closed, [None])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_random_pools(self) -> None:
        """For seeded random pool sizes and attempt limits, dials = servers x attempts."""
        rng = Random(99)
        for _ in range(10):
            n = rng.randint(1, 5)
            k = rng.randint(1, 6)
            client = self.make_client(
                [endpoint(5000 + i) for i in range(n)],
                max_reconnect_attempts=k,
                retry_on_failed_connect=True,
                reconnect_wait=rng.randint(1, 16) / 4,
            )
            d = client.start()
            self.assertIs(self.successResultOf(d), client)  # (retry_on_failed_connect)
            attempts = self.fail_dials()
            self.assertEqual(len(attempts), n * k, (n, k))
            self.assertTrue(client.is_closed)
            self.assertIsInstance(client.last_error, ConnectError)


class PublishTests(ClientTestMixin, SynchronousTestCase):
    def test_publish_coalesced(self) -> None:
        """Publishes write nothing during the turn, then exactly one write."""
        client, server = self.connected()
        for i in range(5):
            client.publish("a.b", b"%d" % i)
        self.assertEqual(server.transport.writes, [])
        self.clock.advance(0)
        self.assertEqual(
            server.transport.writes, [b"".join(b"PUB a.b 1\r\n%d\r\n" % i for i in range(5))]
        )
        self.assertEqual(client.stats.out_msgs, 5)

    def test_publish_with_reply_and_headers(self) -> None:
        """Reply subjects and headers are encoded as PUB ... reply / HPUB."""
        client, server = self.connected()
        client.publish("a", b"x", reply="r.1")
        self.assertEqual(client.pending_bytes, len(b"PUB a r.1 1\r\nx\r\n"))  # counted exactly
        client.publish("b", b"yz", headers={"K": "v"})
        self.clock.advance(0)
        hdr = encode_headers({"K": "v"})
        self.assertEqual(
            server.transport.value(),
            b"PUB a r.1 1\r\nx\r\n" + b"HPUB b %d %d\r\n%syz\r\n" % (len(hdr), len(hdr) + 2, hdr),
        )

    def test_bad_subjects_raise_and_write_nothing(self) -> None:
        """publish() with a bad subject or reply raises BadSubjectError and queues nothing."""
        client, server = self.connected()
        for subject in ["", "a b", "a..b", "a.*", "a.>", ".a", "a.", "a\r\nPUB x 0", ["a"], 7]:
            self.assertRaises(BadSubjectError, client.publish, subject, b"x")
        self.assertRaises(BadSubjectError, client.publish, "ok", b"x", reply="bad reply")
        self.assertEqual(client.pending_bytes, 0)
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"")
        self.assertEqual(client.stats.out_msgs, 0)

    def test_max_payload_counts_headers(self) -> None:
        """MaxPayloadError above INFO max_payload, headers included; the limit itself is ok."""
        client, server = self.connected(info={"max_payload": 64})
        self.assertEqual(client.max_payload, 64)
        self.assertRaises(MaxPayloadError, client.publish, "a", b"x" * 65)
        headers = {"X-Long": "y" * 10}
        hlen = len(encode_headers(headers))
        self.assertRaises(MaxPayloadError, client.publish, "a", b"x" * (65 - hlen), None, headers)
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"")
        client.publish("a", b"x" * 64)
        client.publish("a", b"x" * (64 - hlen), headers=headers)
        self.clock.advance(0)
        self.assertEqual(len(server.transport.writes), 1)
        self.assertEqual(server.transport.value().count(b"PUB a 64\r\n"), 1)

    def test_frames_on_both_sides_of_the_prebuilt_sizes(self) -> None:
        """Payloads below and above the prebuilt size lines encode the same way, and a
        max_payload lowered by a later INFO holds on every path."""
        client, server = self.connected()
        sizes = [0, 1, 1023, 1024, 1025, 5000]
        for n in sizes:
            client.publish("a.b", b"y" * n)
        self.clock.advance(0)
        expected = b"".join(b"PUB a.b %d\r\n%s\r\n" % (n, b"y" * n) for n in sizes)
        self.assertEqual(server.transport.value(), expected)
        server.transport.clear()
        server.send(info_line(max_payload=16))
        self.assertEqual(client.max_payload, 16)
        self.assertRaises(MaxPayloadError, client.publish, "a.b", b"y" * 17)
        client.publish("a.b", b"y" * 16)
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"PUB a.b 16\r\n" + b"y" * 16 + b"\r\n")

    def test_outbound_buffer_bound(self) -> None:
        """OutboundBufferFullError past max_outbound_bytes; that call writes nothing."""
        client, server = self.connected(max_outbound_bytes=100)
        frame = b"PUB s 50\r\n" + b"z" * 50 + b"\r\n"
        client.publish("s", b"z" * 50)
        self.assertEqual(client.pending_bytes, len(frame))
        self.assertRaises(OutboundBufferFullError, client.publish, "s", b"q" * 50)
        self.assertEqual(client.pending_bytes, len(frame))
        self.clock.advance(0)
        self.assertEqual(server.transport.writes, [frame])
        # The buffer was handed to the socket: there is room again.
        self.successResultOf(client.wait_for_room())
        client.publish("s", b"z" * 50)
        self.clock.advance(0)
        self.assertEqual(server.transport.writes, [frame, frame])

    def test_publish_after_close_raises(self) -> None:
        """publish() on a closed client raises ConnectionClosedError."""
        client, server = self.connected()
        client.close()
        server.lose()
        self.assertRaises(ConnectionClosedError, client.publish, "a", b"")
        self.clock.advance(0)

    def test_publish_while_connecting_is_sent_after_connect(self) -> None:
        """Publishes made before the first connect go out after the handshake, in order."""
        client = self.make_client()
        d = client.start()
        client.publish("early", b"1")
        client.subscribe("s")
        client.publish("early", b"2")
        self.clock.advance(0)
        server = self.accept(reset=False)
        self.successResultOf(d)
        self.clock.advance(0)
        handshake, frames = server.transport.writes
        self.assertTrue(handshake.startswith(b"CONNECT "))
        self.assertEqual(frames, b"SUB s 1\r\nPUB early 1\r\n1\r\nPUB early 1\r\n2\r\n")


class SubscriptionTests(ClientTestMixin, SynchronousTestCase):
    def test_sub_written(self) -> None:
        """subscribe() writes SUB (with the queue group) at the end of the turn."""
        client, server = self.connected()
        client.subscribe("a.*", lambda m: None)
        client.subscribe("b.>", lambda m: None, queue="workers")
        self.clock.advance(0)
        self.assertEqual(server.transport.writes, [b"SUB a.* 1\r\nSUB b.> workers 2\r\n"])

    def test_bad_subscribe_subject(self) -> None:
        """subscribe() with an invalid subject or queue raises and writes nothing."""
        client, server = self.connected()
        self.assertRaises(BadSubjectError, client.subscribe, "a..b")
        self.assertRaises(BadSubjectError, client.subscribe, "a.>.b")
        self.assertRaises(BadSubjectError, client.subscribe, "a", None, queue="bad queue")
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"")
        self.assertEqual(client.subscriptions, [])

    def test_delivery_after_the_whole_read(self) -> None:
        """Handlers run once the whole read is parsed and dispatched, never midway, and
        without waiting for another reactor turn."""
        client, server = self.connected()
        got: list[Msg] = []
        seen_received: list[int] = []
        sub = client.subscribe("a", lambda m: (got.append(m), seen_received.append(sub.received)))
        self.clock.advance(0)
        calls = len(self.clock.getDelayedCalls())
        server.send(msg_frame("a", 1, b"hello", reply="r") + msg_frame("a", 1, b"again"))
        self.assertEqual([(m.subject, m.data, m.reply) for m in got],
                         [("a", b"hello", "r"), ("a", b"again", None)])
        self.assertEqual(seen_received, [2, 2])  # both were parsed before the first ran
        self.assertEqual(len(self.clock.getDelayedCalls()), calls)  # no timed call
        self.assertEqual(client.stats.in_msgs, 2)

    def test_a_batch_in_one_read(self) -> None:
        """1000 messages in one read are delivered in order by the end of the read, with
        no timed call."""
        client, server = self.connected()
        got: list[bytes] = []
        client.subscribe("a", lambda m: got.append(m.data))
        self.clock.advance(0)
        before = len(self.clock.getDelayedCalls())
        server.send(b"".join(msg_frame("a", 1, b"%d" % i) for i in range(1000)))
        self.assertEqual(got, [b"%d" % i for i in range(1000)])
        self.assertEqual(len(self.clock.getDelayedCalls()), before)

    def test_many_subscriptions_in_one_read(self) -> None:
        """Messages for several subscriptions in one read are all handled at its end,
        with no timed call."""
        client, server = self.connected()
        got: list[str] = []
        for subject in ("a", "b", "c"):
            client.subscribe(subject, lambda m: got.append(m.subject))
        self.clock.advance(0)
        before = len(self.clock.getDelayedCalls())
        server.send(b"".join(msg_frame(s, i + 1) for _ in range(100) for i, s in enumerate("abc")))
        self.assertEqual(len(self.clock.getDelayedCalls()), before)
        self.assertEqual(Counter(got), {"a": 100, "b": 100, "c": 100})

    def test_subscription_drain(self) -> None:
        """sub.drain(): UNSUB + PING; messages before the PONG are handled, then it ends."""
        client, server = self.connected()
        got: list[bytes] = []
        sub = client.subscribe("a", lambda m: got.append(m.data))
        self.clock.advance(0)
        server.reset()
        d = sub.drain()
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"UNSUB 1\r\nPING\r\n")
        server.send(msg_frame("a", 1, b"late") + b"PONG\r\n")
        self.assertEqual(got, [b"late"])
        self.successResultOf(d)
        self.assertFalse(sub.is_active)
        self.assertEqual(client.subscriptions, [])
        self.assertTrue(client.is_connected)

    def test_handler_exception_does_not_stop_delivery(self) -> None:
        """A handler that raises is logged and reported; later messages still arrive."""
        errors: list[Exception] = []
        client, server = self.connected(error_cb=errors.append)
        got: list[bytes] = []

        def handler(m: Msg) -> None:
            if m.data == b"bad":
                raise ZeroDivisionError("boom")
            got.append(m.data)

        client.subscribe("a", handler)
        self.clock.advance(0)
        server.send(msg_frame("a", 1, b"1") + msg_frame("a", 1, b"bad") + msg_frame("a", 1, b"2"))
        self.clock.advance(0)
        self.clock.advance(0)
        self.assertEqual(got, [b"1", b"2"])
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertEqual([type(e) for e in errors], [HandlerError])
        # The subscription is named, and the handler's own exception is the cause.
        self.assertEqual((errors[0].subject, errors[0].sid), ("a", 1))  # type: ignore[attr-defined]
        self.assertIsInstance(errors[0].__cause__, ZeroDivisionError)
        self.assertIn("'a' (sid 1)", str(errors[0]))
        self.assertTrue(client.is_connected)

    def test_pending_limits_drop_count_report_once(self) -> None:
        """Past the pending limit messages are dropped, counted, and reported once per episode."""
        errors: list[Exception] = []
        client, server = self.connected(error_cb=errors.append)
        got: list[bytes] = []
        sub = client.subscribe("a", lambda m: got.append(m.data), pending_msgs_limit=10)
        self.clock.advance(0)
        server.send(b"".join(msg_frame("a", 1, b"%d" % i) for i in range(25)))
        self.assertEqual(sub.dropped, 15)
        self.assertEqual(got, [b"%d" % i for i in range(10)])
        self.assertEqual(len(errors), 1)
        err = errors[0]
        self.assertIsInstance(err, SlowConsumerError)
        assert isinstance(err, SlowConsumerError)
        self.assertEqual((err.sid, err.subject), (1, "a"))
        # A second episode is reported again.
        server.send(b"".join(msg_frame("a", 1, b"x") for i in range(25)))
        self.clock.advance(0)
        self.assertEqual(sub.dropped, 30)
        self.assertEqual(sub.received, 50)
        self.assertEqual(len(errors), 2)

    def test_pending_bytes_limit(self) -> None:
        """The byte limit drops messages that would exceed it."""
        client, server = self.connected()
        sub = client.subscribe("a", lambda m: None, pending_bytes_limit=10)
        self.clock.advance(0)
        # All three arrive before any is handled: the third would make 15 bytes.
        server.send(msg_frame("a", 1, b"12345") * 3)
        self.assertEqual((sub.dropped, sub.delivered), (1, 2))
        self.assertEqual((sub.pending_msgs, sub.pending_bytes), (0, 0))

    def test_max_msgs_sends_unsub_and_ends(self) -> None:
        """subscribe(max_msgs=N) sends UNSUB sid N and ends after N messages."""
        client, server = self.connected()
        got: list[bytes] = []
        sub = client.subscribe("a", lambda m: got.append(m.data), max_msgs=2)
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"SUB a 1\r\nUNSUB 1 2\r\n")
        server.send(msg_frame("a", 1, b"1") + msg_frame("a", 1, b"2") + msg_frame("a", 1, b"3"))
        self.clock.advance(0)
        self.assertEqual(got, [b"1", b"2"])
        self.assertFalse(sub.is_active)
        self.successResultOf(sub.when_ended())

    def test_next_msg_timeout(self) -> None:
        """next_msg() fails with TimeoutError at exactly its timeout, and leaves no timer."""
        client, _server = self.connected()
        sub = client.subscribe("a")
        self.clock.advance(0)
        timers = list(self.clock.getDelayedCalls())
        d = sub.next_msg(timeout=0.5)
        self.assertEqual(len(self.clock.getDelayedCalls()), len(timers) + 1)
        self.clock.advance(0.5 - 1 / 64)
        self.assertNoResult(d)
        self.clock.advance(1 / 64)
        err = self.failureResultOf(d, TimeoutError).value
        self.assertEqual(str(err), "no message on 'a' within 0.5s")
        self.assertEqual(len(sub._waiters), 0)
        self.assertEqual(self.clock.getDelayedCalls(), timers)

    def test_next_msg_returns_queued_message_at_once(self) -> None:
        """A queued message comes back in a Deferred already fired, with no timeout
        timer armed."""
        client, server = self.connected()
        sub = client.subscribe("a")
        self.clock.advance(0)
        server.send(msg_frame("a", sub.sid, b"one") + msg_frame("a", sub.sid, b"two"))
        self.assertEqual(sub.pending_msgs, 2)
        timers = list(self.clock.getDelayedCalls())
        d = sub.next_msg(timeout=0.5)
        self.assertIsInstance(d, Deferred)
        msg = self.successResultOf(d)
        self.assertIsInstance(msg, Msg)
        self.assertEqual(msg.data, b"one")
        self.assertEqual((sub.pending_msgs, sub.delivered), (1, 1))
        self.assertEqual(self.clock.getDelayedCalls(), timers)  # no timeout timer either

    def test_next_msg_cancelled_while_waiting_loses_nothing(self) -> None:
        """Cancelling a waiting next_msg() (wrapped in fromCoroutine) withdraws it; nothing lost."""
        client, server = self.connected()
        sub = client.subscribe("a")
        self.clock.advance(0)
        timers = list(self.clock.getDelayedCalls())  # the client's own (PING)
        d = sub.next_msg(timeout=5)
        self.assertNoResult(d)
        self.assertEqual(len(sub._waiters), 1)
        self.assertEqual(len(self.clock.getDelayedCalls()), len(timers) + 1)
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertEqual(len(sub._waiters), 0)
        self.assertEqual(self.clock.getDelayedCalls(), timers)  # its timer was cancelled
        server.send(msg_frame("a", sub.sid, b"kept"))
        self.clock.advance(0)
        self.assertEqual((sub.pending_msgs, sub.delivered), (1, 0))
        got = self.successResultOf(sub.next_msg(timeout=5))
        self.assertEqual(got.data, b"kept")
        self.assertEqual((sub.pending_msgs, sub.delivered, sub.dropped), (0, 1, 0))

    def test_next_msg_waiting_gets_message_and_stops_timer(self) -> None:
        """A waiting next_msg() fires with the next message and cancels its timeout."""
        client, server = self.connected()
        sub = client.subscribe("a")
        self.clock.advance(0)
        timers = list(self.clock.getDelayedCalls())
        d = sub.next_msg(timeout=5)
        server.send(msg_frame("a", sub.sid, b"late"))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d).data, b"late")
        self.assertEqual(self.clock.getDelayedCalls(), timers)

    def test_next_msg_yielded_in_inline_callbacks(self) -> None:
        """inlineCallbacks accepts the yielded coroutine (Twisted >= 24.7), queued or waiting."""
        client, server = self.connected()
        sub = client.subscribe("a")
        self.clock.advance(0)
        server.send(msg_frame("a", sub.sid, b"queued"))

        @inlineCallbacks
        def read_two() -> Generator[Any, Any, list[bytes]]:
            first = yield sub.next_msg(timeout=5)
            second = yield sub.next_msg(timeout=5)
            return [first.data, second.data]

        d = read_two()
        self.assertNoResult(d)
        server.send(msg_frame("a", sub.sid, b"later"))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d), [b"queued", b"later"])

    def test_next_msg_on_handler_subscription_raises(self) -> None:
        """next_msg() on a subscription with a handler raises InvalidArgumentError."""
        client, _server = self.connected()
        sub = client.subscribe("a", lambda m: None)
        self.clock.advance(0)
        d = sub.next_msg()
        self.failureResultOf(d, InvalidArgumentError)

    def test_next_msg_on_ended_subscription_raises(self) -> None:
        """next_msg() on an ended subscription with nothing queued raises why it ended."""
        client, _server = self.connected()
        sub = client.subscribe("a")
        sub.unsubscribe()
        self.clock.advance(0)
        self.assertFalse(sub.is_active)
        for _ in range(2):
            d = sub.next_msg()
            self.failureResultOf(d, SubscriptionClosedError)

    def test_permission_violation_on_subscribe_ends_sub(self) -> None:
        """A subscribe permissions violation ends that subscription; the connection lives."""
        errors: list[Exception] = []
        client, server = self.connected(error_cb=errors.append)
        sub = client.subscribe("secret", lambda m: None)
        other = client.subscribe("open", lambda m: None)
        self.clock.advance(0)
        server.send(b"-ERR 'Permissions Violation for Subscription to \"secret\"'\r\n")
        self.clock.advance(0)
        self.assertFalse(sub.is_active)
        self.assertTrue(other.is_active)
        self.assertTrue(client.is_connected)
        self.assertFalse(server.transport.disconnecting)
        self.assertEqual([type(e) for e in errors], [PermissionViolationError])


class RequestTests(ClientTestMixin, SynchronousTestCase):
    def reply_subject(self, server: ServerSide, subject: str) -> str:
        m = re.search(rb"PUB " + subject.encode() + rb" (\S+) ", server.transport.value())
        assert m is not None
        return m.group(1).decode()

    def test_response(self) -> None:
        """A response on the reply subject fires the request with the message."""
        client, server = self.connected()
        d = client.request("svc", b"q", timeout=1.0)
        self.clock.advance(0)
        reply = self.reply_subject(server, "svc")
        self.assertIn(
            b"SUB " + reply.rsplit(".", 1)[0].encode() + b".* 1\r\n", server.transport.value()
        )
        server.send(msg_frame(reply, 1, b"answer"))
        self.assertEqual(self.successResultOf(d).data, b"answer")
        assert client._mux is not None
        self.assertEqual(len(client._mux), 0)

    def test_timeout_exact(self) -> None:
        """A request fails with txnats.TimeoutError at exactly its timeout."""
        client, _server = self.connected()
        d = client.request("svc", b"q", timeout=2.5)
        self.clock.advance(2.5 - 1 / 64)
        self.assertNoResult(d)
        self.clock.advance(1 / 64)
        f = self.failureResultOf(d, TimeoutError)
        self.assertIsInstance(f.value, TimeoutError)
        assert client._mux is not None
        self.assertEqual(len(client._mux), 0)

    def test_deadlines_share_one_timer_and_each_is_exact(self) -> None:
        """Requests with different timeouts (a shorter one after a longer one, and one
        made from a timeout's errback) each fail at exactly their own deadline."""
        client, _server = self.connected()
        failed_at: dict[str, float] = {}

        def track(d: Deferred[Msg], name: str) -> None:
            d.addErrback(lambda f: failed_at.setdefault(name, self.clock.seconds())
                         if f.check(TimeoutError) else f)

        start = self.clock.seconds()
        track(client.request("svc", b"", timeout=3.0), "long")
        self.clock.advance(0.5)
        track(client.request("svc", b"", timeout=1.0), "short")

        def again(f: Failure) -> Failure:
            track(client.request("svc", b"", timeout=0.25), "from-errback")
            return f

        client.request("svc", b"", timeout=1.25).addErrback(again).addErrback(lambda f: None)
        for _ in range(40):
            self.clock.advance(0.125)
        self.assertEqual(failed_at, {
            "short": start + 1.5, "from-errback": start + 2.0, "long": start + 3.0,
        })
        assert client._mux is not None
        self.assertEqual(len(client._mux), 0)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # the ping timer

    def test_answered_requests_leave_no_deadlines_behind(self) -> None:
        """Deadlines of answered requests are dropped: none at all once nothing is pending,
        and a bounded number while one request stays pending."""
        client, server = self.connected()
        waiting = client.request("slow", b"", timeout=60.0)
        self.clock.advance(0)
        assert client._mux is not None
        mux = client._mux
        for _ in range(5000):
            d = client.request("svc", b"", timeout=30.0)
            token = f"{mux._next:x}"
            server.send(msg_frame(mux.prefix + token, 1, b"ok"))
            self.assertEqual(self.successResultOf(d).data, b"ok")
            self.assertLessEqual(len(mux._deadlines), 1025)
        # A request made when the heap is compacted still times out, exactly.
        while len(mux._deadlines) <= 1024:
            d = client.request("svc", b"", timeout=30.0)
            server.send(msg_frame(mux.prefix + f"{mux._next:x}", 1, b"ok"))
            self.successResultOf(d)
        unanswered = client.request("svc", b"", timeout=2.0)
        self.assertLess(len(mux._deadlines), 10)
        self.clock.advance(2.0)
        self.failureResultOf(unanswered, TimeoutError)
        waiting.cancel()
        self.failureResultOf(waiting, CancelledError)
        self.assertEqual(mux._deadlines, [])

    def test_late_response_dropped(self) -> None:
        """A response after the timeout is dropped quietly."""
        client, server = self.connected()
        d = client.request("svc", b"q", timeout=1.0)
        self.clock.advance(0)
        reply = self.reply_subject(server, "svc")
        self.clock.advance(1.0)
        self.failureResultOf(d, TimeoutError)
        server.send(msg_frame(reply, 1, b"late"))
        self.clock.advance(0)
        self.assertTrue(client.is_connected)

    def test_no_responders(self) -> None:
        """A 503 status HMSG fails the request with NoRespondersError."""
        client, server = self.connected()
        d = client.request("svc", b"q", timeout=5.0)
        self.clock.advance(0)
        reply = self.reply_subject(server, "svc")
        hdr = b"NATS/1.0 503\r\n\r\n"
        server.send(b"HMSG %s 1 %d %d\r\n%s\r\n" % (reply.encode(), len(hdr), len(hdr), hdr))
        self.clock.advance(0)
        self.failureResultOf(d, NoRespondersError)
        assert client._mux is not None
        self.assertEqual(len(client._mux), 0)
        # Its deadline is gone: nothing fires at 5 s.
        self.clock.advance(5.0)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # the ping timer

    def test_cancel_removes_entry(self) -> None:
        """Cancelling a request removes its entry and its deadline."""
        client, _server = self.connected()
        d = client.request("svc", b"q", timeout=5.0)
        assert client._mux is not None
        self.assertEqual(len(client._mux), 1)
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertEqual(len(client._mux), 0)
        self.clock.advance(5.0)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # the ping timer

    def test_requests_fail_on_close(self) -> None:
        """Pending requests fail with ConnectionClosedError when the client closes."""
        client, server = self.connected()
        d = client.request("svc", b"q", timeout=5.0)
        client.close()
        self.failureResultOf(d, ConnectionClosedError)
        server.lose()
        self.clock.advance(0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_bad_subject_request_fails(self) -> None:
        """A request to an invalid subject fails at once and leaves no entry (the
        request inbox is not even made: the subject is checked first)."""
        client, _server = self.connected()
        self.failureResultOf(client.request("bad subject", b""), BadSubjectError)
        self.failureResultOf(client.request(["unhashable"], b""), BadSubjectError)  # type: ignore[arg-type]
        self.assertIsNone(client._mux)
        self.assertEqual(client.subscriptions, [])


class FlushTests(ClientTestMixin, SynchronousTestCase):
    def test_flush_fires_on_pong(self) -> None:
        """flush() sends PING and fires in the turn after the PONG."""
        client, server = self.connected()
        client.publish("a", b"x")
        d = client.flush(timeout=5.0)
        self.clock.advance(0)
        self.assertEqual(server.transport.writes, [b"PUB a 1\r\nx\r\nPING\r\n"])
        self.assertNoResult(d)
        server.send(b"PONG\r\n")
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # the ping timer only

    def test_flush_timeout(self) -> None:
        """Without a PONG, flush fails with FlushTimeoutError at its timeout."""
        client, server = self.connected()
        d = client.flush(timeout=1.5)
        self.clock.advance(1.5 - 1 / 64)
        self.assertNoResult(d)
        self.clock.advance(1 / 64)
        self.failureResultOf(d, FlushTimeoutError)
        server.send(b"PONG\r\n")  # late PONG: harmless
        self.clock.advance(0)
        self.assertTrue(client.is_connected)

    def test_flush_fails_on_close(self) -> None:
        """A pending flush fails with ConnectionClosedError when the client closes."""
        client, server = self.connected()
        d = client.flush(timeout=5.0)
        closed = client.close()
        server.lose()
        self.clock.advance(0)
        self.failureResultOf(d, ConnectionClosedError)
        self.successResultOf(closed)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.failureResultOf(client.flush(), ConnectionClosedError)

    def test_flush_while_reconnecting(self) -> None:
        """A flush made while reconnecting is answered on the new connection."""
        client, server = self.connected(reconnect_wait=1.0, reconnect_jitter=0)
        server.lose()
        d = client.flush(timeout=10.0)
        self.clock.advance(1.0)
        new = self.accept(reset=False)
        handshake, after = new.transport.writes
        self.assertTrue(handshake.endswith(b"PING\r\n"))
        self.assertNoResult(d)
        self.assertEqual(after, b"PING\r\n")
        new.send(b"PONG\r\n")
        self.clock.advance(0)
        self.successResultOf(d)

    def test_rtt(self) -> None:
        """rtt() measures PING->PONG with the clock."""
        client, server = self.connected()
        d = client.rtt()
        self.clock.advance(0.25)
        server.send(b"PONG\r\n")
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d), 0.25)


class CloseDrainTests(ClientTestMixin, SynchronousTestCase):
    """close() and drain(), called twice, in every state the client can be in."""

    def check(self, state: str, op: Callable[[Client], Deferred[None]]) -> None:
        server, first = self.setup_state(state)
        client = self.client
        results = [op(client), op(client)]
        if op is Client.close or state != "CONNECTED":
            self.assertEqual(client.state, ClientState.CLOSED)
        if first is not None:
            # The first connect never completed: it fails.
            f = self.failureResultOf(first)
            self.assertIsInstance(f.value, (ConnectionClosedError, ConnectError))
        self.pump(server)
        for d in results:
            self.assertIsNone(self.successResultOf(d), (state, op))
        self.assertEqual(self.clock.getDelayedCalls(), [], (state, op))
        expected = [] if state == "CLOSED" else [None]
        self.assertEqual(self.closed_calls, expected, (state, op))
        if server is not None:
            self.assertTrue(server.transport.disconnecting or server.transport.disconnected)
        # Once more, now that it is closed.
        again = [op(client), op(client)]
        self.clock.advance(0)
        for d in again:
            self.successResultOf(d)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.closed_calls, expected)

    STATES = CLIENT_STATES

    def test_close_every_state(self) -> None:
        """close() twice in every state: all Deferreds fire, no timers, closed_cb once."""
        for state in self.STATES:
            self.check(state, Client.close)

    def test_drain_every_state(self) -> None:
        """drain() twice in every state: all Deferreds fire, no timers, closed_cb once."""
        for state in self.STATES:
            self.check(state, Client.drain)

    def test_close_waits_for_connection_loss(self) -> None:
        """close() fires only once the socket is gone."""
        client, server = self.connected()
        d = client.close()
        self.assertTrue(server.transport.disconnecting)
        self.clock.advance(0)
        self.assertNoResult(d)
        server.lose()
        self.clock.advance(0)
        self.successResultOf(d)

    def test_close_cancels_dial(self) -> None:
        """close() while dialling stops the connector."""
        client = self.make_client()
        d = client.start()
        self.clock.advance(0)
        client.close()
        self.assertTrue(self.clock.connectors[0].stoppedConnecting)
        self.failureResultOf(d, ConnectionClosedError)

    def test_close_aborts_handshake(self) -> None:
        """close() during the handshake aborts the half-open connection."""
        client = self.make_client()
        d = client.start()
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line())
        client.close()
        self.assertTrue(server.transport.disconnected)
        self.failureResultOf(d, ConnectionClosedError)
        server.send(b"PONG\r\n")  # too late
        server.lose()
        self.clock.advance(0)
        self.assertTrue(client.is_closed)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_drain_handles_pending_messages_first(self) -> None:
        """drain() unsubscribes, delivers what was received, flushes, then closes."""
        client, server = self.connected()
        got: list[bytes] = []
        client.subscribe("a", lambda m: got.append(m.data))
        self.clock.advance(0)
        server.reset()
        d = client.drain()
        self.assertTrue(client.is_draining)
        self.assertRaises(ConnectionDrainingError, client.subscribe, "b")
        server.send(msg_frame("a", 1, b"1") + msg_frame("a", 1, b"2"))
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"UNSUB 1\r\nPING\r\n")
        # Handlers may still publish while subscriptions drain.
        client.publish("reply", b"ok")
        self.pump(server)
        self.assertEqual(got, [b"1", b"2"])
        self.assertIsNone(self.successResultOf(d))
        self.assertIn(b"PUB reply 2\r\nok\r\n", server.transport.value())
        self.assertTrue(client.is_closed)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_drain_refuses_publish_after_subs(self) -> None:
        """Once subscriptions are drained, publish raises ConnectionDrainingError."""
        client, server = self.connected()
        d = client.drain()
        self.clock.advance(0)
        server.answer_pings()
        self.clock.advance(0)
        self.assertEqual(client.state, ClientState.DRAINING_PUBS)
        self.assertRaises(ConnectionDrainingError, client.publish, "a", b"")
        self.pump(server)
        self.successResultOf(d)

    def test_drain_timeout(self) -> None:
        """A drain the server never answers fails with DrainTimeoutError and closes."""
        from txnats.errors import DrainTimeoutError

        client, server = self.connected(drain_timeout=3.0)
        d = client.drain()
        self.clock.advance(3.0 - 1 / 64)
        self.assertNoResult(d)
        self.clock.advance(1 / 64)
        self.failureResultOf(d, DrainTimeoutError)
        self.assertTrue(client.is_closed)
        server.lose()
        self.clock.advance(0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_close_during_drain(self) -> None:
        """close() during drain: both Deferreds fire and the client ends closed."""
        client, server = self.connected()
        drained = client.drain()
        closed = client.close()
        self.pump(server)
        self.successResultOf(closed)
        self.assertTrue(drained.called)
        drained.addErrback(lambda f: f.trap(ConnectionClosedError))
        self.assertEqual(self.clock.getDelayedCalls(), [])


class UserCallbackTests(ClientTestMixin, SynchronousTestCase):
    def boom(self, *args: object) -> None:
        self.boom_calls += 1
        raise ZeroDivisionError("user callback bug")

    def setUp(self) -> None:
        self.boom_calls = 0

    def test_error_cb_raises(self) -> None:
        """An error_cb that raises is logged; the connection is unaffected."""
        client, server = self.connected(error_cb=self.boom)
        server.send(b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n")
        self.clock.advance(0)
        self.assertEqual(self.boom_calls, 1)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertTrue(client.is_connected)
        self.assertFalse(server.transport.disconnecting)
        client.publish("y", b"")
        self.clock.advance(0)
        self.assertEqual(server.transport.value(), b"PUB y 0\r\n\r\n")

    def test_closed_cb_raises(self) -> None:
        """A closed_cb that raises is logged; close() still fires."""
        client, server = self.connected(closed_cb=self.boom)
        d = client.close()
        server.lose()
        self.clock.advance(0)
        self.successResultOf(d)
        self.assertEqual(self.boom_calls, 1)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertTrue(client.is_closed)

    def test_disconnected_cb_raises(self) -> None:
        """A disconnected_cb that raises is logged; reconnecting goes on."""
        client, server = self.connected(
            disconnected_cb=self.boom,
            reconnected_cb=self.boom,
            reconnect_wait=1.0,
            reconnect_jitter=0,
        )
        server.lose()
        self.clock.advance(0)
        self.assertEqual(self.boom_calls, 1)
        self.assertEqual(client.state, ClientState.RECONNECTING)
        self.clock.advance(1.0)
        self.accept()
        self.assertEqual(client.state, ClientState.CONNECTED)
        self.clock.advance(0)
        self.assertEqual(self.boom_calls, 2)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 2)

    def test_callback_returning_failed_deferred(self) -> None:
        """A callback whose Deferred fails is logged too."""
        client, server = self.connected(closed_cb=lambda: fail(ZeroDivisionError("late")))
        client.close()
        server.lose()
        self.clock.advance(0)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)


class ReconnectTests(ClientTestMixin, SynchronousTestCase):
    def test_lost_connection_reconnects(self) -> None:
        """Loss while CONNECTED: disconnected_cb once, buffered publishes, SUBs before PUBs."""
        events: list[str] = []
        client, server = self.connected(
            disconnected_cb=lambda e: events.append("disconnected"),
            reconnected_cb=lambda: events.append("reconnected"),
            reconnect_wait=2.0,
            reconnect_jitter=0.0,
            reconnect_buffer_size=3 * len(b"PUB p 1\r\nx\r\n"),
        )
        got: list[bytes] = []
        client.subscribe("a", lambda m: None)
        client.subscribe("b", lambda m: got.append(m.data), queue="q", max_msgs=5)
        auto = client.subscribe("c")
        auto.auto_unsubscribe(10)
        self.clock.advance(0)
        server.send(msg_frame("b", 2, b"1") + msg_frame("b", 2, b"2") + msg_frame("c", 3, b"x"))
        self.clock.advance(0)
        self.assertEqual(got, [b"1", b"2"])

        server.lose()
        self.assertEqual(client.state, ClientState.RECONNECTING)
        self.assertFalse(client.is_connected)
        self.assertIsNone(client.connected_url)
        for i in range(3):
            client.publish("p", b"%d" % i)
        self.assertRaises(OutboundBufferFullError, client.publish, "p", b"3")
        self.clock.advance(0)
        self.assertEqual(events, ["disconnected"])
        self.assertEqual(client.pending_bytes, 3 * len(b"PUB p 1\r\nx\r\n"))

        self.assertEqual(len(self.clock.tcpClients), 1)
        self.clock.advance(2.0)
        self.assertEqual(len(self.clock.tcpClients), 2)
        new = self.accept(reset=False)
        self.assertEqual(client.state, ClientState.CONNECTED)
        self.assertEqual(len(new.transport.writes), 2)
        handshake, resent = new.transport.writes
        self.assertTrue(handshake.startswith(b"CONNECT "))
        self.assertEqual(
            resent,
            b"SUB a 1\r\n"
            b"SUB b q 2\r\nUNSUB 2 3\r\n"
            b"SUB c 3\r\nUNSUB 3 9\r\n"
            b"PUB p 1\r\n0\r\nPUB p 1\r\n1\r\nPUB p 1\r\n2\r\n",
        )
        self.assertEqual(events, ["disconnected", "reconnected"])
        self.assertEqual(client.stats.reconnects, 1)
        self.assertEqual(client.pending_bytes, 0)
        # Delivery continues on the new connection.
        new.send(msg_frame("b", 2, b"3"))
        self.clock.advance(0)
        self.assertEqual(got, [b"1", b"2", b"3"])

    def test_unsent_publishes_survive_reconnect(self) -> None:
        """Publishes accepted but not yet written when the link drops go out after SUBs."""
        client, server = self.connected(reconnect_wait=1.0, reconnect_jitter=0)
        client.subscribe("a")
        self.clock.advance(0)
        client.publish("p", b"1")
        server.lose()
        client.publish("p", b"2")
        self.clock.advance(1.0)
        new = self.accept(reset=False)
        self.assertEqual(new.transport.writes[1], b"SUB a 1\r\nPUB p 1\r\n1\r\nPUB p 1\r\n2\r\n")

    def test_no_reconnect_when_disallowed(self) -> None:
        """With allow_reconnect=False a lost connection closes the client."""
        events: list[str] = []
        client, server = self.connected(
            allow_reconnect=False,
            disconnected_cb=lambda e: events.append("disconnected"),
            closed_cb=lambda: events.append("closed"),
        )
        server.lose()
        self.assertTrue(client.is_closed)
        self.clock.advance(0)
        self.assertEqual(events, ["disconnected", "closed"])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_stale_connection_reconnects(self) -> None:
        """Unanswered PINGs make the client drop the connection and reconnect."""
        client, server = self.connected(
            ping_interval=5.0, max_pings_out=2, reconnect_wait=1.0, reconnect_jitter=0
        )
        self.clock.advance(5.0)
        self.clock.advance(5.0)
        self.assertEqual(server.transport.value(), b"PING\r\nPING\r\n")
        self.assertFalse(server.transport.disconnecting)
        self.clock.advance(5.0)
        self.assertTrue(server.transport.disconnected)
        server.lose()
        self.assertEqual(client.state, ClientState.RECONNECTING)
        self.clock.advance(0)
        self.assertEqual(len(self.clock.tcpClients), 2)
        self.accept()
        self.assertTrue(client.is_connected)

    def test_reconnect_gives_up(self) -> None:
        """After max_reconnect_attempts per server the client closes with NoServersError."""
        errors: list[Exception] = []
        client, server = self.connected(
            max_reconnect_attempts=3, reconnect_wait=1.0, error_cb=errors.append
        )
        sub = client.subscribe("a")
        d = sub.next_msg(timeout=None)
        server.lose()
        attempts = self.fail_dials()
        self.assertEqual(len(attempts), 3)
        self.assertTrue(client.is_closed)
        self.failureResultOf(d, ConnectionClosedError)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_lame_duck_reconnects_elsewhere(self) -> None:
        """INFO with ldm: lame_duck_cb, then a move with no gap: the next server is
        dialled and subscribed (confirmed by PONG) while the old connection still
        works; then publishes switch, the old one unsubscribes all but its inboxes,
        LINGER seconds later those too, answers a last PING and is closed. A reply
        arriving on the old connection meanwhile is delivered."""
        calls: list[str] = []
        client = self.make_client(
            [endpoint(4222), endpoint(4223)],
            lame_duck_cb=lambda: calls.append("ldm"),
            reconnected_cb=lambda: calls.append("reconnected"),
            disconnected_cb=lambda e: calls.append("disconnected"),
            reconnect_jitter=0,
        )
        client.start()
        self.clock.advance(0)
        old = self.accept()
        got: list[bytes] = []
        client.subscribe("a", lambda m: got.append(m.data))
        reply = client.request("svc", b"q", timeout=5)
        self.clock.advance(0)
        old.reset()
        old.send(info_line(ldm=True))
        self.clock.advance(0)
        self.assertEqual(calls, ["ldm"])
        # The old connection stays while the next server is dialled.
        self.assertFalse(old.transport.disconnecting)
        self.assertEqual(self.clock.tcpClients[-1][1], 4223)
        new = ServerSide(self.clock)
        new.send(info_line())
        new.send(b"PONG\r\n")  # the handshake
        self.clock.advance(0)
        sent = new.transport.value()
        self.assertIn(b"SUB a 1\r\n", sent)
        self.assertIn(b"SUB _INBOX.", sent)
        self.assertTrue(sent.endswith(b"PING\r\n"))
        # Until the new server confirms the subscriptions, publishes go to the old one.
        client.publish("a", b"before")
        self.clock.advance(0)
        self.assertIn(b"PUB a 6\r\nbefore", old.transport.value())
        new.reset()
        new.send(b"PONG\r\n")
        self.clock.advance(0)
        self.assertEqual(calls, ["ldm", "reconnected"])
        self.assertEqual(client.connected_url, endpoint(4223))
        self.assertTrue(client.is_connected)
        # The old connection unsubscribes everything but the inbox at once...
        tail = old.transport.value()
        inbox = next(s for s in client.subscriptions if s.subject.startswith("_INBOX"))
        self.assertIn(b"UNSUB 1\r\n", tail)
        self.assertNotIn(b"UNSUB %d\r\n" % inbox.sid, tail)
        self.assertNotIn(b"PING", tail)
        self.assertFalse(old.transport.disconnecting)
        client.publish("a", b"after")
        self.clock.advance(0)
        self.assertIn(b"PUB a 5\r\nafter", new.transport.value())
        self.assertNotIn(b"after", old.transport.value())
        # ...what it still delivers counts: the reply to the earlier request...
        reply_to = inbox.subject[:-1] + "1"  # the first request's token
        old.send(b"MSG %s %d 2\r\nok\r\n" % (reply_to.encode(), inbox.sid))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(reply).data, b"ok")
        # ...and LINGER seconds later the inbox goes too, with a last PING.
        self.clock.advance(LINGER)
        tail = old.transport.value()
        self.assertIn(b"UNSUB %d\r\n" % inbox.sid, tail)
        self.assertTrue(tail.endswith(b"PING\r\n"))
        self.assertFalse(old.transport.disconnecting)
        old.send(b"PONG\r\n")
        self.clock.advance(0)
        self.assertTrue(old.transport.disconnecting)
        old.lose()
        self.clock.advance(0)
        self.assertTrue(client.is_connected)
        self.assertEqual(calls, ["ldm", "reconnected"])  # never disconnected
        self.assertEqual(client.stats.reconnects, 1)

    def test_close_while_old_connection_lingers(self) -> None:
        """close() within LINGER of a lame-duck move closes the old connection at once
        too, and leaves no timer behind."""
        client = self.make_client([endpoint(4222), endpoint(4223)], reconnect_jitter=0)
        client.start()
        self.clock.advance(0)
        old = self.accept()
        client.request("svc", b"q", timeout=5).addErrback(lambda f: None)  # an inbox
        old.send(info_line(ldm=True))
        self.clock.advance(0)
        new = ServerSide(self.clock)
        new.send(info_line())
        new.send(b"PONG\r\n")  # the handshake
        self.clock.advance(0)
        new.send(b"PONG\r\n")  # the subscriptions: the switch
        self.clock.advance(0)
        self.assertEqual(client.connected_url, endpoint(4223))
        self.assertFalse(old.transport.disconnecting)  # lingering with its inbox
        closed = client.close()
        self.assertTrue(old.transport.disconnecting)
        self.assertTrue(new.transport.disconnecting)
        old.lose()
        new.lose()
        self.clock.advance(0)
        self.successResultOf(closed)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_lame_duck_move_fails_then_reconnects(self) -> None:
        """If the next server cannot be reached, the client reconnects as after a loss."""
        client = self.make_client([endpoint(4222), endpoint(4223)], reconnect_jitter=0)
        client.start()
        self.clock.advance(0)
        old = self.accept()
        old.send(info_line(ldm=True))
        self.clock.advance(0)
        _, port, factory, _, _ = self.clock.tcpClients[-1]
        self.assertEqual(port, 4223)
        self.assertFalse(old.transport.disconnecting)
        factory.clientConnectionFailed(
            self.clock.connectors[-1], Failure(ConnectionRefusedError())
        )
        self.clock.advance(0)
        self.assertTrue(old.transport.disconnecting)
        old.lose()
        self.clock.advance(0)
        self.assertTrue(client.is_reconnecting)
