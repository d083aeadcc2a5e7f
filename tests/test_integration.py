"""
Integration tests: txnats against a real ``nats-server`` process.

Each TestCase class runs one server (from L{txnats.testing.NatsServer}); its tests make
their own clients and close them in a cleanup. Every wait is bounded: by a client
timeout or by L{bounded}, never by sleeping.

pytest calls C{setUpClass}/C{tearDownClass}; trial calls neither, so the class's server
is also started lazily in C{setUp}, the previous class's server stopped then, and the
last one when the process exits (see C{tests.support.servers}).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from twisted.internet.defer import (
    CancelledError,
    Deferred,
    gatherResults,
    succeed,
)
from twisted.internet.task import deferLater
from twisted.trial import unittest

import txnats
from txnats import (
    AuthorizationError,
    BadSubjectError,
    ClientState,
    ConnectionClosedError,
    HandlerError,
    Headers,
    MaxPayloadError,
    Msg,
    NatsError,
    NoRespondersError,
    NoServersError,
    SlowConsumerError,
    Subscription,
    SubscriptionClosedError,
)
from txnats.testing import NatsServer

from .support.files import free_port
from .support.servers import ServerPerClass
from .support.waits import WAIT, bounded, reactor

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], seconds: float = WAIT) -> Deferred[T]:
    """Run a coroutine as a Deferred with a deadline."""
    return bounded(Deferred.fromCoroutine(coro), seconds)


def later(seconds: float, fn: Callable[[], object] | None = None) -> Deferred[None]:
    """A Deferred fired by C{reactor.callLater(seconds, ...)} (after running C{fn})."""
    d: Deferred[None] = Deferred()

    def fire() -> None:
        if fn is not None:
            fn()
        d.callback(None)

    reactor.callLater(seconds, fire)
    return d


async def collect(sub: Subscription) -> list[Msg]:
    """Every message an C{async for} over C{sub} yields, until it ends."""
    return [msg async for msg in sub]


class Counter:
    """A handler that records messages and can be awaited for a count."""

    def __init__(self) -> None:
        self.msgs: list[Msg] = []
        self._waiters: list[tuple[int, Deferred[None]]] = []

    def __call__(self, msg: Msg) -> None:
        self.msgs.append(msg)
        self._wake()

    def _wake(self) -> None:
        ready = [(n, d) for n, d in self._waiters if len(self.msgs) >= n]
        self._waiters = [(n, d) for n, d in self._waiters if len(self.msgs) < n]
        for _, d in ready:
            d.callback(None)

    def wait_for(self, n: int, seconds: float = WAIT) -> Deferred[None]:
        """Fires once C{n} messages have been recorded (fails after C{seconds})."""
        if len(self.msgs) >= n:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._waiters.append((n, d))
        return bounded(d, seconds)

    @property
    def data(self) -> list[bytes]:
        return [m.data for m in self.msgs]


class ServerTestCase(ServerPerClass, unittest.TestCase):
    """One nats-server per TestCase class (see L{ServerPerClass}); helpers to connect to it."""

    server: NatsServer

    async def connect(self, url: str | None = None, **kwargs: Any) -> txnats.Client:
        """A connected client, closed when the test ends."""
        nc = await bounded(txnats.connect(reactor, url or self.server.url, **kwargs))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc

    async def assert_fails(
        self, d: Deferred[Any], *errors: type[BaseException], seconds: float = WAIT
    ) -> Any:
        """Assert C{d} fails with one of C{errors} within C{seconds}; return the error."""
        return await self.assertFailure(bounded(d, seconds), *errors)

    async def assert_healthy(self, nc: txnats.Client) -> None:
        """The connection still carries a request/reply round trip."""
        subject = nc.new_inbox()
        sub = nc.subscribe(subject, lambda m: m.respond(b"pong:" + m.data))
        try:
            reply = await nc.request(subject, b"ping", timeout=WAIT)
        finally:
            sub.unsubscribe()
        self.assertEqual(reply.data, b"pong:ping")
        self.assertTrue(nc.is_connected)


class PubSubTests(ServerTestCase):
    """Messages travel intact: payloads, headers, reply subjects."""

    async def test_round_trip(self) -> None:
        """A published message arrives with its subject, reply, data and sid."""
        nc = await self.connect()
        sub = nc.subscribe("rt.subject")
        nc.publish("rt.subject", b"hello", reply="rt.reply")
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.subject, "rt.subject")
        self.assertEqual(msg.reply, "rt.reply")
        self.assertEqual(msg.data, b"hello")
        self.assertIsNone(msg.headers)
        self.assertEqual(msg.sid, sub.sid)

    async def test_round_trip_between_clients(self) -> None:
        """A message published by one client reaches a subscriber on another."""
        sub_nc = await self.connect()
        pub_nc = await self.connect()
        sub = sub_nc.subscribe("rt.two")
        await sub_nc.flush(timeout=WAIT)
        pub_nc.publish("rt.two", b"across")
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"across")

    async def test_multi_value_headers(self) -> None:
        """Repeated headers arrive in order and with their names' case preserved."""
        nc = await self.connect()
        sub = nc.subscribe("hdr.multi")
        headers = Headers()
        headers.add("X-Multi", "one")
        headers.add("Other", "o")
        headers.add("X-Multi", "two")
        headers.add("x-multi", "lower")
        headers.add("X-Multi", "three")
        nc.publish("hdr.multi", b"body", headers=headers)
        nc.publish("hdr.multi", b"", headers={"X-List": ["b", "a", "c"], "Single": "1"})
        first = await sub.next_msg(timeout=WAIT)
        second = await sub.next_msg(timeout=WAIT)
        assert first.headers is not None and second.headers is not None
        self.assertEqual(first.data, b"body")
        self.assertEqual(first.headers.get_all("X-Multi"), ["one", "two", "three"])
        self.assertEqual(first.headers.get_all("x-multi"), ["lower"])
        self.assertEqual(first.headers["X-Multi"], "one")
        self.assertEqual(
            first.headers.multi_items(),
            [("X-Multi", "one"), ("Other", "o"), ("X-Multi", "two"),
             ("x-multi", "lower"), ("X-Multi", "three")],
        )
        self.assertIsNone(first.headers.status)
        self.assertEqual(second.headers.get_all("X-List"), ["b", "a", "c"])
        self.assertEqual(second.headers["Single"], "1")
        self.assertEqual(second.data, b"")

    async def test_empty_payload(self) -> None:
        """An empty payload arrives as b'' (with and without headers)."""
        nc = await self.connect()
        sub = nc.subscribe("empty.payload")
        nc.publish("empty.payload")
        nc.publish("empty.payload", b"", headers={"K": "v"})
        nc.publish("empty.payload", b"after")
        msgs = [await sub.next_msg(timeout=WAIT) for _ in range(3)]
        self.assertEqual([m.data for m in msgs], [b"", b"", b"after"])
        self.assertIsNone(msgs[0].headers)
        assert msgs[1].headers is not None
        self.assertEqual(msgs[1].headers["K"], "v")

    async def test_payload_with_crlf(self) -> None:
        """A payload holding CRLF and protocol-like text arrives intact, framing kept."""
        nc = await self.connect()
        sub = nc.subscribe("crlf.payload")
        tricky = b"line1\r\nline2\r\n\r\nPUB crlf.payload 3\r\nabc\r\nMSG x 1 2\r\n"
        nc.publish("crlf.payload", tricky)
        nc.publish("crlf.payload", b"\r\n")
        nc.publish("crlf.payload", tricky, headers={"H": "v"})
        nc.publish("crlf.payload", b"next")
        msgs = [await sub.next_msg(timeout=WAIT) for _ in range(4)]
        self.assertEqual([m.data for m in msgs], [tricky, b"\r\n", tricky, b"next"])

    async def test_large_binary_payload(self) -> None:
        """A 512 KiB binary payload (every byte value) arrives byte for byte."""
        nc = await self.connect()
        sub = nc.subscribe("big.binary")
        payload = bytes(range(256)) * 64 + os.urandom(512 * 1024 - 256 * 64)
        self.assertEqual(len(payload), 512 * 1024)
        self.assertLess(len(payload), nc.max_payload)
        nc.publish("big.binary", payload)
        nc.publish("big.binary", payload[::-1], headers={"Order": "2"})
        first = await sub.next_msg(timeout=WAIT)
        second = await sub.next_msg(timeout=WAIT)
        self.assertEqual(first.data, payload)
        self.assertEqual(second.data, payload[::-1])


