"""Hostile input, classes 7 and 1 (the bridge's half): what names a subject.

Class 7: path bytes (after percent-decoding) and query parameters that are not UTF-8
are refused, 400 ``bad_encoding``, on every route, so that two byte sequences never
collapse onto one subject. Class 1: a subject too long for the server's control line
(4 KB by default; the server would close the connection) is refused, 400
``subject_too_long``, on every route before anything is sent, and costs nothing to the
good requests around it. Through the bridge's HTTP and WebSocket interface against a
real nats-server; a subscriber on ``>`` proves that nothing refused reached NATS.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import TestCase

from tests.support.bridge import BridgeTestCase, RawHttp, SseClient, http
from tests.support.waits import WAIT, bounded, wait_until

#: nats-server's default max_control_line, and what the bridge keeps of it for the
#: reply inbox, sizes and ids it adds to a subject (txnats.bridge.security).
CONTROL_LINE, RESERVE = 4096, 128


def _upgrade(path: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: bridge\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode()


async def answers(case: TestCase, url: str, cases: list[tuple[str, str]]
                  ) -> list[tuple[str, int, str]]:
    """(path, status, code) for each (method, path); method SSE or WS opens a stream."""
    found = []
    for method, path in cases:
        if method == "SSE":
            sse = await SseClient.open(url, path)
            case.addCleanup(sse.close)
            await wait_until(lambda s=sse: s.proto.lost or (s.status is not None and b"}"
                                                           in s.proto.data),
                             WAIT, "the SSE answer")
            status, code = sse.status, _code(bytes(sse.proto.data).partition(b"\r\n\r\n")[2])
        elif method == "WS":
            raw = await (await RawHttp.send(url, _upgrade(path))).answered()
            case.addCleanup(raw.close)
            status, code = raw.status, _code(raw.body)
        else:
            r = await http(method, url + path, b"body")
            status, code = r.code, _code(r.body)
        found.append((path, status or 0, code))
    return found


def _code(body: bytes) -> str:
    text = body.strip()
    start = text.find(b"{")  # (a chunked body: the size line first)
    try:
        return str(json.loads(text[start:text.rfind(b"}") + 1])["code"])
    except (ValueError, KeyError):
        return f"no JSON error: {body[:80]!r}"


class NotUtf8Tests(BridgeTestCase):
    async def test_path_bytes_not_utf8_are_400_on_every_route(self) -> None:
        """``%FF``, an overlong ``%C0%AE``, an encoded surrogate ``%ED%A0%80`` and a
        truncated ``%E2%82`` in the subject, bucket or key of every route: 400
        bad_encoding, nothing published, no subscription made."""
        url = await self.bridge()
        sub = await self.watch()
        cases = []
        for bad in ("%FF", "%C0%AE", "%ED%A0%80", "%E2%82"):
            subject = f"hostile.a{bad}b"
            cases += [("POST", f"/v1/publish/{subject}"), ("POST", f"/v1/request/{subject}"),
                      ("SSE", f"/v1/subscribe/{subject}"), ("WS", f"/v1/subscribe/{subject}"),
                      ("POST", f"/v1/js/publish/{subject}"),
                      ("GET", f"/v1/kv/B{bad}/key"), ("PUT", f"/v1/kv/bucket/k{bad}"),
                      ("DELETE", f"/v1/kv/bucket/k{bad}"), ("GET", f"/v1/services/{bad}")]
        found = await answers(self, url, cases)
        self.assertEqual([f for f in found if f[1:] != (400, "bad_encoding")], [])
        await self.only_good(url, sub)

    async def test_query_parameters_not_utf8_are_400(self) -> None:
        """``queue``, ``msg_id``, ``name`` and ``timeout`` holding bytes that are not
        UTF-8: 400 bad_encoding, not a U+FFFD stand-in; ``access_token`` so is no match
        (401), even for a token that holds U+FFFD."""
        url = await self.bridge()
        sub = await self.watch()
        found = await answers(self, url, [
            ("SSE", "/v1/subscribe/hostile.q?queue=q%FF"),
            ("WS", "/v1/subscribe/hostile.q?queue=q%FF"),
            ("POST", "/v1/js/publish/hostile.q?msg_id=id%FF"),
            ("GET", "/v1/services?name=svc%FF"), ("POST", "/v1/request/hostile.q?timeout=1%FF"),
        ])
        self.assertEqual([f for f in found if f[1:] != (400, "bad_encoding")], [])
        await self.only_good(url, sub)
        url = await self.bridge(auth_token="t\ufffd")
        r = await http("POST", f"{url}/v1/publish/hostile.t?access_token=t%FF", b"")
        self.assertEqual(r.code, 401, r)
        r = await http("POST", f"{url}/v1/publish/good.t?access_token=t%EF%BF%BD", b"")
        self.assertEqual(r.code, 202, r)

    async def test_distinct_bytes_never_share_a_subject(self) -> None:
        """``a%FFb`` and ``a%FEb`` are both refused (they would both have become
        ``a\\ufffdb``); real UTF-8 (``a%C3%A9b``) is published as ``aéb``."""
        url = await self.bridge()
        sub = await self.watch()
        for bad in ("a%FFb", "a%FEb", "a%EF%BF%BDb%FF"):
            r = await http("POST", f"{url}/v1/publish/hostile.{bad}", b"x")
            self.assertEqual((r.code, r.json()["code"]), (400, "bad_encoding"), bad)
        r = await http("POST", f"{url}/v1/publish/good.a%C3%A9b", b"accent")
        self.assertEqual((r.code, r.json()["published"]), (202, "good.aéb"), r)
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual((msg.subject, msg.data), ("good.aéb", b"accent"))


class SubjectTooLongTests(BridgeTestCase):
    async def test_refused_on_every_route_before_anything_is_sent(self) -> None:
        """5 KB and 10 KB subjects on publish, request, SSE, WebSocket (400 instead of
        the upgrade) and JetStream publish, a key whose API subject is as long, and a
        subject that fits only without its queue group: 400 subject_too_long; nothing
        reaches NATS and the bridge's connection never drops."""
        url = await self.bridge()
        sub = await self.watch()
        cases = []
        for size in (5 * 1024, 10 * 1024):
            subject = "hostile." + "s" * size
            cases += [("POST", f"/v1/publish/{subject}"), ("POST", f"/v1/request/{subject}"),
                      ("SSE", f"/v1/subscribe/{subject}"), ("WS", f"/v1/subscribe/{subject}"),
                      ("POST", f"/v1/js/publish/{subject}"),
                      ("PUT", f"/v1/kv/bucket/{'k' * size}")]
        near = "hostile." + "n" * (CONTROL_LINE - RESERVE - 60)
        cases += [("SSE", f"/v1/subscribe/{near}?queue={'q' * 100}")]
        found = await answers(self, url, cases)
        self.assertEqual([f[1:] for f in found if f[1:] != (400, "subject_too_long")], [])
        await self.only_good(url, sub)
        client = self.service.ctx.client
        assert client is not None
        self.assertEqual(client.stats.reconnects, 0)

    async def test_long_subjects_among_good_publishes_cost_none_of_them(self) -> None:
        """60 good publishes with a 10 KB subject after every sixth: every good 202
        arrives at a subscriber, in order; /readyz is 200 at every poll; the longest
        subject that fits (the control line less the reserve) is published too."""
        url = await self.bridge()
        nc = await self.connect()
        sub = nc.subscribe("fine.>")
        await bounded(nc.flush())
        ready, accepted = [], []
        for i in range(60):
            r = await http("POST", f"{url}/v1/publish/fine.{i}", b"%d" % i)
            self.assertEqual(r.code, 202, r)
            accepted.append(f"fine.{i}")
            if i % 6 == 5:
                bad = await http("POST", f"{url}/v1/publish/fine.{'x' * 10240}", b"lost?")
                self.assertEqual((bad.code, bad.json()["code"]), (400, "subject_too_long"))
            ready.append((await http("GET", f"{url}/readyz")).code)
        longest = "fine." + "L" * (CONTROL_LINE - RESERVE - len("fine."))
        self.assertEqual((await http("POST", f"{url}/v1/publish/{longest}", b"edge")).code, 202)
        accepted.append(longest)
        got = [(await sub.next_msg(timeout=WAIT)).subject for _ in accepted]
        self.assertEqual(got, accepted)
        self.assertEqual(set(ready), {200}, ready)
