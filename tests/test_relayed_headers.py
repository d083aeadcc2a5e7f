"""Header blocks that another client wrote are delivered, never a dropped connection.

nats-server relays an HPUB's header block without looking at it (checked: a block of
one byte, a block without ``NATS/1.0``, a line without a colon, a bad status are all
relayed). Before, txnats raised a protocol error on such a block and dropped the
connection, so one bad publisher disconnected every txnats subscriber on the subject
and what was in flight was lost. Now the message is delivered with
``Headers.unparsed(block)`` (an empty mapping, ``raw`` holding the block), a
:class:`~txnats.errors.MalformedHeadersError` naming the subject and sid goes to
``error_cb``, and the connection goes on.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial import unittest

from txnats import Headers, MalformedHeadersError, Msg, connect
from txnats.protocol.headers import encode_headers

from .support.events import ClientEvents
from .support.rawclient import hpub, send_raw
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor, wait_until

#: Header blocks a careless or hostile publisher could write, all relayed by the server.
BAD_BLOCKS = [
    b"x",
    b"GARBAGE-NOT-A-HEADER-BLOCK",
    b"HTTP/1.1 200 OK\r\n\r\n",
    b"NATS/1.0\r\nno colon here\r\n\r\n",
    b"NATS/1.0 5x3\r\n\r\n",
    b"NATS/1.0\r\nA: b\r\n",
    b"NATS/1.0\r\nBad Name: v\r\n\r\n",
    b"NATS/1.0\r\n\xff\xfe: v\r\n\r\n",
    b"NATS/1.0\r\n\r\nA: after the end\r\n\r\n",
]


def raw_of(msg: Msg) -> bytes | None:
    """The unparsed header block of ``msg`` (None if it has none)."""
    return None if msg.headers is None else msg.headers.raw


class UnparsedHeadersUnitTests(unittest.SynchronousTestCase):
    """What :meth:`Headers.unparsed` stands for."""

    def test_empty_with_raw(self) -> None:
        """Unparsed headers are an empty, falsy mapping with no status; ``raw`` holds
        the block; parsed headers have ``raw`` None."""
        h = Headers.unparsed(b"junk")
        self.assertEqual((len(h), bool(h), h.status, h.raw), (0, False, None, b"junk"))
        self.assertIsNone(h.get("A"))
        self.assertIsNone(Headers({"A": "1"}).raw)
        self.assertIn("raw=b'junk'", repr(h))

    def test_encoded_unchanged(self) -> None:
        """Publishing them again sends the block as it came (as the server relays it);
        once a header is added, the added headers are sent instead."""
        h = Headers.unparsed(b"NATS/1.0\r\nno colon\r\n\r\n")
        self.assertEqual(encode_headers(h), b"NATS/1.0\r\nno colon\r\n\r\n")
        copy = Headers(h)
        self.assertEqual(copy.raw, h.raw)
        self.assertEqual(copy, h)
        copy.add("X", "1")
        self.assertEqual(encode_headers(copy), b"NATS/1.0\r\nX: 1\r\n\r\n")
        self.assertNotEqual(Headers.unparsed(b"a"), Headers())


class RelayedHeaderTests(ServerPerClass, unittest.TestCase):
    """A raw publisher writes bad header blocks among good messages, through a real
    nats-server, to txnats subscribers."""

    async def client(self, **opts: Any) -> Any:
        assert self.server is not None
        nc = await connect(reactor, self.server.url, **opts)
        self.addCleanup(nc.close)
        return nc

    async def test_every_message_delivered_connection_kept(self) -> None:
        """Good and bad messages interleaved reach a handler subscriber and a
        next_msg() reader in order; each bad one is reported once with its subject
        and sid; neither client disconnects."""
        assert self.server is not None
        events = ClientEvents()
        nc = await self.client(**events.callbacks())
        seen: list[Msg] = []
        sub = nc.subscribe("relay.t", seen.append)
        reader = nc.subscribe("relay.t")
        await nc.flush(timeout=5)
        frames = b""
        for i, block in enumerate(BAD_BLOCKS):
            frames += hpub(b"relay.t", b"NATS/1.0\r\nGood: %d\r\n\r\n" % i, b"good%d" % i)
            frames += hpub(b"relay.t", block, b"bad%d" % i)
        await send_raw(self.server.port, frames)
        n = 2 * len(BAD_BLOCKS)
        await wait_until(lambda: len(seen) == n, what=f"{n} messages")
        for i, block in enumerate(BAD_BLOCKS):
            good, bad = seen[2 * i], seen[2 * i + 1]
            self.assertEqual((good.data, good.headers and good.headers["Good"]),
                             (b"good%d" % i, str(i)))
            self.assertEqual((bad.data, raw_of(bad)), (b"bad%d" % i, block))
            self.assertEqual(len(bad.headers or {}), 0)
        read = [await reader.next_msg(timeout=5) for _ in range(n)]
        self.assertEqual([m.data for m in read], [m.data for m in seen])
        await wait_until(lambda: events.count("error") >= 2 * len(BAD_BLOCKS),
                         what="an error_cb call per bad message and subscription")
        reported = [e for e in events.errors if isinstance(e, MalformedHeadersError)]
        self.assertEqual(len(reported), 2 * len(BAD_BLOCKS))
        self.assertEqual({(e.subject, e.sid) for e in reported},
                         {("relay.t", sub.sid), ("relay.t", reader.sid)})
        self.assertTrue(nc.is_connected)
        self.assertEqual(events.count("disconnected"), 0)
        self.assertTrue(all(len(str(e)) < 500 for e in reported))

    async def test_a_reply_with_bad_headers_answers_the_request(self) -> None:
        """A responder (another program) whose reply carries a bad header block: the
        request fires with that reply, ``raw`` set, instead of losing the connection
        and failing every request in flight."""
        assert self.server is not None
        nc = await self.client()
        responder = await self.client()
        replies: Deferred[str] = Deferred()
        responder.subscribe("relay.svc", lambda m: replies.callback(m.reply))
        await responder.flush(timeout=5)
        others = [nc.request("relay.none", b"", timeout=3) for _ in range(3)]
        d = nc.request("relay.svc", b"q", timeout=5)
        inbox = await bounded(replies)
        await send_raw(self.server.port, hpub(inbox.encode(), b"NOT-NATS", b"answer"))
        reply = await d
        self.assertEqual((reply.data, raw_of(reply)),
                         (b"answer", b"NOT-NATS"))
        for other in others:  # no responders: each still answered, the connection is up
            with self.assertRaises(Exception) as cm:
                await other
            self.assertEqual(type(cm.exception).__name__, "NoRespondersError")
        self.assertTrue(nc.is_connected)

    async def test_relayed_on_unchanged(self) -> None:
        """A subscriber that publishes the message on (a forwarder) sends the block as
        it came: a second subscriber gets the same bytes."""
        assert self.server is not None
        nc = await self.client()
        got: Deferred[Msg] = Deferred()
        nc.subscribe("relay.in", lambda m: nc.publish("relay.out", m.data, headers=m.headers))
        nc.subscribe("relay.out", got.callback)
        await nc.flush(timeout=5)
        await send_raw(self.server.port, hpub(b"relay.in", b"NATS/1.0\r\nA b: c\r\n\r\n", b"p"))
        out = await bounded(got)
        self.assertEqual((out.data, raw_of(out)),
                         (b"p", b"NATS/1.0\r\nA b: c\r\n\r\n"))


class StoredHeaderTests(ServerPerClass, unittest.TestCase):
    """A stream stores a bad header block as it came; reading it back does not fail."""

    server_options = {"jetstream": True}

    async def test_get_msg_of_a_stored_bad_block(self) -> None:
        """js.get_msg() of a message stored with a header block that does not parse
        gives it with Headers.unparsed (it failed with JetStreamError, so that message
        could never be read back that way)."""
        assert self.server is not None
        nc = await connect(reactor, self.server.url)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        await js.add_stream(name="BADHDR", subjects=["badhdr.>"], allow_direct=True)
        block = b"NATS/1.0\r\nno colon\r\n\r\n"
        await send_raw(self.server.port, hpub(b"badhdr.x", block, b"stored"))
        msg = await js.get_msg("BADHDR", 1)
        raw = None if msg.headers is None else msg.headers.raw
        self.assertEqual((msg.data, raw), (b"stored", block))
        # Direct Get joins its own Nats-* lines to the stored block: read from it.
        direct = await js.get_msg("BADHDR", 1, direct=True)
        self.assertEqual((direct.data, direct.subject, direct.seq), (b"stored", "badhdr.x", 1))
        assert direct.headers is not None and direct.headers.raw is not None
        self.assertTrue(direct.headers.raw.startswith(b"NATS/1.0\r\nno colon\r\n"))