class WildcardTests(ServerTestCase):
    """Wildcard subscriptions match exactly the subjects NATS says they match."""

    async def subjects_until(self, sub: Subscription, marker: str) -> list[str]:
        """Subjects read from C{sub} up to and including C{marker}."""
        seen = []
        while True:
            msg = await sub.next_msg(timeout=WAIT)
            seen.append(msg.subject)
            if msg.subject == marker:
                return seen

    async def test_star_matches_one_token(self) -> None:
        """'w.*' matches w.a and w.b but not w, w.a.b or x.a."""
        nc = await self.connect()
        sub = nc.subscribe("w.*")
        for subject in ["w", "w.a.b", "x.a", "w.a", "ww.a", "w.b", "a.w.c", "w.end"]:
            nc.publish(subject, b"")
        self.assertEqual(await self.subjects_until(sub, "w.end"), ["w.a", "w.b", "w.end"])

    async def test_star_in_the_middle(self) -> None:
        """'m.*.z' matches m.a.z but not m.z, m.a.b.z or m.a.y."""
        nc = await self.connect()
        sub = nc.subscribe("m.*.z")
        for subject in ["m.z", "m.a.b.z", "m.a.y", "m.a.z", "m.b.z.c", "m.end.z"]:
            nc.publish(subject, b"")
        self.assertEqual(await self.subjects_until(sub, "m.end.z"), ["m.a.z", "m.end.z"])

    async def test_gt_matches_one_or_more_tokens(self) -> None:
        """'g.>' matches g.a and g.a.b.c but not g or h.a."""
        nc = await self.connect()
        sub = nc.subscribe("g.>")
        for subject in ["g", "h.a", "g.a", "gg.a", "g.a.b.c", "a.g.b", "g.end"]:
            nc.publish(subject, b"")
        self.assertEqual(
            await self.subjects_until(sub, "g.end"), ["g.a", "g.a.b.c", "g.end"]
        )

    async def test_star_and_gt_together(self) -> None:
        """'s.*.t.>' needs one token after s, then t, then at least one more."""
        nc = await self.connect()
        sub = nc.subscribe("s.*.t.>")
        for subject in ["s.a.t", "s.t.x", "s.a.b.t.x", "s.a.t.x", "s.b.t.x.y", "s.z.t.end"]:
            nc.publish(subject, b"")
        self.assertEqual(
            await self.subjects_until(sub, "s.z.t.end"), ["s.a.t.x", "s.b.t.x.y", "s.z.t.end"]
        )


class QueueGroupTests(ServerTestCase):
    """Queue groups spread messages over their members, each message once."""

    async def test_queue_group_spreads_without_duplicates(self) -> None:
        """3 queue members share 300 messages: each gets some, together exactly 300."""
        counters = [Counter() for _ in range(3)]
        members = []
        for counter in counters:
            nc = await self.connect()
            nc.subscribe("q.work", counter, queue="workers")
            await nc.flush(timeout=WAIT)
            members.append(nc)
        pub = await self.connect()
        expected = [b"%d" % i for i in range(300)]
        for data in expected:
            pub.publish("q.work", data)
        await pub.flush(timeout=WAIT)
        # Every message the server routed to a member precedes the PONG it sends that
        # member, and the handler turn runs before the flush Deferred fires.
        for nc in members:
            await nc.flush(timeout=WAIT)
        counts = [len(c.msgs) for c in counters]
        self.assertEqual(sum(counts), 300, counts)
        for count in counts:
            self.assertGreater(count, 0, counts)
        got = sorted(d for c in counters for d in c.data)
        self.assertEqual(got, sorted(expected))


