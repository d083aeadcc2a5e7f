"""The JetStream key-value store (txnats/jetstream/kv.py, ADR-8), against a real server,
and with nats-py (in a subprocess, tests/kv_interop_peer.py) on the same bucket."""

from __future__ import annotations

import base64
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from tests.kv_interop_peer import NATSPY_VALUE
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor
from txnats.errors import (
    APIError,
    BucketNotFoundError,
    InvalidArgumentError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValueError,
    StreamNameInUseError,
    SubscriptionClosedError,
    TimeoutError,
    WrongLastSequenceError,
)
from txnats.jetstream import JetStreamContext, StreamConfig, StreamInfo
from txnats.jetstream.kv import (
    Entry,
    KeyValue,
    KeyWatcher,
    bucket_stream_config,
    check_key_pattern,
)

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "kv_interop_peer.py"

BAD_BUCKETS = ["", "a.b", "a b", "a*", "a>", "a/b", "bück", None, 7]
BAD_KEYS = ["", ".a", "a.", "a..b", "a b", "a*", "a.>", ">", "*", "kéy", "a\tb", None, 5]
BAD_PATTERNS = ["", ".a", "a.", "a..b", "a.>.b", "a*", ">.a", "a b", None]


class NoIO:
    """A client or JetStream context that fails the test when anything is asked of it."""

    def __init__(self, case: SynchronousTestCase) -> None:
        self._case = case

    def __getattr__(self, name: str) -> Any:
        self._case.fail(f"I/O attempted: .{name}")


class ValidationTests(SynchronousTestCase):
    """Names, keys and configurations are checked before any I/O."""

    def setUp(self) -> None:
        self.js: Any = NoIO(self)
        self.kv = KeyValue(self.js, "b", StreamInfo(StreamConfig("KV_b", allow_direct=True)))

    def test_bad_bucket_names_fail_before_io(self) -> None:
        """Bucket names outside [a-zA-Z0-9_-]+ fail at once, through the context too."""
        js = JetStreamContext(NoIO(self))  # type: ignore[arg-type]
        for name in BAD_BUCKETS:
            for d in (
                KeyValue.bind(self.js, name),  # type: ignore[arg-type]
                KeyValue.create_bucket(self.js, name),  # type: ignore[arg-type]
                js.key_value(name),  # type: ignore[arg-type]
                js.create_key_value(name),  # type: ignore[arg-type]
            ):
                self.failureResultOf(d, InvalidArgumentError)
        for name in ("ok", "A-b_9", "-_-"):
            self.assertEqual(bucket_stream_config(name)["name"], f"KV_{name}")

    def test_bad_bucket_config_fails_before_io(self) -> None:
        for config in (
            {"history": 0}, {"history": 65}, {"ttl": -1}, {"storage": "disk"},
            {"replicas": 0},
        ):
            self.failureResultOf(
                KeyValue.create_bucket(self.js, "b", **config),  # type: ignore[arg-type]
                InvalidArgumentError,
            )

    def test_bad_keys_fail_before_io(self) -> None:
        """Keys outside ADR-8's grammar (no wildcards, no empty tokens) fail at once."""
        kv = self.kv
        for key in BAD_KEYS:
            for d in (
                kv.put(key, b"v"), kv.get(key), kv.get(key, 3), kv.create(key, b"v"),  # type: ignore[arg-type]
                kv.update(key, b"v", 1), kv.delete(key), kv.purge(key),  # type: ignore[arg-type]
            ):
                self.failureResultOf(d, InvalidArgumentError)
        for pattern in BAD_PATTERNS:
            for d in (kv.watch(pattern), kv.keys(pattern), kv.history(pattern)):  # type: ignore[arg-type]
                self.failureResultOf(d, InvalidArgumentError)
        self.failureResultOf(kv.watch([]), InvalidArgumentError)
        self.failureResultOf(kv.keys(["a.*", "b..c"]), InvalidArgumentError)
        for pattern in (">", "*", "a.*.c", "a.>", "*.b.>", "a-b/c=d_e.f"):
            self.assertEqual(check_key_pattern(pattern), pattern)

    def test_ttl_config_mapping(self) -> None:
        """ttl -> max_age in ns and a duplicate window of min(ttl, 2 min); the fixed
        ADR-8 settings; the optional ones only when given."""
        plain = bucket_stream_config("b")
        self.assertEqual(plain["subjects"], ["$KV.b.>"])
        self.assertEqual(plain["max_msgs_per_subject"], 1)
        self.assertEqual(plain["max_age"], 0)
        self.assertEqual(plain["duplicate_window"], 120 * 10**9)
        self.assertEqual((plain["max_bytes"], plain["max_msg_size"]), (-1, -1))
        self.assertEqual(plain["discard"], "new")
        self.assertTrue(plain["allow_rollup_hdrs"] and plain["deny_delete"])
        self.assertTrue(plain["allow_direct"])
        self.assertNotIn("compression", plain)
        self.assertNotIn("description", plain)
        short = bucket_stream_config("b", ttl=0.5)
        self.assertEqual((short["max_age"], short["duplicate_window"]), (5 * 10**8, 5 * 10**8))
        long = bucket_stream_config(
            "b", ttl=600, history=64, max_value_size=10, max_bytes=1000, storage="memory",
            replicas=3, description="d", compression=True,
        )
        self.assertEqual(long["max_age"], 600 * 10**9)
        self.assertEqual(long["duplicate_window"], 120 * 10**9)
        self.assertEqual(long["max_msgs_per_subject"], 64)
        self.assertEqual((long["max_msg_size"], long["max_bytes"]), (10, 1000))
        self.assertEqual((long["storage"], long["num_replicas"]), ("memory", 3))
        self.assertEqual((long["description"], long["compression"]), ("d", "s2"))


