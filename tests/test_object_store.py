"""The JetStream object store (ADR-20) against a real nats-server, and with nats-py."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import TestCase

import txnats
from tests.obj_interop_peer import DESCRIPTION, HEADERS, payload
from tests.support.files import temp_file, write_file
from tests.support.peers import Peer
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor
from txnats.errors import (
    APIError,
    BucketNotFoundError,
    DigestMismatchError,
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from txnats.jetstream import JetStreamContext
from txnats.jetstream.object_store import ObjectInfo, ObjectStore

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "obj_interop_peer.py"

CHUNK = 128 * 1024


def sha256_digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


class _StoreCase(ServerPerClass, TestCase):
    server_options = {"jetstream": True}

    async def store(self, **config: Any) -> tuple[txnats.Client, JetStreamContext, ObjectStore]:
        """A client, its JetStream context and a fresh bucket named after the test."""
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url, name=self._testMethodName)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        bucket = self._testMethodName[:40]
        obs = await bounded(js.create_object_store(bucket, **config))
        self.addCleanup(lambda: js.delete_object_store(bucket).addErrback(lambda _: None))
        return nc, js, obs

    async def count(self, js: JetStreamContext, obs: ObjectStore, subject: str = "") -> int:
        """Messages in the bucket's stream (on ``subject`` if given)."""
        if not subject:
            si = await bounded(js.stream_info(obs.stream))
            return si.state.messages
        si = await bounded(js.stream_info(obs.stream, subjects_filter=subject))
        return (si.state.subjects or {}).get(subject, 0)

    async def round_trip(self, data: bytes) -> ObjectInfo:
        _, _, obs = await self.store()
        info = await bounded(obs.put("thing", data))
        got = await bounded(obs.get("thing"))
        self.assertEqual(len(got), len(data))
        self.assertTrue(got == data, "the bytes differ")
        self.assertEqual(info.size, len(data))
        return info


class RoundTripTests(_StoreCase):
    """put then get gives back the very bytes, in the number of chunks expected."""

    async def test_empty_object(self) -> None:
        info = await self.round_trip(b"")
        self.assertEqual(info.chunks, 0)

    async def test_one_byte(self) -> None:
        info = await self.round_trip(b"\x00")
        self.assertEqual(info.chunks, 1)

    async def test_exactly_one_chunk(self) -> None:
        info = await self.round_trip(os.urandom(CHUNK))
        self.assertEqual(info.chunks, 1)

    async def test_one_chunk_plus_one_byte(self) -> None:
        info = await self.round_trip(os.urandom(CHUNK + 1))
        self.assertEqual(info.chunks, 2)

    async def test_a_few_mib_of_random_bytes(self) -> None:
        data = random.Random(3).randbytes(3 * 1024 * 1024 + 17)
        info = await self.round_trip(data)
        self.assertEqual(info.chunks, 25)

    async def test_small_chunk_size(self) -> None:
        """chunk_size is honoured and recorded (options.max_chunk_size)."""
        _, _, obs = await self.store()
        data = os.urandom(1000)
        info = await bounded(obs.put("small", data, chunk_size=64))
        self.assertEqual((info.chunks, info.max_chunk_size), (16, 64))
        self.assertEqual(await bounded(obs.get("small")), data)

    async def test_chunk_size_capped_at_max_payload(self) -> None:
        """A chunk_size above the server's max_payload is lowered to it."""
        nc, _, obs = await self.store()
        data = os.urandom(nc.max_payload + 10)
        info = await bounded(obs.put("big-chunks", data, chunk_size=10 * nc.max_payload))
        self.assertEqual((info.max_chunk_size, info.chunks), (nc.max_payload, 2))
        self.assertEqual(await bounded(obs.get("big-chunks")), data)

    async def test_put_waits_for_a_small_outbound_buffer(self) -> None:
        """A put larger than the client's outbound buffer waits for room, chunk by chunk."""
        _, _, obs = await self.store()
        assert self.server is not None
        small = await txnats.connect(reactor, self.server.url, max_outbound_bytes=300_000)
        self.addCleanup(small.close)
        store = await bounded(small.jetstream().object_store(obs.bucket))
        data = os.urandom(3 * 1024 * 1024)
        info = await bounded(store.put("squeezed", data))
        self.assertEqual(info.chunks, 24)
        self.assertEqual(await bounded(obs.get("squeezed")), data)

    async def test_put_from_file_objects(self) -> None:
        """put reads a BytesIO and a real binary file until read() returns b''."""
        _, _, obs = await self.store()
        data = os.urandom(2 * CHUNK + 5)
        info = await bounded(obs.put("from-bytesio", io.BytesIO(data)))
        self.assertEqual((info.size, info.chunks), (len(data), 3))
        path = temp_file(self)
        write_file(os.path.dirname(path), os.path.basename(path), data)
        with open(path, "rb") as f:
            finfo = await bounded(obs.put("from-file", f))
        self.assertEqual(finfo.digest, info.digest)
        self.assertEqual(await bounded(obs.get("from-bytesio")), data)
        self.assertEqual(await bounded(obs.get("from-file")), data)

    async def test_bytearray_and_memoryview(self) -> None:
        _, _, obs = await self.store()
        await bounded(obs.put("ba", bytearray(b"abc" * 1000), chunk_size=500))
        await bounded(obs.put("mv", memoryview(b"xyz" * 1000)[1:], chunk_size=500))
        self.assertEqual(await bounded(obs.get("ba")), b"abc" * 1000)
        self.assertEqual(await bounded(obs.get("mv")), (b"xyz" * 1000)[1:])