class AutoUnsubscribeTests(ServerTestCase):
    """A subscription with a message limit delivers exactly that many, then ends."""

    async def test_max_msgs_ends_async_for(self) -> None:
        """subscribe(max_msgs=3): async for yields exactly 3 messages, then ends."""
        nc = await self.connect()
        sub = nc.subscribe("au.max", max_msgs=3)
        for i in range(10):
            nc.publish("au.max", b"%d" % i)
        msgs = await run(collect(sub))
        self.assertEqual([m.data for m in msgs], [b"0", b"1", b"2"])
        self.assertEqual(sub.delivered, 3)
        await bounded(sub.when_ended())
        self.assertFalse(sub.is_active)
        await self.assert_fails(
            sub.next_msg(timeout=WAIT), SubscriptionClosedError
        )

    async def test_max_msgs_with_handler(self) -> None:
        """subscribe(handler, max_msgs=4): the handler runs exactly 4 times."""
        nc = await self.connect()
        counter = Counter()
        sub = nc.subscribe("au.handler", counter, max_msgs=4)
        for i in range(10):
            nc.publish("au.handler", b"%d" % i)
        await bounded(sub.when_ended())
        await nc.flush(timeout=WAIT)
        self.assertEqual(counter.data, [b"0", b"1", b"2", b"3"])
        self.assertFalse(sub.is_active)

    async def test_auto_unsubscribe_method(self) -> None:
        """sub.auto_unsubscribe(5) counts earlier messages; next_msg then fails closed."""
        nc = await self.connect()
        sub = nc.subscribe("au.method")
        nc.publish("au.method", b"early-0")
        nc.publish("au.method", b"early-1")
        await nc.flush(timeout=WAIT)
        self.assertEqual(sub.received, 2)
        sub.auto_unsubscribe(5)
        for i in range(10):
            nc.publish("au.method", b"late-%d" % i)
        await nc.flush(timeout=WAIT)
        got = [(await sub.next_msg(timeout=WAIT)).data for _ in range(5)]
        self.assertEqual(got, [b"early-0", b"early-1", b"late-0", b"late-1", b"late-2"])
        await self.assert_fails(
            sub.next_msg(timeout=WAIT), SubscriptionClosedError
        )
        self.assertEqual(sub.received, 5)
        self.assertFalse(sub.is_active)


class SlowConsumerTests(ServerTestCase):
    """Pending limits drop (and account for) what a slow handler cannot take."""

    async def test_slow_consumer_accounting(self) -> None:
        """With pending_msgs_limit=10 and a held handler, drops are counted and reported once."""
        errors: list[Exception] = []
        nc = await self.connect(error_cb=errors.append)
        gate: Deferred[None] = Deferred()
        handled: list[bytes] = []

        def slow(msg: Msg) -> Deferred[None] | None:
            handled.append(msg.data)
            return gate if len(handled) == 1 else None

        sub = nc.subscribe("slow.subject", slow, pending_msgs_limit=10)
        sibling = Counter()
        sibling_sub = nc.subscribe("slow.subject", sibling)
        await nc.flush(timeout=WAIT)
        for i in range(200):
            nc.publish("slow.subject", b"%d" % i)
        await nc.flush(timeout=WAIT)  # every MSG precedes this PONG

        def check_accounting() -> None:
            self.assertEqual(sub.received, 200)
            self.assertEqual(sub.delivered + sub.dropped + sub.pending_msgs, sub.received)

        check_accounting()
        self.assertEqual(sub.delivered, 1)
        # The mailbox is full, or one below full if the handler took its message
        # after the mailbox had filled up.
        self.assertIn(sub.pending_msgs, (9, 10))
        self.assertGreater(sub.dropped, 0)
        queued = sub.pending_msgs

        gate.callback(None)
        await nc.flush(timeout=WAIT)
        check_accounting()
        self.assertEqual(sub.pending_msgs, 0)
        self.assertEqual(sub.delivered, 1 + queued)
        self.assertEqual(sub.dropped, 199 - queued)
        self.assertEqual(len(handled), 1 + queued)
        self.assertEqual(handled, sorted(handled, key=int))  # in order, gaps where dropped

        slow_errors = [e for e in errors if isinstance(e, SlowConsumerError)]
        self.assertEqual(len(slow_errors), 1, errors)
        self.assertEqual(slow_errors[0].sid, sub.sid)
        self.assertEqual(slow_errors[0].subject, "slow.subject")

        self.assertEqual(sibling.data, [b"%d" % i for i in range(200)])
        self.assertEqual(sibling_sub.dropped, 0)


    async def test_one_report_per_overload_episode(self) -> None:
        """Sustained overload is reported once; a new overload after recovery is reported again."""
        errors: list[Exception] = []
        nc = await self.connect(error_cb=errors.append)
        hold = [True]
        gates: list[Deferred[None]] = []

        def handler(msg: Msg) -> Deferred[None] | None:
            if not hold[0]:
                return None
            gate: Deferred[None] = Deferred()
            gates.append(gate)
            return gate

        sub = nc.subscribe("slow.episode", handler, pending_msgs_limit=10)

        async def overload() -> None:
            nc.publish("slow.episode", b"first")
            await nc.flush(timeout=WAIT)  # the handler holds this one
            for _ in range(30):
                nc.publish("slow.episode", b"more")
            await nc.flush(timeout=WAIT)

        def reports() -> int:
            return len([e for e in errors if isinstance(e, SlowConsumerError)])

        await overload()
        self.assertEqual((len(gates), sub.pending_msgs, reports()), (1, 10, 1))
        # The handler takes one more message, freeing one slot; the burst that
        # follows refills the mailbox and drops again: still the same episode.
        gates[-1].callback(None)
        await nc.flush(timeout=WAIT)
        self.assertEqual((len(gates), sub.pending_msgs), (2, 9))
        for _ in range(30):
            nc.publish("slow.episode", b"again")
        await nc.flush(timeout=WAIT)
        self.assertEqual((sub.pending_msgs, reports()), (10, 1))
        # Recover: the mailbox empties. A new overload is a new episode.
        hold[0] = False
        gates[-1].callback(None)
        await nc.flush(timeout=WAIT)
        self.assertEqual(sub.pending_msgs, 0)
        hold[0] = True
        await overload()
        self.assertEqual(reports(), 2)
        self.assertEqual(sub.delivered + sub.dropped + sub.pending_msgs, sub.received)
        gates[-1].callback(None)