class KVTestCase(ServerPerClass, TestCase):
    server_options = {"jetstream": True}
    timeout = 30

    async def connect(self) -> txnats.Client:
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(nc.close)
        return nc

    async def bucket(self, **config: Any) -> KeyValue:
        """A fresh bucket named after the test."""
        nc = await self.connect()
        self.js = nc.jetstream()
        kv: KeyValue = await bounded(self.js.create_key_value(self._testMethodName, **config))
        return kv

    async def watch(self, kv: KeyValue, *args: Any, **kwargs: Any) -> KeyWatcher:
        w: KeyWatcher = await bounded(kv.watch(*args, **kwargs))
        self.addCleanup(w.stop)
        return w

    async def initial(self, w: KeyWatcher) -> list[Entry]:
        """The watcher's entries up to its None marker."""
        got: list[Entry] = []
        while (e := await w.next_update(timeout=WAIT)) is not None:
            got.append(e)
        return got

    async def assert_fails(self, d: Any, cls: type[BaseException]) -> BaseException:
        try:
            await bounded(d)
        except cls as e:
            return e
        self.fail(f"did not raise {cls.__name__}")


class KeyValueTests(KVTestCase):
    async def test_put_get_revision(self) -> None:
        """put fires with the revision; get gives the latest Entry, or one by revision."""
        kv = await self.bucket(history=2)
        before = datetime.now(UTC) - timedelta(seconds=5)
        r1 = await bounded(kv.put("a.b", b"one"))
        r2 = await bounded(kv.put("a.b", b"two"))
        r3 = await bounded(kv.put("other", b""))
        self.assertEqual((r1 + 1, r2 + 1), (r2, r3))
        e = await bounded(kv.get("a.b"))
        self.assertEqual(
            (e.bucket, e.key, e.value, e.revision, e.delta, e.operation),
            (kv.bucket, "a.b", b"two", r2, 0, "PUT"),
        )
        self.assertIsNotNone(e.created)
        assert e.created is not None
        self.assertTrue(before < e.created < datetime.now(UTC) + timedelta(seconds=5))
        old = await bounded(kv.get("a.b", r1))
        self.assertEqual((old.value, old.revision), (b"one", r1))
        self.assertEqual((await bounded(kv.get("other"))).value, b"")

    async def test_get_missing_key_or_revision(self) -> None:
        """A key never set, or a revision of another key, is KeyNotFoundError (not
        KeyDeletedError)."""
        kv = await self.bucket()
        r = await bounded(kv.put("a", b"1"))
        for d in (kv.get("never"), kv.get("b", r), kv.get("a", r + 100)):
            e = await self.assert_fails(d, KeyNotFoundError)
            self.assertNotIsInstance(e, KeyDeletedError)

    async def test_history_limit(self) -> None:
        """The bucket keeps ``history`` values per key, the oldest go."""
        kv = await self.bucket(history=3)
        revs = [await bounded(kv.put("k", b"v%d" % i)) for i in range(5)]
        hist = await bounded(kv.history("k"))
        self.assertEqual([h.value for h in hist], [b"v2", b"v3", b"v4"])
        self.assertEqual([h.revision for h in hist], revs[2:])
        self.assertEqual([h.delta for h in hist], [2, 1, 0])
        await self.assert_fails(kv.get("k", revs[0]), KeyNotFoundError)
        status = await bounded(kv.status())
        self.assertEqual((status.values, status.history), (3, 3))

    async def test_create_conflict_and_create_after_delete(self) -> None:
        """create fails with KeyExistsError on a key with a value, and succeeds on a
        deleted or purged one."""
        kv = await self.bucket(history=5)
        r1 = await bounded(kv.create("k", b"first"))
        e = await self.assert_fails(kv.create("k", b"again"), KeyExistsError)
        self.assertIsInstance(e.__cause__, WrongLastSequenceError)
        self.assertEqual((await bounded(kv.get("k"))).value, b"first")
        await bounded(kv.delete("k"))
        r2 = await bounded(kv.create("k", b"after delete"))
        self.assertGreater(r2, r1)
        self.assertEqual((await bounded(kv.get("k"))).value, b"after delete")
        await bounded(kv.purge("k"))
        r3 = await bounded(kv.create("k", b"after purge"))
        self.assertEqual((await bounded(kv.get("k"))).revision, r3)

    async def test_update_with_wrong_revision(self) -> None:
        """update succeeds with the latest revision; a stale one is KeyExistsError
        caused by the server's WrongLastSequenceError (nats.go: ErrKeyExists)."""
        kv = await self.bucket()
        r0 = await bounded(kv.update("k", b"v0", 0))  # 0: only if the key has no message
        r1 = await bounded(kv.update("k", b"v1", r0))
        e = await self.assert_fails(kv.update("k", b"stale", r0), KeyExistsError)
        self.assertIsInstance(e.__cause__, WrongLastSequenceError)
        await self.assert_fails(kv.update("k", b"stale", 0), KeyExistsError)
        got = await bounded(kv.get("k"))
        self.assertEqual((got.value, got.revision), (b"v1", r1))

    async def test_delete_keeps_history_purge_drops_it(self) -> None:
        """After delete or purge, get raises KeyDeletedError (a KeyNotFoundError) with
        the marker's revision; delete keeps the history, purge leaves only its marker."""
        kv = await self.bucket(history=10)
        await bounded(kv.put("k", b"1"))
        await bounded(kv.put("k", b"2"))
        rdel = await bounded(kv.delete("k"))
        e = await self.assert_fails(kv.get("k"), KeyDeletedError)
        self.assertIsInstance(e, KeyNotFoundError)
        self.assertEqual(e.revision, rdel)  # type: ignore[attr-defined]
        hist = await bounded(kv.history("k"))
        self.assertEqual(
            [(h.value, h.operation) for h in hist], [(b"1", "PUT"), (b"2", "PUT"), (b"", "DEL")]
        )
        await bounded(kv.put("k", b"3"))
        rpurge = await bounded(kv.purge("k"))
        e = await self.assert_fails(kv.get("k"), KeyDeletedError)
        self.assertEqual(e.revision, rpurge)  # type: ignore[attr-defined]
        hist = await bounded(kv.history("k"))
        self.assertEqual([(h.revision, h.operation) for h in hist], [(rpurge, "PURGE")])
        await self.assert_fails(kv.get("k", rdel), KeyNotFoundError)  # rolled up
        self.assertEqual((await bounded(kv.status())).values, 1)

    async def test_delete_and_purge_with_last(self) -> None:
        """delete/purge with ``last`` only act if it is the key's latest revision."""
        kv = await self.bucket()
        r = await bounded(kv.put("k", b"v"))
        await self.assert_fails(kv.delete("k", last=r - 1), KeyExistsError)
        await self.assert_fails(kv.purge("k", last=r + 1), KeyExistsError)
        self.assertEqual((await bounded(kv.get("k"))).value, b"v")
        rdel = await bounded(kv.delete("k", last=r))
        e = await self.assert_fails(kv.get("k"), KeyDeletedError)
        self.assertEqual(e.revision, rdel)  # type: ignore[attr-defined]

    async def test_keys_exclude_deleted(self) -> None:
        """keys() lists keys whose latest entry is a value, once each; [] if none;
        filtered by one pattern or several."""
        kv = await self.bucket(history=3)
        self.assertEqual(await bounded(kv.keys()), [])
        for key in ("a.1", "a.2", "b.1", "c", "gone", "purged"):
            await bounded(kv.put(key, b"x"))
        await bounded(kv.put("a.1", b"y"))  # two values, one key
        await bounded(kv.delete("gone"))
        await bounded(kv.purge("purged"))
        self.assertEqual(sorted(await bounded(kv.keys())), ["a.1", "a.2", "b.1", "c"])
        self.assertEqual(sorted(await bounded(kv.keys("a.*"))), ["a.1", "a.2"])
        self.assertEqual(sorted(await bounded(kv.keys(["b.>", "c"]))), ["b.1", "c"])
        self.assertEqual(await bounded(kv.keys("nothing.>")), [])

    async def test_history_order_and_missing_key(self) -> None:
        """history() is oldest first with deltas to the latest; a key without any entry
        is KeyNotFoundError."""
        kv = await self.bucket(history=10)
        revs = []
        for i in range(4):
            revs.append(await bounded(kv.put("k", b"%d" % i)))
            await bounded(kv.put("noise", b"n"))
        hist = await bounded(kv.history("k"))
        self.assertEqual([h.revision for h in hist], revs)
        self.assertEqual([h.value for h in hist], [b"0", b"1", b"2", b"3"])
        self.assertEqual([h.delta for h in hist], [3, 2, 1, 0])
        self.assertEqual({h.key for h in hist}, {"k"})
        await self.assert_fails(kv.history("never"), KeyNotFoundError)

    async def test_ttl_config_on_server(self) -> None:
        """The configuration reaches the stream as ADR-8 says; status() reads it back;
        max_value_size is enforced by the server."""
        kv = await self.bucket(
            ttl=60, history=5, max_value_size=64, max_bytes=1 << 20, storage="memory",
            description="test bucket",
        )
        info = await bounded(self.js.stream_info(kv.stream))
        cfg = info.config
        self.assertEqual(cfg.name, f"KV_{self._testMethodName}")
        self.assertEqual(cfg.subjects, [f"$KV.{self._testMethodName}.>"])
        self.assertEqual((cfg.max_age, cfg.duplicate_window), (60.0, 60.0))
        self.assertEqual(cfg.max_msgs_per_subject, 5)
        self.assertEqual((cfg.max_msg_size, cfg.max_bytes), (64, 1 << 20))
        self.assertEqual((cfg.storage, cfg.discard), ("memory", "new"))
        self.assertTrue(cfg.allow_rollup_hdrs and cfg.deny_delete and cfg.allow_direct)
        self.assertEqual(cfg.description, "test bucket")
        status = await bounded(kv.status())
        self.assertEqual(
            (status.bucket, status.ttl, status.history, status.values, status.is_compressed),
            (kv.bucket, 60.0, 5, 0, False),
        )
        await self.assert_fails(kv.put("big", b"x" * 65), APIError)
        await bounded(kv.put("small", b"x" * 64))
        self.assertGreater((await bounded(kv.status())).bytes, 64)

    async def test_bucket_not_found(self) -> None:
        """Binding a bucket that does not exist (or no longer does) is BucketNotFoundError."""
        kv = await self.bucket()
        await self.assert_fails(self.js.key_value("no_such_bucket"), BucketNotFoundError)
        bound = await bounded(self.js.key_value(kv.bucket))
        self.assertEqual((bound.bucket, bound.stream), (kv.bucket, kv.stream))
        self.assertTrue(await bounded(kv.destroy()))
        await self.assert_fails(self.js.key_value(kv.bucket), BucketNotFoundError)
        await self.assert_fails(kv.status(), BucketNotFoundError)
        await self.assert_fails(kv.watch(), BucketNotFoundError)
        await self.assert_fails(kv.keys(), BucketNotFoundError)

    async def test_bucket_without_direct_get(self) -> None:
        """A bucket whose stream does not allow direct gets is read through the stream
        API, with the same entries; a KV_ stream that is no bucket does not bind."""
        nc = await self.connect()
        js = nc.jetstream()
        name = self._testMethodName
        cfg = bucket_stream_config(name, history=2)
        cfg["allow_direct"] = False
        await bounded(js.add_stream(StreamConfig.from_json(cfg)))
        kv = await bounded(js.key_value(name))
        r1 = await bounded(kv.put("k", b"one"))
        await bounded(kv.put("k", b"two"))
        e = await bounded(kv.get("k"))
        self.assertEqual((e.value, e.operation), (b"two", "PUT"))
        self.assertIsNotNone(e.created)
        self.assertEqual((await bounded(kv.get("k", r1))).value, b"one")
        rdel = await bounded(kv.delete("k"))
        err = await self.assert_fails(kv.get("k"), KeyDeletedError)
        self.assertEqual(err.revision, rdel)  # type: ignore[attr-defined]
        await self.assert_fails(kv.get("never"), KeyNotFoundError)
        await bounded(js.add_stream(name=f"KV_{name}_plain", subjects=[f"plain.{name}"]))
        e2 = await self.assert_fails(js.key_value(f"{name}_plain"), KeyValueError)
        self.assertIs(type(e2), KeyValueError)

    async def test_create_existing_bucket(self) -> None:
        """Creating a bucket again with the same configuration binds to it; with
        another, it fails with StreamNameInUseError."""
        kv = await self.bucket(history=2, ttl=30)
        await bounded(kv.put("k", b"v"))
        again = await bounded(self.js.create_key_value(kv.bucket, history=2, ttl=30))
        self.assertEqual((await bounded(again.get("k"))).value, b"v")
        await self.assert_fails(
            self.js.create_key_value(kv.bucket, history=3), StreamNameInUseError
        )

    async def test_purge_deletes(self) -> None:
        """purge_deletes() removes markers older than the limit with their history;
        younger markers stay, their older history goes."""
        kv = await self.bucket(history=5)
        for key in ("a", "b"):
            await bounded(kv.put(key, b"1"))
            await bounded(kv.put(key, b"2"))
        await bounded(kv.delete("a"))
        await bounded(kv.purge("b"))
        await bounded(kv.put("c", b"kept"))
        self.assertEqual(await bounded(kv.purge_deletes()), 2)  # markers are young: kept
        self.assertEqual([h.operation for h in await bounded(kv.history("a"))], ["DEL"])
        self.assertEqual([h.operation for h in await bounded(kv.history("b"))], ["PURGE"])
        self.assertEqual(await bounded(kv.purge_deletes(older_than=0)), 2)
        await self.assert_fails(kv.history("a"), KeyNotFoundError)
        await self.assert_fails(kv.history("b"), KeyNotFoundError)
        self.assertEqual((await bounded(kv.get("c"))).value, b"kept")
        self.assertEqual((await bounded(kv.status())).values, 1)