class InfoTests(_StoreCase):
    """What an object's info says, and how it is stored."""

    async def test_digest_and_size_in_info(self) -> None:
        """The digest is SHA-256 in padded base64 URL encoding; get_info agrees with put."""
        _, _, obs = await self.store()
        data = os.urandom(300_000)
        before = datetime.now(UTC)
        info = await bounded(obs.put("obj", data))
        self.assertEqual(info.digest, sha256_digest(data))
        self.assertTrue(info.digest.endswith("="))  # 32 bytes -> 44 chars, one '='
        self.assertEqual((info.size, info.chunks, info.bucket), (300_000, 3, obs.bucket))
        got = await bounded(obs.get_info("obj"))
        self.assertEqual(got.digest, info.digest)
        self.assertEqual((got.size, got.chunks, got.nuid), (info.size, info.chunks, info.nuid))
        assert got.mtime is not None
        self.assertLess(abs(got.mtime - before), timedelta(seconds=10))

    async def test_meta_message_layout(self) -> None:
        """The meta message: its subject (padded base64 URL of the name), a rollup header
        and nats.go's JSON layout."""
        _, js, obs = await self.store()
        name = "dir/ü?>~!"  # encodes with '-' / '_' and padding
        encoded = base64.urlsafe_b64encode(name.encode()).decode()
        self.assertTrue(encoded.endswith("=") and ("-" in encoded or "_" in encoded), encoded)
        await bounded(obs.put(
            name, b"hello", description="greeting", headers={"X-A": ["1", "2"]},
            metadata={"owner": "me"},
        ))
        raw = await bounded(js.get_msg(obs.stream, last_by_subject=f"$O.{obs.bucket}.M.{encoded}"))
        assert raw.headers is not None
        self.assertEqual(raw.headers.get("Nats-Rollup"), "sub")
        obj = json.loads(raw.data)
        self.assertEqual(obj["name"], name)
        self.assertEqual(obj["bucket"], obs.bucket)
        self.assertEqual(obj["description"], "greeting")
        self.assertEqual(obj["headers"], {"X-A": ["1", "2"]})
        self.assertEqual(obj["metadata"], {"owner": "me"})
        self.assertEqual(obj["options"], {"max_chunk_size": CHUNK})
        self.assertEqual((obj["size"], obj["chunks"]), (5, 1))
        self.assertEqual(obj["digest"], sha256_digest(b"hello"))
        self.assertEqual(obj["mtime"], "0001-01-01T00:00:00Z")  # never stored
        self.assertNotIn("deleted", obj)
        chunk_subject = f"$O.{obs.bucket}.C.{obj['nuid']}"
        self.assertEqual(await self.count(js, obs, chunk_subject), 1)

    async def test_headers_metadata_description_round_trip(self) -> None:
        _, _, obs = await self.store()
        h = txnats.Headers()
        h.add("X-Multi", "a")
        h.add("X-Multi", "b")
        await bounded(obs.put("o", b"x", description="d", headers=h, metadata={"k": "v"}))
        info = await bounded(obs.get_info("o"))
        self.assertEqual(info.description, "d")
        self.assertEqual(info.headers, {"X-Multi": ["a", "b"]})
        self.assertEqual(info.metadata, {"k": "v"})

    async def test_stream_configuration(self) -> None:
        """create makes OBJ_<bucket> as ADR-20 says (its max_age the ttl in seconds)."""
        _, js, obs = await self.store(description="stuff", ttl=3600, max_bytes=10_000_000)
        cfg = (await bounded(js.stream_info(obs.stream))).config
        self.assertEqual(cfg.subjects, [f"$O.{obs.bucket}.C.>", f"$O.{obs.bucket}.M.>"])
        self.assertEqual(cfg.discard, "new")
        self.assertTrue(cfg.allow_rollup_hdrs)
        self.assertTrue(cfg.allow_direct)
        self.assertEqual(cfg.max_age, 3600.0)
        self.assertEqual(cfg.max_bytes, 10_000_000)
        self.assertEqual(cfg.description, "stuff")

    async def test_status_and_seal(self) -> None:
        """status reports the bucket; after seal it says sealed and puts are refused."""
        _, _, obs = await self.store(description="box", ttl=60, storage="memory")
        await bounded(obs.put("a", b"12345"))
        st = await bounded(obs.status())
        self.assertEqual((st.bucket, st.description, st.ttl), (obs.bucket, "box", 60.0))
        self.assertEqual((st.storage, st.replicas, st.sealed), ("memory", 1, False))
        self.assertGreater(st.size, 5)
        self.assertEqual(st.backing_store, "JetStream")
        sealed = await bounded(obs.seal())
        self.assertTrue(sealed.sealed)
        with self.assertRaises(APIError):
            await bounded(obs.put("b", b"no"))
        self.assertEqual(await bounded(obs.get("a")), b"12345")

    async def test_bind_existing_and_missing_bucket(self) -> None:
        _, js, obs = await self.store()
        await bounded(obs.put("x", b"1"))
        again = await bounded(js.object_store(obs.bucket))
        self.assertEqual(await bounded(again.get("x")), b"1")
        with self.assertRaises(BucketNotFoundError):
            await bounded(js.object_store("no_such_bucket"))
        same = await bounded(js.create_object_store(obs.bucket))  # same config: binds
        self.assertEqual(await bounded(same.get("x")), b"1")

    async def test_bucket_without_direct_get(self) -> None:
        """A bucket whose stream lacks allow_direct (older clients made such) still works."""
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        await bounded(js.add_stream(
            name="OBJ_nodirect", subjects=["$O.nodirect.C.>", "$O.nodirect.M.>"],
            allow_rollup_hdrs=True, discard="new",
        ))
        self.addCleanup(js.delete_object_store, "nodirect")
        obs = await bounded(js.object_store("nodirect"))
        await bounded(obs.put("o", b"abc"))
        self.assertEqual(await bounded(obs.get("o")), b"abc")
        # A handle that assumes Direct Get finds out and falls back to the API.
        assumed = ObjectStore(js, "nodirect", direct=True)
        self.assertEqual((await bounded(assumed.get_info("o"))).size, 3)


