"""The bridge's HTTP API against a real nats-server: publish, request, SSE and WebSocket
subscriptions (with back-pressure), JetStream publish, key-value, and the operations
endpoints. The bridge runs in the test's process on a free loopback port; HTTP goes
through ``twisted.web.client.Agent`` or raw sockets."""

from __future__ import annotations

from typing import Any

from twisted.internet.error import ConnectionRefusedError
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from tests.support.bridge import SseClient, WsClient, http, start_bridge
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor, sleep, wait_until
from txnats.bridge._stream import Pump
from txnats.bridge.security import SubjectPolicy, check_listen, parse_rule
from txnats.errors import InvalidArgumentError
from txnats.protocol.events import Msg
from txnats.testing import NatsServer


class BridgeCase(ServerPerClass, TestCase):
    server_options = {"jetstream": True}
    timeout = 60

    async def connect(self) -> txnats.Client:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(nc.close)
        return nc

    async def bridge(self, **config: Any) -> str:
        assert self.server is not None
        config.setdefault("servers", [self.server.url])
        self.service, url = await start_bridge(self, **config)
        return url


class PublishRequestTests(BridgeCase):
    async def test_publish_reaches_a_subscriber_with_headers(self) -> None:
        """POST /v1/publish/<subject> answers 202 and the NATS subscriber gets the body
        and the Nats-Header-* headers as NATS headers."""
        url = await self.bridge()
        nc = await self.connect()
        sub = nc.subscribe("bridge.pub")
        await bounded(nc.flush())
        r = await http("POST", f"{url}/v1/publish/bridge.pub", b"hello \x00 bytes",
                       {"Nats-Header-X-Trace": "abc", "Content-Type": "text/plain"})
        self.assertEqual(r.code, 202, r)
        self.assertEqual(r.json(), {"published": "bridge.pub", "bytes": 13})
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"hello \x00 bytes")
        assert msg.headers is not None
        self.assertEqual(msg.headers.get("X-Trace"), "abc")
        self.assertNotIn("Content-Type", msg.headers)

    async def test_request_answered_by_a_nats_responder(self) -> None:
        """POST /v1/request/<subject> gives the reply's body (200) and its headers as
        Nats-Header-*; the responder saw the request's body and headers."""
        url = await self.bridge()
        nc = await self.connect()
        seen: list[Msg] = []

        def answer(msg: Msg) -> None:
            seen.append(msg)
            msg.respond(msg.data.upper(), headers={"X-Answer": "42"})

        nc.subscribe("bridge.echo", answer)
        await bounded(nc.flush())
        r = await http("POST", f"{url}/v1/request/bridge.echo?timeout=5", b"shout",
                       {"Nats-Header-X-Q": "1"})
        self.assertEqual((r.code, r.body), (200, b"SHOUT"), r)
        self.assertEqual(r.headers.get("nats-header-x-answer"), ["42"])
        assert seen[0].headers is not None
        self.assertEqual((seen[0].data, seen[0].headers.get("X-Q")), (b"shout", "1"))

    async def test_request_timeout_504_and_no_responders_503(self) -> None:
        """A responder that never answers gives 504 after ?timeout; nobody listening
        gives 503 at once; a bad timeout is 400."""
        url = await self.bridge()
        nc = await self.connect()
        nc.subscribe("bridge.silent", lambda m: None)
        await bounded(nc.flush())
        start = reactor.seconds()
        r = await http("POST", f"{url}/v1/request/bridge.silent?timeout=0.3", b"")
        self.assertEqual((r.code, r.json()["code"]), (504, "timeout"), r)
        self.assertGreaterEqual(reactor.seconds() - start, 0.25)
        r = await http("POST", f"{url}/v1/request/bridge.nobody", b"")
        self.assertEqual((r.code, r.json()["code"]), (503, "no_responders"), r)
        for bad in ("0", "-1", "nan", "abc", "1000"):
            r = await http("POST", f"{url}/v1/request/bridge.silent?timeout={bad}", b"")
            self.assertEqual((r.code, r.json()["code"]), (400, "bad_argument"), (bad, r))


