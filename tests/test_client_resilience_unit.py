"""Client behaviour across connection loss and server refusals, on a fake clock."""

from __future__ import annotations

from twisted.internet.defer import ensureDeferred
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from txnats import ClientState
from txnats.connection import CLOSE_TIMEOUT
from txnats.errors import ConnectionClosedError, PermissionViolationError

from .support.clients import ClientTestMixin
from .support.wire import msg_frame


class ReconnectKeepsWorkTests(ClientTestMixin, SynchronousTestCase):
    def test_unsent_publishes_survive_a_lost_connection(self) -> None:
        """Publishes not yet written when the connection drops are sent first after reconnecting."""
        client, server = self.connected()
        client.publish("a", b"1")
        client.publish("a", b"2")
        server.lose()  # before the end of the turn: nothing reached the socket
        self.assertEqual(client.state, ClientState.RECONNECTING)
        client.publish("a", b"3")
        self.clock.advance(3)  # reconnect_wait plus jitter
        new = self.accept(reset=False)
        self.clock.advance(0)
        written = new.transport.value()
        self.assertTrue(written.startswith(b"CONNECT "), written)
        tail = written.split(b"PING\r\n", 1)[1]
        self.assertEqual(tail, b"PUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB a 1\r\n3\r\n")

    def test_unsent_publishes_of_every_shape_survive(self) -> None:
        """Fast-path PUBs (queued as parts), PUBs with a reply, HPUBs and payloads that
        look like commands come back whole and in order; the SUB is re-sent once."""
        client, server = self.connected()
        client.publish("a", b"PUB z 1\r\n")
        client.subscribe("s")
        client.publish("a", b"x" * 2000, reply="r")
        client.publish("b", b"\r\n", headers={"K": "v"})
        client.publish("a", b"")
        server.lose()
        self.clock.advance(3)
        new = self.accept(reset=False)
        self.clock.advance(0)
        tail = new.transport.value().split(b"PING\r\n", 1)[1]
        hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
        self.assertEqual(
            tail,
            b"SUB s 1\r\n"
            + b"PUB a 9\r\nPUB z 1\r\n\r\n"
            + b"PUB a r 2000\r\n" + b"x" * 2000 + b"\r\n"
            + b"HPUB b %d %d\r\n%s\r\n\r\n" % (len(hdr), len(hdr) + 2, hdr)
            + b"PUB a 0\r\n\r\n",
        )

    def test_many_unsent_publishes_are_kept_packed(self) -> None:
        """3,000 small publishes caught by a lost connection are kept as a few blocks of
        whole frames (not 3,000 objects) and all go out, in order, after reconnecting."""
        client, server = self.connected()
        for i in range(3000):
            client.publish("a", b"%04d" % i)
        server.lose()
        self.assertEqual(client._reconnect_buf.msgs, 3000)
        self.assertLessEqual(client._reconnect_buf.blocks, 3)
        self.clock.advance(3)
        new = self.accept(reset=False)
        self.clock.advance(0)
        tail = new.transport.value().split(b"PING\r\n", 1)[1]
        self.assertEqual(tail, b"".join(b"PUB a 4\r\n%04d\r\n" % i for i in range(3000)))

    def test_pending_flush_waits_for_reconnect(self) -> None:
        """A flush() pending when the connection drops fires on the next connection's PONG."""
        client, server = self.connected()
        d = client.flush(timeout=30)
        self.clock.advance(0)
        server.lose()
        self.clock.advance(0)
        self.assertNoResult(d)
        self.clock.advance(3)  # reconnect_wait plus jitter
        self.assertNoResult(d)
        new = self.accept(reset=False)
        self.clock.advance(0)
        self.assertNoResult(d)
        self.assertEqual(new.transport.value().count(b"PING\r\n"), 2)  # handshake + flush
        new.send(b"PONG\r\n")
        self.clock.advance(0)
        self.assertIsNone(self.successResultOf(d))

    def test_pending_flush_times_out_while_disconnected(self) -> None:
        """A flush() waiting for a reconnection that never comes fails at its timeout, not later."""
        client, server = self.connected(reconnect_wait=100)
        d = client.flush(timeout=3)
        server.lose()
        self.clock.advance(0)
        self.clock.advance(3)
        self.failureResultOf(d)


class InboxRefusedTests(ClientTestMixin, SynchronousTestCase):
    def test_refused_inbox_fails_requests_and_is_replaced(self) -> None:
        """A refused inbox fails pending requests at once; the next request makes a new one."""
        client, server = self.connected()
        d = client.request("svc", b"x", timeout=60)
        self.clock.advance(0)
        mux = client._mux
        assert mux is not None
        inbox = mux.subscription.subject
        server.send(
            f"-ERR 'Permissions Violation for Subscription to \"{inbox}\"'\r\n".encode()
        )
        self.clock.advance(0)
        self.clock.advance(0)
        f = self.failureResultOf(d)
        self.assertIsInstance(f.value, PermissionViolationError)
        self.assertIsNone(client._mux)
        d2 = client.request("svc", b"y", timeout=60)
        self.assertIsNotNone(client._mux)
        self.assertNotEqual(client._mux.subscription.subject, inbox)  # type: ignore[union-attr]
        reply_to = client._mux.prefix + "1"  # type: ignore[union-attr]
        sid = client._mux.subscription.sid  # type: ignore[union-attr]
        self.clock.advance(0)
        server.send(msg_frame(reply_to, sid, b"ok"))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d2).data, b"ok")


