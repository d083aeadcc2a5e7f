"""Hostile input, class 3: every input the bridge takes has a bound and an answer.

Through the bridge's real HTTP and WebSocket interface (raw sockets, to send what a
polite client would not) against a real nats-server: WebSocket frames and messages
over the bound are closed with 1009 as soon as they are announced; an overlong request
line is 414, an overlong header line, too many headers or too large a head 431; a body
over ``max_body`` (chunked, or a ``Content-Length`` that lies either way) 413, 414 or
408, answered as soon as it is known; and the bridge's memory stays flat through a
64 MB WebSocket message and a 64 MB body (figure lines). Nothing refused reaches NATS.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.support.bridge import (
    BridgeProcess,
    BridgeTestCase,
    RawHttp,
    RawWs,
    WsClient,
    http,
    zeros,
)
from tests.support.figures import figure
from tests.support.files import free_port
from tests.support.waits import WAIT, sleep

# The documented bounds (README, txnats.bridge._channel and _ws), written out so that
# these tests also run, and fail, against a bridge without them.
MAX_LINE, MAX_HEAD, MAX_HEADERS, MAX_CLIENT_MESSAGE = 16 * 1024, 32 * 1024, 100, 4096

MB = 1024 * 1024
LIMIT = 64 * 1024
# A streamed input counts as answered early when the client stopped within 16 of its
# 64 MB: what it wrote includes what the kernel's socket buffers took (a few MB on
# loopback) before the answer was read.


def _head(path: str, *headers: str, method: str = "POST") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: bridge", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunk(piece: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(piece), piece)


def _rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of ``pid``, in KiB."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


class DocumentedBoundsTests(SynchronousTestCase):
    def test_the_bounds_are_the_documented_ones(self) -> None:
        """The bridge's bounds are the ones these tests (and the README) use."""
        from txnats.bridge import _channel, _ws

        self.assertEqual((_channel.MAX_LINE, _channel.MAX_HEAD, _channel.MAX_HEADERS,
                          _ws.MAX_CLIENT_MESSAGE), (MAX_LINE, MAX_HEAD, MAX_HEADERS,
                                                    MAX_CLIENT_MESSAGE))


