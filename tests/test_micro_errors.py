"""What goes wrong around a service's handlers, against a real nats-server: requests
over an endpoint's pending limits answered 503 at once (never left to time out), the
service's error handler told of them and of subscriptions the server refuses (the
service then stops with that error), and the core ``on_drop`` hook they are built on."""

from __future__ import annotations

from typing import Any, ClassVar

from twisted.internet.defer import Deferred, DeferredList
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats import Msg, micro
from txnats.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NatsError,
    PermissionViolationError,
    SlowConsumerError,
)
from txnats.micro import ERROR_CODE_HEADER, ERROR_HEADER, Request

#: The user may not subscribe to ``forbidden.>``: an endpoint there is refused.
REFUSING = """
authorization {
  users = [
    {user: svc, password: svc, permissions: {subscribe: {allow: [">"], deny: ["forbidden.>"]}}}
  ]
}
"""


class Holding:
    """A handler that holds its first request (until :meth:`release`) and answers the
    rest at once, echoing each."""

    def __init__(self) -> None:
        self.entered: Deferred[None] = Deferred()
        self._held: Deferred[None] | None = None

    def __call__(self, req: Request) -> Deferred[None] | None:
        req.respond(req.data or b"ok")
        if self.entered.called:
            return None
        self.entered.callback(None)
        self._held = Deferred()
        return self._held

    def release(self) -> None:
        assert self._held is not None
        self._held.callback(None)


class PendingLimitTests(ServerPerClass, TestCase):
    timeout = 60

    async def connect(self) -> txnats.Client:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(nc.close)
        return nc

    async def test_requests_over_the_limit_answered_503(self) -> None:
        """With one request in the handler and two waiting (the limit), every further
        request is answered at once with error 503, counted (requests and errors), and
        the error handler hears of the run once; the waiting ones are then served."""
        nc = await self.connect()
        errors: list[tuple[micro.Service, NatsError]] = []
        svc = micro.add_service(nc, name="limited", version="1.0.0",
                                error_handler=lambda s, e: errors.append((s, e)))
        handler = Holding()
        ep = svc.add_endpoint("work", handler, subject="limited.work", pending_msgs_limit=2)
        self.assertEqual((ep.pending_msgs_limit, ep.pending_bytes_limit),
                         (2, nc.options.pending_bytes_limit))
        await bounded(nc.flush())
        caller = await self.connect()
        first = caller.request("limited.work", b"0", timeout=WAIT)
        await bounded(handler.entered)  # the handler holds request 0 until released
        rest = [caller.request("limited.work", str(i).encode(), timeout=WAIT)
                for i in range(1, 6)]
        refused = rest[2:]  # 1 and 2 wait within the limit; 3, 4, 5 are over it
        answers = await bounded(DeferredList(refused, fireOnOneErrback=True, consumeErrors=True))
        for _, msg in answers:
            assert msg.headers is not None
            self.assertEqual(msg.headers.get(ERROR_CODE_HEADER), "503")
            self.assertIn("too many requests pending", msg.headers.get(ERROR_HEADER, ""))
        self.assertFalse(any(d.called for d in rest[:2]), "the waiting requests were answered")
        self.assertEqual([type(e) for _, e in errors], [SlowConsumerError])
        self.assertIs(errors[0][0], svc)
        self.assertEqual(errors[0][1].subject, "limited.work")
        self.assertEqual((ep.num_requests, ep.num_errors), (4, 3))
        self.assertTrue(ep.last_error.startswith("503:"), ep.last_error)
        handler.release()
        served = await bounded(DeferredList([first, *rest[:2]], fireOnOneErrback=True,
                                            consumeErrors=True))
        self.assertEqual([m.data for _, m in served], [b"0", b"1", b"2"])
        self.assertEqual((ep.num_requests, ep.num_errors), (6, 3))
        self.assertTrue(ep.is_active)
        self.assertFalse(svc.is_stopped, "a burst over the limit stopped the service")

    async def test_group_endpoint_byte_limit(self) -> None:
        """A group's endpoint takes the limits too; a request over the byte limit is
        refused while a smaller one fits."""
        nc = await self.connect()
        svc = micro.add_service(nc, name="bytes", version="1.0.0")
        handler = Holding()
        ep = svc.add_group("g").add_endpoint("work", handler, pending_bytes_limit=100)
        self.assertEqual(ep.subject, "g.work")
        await bounded(nc.flush())
        caller = await self.connect()
        first = caller.request("g.work", b"", timeout=WAIT)
        await bounded(handler.entered)
        small = caller.request("g.work", b"x" * 60, timeout=WAIT)
        big = caller.request("g.work", b"x" * 60, timeout=WAIT)  # 120 bytes would wait
        msg = await bounded(big)
        assert msg.headers is not None
        self.assertEqual(msg.headers.get(ERROR_CODE_HEADER), "503")
        self.assertFalse(small.called)
        handler.release()
        self.assertEqual((await bounded(small)).data, b"x" * 60)
        await bounded(first)

    async def test_limits_checked(self) -> None:
        """A pending limit below 1 is refused with InvalidArgumentError, and nothing is
        subscribed; an error handler that is not callable is refused at add_service."""
        nc = await self.connect()
        svc = micro.add_service(nc, name="checked", version="1.0.0")
        before = len(nc.subscriptions)
        for bad in ({"pending_msgs_limit": 0}, {"pending_bytes_limit": -1}):
            with self.assertRaises(InvalidArgumentError):
                svc.add_endpoint("work", lambda r: None, **bad)
        self.assertEqual((len(nc.subscriptions), svc.endpoints), (before, []))
        with self.assertRaises(InvalidArgumentTypeError):
            micro.add_service(nc, name="x", version="1.0.0", error_handler="log")  # type: ignore[arg-type]