class CloseTimeoutTests(ClientTestMixin, SynchronousTestCase):
    def test_close_aborts_a_peer_that_never_closes(self) -> None:
        """close() fires within CLOSE_TIMEOUT even if the peer never lets the socket close."""
        client, server = self.connected()
        proto = client._proto
        assert proto is not None
        d = client.close()
        self.clock.advance(0)
        self.assertNoResult(d)
        self.assertTrue(server.transport.disconnecting)
        aborted: list[bool] = []
        assert isinstance(server.transport, StringTransport)
        server.transport.abortConnection = lambda: (  # type: ignore[method-assign]
            aborted.append(True),
            server.lose(),
        )
        self.clock.advance(CLOSE_TIMEOUT)
        self.clock.advance(0)
        self.assertEqual(aborted, [True])
        self.assertIsNone(self.successResultOf(d))
        self.assertTrue(proto.lost)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class BackpressureTests(ClientTestMixin, SynchronousTestCase):
    def test_full_mailbox_pauses_reading_and_drops_nothing(self) -> None:
        """A full backpressure subscription pauses the socket, drops nothing, resumes at half."""
        client, server = self.connected()
        sub = client.subscribe("q", pending_msgs_limit=10, backpressure=True)
        self.clock.advance(0)
        server.send(b"".join(msg_frame("q", sub.sid, b"%d" % i) for i in range(25)))
        self.assertEqual(server.transport.producerState, "paused")
        self.assertEqual(sub.dropped, 0)
        self.assertEqual(sub.pending_msgs, 25)
        got = []
        for _ in range(25):
            got.append(self.successResultOf(sub.next_msg(1)).data)
            if sub.pending_msgs > 5:
                self.assertEqual(server.transport.producerState, "paused")
        self.assertEqual(server.transport.producerState, "producing")
        self.assertEqual(got, [b"%d" % i for i in range(25)])
        self.assertEqual(sub.received, sub.delivered + sub.dropped + sub.pending_msgs)

    def test_drop_policy_counts_and_does_not_pause(self) -> None:
        """Without backpressure the same flood is dropped past the limit; reading never pauses."""
        client, server = self.connected()
        sub = client.subscribe("q", pending_msgs_limit=10)
        self.clock.advance(0)
        server.send(b"".join(msg_frame("q", sub.sid, b"x") for _ in range(25)))
        self.assertEqual(server.transport.producerState, "producing")
        self.assertEqual((sub.pending_msgs, sub.dropped, sub.received), (10, 15, 25))


class ClosedWhileDisconnectedTests(ClientTestMixin, SynchronousTestCase):
    def test_buffered_publishes_reported_on_close(self) -> None:
        """Closing with publishes still buffered reports how many were never sent."""
        errors: list[Exception] = []
        client, server = self.connected(error_cb=errors.append, reconnect_wait=100)
        server.lose()
        self.clock.advance(0)
        client.publish("a", b"1")
        client.publish("a", b"2")
        client.close()
        self.clock.advance(0)
        lost = [e for e in errors if isinstance(e, ConnectionClosedError)]
        self.assertEqual(len(lost), 1)
        self.assertIn("2 buffered publishes", str(lost[0]))



class SubscriptionEdgeTests(ClientTestMixin, SynchronousTestCase):
    def test_sub_drain_timeout(self) -> None:
        """sub.drain(timeout) on a pull subscription nobody reads fails with DrainTimeoutError."""
        from txnats.errors import DrainTimeoutError

        client, server = self.connected()
        sub = client.subscribe("q")
        self.clock.advance(0)
        server.send(msg_frame("q", sub.sid, b"unread"))
        d = sub.drain(timeout=2)
        self.clock.advance(0)
        server.answer_pings()
        self.clock.advance(0)
        self.assertNoResult(d)
        self.clock.advance(2)
        self.assertIsInstance(self.failureResultOf(d).value, DrainTimeoutError)
        # The message is still there for a reader, and reading it ends the subscription.
        reading = sub.next_msg(1)
        self.assertEqual(self.successResultOf(reading).data, b"unread")
        self.assertFalse(sub.is_active)

    def test_iterating_a_handler_subscription_is_refused(self) -> None:
        """async for over a subscription with a handler fails instead of stealing its messages."""
        from txnats.errors import InvalidArgumentError

        client, _ = self.connected()
        sub = client.subscribe("q", lambda m: None)
        d = ensureDeferred(sub.__anext__())
        self.assertIsInstance(self.failureResultOf(d).value, InvalidArgumentError)


class ReactorShutdownTests(ClientTestMixin, SynchronousTestCase):
    def test_reactor_shutdown_closes_the_client(self) -> None:
        """Stopping the reactor closes the client (no reconnect attempt during shutdown)."""
        closed: list[bool] = []
        client, server = self.connected(closed_cb=lambda: closed.append(True))
        triggers = self.clock.triggers["before"]["shutdown"]
        self.assertEqual(len(triggers), 1)
        fn, args, kw = triggers[0]
        d = fn(*args, **kw)
        self.assertEqual(client.state, ClientState.CLOSED)
        self.pump(server)
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual(closed, [True])
        self.assertEqual(len(self.clock.tcpClients), 1)  # never dialled again