class HandlerTests(ServerTestCase):
    """Handlers: awaited results keep order; concurrency bounds overlap; errors reported."""

    async def test_coroutine_handler_is_awaited(self) -> None:
        """A coroutine handler finishes before the next message starts (order, no overlap)."""
        nc = await self.connect()
        events: list[str] = []
        done = Counter()

        async def handler(msg: Msg) -> None:
            events.append("start " + msg.data.decode())
            await later(0.005)
            events.append("end " + msg.data.decode())
            done(msg)

        nc.subscribe("h.coro", handler)
        for i in range(10):
            nc.publish("h.coro", b"%d" % i)
        await done.wait_for(10)
        expected = [f"{what} {i}" for i in range(10) for what in ("start", "end")]
        self.assertEqual(events, expected)

    async def test_deferred_handler_is_awaited(self) -> None:
        """A handler's Deferred fires before the next message starts (order, no overlap)."""
        nc = await self.connect()
        active = [0, 0]  # current, maximum
        done = Counter()

        def handler(msg: Msg) -> Deferred[None]:
            active[0] += 1
            active[1] = max(active)

            def finish() -> None:
                active[0] -= 1
                done(msg)

            return later(0.005, finish)

        nc.subscribe("h.deferred", handler)
        for i in range(10):
            nc.publish("h.deferred", b"%d" % i)
        await done.wait_for(10)
        self.assertEqual(done.data, [b"%d" % i for i in range(10)])
        self.assertEqual(active[1], 1)

    async def test_concurrency_three(self) -> None:
        """concurrency=3 runs up to 3 handler calls at once, and never more."""
        nc = await self.connect()
        active = [0, 0]
        done = Counter()

        def handler(msg: Msg) -> Deferred[None]:
            active[0] += 1
            active[1] = max(active)

            def finish() -> None:
                active[0] -= 1
                done(msg)

            return later(0.02, finish)

        nc.subscribe("h.concurrent", handler, concurrency=3)
        for i in range(15):
            nc.publish("h.concurrent", b"%d" % i)
        await done.wait_for(15)
        self.assertEqual(active[1], 3)
        self.assertEqual(sorted(done.data), sorted(b"%d" % i for i in range(15)))

    async def test_handler_exception_reported_and_delivery_continues(self) -> None:
        """A raising handler (sync or async) reaches error_cb; later messages still arrive."""
        errors: list[Exception] = []
        nc = await self.connect(error_cb=errors.append)
        seen = Counter()

        def handler(msg: Msg) -> Any:
            if msg.data == b"boom":
                raise ValueError("sync boom")
            if msg.data == b"async-boom":
                async def fail() -> None:
                    await later(0)
                    raise KeyError("async boom")
                return fail()
            seen(msg)
            return None

        sub = nc.subscribe("h.error", handler)
        for data in [b"a", b"boom", b"b", b"async-boom", b"c"]:
            nc.publish("h.error", data)
        await seen.wait_for(3)
        await nc.flush(timeout=WAIT)  # error_cb runs in a scheduled turn
        self.assertEqual(seen.data, [b"a", b"b", b"c"])
        self.assertTrue(sub.is_active)
        self.assertEqual([type(e) for e in errors], [HandlerError, HandlerError])
        self.assertEqual([type(e.__cause__) for e in errors], [ValueError, KeyError])
        self.assertEqual({(e.subject, e.sid) for e in errors}, {("h.error", sub.sid)})  # type: ignore[attr-defined]
        self.assertEqual(len(self.flushLoggedErrors(ValueError, KeyError)), 2)


class NextMsgTests(ServerTestCase):
    """Pull-style reading with next_msg()."""

    async def test_next_msg_returns_queued_messages(self) -> None:
        """Messages queued before next_msg() is called come out in order."""
        nc = await self.connect()
        sub = nc.subscribe("nm.queued")
        for i in range(3):
            nc.publish("nm.queued", b"%d" % i)
        await nc.flush(timeout=WAIT)
        self.assertEqual(sub.pending_msgs, 3)
        got = [(await sub.next_msg(timeout=WAIT)).data for _ in range(3)]
        self.assertEqual(got, [b"0", b"1", b"2"])
        self.assertEqual(sub.pending_msgs, 0)
        self.assertEqual(sub.delivered, 3)

    async def test_next_msg_times_out(self) -> None:
        """next_msg(timeout=0.1) with nothing published fails with txnats.TimeoutError."""
        nc = await self.connect()
        sub = nc.subscribe("nm.nothing")
        err = await self.assert_fails(
            sub.next_msg(timeout=0.1), txnats.TimeoutError
        )
        self.assertIsInstance(err, TimeoutError)  # the built-in too
        self.assertTrue(sub.is_active)

    async def test_cancelled_next_msg_loses_nothing(self) -> None:
        """Cancelling a pending next_msg() fails it; the next next_msg() gets the message."""
        nc = await self.connect()
        sub = nc.subscribe("nm.cancel")
        pending = sub.next_msg(timeout=WAIT)
        pending.cancel()
        await self.assert_fails(pending, CancelledError)
        nc.publish("nm.cancel", b"kept")
        await nc.flush(timeout=WAIT)
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"kept")
        self.assertEqual((sub.delivered, sub.pending_msgs, sub.dropped), (1, 0, 0))

    async def test_async_for_ends_on_unsubscribe(self) -> None:
        """An async for waiting on a subscription ends when it is unsubscribed."""
        nc = await self.connect()
        sub = nc.subscribe("af.unsub")
        got: list[bytes] = []

        async def reader() -> None:
            async for msg in sub:
                got.append(msg.data)
                if len(got) == 3:
                    sub.unsubscribe()

        for i in range(3):
            nc.publish("af.unsub", b"%d" % i)
        await run(reader())
        self.assertEqual(got, [b"0", b"1", b"2"])
        await bounded(sub.when_ended())
        self.assertFalse(sub.is_active)

    async def test_async_for_ends_when_unsubscribed_from_outside(self) -> None:
        """An async for blocked on an empty subscription ends when another party unsubscribes."""
        nc = await self.connect()
        sub = nc.subscribe("af.outside")
        reading = run(collect(sub))
        nc.publish("af.outside", b"only")
        await nc.flush(timeout=WAIT)
        sub.unsubscribe()
        msgs = await reading
        self.assertEqual([m.data for m in msgs], [b"only"])
        self.assertFalse(sub.is_active)

    async def test_drain_ends_once_queued_messages_are_read(self) -> None:
        """A drained pull subscription ends (when_ended fires) once its mailbox is read empty."""
        nc = await self.connect()
        sub = nc.subscribe("af.drain.late")
        for i in range(3):
            nc.publish("af.drain.late", b"%d" % i)
        await nc.flush(timeout=WAIT)
        drained = bounded(sub.drain())
        await nc.flush(timeout=WAIT)  # the server confirmed the UNSUB: no more input
        got = [(await sub.next_msg(timeout=WAIT)).data for _ in range(3)]
        self.assertEqual(got, [b"0", b"1", b"2"])
        await drained
        self.assertFalse(sub.is_active)
        await self.assert_fails(
            sub.next_msg(timeout=WAIT), SubscriptionClosedError
        )

    async def test_async_for_ends_on_drain(self) -> None:
        """sub.drain() lets an async for read every queued message, then ends it."""
        nc = await self.connect()
        sub = nc.subscribe("af.drain")
        for i in range(5):
            nc.publish("af.drain", b"%d" % i)
        await nc.flush(timeout=WAIT)
        self.assertEqual(sub.pending_msgs, 5)
        drained = bounded(sub.drain())
        msgs = await run(collect(sub))
        await drained
        self.assertEqual([m.data for m in msgs], [b"%d" % i for i in range(5)])
        self.assertFalse(sub.is_active)


