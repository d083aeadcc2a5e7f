"""Interoperability with nats-py, the official asyncio client.

The nats-py side runs in a subprocess (``tests/interop_peer.py``) so that its
asyncio loop and the Twisted reactor never share a process. Both talk to one
``nats-server`` per TestCase class.

What nats-py 2.16 does with headers (checked here, not assumed):

- ``msg.headers`` is a plain ``dict[str, str]``: a header sent several times
  (``X-A: 1`` then ``X-A: 2``) keeps only its *last* value; the others are
  silently dropped when nats-py parses the block (``_parse_header_lines`` without
  ``fast_mail_parser``). The server and txnats carry every value.
- Names are case-sensitive (``X-A`` and ``x-a`` are two keys); values are
  stripped of surrounding whitespace and decoded as UTF-8.
- ``publish(headers=...)`` only takes ``str`` values, so nats-py cannot send a
  repeated header at all.
- A message without headers has ``msg.headers`` ``None``.
"""

from __future__ import annotations

import base64
import os
import random
import sys
import time
from pathlib import Path

from twisted.internet import defer, reactor
from twisted.trial.unittest import TestCase

import txnats
from tests.interop_peer import payload
from tests.support.peers import WAIT, Peer
from tests.support.servers import ServerPerClass

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "interop_peer.py"

BINARY = bytes(range(256)) * 4 + b"\r\nMSG fake 1 3\r\nabc\r\n\x00"
LARGE = random.Random(7).randbytes(200_000)


def decode(obj: dict) -> bytes:
    return base64.b64decode(obj["data"])