class WatchTests(KVTestCase):
    async def test_watch_initial_values_marker_live_updates(self) -> None:
        """A watch gives the latest entry per key (markers too), None once, then each
        change as it happens, in order."""
        kv = await self.bucket(history=5)
        await bounded(kv.put("a", b"old"))
        ra = await bounded(kv.put("a", b"1"))
        rb = await bounded(kv.put("b", b"2"))
        rd = await bounded(kv.delete("d"))
        w = await self.watch(kv)
        got = await self.initial(w)
        self.assertEqual(
            [(e.key, e.value, e.revision, e.operation) for e in got],
            [("a", b"1", ra, "PUT"), ("b", b"2", rb, "PUT"), ("d", b"", rd, "DEL")],
        )
        self.assertEqual(got[-1].delta, 0)
        self.assertTrue(all(e.created is not None and e.bucket == kv.bucket for e in got))
        rc = await bounded(kv.put("c", b"3"))
        rx = await bounded(kv.delete("a"))
        ry = await bounded(kv.purge("b"))
        live = [await w.next_update(timeout=WAIT) for _ in range(3)]
        self.assertEqual(
            [(e.key, e.revision, e.operation) for e in live if e is not None],
            [("c", rc, "PUT"), ("a", rx, "DEL"), ("b", ry, "PURGE")],
        )
        with self.assertRaises(TimeoutError):  # the marker came once
            await w.next_update(timeout=0.2)

    async def test_watch_async_for_and_stop(self) -> None:
        """``async for`` yields entries and the marker; stop() ends the loop, and
        next_update then fails with SubscriptionClosedError."""
        kv = await self.bucket()
        await bounded(kv.put("k", b"v"))
        w = await self.watch(kv)
        seen: list[Entry | None] = []

        async def loop() -> None:
            async for e in w:
                seen.append(e)
                if e is None:
                    await bounded(kv.put("k", b"live"))
                elif e.value == b"live":
                    w.stop()

        await bounded(Deferred.fromCoroutine(loop()))
        self.assertEqual(
            [None if e is None else e.value for e in seen], [b"v", None, b"live"]
        )
        self.assertTrue(w.stopped)
        await self.assert_fails(w.next_update(), SubscriptionClosedError)

    async def test_watch_ignore_deletes_and_pattern(self) -> None:
        """ignore_deletes leaves markers out (initial and live); the pattern limits keys."""
        kv = await self.bucket()
        await bounded(kv.put("x.1", b"a"))
        await bounded(kv.put("x.2", b"b"))
        await bounded(kv.delete("x.2"))
        await bounded(kv.put("y.1", b"other"))
        w = await self.watch(kv, "x.*", ignore_deletes=True)
        self.assertEqual([e.key for e in await self.initial(w)], ["x.1"])
        await bounded(kv.delete("x.1"))
        await bounded(kv.put("y.2", b"not watched"))
        await bounded(kv.put("x.3", b"c"))
        e = await w.next_update(timeout=WAIT)
        assert e is not None
        self.assertEqual((e.key, e.value, e.operation), ("x.3", b"c", "PUT"))

    async def test_watch_empty_bucket_and_updates_only(self) -> None:
        """With nothing to deliver the marker comes first; updates_only gives the marker
        at once and then only changes."""
        kv = await self.bucket()
        w = await self.watch(kv)
        self.assertIsNone(await w.next_update(timeout=WAIT))
        await bounded(kv.put("k", b"v1"))
        w2 = await self.watch(kv, updates_only=True)
        self.assertIsNone(await w2.next_update(timeout=WAIT))
        await bounded(kv.put("k", b"v2"))
        for watcher, values in ((w, [b"v1", b"v2"]), (w2, [b"v2"])):
            got = [await watcher.next_update(timeout=WAIT) for _ in values]
            self.assertEqual([e.value for e in got if e is not None], values)

    async def test_watch_include_history_meta_only(self) -> None:
        """include_history gives every kept value oldest first; meta_only leaves values out."""
        kv = await self.bucket(history=4)
        for i in range(3):
            await bounded(kv.put("k", b"value %d" % i))
        w = await self.watch(kv, "k", include_history=True)
        got = await self.initial(w)
        self.assertEqual([e.value for e in got], [b"value 0", b"value 1", b"value 2"])
        self.assertEqual([e.delta for e in got], [2, 1, 0])
        w2 = await self.watch(kv, include_history=True, meta_only=True)
        meta = await self.initial(w2)
        self.assertEqual([(e.value, e.revision) for e in meta], [(b"", e.revision) for e in got])