class RequestTests(ServerTestCase):
    """request(): replies, no responders, timeouts, cancellation, multiplexing."""

    async def test_request_reply(self) -> None:
        """A request gets the responder's reply (headers included)."""
        responder = await self.connect()
        responder.subscribe(
            "rq.echo", lambda m: m.respond(b"echo:" + m.data, headers={"Re": m.subject})
        )
        await responder.flush(timeout=WAIT)
        nc = await self.connect()
        reply = await nc.request("rq.echo", b"hi", timeout=WAIT)
        self.assertEqual(reply.data, b"echo:hi")
        assert reply.headers is not None
        self.assertEqual(reply.headers["Re"], "rq.echo")

    async def test_no_responders(self) -> None:
        """A request nobody subscribes to fails with NoRespondersError, not a timeout."""
        nc = await self.connect()
        await self.assert_fails(
            nc.request("rq.nobody.home", b"?", timeout=WAIT), NoRespondersError
        )
        await self.assert_healthy(nc)

    async def test_request_timeout(self) -> None:
        """A subscriber that never answers makes the request fail with txnats.TimeoutError."""
        nc = await self.connect()
        heard = Counter()
        nc.subscribe("rq.silent", heard)
        await nc.flush(timeout=WAIT)
        await self.assert_fails(nc.request("rq.silent", b"?", timeout=0.2), txnats.TimeoutError)
        # On a loaded machine the 0.2 s may run out before the request has come back to
        # the subscriber; it has once the server answered a PING sent after it.
        await nc.flush(timeout=WAIT)
        self.assertEqual(len(heard.msgs), 1)

    async def test_cancel_request_drops_late_reply(self) -> None:
        """d.cancel() fails a request with CancelledError; its late reply is dropped quietly."""
        errors: list[Exception] = []
        responder = await self.connect(error_cb=errors.append)
        held = Counter()
        responder.subscribe("rq.slow", held)
        await responder.flush(timeout=WAIT)
        nc = await self.connect(error_cb=errors.append)
        d = nc.request("rq.slow", b"q", timeout=WAIT)
        await held.wait_for(1)
        d.cancel()
        await self.assert_fails(d, CancelledError)
        held.msgs[0].respond(b"too late")
        await responder.flush(timeout=WAIT)
        await nc.flush(timeout=WAIT)  # the late reply has arrived and been handled
        self.assertEqual(errors, [])
        self.assertEqual(self.flushLoggedErrors(), [])
        # The multiplexer still works.
        responder.subscribe("rq.fast", lambda m: m.respond(b"ok"))
        await responder.flush(timeout=WAIT)
        self.assertEqual((await nc.request("rq.fast", timeout=WAIT)).data, b"ok")

    async def test_many_concurrent_requests(self) -> None:
        """100 concurrent requests answered out of order each get their own reply."""
        responder = await self.connect()
        rng = random.Random(1234)

        def answer(msg: Msg) -> Deferred[None]:
            return deferLater(
                reactor, rng.uniform(0, 0.02), msg.respond, b"re:" + msg.data
            )

        responder.subscribe("rq.many", answer, concurrency=100)
        await responder.flush(timeout=WAIT)
        nc = await self.connect()
        payloads = [b"%d" % i for i in range(100)]
        replies = await bounded(
            gatherResults([nc.request("rq.many", p, timeout=WAIT) for p in payloads])
        )
        self.assertEqual([r.data for r in replies], [b"re:" + p for p in payloads])


