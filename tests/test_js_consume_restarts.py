"""Figure 2: consumption that survives two server restarts without user code.

A real ``nats-server -js`` with a store directory of the test's own is stopped and
started again on the same port, twice, while ``consume()``, ``messages()`` and a push
consumer with flow control work through a file stream. Every handler acknowledges
with ``ack_sync`` (the server confirms the ack): every message must be handled at
least once, and none handled again once its ack was confirmed. Redeliveries of
unconfirmed ones are expected and counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import NatsError
from txnats.jetstream import JetStreamContext, JsMsg
from txnats.testing import NatsServer

from .support.figures import figure
from .support.files import temp_file
from .support.jsconsume import fill
from .support.waits import bounded, reactor, wait_until

#: Messages per run: enough that both restarts land mid-way on a loaded machine.
N = 1500
#: The consumers' ack wait: what the server delivered and nobody received (in flight
#: when it stopped) comes again after it. Long enough that a message held across a
#: restart is acknowledged (the handler retries) before the server sends it again;
#: then a second handling of a confirmed message would be the server's fault.
ACK_WAIT = 6.0


class Ledger:
    """What the handlers saw: handled counts per stream sequence, confirmed acks, and
    the handlings that came after a confirmation (must stay empty)."""

    def __init__(self) -> None:
        self.handled: dict[int, int] = {}
        self.confirmed: set[int] = set()
        self.after_confirm: list[int] = []
        self.unconfirmed = 0

    async def handle(self, m: JsMsg) -> None:
        seq = m.metadata.sequence.stream
        if seq in self.confirmed:
            self.after_confirm.append(seq)
        self.handled[seq] = self.handled.get(seq, 0) + 1
        for _ in range(30):
            try:
                await m.ack_sync(timeout=1.0)
            except NatsError:
                # Not confirmed (the server was away): acknowledge again, before the
                # ack wait runs out and the server sends it again.
                self.unconfirmed += 1
                continue
            self.confirmed.add(seq)
            return

    @property
    def redelivered(self) -> int:
        return sum(self.handled.values()) - len(self.handled)


class RestartFigure(TestCase):
    timeout = 60

    def setUp(self) -> None:
        store = temp_file(self, "store")
        os.makedirs(store)
        self.server = NatsServer(jetstream=True, store_dir=store).start()
        self.addCleanup(self.server.stop)
        self.restarts = 0

    def restart(self) -> None:
        """Stop the server (SIGTERM: it writes its consumers' state; a SIGKILL may lose
        the latest acks, confirmed or not) and start it again on the same port with the
        same store. Blocks the reactor meanwhile."""
        self.server.stop()
        self.server.start()
        self.restarts += 1

    async def prepare(self, **consumer: Any) -> tuple[txnats.Client, JetStreamContext, str]:
        nc = await bounded(txnats.connect(
            reactor, self.server.url, name=self._testMethodName, reconnect_wait=0.1,
            max_reconnect_attempts=-1,
        ))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        await bounded(js.add_stream(name="FIG2", subjects=["fig2.>"], storage="file"))
        consumer.setdefault("ack_policy", "explicit")
        consumer.setdefault("ack_wait", ACK_WAIT)
        await bounded(js.add_consumer("FIG2", durable_name="C", **consumer))
        await fill(js, "fig2.x", N)
        return nc, js, "FIG2"

    async def run_through_restarts(self, ledger: Ledger) -> None:
        """Restart twice while the handlers work; wait until every ack is confirmed."""
        await wait_until(lambda: len(ledger.confirmed) >= N // 4, 20, "a quarter confirmed")
        self.restart()
        await wait_until(lambda: len(ledger.confirmed) >= N // 2, 20, "half confirmed")
        self.restart()
        await wait_until(lambda: len(ledger.confirmed) == N, 30, "every ack confirmed")

    def check(self, mode: str, ledger: Ledger, **extra: Any) -> None:
        figure(
            2, mode=mode, messages=N, restarts=self.restarts, handled=len(ledger.handled),
            confirmed=len(ledger.confirmed), redelivered=ledger.redelivered,
            unconfirmed_acks=ledger.unconfirmed, after_confirm=len(ledger.after_confirm),
            **extra,
        )
        self.assertEqual(self.restarts, 2)
        self.assertEqual(set(ledger.handled), set(range(1, N + 1)))
        self.assertEqual(ledger.after_confirm, [])

    async def test_consume(self) -> None:
        """consume() through two restarts: everything handled, nothing after its
        confirmed ack, and it pulls again by itself after each reconnection."""
        _, js, s = await self.prepare()
        ledger = Ledger()
        errors: list[NatsError] = []
        ctx = js.pull_consumer(s, "C").consume(
            ledger.handle, max_messages=100, expires=2, idle_heartbeat=0.5,
            error_cb=errors.append,
        )
        await self.run_through_restarts(ledger)
        self.assertTrue(ctx.is_active)
        self.check("consume", ledger, pulls=ctx.pulls, alarms=ctx.heartbeat_alarms,
                   warnings=len(errors))
        await bounded(ctx.drain(), 10)

    async def test_messages(self) -> None:
        """The same for ``async for msg in consumer.messages()``."""
        _, js, s = await self.prepare()
        ledger = Ledger()
        it = js.pull_consumer(s, "C").messages(
            max_messages=100, expires=2, idle_heartbeat=0.5, error_cb=lambda e: None
        )

        async def loop() -> None:
            async for m in it:
                await ledger.handle(m)

        looping = Deferred.fromCoroutine(loop())
        await self.run_through_restarts(ledger)
        self.assertTrue(it.is_active)
        self.check("messages", ledger, pulls=it.pulls, alarms=it.heartbeat_alarms)
        it.stop()
        await bounded(looping, 10)

    async def test_push_flow_control(self) -> None:
        """The same for a durable push consumer with flow control and heartbeats."""
        nc = await bounded(txnats.connect(
            reactor, self.server.url, name=self._testMethodName, reconnect_wait=0.1,
            max_reconnect_attempts=-1,
        ))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        await bounded(js.add_stream(name="FIG2", subjects=["fig2.>"], storage="file"))
        await fill(js, "fig2.x", N, size=4096)
        ledger = Ledger()
        handle: Callable[[JsMsg], Any] = ledger.handle
        # max_ack_pending bounds what waits in the client's queue: every waiting message
        # must be handled (one ack_sync round trip each) within ACK_WAIT of its
        # delivery, or the server sends it again behind the first copy, which is then
        # confirmed before the second is handled. 300 x 4 KiB still brings the server's
        # flow-control requests; 1,000 left a loaded, slower machine ~6 ms a message.
        push = await bounded(js.subscribe(
            "fig2.x", handle, durable="PUSH", flow_control=True, idle_heartbeat=0.5,
            manual_ack=True, ack_wait=ACK_WAIT, max_ack_pending=300, error_cb=lambda e: None,
        ))
        await self.run_through_restarts(ledger)
        self.check("push", ledger, flow_control_answered=push.flow_control_answered)
        self.assertGreater(push.flow_control_answered, 0)  # 6 MB: the server asked
        await bounded(push.drain(), 10)
