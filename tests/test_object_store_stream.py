"""Streaming the object store both ways (issue #16): put from a file, an async iterator,
a producer or a writer; get as chunks, to a file, to an IConsumer; against a real
nats-server with file storage. Figure 1: a 256 MiB object through a file both ways in
bounded memory, the reactor on time throughout.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import random
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IConsumer, IPushProducer
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web.client import FileBodyProducer
from zope.interface import implementer

import txnats
from tests.support.figures import figure
from tests.support.files import temp_file
from tests.support.servers import ServerPerClass
from tests.support.waits import bounded, reactor
from txnats.errors import (
    DigestMismatchError,
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from txnats.jetstream import JetStreamContext
from txnats.jetstream._obj_put import HIGH_WATER, source_for
from txnats.jetstream.object_store import ObjectStore, ObjectWriter

MIB = 1024 * 1024
CHUNK = 128 * 1024


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        m = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    assert m is not None, field
    return int(m.group(1)) * 1024


class PeakMemory:
    """The growth of this process's peak resident set over a stretch of time: the
    kernel's high-water mark (VmHWM) is reset first (``/proc/self/clear_refs``)."""

    def __init__(self) -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        self.base = _vm("VmRSS")

    def growth(self) -> int:
        return _vm("VmHWM") - self.base


class Lateness:
    """A 10 ms timer rescheduling itself. For every interval between two firings it
    records how late the firing was (wall clock) and how much CPU the reactor thread
    used meanwhile (``time.thread_time``): the reactor's own work, as opposed to time
    the thread spent off the CPU (other processes on a loaded machine)."""

    def __init__(self, interval: float = 0.010) -> None:
        self.interval = interval
        self.reset()
        self._due = time.monotonic() + interval
        self._cpu = time.thread_time()
        self._call = reactor.callLater(interval, self._tick)

    def reset(self) -> None:
        #: The latest firing (seconds late), and the reactor's CPU in that interval.
        self.worst = self.worst_cpu = 0.0
        #: The most CPU the reactor thread used in any one interval (seconds).
        self.busiest = 0.0
        self.fired = 0

    def _tick(self) -> None:
        now, cpu = time.monotonic(), time.thread_time()
        used = cpu - self._cpu
        if now - self._due > self.worst:
            self.worst, self.worst_cpu = now - self._due, used
        self.busiest = max(self.busiest, used)
        self.fired += 1
        self._due, self._cpu = now + self.interval, cpu
        self._call = reactor.callLater(self.interval, self._tick)

    def stop(self) -> None:
        if self._call.active():
            self._call.cancel()


