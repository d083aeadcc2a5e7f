"""Key-value watchers that last (issue #16): across server restarts (figure 2), resumed
from a revision, with a bounded queue; keys listed as a stream; bucket listings,
updates, mirrors and sources. Against real nats-servers.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import TestCase

import txnats
from tests.support.figures import figure
from tests.support.servers import ServerPerClass
from tests.support.waits import bounded, reactor, sleep, wait_until
from txnats import ClientState
from txnats.errors import InvalidArgumentError, KeyValueError, NatsError
from txnats.jetstream import JetStreamContext
from txnats.jetstream.kv import Entry, KeyValue, KeyWatcher
from txnats.testing import NatsServer


class Collector:
    """Reads a watcher in the background: every entry (markers too) in a list."""

    def __init__(self, watcher: KeyWatcher) -> None:
        self.watcher = watcher
        self.entries: list[Entry] = []
        self.init_done = False
        self.error: BaseException | None = None
        self.done = defer.ensureDeferred(self._run())

    async def _run(self) -> None:
        try:
            async for e in self.watcher:
                if e is None:
                    self.init_done = True
                else:
                    self.entries.append(e)
        except NatsError as e:
            self.error = e

    @property
    def revisions(self) -> list[int]:
        return [e.revision for e in self.entries]


async def put_when_ready(kv: KeyValue, key: str, value: bytes, seconds: float = 20.0) -> int:
    """``kv.put``, asked again while the server is coming back (no JetStream yet)."""
    start = reactor.seconds()
    while True:
        try:
            return await kv.put(key, value)
        except NatsError:
            if reactor.seconds() - start > seconds:
                raise
            await sleep(0.1)


class RestartTests(TestCase):
    """Figure 2: a watcher runs on while its server restarts twice."""

    timeout = 60

    def setUp(self) -> None:
        store = tempfile.mkdtemp(prefix="txnats-kv-restart-")
        self.addCleanup(shutil.rmtree, store, True)
        self.server = NatsServer(jetstream=True, store_dir=store).start()
        self.addCleanup(self.server.stop)

    async def client(self, name: str) -> txnats.Client:
        nc = await txnats.connect(
            reactor, self.server.url, name=name, reconnect_wait=0.1,
            reconnect_jitter=0.0, max_reconnect_attempts=-1,
        )
        self.addCleanup(nc.close)
        return nc

    async def test_figure_2_watcher_across_two_server_restarts(self) -> None:
        """Every update made while the watcher runs reaches it once, in revision
        order, though the server is killed once and stopped once (each time started
        again on its port with its store)."""
        nc_w = await self.client("watcher")
        nc_p = await self.client("writer")
        kv = await bounded(nc_p.jetstream().create_key_value("restarts", history=64))
        kv_w = await bounded(nc_w.jetstream().key_value("restarts"))
        watcher = await bounded(kv_w.watch(updates_only=True))
        seen = Collector(watcher)
        self.addCleanup(watcher.stop)

        acked: list[int] = []
        per_phase = 100
        for phase in range(3):
            for i in range(per_phase):
                n = phase * per_phase + i
                acked.append(await put_when_ready(kv, f"k{n % 10}", b"%d" % n))
            if phase == 2:
                break
            if phase == 0:
                self.server.kill()  # a crash
            else:
                self.server.stop()  # a clean shutdown (the store stays: store_dir)
            await wait_until(lambda: nc_w.state != ClientState.CONNECTED, 10, "disconnect")
            self.server.start()
            await wait_until(
                lambda: nc_w.state == ClientState.CONNECTED
                and nc_p.state == ClientState.CONNECTED, 20, "reconnect",
            )
        await wait_until(
            lambda: (bool(seen.revisions) and seen.revisions[-1] >= acked[-1])
            or seen.error is not None, 30, "the last update reaching the watcher",
        )
        stored = await bounded(kv.history(">"))
        self.assertIsNone(seen.error)
        revs = seen.revisions
        figure(
            2, updates=len(acked), delivered=len(revs), duplicates=len(revs) - len(set(revs)),
            out_of_order=sum(1 for a, b in itertools.pairwise(revs) if b <= a),
            missing=len(set(acked) - set(revs)), restarts=2,
        )
        self.assertEqual(len(revs), len(set(revs)), "a revision came twice")
        self.assertEqual(revs, sorted(revs), "revisions out of order")
        self.assertEqual(set(acked) - set(revs), set(), "acknowledged updates missing")
        # Nothing but what the bucket holds, values included.
        self.assertEqual(
            [(e.revision, e.key, e.value) for e in seen.entries],
            [(e.revision, e.key, e.value) for e in stored],
        )


class _KvCase(ServerPerClass, TestCase):
    server_options = {"jetstream": True}

    async def js(self) -> tuple[txnats.Client, JetStreamContext]:
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url, name=self._testMethodName)
        self.addCleanup(nc.close)
        return nc, nc.jetstream()

    async def bucket(self, name: str = "", **config: Any) -> KeyValue:
        _, js = await self.js()
        name = name or self._testMethodName[:40]
        kv = await bounded(js.create_key_value(name, **config))
        self.addCleanup(lambda: js.delete_key_value(name).addErrback(lambda _: None))
        return kv


class WatchOptionTests(_KvCase):
    async def test_resume_from_revision(self) -> None:
        """A watcher resumed from a revision gives every kept entry from it on, then
        the marker, then live updates."""
        kv = await self.bucket(history=10)
        revs = [await bounded(kv.put("a", b"%d" % i)) for i in range(5)]
        w = await bounded(kv.watch(resume_from_revision=revs[2]))
        self.addCleanup(w.stop)
        got = [await bounded(w.next_update()) for _ in range(4)]
        self.assertEqual([e.revision for e in got[:3] if e], revs[2:])
        self.assertIsNone(got[3])
        live = await bounded(kv.put("a", b"live"))
        e = await bounded(w.next_update())
        assert e is not None
        self.assertEqual((e.revision, e.value), (live, b"live"))
        self.assertEqual(w.last_revision, live)

    async def test_bad_watch_arguments_fail_before_io(self) -> None:
        kv = await self.bucket()
        for kwargs in ({"resume_from_revision": 0}, {"max_pending": 0},
                       {"resume_from_revision": -3}):
            with self.assertRaises(InvalidArgumentError):
                await kv.watch(**kwargs)  # type: ignore[arg-type]

    async def test_bounded_queue_holds_flow_control_and_loses_nothing(self) -> None:
        """With max_pending 50 and 2,000 updates of 4 KiB unread, the server is held
        back (its flow control counts bytes: the queue passes 50 by what it sent before
        asking); reading them all gives every update once, in order."""
        kv = await self.bucket(history=64)
        w = await bounded(kv.watch(updates_only=True, max_pending=50))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update()))
        _, js = await self.js()
        pad = b" " * 4096  # the server's flow control counts bytes
        for i in range(2000):
            js.publish_async(f"$KV.{kv.bucket}.k{i % 100}", b"%d" % i + pad)
        await bounded(js.publish_async_complete(), 20)
        # The server delivers while the publishes go on, and may lag behind them on a
        # loaded machine: wait until the queue has reached its bound (a fixed sleep
        # could read it before anything came, and the bound would not be tested),
        # then give the server time to overrun it, were flow control not held.
        await wait_until(lambda: w.pending >= 50, 20, "the watcher's queue filling")
        await sleep(0.3)
        held = w.pending
        got = []
        while len(got) < 2000:
            e = await bounded(w.next_update())
            assert e is not None
            got.append(int(e.value.rstrip()))
        figure(
            "2b", max_pending=50, queued_while_unread=held, delivered=len(got),
        )
        self.assertEqual(got, list(range(2000)))
        self.assertLess(held, 2000, "the queue was not bounded")

    async def test_stop_never_waits(self) -> None:
        """stop() returns at once, also with the server gone; async for ends."""
        kv = await self.bucket()
        w = await bounded(kv.watch())
        reader = Collector(w)
        w.stop()
        w.stop()
        await bounded(reader.done)
        self.assertTrue(w.stopped)


class ListingTests(_KvCase):
    async def test_list_keys_streams_live_keys(self) -> None:
        kv = await self.bucket()
        for i in range(30):
            await bounded(kv.put(f"k.{i}", b"v"))
        await bounded(kv.delete("k.7"))
        got = [k async for k in kv.list_keys()]
        self.assertEqual(sorted(got), sorted(f"k.{i}" for i in range(30) if i != 7))
        self.assertEqual([k async for k in kv.list_keys("k.1")], ["k.1"])
        lister = kv.list_keys("k.>")
        first = await lister.__anext__()
        lister.stop()
        self.assertTrue(first.startswith("k."))

    async def test_bucket_names_and_list(self) -> None:
        _, js = await self.js()
        await self.bucket("names_a")
        await self.bucket("names_b", history=3)
        names = await bounded(js.key_value_names())
        self.assertIn("names_a", names)
        self.assertIn("names_b", names)
        statuses = {s.bucket: s for s in await bounded(js.key_values())}
        self.assertEqual(statuses["names_b"].history, 3)

    async def test_update_key_value(self) -> None:
        _, js = await self.js()
        kv = await self.bucket("upd", history=2)
        await bounded(js.update_key_value("upd", history=5, description="more"))
        st = await bounded(kv.status())
        self.assertEqual(st.history, 5)


class TopologyTests(_KvCase):
    async def test_mirror_reads_origin_and_writes_through(self) -> None:
        """A mirror bucket reads the origin's keys; its writes land in the origin."""
        origin = await self.bucket("origin")
        await bounded(origin.put("a", b"1"))
        mirror = await self.bucket("mirror", mirror="origin")

        async def mirrored() -> bool:
            try:
                return (await mirror.get("a")).value == b"1"
            except NatsError:
                return False

        deadline = reactor.seconds() + 20  # a loaded server may take seconds to sync
        while not await mirrored() and reactor.seconds() < deadline:
            await sleep(0.05)
        self.assertEqual((await bounded(mirror.get("a"))).value, b"1")
        rev = await bounded(mirror.put("b", b"2"))
        self.assertEqual((await bounded(origin.get("b"))).revision, rev)
        st = await bounded(mirror.status())
        self.assertEqual(st.mirror, "origin")

    async def test_sources_gather_buckets(self) -> None:
        a = await self.bucket("src_a")
        b = await self.bucket("src_b")
        await bounded(a.put("from.a", b"A"))
        await bounded(b.put("from.b", b"B"))
        both = await self.bucket("src_both", sources=["src_a", "src_b"])
        deadline = reactor.seconds() + 20  # a loaded server may take seconds to source
        while len(await bounded(both.keys())) < 2 and reactor.seconds() < deadline:
            await sleep(0.05)
        self.assertEqual(sorted(await bounded(both.keys())), ["from.a", "from.b"])
        self.assertEqual((await bounded(both.get("from.b"))).value, b"B")
        st = await bounded(both.status())
        self.assertEqual(st.sources, ("src_a", "src_b"))

    async def test_mirror_and_sources_together_are_refused(self) -> None:
        _, js = await self.js()
        with self.assertRaises(InvalidArgumentError):
            await js.create_key_value("both", mirror="a", sources=["b"])
        with self.assertRaises(KeyValueError):
            kv = await self.bucket("nottl")
            await kv.put("k", b"v", ttl=5)
