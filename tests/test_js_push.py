"""Push consumers (``js.subscribe``): against a real ``nats-server -js`` for binding,
deliver groups, acks and iteration; on a fake server for flow control and the
heartbeat watch (time moved by ``MemoryReactorClock``)."""

from __future__ import annotations

from typing import Any, ClassVar

from twisted.internet.defer import Deferred, gatherResults
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from txnats.errors import (
    ConsumerNotFoundError,
    JetStreamError,
    NatsError,
    NoHeartbeatError,
    TimeoutError,
)
from txnats.jetstream import JetStreamContext, JsMsg
from txnats.jetstream.push import PushSubscription

from .support.jetstream import Frame, JsHarness, ack_subject, status_block
from .support.jsconsume import fill, restartable
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor, sleep
from .support.wire import hmsg_frame, msg_frame


class PushUnitTests(JsHarness, SynchronousTestCase):
    """The consumer is created over the fake wire; then the server side plays it."""

    def bind(self, handler: Any = None, **kw: Any) -> tuple[PushSubscription, str, int]:
        self.errors: list[NatsError] = []
        d = self.js.subscribe("orders.>", handler, stream="S", error_cb=self.errors.append, **kw)
        frames = self.written()
        [create] = [f for f in frames if f.op == "PUB" and ".CONSUMER.CREATE." in f.subject]
        cfg = create.json()["config"]
        inbox = cfg["deliver_subject"]
        [sub] = [f for f in frames if f.op == "SUB" and f.subject == inbox]
        self.answer(create, {"stream_name": "S", "name": "EPH", "config": cfg,
                             "created": "2024-01-01T00:00:00Z"})
        push = self.successResultOf(d)
        self.cfg = cfg
        return push, inbox, sub.sid

    def deliver(self, inbox: str, sid: int, *seqs: int) -> None:
        self.send(b"".join(
            msg_frame(inbox, sid, b"m%d" % s, reply=ack_subject("S", "EPH", s, s)) for s in seqs
        ))

    def test_config_and_auto_ack(self) -> None:
        """The consumer delivers to our inbox with flow control and heartbeats; a
        handler's message is acknowledged once the handler returned."""
        got: list[JsMsg] = []
        push, inbox, sid = self.bind(got.append, flow_control=True, idle_heartbeat=2)
        self.assertEqual(self.cfg["flow_control"], True)
        self.assertEqual(self.cfg["idle_heartbeat"], 2_000_000_000)
        self.assertEqual(self.cfg["filter_subject"], "orders.>")
        self.deliver(inbox, sid, 1, 2)
        self.assertEqual([m.data for m in got], [b"m1", b"m2"])
        acks = [f for f in self.written() if f.op == "PUB" and f.subject.startswith("$JS.ACK.")]
        self.assertEqual([a.data for a in acks], [b"+ACK", b"+ACK"])
        self.assertEqual(push.delivered, 2)

    def test_manual_ack(self) -> None:
        got: list[JsMsg] = []
        _, inbox, sid = self.bind(got.append, manual_ack=True)
        self.deliver(inbox, sid, 1)
        self.assertEqual([f for f in self.written() if f.subject.startswith("$JS.ACK.")], [])

    def test_flow_control_answered_after_handler(self) -> None:
        """A flow control request waits for the handler working on the message before
        it (its Deferred), then is answered; a stall notice is answered at once."""
        gate: Deferred[None] = Deferred()
        push, inbox, sid = self.bind(lambda m: gate, flow_control=True, idle_heartbeat=2)
        self.deliver(inbox, sid, 1)
        self.send(hmsg_frame(inbox, sid, status_block(100, "FlowControl Request"),
                             reply="$JS.FC.S.EPH.x"))
        self.assertEqual([f for f in self.written() if f.subject == "$JS.FC.S.EPH.x"], [])
        gate.callback(None)
        fc = [f for f in self.written() if f.subject == "$JS.FC.S.EPH.x"]
        self.assertEqual(len(fc), 1)
        self.assertEqual(push.flow_control_answered, 1)
        self.send(hmsg_frame(inbox, sid, status_block(
            100, "Idle Heartbeat", Nats_Consumer_Stalled="$JS.FC.S.EPH.y")))
        self.assertEqual(len([f for f in self.written() if f.subject == "$JS.FC.S.EPH.y"]), 1)

    def test_flow_control_waits_for_reader(self) -> None:
        """Without a handler, a flow control request behind unread messages is answered
        once the reader has taken them."""
        push, inbox, sid = self.bind(None, flow_control=True, idle_heartbeat=2)
        self.deliver(inbox, sid, 1, 2)
        self.send(hmsg_frame(inbox, sid, status_block(100, "FlowControl Request"),
                             reply="$JS.FC.S.EPH.x"))
        self.assertEqual(push.flow_control_answered, 0)
        self.assertEqual(self.successResultOf(push.next_msg()).data, b"m1")
        self.assertEqual(push.flow_control_answered, 0)
        self.assertEqual(self.successResultOf(push.next_msg()).data, b"m2")
        self.assertEqual(push.flow_control_answered, 1)
        d = push.next_msg(timeout=1.0)
        self.clock.advance(1.0)
        self.failureResultOf(d, TimeoutError)

    def test_missed_heartbeats_reported(self) -> None:
        """Silence for twice idle_heartbeat: a NoHeartbeatError warning, again each time;
        heartbeats keep it quiet; a disconnect pauses the watch."""
        push, inbox, sid = self.bind(lambda m: None, idle_heartbeat=1)
        for _ in range(4):
            self.clock.advance(1.5)
            self.send(hmsg_frame(inbox, sid, status_block(100, "Idle Heartbeat")))
        self.assertEqual(self.errors, [])
        self.clock.advance(2.1)
        self.written()
        self.assertEqual([type(e) for e in self.errors], [NoHeartbeatError])
        self.server.lose()
        self.clock.advance(0)
        self.clock.advance(1.5)
        self.written()
        self.assertEqual(len(self.errors), 1)
        self.assertEqual(push.heartbeat_alarms, 1)

    def test_missed_heartbeats_ask_whether_the_consumer_exists(self) -> None:
        """A heartbeat alarm asks for the consumer's info: while it exists the watch
        goes on; once it is gone the subscription ends with ConsumerNotFoundError
        (error_cb told, a waiting reader fails with it)."""
        push, _, sid = self.bind(None, idle_heartbeat=1)
        self.clock.advance(2.1)
        [info] = [f for f in self.written() if ".CONSUMER.INFO." in f.subject]
        self.assertEqual(info.subject, "$JS.API.CONSUMER.INFO.S.EPH")
        self.answer(info, {"stream_name": "S", "name": "EPH", "config": self.cfg})
        self.assertTrue(push.is_active)
        waiting = push.next_msg()
        self.clock.advance(2.1)
        [info] = [f for f in self.written() if ".CONSUMER.INFO." in f.subject]
        self.answer(info, {"error": {"code": 404, "err_code": 10014,
                                     "description": "consumer not found"}})
        self.assertFalse(push.is_active)
        e = self.failureResultOf(waiting, ConsumerNotFoundError).value
        self.assertIn("the consumer no longer exists", str(e))
        self.failureResultOf(push.next_msg(), ConsumerNotFoundError)  # and later reads
        self.clock.advance(0)
        self.assertEqual([type(x) for x in self.errors],
                         [NoHeartbeatError, NoHeartbeatError, ConsumerNotFoundError])
        self.assertIn(Frame("UNSUB", sid=sid), self.written())

    def test_reconnect_resumes_watch_and_delivery(self) -> None:
        """After a reconnection the inbox is subscribed again, deliveries go on to the
        handler, and the heartbeat watch runs again."""
        got: list[JsMsg] = []
        push, inbox, _ = self.bind(got.append, idle_heartbeat=1)
        self.server.lose()
        self.clock.advance(0)
        self.clock.advance(self.client.options.reconnect_wait + 5)
        self.server = self.accept(reset=False)
        frames = self.written()
        [sub] = [f for f in frames if f.op == "SUB" and f.subject == inbox]
        self.deliver(inbox, sub.sid, 7)
        self.assertEqual([m.data for m in got], [b"m7"])
        self.assertEqual(self.errors, [])
        self.clock.advance(2.1)
        self.written()
        self.assertEqual([type(e) for e in self.errors], [NoHeartbeatError])
        self.assertTrue(push.is_active)

    def test_drain_waits_for_the_reader(self) -> None:
        """drain() without a handler fires once the reader took what had come."""
        push, inbox, sid = self.bind(None)
        self.deliver(inbox, sid, 1, 2)
        d = push.drain()
        self.written()
        self.send(b"PONG\r\n")
        self.clock.advance(1)
        self.assertNoResult(d)
        self.successResultOf(push.next_msg())
        self.assertNoResult(d)
        self.successResultOf(push.next_msg())
        self.successResultOf(d)

    def test_client_close_ends_iteration(self) -> None:
        """A reader waiting in async for ends when the client closes."""
        push, _, _ = self.bind(None)

        async def read() -> int:
            n = 0
            async for _ in push:
                n += 1
            return n

        from twisted.internet.defer import ensureDeferred

        d = ensureDeferred(read())
        self.assertNoResult(d)
        self.client.close()
        self.clock.advance(5)
        self.assertEqual(self.successResultOf(d), 0)

    def test_ephemeral_deleted_on_unsubscribe(self) -> None:
        push, _inbox, _sid = self.bind(lambda m: None)
        push.unsubscribe()
        frames = self.written()
        self.assertIn("$JS.API.CONSUMER.DELETE.S.EPH", [f.subject for f in frames])


