"""``txnats kv`` and ``txnats obj``, run as a user runs them (in this process, on the
test's reactor) against a real ``nats-server`` with JetStream: every verb, its
``--json`` output parsed, and the errors users cause as one line and a non-zero exit.
"""

from __future__ import annotations

import os

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import TestCase

import txnats
from tests.support.waits import WAIT, bounded, reactor, sleep
from tests.test_cli_jetstream import JetStreamCLI, Ran, scratch


class KeyValueCommandTests(JetStreamCLI, TestCase):
    """``txnats kv add|info|ls|keys|put|get|del|purge|history|watch``."""

    async def test_add_info_ls(self) -> None:
        """add makes the bucket the flags say; info shows it (--json the stream's
        JSON); ls lists the buckets (--json their names), ls BUCKET its keys."""
        ran = await self.ok("kv", "add", "KADD", "--history", "5", "--ttl", "1h",
                            "--max-value-size", "1KiB", "--description", "settings")
        self.assertIn("History Kept: 5", ran.out)
        cfg = (await self.ok("kv", "info", "KADD", "--json")).json()["config"]
        self.assertEqual((cfg["name"], cfg["max_msgs_per_subject"], cfg["max_age"],
                          cfg["max_msg_size"], cfg["description"]),
                         ("KV_KADD", 5, 3600 * 10**9, 1024, "settings"))
        self.assertIn("KADD", (await self.ok("kv", "ls", "--json")).json())
        self.assertRegex((await self.ok("kv", "ls")).out, r"KADD\s+settings")
        await self.ok("kv", "put", "KADD", "k1", "v")
        self.assertEqual((await self.ok("kv", "ls", "KADD", "--json")).json(), ["k1"])
        self.assert_one_line_error(await self.cli("kv", "info", "NOPE"), 1,
                                   "kv info:", "no key-value bucket 'NOPE'")
        self.assert_one_line_error(await self.cli("kv", "add", "K", "--history", "0"), 2,
                                   "must be at least 1")

    async def test_put_get(self) -> None:
        """put stores a value (from the argument or stdin) and says its revision
        (--json too); get prints the latest, --raw the bytes alone, --revision an
        older one, --json the entry; a missing key is one line, status 1."""
        await self.ok("kv", "add", "KPUT", "--history", "3")
        self.assertIn("revision 1", (await self.ok("kv", "put", "KPUT", "db.url", "one")).err)
        ran = await self.ok("kv", "put", "KPUT", "db.url", "--json", stdin=b"two\x00bytes")
        self.assertEqual(ran.json(), {"bucket": "KPUT", "key": "db.url", "revision": 2})
        self.assertEqual((await self.ok("kv", "get", "KPUT", "db.url", "--raw")).raw,
                         b"two\x00bytes")
        ran = await self.ok("kv", "get", "KPUT", "db.url")
        self.assertIn("KPUT > db.url revision: 2", ran.out)
        entry = (await self.ok("kv", "get", "KPUT", "db.url", "--revision", "1",
                               "--json")).json()
        self.assertEqual((entry["revision"], entry["value"], entry["operation"]),
                         (1, "one", "PUT"))
        entry = (await self.ok("kv", "get", "KPUT", "db.url", "--json")).json()
        self.assertEqual(entry["value_encoding"], "base64")
        self.assert_one_line_error(await self.cli("kv", "get", "KPUT", "nope"), 1,
                                   "kv get:", "'nope' not found")
        self.assert_one_line_error(await self.cli("kv", "put", "KPUT", "bad key", "x"), 1,
                                   "kv put:")

    async def test_keys_del_purge_history(self) -> None:
        """keys lists the keys with a value (matching a filter); del marks a key
        deleted (kept in history), purge drops its history; both need --force off a
        terminal; del without a key removes the bucket."""
        await self.ok("kv", "add", "KDEL", "--history", "5")
        for key, value in (("a.x", "1"), ("a.x", "2"), ("a.y", "3"), ("b", "4")):
            await self.ok("kv", "put", "KDEL", key, value)
        self.assertEqual(sorted((await self.ok("kv", "keys", "KDEL", "--json")).json()),
                         ["a.x", "a.y", "b"])
        self.assertEqual((await self.ok("kv", "keys", "KDEL", "a.*")).out.split(),
                         ["a.x", "a.y"])
        self.assert_one_line_error(await self.cli("kv", "del", "KDEL", "a.y"), 1, "--force")
        await self.ok("kv", "del", "KDEL", "a.y", "-f")
        history = (await self.ok("kv", "history", "KDEL", "a.y", "--json")).json()
        self.assertEqual([e["operation"] for e in history], ["PUT", "DEL"])
        self.assertEqual(sorted((await self.ok("kv", "keys", "KDEL", "--json")).json()),
                         ["a.x", "b"])
        ran = await self.ok("kv", "history", "KDEL", "a.x")
        self.assertRegex(ran.out, r"a\.x\s+1\s+PUT")
        self.assertRegex(ran.out, r"a\.x\s+2\s+PUT")
        await self.ok("kv", "purge", "KDEL", "a.x", "-f")
        history = (await self.ok("kv", "history", "KDEL", "a.x", "--json")).json()
        self.assertEqual([e["operation"] for e in history], ["PURGE"])
        await self.ok("kv", "del", "KDEL", "-f")
        self.assert_one_line_error(await self.cli("kv", "keys", "KDEL"), 1, "no key-value")

    async def test_watch(self) -> None:
        """watch prints each key's latest value, then changes as they come, until
        --count entries; --json prints a line per entry; --updates only changes."""
        await self.ok("kv", "add", "KWATCH")
        await self.ok("kv", "put", "KWATCH", "k", "old")
        ran = await self.ok("kv", "watch", "KWATCH", "--count", "1", "--json")
        (entry,) = ran.json_lines()
        self.assertEqual((entry["key"], entry["value"]), ("k", "old"))
        watching: Deferred[Ran] = ensureDeferred(
            self.cli("kv", "watch", "KWATCH", "--updates", "--count", "2")
        )
        # While it runs (it has stdout), the changes are made through the library.
        nc = await txnats.connect(reactor, self.url)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        for _ in range(int(WAIT / 0.02)):  # the watcher's consumer exists: it is watching
            if (await js.stream_info("KV_KWATCH")).state.consumer_count:
                break
            await sleep(0.02)
        kv = await js.key_value("KWATCH")
        await kv.put("k", b"new")
        await kv.delete("k")
        ran = await bounded(watching, WAIT, "the watch to end")
        self.assertEqual(ran.code, 0, ran.err)
        lines = ran.out.splitlines()
        self.assertIn("PUT KWATCH > k: new", lines[0])
        self.assertIn("DEL KWATCH > k", lines[1])


