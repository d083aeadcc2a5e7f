"""Frames over the server's limits are refused at the call, and cost no neighbour.

nats-server closes the connection of a client whose control line (the arguments after
``PUB``/``HPUB``/``SUB``/``CONNECT``, up to CRLF) is longer than its
``max_control_line``, 4,096 bytes by default, which INFO does not announce. Before, a
publish of a 10 KB subject was queued, the server dropped the connection, and what was
queued with it was lost; a subscription on such a subject was sent again after every
reconnection and kept the client down. Now the client enforces ``max_control_line``
(a connect option, nats-server's default) and raises
:class:`~txnats.errors.ControlLineTooLongError` having sent nothing.

The first half drives a client against a fake server (bytes, a ``MemoryReactorClock``);
the second runs the same cases against a real ``nats-server`` and checks its boundary
is where the client puts it.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial import unittest

from txnats import (
    BadSubjectError,
    ConnectError,
    ControlLineTooLongError,
    HandlerError,
    Msg,
    NatsError,
    connect,
)
from txnats.testing import NatsServer

from .support.clients import ClientTestMixin
from .support.events import ClientEvents
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor
from .support.wire import msg_frame


def subject_for(args: int, payload: int = 0) -> str:
    """A subject whose ``PUB <subject> <size>`` line has ``args`` bytes of arguments."""
    return "s" * (args - 1 - len(str(payload)))


class ControlLineUnitTests(ClientTestMixin, unittest.SynchronousTestCase):
    """The client against a fake server: what is refused, and that nothing is sent."""

    def sent(self) -> bytes:
        self.clock.advance(0)
        return self.server.transport.value()

    def setUp(self) -> None:
        self.events = ClientEvents()
        self.client, self.server = self.connected(**self.events.callbacks())

    def test_default_limit_is_nats_servers(self) -> None:
        """The limit is nats-server's default, 4,096 bytes, unless the option says."""
        self.assertEqual(self.client.max_control_line, 4096)

    def test_boundary(self) -> None:
        """A line of exactly 4,096 bytes is sent; one of 4,097 raises, naming the limit
        and the line's length, and its message shows only the start of the subject."""
        ok = subject_for(4096)
        self.client.publish(ok, b"")
        self.assertIn(f"PUB {ok} 0\r\n".encode(), self.sent())
        self.server.reset()
        bad = subject_for(4097)
        with self.assertRaises(ControlLineTooLongError) as cm:
            self.client.publish(bad, b"")
        err = cm.exception
        self.assertIsInstance(err, BadSubjectError)
        self.assertEqual((err.length, err.limit), (4097, 4096))
        self.assertIn("4096", str(err))
        self.assertIn("max_control_line", str(err))
        self.assertLess(len(str(err)), 400)
        self.assertEqual(self.sent(), b"")

    def test_every_publish_path_is_checked(self) -> None:
        """Short payload or long, with a reply subject, with headers: each raises and
        queues nothing (each takes another path through publish())."""
        long_subject = "a" * 5000
        short = "ok"
        cases: list[tuple[str, dict[str, Any]]] = [
            (long_subject, {"data": b"x"}),
            (long_subject, {"data": b"x" * 5000}),
            (long_subject, {"data": b"x", "headers": {"A": "1"}}),
            (short, {"data": b"x", "reply": "r" * 5000}),
            (short, {"data": b"x" * 5000, "reply": "r" * 5000}),
            (short, {"data": b"x", "reply": "r" * 5000, "headers": {"A": "1"}}),
            ("b" * 4090, {"data": b"x", "reply": "short.reply"}),
        ]
        for subject, kwargs in cases:
            with self.assertRaises(ControlLineTooLongError, msg=repr(kwargs)[:80]):
                self.client.publish(subject, **kwargs)
        self.assertEqual(self.sent(), b"")
        self.assertEqual(self.client.stats.out_msgs, 0)

    def test_refused_publish_costs_no_neighbour(self) -> None:
        """Publishes before and after a refused one are sent, in order, and the
        connection stays up."""
        self.client.publish("before", b"1")
        with self.assertRaises(ControlLineTooLongError):
            self.client.publish("x" * 10_000, b"2")
        self.client.publish("after", b"3")
        wire = self.sent()
        self.assertEqual(wire, b"PUB before 1\r\n1\r\nPUB after 1\r\n3\r\n")
        self.assertTrue(self.client.is_connected)
        self.assertEqual(self.events.count("disconnected"), 0)

    def test_subscribe(self) -> None:
        """A subscription whose SUB would be too long (subject or queue group) raises,
        sends nothing and is not registered (so no reconnection sends it again)."""
        before = self.client.subscriptions
        with self.assertRaises(ControlLineTooLongError):
            self.client.subscribe("w" * 5000, lambda m: None)
        with self.assertRaises(ControlLineTooLongError):
            self.client.subscribe("ok.>", lambda m: None, queue="q" * 5000)
        self.assertEqual(self.client.subscriptions, before)
        self.assertEqual(self.sent(), b"")
        ok = self.client.subscribe("ok", lambda m: None)
        self.assertIn(b"SUB ok %d\r\n" % ok.sid, self.sent())

    def test_request_refused_before_its_inbox(self) -> None:
        """A request whose line would be too long fails at once: no inbox subscription,
        no PUB, no timer left behind."""
        timers = set(self.clock.getDelayedCalls())
        d = self.client.request("r" * 4090, b"x", timeout=1.0)
        self.failureResultOf(d, ControlLineTooLongError)
        self.assertEqual(self.sent(), b"")
        self.assertEqual(self.client.subscriptions, [])
        self.assertEqual(set(self.clock.getDelayedCalls()), timers)

    def test_request_near_the_limit(self) -> None:
        """A request subject that fits with its reply inbox is sent; the inbox prefix
        counts against the limit."""
        self.client.request("near." + "n" * 3000, b"x", timeout=1.0)
        wire = self.sent()
        self.assertIn(b"PUB near.", wire)
        line = wire[wire.index(b"PUB near.") :].split(b"\r\n", 1)[0]
        self.assertLessEqual(len(line) - len(b"PUB "), 4096)

    def test_request_many_refused(self) -> None:
        """request_many() is refused the same way, its inbox unsubscribed."""
        d = self.client.request_many("m" * 5000, b"x", timeout=1.0)
        self.failureResultOf(d, ControlLineTooLongError)
        self.assertEqual(self.client.subscriptions, [])

    def test_while_reconnecting(self) -> None:
        """Disconnected, a publish that would be too long raises too, and is not kept
        in the reconnect buffer."""
        self.server.lose()
        self.clock.advance(0)
        self.assertTrue(self.client.is_reconnecting)
        with self.assertRaises(ControlLineTooLongError):
            self.client.publish("z" * 5000, b"x")
        self.client.publish("fine", b"y")
        self.assertEqual(self.client.pending_bytes, len(b"PUB fine 1\r\ny\r\n"))

    def test_respond_to_a_foreign_reply_subject(self) -> None:
        """A message whose reply subject (another client's) is too long to answer: the
        handler's respond() raises, reported to error_cb as a HandlerError; the
        connection stays up and the next message is handled."""
        handled: list[bytes] = []

        def handler(msg: Msg) -> None:
            handled.append(msg.data)
            msg.respond(b"answer")

        sub = self.client.subscribe("svc", handler)
        self.sent()
        self.server.reset()
        self.server.send(msg_frame("svc", sub.sid, b"1", reply="R" * 5000))
        self.server.send(msg_frame("svc", sub.sid, b"2", reply="ok.reply"))
        wire = self.sent()
        self.assertEqual(handled, [b"1", b"2"])
        self.assertEqual(wire, b"PUB ok.reply 6\r\nanswer\r\n")
        errors = [e for e in self.events.errors if isinstance(e, HandlerError)]
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0].__cause__, ControlLineTooLongError)
        self.assertTrue(self.client.is_connected)
        self.flushLoggedErrors(ControlLineTooLongError)

    def test_raised_limit(self) -> None:
        """With max_control_line raised (for a server configured so), longer subjects
        are sent; a limit below the fast path's needs still checks every publish."""
        client, server = self.connected(max_control_line=8192)
        client.publish("l" * 6000, b"x")
        self.clock.advance(0)
        self.assertIn(b"PUB " + b"l" * 6000 + b" 1\r\n", server.transport.value())
        client, server = self.connected(max_control_line=400)
        client.publish("short", b"x")
        client.publish("m" * 398, b"x")
        with self.assertRaises(ControlLineTooLongError):
            client.publish("m" * 399, b"x")
        self.clock.advance(0)
        self.assertEqual(
            server.transport.value(), b"PUB short 1\r\nx\r\nPUB " + b"m" * 398 + b" 1\r\nx\r\n"
        )

    def test_connect_too_long(self) -> None:
        """A CONNECT longer than the limit (a long name, a big JWT) fails the attempt
        with a ConnectError naming the option, and names no credential."""
        client = self.make_client(name="n" * 5000, token="secret-token-1234")
        d = client.start()
        self.clock.advance(0)
        from txnats.testing import ServerSide

        from .support.wire import info_line

        server = ServerSide(self.clock)
        server.send(info_line(auth_required=True))
        self.clock.advance(0)
        self.assertNotIn(b"CONNECT", server.transport.value())
        server.lose()  # (the client aborted: its socket closes)
        self.clock.advance(0)
        err = self.failureResultOf(d, ConnectError).value
        self.assertIn("max_control_line", str(err))
        self.assertNotIn("secret-token", repr(err) + str(err))