class LifecycleTests(_StoreCase):
    """Replacing, deleting, listing, renaming, linking."""

    async def test_replace_purges_old_chunks(self) -> None:
        """A second put of a name stores new chunks and purges the old version's."""
        _, js, obs = await self.store()
        first = await bounded(obs.put("obj", os.urandom(3 * CHUNK)))
        self.assertEqual(await self.count(js, obs), 3 + 1)
        second = await bounded(obs.put("obj", b"short"))
        self.assertNotEqual(first.nuid, second.nuid)
        self.assertEqual(await self.count(js, obs), 1 + 1)  # one chunk, one meta
        self.assertEqual(await self.count(js, obs, f"$O.{obs.bucket}.C.{first.nuid}"), 0)
        self.assertEqual(await bounded(obs.get("obj")), b"short")

    async def test_delete_then_get_is_not_found(self) -> None:
        """delete leaves a deleted marker and purges the chunks; get/get_info then fail."""
        _, js, obs = await self.store()
        await bounded(obs.put("gone", os.urandom(2 * CHUNK)))
        await bounded(obs.delete("gone"))
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get("gone"))
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get_info("gone"))
        marker = await bounded(obs.get_info("gone", show_deleted=True))
        self.assertTrue(marker.deleted)
        self.assertEqual((marker.size, marker.chunks, marker.digest), (0, 0, ""))
        self.assertEqual(await self.count(js, obs), 1)  # only the marker
        await bounded(obs.delete("gone"))  # deleting again does nothing
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.delete("never-was"))

    async def test_get_missing_object(self) -> None:
        _, _, obs = await self.store()
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get("nope"))

    async def test_list(self) -> None:
        """list: [] when empty; then every live object once (latest version), deleted
        ones only with show_deleted."""
        _, _, obs = await self.store()
        self.assertEqual(await bounded(obs.list()), [])
        await bounded(obs.put("a", b"1"))
        await bounded(obs.put("b", b"22"))
        await bounded(obs.put("b", b"333"))
        await bounded(obs.put("c", b""))
        await bounded(obs.delete("a"))
        listed = await bounded(obs.list())
        self.assertEqual(sorted((i.name, i.size) for i in listed), [("b", 3), ("c", 0)])
        self.assertTrue(all(i.mtime is not None for i in listed))
        everything = await bounded(obs.list(show_deleted=True))
        self.assertEqual(sorted(i.name for i in everything), ["a", "b", "c"])

    async def test_update_meta_renames_and_describes(self) -> None:
        _, _, obs = await self.store()
        await bounded(obs.put("old", b"data", description="before", metadata={"k": "v"}))
        await bounded(obs.put("taken", b"t"))
        with self.assertRaises(ObjectStoreError):
            await bounded(obs.update_meta("old", new_name="taken"))
        info = await bounded(obs.update_meta("old", new_name="new", description="after"))
        self.assertEqual((info.name, info.description, info.metadata), ("new", "after", {"k": "v"}))
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get_info("old"))
        self.assertEqual(await bounded(obs.get("new")), b"data")
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.update_meta("old", description="x"))

    async def test_links(self) -> None:
        """A link to an object is followed by get; a link to a bucket cannot be read."""
        _, _, obs = await self.store()
        target = await bounded(obs.put("target", b"pointed at"))
        link = await bounded(obs.add_link("alias", target))
        self.assertTrue(link.is_link)
        self.assertEqual(await bounded(obs.get("alias")), b"pointed at")
        with self.assertRaises(ObjectStoreError):
            await bounded(obs.add_link("target", target))  # names a real object
        await bounded(obs.add_bucket_link("whole", obs))
        with self.assertRaises(ObjectStoreError):
            await bounded(obs.get("whole"))