class GcPauses:
    """The longest pause of the garbage collector while it is installed (seconds)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._began = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.worst = max(self.worst, time.perf_counter() - self._began)

    def stop(self) -> None:
        if self._cb in gc.callbacks:
            gc.callbacks.remove(self._cb)


def big_file(case: TestCase, size: int) -> tuple[str, str]:
    """A file of ``size`` pseudo-random bytes (every MiB different); its path and
    SHA-256 hex."""
    path = temp_file(case, "object.bin")
    block = random.Random(16).randbytes(MIB)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(size // MIB):
            piece = i.to_bytes(8, "big") + block[8:]
            h.update(piece)
            f.write(piece)
    return path, h.hexdigest()


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(4 * MIB):
            h.update(piece)
    return h.hexdigest()


class _StreamCase(ServerPerClass, TestCase):
    server_options = {"jetstream": True}

    async def store(self, **config: Any) -> tuple[txnats.Client, JetStreamContext, ObjectStore]:
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url, name=self._testMethodName)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        bucket = self._testMethodName[:40]
        obs = await bounded(js.create_object_store(bucket, **config))
        self.addCleanup(lambda: js.delete_object_store(bucket).addErrback(lambda _: None))
        return nc, js, obs


class FigureOneTests(_StreamCase):
    """Figure 1: 256 MiB from a file and back to a file, in bounded memory, on time."""

    timeout = 60

    async def test_figure_1_256_mib_through_files_in_bounded_memory(self) -> None:
        """A 256 MiB object put from a file and got to a file grows the peak RSS by
        under 32 MiB each way; the digest matches; a 10 ms timer is never more than
        50 ms late during either."""
        size = 256 * MIB
        src, digest = big_file(self, size)
        _, _, obs = await self.store(storage="file")
        out = temp_file(self, "copy.bin")

        # A full collection walks the whole heap: in a test runner, every earlier
        # test's objects (measured: a 113 ms pause late in a full suite run, all of it
        # on the reactor thread). Frozen, they are left out, and what the collector
        # does during the transfers is the transfers' own garbage, as in a service.
        gc.collect()
        gc.freeze()
        self.addCleanup(gc.unfreeze)
        gc_pauses = GcPauses()
        self.addCleanup(gc_pauses.stop)
        late = Lateness()
        mem = PeakMemory()
        start = time.monotonic()
        with open(src, "rb") as f:
            info = await bounded(obs.put("big", f), 40)
        put_s = time.monotonic() - start
        put_growth = mem.growth()
        put = (late.worst, late.worst_cpu, late.busiest)

        late.reset()
        mem = PeakMemory()
        start = time.monotonic()
        got = await bounded(obs.get_to_file("big", out), 40)
        get_s = time.monotonic() - start
        get_growth = mem.growth()
        get = (late.worst, late.worst_cpu, late.busiest)
        late.stop()

        self.assertEqual((info.size, got.size, got.digest), (size, size, info.digest))
        self.assertEqual(file_sha256(out), digest)
        ms = [round(x * 1000, 1) for x in (*put, *get)]
        figure(
            1, size_mib=size // MIB, put_peak_growth_mib=put_growth / MIB,
            get_peak_growth_mib=get_growth / MIB, put_mb_s=size / MIB / put_s,
            get_mb_s=size / MIB / get_s,
            put_late_ms=ms[0], put_late_cpu_ms=ms[1], put_busiest_interval_ms=ms[2],
            get_late_ms=ms[3], get_late_cpu_ms=ms[4], get_busiest_interval_ms=ms[5],
            load=os.getloadavg()[0], gc_worst_pause_ms=gc_pauses.worst * 1000,
        )
        self.assertLess(put_growth, 32 * MIB)
        self.assertLess(get_growth, 32 * MIB)
        # The reactor never works 50 ms without letting the 10 ms timer fire; and a
        # firing more than 50 ms late must be time the thread spent off the CPU (the
        # machine busy elsewhere: an idle reactor is as late then), never its own work.
        for late_s, cpu_s, busiest_s in (put, get):
            self.assertLess(busiest_s, 0.050)
            if late_s >= 0.050:
                self.assertLess(cpu_s, 0.5 * late_s, "the reactor was busy, not preempted")

async def pieces(data: bytes, sizes: list[int]) -> AsyncIterator[bytes]:
    """``data`` in pieces of the given sizes, round and round."""
    pos = i = 0
    while pos < len(data):
        n = sizes[i % len(sizes)]
        yield data[pos:pos + n]
        pos += n
        i += 1


@implementer(IConsumer)
class SlowConsumer:
    """An IConsumer that pauses its producer after every write and resumes it a
    little later; records what it got."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.producer: Any = None
        self.pauses = 0
        self.unregistered = False

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        assert streaming
        self.producer = producer

    def unregisterProducer(self) -> None:
        self.unregistered = True

    def write(self, data: bytes) -> None:
        self.data += data
        self.pauses += 1
        self.producer.pauseProducing()
        reactor.callLater(0.001, self.producer.resumeProducing)


@implementer(IPushProducer)
class PushSource:
    """A push producer writing ``data`` to a consumer in 10 KiB pieces while resumed."""

    def __init__(self, consumer: Any, data: bytes) -> None:
        self.consumer, self.data, self.pos = consumer, data, 0
        self.paused = False
        self.pauses = 0
        self.done: defer.Deferred[None] = defer.Deferred()
        reactor.callLater(0, self._run)

    def _run(self) -> None:
        while not self.paused and self.pos < len(self.data):
            self.consumer.write(self.data[self.pos:self.pos + 10_240])
            self.pos += 10_240
        if self.pos >= len(self.data) and not self.done.called:
            self.consumer.unregisterProducer()
            self.done.callback(None)

    def pauseProducing(self) -> None:
        self.paused = True
        self.pauses += 1

    def resumeProducing(self) -> None:
        self.paused = False
        reactor.callLater(0, self._run)

    def stopProducing(self) -> None:
        self.paused = True


