"""Issue 15, figure 4: ``publish_async`` through the failover of an R3 stream's leader.

A 3-node JetStream cluster (``txnats.testing.NatsCluster``) holds a stream with three
replicas. A client sends a burst of 20,000 ``publish_async`` (waiting for room in the
window as it fills); after 5,000 acknowledgements the node leading the stream is
killed (SIGKILL). Every publish is then accounted for: its Deferred either fired with a
PubAck or failed (timeout, no responders, connection lost), none is left hanging, and
after the failover every acknowledged message is in the stream at the sequence its ack
gave. Unacknowledged ones may or may not have been stored (their outcome is unknown to
the caller, who was told so); how many of them were is counted too.
"""

from __future__ import annotations

from collections import Counter

from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import NatsError
from txnats.jetstream import AckPolicy, JetStreamContext, PubAck
from txnats.testing import NatsCluster

from .support.figures import figure
from .support.waits import bounded, reactor, sleep

N = 20_000
KILL_AFTER = 5_000


class Figure4FailoverTests(TestCase):
    timeout = 90

    def setUp(self) -> None:
        self.cluster = NatsCluster(3, jetstream=True).start()
        self.addCleanup(self.cluster.stop)

    async def retrying(self, what: str, call: object) -> object:
        """``call()`` (a Deferred), tried again every 0.25 s for 20 s while it fails
        (no leader yet after the failover)."""
        deadline = reactor.seconds() + 20
        while True:
            try:
                return await call()  # type: ignore[operator]
            except NatsError:
                if reactor.seconds() > deadline:
                    raise
                await sleep(0.25)

    async def test_leader_killed_during_burst(self) -> None:
        """Every acknowledged publish is stored after the failover; every other one
        failed its Deferred: acked + failed = 20,000."""
        nc = await bounded(txnats.connect(
            reactor, self.cluster.urls, name="fig4", reconnect_wait=0.1,
            reconnect_jitter=0.0, max_reconnect_attempts=-1,
        ), 10)
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream(timeout=2.0)
        await self.retrying("create", lambda: js.add_stream(
            name="FIG4", subjects=["fig4.>"], num_replicas=3, storage="file",
        ))
        info = await bounded(js.stream_info("FIG4"))
        assert info.cluster is not None and info.cluster.leader
        leader = info.cluster.leader
        [victim] = [n for n in self.cluster.nodes if n.name == leader]

        acked: dict[int, PubAck] = {}
        failed: Counter[str] = Counter()
        failed_ids: set[int] = set()
        killed: Deferred[None] | None = None

        def ok(ack: PubAck, i: int) -> None:
            acked[i] = ack

        def bad(f: Failure, i: int) -> None:
            failed[type(f.value).__name__] += 1
            failed_ids.add(i)

        t0 = reactor.seconds()
        for i in range(N):
            if js.publish_async_pending >= js.publish_async_max_pending:
                await bounded(js.publish_async_room(), 20, "room in the window")
            d = js.publish_async(f"fig4.{i % 8}", b"%d" % i, msg_id=f"m{i}", stall_wait=5)
            d.addCallbacks(ok, bad, callbackArgs=(i,), errbackArgs=(i,))
            if killed is None and len(acked) >= KILL_AFTER:
                killed = threads.deferToThread(victim.kill)
        await bounded(js.publish_async_complete(), 30, "every publish_async ended")
        burst = reactor.seconds() - t0
        assert killed is not None
        await bounded(killed, 10)
        self.assertEqual(len(acked) + len(failed_ids), N)  # none left hanging, none twice
        self.assertEqual(js.publish_async_pending, 0)

        after = await self.retrying("info", lambda: js.stream_info("FIG4"))
        stored = await self.read_all(js)
        lost = [i for i, a in acked.items() if stored.get(a.seq) != i]
        failed_but_stored = len(failed_ids & set(stored.values()))
        new_leader = after.cluster.leader if after.cluster else ""  # type: ignore[attr-defined]
        figure(
            4, published=N, acked=len(acked), failed=len(failed_ids), errors=dict(failed),
            acked_missing=len(lost), failed_but_stored=failed_but_stored,
            stored=len(stored), killed=leader, new_leader=new_leader, burst_s=burst,
        )
        self.assertEqual(lost, [])
        self.assertGreaterEqual(len(acked), KILL_AFTER)
        self.assertNotEqual(new_leader, leader)
        # Nothing stored that was never published, nothing stored twice (msg_id).
        self.assertEqual(len(stored), len(set(stored.values())))
        self.assertTrue(set(stored.values()) <= set(range(N)))

    async def read_all(self, js: JetStreamContext) -> dict[int, int]:
        """Every stored message: stream sequence -> the publish index it carries."""
        await self.retrying("consumer", lambda: js.create_or_update_consumer(
            "FIG4", name="check", ack_policy=AckPolicy.NONE, num_replicas=1,
        ))
        pc = js.pull_consumer("FIG4", "check")
        info = await bounded(js.stream_info("FIG4"))
        total = info.state.messages
        out: dict[int, int] = {}
        deadline = reactor.seconds() + 30
        while len(out) < total and reactor.seconds() < deadline:
            batch = await self.retrying("fetch", lambda: pc.fetch(5000, expires=2.0))
            for m in batch:  # type: ignore[attr-defined]
                out[m.metadata.sequence.stream] = int(m.data)
        return out
