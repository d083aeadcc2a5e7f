"""Streams, buckets and consumers deleted behind a reader's back end it promptly.

Each reader (the ordered consumer, with a handler or iterated; key and object
watchers; an object being read; push subscriptions, with a handler or iterated) must
end with its typed error soon after the deletion: well under a second where the
account hears the server's deletion advisories, within about one heartbeat where it may
not subscribe to them. They used to notice only after missed heartbeats: ~30 s for the
ordered readers (two rounds of three 5 s heartbeats), two heartbeats for push ones.

A forged advisory (anyone may publish to ``$JS.EVENT.ADVISORY.>``) must not end a
reader whose stream and consumer still exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import (
    BucketNotFoundError,
    ConsumerNotFoundError,
    NatsError,
    PermissionViolationError,
    StreamNotFoundError,
)
from txnats.jetstream import JetStreamContext, JsMsg

from .support.servers import ServerPerClass
from .support.waits import bounded, reactor

#: A user who may do anything but subscribe to the JetStream advisories.
NO_ADVISORIES = """
authorization {
  users = [
    {user: plain, password: plain,
     permissions: {subscribe: {allow: [">"], deny: ["$JS.EVENT.>"]}}}
  ]
}
"""

#: Where advisories are heard a deletion must end a reader within this many seconds:
#: less than the heartbeat (5 s by default), so the heartbeats could not have done it.
PROMPT = 2.0

#: (what deletes the reader's stream, a Deferred that fails with the reader's error)
Reader = tuple[Callable[[], Deferred[Any]], Deferred[Any]]


class Readers:
    """Each kind of reader on a stream or bucket of its own (``name``)."""

    js: JetStreamContext
    addCleanup: Callable[..., None]

    async def _stream(self, name: str) -> Callable[[], Deferred[Any]]:
        await bounded(self.js.add_stream(name=name, subjects=[f"{name}.>"], storage="memory"))
        await bounded(self.js.publish(f"{name}.a", b"first"))
        return lambda: self.js.delete_stream(name)

    async def ordered_handler(self, name: str, **kw: Any) -> Reader:
        delete = await self._stream(name)
        got: Deferred[JsMsg] = Deferred()
        error: Deferred[Any] = Deferred()
        oc = await bounded(self.js.ordered_consumer(
            name, lambda m: got.called or got.callback(m), on_error=error.errback, **kw
        ))
        self.addCleanup(oc.stop)
        await bounded(got)
        return delete, error

    async def ordered_iter(self, name: str, **kw: Any) -> Reader:
        delete = await self._stream(name)
        it = await bounded(self.js.ordered_consumer(name, **kw))
        self.addCleanup(it.stop)
        await bounded(it.next_msg(timeout=5))
        return delete, it.next_msg()

    async def key_watcher(self, name: str) -> Reader:
        kv = await bounded(self.js.create_key_value(name, storage="memory"))
        await bounded(kv.put("k", b"v"))
        w = await bounded(kv.watch(">"))
        self.addCleanup(w.stop)
        assert await bounded(w.next_update(timeout=5)) is not None
        assert await bounded(w.next_update(timeout=5)) is None  # the initial values' end
        return lambda: self.js.delete_key_value(name), w.next_update()

    async def object_watcher(self, name: str) -> Reader:
        obs = await bounded(self.js.create_object_store(name, storage="memory"))
        await bounded(obs.put("o", b"data"))
        w = await bounded(obs.watch())
        self.addCleanup(w.stop)
        assert await bounded(w.next_update(timeout=5)) is not None
        assert await bounded(w.next_update(timeout=5)) is None
        return lambda: self.js.delete_object_store(name), w.next_update()

    async def object_read(self, name: str) -> Reader:
        """A 12 MiB object read chunk by chunk: one chunk taken (at most two 4 MiB
        batches are fetched ahead), then the bucket is deleted and the rest read."""
        obs = await bounded(self.js.create_object_store(name, storage="memory"))
        await bounded(obs.put("big", b"x" * (12 * 1024 * 1024), chunk_size=128 * 1024), 30)
        reader = obs.get_chunks("big")
        self.addCleanup(reader.stop)
        it = reader.__aiter__()
        await bounded(ensureDeferred(it.__anext__()))
        error: Deferred[Any] = Deferred()

        async def rest() -> None:
            async for _ in it:
                pass

        def delete() -> Deferred[Any]:
            # The rest is read once the deletion is confirmed: a Direct Get sent with
            # the delete request may be answered before the stream is gone.
            def read_rest(result: object) -> object:
                ensureDeferred(rest()).chainDeferred(error)
                return result

            return self.js.delete_object_store(name).addCallback(read_rest)

        return delete, error

    async def push_handler(self, name: str, **kw: Any) -> Reader:
        delete = await self._stream(name)
        got: Deferred[JsMsg] = Deferred()
        error: Deferred[Any] = Deferred()

        def on_error(e: NatsError) -> None:
            if isinstance(e, ConsumerNotFoundError) and not error.called:
                error.errback(e)

        sub = await bounded(self.js.subscribe(
            f"{name}.>", lambda m: got.called or got.callback(m), error_cb=on_error, **kw
        ))
        self.addCleanup(sub.unsubscribe)
        await bounded(got)
        return delete, error

    async def push_iter(self, name: str, **kw: Any) -> Reader:
        delete = await self._stream(name)
        sub = await bounded(self.js.subscribe(f"{name}.>", error_cb=lambda e: None, **kw))
        self.addCleanup(sub.unsubscribe)
        await bounded(sub.next_msg(timeout=5))
        return delete, sub.next_msg(timeout=60)


#: reader -> the error it must end with.
EXPECTED = {
    "ordered_handler": StreamNotFoundError,
    "ordered_iter": StreamNotFoundError,
    "key_watcher": BucketNotFoundError,
    "object_watcher": BucketNotFoundError,
    "object_read": BucketNotFoundError,
    "push_handler": ConsumerNotFoundError,
    "push_iter": ConsumerNotFoundError,
}


async def time_to_error(reader: Reader, limit: float) -> tuple[float, BaseException]:
    """Delete, then wait (at most ``limit`` s) for the reader's error: (seconds, error)."""
    delete, error = reader
    start = time.monotonic()
    await bounded(delete())
    try:
        await bounded(error, limit, "the reader's error")
    except AssertionError:
        raise
    except Exception as e:
        return time.monotonic() - start, e
    raise AssertionError("the reader ended without an error")


