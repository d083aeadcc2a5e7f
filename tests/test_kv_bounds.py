"""Bounds that hold: a reader's ``max_pending`` / ``high_water`` is the most it holds.

A key watcher with ``max_pending=50`` used to hold 19,830 of 20,000 unread entries
(and a push subscription without a handler, acking nothing, all 20,000 whatever the
client's pending limits):
holding the server's flow control only stops it at its next flow-control request. Now a
full queue pauses the ordered consumer underneath (it is deleted, what was on its way
is dropped) and a new one starts after the last queued item once the reader has taken
half. Each test fills a stream past the bound while nothing reads, samples what the
reader holds (every 2 ms, and once the server has nothing more to send), then reads
everything: each item exactly once and in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from twisted.internet.task import LoopingCall
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import NatsError, SlowConsumerError
from txnats.jetstream import JetStreamContext

from .support.servers import ServerPerClass
from .support.waits import bounded, reactor, sleep

BOUND = 50
N = 20_000


class Sampler:
    """The largest value ``read()`` returned, sampled every 2 ms while it runs."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read = read
        self.max = 0
        self.loop = LoopingCall(self.sample)
        self.loop.clock = reactor
        self.loop.start(0.002)

    def sample(self) -> None:
        self.max = max(self.max, self.read())

    def stop(self) -> int:
        self.sample()
        if self.loop.running:
            self.loop.stop()
        return self.max


