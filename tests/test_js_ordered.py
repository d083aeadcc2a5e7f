"""The ordered consumer from the context (ADR-17): resets after a reconnection,
handlers returning Deferreds, ``async for`` pausing at its high water (on a fake
server); and figure 3 against a real server: 50,000 messages exactly once, in order,
through a consumer deleted under it and a server restart."""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from txnats.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    OrderedConsumerError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.jetstream import JsMsg, ordered
from txnats.jetstream.ordered import OrderedConsumer, OrderedMessages
from txnats.testing import NatsServer

from .support.figures import figure
from .support.files import temp_file
from .support.jetstream import Frame, JsHarness, ack_subject, status_block
from .support.jsconsume import fill
from .support.waits import bounded, reactor, wait_until
from .support.wire import hmsg_frame, msg_frame


class OrderedResetTests(JsHarness, SynchronousTestCase):
    """An ordered consumer on the fake server (the base behaviour is tested in
    tests/test_jetstream_unit.py; this is what the issue adds)."""

    HB = 1.0

    def setUp(self) -> None:
        super().setUp()
        self.got: list[JsMsg] = []
        self.errors: list[Exception] = []
        self.oc = OrderedConsumer(
            self.js, "S", self.got.append, heartbeat=self.HB, on_error=self.errors.append,
        )

    def create(self, answer: bool = True) -> tuple[str, int, str, dict[str, Any]]:
        """Expect a new SUB and CONSUMER.CREATE; answer it (unless told not to);
        return inbox, sid, name, config."""
        self.frames = frames = self.written()
        [req] = [f for f in frames if f.op == "PUB" and ".CONSUMER.CREATE." in f.subject]
        cfg = req.json()["config"]
        [sub] = [f for f in frames if f.op == "SUB" and f.subject == cfg["deliver_subject"]]
        if answer:
            self.answer(req, {"name": cfg["name"], "num_pending": 0})
        return sub.subject, sub.sid, cfg["name"], cfg

    def started(self) -> tuple[str, int, str, dict[str, Any]]:
        d = self.oc.start()
        created = self.create()
        self.successResultOf(d)
        return created

    def deliver(self, inbox: str, sid: int, name: str, *pairs: tuple[int, int]) -> None:
        self.send(b"".join(
            msg_frame(inbox, sid, b"s%d" % s, reply=ack_subject("S", name, s, c))
            for s, c in pairs
        ))

    def advance(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.25)):
            self.clock.advance(0.25)

    def test_reconnect_recreates_after_last_seq(self) -> None:
        """After a reconnection it deletes nothing it cannot reach, and makes a new
        consumer starting after the last stream sequence handed on."""
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (11, 2))
        self.server.lose()
        self.clock.advance(0)
        self.advance(5.0)  # heartbeats missed while away: no reset while disconnected
        self.server = self.accept(reset=False)
        self.clock.advance(0)
        _, _, new, cfg = self.create()
        self.assertNotEqual(new, name)
        self.assertEqual((cfg["deliver_policy"], cfg["opt_start_seq"]), ("by_start_sequence", 12))
        self.assertEqual(self.oc.resets, 1)
        self.assertEqual(self.errors, [])

    def test_messages_before_create_reply(self) -> None:
        """The server may deliver before it answers the creation: those messages reach
        the handler, in order, and start() still fires once the answer comes."""
        d = self.oc.start()
        frames = self.written()
        [req] = [f for f in frames if f.op == "PUB" and ".CONSUMER.CREATE." in f.subject]
        cfg = req.json()["config"]
        [sub] = [f for f in frames if f.op == "SUB" and f.subject == cfg["deliver_subject"]]
        self.deliver(sub.subject, sub.sid, cfg["name"], (1, 1), (2, 2))
        self.clock.advance(0)
        self.assertNoResult(d)
        self.assertEqual([m.data for m in self.got], [b"s1", b"s2"])
        self.answer(req, {"name": cfg["name"], "num_pending": 0})
        self.successResultOf(d)
        self.deliver(sub.subject, sub.sid, cfg["name"], (3, 3))
        self.clock.advance(0)
        self.assertEqual([m.data for m in self.got], [b"s1", b"s2", b"s3"])
        self.assertEqual((self.oc.resets, self.errors), (0, []))

    def next_create(self) -> Any:
        """The next CONSUMER.CREATE request, moving the clock on in 0.25 s steps."""
        for _ in range(int(ordered.MAX_RETRY_WAIT / 0.25) + 2):
            found = [f for f in self.written()
                     if f.op == "PUB" and ".CONSUMER.CREATE." in f.subject]
            if found:
                return found[0]
            self.clock.advance(0.25)
        raise AssertionError("no CONSUMER.CREATE request")

    def fail_creations(self, count: int) -> list[float]:
        """Answer the next ``count`` creations with 503 no responders (fewer if it gave
        up); return how long each came after the previous answer."""
        waits: list[float] = []
        for _ in range(count):
            start = self.clock.seconds()
            req = self.next_create()
            waits.append(round(self.clock.seconds() - start, 3))
            self.answer_status(req, 503)
            if self.errors:
                break
        return waits

    def test_recreation_retries_forever_backing_off(self) -> None:
        """Recreation failing while connected (no responders: another domain or a
        leader out of reach) is tried again without end, 0.5 s apart doubling to 5 s;
        nothing is reported as the end, and it resumes once the server answers."""
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (1, 1))
        self.advance(3 * self.HB)  # missed heartbeats: reset
        waits = self.fail_creations(25)
        self.assertEqual(waits[1:6], [0.5, 1.0, 2.0, 4.0, 5.0])
        self.assertEqual(set(waits[6:]), {5.0})
        self.assertEqual(self.errors, [])
        self.clock.advance(ordered.MAX_RETRY_WAIT)
        _, _, _, cfg = self.create()
        self.assertEqual((cfg["deliver_policy"], cfg["opt_start_seq"]), ("by_start_sequence", 2))
        self.assertEqual(self.errors, [])

    def test_max_resets_gives_up(self) -> None:
        """With max_resets=3, three failed attempts in a row end it with
        OrderedConsumerError to on_error, and no fourth is made."""
        self.oc = OrderedConsumer(self.js, "S", self.got.append, heartbeat=self.HB,
                                  on_error=self.errors.append, max_resets=3)
        self.started()
        self.advance(3 * self.HB)
        self.assertEqual(len(self.fail_creations(3)), 3)
        self.assertEqual(self.errors, [])
        self.clock.advance(ordered.MAX_RETRY_WAIT)
        self.assertRaises(AssertionError, self.next_create)
        [e] = self.errors
        self.assertIsInstance(e, OrderedConsumerError)
        self.assertIn("gave up after 3 resets in a row", str(e))

    def test_bad_max_resets(self) -> None:
        """max_resets below 1 or not an int is refused before any I/O."""
        for bad in (0, -1, 1.5, "3"):
            with self.assertRaises((InvalidArgumentError, InvalidArgumentTypeError)):
                OrderedConsumer(self.js, "S", self.got.append, max_resets=bad)  # type: ignore[arg-type]

    def test_stalled_heartbeat_held_with_flow_control(self) -> None:
        """A heartbeat carrying Nats-Consumer-Stalled is a missed flow control request:
        while flow control is held it is held too, and answered on release."""
        inbox, sid, _, _ = self.started()
        self.oc.hold_flow_control = True
        self.send(hmsg_frame(inbox, sid, status_block(
            100, "Idle Heartbeat", Nats_Consumer_Stalled="$JS.FC.stalled",
            Nats_Last_Consumer="0")))
        self.assertEqual([f for f in self.pubs() if f.subject == "$JS.FC.stalled"], [])
        self.oc.hold_flow_control = False
        self.oc.release_flow_control()
        self.assertEqual(len([f for f in self.pubs() if f.subject == "$JS.FC.stalled"]), 1)

    def test_deferred_handler_awaited(self) -> None:
        """A handler's Deferred is awaited before the next message is handed on."""
        gates: list[Deferred[None]] = []
        seen: list[bytes] = []

        def handler(m: JsMsg) -> Deferred[None]:
            seen.append(m.data)
            d: Deferred[None] = Deferred()
            gates.append(d)
            return d

        self.oc = OrderedConsumer(self.js, "S", handler, heartbeat=self.HB)
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (1, 1), (2, 2))
        self.assertEqual(seen, [b"s1"])
        gates[0].callback(None)
        self.clock.advance(0)
        self.assertEqual(seen, [b"s1", b"s2"])

    def test_messages_pause_at_high_water(self) -> None:
        """OrderedMessages holds at most high_water messages: once full its consumer is
        deleted and its inbox unsubscribed (what was on its way is dropped unread);
        once the reader took the buffer down to half a new consumer starts after the
        last message buffered, and every message comes once, in order."""
        it = OrderedMessages(self.js, "S", high_water=4, heartbeat=self.HB)
        self.oc = it.consumer
        d = it.start()
        inbox, sid, name, _ = self.create()
        self.assertIs(self.successResultOf(d), it)
        self.deliver(inbox, sid, name, *[(i, i) for i in range(1, 7)])  # 5, 6: too many
        self.assertEqual((it.buffered, self.oc.paused, self.oc.pauses), (4, True, 1))
        frames = self.written()
        self.assertIn(Frame("UNSUB", sid=sid), frames)
        self.assertIn(f"$JS.API.CONSUMER.DELETE.S.{name}", [f.subject for f in frames])
        self.assertEqual([self.successResultOf(it.next_msg()).data for _ in range(2)],
                         [b"s1", b"s2"])
        inbox2, sid2, name2, cfg = self.create()  # resumed at half
        self.assertEqual((cfg["deliver_policy"], cfg["opt_start_seq"]), ("by_start_sequence", 5))
        self.assertFalse(self.oc.paused)
        self.deliver(inbox2, sid2, name2, (5, 1), (6, 2))
        self.assertEqual([self.successResultOf(it.next_msg()).data for _ in range(4)],
                         [b"s3", b"s4", b"s5", b"s6"])
        self.assertEqual(self.oc.resets, 0)
        w = it.next_msg(timeout=1.0)
        self.clock.advance(1.0)
        self.failureResultOf(w, TimeoutError)
        it.stop()
        self.failureResultOf(it.next_msg(), SubscriptionClosedError)

    def test_pause_while_creating(self) -> None:
        """A buffer filled by deliveries that came before the consumer's creation was
        answered: the new consumer is deleted once made, and the next resumes."""
        it = OrderedMessages(self.js, "S", high_water=2, heartbeat=self.HB)
        self.oc = it.consumer
        d = it.start()
        inbox, sid, name, _ = self.create(answer=False)
        self.deliver(inbox, sid, name, (1, 1), (2, 2), (3, 3))
        self.assertTrue(self.oc.paused)
        [req] = [f for f in self.frames if ".CONSUMER.CREATE." in f.subject]
        self.answer(req, {"name": name, "num_pending": 1})
        self.successResultOf(d)
        self.assertIn(f"$JS.API.CONSUMER.DELETE.S.{name}", [f.subject for f in self.pubs()])
        self.assertEqual(self.successResultOf(it.next_msg()).data, b"s1")
        _, _, _, cfg = self.create()
        self.assertEqual(cfg["opt_start_seq"], 3)