class StreamingPutTests(_StreamCase):
    """put() takes every kind of source and stores the same bytes."""

    async def test_async_iterator_of_odd_pieces(self) -> None:
        """Pieces of any size are re-cut into chunk_size chunks."""
        _, _, obs = await self.store()
        data = random.Random(1).randbytes(3 * CHUNK + 77)
        info = await bounded(obs.put("it", pieces(data, [1, 70_000, CHUNK, 3 * CHUNK, 5])))
        self.assertEqual((info.size, info.chunks), (len(data), 4))
        self.assertEqual(await bounded(obs.get("it")), data)

    async def test_async_iterator_of_str_fails_and_leaves_nothing(self) -> None:
        _, _, obs = await self.store()

        async def words() -> AsyncIterator[Any]:
            yield b"bytes first"
            yield "then text"

        with self.assertRaises(InvalidArgumentError):
            await bounded(obs.put("words", words()))
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get_info("words"))

    async def test_body_producer_from_a_file(self) -> None:
        """Twisted's FileBodyProducer (an IBodyProducer) is read to the end."""
        _, _, obs = await self.store()
        data = os.urandom(2 * CHUNK + 3)
        info = await bounded(obs.put("fbp", FileBodyProducer(io.BytesIO(data))))
        self.assertEqual(info.size, len(data))
        self.assertEqual(await bounded(obs.get("fbp")), data)

    async def test_push_producer_registered_with_a_writer(self) -> None:
        """A push producer writing faster than the store sends is paused, and the
        object is whole."""
        _, _, obs = await self.store()
        data = random.Random(2).randbytes(12 * MIB)
        writer = obs.put_writer("pushed")
        source = PushSource(writer, data)
        writer.registerProducer(source, True)
        await bounded(source.done)
        info = await bounded(writer.close(), 20)
        self.assertEqual(info.size, len(data))
        self.assertGreater(source.pauses, 0)
        self.assertEqual(await bounded(obs.get("pushed"), 20), data)

    async def test_writer_abort_stores_nothing(self) -> None:
        _, _, obs = await self.store()
        writer = obs.put_writer("aborted")
        writer.write(b"x" * (CHUNK + 1))
        writer.abort()
        with self.assertRaises(ObjectStoreError):
            await bounded(writer.done)
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get_info("aborted"))

    async def test_unknown_data_is_refused_before_io(self) -> None:
        _, _, obs = await self.store()
        for bad in (42, "text", [b"a"], object()):
            with self.assertRaises(InvalidArgumentError):
                await bounded(obs.put("bad", bad))


class StreamingGetTests(_StreamCase):
    """get_chunks, get_to_file and get_to_consumer give the bytes and check them."""

    async def test_get_chunks_in_order(self) -> None:
        _, _, obs = await self.store()
        data = random.Random(3).randbytes(40 * CHUNK + 9)  # more than one batch
        await bounded(obs.put("many", data))
        reader = obs.get_chunks("many")
        got = [c async for c in reader]
        self.assertEqual(len(got), 41)
        self.assertEqual(b"".join(got), data)
        assert reader.info is not None
        self.assertEqual(reader.info.size, len(data))

    async def test_get_chunks_of_a_missing_object(self) -> None:
        _, _, obs = await self.store()
        with self.assertRaises(ObjectNotFoundError):
            async for _ in obs.get_chunks("nothing"):
                pass

    async def test_get_to_file_and_to_a_file_object(self) -> None:
        _, _, obs = await self.store()
        data = os.urandom(5 * CHUNK + 1)
        await bounded(obs.put("f", data))
        path = temp_file(self, "out.bin")
        info = await bounded(obs.get_to_file("f", path))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(info.size, len(data))
        self.assertEqual(os.listdir(os.path.dirname(path)), ["out.bin"])
        buf = io.BytesIO()
        await bounded(obs.get_to_file("f", buf))
        self.assertEqual(buf.getvalue(), data)

    async def test_mismatch_removes_the_partial_file_and_keeps_the_old_one(self) -> None:
        """A corrupted object fails get_to_file with DigestMismatchError; the part file
        is removed and a file already at the path is untouched."""
        _, js, obs = await self.store()
        info = await bounded(obs.put("bad", os.urandom(3 * CHUNK)))
        # A chunk past the metadata's count: the bytes no longer match.
        await bounded(js.publish(f"$O.{obs.bucket}.C.{info.nuid}", b"extra"))
        path = temp_file(self, "out.bin")
        with open(path, "wb") as f:
            f.write(b"previous")
        with self.assertRaises(DigestMismatchError):
            await bounded(obs.get_to_file("bad", path))
        self.assertEqual(os.listdir(os.path.dirname(path)), ["out.bin"])
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"previous")

    async def test_get_to_consumer_honours_pauses(self) -> None:
        _, _, obs = await self.store()
        data = os.urandom(10 * CHUNK)
        await bounded(obs.put("c", data))
        consumer = SlowConsumer()
        info = await bounded(obs.get_to_consumer("c", consumer))
        self.assertEqual(bytes(consumer.data), data)
        self.assertEqual(info.size, len(data))
        self.assertTrue(consumer.unregistered)
        self.assertGreaterEqual(consumer.pauses, 10)

    async def test_links_are_followed_when_streaming(self) -> None:
        _, _, obs = await self.store()
        data = os.urandom(CHUNK + 5)
        target = await bounded(obs.put("target", data))
        await bounded(obs.add_link("alias", target))
        got = b"".join([c async for c in obs.get_chunks("alias")])
        self.assertEqual(got, data)
        path = temp_file(self, "linked.bin")
        info = await bounded(obs.get_to_file("alias", path))
        self.assertEqual(info.name, "target")