class CorruptionTests(_StoreCase):
    """What is stored must match the info: DigestMismatchError otherwise."""

    async def write_meta(self, js: JetStreamContext, obs: ObjectStore, info: ObjectInfo) -> None:
        subject = f"$O.{obs.bucket}.M.{base64.urlsafe_b64encode(info.name.encode()).decode()}"
        await bounded(js.publish(subject, info.to_json(), headers={"Nats-Rollup": "sub"}))

    async def test_wrong_chunk_is_a_digest_mismatch(self) -> None:
        """A hand-written meta for b'right' whose chunk holds b'wrong'."""
        _, js, obs = await self.store()
        info = ObjectInfo(
            name="forged", bucket=obs.bucket, nuid="FORGEDNUID", size=5, chunks=1,
            digest=sha256_digest(b"right"),
        )
        await bounded(js.publish(f"$O.{obs.bucket}.C.FORGEDNUID", b"wrong"))
        await self.write_meta(js, obs, info)
        with self.assertRaises(DigestMismatchError):
            await bounded(obs.get("forged"))

    async def test_missing_chunk_is_a_mismatch(self) -> None:
        _, js, obs = await self.store()
        info = await bounded(obs.put("holey", os.urandom(3 * CHUNK)))
        raw = await bounded(js.get_msg(obs.stream, 2))  # the second chunk
        self.assertEqual(raw.subject, f"$O.{obs.bucket}.C.{info.nuid}")
        await bounded(js.delete_msg(obs.stream, 2))
        with self.assertRaises(DigestMismatchError):
            await bounded(obs.get("holey"))

    async def test_extra_chunk_is_a_mismatch(self) -> None:
        _, js, obs = await self.store()
        info = await bounded(obs.put("padded", b"abc"))
        await bounded(js.publish(f"$O.{obs.bucket}.C.{info.nuid}", b"def"))
        with self.assertRaises(DigestMismatchError):
            await bounded(obs.get("padded"))

    async def test_meta_says_chunks_but_none_stored(self) -> None:
        _, js, obs = await self.store()
        info = ObjectInfo(
            name="empty-handed", bucket=obs.bucket, nuid="NOCHUNKS", size=5, chunks=1,
            digest=sha256_digest(b"right"),
        )
        await self.write_meta(js, obs, info)
        with self.assertRaises(DigestMismatchError):
            await bounded(obs.get("empty-handed"))

    async def test_failed_chunk_fails_put_and_purges(self) -> None:
        """A chunk the stream refuses (bucket full) fails the put; nothing stays."""
        _, js, obs = await self.store(max_bytes=4 * CHUNK)
        with self.assertRaises(APIError):
            await bounded(obs.put("too-big", os.urandom(8 * CHUNK)))
        self.assertEqual(await self.count(js, obs), 0)
        with self.assertRaises(ObjectNotFoundError):
            await bounded(obs.get_info("too-big"))