class InteropTests(ServerPerClass, TestCase):
    """txnats and nats-py exchange messages, headers and requests through one server."""

    timeout = 90

    def subject(self, suffix: str = "") -> str:
        return f"interop.{self._testMethodName}{suffix}"

    async def connect(self) -> txnats.Client:
        nc = await txnats.connect(reactor, self.server.url, name=self._testMethodName)
        self.addCleanup(nc.close)
        return nc

    async def peer(self, mode: str, subject: str, *rest: str) -> Peer:
        """Start ``interop_peer.py MODE URL SUBJECT ...`` and wait until it is ready."""
        args = [mode, self.server.url, subject, *rest]
        peer = Peer(args)
        transport = reactor.spawnProcess(
            peer,
            sys.executable,
            [sys.executable, str(PEER), *args],
            env=dict(os.environ),
            path=str(ROOT),
        )

        def reap() -> defer.Deferred | None:
            if peer.ended:
                return None
            transport.signalProcess("KILL")
            return defer.ensureDeferred(peer._wait(lambda: peer.ended, "die", WAIT))

        self.addCleanup(reap)
        await peer.wait_ready()
        return peer

    # (a) txnats -> nats-py -------------------------------------------------------
    async def test_natspy_receives_txnats_publishes(self) -> None:
        """nats-py gets txnats publishes intact: binary/empty/large payloads, headers, reply."""
        subject = self.subject()
        peer = await self.peer("sub", subject, "4")
        nc = await self.connect()
        nc.publish(subject, BINARY, headers={"X-Single": "one", "X-Utf8": "héllo wörld"})
        nc.publish(subject, b"", headers={"X-Only": "headers"})
        nc.publish(subject, LARGE, reply="interop.reply.to")
        nc.publish(subject, b"plain")
        await nc.flush(timeout=WAIT)
        out = await peer.wait_exit()

        self.assertEqual([decode(m) for m in out], [BINARY, b"", LARGE, b"plain"])
        self.assertEqual(out[0]["headers"], {"X-Single": "one", "X-Utf8": "héllo wörld"})
        self.assertEqual(out[1]["headers"], {"X-Only": "headers"})
        self.assertIsNone(out[2]["headers"])
        self.assertEqual(out[2]["reply"], "interop.reply.to")
        self.assertIsNone(out[3]["headers"])
        self.assertEqual({m["subject"] for m in out}, {subject})

    async def test_natspy_keeps_last_value_of_repeated_header(self) -> None:
        """txnats sends every value of a repeated header; nats-py's dict keeps only the last."""
        subject = self.subject()
        peer = await self.peer("sub", subject, "2")
        nc = await self.connect()
        witness = nc.subscribe(subject)  # what really went through the server
        await nc.flush(timeout=WAIT)
        nc.publish(subject, b"multi", headers={"X-A": ["1", "2"], "x-a": "lower", "X-B": "b"})
        h = txnats.Headers()
        h.add("X-C", "first")
        h.add("X-D", "d")
        h.add("X-C", "last")
        nc.publish(subject, b"ordered", headers=h)
        await nc.flush(timeout=WAIT)

        first = await witness.next_msg(timeout=WAIT)
        second = await witness.next_msg(timeout=WAIT)
        self.assertEqual(first.headers.get_all("X-A"), ["1", "2"])
        self.assertEqual(first.headers.get_all("x-a"), ["lower"])
        self.assertEqual(second.headers.get_all("X-C"), ["first", "last"])

        out = await peer.wait_exit()
        # nats-py 2.16 parses headers into a plain dict, so later values overwrite
        # earlier ones; names stay case-sensitive (X-A and x-a are separate keys).
        self.assertEqual(out[0]["headers"], {"X-A": "2", "x-a": "lower", "X-B": "b"})
        self.assertEqual(out[1]["headers"], {"X-C": "last", "X-D": "d"})

    # (b) nats-py -> txnats -------------------------------------------------------
    async def test_txnats_receives_natspy_publishes(self) -> None:
        """txnats receives nats-py publishes in order, payloads and headers intact."""
        subject = self.subject()
        nc = await self.connect()
        sub = nc.subscribe(subject)
        await nc.flush(timeout=WAIT)
        peer = await self.peer("pub", subject, "5")
        out = await peer.wait_exit()
        self.assertEqual(out, [{"published": 5}])

        for i in range(5):
            msg = await sub.next_msg(timeout=WAIT)
            self.assertEqual(msg.subject, subject)
            self.assertEqual(msg.data, payload(i))
            self.assertIsNone(msg.reply)
            self.assertEqual(
                msg.headers.multi_items(), [("X-Seq", str(i)), ("X-Origin", "nats-py")]
            )
            self.assertIsNone(msg.headers.status)

    # (c) nats-py requests, txnats responds ---------------------------------------
    async def test_natspy_requests_answered_by_txnats(self) -> None:
        """A txnats responder (msg.respond) answers nats-py requests, headers both ways."""
        subject = self.subject()
        nc = await self.connect()

        def respond(msg: txnats.Msg) -> None:
            msg.respond(
                b"txnats:" + msg.data,
                headers={"X-Responder": "txnats", "X-Seen-Req": msg.headers["X-Req"]},
            )

        nc.subscribe(subject, respond)
        await nc.flush(timeout=WAIT)
        peer = await self.peer("request", subject, "3")
        out = await peer.wait_exit()

        self.assertEqual(len(out), 3, out)
        for i, reply in enumerate(out):
            self.assertEqual(decode(reply), b"txnats:ping %d" % i)
            self.assertEqual(reply["headers"], {"X-Responder": "txnats", "X-Seen-Req": str(i)})

    # (d) txnats requests, nats-py responds ---------------------------------------
    async def test_txnats_requests_answered_by_natspy(self) -> None:
        """A nats-py responder answers concurrent txnats requests, headers both ways."""
        subject = self.subject()
        peer = await self.peer("reply", subject, "3")
        nc = await self.connect()
        replies = await defer.gatherResults(
            [
                nc.request(subject, b"req %d" % i, timeout=WAIT, headers={"X-Req": str(i)})
                for i in range(3)
            ],
            consumeErrors=True,
        )
        for i, reply in enumerate(replies):
            self.assertEqual(reply.data, b"nats-py:req %d" % i)
            self.assertEqual(reply.headers["X-Responder"], "nats-py")
            self.assertEqual(reply.headers["X-Seen-Req"], str(i))

        seen = await peer.wait_exit()
        self.assertEqual(sorted(decode(m) for m in seen), [b"req 0", b"req 1", b"req 2"])
        for m in seen:
            self.assertTrue(m["reply"].startswith("_INBOX."), m)

    # (e) no responders -------------------------------------------------------------
    async def test_no_responders_after_natspy_responder_leaves(self) -> None:
        """txnats requests get NoRespondersError at once, before and after a nats-py responder."""
        subject = self.subject()
        nc = await self.connect()

        start = time.monotonic()
        with self.assertRaises(txnats.NoRespondersError):
            await nc.request(subject, b"anyone?", timeout=WAIT)
        self.assertLess(time.monotonic() - start, WAIT / 2)

        peer = await self.peer("reply", subject, "1")
        reply = await nc.request(subject, b"one", timeout=WAIT, headers={"X-Req": "1"})
        self.assertEqual(reply.data, b"nats-py:one")
        await peer.wait_exit()  # it unsubscribed and closed its connection

        start = time.monotonic()
        with self.assertRaises(txnats.NoRespondersError):
            await nc.request(subject, b"still there?", timeout=WAIT)
        self.assertLess(time.monotonic() - start, WAIT / 2)