class WatchAndListingTests(_StreamCase):
    async def test_watch_initial_values_marker_updates_and_deletes(self) -> None:
        _, _, obs = await self.store()
        await bounded(obs.put("a", b"1"))
        await bounded(obs.put("b", b"2"))
        w = await bounded(obs.watch())
        self.addCleanup(w.stop)
        first = [await bounded(w.next_update()) for _ in range(3)]
        self.assertEqual(sorted(i.name for i in first[:2] if i), ["a", "b"])
        self.assertIsNone(first[2])
        await bounded(obs.put("c", b"3"))
        info = await bounded(w.next_update())
        assert info is not None
        self.assertEqual((info.name, info.size, info.deleted), ("c", 1, False))
        await bounded(obs.delete("a"))
        info = await bounded(w.next_update())
        assert info is not None
        self.assertEqual((info.name, info.deleted), ("a", True))
        w.stop()
        self.assertEqual([i async for i in w], [])

    async def test_watch_updates_only_ignore_deletes_and_empty_bucket(self) -> None:
        _, _, obs = await self.store()
        w = await bounded(obs.watch(updates_only=True, ignore_deletes=True))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update()))
        await bounded(obs.put("x", b"1"))
        await bounded(obs.delete("x"))
        await bounded(obs.put("y", b"2"))
        names = [(await bounded(w.next_update())) for _ in range(2)]
        self.assertEqual([i.name for i in names if i], ["x", "y"])

    async def test_store_names_and_statuses(self) -> None:
        _, js, obs = await self.store(description="listed")
        self.assertIn(obs.bucket, await bounded(js.object_store_names()))
        statuses = {s.bucket: s for s in await bounded(js.object_stores())}
        self.assertEqual(statuses[obs.bucket].description, "listed")


class FakeProducer:
    """Counts the calls a consumer makes on its producer."""

    def __init__(self) -> None:
        self.pauses = self.resumes = self.stops = 0

    def pauseProducing(self) -> None:
        self.pauses += 1

    def resumeProducing(self) -> None:
        self.resumes += 1

    def stopProducing(self) -> None:
        self.stops += 1


class WriterUnitTests(SynchronousTestCase):
    """ObjectWriter's flow control without a server: chunks taken by its source."""

    def take(self, writer: ObjectWriter) -> bytes:
        return self.successResultOf(defer.ensureDeferred(writer.next()))

    def test_push_producer_paused_above_high_water_resumed_below_half(self) -> None:
        writer = ObjectWriter(CHUNK)
        producer = FakeProducer()
        writer.registerProducer(producer, True)
        piece = b"x" * CHUNK
        for _ in range(HIGH_WATER // CHUNK):
            writer.write(piece)
        self.assertEqual(producer.pauses, 1)
        for _ in range(HIGH_WATER // CHUNK // 2):
            self.assertEqual(self.take(writer), piece)
        self.assertEqual(producer.resumes, 0)  # half the high water still waits
        self.assertEqual(self.take(writer), piece)
        self.assertEqual(producer.resumes, 1)

    def test_pull_producer_asked_when_the_source_wants_bytes(self) -> None:
        writer = ObjectWriter(4)
        producer = FakeProducer()
        writer.registerProducer(producer, False)
        d = defer.ensureDeferred(writer.next())
        self.assertNoResult(d)
        self.assertEqual(producer.resumes, 1)
        writer.write(b"ab")
        writer.write(b"cdef")
        self.assertEqual(self.successResultOf(d), b"abcd")
        writer.close()
        self.assertEqual(self.take(writer), b"ef")
        self.assertEqual(self.take(writer), b"")

    def test_room_waits_while_full_and_abort_stops_the_producer(self) -> None:
        writer = ObjectWriter(CHUNK)
        writer.write(b"y" * HIGH_WATER)
        room = writer.room()
        self.assertNoResult(room)
        producer = FakeProducer()
        writer.registerProducer(producer, True)
        writer.abort()
        self.successResultOf(room)
        self.assertEqual(producer.stops, 1)
        self.assertTrue(writer.failed)
        self.failureResultOf(defer.ensureDeferred(writer.next()), ObjectStoreError)
        with self.assertRaises(ObjectStoreError):
            writer.write(b"more")

    def test_a_bare_push_producer_is_refused(self) -> None:
        @implementer(IPushProducer)
        class Bare(FakeProducer):
            pass

        with self.assertRaises(InvalidArgumentError):
            source_for(Bare(), CHUNK, object())