class ValidationTests(_StoreCase):
    """Bad names, buckets and arguments fail at once, before any I/O."""

    def assertFailsAtOnce(self, d: defer.Deferred[Any], exc: type[Exception]) -> None:
        self.assertTrue(d.called, "did not fail at once")
        self.failureResultOf(d, exc)

    async def test_bad_bucket_names(self) -> None:
        nc, js, obs = await self.store()
        await nc.flush(timeout=WAIT)
        before = nc.stats.out_msgs
        for bad in ("", "a.b", "a b", "a*", "a>", "ü", "$O", 7):
            self.assertFailsAtOnce(js.object_store(bad), InvalidArgumentError)  # type: ignore[arg-type]
            self.assertFailsAtOnce(js.create_object_store(bad), InvalidArgumentError)  # type: ignore[arg-type]
        self.assertFailsAtOnce(obs.add_bucket_link("l", "no.dots"), InvalidArgumentError)
        self.assertFailsAtOnce(js.create_object_store("ok", storage="tape"), InvalidArgumentError)
        self.assertFailsAtOnce(js.create_object_store("ok", ttl=-1), InvalidArgumentError)
        self.assertEqual(nc.stats.out_msgs, before)

    async def test_bad_object_names_and_arguments(self) -> None:
        nc, _, obs = await self.store()
        await nc.flush(timeout=WAIT)
        before = nc.stats.out_msgs
        for bad in ("", None, 5, "\ud800"):
            self.assertFailsAtOnce(obs.put(bad, b"x"), InvalidArgumentError)  # type: ignore[arg-type]
            self.assertFailsAtOnce(obs.get(bad), InvalidArgumentError)  # type: ignore[arg-type]
            self.assertFailsAtOnce(obs.get_info(bad), InvalidArgumentError)  # type: ignore[arg-type]
            self.assertFailsAtOnce(obs.delete(bad), InvalidArgumentError)  # type: ignore[arg-type]
        self.assertFailsAtOnce(obs.put("o", "text"), InvalidArgumentError)  # type: ignore[arg-type]
        self.assertFailsAtOnce(obs.put("o", b"x", chunk_size=0), InvalidArgumentError)
        self.assertFailsAtOnce(obs.put("o", b"x", headers={"Bad Name": "v"}), ValueError)
        self.assertFailsAtOnce(obs.put("o", b"x", metadata={"k": 1}), InvalidArgumentError)  # type: ignore[dict-item]
        self.assertFailsAtOnce(obs.update_meta("o", new_name=""), InvalidArgumentError)
        self.assertEqual(nc.stats.out_msgs, before)

    async def test_text_file_is_refused(self) -> None:
        """A file object whose read() gives str is refused (and nothing is left behind)."""
        _, js, obs = await self.store()
        with self.assertRaises(InvalidArgumentError):
            await bounded(obs.put("text", io.StringIO("words")))
        self.assertEqual(await self.count(js, obs), 0)