class DeletedWithAdvisoriesTests(ServerPerClass, Readers, TestCase):
    """The account hears the advisories: every reader ends well under a second after
    its stream's deletion (with 5 s heartbeats, so they could not have told it)."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 60

    async def connect(self) -> None:
        assert self.server is not None
        self.errors: list[NatsError] = []
        nc = await bounded(txnats.connect(reactor, self.server.url, error_cb=self.errors.append))
        self.addCleanup(lambda: bounded(nc.close()))
        self.js = nc.jetstream()

    async def check(self, kind: str, **kw: Any) -> None:
        await self.connect()
        name = f"DEL_{kind}"
        reader = await getattr(self, kind)(name, **kw)
        seconds, e = await time_to_error(reader, 20)
        self.assertIsInstance(e, EXPECTED[kind])
        self.assertLess(seconds, PROMPT, f"{kind} took {seconds:.3f} s")
        self.assertEqual(self.errors, [])

    async def test_ordered_consumer_with_handler(self) -> None:
        """on_error gets StreamNotFoundError at once."""
        await self.check("ordered_handler")

    async def test_ordered_consumer_iterated(self) -> None:
        """A waiting next_msg() fails with StreamNotFoundError at once."""
        await self.check("ordered_iter")

    async def test_key_watcher(self) -> None:
        """A waiting next_update() fails with BucketNotFoundError at once."""
        await self.check("key_watcher")

    async def test_object_watcher(self) -> None:
        """A waiting next_update() fails with BucketNotFoundError at once."""
        await self.check("object_watcher")

    async def test_object_read(self) -> None:
        """An object being read fails with BucketNotFoundError (not a timeout after
        js.timeout, nor a bare ObjectStoreError for the 503 of a Direct Get)."""
        await self.check("object_read")

    async def test_push_with_handler(self) -> None:
        """error_cb gets ConsumerNotFoundError at once (idle heartbeat 5 s)."""
        await self.check("push_handler", idle_heartbeat=5.0)

    async def test_push_iterated(self) -> None:
        """A waiting next_msg() fails with ConsumerNotFoundError at once."""
        await self.check("push_iter", idle_heartbeat=5.0)

    async def test_consumer_deleted_is_recreated_at_once(self) -> None:
        """Deleting an ordered consumer's consumer (not its stream): it is made again
        at once and what is published next arrives, well before a heartbeat."""
        await self.connect()
        await self.js.add_stream(name="DEL_C", subjects=["DEL_C.>"], storage="memory")
        got: list[JsMsg] = []
        arrived: list[Deferred[None]] = [Deferred(), Deferred()]

        def on_msg(m: JsMsg) -> None:
            got.append(m)
            arrived[len(got) - 1].callback(None)

        oc = await bounded(self.js.ordered_consumer("DEL_C", on_msg))
        self.addCleanup(oc.stop)
        await bounded(self.js.publish("DEL_C.a", b"1"))
        await bounded(arrived[0])
        start = time.monotonic()
        await bounded(self.js.delete_consumer("DEL_C", oc.name))
        await bounded(self.js.publish("DEL_C.a", b"2"))
        await bounded(arrived[1], PROMPT, "the message after the consumer's deletion")
        self.assertLess(time.monotonic() - start, PROMPT)
        self.assertEqual([m.data for m in got], [b"1", b"2"])
        self.assertEqual(oc.resets, 1)

    async def test_forged_advisories_end_nothing(self) -> None:
        """Advisories published by another client (for streams and consumers that
        exist, with any payload) make the readers ask, and nothing ends: later
        messages still arrive."""
        await self.connect()
        got: list[JsMsg] = []
        await self.js.add_stream(name="DEL_F", subjects=["DEL_F.>"], storage="memory")
        oc = await bounded(self.js.ordered_consumer("DEL_F", got.append))
        self.addCleanup(oc.stop)
        kv = await bounded(self.js.create_key_value("DEL_FKV", storage="memory"))
        w = await bounded(kv.watch(">", updates_only=True))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update(timeout=5)))
        nc = self.js.client
        for subject in (
            "$JS.EVENT.ADVISORY.STREAM.DELETED.DEL_F",
            f"$JS.EVENT.ADVISORY.CONSUMER.DELETED.DEL_F.{oc.name}",
            "$JS.EVENT.ADVISORY.STREAM.DELETED.KV_DEL_FKV",
            f"$JS.EVENT.ADVISORY.CONSUMER.DELETED.KV_DEL_FKV.{w._consumer.name}",
        ):
            for payload in (b"", b"not json", b'{"type": 7, "stream": ["x"]}'):
                nc.publish(subject, payload)
        await bounded(nc.flush())
        await bounded(nc.rtt())  # the readers' questions answered by now
        await bounded(self.js.publish("DEL_F.a", b"after"))
        await bounded(kv.put("k", b"after"))
        entry = await bounded(w.next_update(timeout=5))
        self.assertEqual(entry.value if entry else None, b"after")
        self.assertEqual([m.data for m in got], [b"after"])
        self.assertEqual((oc.resets, self.errors), (0, []))


class DeletedWithoutAdvisoriesTests(ServerPerClass, Readers, TestCase):
    """A user who may not subscribe to ``$JS.EVENT.>``: the readers ask at their
    first missed heartbeat, so each ends within about one heartbeat (5 s by default;
    1.25 heartbeats at most for the ordered readers, one for push), not 2-6."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True, "config": NO_ADVISORIES}
    timeout = 120

    async def test_every_reader_within_a_heartbeat(self) -> None:
        """All readers at once (5 s heartbeats), every stream deleted together: each
        ends with its typed error within 1.6 heartbeats (8 s; it took 30 s for the
        ordered readers and 10 s for the push ones); the refused advisory
        subscriptions are reported, once or twice, and nothing else."""
        assert self.server is not None
        errors: list[NatsError] = []
        url = self.server.url.replace("nats://", "nats://plain:plain@")
        nc = await bounded(txnats.connect(reactor, url, error_cb=errors.append))
        self.addCleanup(lambda: bounded(nc.close()))
        self.js = nc.jetstream()
        kinds = list(EXPECTED)
        readers = []
        for kind in kinds:
            kw = {"idle_heartbeat": 5.0} if kind.startswith("push") else {}
            readers.append(await getattr(self, kind)(f"NOADV_{kind}", **kw))
        results = await gatherResults([
            ensureDeferred(time_to_error(r, 40)) for r in readers
        ], consumeErrors=True)
        report = {
            k: (round(s, 2), type(e).__name__) for k, (s, e) in zip(kinds, results, strict=True)
        }
        for kind, (seconds, e) in zip(kinds, results, strict=True):
            self.assertIsInstance(e, EXPECTED[kind], report)
            self.assertLess(seconds, 8.0, report)
        self.assertTrue(errors, "the refused advisory subscription was not reported")
        for e in errors:
            self.assertIsInstance(e, PermissionViolationError)
            self.assertIn("$JS.EVENT.ADVISORY.", str(e))
        self.assertLessEqual(len(errors), 2)
