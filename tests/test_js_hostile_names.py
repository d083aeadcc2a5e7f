"""Keys, object names and stream names past what a subject or the server can hold.

nats-server drops a connection whose control line (subject, reply subject, sizes) is
over its ``max_control_line`` (4,096 bytes by default); the client refuses such frames
(:class:`ControlLineTooLongError`), but the stores must refuse a key or an object name
whose subject cannot fit *before* anything is sent, naming the key or name and the
limit: an object's chunks are published before its metadata, so a name refused only
at the metadata would leave chunks behind. Stream, consumer and bucket names are at
most 255 bytes (the server's limit). A key or name that fits must work through every
call, those whose Direct Get would put the subject in a longer request subject too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import InvalidArgumentError, StreamNotFoundError
from txnats.jetstream import JetStreamContext
from txnats.request import REPLY_ROOM

from .support.servers import ServerPerClass
from .support.waits import bounded, reactor


def refused(call: Callable[[], object]) -> BaseException | None:
    """The error ``call`` raised or failed its Deferred with at once (else ``None``)."""
    try:
        result = call()
    except Exception as e:
        return e
    if isinstance(result, Deferred):
        got: list[object] = []
        result.addBoth(got.append)
        if got and isinstance(got[0], Failure):
            return got[0].value
    return None


class LongNamesTests(ServerPerClass, TestCase):
    """Against ``nats-server -js``: refusals send nothing and keep the connection."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 60

    async def connect(self, **options: Any) -> JetStreamContext:
        assert self.server is not None
        self.errors: list[Exception] = []
        nc = await bounded(txnats.connect(
            reactor, self.server.url, error_cb=self.errors.append, **options
        ))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc.jetstream()

    async def drop(self, js: JetStreamContext, stream: str) -> None:
        try:
            await bounded(js.delete_stream(stream))
        except StreamNotFoundError:
            pass

    def assert_refused(
        self, js: JetStreamContext, calls: dict[str, Callable[[], object]], *words: str
    ) -> None:
        """Each call is refused at once with InvalidArgumentError containing ``words``,
        having sent nothing."""
        nc = js.client
        problems = []
        for label, call in calls.items():
            before = nc.stats.out_msgs
            e = refused(call)
            if not isinstance(e, InvalidArgumentError):
                problems.append(f"{label}: {e!r}")
            elif not all(w in str(e) for w in words):
                problems.append(f"{label}: the error does not say {words}: {e}")
            if nc.stats.out_msgs != before:
                problems.append(f"{label}: sent {nc.stats.out_msgs - before} messages")
        self.assertEqual(problems, [])
        self.assertTrue(nc.is_connected)

    async def test_key_too_long(self) -> None:
        """A key whose subject cannot fit is refused by every call, naming the bucket
        and the limit in bytes; one byte shorter works: put, get, history, update,
        delete and a watch that gives it."""
        js = await self.connect()
        kv = await bounded(js.create_key_value("LONGKEYS", storage="memory", history=5))
        self.addCleanup(self.drop, js, "KV_LONGKEYS")
        nc = js.client  # a request's line: the subject, its reply inbox and the sizes
        room = nc.max_control_line - REPLY_ROOM - len(nc.options.inbox_prefix) - len(
            "$KV.LONGKEYS."
        )
        long, fits = "k" * (room + 1), "k" * room
        self.assert_refused(js, {
            "put": lambda: kv.put(long, b"v"),
            "get": lambda: kv.get(long),
            "create": lambda: kv.create(long, b"v"),
            "update": lambda: kv.update(long, b"v", 1),
            "delete": lambda: kv.delete(long),
            "purge": lambda: kv.purge(long),
            "put 10 kB": lambda: kv.put("k" * 10_000, b"v"),
        }, "'LONGKEYS'", f"at most {room} bytes", "max_control_line of 4096")
        rev = await bounded(kv.put(fits, b"v1"))
        self.assertEqual((await bounded(kv.get(fits))).value, b"v1")
        rev = await bounded(kv.update(fits, b"v2", rev))
        self.assertEqual([e.value for e in await bounded(kv.history(fits))], [b"v1", b"v2"])
        w = await bounded(kv.watch(fits))
        self.addCleanup(w.stop)
        entry = await bounded(w.next_update(timeout=5))
        self.assertEqual((entry.key, entry.value) if entry else None, (fits, b"v2"))
        await bounded(kv.delete(fits))
        self.assertEqual(self.errors, [])

    async def test_key_room_follows_max_control_line(self) -> None:
        """A client with max_control_line=1024 refuses keys past ~950 bytes, naming
        its limit."""
        js = await self.connect(max_control_line=1024)
        kv = await bounded(js.create_key_value("SMALLLINE", storage="memory"))
        self.addCleanup(self.drop, js, "KV_SMALLLINE")
        self.assert_refused(js, {"put": lambda: kv.put("k" * 1000, b"v")},
                            "max_control_line of 1024")
        await bounded(kv.put("k" * 900, b"v"))

    async def test_object_name_too_long_leaves_no_chunks(self) -> None:
        """An object name whose encoded subject cannot fit: put (with 1 MiB of data in
        4 KiB chunks), put_writer, get_info, get, delete and update_meta refuse it,
        naming the limit, and the bucket's stream holds no message afterwards; a name
        that fits works (put, get, info, watch)."""
        js = await self.connect()
        obs = await bounded(js.create_object_store("LONGNAMES", storage="memory"))
        self.addCleanup(self.drop, js, "OBJ_LONGNAMES")
        long = "n" * 3100
        self.assert_refused(js, {
            "put": lambda: obs.put(long, b"x" * (1 << 20), chunk_size=4096),
            "put_writer": lambda: obs.put_writer(long),
            "get_info": lambda: obs.get_info(long),
            "get": lambda: obs.get(long),
            "delete": lambda: obs.delete(long),
            "update_meta": lambda: obs.update_meta(long, new_name="short"),
            "update_meta to it": lambda: obs.update_meta("short", new_name=long),
        }, "object name", "is too long for bucket 'LONGNAMES'", "max_control_line of 4096")
        info = await bounded(js.stream_info("OBJ_LONGNAMES"))
        self.assertEqual(info.state.messages, 0)
        fits = "n" * 2900
        await bounded(obs.put(fits, b"x" * 10_000, chunk_size=4096))
        self.assertEqual(await bounded(obs.get(fits)), b"x" * 10_000)
        self.assertEqual((await bounded(obs.get_info(fits))).size, 10_000)
        w = await bounded(obs.watch())
        self.addCleanup(w.stop)
        got = await bounded(w.next_update(timeout=5))
        self.assertEqual(got.name if got else None, fits)
        self.assertEqual(self.errors, [])

    async def test_names_past_255_bytes(self) -> None:
        """Stream, consumer and bucket names over 255 bytes (the server's limit; a
        bucket's stream adds KV_/OBJ_) are refused naming the limit, nothing sent:
        they used to go to the server (an API error, or a control line too long)."""
        js = await self.connect()
        long = "S" * 256
        self.assert_refused(js, {
            "stream_info": lambda: js.stream_info(long),
            "add_stream": lambda: js.add_stream(name=long, subjects=["long.>"]),
            "delete_stream": lambda: js.delete_stream("S" * 5000),
            "consumer_info": lambda: js.consumer_info("S", long),
            "add_consumer": lambda: js.add_consumer("S", durable_name="c" * 300),
            "pull_consumer": lambda: js.pull_consumer("S", "c" * 5000),
            "ordered_consumer": lambda: js.ordered_consumer(long),
            "unicode stream": lambda: js.stream_info("é" * 128),  # 256 bytes
        }, "255")
        self.assert_refused(js, {
            "create_key_value": lambda: js.create_key_value("b" * 253),
            "key_value": lambda: js.key_value("b" * 253),
            "create_object_store": lambda: js.create_object_store("b" * 252),
            "object_store": lambda: js.object_store("b" * 252),
        }, "at most 25")
        self.assertEqual(
            (await bounded(js.add_stream(name="S" * 255, subjects=["ok255.>"],
                                         storage="memory"))).config.name,
            "S" * 255,
        )
        await bounded(js.delete_stream("S" * 255))