class RequestManyTests(ServerTestCase):
    """request_many(): gathering several replies, and what ends the gathering."""

    async def responders(self, subject: str, n: int) -> txnats.Client:
        """A client with C{n} subscribers on C{subject}, each answering with its index."""
        nc = await self.connect()
        for i in range(n):
            nc.subscribe(subject, lambda m, i=i: m.respond(b"r%d" % i))
        await nc.flush(timeout=WAIT)
        return nc

    async def test_gathers_all_until_timeout(self) -> None:
        """With 3 responders and only a timeout, all 3 replies are gathered."""
        await self.responders("rm.all", 3)
        nc = await self.connect()
        msgs = await bounded(nc.request_many("rm.all", b"?", timeout=0.5))
        self.assertEqual(sorted(m.data for m in msgs), [b"r0", b"r1", b"r2"])

    async def test_max_msgs(self) -> None:
        """max_msgs=2 stops after two replies although three responders answer."""
        await self.responders("rm.max", 3)
        nc = await self.connect()
        msgs = await bounded(nc.request_many("rm.max", b"?", timeout=30, max_msgs=2), 3)
        self.assertEqual(len(msgs), 2)

    async def test_stall(self) -> None:
        """stall=0.2 ends gathering after the last quick reply, well before the timeout."""
        await self.responders("rm.stall", 2)
        held = Counter()
        late = await self.connect()
        late.subscribe("rm.stall", held)
        await late.flush(timeout=WAIT)
        nc = await self.connect()
        msgs = await bounded(
            nc.request_many("rm.stall", b"?", timeout=30, stall=0.2), 3
        )
        self.assertEqual(sorted(m.data for m in msgs), [b"r0", b"r1"])
        held.msgs[0].respond(b"late")  # after the gathering: dropped quietly
        await late.flush(timeout=WAIT)
        await nc.flush(timeout=WAIT)

    async def test_sentinel(self) -> None:
        """A reply the sentinel accepts ends gathering and is not included."""
        responder = await self.connect()

        def answer(msg: Msg) -> None:
            for data in (b"1", b"2", b"", b"after"):
                msg.respond(data)

        responder.subscribe("rm.sentinel", answer)
        await responder.flush(timeout=WAIT)
        nc = await self.connect()
        msgs = await bounded(
            nc.request_many("rm.sentinel", b"?", timeout=30, sentinel=lambda m: not m.data), 3
        )
        self.assertEqual([m.data for m in msgs], [b"1", b"2"])

    async def test_no_responders(self) -> None:
        """request_many to a subject nobody subscribes to fails with NoRespondersError."""
        nc = await self.connect()
        await self.assert_fails(
            nc.request_many("rm.nobody", b"?", timeout=WAIT), NoRespondersError
        )
        await self.assert_healthy(nc)


class FlushTests(ServerTestCase):
    """flush(), rtt(), and what is pending when the client closes."""

    async def test_flush_means_processed(self) -> None:
        """After the publisher's flush, the server has routed every message to subscribers."""
        sub_nc = await self.connect()
        sub = sub_nc.subscribe("fl.done")
        await sub_nc.flush(timeout=WAIT)
        pub = await self.connect()
        for i in range(10):
            pub.publish("fl.done", b"%d" % i)
        self.assertIsNone(await pub.flush(timeout=WAIT))
        await sub_nc.flush(timeout=WAIT)
        self.assertEqual(sub.received, 10)
        self.assertEqual(sub.pending_msgs, 10)

    async def test_rtt(self) -> None:
        """rtt() returns a positive float (seconds)."""
        nc = await self.connect()
        rtt = await nc.rtt(timeout=WAIT)
        self.assertIsInstance(rtt, float)
        self.assertGreater(rtt, 0)
        self.assertLess(rtt, WAIT)

    async def test_close_fails_pending_work(self) -> None:
        """flush, request and next_msg pending at close() fail with ConnectionClosedError."""
        nc = await self.connect()
        silent = nc.subscribe("fl.silent")
        await nc.flush(timeout=WAIT)
        flushing = nc.flush(timeout=WAIT)
        requesting = nc.request("fl.silent", b"?", timeout=WAIT)
        reading = nc.subscribe("fl.nothing").next_msg(timeout=WAIT)
        closing = nc.close()
        await self.assert_fails(flushing, ConnectionClosedError)
        await self.assert_fails(requesting, ConnectionClosedError)
        await self.assert_fails(reading, ConnectionClosedError)
        await bounded(closing)
        self.assertFalse(silent.is_active)


class DrainTests(ServerTestCase):
    """drain() hands out everything already received before closing."""

    def slow_handler(
        self, handled: list[bytes], started: Deferred[None], active: list[int]
    ) -> Callable[[Msg], Deferred[None]]:
        """A handler taking 0.05 s per message, recording overlap and what it handled."""

        def handler(msg: Msg) -> Deferred[None]:
            if not started.called:
                started.callback(None)
            active[0] += 1
            active[1] = max(active)

            def finish() -> None:
                active[0] -= 1
                handled.append(msg.data)

            return later(0.05, finish)

        return handler

    async def test_client_drain_with_handlers_in_flight(self) -> None:
        """nc.drain() waits for all 50 in-flight messages, then closes; publish then fails."""
        nc = await self.connect()
        handled: list[bytes] = []
        started: Deferred[None] = Deferred()
        active = [0, 0]
        sub = nc.subscribe("dr.client", self.slow_handler(handled, started, active), concurrency=5)
        await nc.flush(timeout=WAIT)
        pub = await self.connect()
        expected = [b"%d" % i for i in range(50)]
        for data in expected:
            pub.publish("dr.client", data)
        await pub.flush(timeout=WAIT)
        await bounded(started)
        self.assertLess(len(handled), 50)
        await bounded(nc.drain())
        self.assertEqual(sorted(handled), sorted(expected))
        self.assertEqual(active, [0, 5])
        self.assertEqual(nc.state, ClientState.CLOSED)
        self.assertFalse(sub.is_active)
        self.assertRaises(ConnectionClosedError, nc.publish, "dr.client", b"late")

    async def test_subscription_drain_with_handlers_in_flight(self) -> None:
        """sub.drain() alone handles all 50 messages, ends the sub, and leaves the client up."""
        nc = await self.connect()
        handled: list[bytes] = []
        started: Deferred[None] = Deferred()
        active = [0, 0]
        sub = nc.subscribe("dr.sub", self.slow_handler(handled, started, active), concurrency=5)
        await nc.flush(timeout=WAIT)
        pub = await self.connect()
        expected = [b"%d" % i for i in range(50)]
        for data in expected:
            pub.publish("dr.sub", data)
        await pub.flush(timeout=WAIT)
        await bounded(started)
        self.assertLess(len(handled), 50)
        await bounded(sub.drain())
        self.assertEqual(sorted(handled), sorted(expected))
        self.assertEqual(active[0], 0)
        self.assertFalse(sub.is_active)
        self.assertEqual(nc.state, ClientState.CONNECTED)
        # Unsubscribed at the server: new messages are not delivered to it.
        pub.publish("dr.sub", b"after")
        await pub.flush(timeout=WAIT)
        await nc.flush(timeout=WAIT)
        self.assertEqual(len(handled), 50)
        await self.assert_healthy(nc)

    async def test_publish_from_handler_during_drain(self) -> None:
        """A handler still answers a request while its client drains; afterwards publish fails."""
        responder = await self.connect()
        got: Deferred[None] = Deferred()

        def handler(msg: Msg) -> Deferred[None]:
            got.callback(None)
            return later(0.05, lambda: msg.respond(b"answered while draining"))

        responder.subscribe("dr.svc", handler)
        await responder.flush(timeout=WAIT)
        nc = await self.connect()
        reply_d = nc.request("dr.svc", b"q", timeout=WAIT)
        await bounded(got)
        drained = bounded(responder.drain())
        self.assertEqual(responder.state, ClientState.DRAINING_SUBS)
        self.assertRaises(NatsError, responder.subscribe, "dr.new")
        reply = await bounded(reply_d)
        self.assertEqual(reply.data, b"answered while draining")
        await drained
        self.assertEqual(responder.state, ClientState.CLOSED)
        self.assertRaises(ConnectionClosedError, responder.publish, "dr.svc", b"x")