class ControlLineServerTests(ServerPerClass, unittest.TestCase):
    """Against a real nats-server: its boundary is the client's, and a refused frame
    costs nothing that was accepted before or after it."""

    async def client(self, **opts: Any) -> Any:
        assert self.server is not None
        nc = await connect(reactor, self.server.url, **opts)
        self.addCleanup(nc.close)
        return nc

    async def test_boundary_against_the_server(self) -> None:
        """The longest line the client sends is one the server takes: a publish and a
        subscription of exactly 4,096 bytes work end to end, and the connection stays
        up; one byte more raises and sends nothing."""
        events = ClientEvents()
        nc = await self.client(**events.callbacks())
        sid_digits = 1
        sub_subject = "t" * (4096 - 1 - sid_digits)
        got: Deferred[Msg] = Deferred()
        nc.subscribe(sub_subject, got.callback)
        pub_subject = subject_for(4096, payload=1)
        nc.subscribe(pub_subject, got.callback)
        await nc.flush(timeout=5)
        nc.publish(pub_subject, b"x")
        msg = await bounded(got)
        self.assertEqual(msg.data, b"x")
        with self.assertRaises(ControlLineTooLongError):
            nc.publish(pub_subject + "s", b"x")
        await nc.flush(timeout=5)
        self.assertTrue(nc.is_connected)
        self.assertEqual(events.count("disconnected"), 0)

    async def test_neighbours_of_a_refused_frame_arrive(self) -> None:
        """1,000 publishes with a 10 KB subject among them (refused each time): every
        good one reaches the subscriber, and the publisher never reconnects."""
        events = ClientEvents()
        pub = await self.client(**events.callbacks())
        sub = await self.client()
        received: list[bytes] = []
        done: Deferred[None] = Deferred()

        def on_msg(msg: Msg) -> None:
            received.append(msg.data)
            if len(received) == 900:
                done.callback(None)

        sub.subscribe("good", on_msg)
        await sub.flush(timeout=5)
        refused = 0
        for i in range(1000):
            if i % 10 == 5:
                try:
                    pub.publish("bad." + "x" * 10_000, b"%d" % i)
                except ControlLineTooLongError:
                    refused += 1
            else:
                pub.publish("good", b"%d" % i)
        await bounded(done)
        self.assertEqual(refused, 100)
        self.assertEqual(received, [b"%d" % i for i in range(1000) if i % 10 != 5])
        self.assertEqual(events.count("disconnected"), 0)

    async def test_refused_subscription_is_not_resent(self) -> None:
        """A refused subscription leaves nothing to send again after a reconnection:
        the client reconnects once (a forced reconnect) and stays connected."""
        events = ClientEvents()
        nc = await self.client(**events.callbacks())
        with self.assertRaises(ControlLineTooLongError):
            nc.subscribe("y" * 10_000)
        nc.force_reconnect()
        await bounded(events.wait("reconnected"))
        await nc.flush(timeout=5)
        self.assertTrue(nc.is_connected)
        self.assertEqual(events.count("disconnected"), 1)


class RaisedLimitServerTests(ServerPerClass, unittest.TestCase):
    """A server configured with a larger ``max_control_line``: the option follows it."""

    server_options = {"config": "max_control_line: 16384\n"}

    async def test_raised_limit_end_to_end(self) -> None:
        """With ``max_control_line=16384`` on both sides a 10 KB subject works, through
        a request and its reply too."""
        assert isinstance(self.server, NatsServer)
        nc = await connect(reactor, self.server.url, max_control_line=16384)
        self.addCleanup(nc.close)
        subject = "big." + "b" * 10_000
        nc.subscribe(subject, lambda m: m.respond(m.data + b"!"))
        await nc.flush(timeout=5)
        reply = await nc.request(subject, b"hi", timeout=5)
        self.assertEqual(reply.data, b"hi!")
        try:
            await connect(reactor, self.server.url, max_control_line=1)
        except NatsError as e:
            self.assertIn("max_control_line", str(e))
        else:
            self.fail("max_control_line=1 was accepted")