class StreamTests(BridgeCase):
    async def test_sse_receives_published_messages(self) -> None:
        """GET /v1/subscribe/<wildcard> as SSE: 'subscribed' once the server has the
        subscription, then one 'message' event per NATS message, in order, with its
        subject, headers and payload (base64 when it is not UTF-8)."""
        url = await self.bridge()
        nc = await self.connect()
        sse = await SseClient.open(url, "/v1/subscribe/bridge.sse.%3E")
        self.addCleanup(sse.close)
        await sse.wait_for("subscribed")
        self.assertEqual(sse.status, 200)
        nc.publish("bridge.sse.a", b"one", headers={"K": "v"})
        nc.publish("bridge.sse.b", b"\xff\xfe")
        nc.publish("bridge.other", b"not for us")
        got = await sse.wait_for("message", 2)
        self.assertEqual(got[0], {"subject": "bridge.sse.a", "data": "one",
                                  "headers": {"K": ["v"]}})
        self.assertEqual(got[1], {"subject": "bridge.sse.b", "data_base64": "//4="})
        await sleep(0.1)
        self.assertEqual(len(sse.of("message")), 2)

    async def test_sse_keepalive_on_an_idle_stream(self) -> None:
        """An idle SSE stream gets a keep-alive comment every KEEPALIVE seconds."""
        from txnats.bridge import _sse

        self.patch(_sse, "KEEPALIVE", 0.05)
        url = await self.bridge()
        sse = await SseClient.open(url, "/v1/subscribe/bridge.idle")
        self.addCleanup(sse.close)
        await sse.wait_for("subscribed")
        await wait_until(lambda: sse.proto.data.count(b": keep-alive\n\n") >= 2,
                         what="two keep-alive comments")

    async def test_websocket_pings_on_an_idle_stream(self) -> None:
        """An idle WebSocket gets a ping every KEEPALIVE seconds; answered, it stays open."""
        from txnats.bridge import _sse

        # autobahn's timers (txaio's batched timer) cut a deadline down to the whole
        # second, so a timer can fire up to 1 s early: 1 s, answered within 1 s.
        self.patch(_sse, "KEEPALIVE", 1.0)
        url = await self.bridge()
        ws = await WsClient.open(url, "/v1/subscribe/bridge.idle")
        self.addCleanup(ws.close)
        await ws.wait_for(lambda f: f and f[0] == {"subscribed": "bridge.idle"})
        await wait_until(lambda: ws.pings >= 3, 15, "three WebSocket pings")
        # A pong answered each: nothing was dropped for want of one.
        self.assertIsNone(ws.closed)

    async def test_websocket_unanswered_pings_drop_the_client(self) -> None:
        """A client that stops answering pings is dropped (twice KEEPALIVE after a ping),
        and its subscription ends with it."""
        from txnats.bridge import _sse

        self.patch(_sse, "KEEPALIVE", 1.0)  # (whole seconds: see the test above)
        url = await self.bridge()
        ws = await WsClient.open(url, "/v1/subscribe/bridge.gone")
        await ws.wait_for(lambda f: f and f[0] == {"subscribed": "bridge.gone"})
        ws.answer_pings = False
        await wait_until(lambda: ws.closed is not None, 10, "the bridge dropping the client")
        self.assertGreaterEqual(ws.pings, 1)
        await wait_until(lambda: not self.service.ctx.streams, what="the stream ended")

    async def test_websocket_receives_published_messages(self) -> None:
        """The same route upgraded to a WebSocket: a {"subscribed"} frame, then one JSON
        frame per message; a queue group (?queue=) splits messages with another member."""
        url = await self.bridge()
        nc = await self.connect()
        ws = await WsClient.open(url, "/v1/subscribe/bridge.ws?queue=q1")
        self.addCleanup(ws.close)
        await ws.wait_for(lambda f: f and f[0] == {"subscribed": "bridge.ws"})
        for i in range(20):
            nc.publish("bridge.ws", b"%d" % i)
        frames = await ws.wait_for(lambda f: len(f) == 21, what="20 WebSocket messages")
        self.assertEqual([f["data"] for f in frames[1:]], [str(i) for i in range(20)])
        # Another member of the queue group: the 40 messages are split between them.
        other = nc.subscribe("bridge.ws", queue="q1")
        await bounded(nc.flush())
        for _ in range(40):
            nc.publish("bridge.ws", b"x")
        await wait_until(lambda: len(ws.frames) - 21 + other.pending_msgs == 40,
                         what="40 messages split in the queue group")
        self.assertGreater(other.pending_msgs, 0)
        self.assertGreater(len(ws.frames) - 21, 0)

    async def slow_client_case(self, kind: str) -> None:
        """A client that stops reading: the bridge holds at most stream_queue messages
        for it, drops and counts the rest, and tells it how many when it reads again."""
        limit, size = 40, 32 * 1024
        url = await self.bridge(stream_queue=limit)
        nc = await self.connect()
        path = "/v1/subscribe/bridge.slow"
        client: Any = await (SseClient.open(url, path) if kind == "sse" else
                             WsClient.open(url, path))
        self.addCleanup(client.close)
        if kind == "sse":
            await client.wait_for("subscribed")
        else:
            await client.wait_for(lambda f: f and "subscribed" in f[0])
        client.proto.transport.pauseProducing()  # stop reading the socket
        payload = b"x" * size
        metrics = self.service.metrics
        label = "websocket" if kind == "ws" else kind

        def drops() -> float:
            return metrics.value("nats_bridge_slow_consumer_drops_total", transport=label)

        # Publish until the kernel's buffers and the bridge's queue are full and drops
        # begin (however large the socket buffers are), then as much again.
        total, extra = 0, None
        while extra is None or total < extra:
            for _ in range(50):
                nc.publish("bridge.slow", payload)
            total += 50
            await bounded(nc.flush())
            await sleep(0.005)
            if extra is None and drops() > 0:
                extra = 2 * total
            self.assertLess(total, 20000, "no drops after 640 MB: is the client reading?")
        await wait_until(lambda: drops() > 0, what="drops counted")
        streams = list(self.service.ctx.streams)
        pumps = [s.pump for s in streams]  # type: ignore[attr-defined]
        self.assertEqual(len(pumps), 1)
        self.assertLessEqual(pumps[0].queued, limit)
        self.assertLessEqual(pumps[0].queued_bytes, limit * (size * 2))
        client.proto.transport.resumeProducing()
        pump = pumps[0]
        if kind == "sse":
            await wait_until(lambda: len(client.of("message")) == pump.sent and
                             sum(d["dropped"] for d in client.of("dropped")) == pump.dropped
                             and pump.sent + pump.dropped == total, 20,
                             "every message delivered or reported dropped")
            dropped = sum(d["dropped"] for d in client.of("dropped"))
        else:
            def done(frames: list[Any]) -> bool:
                msgs = sum(1 for f in frames if "subject" in f)
                drops = sum(f.get("dropped", 0) for f in frames)
                return msgs + drops == total
            await client.wait_for(done, 20, "every message delivered or reported dropped")
            dropped = sum(f.get("dropped", 0) for f in client.frames)
        self.assertGreater(dropped, 0)
        self.assertEqual(dropped, pump.dropped)

    async def test_sse_slow_client_gets_dropped_count(self) -> None:
        """SSE: a non-reading client costs at most the queue bound; it later gets
        'dropped' events whose counts add up with the messages to all published."""
        await self.slow_client_case("sse")

    async def test_websocket_slow_client_gets_dropped_count(self) -> None:
        """WebSocket: the same, with {"dropped": n} frames."""
        await self.slow_client_case("ws")