class MaxPayloadTests(ServerTestCase):
    """Publishing more than the server's max_payload is refused locally."""

    server_options = {"config": "max_payload: 1024\n"}

    async def test_max_payload_enforced_locally(self) -> None:
        """Over max_payload (headers counted) raises MaxPayloadError; nothing is sent."""
        errors: list[Exception] = []
        nc = await self.connect(error_cb=errors.append)
        self.assertEqual(nc.max_payload, 1024)
        self.assertEqual(nc.server_info["max_payload"], 1024)
        sub = nc.subscribe("mp.subject")
        await nc.flush(timeout=WAIT)
        out_before = nc.stats.out_msgs
        self.assertRaises(MaxPayloadError, nc.publish, "mp.subject", b"x" * 1025)
        # 1000 bytes of data fit alone, but not with a 100-byte header.
        self.assertRaises(
            MaxPayloadError, nc.publish, "mp.subject", b"y" * 1000, headers={"Pad": "p" * 100}
        )
        self.assertEqual(nc.stats.out_msgs, out_before)
        nc.publish("mp.subject", b"z" * 1024)  # exactly the limit is fine
        nc.publish("mp.subject", b"y" * 1000)
        await nc.flush(timeout=WAIT)
        self.assertEqual(sub.received, 2)
        first = await sub.next_msg(timeout=WAIT)
        second = await sub.next_msg(timeout=WAIT)
        self.assertEqual((first.data, second.data), (b"z" * 1024, b"y" * 1000))
        await self.assert_healthy(nc)
        self.assertEqual(errors, [])

    async def test_request_over_max_payload_fails(self) -> None:
        """A request over max_payload fails with MaxPayloadError and leaves the client usable."""
        nc = await self.connect()
        await self.assert_fails(nc.request("mp.req", b"q" * 2000, timeout=WAIT), MaxPayloadError)
        await self.assert_healthy(nc)


class BadSubjectTests(ServerTestCase):
    """Invalid subjects and queue names are refused locally; the connection survives."""

    async def check_refused(self, call: Callable[[txnats.Client], object]) -> None:
        errors: list[Exception] = []
        nc = await self.connect(error_cb=errors.append)
        self.assertRaises(BadSubjectError, call, nc)
        await self.assert_healthy(nc)
        self.assertEqual(errors, [])

    async def test_publish_subject_with_space(self) -> None:
        """publish('a b') raises BadSubjectError."""
        await self.check_refused(lambda nc: nc.publish("a b", b""))

    async def test_publish_empty_token(self) -> None:
        """publish('a..b') raises BadSubjectError."""
        await self.check_refused(lambda nc: nc.publish("a..b", b""))

    async def test_publish_wildcard(self) -> None:
        """publish('a.*') raises BadSubjectError (and so does a '>' subject)."""
        await self.check_refused(lambda nc: nc.publish("a.*", b""))
        await self.check_refused(lambda nc: nc.publish("a.>", b""))

    async def test_publish_bad_reply(self) -> None:
        """publish with reply='r x' raises BadSubjectError."""
        await self.check_refused(lambda nc: nc.publish("ok", b"", reply="r x"))

    async def test_subscribe_gt_not_last(self) -> None:
        """subscribe('a.>.b') raises BadSubjectError."""
        await self.check_refused(lambda nc: nc.subscribe("a.>.b"))

    async def test_subscribe_bad_queue(self) -> None:
        """subscribe('ok', queue='bad queue') raises BadSubjectError."""
        await self.check_refused(lambda nc: nc.subscribe("ok", queue="bad queue"))

    async def test_refused_subscribe_leaves_no_subscription(self) -> None:
        """A refused subscribe registers nothing on the client."""
        nc = await self.connect()
        before = len(nc.subscriptions)
        self.assertRaises(BadSubjectError, nc.subscribe, "a.>.b")
        self.assertEqual(len(nc.subscriptions), before)


