"""Shutdown with work in flight (class 5, the bridge's half).

Stopping the bridge stops taking HTTP requests, lets those already taken get their
answers (within the client's drain timeout) and only then drains the NATS
connection: 100 requests in flight to a responder that answers half a second later all
get 200. What arrives meanwhile on an open connection, or cannot complete, is 503
``stopping`` (with ``Connection: close``), never a 500.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults
from twisted.internet.error import ConnectionRefusedError
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from tests.support.bridge import BridgeTestCase, RawHttp, http
from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats import errors
from txnats.protocol.events import Msg


def _observe(case: SynchronousTestCase) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    case.addCleanup(globalLogPublisher.removeObserver, events.append)
    return events


def _bad(events: list[dict[str, Any]]) -> list[str]:
    """Log lines at error or critical level."""
    return [formatEvent(e) or "" for e in events
            if e.get("log_level") in (LogLevel.error, LogLevel.critical)]


class StopInFlightTests(BridgeTestCase):
    async def slow_responder(self, subject: str, delay: float | None) -> list[Msg]:
        """A responder on ``subject`` answering ``delay`` seconds late (never: None)."""
        nc = await self.connect()
        seen: list[Msg] = []

        def answer(msg: Msg) -> None:
            seen.append(msg)
            if delay is not None:
                reactor.callLater(delay, msg.respond, b"late " + msg.data)

        nc.subscribe(subject, answer)
        await bounded(nc.flush())
        return seen

    async def test_100_requests_in_flight_all_get_200(self) -> None:
        """100 requests in flight to a responder answering after 0.5 s; the bridge
        service stops: all 100 get 200 with their own answer, nothing is logged as an
        error, and the stop completes."""
        seen = await self.slow_responder("slow.echo", 0.5)
        url = await self.bridge()
        events = _observe(self)
        calls = [ensureDeferred(http("POST", f"{url}/v1/request/slow.echo?timeout=5",
                                     b"%d" % i, seconds=20)) for i in range(100)]
        await wait_until(lambda: len(seen) == 100, 10, "100 requests at the responder")
        await bounded(self.service.stopService(), 30, "the bridge stopping")
        answers = await bounded(gatherResults(calls), 20)
        self.assertEqual([(r.code, r.body) for r in answers],
                         [(200, b"late %d" % i) for i in range(100)])
        self.assertEqual(_bad(events), [])

    async def test_requests_while_stopping_get_503_stopping(self) -> None:
        """While a request is in flight and the bridge stops: a new request on an open
        keep-alive connection gets 503 stopping and Connection: close; a new connection
        is refused; the request in flight still gets its 200."""
        seen = await self.slow_responder("slow.one", 1.0)
        url = await self.bridge()
        keep = await RawHttp.send(url, b"GET /v1/status HTTP/1.1\r\nHost: b\r\n\r\n")
        self.addCleanup(keep.close)
        await keep.answered()
        self.assertEqual(keep.status, 200)
        await wait_until(lambda: keep.body.endswith(b"}\n") or keep.body.endswith(b"\r\n"),
                         WAIT, "the status body")
        flight = ensureDeferred(http("POST", f"{url}/v1/request/slow.one?timeout=5", b"x",
                                     seconds=20))
        await wait_until(lambda: len(seen) == 1, WAIT, "the request at the responder")
        stopping = self.service.stopService()
        keep.proto.data.clear()
        keep.proto.transport.write(b"POST /v1/publish/late.one HTTP/1.1\r\nHost: b\r\n"
                                   b"Content-Length: 1\r\n\r\nx")
        await keep.closed()
        self.assertEqual((keep.status, _code(keep.body)), (503, "stopping"), keep.body)
        self.assertEqual(keep.headers.get("connection"), [b"close"])
        with self.assertRaises(ConnectionRefusedError):
            await http("GET", f"{url}/healthz")
        r = await bounded(flight, 20)
        self.assertEqual((r.code, r.body), (200, b"late x"))
        await bounded(stopping, 30)

    async def test_what_cannot_complete_is_503_not_500(self) -> None:
        """A request whose responder never answers, the drain timeout 1 s: the bridge
        waits for it that long, drains, and answers 503 stopping, not 500 internal."""
        await self.slow_responder("slow.never", None)
        url = await self.bridge(connect_options={"drain_timeout": 1.0})
        events = _observe(self)
        flight = ensureDeferred(http("POST", f"{url}/v1/request/slow.never?timeout=30", b"",
                                     seconds=20))
        await wait_until(lambda: bool(self.service.ctx.in_flight), WAIT, "a request in flight")
        started = reactor.seconds()
        await bounded(self.service.stopService(), 30)
        r = await bounded(flight, 20)
        self.assertEqual((r.code, r.json()["code"]), (503, "stopping"), r)
        self.assertLess(reactor.seconds() - started, 10)
        self.assertEqual([e for e in _bad(events) if "internal" in e or "unexpected" in e], [])


class StopErrorsUnitTests(SynchronousTestCase):
    def test_closing_errors_are_503_stopping_while_the_bridge_stops(self) -> None:
        """Every error of a closing or draining client, and any NatsError the table
        does not name, is 503 stopping while the bridge stops; outside a stop, the
        unnamed ones are 502 nats_error; only errors outside the tree are 500."""
        from txnats.bridge._answers import classify

        closing = [errors.ConnectionClosedError(), errors.ConnectionDrainingError(),
                   errors.SubscriptionClosedError(), errors.StaleConnectionError(),
                   errors.OutboundBufferFullError(), errors.NatsError(),
                   errors.ProtocolError()]
        for e in closing:
            self.assertEqual(classify(e, stopping=True), (503, "stopping"), e)
        self.assertEqual(classify(errors.ProtocolError(), stopping=False), (502, "nats_error"))
        self.assertEqual(classify(errors.NoRespondersError(), stopping=True),
                         (503, "no_responders"))
        self.assertEqual(classify(errors.TimeoutError(), stopping=True), (504, "timeout"))
        self.assertEqual(classify(KeyError("x"), stopping=True), (500, "internal"))


def _code(body: bytes) -> str:
    return str(json.loads(body[body.find(b"{"):body.rfind(b"}") + 1])["code"])