class BoundsTests(ServerPerClass, TestCase):
    """Readers over ``nats-server -js`` filled far past their bound."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 120

    async def connect(self) -> JetStreamContext:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc.jetstream()

    async def fill(self, js: JetStreamContext, subject: Callable[[int], str], n: int) -> None:
        for lo in range(0, n, 1000):
            for i in range(lo, min(n, lo + 1000)):
                js.publish_async(subject(i), b"v%d" % i)
            await bounded(js.publish_async_complete(), 30)

    async def settled(self, sampler: Sampler) -> None:
        """Wait until the server has had time to send all it would (0.5 s quiet)."""
        await sleep(0.5)
        sampler.sample()

    async def test_key_watcher_updates(self) -> None:
        """A watcher of updates with max_pending=50, 20,000 puts unread: it holds at
        most 50 (it held 19,830), and then gives all 20,000 in order, each once."""
        js = await self.connect()
        kv = await bounded(js.create_key_value("BOUNDS_U", storage="memory", history=1))
        w = await bounded(kv.watch(">", updates_only=True, max_pending=BOUND))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update(timeout=5)))
        sampler = Sampler(lambda: w.pending)
        await self.fill(js, lambda i: f"$KV.BOUNDS_U.k{i}", N)
        await self.settled(sampler)
        held = sampler.stop()
        self.assertLessEqual(held, BOUND, f"held {held} entries, bound {BOUND}")
        self.assertEqual(w.pending, BOUND)  # full, and paused
        revisions = []
        reading = Sampler(lambda: w.pending)
        for _ in range(N):
            e = await bounded(w.next_update(timeout=10))
            assert e is not None
            revisions.append(e.revision)
        self.assertLessEqual(reading.stop(), BOUND)
        self.assertEqual(revisions, sorted(set(revisions)))
        self.assertEqual(len(revisions), N)
        self.assertEqual(w.pending, 0)

    async def test_key_watcher_initial_values(self) -> None:
        """A watch of 5,000 keys' latest values (each put twice) with max_pending=50:
        it holds at most 50; every key is given, in increasing revisions, its last
        entry its latest value, then None once."""
        js = await self.connect()
        kv = await bounded(js.create_key_value("BOUNDS_I", storage="memory"))
        n = 5000
        await self.fill(js, lambda i: f"$KV.BOUNDS_I.k{i % n}", 2 * n)
        w = await bounded(kv.watch(">", max_pending=BOUND))
        self.addCleanup(w.stop)
        sampler = Sampler(lambda: w.pending)
        await self.settled(sampler)
        latest: dict[str, bytes] = {}
        last = 0
        while True:
            e = await bounded(w.next_update(timeout=10))
            if e is None:
                break
            self.assertGreater(e.revision, last)
            last = e.revision
            latest[e.key] = e.value
        self.assertLessEqual(sampler.stop(), BOUND)
        self.assertEqual(len(latest), n)
        self.assertEqual(latest, {f"k{i}": b"v%d" % (i + n) for i in range(n)})

    async def test_ordered_messages_high_water(self) -> None:
        """js.ordered_consumer(stream) read with next_msg(), high_water=50, 20,000
        messages unread: at most 50 buffered (it held 20,000), then all in order."""
        js = await self.connect()
        await bounded(js.add_stream(name="BOUNDS_S", subjects=["bounds.>"], storage="memory"))
        it = await bounded(js.ordered_consumer("BOUNDS_S", high_water=BOUND))
        self.addCleanup(it.stop)
        sampler = Sampler(lambda: it.buffered)
        await self.fill(js, lambda i: f"bounds.{i}", N)
        await self.settled(sampler)
        self.assertLessEqual(sampler.stop(), BOUND)
        reading = Sampler(lambda: it.buffered)
        for seq in range(1, N + 1):
            m = await bounded(it.next_msg(timeout=10))
            self.assertEqual(m.metadata.sequence.stream, seq)
        self.assertLessEqual(reading.stop(), BOUND)
        self.assertGreater(it.consumer.pauses, 0)

    async def test_object_watcher(self) -> None:
        """An object watcher with max_pending=20 and 300 objects put unread: at most
        20 infos wait; then all 300 come, each once."""
        js = await self.connect()
        obs = await bounded(js.create_object_store("BOUNDS_O", storage="memory"))
        w = await bounded(obs.watch(updates_only=True, max_pending=20))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update(timeout=5)))
        sampler = Sampler(lambda: w.pending)
        for i in range(300):
            await bounded(obs.put(f"o{i}", b"x"))
        await self.settled(sampler)
        self.assertLessEqual(sampler.stop(), 20)
        names = []
        for _ in range(300):
            info = await bounded(w.next_update(timeout=10))
            assert info is not None
            names.append(info.name)
        self.assertEqual(names, [f"o{i}" for i in range(300)])

    async def test_push_without_handler_ack_none(self) -> None:
        """A push subscription that acks nothing, pending_msgs_limit=50, 2,000
        messages unread: at most 50 wait (it held all 2,000); the rest are dropped and
        one SlowConsumerError says so; the 50 read in order."""
        js = await self.connect()
        await bounded(js.add_stream(name="BOUNDS_P", subjects=["bp.>"], storage="memory"))
        await self.fill(js, lambda i: f"bp.{i}", 2000)
        errors: list[NatsError] = []
        sub = await bounded(js.subscribe(
            "bp.>", ack_policy="none", pending_msgs_limit=BOUND,
            error_cb=errors.append,
        ))
        self.addCleanup(sub.unsubscribe)
        sampler = Sampler(lambda: sub._unread)
        await self.settled(sampler)
        await sleep(0.5)
        self.assertLessEqual(sampler.stop(), BOUND)
        self.assertEqual(sub.dropped, 2000 - BOUND)
        self.assertEqual([type(e) for e in errors], [SlowConsumerError])
        got = [(await bounded(sub.next_msg(timeout=5))).data for _ in range(BOUND)]
        self.assertEqual(got, [b"v%d" % i for i in range(BOUND)])

    async def test_push_without_handler_acking(self) -> None:
        """With acks, max_ack_pending below the limit bounds it at the server: 2,000
        messages, max_ack_pending=50: 50 wait, nothing dropped or reported."""
        js = await self.connect()
        await bounded(js.add_stream(name="BOUNDS_PA", subjects=["bpa.>"], storage="memory"))
        await self.fill(js, lambda i: f"bpa.{i}", 2000)
        errors: list[NatsError] = []
        sub = await bounded(js.subscribe(
            "bpa.>", max_ack_pending=BOUND, pending_msgs_limit=100, error_cb=errors.append,
        ))
        self.addCleanup(sub.unsubscribe)
        sampler = Sampler(lambda: sub._unread)
        await self.settled(sampler)
        self.assertEqual((sampler.stop(), sub.dropped, errors), (BOUND, 0, []))