class CloseTests(ServerTestCase):
    """close() and when_closed(); what a closed client refuses."""

    async def test_close_is_idempotent(self) -> None:
        """close() twice and when_closed() for each caller all fire; closed_cb runs once."""
        closed_calls: list[None] = []
        nc = await self.connect(closed_cb=lambda: closed_calls.append(None))
        early = [nc.when_closed(), nc.when_closed()]
        first = nc.close()
        second = nc.close()
        await bounded(gatherResults([first, second, *early]))
        await bounded(nc.close())
        await bounded(nc.when_closed())
        self.assertTrue(nc.is_closed)
        self.assertIsNone(nc.connected_url)
        self.assertEqual(len(closed_calls), 1)

    async def test_closed_client_refuses_work(self) -> None:
        """After close, publish/subscribe raise and request/flush fail: ConnectionClosedError."""
        nc = await self.connect()
        await bounded(nc.close())
        self.assertRaises(ConnectionClosedError, nc.publish, "x", b"")
        self.assertRaises(ConnectionClosedError, nc.subscribe, "x")
        await self.assert_fails(nc.request("x", b"", timeout=WAIT), ConnectionClosedError)
        await self.assert_fails(nc.flush(timeout=WAIT), ConnectionClosedError)

    async def test_connect_to_nothing(self) -> None:
        """Connecting where nothing listens fails with NoServersError and leaves no timers."""
        port = free_port()
        d = txnats.connect(reactor, f"nats://127.0.0.1:{port}", connect_timeout=0.5)
        err = await self.assert_fails(d, NoServersError)
        self.assertIn(str(port), str(err))

    async def test_server_info_and_connected_url(self) -> None:
        """A connected client exposes the server's INFO and the URL it reached."""
        nc = await self.connect(name="txnats-integration")
        self.assertEqual(nc.connected_url, self.server.url)
        self.assertIn("server_id", nc.server_info)
        self.assertTrue(nc.server_info.get("headers"))
        self.assertEqual(nc.state, ClientState.CONNECTED)

    async def test_stats(self) -> None:
        """stats in/out message and payload-byte counters match what was sent and received."""
        sub_nc = await self.connect()
        counter = Counter()
        sub_nc.subscribe("st.subject", counter)
        await sub_nc.flush(timeout=WAIT)
        pub = await self.connect()
        payloads = [b"x" * n for n in (0, 1, 10, 100, 1000)]
        for p in payloads:
            pub.publish("st.subject", p)
        pub.publish("st.subject", b"hdr", headers={"K": "v"})
        pub.publish("st.nobody", b"unheard")
        sent = [*payloads, b"hdr"]
        await pub.flush(timeout=WAIT)
        await counter.wait_for(len(sent))
        self.assertEqual(pub.stats.out_msgs, len(sent) + 1)
        self.assertEqual(pub.stats.out_bytes, sum(map(len, sent)) + len(b"unheard"))
        self.assertEqual((pub.stats.in_msgs, pub.stats.in_bytes), (0, 0))
        self.assertEqual(sub_nc.stats.in_msgs, len(sent))
        self.assertEqual(sub_nc.stats.in_bytes, sum(map(len, sent)))
        # What one side counts out is what the other counts in (headers alike).
        self.assertEqual(
            pub.stats.out_bytes - len(b"unheard"), sub_nc.stats.in_bytes
        )
        self.assertEqual((sub_nc.stats.out_msgs, sub_nc.stats.out_bytes), (0, 0))
        self.assertEqual(sub_nc.stats.reconnects, 0)


USER, PASSWORD, TOKEN = "alice", "pw-Secr3t", "s3cret-T0ken"


class UserPasswordAuthTests(ServerTestCase):
    """A server that requires a user and password."""

    server_options = {"config": f'authorization {{ user: {USER}, password: "{PASSWORD}" }}\n'}

    def url(self, auth: str) -> str:
        return f"nats://{auth}@{self.server.host}:{self.server.port}"

    def assert_redacted(self, nc: txnats.Client) -> None:
        for text in (nc.connected_url or "", repr(nc), *nc.servers):
            self.assertNotIn(PASSWORD, text)

    async def test_credentials_in_url(self) -> None:
        """nats://user:pass@host:port connects; connected_url hides the password."""
        nc = await self.connect(self.url(f"{USER}:{PASSWORD}"))
        self.assertIsNotNone(nc.connected_url)
        self.assert_redacted(nc)
        await self.assert_healthy(nc)

    async def test_credentials_as_options(self) -> None:
        """user= and password= options connect; connected_url hides the password."""
        nc = await self.connect(user=USER, password=PASSWORD)
        self.assert_redacted(nc)
        await self.assert_healthy(nc)

    async def test_wrong_password_in_url(self) -> None:
        """A wrong password in the URL fails with AuthorizationError."""
        await self.assert_fails(
            txnats.connect(reactor, self.url(f"{USER}:wrong")), AuthorizationError
        )

    async def test_wrong_password_as_option(self) -> None:
        """A wrong password= option fails with AuthorizationError."""
        d = txnats.connect(reactor, self.server.url, user=USER, password="wrong")
        await self.assert_fails(d, AuthorizationError)

    async def test_no_credentials(self) -> None:
        """Connecting without credentials fails with AuthorizationError."""
        await self.assert_fails(txnats.connect(reactor, self.server.url), AuthorizationError)


class TokenAuthTests(ServerTestCase):
    """A server that requires a token."""

    server_options = {"config": f'authorization {{ token: "{TOKEN}" }}\n'}

    def assert_redacted(self, nc: txnats.Client) -> None:
        for text in (nc.connected_url or "", repr(nc), *nc.servers):
            self.assertNotIn(TOKEN, text)

    async def test_token_in_url(self) -> None:
        """nats://token@host:port connects; connected_url hides the token."""
        nc = await self.connect(f"nats://{TOKEN}@{self.server.host}:{self.server.port}")
        self.assertIsNotNone(nc.connected_url)
        self.assert_redacted(nc)
        await self.assert_healthy(nc)

    async def test_token_as_option(self) -> None:
        """The token= option connects; connected_url hides the token."""
        nc = await self.connect(token=TOKEN)
        self.assert_redacted(nc)
        await self.assert_healthy(nc)

    async def test_wrong_token(self) -> None:
        """A wrong token (URL or option) fails with AuthorizationError."""
        url = f"nats://wrong@{self.server.host}:{self.server.port}"
        await self.assert_fails(txnats.connect(reactor, url), AuthorizationError)
        await self.assert_fails(
            txnats.connect(reactor, self.server.url, token="wrong"), AuthorizationError
        )
