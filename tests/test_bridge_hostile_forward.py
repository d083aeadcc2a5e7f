"""Hostile input to forwarding: bytes the source server merely relays (other clients
chose them) must neither take the target connection down nor be lost quietly.

A real nats-server is both the source and the target system (the target subjects are
mapped under a long prefix, so nothing loops). A subject that fits the source's
control line but, mapped, not the target's is counted as dropped (core) or terminated
on the source and counted (JetStream), and the target connection never drops; odd
headers (names that are no HTTP token, values that are not UTF-8 or hold control
characters, a header block that does not parse) are forwarded exactly.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.support.bridge import BridgeTestCase
from tests.support.waits import WAIT, bounded, reactor, sleep, wait_until
from txnats.bridge.forward import Forwarder, parse_forward
from txnats.protocol.headers import Headers

#: Mapped under this prefix, a 1,100-byte source subject no longer fits a 4 KB line.
PREFIX = "T" * 3000
LONG = "x" * 1100
ODD = Headers([("a(b)", "1"), ("Bin", "caf\udcff"), ("Ctl", "a\x01b")])
#: A header block that does not parse (no colon): relayed as it came.
BAD_BLOCK = b"NATS/1.0\r\nno colon here\r\n\r\n"


class ForwardHostileTests(BridgeTestCase):
    def forwarder(self, source: Any, spec: str) -> Forwarder:
        fwd = Forwarder(reactor, parse_forward(spec), source,
                        target_options={"reconnect_wait": 0.2, "reconnect_jitter": 0.0})
        self.addCleanup(lambda: bounded(fwd.stop(), 20))
        return fwd

    async def test_core_subject_too_long_for_the_target_is_dropped_and_counted(self) -> None:
        """Core mode: good, too long once mapped, odd headers, good: the target gets
        the three it can take (headers exact), ``stats.dropped`` is 1 and the target
        connection never reconnected."""
        assert self.server is not None
        src = await self.connect()
        watcher = await self.connect()
        got = watcher.subscribe(f"{PREFIX}.>")
        await bounded(watcher.flush())
        fwd = self.forwarder(src, f"hfwd.>:{PREFIX}.>={self.server.url}")
        await bounded(fwd.start())
        await wait_until(lambda: fwd.target.is_connected, WAIT, "the target connected")
        src.publish("hfwd.a", b"1")
        src.publish(f"hfwd.{LONG}", b"too long there")
        src.publish("hfwd.odd", b"3", headers=ODD)
        src.publish("hfwd.unparsed", b"4", headers=Headers.unparsed(BAD_BLOCK))
        src.publish("hfwd.b", b"5")
        await bounded(src.flush())
        received = [await got.next_msg(timeout=WAIT) for _ in range(4)]
        self.assertEqual([m.subject for m in received],
                         [f"{PREFIX}.a", f"{PREFIX}.odd", f"{PREFIX}.unparsed", f"{PREFIX}.b"])
        self.assertEqual(received[1].headers, ODD)
        assert received[2].headers is not None
        self.assertEqual(received[2].headers.raw, BAD_BLOCK)
        await wait_until(lambda: fwd.stats.dropped == 1, WAIT, "the long one counted")
        self.assertEqual((fwd.stats.forwarded, fwd.target.stats.reconnects), (4, 0))
        self.assertTrue(fwd.target.is_connected)

    async def test_jetstream_subject_too_long_for_the_target_is_terminated(self) -> None:
        """JetStream mode: the message the target can never take is terminated on the
        source (not redelivered for ever) and counted in ``stats.dropped``; the others,
        odd headers kept, are stored on the target; its connection never dropped."""
        assert self.server is not None
        src = await self.connect()
        js = src.jetstream()
        await bounded(js.add_stream(name="HSRC", subjects=["hjs.>"], storage="memory"))
        await bounded(js.add_stream(name="HDST", subjects=[f"{PREFIX}.>"], storage="memory"))
        self.addCleanup(lambda: bounded(js.delete_stream("HSRC")))
        self.addCleanup(lambda: bounded(js.delete_stream("HDST")))
        for subject, headers in (("hjs.a", None), (f"hjs.{LONG}", None), ("hjs.odd", ODD),
                                 ("hjs.unparsed", Headers.unparsed(BAD_BLOCK)),
                                 ("hjs.b", None)):
            await bounded(js.publish(subject, b"m", headers=headers))
        fwd = self.forwarder(src, f"js:HSRC:hjs.>:{PREFIX}.>={self.server.url}?batch=10")
        await bounded(fwd.start())
        await wait_until(lambda: fwd.stats.forwarded == 4 and fwd.stats.dropped == 1, 20,
                         "four forwarded, one dropped")
        await sleep(1.5)  # a nak'd message would be back (and refused again) by now
        info = await bounded(js.api_request(f"CONSUMER.INFO.HSRC.{fwd.route.durable}"))
        self.assertEqual((info["num_pending"], info["num_ack_pending"],
                          info["num_redelivered"]), (0, 0, 0))
        self.assertEqual((fwd.stats.dropped, fwd.stats.retried), (1, 0))
        stored = await bounded(js.get_msg("HDST", 2))
        self.assertEqual(stored.subject, f"{PREFIX}.odd")
        assert stored.headers is not None
        self.assertEqual([(k, v) for k, v in stored.headers.multi_items()
                          if k != "Nats-Msg-Id"], ODD.multi_items())
        # (js.get_msg refuses a stored block that does not parse: ask the API itself.)
        raw = await bounded(js.api_request("STREAM.MSG.GET.HDST", {"seq": 3}))
        block = base64.b64decode(raw["message"]["hdrs"])
        self.assertEqual(block, BAD_BLOCK[:-2] + b"Nats-Msg-Id: HSRC:4\r\n\r\n")
        self.assertEqual(fwd.target.stats.reconnects, 0)
