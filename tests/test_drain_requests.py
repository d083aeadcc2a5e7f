"""A drain lets the requests already sent get their answers.

Before, ``drain()`` drained every subscription at once, the request inbox among them,
so every request in flight failed as the drain began, although its answer was due a
moment later (the bridge answered 100 such HTTP requests with 500). Now the reply
inboxes (the shared one of ``request()``, and ``request_many()``'s) are left for last:
the other subscriptions drain, publishes are refused, the requests in flight end (an
answer, their own timeout, or ``drain_timeout``), and then the client flushes and
closes. A request made after publishes are refused fails at once with
:class:`ConnectionDrainingError`; one still waiting at ``drain_timeout`` fails with
:class:`ConnectionClosedError`.
"""

from __future__ import annotations

import gc
import re

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import deferLater
from twisted.trial import unittest

from txnats import (
    ClientState,
    ConnectionClosedError,
    ConnectionDrainingError,
    DrainTimeoutError,
    Msg,
    connect,
)

from .support.clients import ClientTestMixin
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor
from .support.wire import msg_frame


def replies(wire: bytes) -> list[str]:
    """The reply subjects of the PUBs in ``wire`` (requests the client sent)."""
    return [m.decode() for m in re.findall(rb"PUB \S+ (_INBOX\.\S+) \d+\r\n", wire)]