class JetStreamKvTests(BridgeCase):
    async def test_js_publish_returns_the_puback(self) -> None:
        """POST /v1/js/publish/<subject> answers the stream's acknowledgement as JSON;
        ?msg_id= deduplicates; a subject no stream takes is 503 no_stream."""
        url = await self.bridge()
        nc = await self.connect()
        js = nc.jetstream()
        await bounded(js.add_stream(name="BRIDGEJS", subjects=["bridgejs.>"]))
        self.addCleanup(lambda: bounded(js.delete_stream("BRIDGEJS")))
        r = await http("POST", f"{url}/v1/js/publish/bridgejs.a?msg_id=m1", b"v1")
        self.assertEqual(r.code, 200, r)
        self.assertEqual(r.json(), {"stream": "BRIDGEJS", "seq": 1, "duplicate": False,
                                    "domain": ""})
        r = await http("POST", f"{url}/v1/js/publish/bridgejs.a?msg_id=m1", b"v1")
        self.assertEqual((r.json()["seq"], r.json()["duplicate"]), (1, True))
        r = await http("POST", f"{url}/v1/js/publish/nostream.here", b"v1")
        self.assertEqual((r.code, r.json()["code"]), (503, "no_stream"), r)

    async def test_kv_put_get_delete(self) -> None:
        """PUT, GET (value and Kv-Revision), DELETE, then GET 404; a missing bucket 404."""
        url = await self.bridge()
        nc = await self.connect()
        js = nc.jetstream()
        await bounded(js.create_key_value("bridgekv"))
        self.addCleanup(lambda: bounded(js.delete_key_value("bridgekv")))
        r = await http("PUT", f"{url}/v1/kv/bridgekv/a.b", b"value-1")
        self.assertEqual(r.code, 200, r)
        rev = r.json()["revision"]
        r = await http("GET", f"{url}/v1/kv/bridgekv/a.b")
        self.assertEqual((r.code, r.body, r.headers["kv-revision"]), (200, b"value-1", [str(rev)]))
        kv = await bounded(js.key_value("bridgekv"))
        self.assertEqual((await bounded(kv.get("a.b"))).value, b"value-1")
        r = await http("DELETE", f"{url}/v1/kv/bridgekv/a.b")
        self.assertEqual(r.code, 200, r)
        r = await http("GET", f"{url}/v1/kv/bridgekv/a.b")
        self.assertEqual((r.code, r.json()["code"]), (404, "key_not_found"), r)
        r = await http("GET", f"{url}/v1/kv/nobucket/a")
        self.assertEqual((r.code, r.json()["code"]), (404, "bucket_not_found"), r)
        r = await http("PUT", f"{url}/v1/kv/bridgekv/bad%20key", b"x")
        self.assertEqual((r.code, r.json()["code"]), (400, "bad_argument"), r)


