"""Issue 15, figure 5: JetStream interoperability with nats-py (the official asyncio
client), through one real ``nats-server -js``.

- A stream and a durable pull consumer made by nats-py (durations given to nats-py in
  seconds) read back in txnats as the same seconds, and consumed by txnats.
- A stream and a consumer made by txnats (seconds) read back in nats-py as the same
  seconds, and consumed by nats-py.
- The same ack script in both directions (ack, nak, term, in-progress then ack; then the
  nak'ed message again, delivered twice; the termed one never again) sees the same
  deliveries and leaves the consumer in the same state, as read by either client.

nats-py runs in a subprocess (``tests/js_interop_peer.py``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

import txnats
from txnats.jetstream import AckPolicy, ConsumerInfo, JetStreamContext

from .support.figures import figure
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor, sleep

ROOT = Path(__file__).resolve().parent.parent
PEER = Path(__file__).resolve().parent / "js_interop_peer.py"
SCRIPT = ("ack", "nak", "term", "in_progress+ack")
#: Four messages: after the first fetch only the nak'ed one can come (with more, the
#: server may hand out a new one before it has taken the nak: a race, not a rule).
COUNT = 4
#: The deliveries the script sees, whichever client runs it.
EXPECTED_EVENTS = [
    {"got": "m0", "delivered": 1, "action": "ack"},
    {"got": "m1", "delivered": 1, "action": "nak"},
    {"got": "m2", "delivered": 1, "action": "term"},
    {"got": "m3", "delivered": 1, "action": "in_progress+ack"},
    {"got": "m1", "delivered": 2, "action": "ack"},
    {"after": []},
]


def state(ci: ConsumerInfo) -> dict[str, int]:
    """The consumer state fields compared across clients (as the peer prints them)."""
    return {
        "delivered_stream_seq": ci.delivered.stream_seq,
        "ack_floor_stream_seq": ci.ack_floor.stream_seq,
        "num_ack_pending": ci.num_ack_pending,
        "num_redelivered": ci.num_redelivered,
        "num_pending": ci.num_pending,
    }


class Figure5JsInteropTests(ServerPerClass, TestCase):
    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 60

    async def peer(self, mode: str, stream: str, consumer: str, *rest: str) -> list[Any]:
        assert self.server is not None
        d = getProcessOutputAndValue(
            sys.executable, [str(PEER), mode, self.server.url, stream, consumer, *rest],
            env=dict(os.environ), path=str(ROOT), reactor=reactor,
        )
        out, err, code = await bounded(d, 30.0)
        self.assertEqual(code, 0, f"peer {mode} failed: {err.decode(errors='replace')}")
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    async def js(self) -> JetStreamContext:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc.jetstream()

    async def run_script(self, js: JetStreamContext, stream: str, consumer: str) -> list[Any]:
        """The peer's ack script, done by txnats; returns the same events it prints."""
        pc = js.pull_consumer(stream, consumer)
        events: list[Any] = []
        msgs = await bounded(pc.fetch(4, expires=5))
        for msg, action in zip(msgs, SCRIPT, strict=True):
            events.append({"got": msg.data.decode(), "delivered": msg.metadata.num_delivered,
                           "action": action})
            if action == "ack":
                msg.ack()
            elif action == "nak":
                msg.nak()
            elif action == "term":
                msg.term()
            else:
                msg.in_progress()
                msg.ack()
        [again] = await bounded(pc.fetch(1, expires=5))
        events.append({"got": again.data.decode(), "delivered": again.metadata.num_delivered,
                       "action": "ack"})
        await bounded(again.ack_sync())
        extra = await bounded(pc.fetch(1, expires=1.5))
        events.append({"after": [m.data.decode() for m in extra]})
        await bounded(js.client.flush())
        return events

    async def test_natspy_made_txnats_consumes(self) -> None:
        """nats-py's stream and consumer, read and consumed by txnats."""
        await self.peer("make", "PYS", "PYC", str(COUNT))
        self.addCleanup(lambda: self.js_cleanup("PYS"))
        js = await self.js()
        si = await bounded(js.stream_info("PYS"))
        ci = await bounded(js.consumer_info("PYS", "PYC"))
        self.assertEqual((si.config.max_age, si.config.duplicate_window), (3600.0, 30.0))
        self.assertEqual((ci.config.ack_wait, ci.config.max_deliver), (2.0, 5))
        self.assertIs(ci.config.ack_policy, AckPolicy.EXPLICIT)
        events = await self.run_script(js, "PYS", "PYC")
        self.assertEqual(events, EXPECTED_EVENTS)
        ours = await self.settled(js, "PYS", "PYC")
        [theirs] = await self.peer("info", "PYS", "PYC")
        figure(5, direction="natspy->txnats", events=len(events), state=ours)
        self.assertEqual(theirs["state"], ours)
        self.assertEqual(ours, self.expected_state())

    async def test_txnats_made_natspy_consumes(self) -> None:
        """txnats's stream and consumer, read and consumed by nats-py."""
        js = await self.js()
        await bounded(js.add_stream(name="TXS", subjects=["TXS.>"], max_age=3600,
                                    duplicate_window=30, storage="memory"))
        self.addCleanup(lambda: self.js_cleanup("TXS"))
        await bounded(js.create_consumer("TXS", durable_name="TXC", ack_policy="explicit",
                                         ack_wait=2, max_deliver=5))
        for i in range(COUNT):
            await bounded(js.publish("TXS.x", b"m%d" % i))
        [before] = await self.peer("info", "TXS", "TXC")
        self.assertEqual((before["max_age"], before["duplicate_window"]), (3600.0, 30.0))
        self.assertEqual((before["ack_wait"], before["max_deliver"]), (2.0, 5))
        self.assertEqual(before["ack_policy"], "explicit")
        events = await self.peer("consume", "TXS", "TXC")
        self.assertEqual(events, EXPECTED_EVENTS)
        ours = await self.settled(js, "TXS", "TXC")
        [theirs] = await self.peer("info", "TXS", "TXC")
        figure(5, direction="txnats->natspy", events=len(events), state=ours)
        self.assertEqual(theirs["state"], ours)
        self.assertEqual(ours, self.expected_state())

    async def settled(self, js: JetStreamContext, stream: str, consumer: str) -> dict[str, int]:
        """The consumer's state once the server has taken every ack (it takes acks on
        its own queue: a plain ack is not yet counted when the client's flush returns)."""
        deadline = reactor.seconds() + 20  # a loaded server may take its time
        while True:
            got = state(await bounded(js.consumer_info(stream, consumer)))
            if got == self.expected_state() or reactor.seconds() > deadline:
                return got
            await sleep(0.05)

    def expected_state(self) -> dict[str, int]:
        """After the script: all 4 delivered, acked or termed, nothing pending."""
        return {"delivered_stream_seq": 4, "ack_floor_stream_seq": 4, "num_ack_pending": 0,
                "num_redelivered": 0, "num_pending": COUNT - 4}

    async def js_cleanup(self, stream: str) -> None:
        js = await self.js()
        await bounded(js.delete_stream(stream))