class InteropTests(KVTestCase):
    """nats-py and txnats read and write the same buckets."""

    async def peer(self, mode: str, bucket: str) -> list[dict[str, Any]]:
        d = getProcessOutputAndValue(
            sys.executable, [str(PEER), mode, self.server.url, bucket],
            env=dict(os.environ), path=str(ROOT), reactor=reactor,
        )
        out, err, code = await bounded(d, 20.0)
        self.assertEqual(code, 0, f"peer {mode} failed: {err.decode(errors='replace')}")
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    async def test_natspy_reads_txnats_values_and_writes_back(self) -> None:
        """nats-py gets what txnats put (value, revision, delete marker, keys, history);
        txnats gets what nats-py put and sees its delete."""
        kv = await self.bucket(history=3)
        value = bytes(range(256)) * 2 + b"\r\nMSG x 1 3\r\n"
        r0 = await bounded(kv.put("from.txnats", b"v0"))
        r1 = await bounded(kv.put("from.txnats", value))
        await bounded(kv.put("gone", b"x"))
        await bounded(kv.delete("gone"))
        out = await self.peer("exchange", kv.bucket)
        got = {k: v for line in out for k, v in line.items()}
        self.assertEqual(
            got["get"], {"key": "from.txnats", "value": base64.b64encode(value).decode(),
                         "revision": r1},
        )
        self.assertIn(got["gone"], ("KeyNotFoundError", "KeyDeletedError"))
        self.assertEqual(got["keys"], ["from.txnats"])
        self.assertEqual([h[0] for h in got["history"]], [r0, r1])
        e = await bounded(kv.get("from.natspy"))
        self.assertEqual((e.value, e.revision), (NATSPY_VALUE, got["put"]))
        await self.assert_fails(kv.get("natspy.deleted"), KeyDeletedError)
        self.assertEqual(sorted(await bounded(kv.keys())), ["from.natspy", "from.txnats"])

    async def test_txnats_binds_bucket_natspy_created(self) -> None:
        """A bucket nats-py created binds in txnats with its configuration."""
        nc = await self.connect()
        js = nc.jetstream()
        out = await self.peer("create", self._testMethodName)
        kv = await bounded(js.key_value(self._testMethodName))
        e = await bounded(kv.get("k"))
        self.assertEqual((e.value, e.revision), (b"made by nats-py", out[0]["put"]))
        status = await bounded(kv.status())
        self.assertEqual((status.history, status.ttl), (3, 30.0))
        self.assertEqual(await bounded(kv.create("k2", b"txnats")), e.revision + 1)
