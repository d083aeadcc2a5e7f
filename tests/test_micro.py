"""The service API against a real nats-server: discovery across instances, the queue
group spreading load (figure 2), stop() losing nothing under load (figure 2), handler
errors answered and counted (figure 3), and a closed client stopping its services."""

from __future__ import annotations

import json
import time
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, ensureDeferred
from twisted.trial.unittest import TestCase

import txnats
from tests.support.figures import figure
from tests.support.micro import validate
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor
from txnats import micro
from txnats.errors import NatsError
from txnats.micro import ERROR_CODE_HEADER, ERROR_HEADER, Request
from txnats.testing import FaultProxy

#: Gathering answers ends this long after the latest one (or at WAIT with none). The
#: instances run in this process and answer in the same reactor turn or the next.
STALL = 0.5


class MicroTests(ServerPerClass, TestCase):
    """Services on separate connections to one server, found and called by a client."""

    timeout = 60

    async def connect(self, name: str = "") -> txnats.Client:
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url, name=name or self._testMethodName)
        self.addCleanup(nc.close)
        return nc

    def service_name(self) -> str:
        return self._testMethodName.replace("test_", "").replace("_", "-")

    async def instances(self, n: int, handler: Any, **kwargs: Any) -> list[micro.Service]:
        """``n`` instances of one service, each on its own connection, with an endpoint
        ``work`` answered by ``handler``; flushed, so the server knows them."""
        out = []
        self.instance_clients: list[txnats.Client] = []
        for i in range(n):
            nc = await self.connect(f"instance-{i}")
            self.instance_clients.append(nc)
            svc = micro.add_service(nc, name=self.service_name(), version="1.0.0", **kwargs)
            svc.add_endpoint("work", handler, subject=f"{self.service_name()}.work")
            await nc.flush(timeout=WAIT)
            out.append(svc)
        return out

    # ------------------------------------------------------------------ discovery
    async def test_discovery_across_instances(self) -> None:
        """ping/info/stats gather one typed answer per instance (all, by name, by id);
        the wire JSON validates; nothing found is an empty list."""
        svcs = await self.instances(3, lambda r: r.respond(b"ok"), metadata={"m": "1"})
        nc = await self.connect()
        ids = {s.id for s in svcs}
        pings = await micro.ping(nc, self.service_name(), timeout=WAIT, stall=STALL)
        self.assertEqual({p.id for p in pings}, ids)
        everything = await micro.ping(nc, timeout=WAIT, stall=STALL)
        self.assertTrue(ids <= {p.id for p in everything})
        infos = await micro.info(nc, self.service_name(), timeout=WAIT, stall=STALL)
        self.assertEqual({i.id for i in infos}, ids)
        for i in infos:
            self.assertEqual([(e.name, e.subject, e.queue_group) for e in i.endpoints],
                             [("work", f"{self.service_name()}.work", "q")])
            self.assertEqual(i.metadata, {"m": "1"})
        one = svcs[1].id
        (only,) = await micro.stats(nc, self.service_name(), one, timeout=WAIT)
        self.assertEqual(only.id, one)
        for verb in ("PING", "INFO", "STATS"):
            raw = await nc.request(micro.control_subject(verb, self.service_name(), one),
                                   timeout=WAIT)
            validate(json.loads(raw.data), f"io.nats.micro.v1.{verb.lower()}_response")
        self.assertEqual(await micro.ping(nc, "nobody-here", timeout=WAIT, stall=STALL), [])
        quick = await micro.ping(nc, self.service_name(), timeout=WAIT, stall=0.2)
        self.assertEqual({p.id for p in quick}, ids)

    async def test_discovery_under_another_prefix(self) -> None:
        """A service under prefix $SRV.other is found there, not under $SRV."""
        nc = await self.connect()
        svc = micro.add_service(nc, name=self.service_name(), version="1.0.0",
                                prefix="$SRV.other")
        await nc.flush(timeout=WAIT)
        (found,) = await micro.ping(nc, self.service_name(), timeout=WAIT, stall=STALL,
                                    prefix="$SRV.other")
        self.assertEqual(found.id, svc.id)
        (info,) = await micro.info(nc, self.service_name(), svc.id, prefix="$SRV.other")
        self.assertEqual(info.id, svc.id)
        self.assertEqual(await micro.ping(nc, self.service_name(), timeout=WAIT), [])

    # ------------------------------------------------------------------ figure 2
    async def test_figure_2_queue_group_spread_and_stop_under_load(self) -> None:
        """Three instances in queue group q: 3,000 requests spread within ±20% of
        even; then 3,000 more with stop() on one instance halfway: every request
        answered (no timeout, no no-responders), the stopped one answering what it
        had received."""
        svcs = await self.instances(3, lambda r: r.respond(r.data))
        nc = await self.connect()
        subject = f"{self.service_name()}.work"

        first = await self.load(nc, subject, 3000, 50)
        spread = [s.endpoints[0].num_requests for s in svcs]
        self.assertEqual(first["answered"], 3000, first)
        self.assertEqual(sum(spread), 3000)
        for n in spread:
            self.assertTrue(800 <= n <= 1200, f"uneven spread: {spread}")

        for s in svcs:
            s.reset()
        victim = svcs[0]
        stop: list[Deferred[None]] = []

        def halfway(done: int) -> None:
            if done == 1500 and not stop:
                stop.append(victim.stop())

        second = await self.load(nc, subject, 3000, 50, progress=halfway)
        await bounded(stop[0], WAIT, "the stopped instance's drain")
        counts = [s.endpoints[0].num_requests for s in svcs]
        self.assertEqual(second["answered"], 3000, second)
        self.assertEqual(second["failed"], [])
        self.assertEqual(sum(counts), 3000)
        self.assertFalse(victim.endpoints[0].is_active)
        self.assertTrue(all(s.endpoints[0].is_active for s in svcs[1:]))
        gone = await micro.ping(nc, victim.name, victim.id, timeout=WAIT, stall=STALL)
        self.assertEqual(gone, [])
        figure(2, requests=3000, spread=spread, spread_bound="800..1200",
               under_stop=3000, answered=second["answered"], lost=3000 - second["answered"],
               per_instance_after_stop=counts, seconds=round(second["seconds"], 2))

    async def load(
        self, nc: txnats.Client, subject: str, total: int, window: int,
        progress: Any = None,
    ) -> dict[str, Any]:
        """``total`` requests, ``window`` in flight; count answers and failures."""
        answered = [0]
        failed: list[str] = []
        sent = [0]
        start = time.perf_counter()

        async def worker() -> None:
            while sent[0] < total:
                sent[0] += 1
                body = str(sent[0]).encode()
                try:
                    msg = await nc.request(subject, body, timeout=WAIT)
                except NatsError as e:
                    failed.append(repr(e))
                    continue
                if msg.data == body:
                    answered[0] += 1
                else:
                    failed.append(f"wrong answer {msg.data!r} to {body!r}")
                if progress is not None:
                    progress(answered[0])

        await DeferredList([ensureDeferred(worker()) for _ in range(window)])
        return {"answered": answered[0], "failed": failed,
                "seconds": time.perf_counter() - start}

    # ------------------------------------------------------------------ figure 3
    async def test_figure_3_handler_errors(self) -> None:
        """100 requests to an endpoint raising on every other call: 50 error replies
        with both headers, 50 good ones, stats count 50 errors, no timeouts."""
        calls = [0]

        def flaky(req: Request) -> None:
            calls[0] += 1
            if calls[0] % 2 == 0:
                raise ValueError(f"call {calls[0]} failed")
            req.respond(b"fine")

        (svc,) = await self.instances(1, flaky)
        nc = await self.connect()
        subject = f"{self.service_name()}.work"
        results = await DeferredList(
            [nc.request(subject, b"x", timeout=WAIT) for _ in range(100)], consumeErrors=True
        )
        timeouts = [r for ok, r in results if not ok]
        replies = [r for ok, r in results if ok]
        errors = [m for m in replies if m.headers is not None and ERROR_HEADER in m.headers]
        good = [m for m in replies if m.headers is None]
        self.assertEqual(timeouts, [])
        self.assertEqual(len(errors), 50)
        self.assertEqual(len(good), 50)
        self.assertTrue(all(m.data == b"fine" for m in good))
        for m in errors:
            self.assertEqual(m.headers[ERROR_CODE_HEADER], "500")
            self.assertRegex(m.headers[ERROR_HEADER], r"^ValueError: call \d+ failed$")
        (stats,) = await micro.stats(nc, svc.name, svc.id, timeout=WAIT)
        (ep,) = stats.endpoints
        self.assertEqual((ep.num_requests, ep.num_errors), (100, 50))
        self.assertRegex(ep.last_error, r"^500:ValueError: call \d+ failed$")
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 50)
        figure(3, requests=100, error_replies=len(errors), both_headers=len(errors),
               stats_errors=ep.num_errors, stats_requests=ep.num_requests,
               timeouts=len(timeouts))

    # ------------------------------------------------------------------ lifecycle
    async def test_client_close_stops_service(self) -> None:
        """Closing an instance's client stops it: when_stopped() fires with
        ConnectionClosedError and the others go on answering."""
        svcs = await self.instances(2, lambda r: r.respond(b"ok"))
        stopped = svcs[0].when_stopped()
        nc = await self.connect()
        await self.instance_clients[0].close()
        reason = await bounded(stopped, WAIT, "the service's stop")
        self.assertIsInstance(reason, txnats.ConnectionClosedError)
        pings = await micro.ping(nc, self.service_name(), timeout=WAIT, stall=STALL)
        self.assertEqual([p.id for p in pings], [svcs[1].id])
        reply = await nc.request(f"{self.service_name()}.work", timeout=WAIT)
        self.assertEqual(reply.data, b"ok")

    async def test_service_survives_reconnect(self) -> None:
        """A service whose connection is cut goes on after the client reconnects: it
        is not stopped, it answers PING and requests again, its counters kept."""
        assert self.server is not None
        proxy = FaultProxy(reactor, self.server.host, self.server.port)
        proxy.listen()
        self.addCleanup(proxy.stop)
        nc = await txnats.connect(reactor, proxy.url, name="behind-proxy",
                                  reconnect_wait=0.05, reconnect_jitter=0.0)
        self.addCleanup(nc.close)
        svc = micro.add_service(nc, name=self.service_name(), version="1.0.0")
        ep = svc.add_endpoint("work", lambda r: r.respond(b"ok"),
                              subject=f"{self.service_name()}.work")
        await nc.flush(timeout=WAIT)
        caller = await self.connect()
        await caller.request(f"{self.service_name()}.work", timeout=WAIT)
        states: list[str] = []
        back: Deferred[None] = Deferred()

        def listen(state: txnats.ClientState) -> None:
            states.append(str(state))
            if state == txnats.ClientState.CONNECTED and not back.called:
                back.callback(None)

        nc.add_status_listener(listen)
        self.assertEqual(proxy.reset_all(), 1)
        await bounded(back, WAIT, "the reconnection")
        await nc.flush(timeout=WAIT)
        self.assertIn("RECONNECTING", states)
        self.assertFalse(svc.is_stopped)
        (found,) = await micro.ping(caller, self.service_name(), svc.id, timeout=WAIT)
        self.assertEqual(found.id, svc.id)
        reply = await caller.request(f"{self.service_name()}.work", timeout=WAIT)
        self.assertEqual(reply.data, b"ok")
        self.assertEqual(ep.num_requests, 2)