class RefusedSubscriptionTests(ServerPerClass, TestCase):
    server_options: ClassVar[dict[str, Any]] = {"config": REFUSING}
    timeout = 60

    async def test_refused_endpoint_stops_the_service(self) -> None:
        """The server refusing an endpoint's subscription reaches the error handler as
        a PermissionViolationError naming the subject, is counted on the endpoint, and
        stops the service: when_stopped() fires with that error. Another service on the
        same client goes on answering."""
        assert self.server is not None
        url = self.server.url.replace("nats://", "nats://svc:svc@")
        nc = await bounded(txnats.connect(reactor, url, error_cb=lambda e: None))
        self.addCleanup(nc.close)
        errors: list[NatsError] = []
        other = micro.add_service(nc, name="other", version="1.0.0")
        other.add_endpoint("fine", lambda r: r.respond(b"fine"), subject="allowed.fine")
        svc = micro.add_service(nc, name="refused", version="1.0.0",
                                error_handler=lambda s, e: errors.append(e))
        ep = svc.add_endpoint("work", lambda r: r.respond(b"no"), subject="forbidden.work")
        reason = await bounded(svc.when_stopped())
        self.assertIsInstance(reason, PermissionViolationError)
        self.assertEqual([type(e) for e in errors], [PermissionViolationError])
        assert isinstance(reason, PermissionViolationError)
        self.assertEqual((reason.operation, reason.subject), ("subscribe", "forbidden.work"))
        self.assertEqual(ep.num_errors, 1)
        self.assertIn("forbidden.work", ep.last_error)
        self.assertTrue(svc.is_stopped)
        self.assertFalse(other.is_stopped)
        self.assertEqual((await bounded(nc.request("allowed.fine", timeout=WAIT))).data,
                         b"fine")

    async def test_error_handler_that_raises_is_logged(self) -> None:
        """An error handler that raises does not keep the service from stopping; what
        it raised is logged."""
        assert self.server is not None
        url = self.server.url.replace("nats://", "nats://svc:svc@")
        nc = await bounded(txnats.connect(reactor, url, error_cb=lambda e: None))
        self.addCleanup(nc.close)

        def broken(svc: micro.Service, error: NatsError) -> None:
            raise RuntimeError("the handler's own bug")

        svc = micro.add_service(nc, name="broken", version="1.0.0", error_handler=broken)
        svc.add_endpoint("work", lambda r: None, subject="forbidden.broken")
        self.assertIsInstance(await bounded(svc.when_stopped()), PermissionViolationError)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class OnDropTests(ServerPerClass, TestCase):
    timeout = 60

    async def test_dropped_messages_passed_on_answerable(self) -> None:
        """Messages over a subscription's pending limit reach on_drop, each once and in
        order, in a later batch of work (never while parsing), and can be answered:
        the requester of a dropped request gets on_drop's reply at once."""
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, error_cb=lambda e: None))
        self.addCleanup(nc.close)
        dropped: list[Msg] = []

        def on_drop(msg: Msg) -> None:
            dropped.append(msg)
            if msg.reply:
                msg.respond(b"busy")

        sub = nc.subscribe("drops", pending_msgs_limit=1, on_drop=on_drop)
        await bounded(nc.flush())
        for i in range(3):
            nc.publish("drops", str(i).encode())
        reply = await bounded(nc.request("drops", b"3", timeout=WAIT))
        self.assertEqual(reply.data, b"busy")
        self.assertEqual([m.data for m in dropped], [b"1", b"2", b"3"])
        self.assertEqual(sub.dropped, 3)
        self.assertEqual((await bounded(sub.next_msg())).data, b"0")

    async def test_on_drop_that_raises_is_logged(self) -> None:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, error_cb=lambda e: None))
        self.addCleanup(nc.close)

        def on_drop(msg: Msg) -> None:
            raise RuntimeError("on_drop bug")

        sub = nc.subscribe("drops2", pending_msgs_limit=1, on_drop=on_drop)
        await bounded(nc.flush())
        nc.publish("drops2", b"a")
        nc.publish("drops2", b"b")
        await bounded(nc.flush())
        await wait_until(lambda: bool(self.flushLoggedErrors(RuntimeError)), what="the log")
        self.assertEqual((await bounded(sub.next_msg())).data, b"a")
        self.assertTrue(sub.is_active)


class OnDropArgumentTests(SynchronousTestCase):
    def test_not_callable_refused(self) -> None:
        """An on_drop that is not callable is refused before anything is subscribed."""
        from txnats.subscription import check_subscribe

        with self.assertRaises(InvalidArgumentTypeError) as e:
            check_subscribe(None, None, 1, 10, 10, on_drop="log")
        self.assertIn("on_drop", str(e.exception))