class WebSocketBoundTests(BridgeTestCase):
    async def test_frame_over_the_bound_is_closed_1009_at_its_header(self) -> None:
        """A 64 MB binary frame, and a 64 KB text frame: the bridge sends close 1009
        once the frame's header announces the size, so the client stops after a few
        reads, not the whole frame; the bridge serves other WebSockets as before."""
        url = await self.bridge()
        for length, opcode in ((64 * MB, 2), (64 * 1024, 1), (MAX_CLIENT_MESSAGE + 1, 2)):
            ws = await RawWs.open(url, "/v1/subscribe/hostile.ws")
            self.addCleanup(ws.finish)
            await ws.wait_for(lambda w: w.messages, "the subscribed frame")
            sent = await ws.stream(length, opcode)
            await ws.wait_for(lambda w: w.close_code is not None, "a close frame")
            self.assertEqual(ws.close_code, 1009, (length, ws.frames[-1:]))
            self.assertLess(sent, min(length, 16 * MB) + 64, length)
        nc = await self.connect()
        good = await WsClient.open(url, "/v1/subscribe/hostile.ws")
        self.addCleanup(good.close)
        await good.wait_for(lambda f: f)
        nc.publish("hostile.ws", b"still here")
        frames = await good.wait_for(lambda f: len(f) >= 2, what="the message")
        self.assertEqual(frames[1]["data"], "still here")

    async def test_fragmented_message_over_the_bound_is_closed_1009(self) -> None:
        """Small frames that are all one message: ignored while the message stays within
        the bound (the stream goes on), closed with 1009 once its total passes it."""
        url = await self.bridge()
        nc = await self.connect()
        ws = await RawWs.open(url, "/v1/subscribe/hostile.frag")
        self.addCleanup(ws.finish)
        await ws.wait_for(lambda w: w.messages, "the subscribed frame")
        for _ in range(50):  # whole small messages: read and dropped
            ws.send(1, b'{"hello": "bridge"}')
        ws.send(2, b"x" * 1000, fin=False)
        ws.send(0, b"x" * 1000, fin=False)
        nc.publish("hostile.frag", b"between")
        await ws.wait_for(lambda w: len(w.messages) >= 2, "the message")
        self.assertIsNone(ws.close_code)
        for _ in range(MAX_CLIENT_MESSAGE // 1000):
            ws.send(0, b"x" * 1000, fin=False)
        await ws.wait_for(lambda w: w.close_code is not None, "a close frame")
        self.assertEqual(ws.close_code, 1009)

    async def test_memory_stays_flat_through_64_mb_from_a_client(self) -> None:
        """Figure: the RSS of a ``twistd nats-bridge`` process before and after a
        64 MB WebSocket message and a 64 MB chunked body (over --max-body): both
        refused (1009, 413) and the bridge's peak RSS grows by under 16 MB."""
        assert self.server is not None
        port = free_port()
        proc = BridgeProcess.start(self, "--nats", self.server.url,
                                   "--listen", f"tcp:{port}:interface=127.0.0.1")
        base = (await proc.wait_for(r"nats-bridge listening on (http://\S+)", 30)).group(1)
        assert proc.transport is not None
        pid = proc.transport.pid
        warm = await RawWs.open(base, "/v1/subscribe/hostile.rss")  # import autobahn's code
        await warm.finish()
        self.assertEqual((await http("POST", f"{base}/v1/publish/warm", b"x" * 1000)).code, 202)
        await sleep(0.2)
        before = _rss_kib(pid)
        ws = await RawWs.open(base, "/v1/subscribe/hostile.rss")
        self.addCleanup(ws.finish)
        await ws.wait_for(lambda w: w.messages, "the subscribed frame")
        ws_sent = await ws.stream(64 * MB)
        await ws.wait_for(lambda w: w.close_code is not None, "a close frame", 30)
        after_ws = _rss_kib(pid)
        raw = await RawHttp.send(base, _head("/v1/publish/hostile.rss",
                                             "Transfer-Encoding: chunked"),
                                 zeros(64 * MB, frame=_chunk))
        await raw.answered()
        after_body = _rss_kib(pid)
        grown = (after_body["VmHWM"] - before["VmHWM"]) // 1024
        figure(3, ws_close=ws.close_code, ws_bytes_sent=ws_sent, body_status=raw.status,
               body_bytes_sent=raw.sent, rss_before_mib=before["VmRSS"] // 1024,
               rss_after_ws_mib=after_ws["VmRSS"] // 1024,
               rss_after_body_mib=after_body["VmRSS"] // 1024, peak_growth_mib=grown)
        self.assertEqual((ws.close_code, raw.status), (1009, 413))
        self.assertLess(grown, 16, (before, after_ws, after_body))


class HeadBoundTests(BridgeTestCase):
    async def test_header_line_too_long_is_431(self) -> None:
        """A 64 KB header line (whole, or streamed without end) and one just over
        MAX_LINE: 431 header_too_large with a JSON body, then the connection closed;
        the streamed one is answered long before its 64 MB are sent."""
        url = await self.bridge()
        sub = await self.watch()
        for size in (64 * 1024, MAX_LINE + 1):
            head = _head("/v1/publish/hostile.head", f"X-Big: {'a' * size}")
            raw = await (await RawHttp.send(url, head)).closed()
            self.assertEqual(raw.status, 431, bytes(raw.proto.data[:200]))
            self.assertEqual(raw.json()["code"], "header_too_large")
            self.assertEqual(raw.headers["connection"], [b"close"])
        start = b"POST /v1/publish/hostile.head HTTP/1.1\r\nHost: b\r\nX-Big: "
        raw = await RawHttp.send(url, start, zeros(64 * MB, 1024, lambda p: b"a" * len(p)))
        await raw.closed()
        self.assertEqual(raw.status, 431)
        self.assertLess(raw.sent, 16 * MB)
        await self.only_good(url, sub)

    async def test_too_many_headers_or_too_large_a_head_is_431(self) -> None:
        """MAX_HEADERS headers pass; one more is 431 too_many_headers; a head of lines
        each within MAX_LINE but over MAX_HEAD in all is 431 header_too_large."""
        url = await self.bridge()
        sub = await self.watch()
        many = [f"X-H{i}: v" for i in range(MAX_HEADERS - 2)]  # and Host, Content-Length
        raw = await (await RawHttp.send(url, _head("/v1/publish/good.one", *many,
                                                   "Content-Length: 4") + b"good")).answered()
        self.assertEqual(raw.status, 202, raw.body)
        self.assertEqual((await sub.next_msg(timeout=WAIT)).subject, "good.one")
        raw.close()
        cases = (([*many, "X-One: more", "X-Two: more"], "too_many_headers"),
                 ([f"X-L{i}: {'b' * 1000}" for i in range(MAX_HEAD // 1000 + 2)],
                  "header_too_large"))
        for headers, code in cases:
            raw = await (await RawHttp.send(url, _head("/v1/publish/hostile.many",
                                                       *headers))).closed()
            self.assertEqual((raw.status, raw.json()["code"]), (431, code), code)
        await self.only_good(url, sub)

    async def test_request_line_too_long_is_414(self) -> None:
        """A path, or a query string, that makes the request line longer than MAX_LINE:
        414 uri_too_long; a request line streamed without end is answered too."""
        url = await self.bridge()
        sub = await self.watch()
        for path in ("/v1/publish/" + "a" * (MAX_LINE + 10),
                     "/v1/publish/hostile.q?x=" + "q" * (MAX_LINE + 10)):
            raw = await (await RawHttp.send(url, _head(path))).closed()
            self.assertEqual((raw.status, raw.json()["code"]), (414, "uri_too_long"))
        raw = await RawHttp.send(url, b"GET /v1/status?", zeros(64 * MB, 1024,
                                                                 lambda p: b"q" * len(p)))
        await raw.closed()
        self.assertEqual(raw.status, 414)
        self.assertLess(raw.sent, 16 * MB)
        await self.only_good(url, sub)

    async def test_malformed_heads_are_400_with_a_body(self) -> None:
        """What HTTP cannot parse (a header without a colon, two Content-Lengths, a
        length that is not a number, a bad chunk size) is 400 bad_request with a JSON
        body and Connection: close, not a bare status line."""
        url = await self.bridge()
        sub = await self.watch()
        for head in (_head("/v1/publish/hostile.bad", "no colon here"),
                     _head("/v1/publish/hostile.bad", "Content-Length: 1",
                           "Content-Length: 2"),
                     _head("/v1/publish/hostile.bad", "Content-Length: -5"),
                     _head("/v1/publish/hostile.bad", "Transfer-Encoding: chunked") + b"zz\r\n"):
            raw = await (await RawHttp.send(url, head)).closed()
            self.assertEqual(raw.status, 400, head)
            self.assertEqual(raw.json()["code"], "bad_request")
            self.assertEqual(raw.headers["connection"], [b"close"])
        await self.only_good(url, sub)


class BodyBoundTests(BridgeTestCase):
    async def test_body_over_the_limit_is_413_as_it_arrives(self) -> None:
        """A chunked body that never ends, a Content-Length of 1 GB without Expect, and
        one huge chunk: each answered 413 body_too_large as soon as the limit is passed,
        long before the body is sent; nothing is published."""
        url = await self.bridge(max_body=LIMIT)
        sub = await self.watch()
        chunked = _head("/v1/publish/hostile.body", "Transfer-Encoding: chunked")
        cases = ((chunked, zeros(64 * MB, 16 * 1024, _chunk)),
                 (_head("/v1/publish/hostile.body", "Content-Length: 1000000000"),
                  zeros(64 * MB)),
                 (chunked + b"%x\r\n" % (64 * MB), zeros(64 * MB)))
        for head, body in cases:
            raw = await RawHttp.send(url, head, body)
            await raw.closed()
            self.assertEqual((raw.status, raw.json()["code"]), (413, "body_too_large"), head)
            self.assertLess(raw.sent, 16 * MB, head)
        await self.only_good(url, sub)

    async def test_content_length_shorter_than_the_body(self) -> None:
        """Content-Length shorter than what follows: the declared bytes are the body
        (202), the rest is read as the next request and refused (414), the connection
        closed; nothing but the declared body is published."""
        url = await self.bridge()
        sub = await self.watch()
        raw = await RawHttp.send(url, _head("/v1/publish/good.lie", "Content-Length: 5")
                                 + b"short" + bytes(2 * MB))
        await raw.closed()
        data = bytes(raw.proto.data)
        self.assertTrue(data.startswith(b"HTTP/1.1 202 "), data[:100])
        self.assertIn(b"HTTP/1.1 414 ", data)
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual((msg.subject, msg.data), ("good.lie", b"short"))
        await self.only_good(url, sub)

    async def test_request_that_stops_arriving_is_408(self) -> None:
        """Content-Length longer than what follows, then silence, and a head that stops
        half-way: 408 request_timeout after the idle timeout. An idle connection with no
        request on it is closed without a word."""
        url = await self.bridge(idle_timeout=0.5)
        sub = await self.watch()
        for partial in (_head("/v1/publish/hostile.lie", "Content-Length: 100") + b"ten bytes!",
                        b"POST /v1/publish/hostile.lie HTTP/1.1\r\nHost: b\r\n"):
            raw = await (await RawHttp.send(url, partial)).closed(WAIT)
            self.assertEqual((raw.status, raw.json()["code"]), (408, "request_timeout"))
        idle = await (await RawHttp.send(url, b"")).closed(WAIT)
        self.assertEqual(bytes(idle.proto.data), b"")
        await self.only_good(url, sub)