class ServicesTests(BridgeCase):
    async def test_services_discovery(self) -> None:
        """GET /v1/services lists the ADR-32 services' INFO, /ping and /stats their other
        answers, ?name= narrows; a bad name is 400 and an unknown verb 404."""
        from txnats import micro

        url = await self.bridge()
        nc = await self.connect()
        svc = micro.add_service(nc, name="bridgesvc", version="1.2.3")
        svc.add_endpoint("echo", lambda req: req.respond(req.data))
        await bounded(nc.flush())
        r = await http("GET", f"{url}/v1/services?name=bridgesvc")
        self.assertEqual(r.code, 200, r)
        [info] = r.json()["services"]
        self.assertEqual((info["name"], info["version"]), ("bridgesvc", "1.2.3"))
        self.assertEqual([e["name"] for e in info["endpoints"]], ["echo"])
        r = await http("GET", f"{url}/v1/services/ping?timeout=2")
        self.assertIn("bridgesvc", [p["name"] for p in r.json()["services"]])
        r = await http("GET", f"{url}/v1/services/stats?name=bridgesvc")
        self.assertEqual(r.json()["services"][0]["name"], "bridgesvc")
        r = await http("GET", f"{url}/v1/services?name=bad%20name")
        self.assertEqual((r.code, r.json()["code"]), (400, "bad_argument"), r)
        r = await http("GET", f"{url}/v1/services/nosuch")
        self.assertEqual(r.code, 404, r)