#: Figure 3's stream: this many messages, a consumer deletion and a restart among them.
N = 50_000


class OrderedFigure(TestCase):
    timeout = 60

    async def test_figure3_exactly_once_in_order(self) -> None:
        """50,000 messages through js.ordered_consumer: its consumer deleted under it
        after 2,000, the server restarted 2,000 messages after the consumer was
        recreated; each message exactly once, in stream order, with no user code
        besides the handler."""
        store = temp_file(self, "store")
        os.makedirs(store)
        server = NatsServer(jetstream=True, store_dir=store).start()
        self.addCleanup(server.stop)
        nc = await bounded(txnats.connect(
            reactor, server.url, reconnect_wait=0.1, max_reconnect_attempts=-1,
        ))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        await bounded(js.add_stream(name="FIG3", subjects=["fig3.>"], storage="file"))
        # 512-byte payloads: the server's flow control keeps it a few MB ahead of the
        # handler, so the deletion and the restart land on a stream still being read.
        await fill(js, "fig3.x", N, window=2000, seconds=60, size=512)
        got: list[int] = []
        events: dict[str, Any] = {}
        holder: list[OrderedConsumer] = []

        def restart() -> None:
            server.stop()  # blocks the reactor; what was in flight is lost
            server.start()
            events["restarted"] = len(got)

        def handler(m: JsMsg) -> Deferred[Any] | None:
            got.append(m.metadata.sequence.stream)
            if int(m.data) != got[-1] - 1:
                events["bad_payload"] = got[-1]
            if not holder:
                # The server may deliver the first messages before its answer to
                # the consumer's creation, so before ordered_consumer() fired.
                events["before_start"] = events.get("before_start", 0) + 1
                return None
            oc = holder[0]
            if len(got) == 2_000:
                events["deleted"] = len(got)
                # Deleted under it; the next message waits for the server's answer.
                return js.delete_consumer("FIG3", oc.name)
            if oc.resets and "reset_at" not in events:
                events["reset_at"] = len(got)
            if "reset_at" in events and len(got) == events["reset_at"] + 2_000:
                reactor.callLater(0, restart)
            return None

        oc = await bounded(js.ordered_consumer("FIG3", handler, heartbeat=0.5))
        assert isinstance(oc, OrderedConsumer)
        holder.append(oc)
        await wait_until(lambda: len(got) >= N, 45, "50,000 ordered deliveries", 0.05)
        figure(3, messages=N, delivered=len(got), distinct=len(set(got)),
               in_order=got == sorted(got), resets=oc.resets,
               deleted_at=events.get("deleted"), first_reset_seen_at=events.get("reset_at"),
               restarted_at=events.get("restarted"),
               before_start=events.get("before_start", 0))
        self.assertEqual(got, list(range(1, N + 1)))
        self.assertNotIn("bad_payload", events)
        self.assertEqual(events.get("deleted"), 2_000)
        self.assertLess(events.get("restarted", N), N)
        self.assertGreaterEqual(oc.resets, 2)
        oc.stop()

    async def test_async_for_from_context(self) -> None:
        """js.ordered_consumer without a handler: async for over what the stream holds."""
        server = NatsServer(jetstream=True).start()
        self.addCleanup(server.stop)
        nc = await bounded(txnats.connect(reactor, server.url))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        await bounded(js.add_stream(name="ORD", subjects=["ord.>"], storage="memory"))
        await fill(js, "ord.x", 500)
        it = await bounded(js.ordered_consumer("ORD", filter_subjects=["ord.x"], high_water=64))
        assert isinstance(it, OrderedMessages)

        async def read() -> list[int]:
            out = []
            async for m in it:
                out.append(int(m.data))
                if len(out) == 500:
                    it.stop()
            return out

        self.assertEqual(await bounded(ensureDeferred(read()), 20), list(range(500)))