class DrainUnitTests(ClientTestMixin, unittest.SynchronousTestCase):
    """The drain's steps against a fake server."""

    def setUp(self) -> None:
        self.client, self.server = self.connected(drain_timeout=10.0)

    def requests(self, n: int, timeout: float = 5.0) -> tuple[list[Deferred[Msg]], list[str]]:
        ds = [self.client.request("svc", b"%d" % i, timeout=timeout) for i in range(n)]
        self.clock.advance(0)
        wire = self.server.transport.value()
        self.server.reset()
        return ds, replies(wire)

    def mux_sid(self) -> int:
        inbox = [s for s in self.client.subscriptions if s.subject.startswith("_INBOX.")]
        self.assertEqual(len(inbox), 1)
        return inbox[0].sid

    def pong(self) -> None:
        self.server.answer_pings()
        self.clock.advance(0)

    def test_requests_in_flight_are_answered(self) -> None:
        """Three requests in flight, then drain(): the request inbox is not unsubscribed,
        the answers that come after the drain began fire the requests, and only then
        does the client flush and close."""
        user = self.client.subscribe("work", lambda m: None)
        ds, reply_to = self.requests(3)
        sid = self.mux_sid()
        drained = self.client.drain()
        self.clock.advance(0)
        wire = self.server.transport.value()
        self.assertIn(b"UNSUB %d\r\n" % user.sid, wire)
        self.assertNotIn(b"UNSUB %d\r\n" % sid, wire)
        self.pong()
        self.assertEqual(self.client.state, ClientState.DRAINING_PUBS)
        for d in ds:
            self.assertNoResult(d)
        self.assertNoResult(drained)
        self.server.reset()
        for i, reply in enumerate(reply_to):
            self.server.send(msg_frame(reply, sid, b"answer%d" % i))
        self.clock.advance(0)
        self.assertEqual([self.successResultOf(d).data for d in ds],
                         [b"answer0", b"answer1", b"answer2"])
        self.clock.advance(0)
        self.assertIn(b"PING\r\n", self.server.transport.value())  # the final flush
        self.pong()
        self.server.lose()
        self.clock.advance(0)
        self.successResultOf(drained)
        self.assertTrue(self.client.is_closed)

    def test_drain_timeout_fails_what_is_left(self) -> None:
        """A request still unanswered at drain_timeout fails with ConnectionClosedError
        (never a bare end), and the drain with DrainTimeoutError."""
        client, server = self.connected(drain_timeout=2.0)
        self.server = server
        d = client.request("svc", b"", timeout=60.0)
        drained = client.drain()
        self.clock.advance(0)
        self.pong()
        self.clock.advance(1.0)
        self.assertNoResult(d)
        self.clock.advance(1.5)
        self.failureResultOf(d, ConnectionClosedError)
        self.failureResultOf(drained, DrainTimeoutError)

    def test_request_timeout_during_drain(self) -> None:
        """A request that times out during the drain ends it no later than its own
        timeout: the drain goes on to close."""
        ds, _ = self.requests(1, timeout=1.0)
        drained = self.client.drain()
        self.clock.advance(0)
        self.pong()
        self.clock.advance(1.0)
        self.failureResultOf(ds[0])
        self.clock.advance(0)
        self.pong()
        self.server.lose()
        self.clock.advance(0)
        self.successResultOf(drained)

    def test_new_request_refused_once_publishes_are(self) -> None:
        """After the subscriptions drained, a new request fails at once with
        ConnectionDrainingError and sends nothing."""
        ds, _ = self.requests(1)
        self.client.drain()
        self.clock.advance(0)
        self.pong()
        self.server.reset()
        late = self.client.request("svc", b"late", timeout=5.0)
        self.clock.advance(0)
        self.failureResultOf(late, ConnectionDrainingError)
        self.assertNotIn(b"PUB svc", self.server.transport.value())
        self.assertNoResult(ds[0])

    def test_handler_request_during_drain(self) -> None:
        """A handler draining its mailbox may make a request; the drain waits for its
        answer, and then for the request made before the drain."""
        first, first_reply = self.requests(1)  # (the request inbox exists)
        answers: list[bytes] = []

        async def handler(msg: Msg) -> None:
            answers.append((await self.client.request("other", b"", timeout=5.0)).data)

        work = self.client.subscribe("work", handler)
        self.clock.advance(0)
        self.server.send(msg_frame("work", work.sid, b"job"))
        drained = self.client.drain()
        self.clock.advance(0)
        reply_to = replies(self.server.transport.value())
        self.assertEqual(len(reply_to), 1)
        self.pong()
        self.assertEqual(self.client.state, ClientState.DRAINING_SUBS)  # the handler waits
        self.server.send(msg_frame(reply_to[0], self.mux_sid(), b"other-answer"))
        self.clock.advance(0)
        self.assertEqual(answers, [b"other-answer"])
        self.clock.advance(0)
        self.assertEqual(self.client.state, ClientState.DRAINING_PUBS)
        self.assertNoResult(drained)  # the first request is still in flight
        self.server.send(msg_frame(first_reply[0], self.mux_sid(), b"first-answer"))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(first[0]).data, b"first-answer")
        self.clock.advance(0)
        self.pong()
        self.server.lose()
        self.clock.advance(0)
        self.successResultOf(drained)

    def test_drain_timeout_answers_once(self) -> None:
        """A drain that times out waiting for an unsubscribed subscription's unread
        messages fails with DrainTimeoutError once: the close it makes ends the
        subscription, which used to end the drain's steps too and fire its result a
        second time (an AlreadyCalledError logged as unhandled)."""
        client, server = self.connected(drain_timeout=1.0)
        sub = client.subscribe("feed")
        self.clock.advance(0)
        server.send(msg_frame("feed", sub.sid, b"a") + msg_frame("feed", sub.sid, b"b"))
        sub.unsubscribe()  # two messages still held, nobody reads them
        drained = client.drain()
        self.clock.advance(0)
        server.answer_pings()
        self.clock.advance(1.0)
        self.failureResultOf(drained, DrainTimeoutError)
        server.lose()
        self.clock.advance(0)
        self.assertTrue(client.is_closed)
        gc.collect()  # (an unhandled failure is logged when its Deferred is collected)
        self.assertEqual(self.flushLoggedErrors(), [])

    def test_request_many_in_flight(self) -> None:
        """request_many() in flight when the drain begins gathers until its own end
        (here max_msgs): its inbox is left for last too."""
        d = self.client.request_many("svc", b"", timeout=5.0, max_msgs=2)
        self.clock.advance(0)
        wire = self.server.transport.value()
        inbox = re.search(rb"SUB (_INBOX\.\S+) (\d+)\r\n", wire)
        assert inbox is not None
        self.server.reset()
        drained = self.client.drain()
        self.clock.advance(0)
        self.assertNotIn(b"UNSUB " + inbox.group(2) + b"\r\n", self.server.transport.value())
        self.pong()
        sid = int(inbox.group(2))
        self.server.send(msg_frame(inbox.group(1).decode(), sid, b"a"))
        self.server.send(msg_frame(inbox.group(1).decode(), sid, b"b"))
        self.clock.advance(0)
        self.assertEqual([m.data for m in self.successResultOf(d)], [b"a", b"b"])
        self.clock.advance(0)
        self.pong()
        self.server.lose()
        self.clock.advance(0)
        self.successResultOf(drained)


class DrainServerTests(ServerPerClass, unittest.TestCase):
    """Against a real nats-server."""

    async def test_hundred_requests_in_flight(self) -> None:
        """100 requests to a responder that answers after 0.5 s, then drain(): all 100
        get their answers, and the drain completes."""
        assert self.server is not None
        responder = await connect(reactor, self.server.url)
        self.addCleanup(responder.close)

        def answer(msg: Msg) -> Deferred[None]:
            return deferLater(reactor, 0.5, msg.respond, b"re:" + msg.data)

        responder.subscribe("slow.svc", answer, concurrency=200)
        await responder.flush(timeout=5)
        nc = await connect(reactor, self.server.url, drain_timeout=10.0)
        self.addCleanup(nc.close)
        ds = [nc.request("slow.svc", b"%d" % i, timeout=5.0) for i in range(100)]
        await nc.flush(timeout=5)
        start = reactor.seconds()
        drained = nc.drain()
        got = await bounded(gatherResults(ds), 8.0, "100 answers")
        self.assertEqual([m.data for m in got], [b"re:%d" % i for i in range(100)])
        await bounded(drained, 8.0, "the drain")
        self.assertTrue(nc.is_closed)
        self.assertLess(reactor.seconds() - start, 5.0)