class OperationsTests(TestCase):
    timeout = 60

    async def test_forward_route_runs_inside_the_bridge(self) -> None:
        """--forward: the service starts the route's Forwarder once connected; an HTTP
        publish on the source arrives on the target system, counted per route in
        /metrics (the route's name, never credentials); stopping the bridge stops it."""
        from txnats.bridge.forward import parse_forward

        source, target = NatsServer().start(), NatsServer().start()
        self.addCleanup(source.stop)
        self.addCleanup(target.stop)
        route = parse_forward(f"fwd.>={target.url}")
        service, url = await start_bridge(self, servers=[source.url], forwards=[route])
        far = await bounded(txnats.connect(reactor, target.url))
        self.addCleanup(far.close)
        sub = far.subscribe("fwd.>")
        await bounded(far.flush())
        for i in range(3):
            r = await http("POST", f"{url}/v1/publish/fwd.{i}", b"payload-%d" % i)
            self.assertEqual(r.code, 202)
        got = [await sub.next_msg(timeout=WAIT) for _ in range(3)]
        self.assertEqual(sorted(m.data for m in got), [b"payload-0", b"payload-1", b"payload-2"])
        await wait_until(lambda: service.metrics.value("nats_bridge_forwarded_total",
                                                       route=route.name) == 3,
                         what="three forwards counted")
        text = (await http("GET", f"{url}/metrics")).body.decode()
        self.assertIn(f'nats_bridge_forwarded_total{{route="{route.name}"}} 3.0', text)

    async def test_health_ready_metrics_follow_the_connection(self) -> None:
        """/healthz is 200 throughout; /readyz is 200 while connected, 503 while NATS
        is down and 200 again after the reconnection, which /metrics counts (with the
        messages per route and the HTTP status codes)."""
        server = NatsServer().start()
        self.addCleanup(server.stop)
        service, url = await start_bridge(
            self, servers=[server.url],
            connect_options={"reconnect_wait": 0.1, "reconnect_jitter": 0.0})
        r = await http("GET", f"{url}/readyz")
        self.assertEqual((r.code, r.json()), (200, {"ready": True, "state": "CONNECTED"}))
        await http("POST", f"{url}/v1/publish/ops.x", b"12345")
        server.kill()
        await wait_until(lambda: not service.ctx.ready(), what="the bridge seeing NATS down")
        r = await http("GET", f"{url}/readyz")
        self.assertEqual((r.code, r.json()["ready"]), (503, False), r)
        self.assertEqual((await http("GET", f"{url}/healthz")).code, 200)
        server.start()
        await wait_until(service.ctx.ready, 15, "the bridge reconnecting")
        self.assertEqual((await http("GET", f"{url}/readyz")).code, 200)
        text = (await http("GET", f"{url}/metrics")).body.decode()
        self.assertIn('nats_bridge_messages_total{direction="in",route="publish"} 1.0', text)
        self.assertIn('nats_bridge_bytes_total{direction="in",route="publish"} 5.0', text)
        self.assertIn("nats_bridge_reconnects_total 1.0", text)
        self.assertIn('nats_bridge_http_responses_total{code="503"} 1.0', text)
        self.assertIn("nats_bridge_connected 1.0", text)
        self.assertIn('nats_bridge_request_duration_seconds_count{route="publish"} 1.0', text)

    async def test_stop_drains_and_ends_streams(self) -> None:
        """stopService stops listening, ends open SSE streams and drains: a publish made
        just before reaches the subscriber."""
        server = NatsServer().start()
        self.addCleanup(server.stop)
        service, url = await start_bridge(self, servers=[server.url])
        nc = await bounded(txnats.connect(reactor, server.url))
        self.addCleanup(nc.close)
        sub = nc.subscribe("stop.x")
        await bounded(nc.flush())
        sse = await SseClient.open(url, "/v1/subscribe/stop.%3E")
        await sse.wait_for("subscribed")
        r = await http("POST", f"{url}/v1/publish/stop.x", b"last")
        self.assertEqual(r.code, 202)
        await bounded(service.stopService(), 20, "the bridge stopping")
        await wait_until(lambda: sse.proto.lost, what="the SSE stream ending")
        self.assertEqual((await sub.next_msg(timeout=WAIT)).data, b"last")
        with self.assertRaises(ConnectionRefusedError):
            await http("GET", f"{url}/healthz", seconds=2)