class PushIntegrationTests(ServerPerClass, TestCase):
    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 30

    async def setup_stream(
        self, n: int, size: int = 0
    ) -> tuple[txnats.Client, JetStreamContext, str]:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        s = "".join(c for c in self._testMethodName.title() if c.isalnum())
        await bounded(js.add_stream(name=s, subjects=[f"{s}.>"], storage="memory"))
        self.addCleanup(lambda: bounded(js.delete_stream(s)))
        await fill(js, f"{s}.x", n, size=size)
        return nc, js, s

    async def test_ephemeral_handler_flow_control(self) -> None:
        """5,000 messages of 2 KiB through an ephemeral push consumer with flow control
        (the server asks for it along the way), in order, each acknowledged; the
        stream is found from the subject."""
        _, js, s = await self.setup_stream(5000, 2048)
        got: list[int] = []
        done: Deferred[None] = Deferred()

        def handler(m: JsMsg) -> None:
            got.append(int(m.data))
            if len(got) == 5000:
                done.callback(None)

        push = await bounded(js.subscribe(f"{s}.>", handler, flow_control=True,
                                          idle_heartbeat=1))
        await bounded(done, 15)
        self.assertEqual(got, list(range(5000)))
        self.assertGreater(push.flow_control_answered, 0)
        self.assertTrue(push.consumer)

        async def all_acked() -> bool:
            info = await bounded(push.consumer_info())
            return bool(info.num_ack_pending == 0)

        # The server counts acks in its own time: poll, with a pause, for up to 10 s.
        for _ in range(200):
            if await all_acked():
                break
            await sleep(0.05)
        else:
            self.fail("acknowledgements did not all reach the server")
        await bounded(push.drain())

    async def test_iterate_and_durable_rebind(self) -> None:
        """Without a handler: async for, acks by hand; a second subscribe binds to the
        same durable and gets what the first left unacknowledged (redelivered after the
        ack wait)."""
        _, js, s = await self.setup_stream(10)
        push = await bounded(js.subscribe(f"{s}.x", durable="D", ack_wait=1.0))
        got = []
        async for m in push:
            got.append(int(m.data))
            await bounded(m.ack_sync())
            if len(got) == 5:
                break
        push.unsubscribe()
        self.assertEqual(got, [0, 1, 2, 3, 4])
        again = await bounded(js.subscribe(f"{s}.x", durable="D"))
        self.assertEqual(again.consumer, "D")
        rest = [int((await bounded(again.next_msg(5))).data) for _ in range(5)]
        self.assertEqual(rest, [5, 6, 7, 8, 9])

    async def test_queue_group_shares(self) -> None:
        """Two members of a deliver group share one durable: each message once."""
        _, js, s = await self.setup_stream(0)
        got: list[tuple[int, int]] = []
        done: Deferred[None] = Deferred()

        def member(i: int) -> Any:
            def handler(m: JsMsg) -> None:
                got.append((i, int(m.data)))
                if len(got) == 200:
                    done.callback(None)
            return handler

        a = await bounded(js.subscribe(f"{s}.x", member(0), queue="workers"))
        b = await bounded(js.subscribe(f"{s}.x", member(1), queue="workers"))
        self.assertEqual((a.consumer, b.consumer), ("workers", "workers"))
        await bounded(gatherResults([js.publish(f"{s}.x", b"%d" % i) for i in range(200)]))
        await bounded(done, 10)
        self.assertEqual(sorted(n for _, n in got), list(range(200)))
        self.assertEqual({i for i, _ in got}, {0, 1})

    async def test_no_stream_for_subject(self) -> None:
        _, js, _ = await self.setup_stream(0)
        await self.assertFailure(bounded(js.subscribe("nothing.here")), JetStreamError)


class LostPushConsumerTests(TestCase):
    async def test_ephemeral_lost_in_a_restart_ends_the_subscription(self) -> None:
        """An ephemeral push consumer on a memory stream: the server restarts and has
        lost both; the heartbeat alarm asks, and the subscription ends with
        ConsumerNotFoundError (it used to warn of missed heartbeats for ever)."""
        server, js = await restartable(self)
        await bounded(js.add_stream(name="LOST", subjects=["lost.>"], storage="memory"))
        errors: list[NatsError] = []
        push = await bounded(js.subscribe("lost.>", idle_heartbeat=0.5, error_cb=errors.append))
        assert isinstance(push, PushSubscription)
        await bounded(js.publish("lost.x", b"before"))
        self.assertEqual((await bounded(push.next_msg(timeout=5))).data, b"before")
        server.stop()
        server.start()
        with self.assertRaises(ConsumerNotFoundError) as caught:
            await bounded(push.next_msg(timeout=None), 20, "the subscription ending")
        self.assertIn("the stream no longer exists", str(caught.exception))
        self.assertFalse(push.is_active)