class ObjectInteropTests(_StoreCase):
    """nats-py 2.16 reads the objects txnats stores, and txnats reads nats-py's."""

    timeout = 60

    async def peer(self, *args: str) -> Peer:
        assert self.server is not None
        argv = [args[0], self.server.url, *args[1:]]
        peer = Peer(argv)
        transport = reactor.spawnProcess(
            peer, sys.executable, [sys.executable, str(PEER), *argv],
            env=dict(os.environ), path=str(ROOT),
        )

        def reap() -> defer.Deferred[None] | None:
            if peer.ended:
                return None
            transport.signalProcess("KILL")
            return defer.ensureDeferred(peer._wait(lambda: peer.ended, "die", WAIT))

        self.addCleanup(reap)
        return peer

    async def test_natspy_gets_txnats_object(self) -> None:
        _, _, obs = await self.store()
        data = payload(5 * CHUNK + 321, 11)
        info = await bounded(obs.put(
            "from txnats", data, description="put by txnats", headers={"X-Origin": "txnats"},
        ))
        peer = await self.peer("get", obs.bucket, "from txnats")
        (out,) = await peer.wait_exit()
        self.assertEqual(out["size"], len(data))
        self.assertEqual(out["sha256"], hashlib.sha256(data).hexdigest())
        got = out["info"]
        self.assertEqual((got["nuid"], got["chunks"], got["digest"]), (info.nuid, 6, info.digest))
        self.assertEqual(got["description"], "put by txnats")
        self.assertEqual(got["headers"], {"X-Origin": ["txnats"]})
        self.assertEqual(got["max_chunk_size"], CHUNK)

    async def test_txnats_gets_natspy_object(self) -> None:
        _, _, obs = await self.store()
        size = 3 * CHUNK + 99
        peer = await self.peer("put", obs.bucket, "from nats-py", str(size), "12")
        (out,) = await peer.wait_exit()
        data = await bounded(obs.get("from nats-py"))
        self.assertTrue(data == payload(size, 12), "the bytes differ")
        info = await bounded(obs.get_info("from nats-py"))
        self.assertEqual((info.nuid, info.size, info.chunks), (out["nuid"], size, 4))
        self.assertEqual(info.digest, sha256_digest(data))
        self.assertEqual(info.description, DESCRIPTION)
        self.assertEqual(info.headers, {k: [v] for k, v in HEADERS.items()})