class PolicyUnitTests(SynchronousTestCase):
    def test_rules_and_matching(self) -> None:
        """Allow rules bound a route's subjects (a wildcard subscription must lie inside
        them); deny rules refuse any overlap and win; other routes are unaffected."""
        policy = SubjectPolicy(
            allow=[parse_rule("publish:orders.>"), parse_rule("subscribe:sub.*")],
            deny=[parse_rule("orders.secret.>"), parse_rule("kv:cfg.x")])
        self.assertTrue(policy.permits("publish", "orders.new"))
        self.assertFalse(policy.permits("publish", "orders"))
        self.assertFalse(policy.permits("publish", "billing.x"))
        self.assertFalse(policy.permits("publish", "orders.secret.a"))
        self.assertTrue(policy.permits("subscribe", "sub.a"))
        self.assertFalse(policy.permits("subscribe", "sub.>"))
        self.assertFalse(policy.permits("subscribe", "sub.a.b"))
        self.assertTrue(policy.permits("kv", "cfg.y"))
        self.assertFalse(policy.permits("kv", "cfg.x"))
        open_policy = SubjectPolicy(deny=[parse_rule("subscribe:orders.secret.*")])
        self.assertFalse(open_policy.permits("subscribe", "orders.>"))
        self.assertFalse(open_policy.permits("subscribe", "*.secret.x"))
        self.assertTrue(open_policy.permits("subscribe", "orders.public.>"))
        for bad in ("nosuch:a", "publish:a..b", "a b"):
            self.assertRaises(InvalidArgumentError, parse_rule, bad)

    def test_listen_check(self) -> None:
        """Loopback (TCP or TLS) and UNIX listeners need no token; all interfaces or a
        public address do, TLS or not, and the refusal says what to do."""
        for ok in ("tcp:8080:interface=127.0.0.1", "tcp:0:interface=localhost",
                   "tcp6:8080:interface=\\:\\:1", "unix:/tmp/x.sock",
                   "ssl:8443:privateKey=k.pem:interface=127.0.0.1"):
            check_listen(ok, has_token=False)
        for bad in ("tcp:8080", "tcp:8080:interface=0.0.0.0", "tcp:80:interface=10.1.2.3",
                    "ssl:8443:privateKey=k.pem"):
            with self.assertRaises(InvalidArgumentError) as e:
                check_listen(bad, has_token=False)
            self.assertIn("--auth-token", str(e.exception))
            check_listen(bad, has_token=True)

    def test_pump_bounds_and_reports(self) -> None:
        """Paused, the pump holds at most max_msgs; the next frame after the held ones
        is the dropped count, at the place of the gap."""
        written: list[bytes] = []
        drops: list[int] = []
        pump = Pump(written.append, lambda m: m.data, lambda n: b"dropped %d" % n,
                    max_msgs=2, max_bytes=1000, on_drop=lambda: drops.append(1))
        msg = [Msg("s", None, b"m%d" % i, None, 1) for i in range(6)]
        pump.offer(msg[0])
        pump.pauseProducing()
        for m in msg[1:]:
            pump.offer(m)
        self.assertEqual((pump.queued, pump.dropped, len(drops)), (2, 3, 3))
        pump.resumeProducing()
        self.assertEqual(written, [b"m0", b"m1", b"m2", b"dropped 3"])
        pump.offer(msg[0])
        self.assertEqual(written[-1], b"m0")
