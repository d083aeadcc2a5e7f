"""Figure 5: the bridge's guards against a real nats-server. No token: 401; a body over
the limit: 413; a bad subject or header: 400; a subject the deny list names: 403; and on
every one of them nothing reaches NATS (a subscriber on ``>`` receives nothing until a
good message, published after the bad ones and a flush, arrives first). The token never
appears in the logs or the metrics. (The refusal to listen on all interfaces without a
token is in test_bridge_tap, as twistd shows it.)"""

from __future__ import annotations

from typing import Any

from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import TestCase

import txnats
from tests.support.bridge import SseClient, http, start_bridge
from tests.support.figures import figure
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor
from txnats.bridge.security import SubjectPolicy, parse_rule

TOKEN = "s3cr3t-bridge-t0ken-4242"
LIMIT = 64 * 1024


class SecurityTests(ServerPerClass, TestCase):
    timeout = 60

    async def setup_bridge(self, **config: Any) -> tuple[str, txnats.Subscription]:
        assert self.server is not None
        config.setdefault("servers", [self.server.url])
        self.service, url = await start_bridge(self, **config)
        nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(nc.close)
        self.nc = nc
        sub = nc.subscribe(">")
        await bounded(nc.flush())
        return url, sub

    async def assert_nothing_published(self, url: str, sub: txnats.Subscription,
                                       headers: dict[str, str] | None = None) -> int:
        """Publish a good message now and count what the subscriber (on ``>``) received
        before it: that must be nothing. Returns the count (0)."""
        r = await http("POST", f"{url}/v1/publish/good.one", b"good", headers)
        self.assertEqual(r.code, 202, r)
        before = []
        while (msg := await sub.next_msg(timeout=WAIT)).subject != "good.one":
            before.append(msg.subject)
        self.assertEqual(msg.data, b"good")
        self.assertEqual(before, [], "bad requests reached NATS")
        return len(before)

    async def test_figure5_auth_limits_bad_input(self) -> None:
        """Figure 5: 401 without or with a wrong token, 413 over the body limit (declared
        or streamed), 400 for bad subjects and headers, 403 for a denied subject; none of
        them publishes anything."""
        url, sub = await self.setup_bridge(
            auth_token=TOKEN, max_body=LIMIT,
            policy=SubjectPolicy(deny=[parse_rule("publish:secret.>")]))
        auth = {"Authorization": f"Bearer {TOKEN}"}
        codes: dict[str, int] = {}

        async def expect(name: str, status: int, code: str, *args: Any, **kw: Any) -> None:
            r = await http(*args, **kw)
            self.assertEqual((r.code, r.json()["code"]), (status, code), (name, r))
            codes[name] = r.code

        pub = f"{url}/v1/publish/orders.new"
        await expect("no_token", 401, "unauthorized", "POST", pub, b"x")
        await expect("wrong_token", 401, "unauthorized", "POST", pub, b"x",
                     {"Authorization": "Bearer wrong"})
        await expect("wrong_scheme", 401, "unauthorized", "POST", pub, b"x",
                     {"Authorization": f"Basic {TOKEN}"})
        await expect("metrics_no_token", 401, "unauthorized", "GET", f"{url}/metrics")
        await expect("oversize", 413, "body_too_large", "POST", pub, b"x" * (LIMIT + 1), auth)
        await expect("oversize_huge", 413, "body_too_large", "POST", pub,
                     b"y" * (4 * 1024 * 1024), auth)
        for i, bad in enumerate(["a%20b", "a..b", ".a", "a.", "a.*", "a.%3E", "", "a%09b"]):
            await expect(f"bad_subject_{i}", 400, "bad_subject", "POST",
                         f"{url}/v1/publish/{bad}", b"x", auth)
        await expect("bad_header_name", 400, "bad_header", "POST", pub, b"x",
                     {**auth, "Nats-Header-": "v"})
        await expect("denied", 403, "forbidden", "POST", f"{url}/v1/publish/secret.a", b"x",
                     auth)
        await expect("bad_request_subject", 400, "bad_subject", "POST",
                     f"{url}/v1/request/a.*", b"x", auth)
        await expect("bad_js_subject", 400, "bad_subject", "POST",
                     f"{url}/v1/js/publish/a%20b", b"x", auth)
        await bounded(self.nc.flush())
        reached = await self.assert_nothing_published(url, sub, auth)
        self.assertEqual(sub.pending_msgs, 0)
        self.assertEqual((await http("GET", f"{url}/metrics", headers=auth)).code, 200)
        self.assertEqual((await http("GET", f"{url}/healthz")).code, 200)
        figure(5, **codes, bad_requests=len(codes), messages_reaching_nats=reached)

    async def test_streamed_body_over_the_limit(self) -> None:
        """A chunked body (no Content-Length) is counted as it arrives: 413, nothing
        published, and the bridge never holds more than the limit."""
        url, sub = await self.setup_bridge(max_body=LIMIT)
        from twisted.internet.endpoints import TCP4ClientEndpoint
        from twisted.internet.protocol import Factory

        from tests.support.bridge import _Raw

        chunk = b"z" * 16384
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8)) + b"0\r\n\r\n"
        request = (b"POST /v1/publish/orders.big HTTP/1.1\r\nHost: x\r\n"
                   b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body)
        proto = _Raw(request)
        host, port = url.split("//")[1].split(":")
        await bounded(TCP4ClientEndpoint(reactor, host, int(port)).connect(
            Factory.forProtocol(lambda: proto)))
        from tests.support.waits import wait_until

        await wait_until(lambda: proto.lost, what="the 413 answer")
        self.assertTrue(proto.data.startswith(b"HTTP/1.1 413 "), proto.data[:200])
        await bounded(self.nc.flush())
        await self.assert_nothing_published(url, sub)

    async def test_declared_oversize_with_expect_is_refused_before_the_body(self) -> None:
        """Content-Length over the limit with Expect: 100-continue (curl's way for big
        bodies): 413 and the connection closed at once, the body never asked for."""
        url, sub = await self.setup_bridge(max_body=LIMIT)
        from twisted.internet.endpoints import TCP4ClientEndpoint
        from twisted.internet.protocol import Factory

        from tests.support.bridge import _Raw
        from tests.support.waits import wait_until

        proto = _Raw(b"POST /v1/publish/orders.big HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 1000000000\r\nExpect: 100-continue\r\n\r\n")
        host, port = url.split("//")[1].split(":")
        await bounded(TCP4ClientEndpoint(reactor, host, int(port)).connect(
            Factory.forProtocol(lambda: proto)))
        await wait_until(lambda: proto.lost, what="the 413 answer and the close")
        self.assertTrue(proto.data.startswith(b"HTTP/1.1 413 "), proto.data[:200])
        self.assertNotIn(b"100 Continue", proto.data)
        self.assertIn(b'"code": "body_too_large"', proto.data)
        await bounded(self.nc.flush())
        await self.assert_nothing_published(url, sub)

    async def test_token_in_browser_query_works_and_never_leaks(self) -> None:
        """?access_token= opens an SSE stream (browsers cannot send headers there); the
        token appears in no log event and not in /metrics, whatever was asked."""
        events: list[str] = []

        def observe(event: dict[str, Any]) -> None:
            events.append(repr(event) + " " + (formatEvent(event) or ""))

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        url, sub = await self.setup_bridge(auth_token=TOKEN, access_log=True)
        sse = await SseClient.open(url, f"/v1/subscribe/good.%3E?access_token={TOKEN}")
        self.addCleanup(sse.close)
        await sse.wait_for("subscribed")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        await self.assert_nothing_published(url, sub, auth)
        await sse.wait_for("message")
        await http("POST", f"{url}/v1/publish/x?access_token={TOKEN}", b"")
        await http("POST", f"{url}/v1/request/nobody?timeout=0.2", b"", auth)
        metrics = (await http("GET", f"{url}/metrics", headers=auth)).body.decode()
        status = (await http("GET", f"{url}/v1/status", headers=auth)).body.decode()
        self.assertIn("nats_bridge_http_responses_total", metrics)
        self.assertTrue(any("POST /v1/publish/x 202" in e for e in events))
        leaks = [e for e in events if TOKEN in e]
        self.assertEqual(leaks, [])
        self.assertNotIn(TOKEN, metrics)
        self.assertNotIn(TOKEN, status)
        self.assertNotIn(TOKEN, repr(self.service.config))

    async def test_access_log_is_opt_in_refusals_always_logged(self) -> None:
        """Without access_log only requests answered with 400 or above are logged (one
        line per publish is a third of the bridge's CPU under load); with it, every one."""
        for access_log in (False, True):
            events: list[str] = []

            def observe(event: dict[str, Any], into: list[str] = events) -> None:
                into.append(formatEvent(event) or "")

            globalLogPublisher.addObserver(observe)
            self.addCleanup(globalLogPublisher.removeObserver, observe)
            url, _sub = await self.setup_bridge(access_log=access_log)
            self.assertEqual((await http("POST", f"{url}/v1/publish/ok.log", b"x")).code, 202)
            self.assertEqual((await http("POST", f"{url}/v1/publish/bad%20subject", b"")).code,
                             400)
            globalLogPublisher.removeObserver(observe)
            self.assertEqual(
                [e for e in events if "/v1/publish/" in e],
                (["POST /v1/publish/ok.log 202 publish"] if access_log else [])
                + ["POST /v1/publish/bad%20subject 400 publish"],
                f"access_log={access_log}",
            )

    async def test_https_listener_on_loopback_needs_no_token(self) -> None:
        """--listen ssl:...:interface=127.0.0.1 serves HTTPS (the certificate verified
        against its CA) without a token; on all interfaces TLS alone is refused (it
        protects the traffic, not the door: see test_bridge_hostile_shutdown)."""
        import trustme
        from twisted.internet.ssl import Certificate
        from twisted.web.client import Agent, BrowserLikePolicyForHTTPS

        from tests.support.files import temp_file

        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        pem = temp_file(self, "server.pem")
        cert.private_key_and_cert_chain_pem.write_to_path(pem)
        url, sub = await self.setup_bridge(
            listen=f"ssl:0:interface=127.0.0.1:privateKey={pem}:certKey={pem}")
        self.assertTrue(url.startswith("https://127.0.0.1:"), url)
        policy = BrowserLikePolicyForHTTPS(Certificate.loadPEM(ca.cert_pem.bytes()))
        agent = Agent(reactor, contextFactory=policy)
        r = await http("POST", f"{url}/v1/publish/good.one", b"good", agent=agent)
        self.assertEqual(r.code, 202, r)
        self.assertEqual((await sub.next_msg(timeout=WAIT)).data, b"good")
        from txnats.bridge.config import BridgeConfig
        from txnats.errors import InvalidArgumentError

        with self.assertRaises(InvalidArgumentError):  # all interfaces: a token is due
            BridgeConfig(listen=f"ssl:8443:privateKey={pem}").check()