class ObjectStoreCommandTests(JetStreamCLI, TestCase):
    """``txnats obj add|ls|put|get|rm|info|watch``."""

    def file(self, name: str, data: bytes) -> str:
        path = os.path.join(scratch(self), name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    async def test_put_get_info_ls(self) -> None:
        """put stores a file under its name (or --name, from stdin); replacing one
        needs --force; get writes it back (to a file, or '-' for stdout) with the
        same bytes; info and ls show it, --json parsed."""
        await self.ok("obj", "add", "OPUT", "--description", "files")
        data = os.urandom(300_000)
        path = self.file("blob.bin", data)
        ran = await self.ok("obj", "put", "OPUT", path, "-H", "X-Kind:blob", "--json")
        put = ran.json()
        self.assertEqual((put["name"], put["size"], put["headers"]),
                         ("blob.bin", 300_000, {"X-Kind": ["blob"]}))
        self.assert_one_line_error(await self.cli("obj", "put", "OPUT", path), 1,
                                   "Replace object OPUT > blob.bin", "--force")
        await self.ok("obj", "put", "OPUT", path, "-f", "--chunk-size", "64KiB",
                      "-H", "X-Kind:again")
        await self.ok("obj", "put", "OPUT", "--name", "note.txt", stdin=b"hello")
        info = (await self.ok("obj", "info", "OPUT", "blob.bin", "--json")).json()
        self.assertEqual((info["size"], info["headers"]), (300_000, {"X-Kind": ["again"]}))
        self.assertEqual(info["chunks"], 5)  # 64 KiB chunks
        listed = (await self.ok("obj", "ls", "OPUT", "--json")).json()
        self.assertEqual([o["name"] for o in listed], ["blob.bin", "note.txt"])
        self.assertRegex((await self.ok("obj", "ls")).out, r"OPUT\s+files")
        self.assertIn("OPUT", (await self.ok("obj", "ls", "-n")).out.split())
        self.assertIn("Bucket Name: OPUT", (await self.ok("obj", "info", "OPUT")).out)
        target = scratch(self)
        out = os.path.join(target, "copy.bin")
        await self.ok("obj", "get", "OPUT", "blob.bin", "-O", out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(os.listdir(target), ["copy.bin"])  # no part file left
        self.assertEqual((await self.ok("obj", "get", "OPUT", "note.txt", "-O", "-")).raw,
                         b"hello")
        ran = await self.cli("obj", "get", "OPUT", "note.txt", "-O", out)
        self.assert_one_line_error(ran, 1, "Replace file", "--force")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)  # left as it was
        self.assert_one_line_error(await self.cli("obj", "get", "OPUT", "gone", "-O", out),
                                   1, "obj get:", "no object 'gone' in 'OPUT'")
        self.assert_one_line_error(await self.cli("obj", "put", "OPUT"), 2, "--name")

    async def test_rm_and_watch(self) -> None:
        """watch prints each object and then changes until --count; rm removes an
        object (asking unless --force), and without a name the whole store."""
        await self.ok("obj", "add", "ORM")
        await self.ok("obj", "put", "ORM", self.file("a.txt", b"aaa"))
        ran = await self.ok("obj", "watch", "ORM", "--count", "1", "--json")
        (row,) = ran.json_lines()
        self.assertEqual((row["name"], row["size"]), ("a.txt", 3))
        self.assert_one_line_error(await self.cli("obj", "rm", "ORM", "a.txt"), 1, "--force")
        await self.ok("obj", "rm", "ORM", "a.txt", "-f")
        self.assertEqual((await self.ok("obj", "ls", "ORM", "--json")).json(), [])
        ran = await self.ok("obj", "watch", "ORM", "--count", "1")
        self.assertIn("DEL ORM > a.txt", ran.out)
        await self.ok("obj", "rm", "ORM", "-f")
        self.assert_one_line_error(await self.cli("obj", "info", "ORM"), 1,
                                   "no object store 'ORM'")
