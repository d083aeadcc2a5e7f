"""Hostile input, class 4: what NATS answers never breaks the answer to HTTP.

Every callback that turns a NATS result into an HTTP answer is fed what other NATS
clients may send: reply headers HTTP cannot carry (names such as ``a(b)``, values with
bytes that are not UTF-8 or with control characters, too many of them), answers on a
JetStream subject that are not acknowledgements, service answers JSON cannot hold, and
messages whose subject, reply or header values are not UTF-8 for SSE and WebSocket
clients, and header blocks that do not parse. Each request gets exactly one response,
and what is carried is carried exactly (percent- or base64-encoded) or counted as left
out.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import unquote_to_bytes

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from tests.support.bridge import BridgeTestCase, SseClient, WsClient, http
from tests.support.waits import bounded, reactor
from txnats.protocol.events import Msg
from txnats.protocol.headers import Headers

#: A header block as another client may publish it: no colon on its second line.
BAD_BLOCK = b"NATS/1.0\r\nno colon here\r\n\r\n"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _strict(text: bytes) -> Any:
    """JSON as a strict parser reads it: no NaN, no lone surrogate escapes."""
    if b"\\ud8" in text.lower() or b"\\udc" in text.lower():
        raise AssertionError(f"a lone surrogate escape in {text[:200]!r}")

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


class ReplyHeaderTests(BridgeTestCase):
    async def responder(self, subject: str, headers: Headers) -> None:
        nc = await self.connect()
        nc.subscribe(subject, lambda m: m.respond(b"answer", headers=headers))
        await bounded(nc.flush())

    async def test_headers_http_cannot_carry_go_percent_encoded(self) -> None:
        """Names that are no HTTP token (``a(b)``, ``x{y}``, ``q"t``), values with bytes
        that are not UTF-8, a control character or DEL: 200 with the body, each such
        header as ``Nats-Headers-Encoded: name=value`` that decodes to the exact bytes;
        the others (UTF-8 text, a tab inside) as ``Nats-Header-*``."""
        await self.responder("hostile.hdr", Headers([
            ("a(b)", "1"), ("Plain", "ok"), ("x{y}", "z"), ('q"t', "v"),
            ("Bin", "caf\udcff"), ("Ctl", "a\x01b"), ("Utf", "é"), ("Tab", "a\tb"),
            ("Del", "x\x7f"),
        ]))
        url = await self.bridge()
        r = await http("POST", f"{url}/v1/request/hostile.hdr?timeout=2", b"q")
        self.assertEqual((r.code, r.body), (200, b"answer"), r)
        self.assertEqual({k: v for k, v in r.headers.items() if k.startswith("nats-header-")},
                         {"nats-header-plain": ["ok"], "nats-header-utf": ["é"],
                          "nats-header-tab": ["a\tb"]})
        encoded = [tuple(unquote_to_bytes(p) for p in line.split("=", 1))
                   for line in r.headers["nats-headers-encoded"]]
        self.assertEqual(encoded, [(b"a(b)", b"1"), (b"x{y}", b"z"), (b'q"t', b"v"),
                                   (b"Bin", b"caf\xff"), (b"Ctl", b"a\x01b"),
                                   (b"Del", b"x\x7f")])

    async def test_headers_past_the_bound_are_left_out_and_counted(self) -> None:
        """40 headers of 1 KB each: the response carries those that fit in 16 KiB and
        ``Nats-Headers-Omitted`` counts the rest; one 20 KB value is left out alone."""
        await self.responder("hostile.many", Headers(
            [(f"H{i}", "v" * 1000) for i in range(40)] + [("Huge", "w" * 20000),
                                                        ("Last", "small")]))
        url = await self.bridge()
        r = await http("POST", f"{url}/v1/request/hostile.many?timeout=2", b"")
        self.assertEqual(r.code, 200, r)
        kept = [k for k in r.headers if k.startswith("nats-header-")]
        self.assertLessEqual(sum(len(k) + len(v) + 4 for k in kept for v in r.headers[k]),
                             16 * 1024)
        self.assertEqual(r.headers["nats-headers-omitted"], [str(42 - len(kept))])
        self.assertIn("nats-header-h0", kept)
        self.assertNotIn("nats-header-huge", kept)
        self.assertIn("nats-header-last", kept)  # (small enough for the room left)


    async def test_header_block_that_does_not_parse_goes_whole(self) -> None:
        """A reply whose header block another client wrote and that does not parse
        (the client delivers it as it came): ``Nats-Headers-Unparsed`` holds it,
        base64-encoded, byte for byte."""
        await self.responder("hostile.unparsed", Headers.unparsed(BAD_BLOCK))
        url = await self.bridge()
        r = await http("POST", f"{url}/v1/request/hostile.unparsed?timeout=2", b"")
        self.assertEqual((r.code, r.body), (200, b"answer"), r)
        self.assertEqual(base64.b64decode(r.headers["nats-headers-unparsed"][0]), BAD_BLOCK)


class OtherAnswerTests(BridgeTestCase):
    async def test_js_publish_answered_by_no_stream_is_502_once(self) -> None:
        """A plain responder on a JetStream publish subject (an answer that is no
        acknowledgement: not JSON, a JSON list, no sequence): one response each, 502 nats_error, not
        500 internal and not silence."""
        nc = await self.connect()
        answers = iter([b"not json", b"[1, 2]", b'{"stream": "S"}'])
        nc.subscribe("fakejs.>", lambda m: m.respond(next(answers)))
        await bounded(nc.flush())
        url = await self.bridge()
        for _ in range(3):
            r = await http("POST", f"{url}/v1/js/publish/fakejs.x", b"data")
            self.assertEqual((r.code, r.json()["code"]), (502, "nats_error"), r)

    async def test_service_answers_json_cannot_hold_are_left_out(self) -> None:
        """Two fake services answer $SRV.STATS, one with NaN and Infinity in an
        endpoint's data: the answer is strict JSON with the good one and
        ``"omitted": 1``."""
        nc = await self.connect()

        def stats(data: str, ident: str) -> bytes:
            return ('{"type": "io.nats.micro.v1.stats_response", "name": "svc", '
                    f'"id": "{ident}", "version": "1.0.0", '
                    '"started": "2024-01-01T00:00:00Z", "endpoints": [{"name": "e", '
                    f'"subject": "svc.e", "data": {data}}}]}}').encode()

        nc.subscribe("$SRV.STATS", lambda m: m.respond(stats("[NaN, Infinity]", "bad")))
        nc.subscribe("$SRV.STATS", lambda m: m.respond(stats('{"ok": 1}', "good")))
        await bounded(nc.flush())
        url = await self.bridge()
        r = await http("GET", f"{url}/v1/services/stats?timeout=1")
        self.assertEqual(r.code, 200, r)
        body = _strict(r.body)
        self.assertEqual([s["id"] for s in body["services"]], ["good"])
        self.assertEqual(body["omitted"], 1)


class StreamRenderingTests(BridgeTestCase):
    async def publish_odd(self) -> None:
        """A message whose subject, reply and one header value are not UTF-8."""
        nc = await self.connect()
        nc.publish("hostile.r\udcff", b"\xfe", reply="re.\udcfe",
                   headers={"X-Bin": "v\udcfd", "X-Ok": "fine"})
        nc.publish("hostile.unparsed", b"u", headers=Headers.unparsed(BAD_BLOCK))
        nc.publish("hostile.plain", b"text")
        await bounded(nc.flush())

    expected = {
        "subject_base64": _b64(b"hostile.r\xff"), "reply_base64": _b64(b"re.\xfe"),
        "headers": {"X-Ok": ["fine"]}, "headers_base64": {"X-Bin": [_b64(b"v\xfd")]},
        "data_base64": _b64(b"\xfe"),
    }

    async def test_sse_sends_what_is_not_utf8_base64_encoded(self) -> None:
        """SSE: the odd message's subject, reply and header value come base64-encoded
        (``*_base64``), the event is strict JSON (no lone surrogate escapes), and the
        stream goes on with the next message."""
        url = await self.bridge()
        sse = await SseClient.open(url, "/v1/subscribe/hostile.%3E")
        self.addCleanup(sse.close)
        await sse.wait_for("subscribed")
        await self.publish_odd()
        got = await sse.wait_for("message", 3)
        self.assertEqual(got[0], self.expected)
        self.assertEqual(got[1], {"subject": "hostile.unparsed", "data": "u",
                                  "headers_unparsed_base64": _b64(BAD_BLOCK)})
        self.assertEqual(got[2], {"subject": "hostile.plain", "data": "text"})
        body = bytes(sse.proto.data)
        for line in body.split(b"\n"):
            if line.startswith(b"data: "):
                _strict(line[6:])

    async def test_websocket_sends_what_is_not_utf8_base64_encoded(self) -> None:
        """The same for a WebSocket client: strict JSON text frames, base64 where the
        bytes are not UTF-8."""
        url = await self.bridge()
        ws = await WsClient.open(url, "/v1/subscribe/hostile.%3E")
        self.addCleanup(ws.close)
        await ws.wait_for(lambda f: f)
        await self.publish_odd()
        frames = await ws.wait_for(lambda f: len(f) >= 4, what="three messages")
        self.assertEqual(frames[1], self.expected)
        self.assertEqual(frames[2]["headers_unparsed_base64"], _b64(BAD_BLOCK))
        self.assertEqual(frames[3]["subject"], "hostile.plain")


class AnswerOnceUnitTests(SynchronousTestCase):
    def test_a_rendering_that_raises_is_502_with_its_headers_dropped(self) -> None:
        """If turning a NATS result into HTTP raises, the request still gets one answer:
        502 bad_reply, without the headers the failed rendering had set, and it is no
        longer counted in flight."""
        from twisted.internet.defer import Deferred

        from txnats.bridge._answers import answer_later
        from txnats.bridge.config import BridgeConfig
        from txnats.bridge.context import BridgeContext
        from txnats.bridge.metrics import BridgeMetrics

        ctx = BridgeContext(reactor, BridgeConfig(), BridgeMetrics())
        request = DummyRequest([b"v1", b"request", b"x"])
        request.path = b"/v1/request/x"
        d: Deferred[Msg] = Deferred()

        def render(msg: Msg) -> bytes:
            request.setHeader(b"nats-header-half", b"set")
            raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")

        answer_later(ctx, request, d, render)
        self.assertEqual(len(ctx.in_flight), 1)
        d.callback(Msg("x", None, b"", None, 1))
        self.assertEqual((request.responseCode, request.finished), (502, 1))
        self.assertEqual(json.loads(b"".join(request.written))["code"], "bad_reply")
        self.assertIsNone(request.responseHeaders.getRawHeaders(b"nats-header-half"))
        self.assertEqual(len(ctx.in_flight), 0)
        self.flushLoggedErrors(UnicodeEncodeError)


