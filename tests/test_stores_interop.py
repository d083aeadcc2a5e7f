"""Per-key TTL (figure 3) and the stores read both ways with nats-py in one run
(figure 4), against a real nats-server; nats-py runs in subprocesses
(tests/kv_interop_peer.py, tests/obj_interop_peer.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

import txnats
from tests.kv_interop_peer import NATSPY_VALUE
from tests.obj_interop_peer import EXCHANGE_SIZE, payload
from tests.support.figures import figure
from tests.support.servers import ServerPerClass
from tests.support.waits import bounded, reactor, sleep
from txnats.errors import (
    InvalidArgumentError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyValueError,
    ObjectNotFoundError,
)
from txnats.jetstream import JetStreamContext
from txnats.jetstream.kv import PURGE, PUT, Entry, KeyValue, KeyWatcher

ROOT = Path(__file__).resolve().parent.parent
KV_PEER = ROOT / "tests" / "kv_interop_peer.py"
OBJ_PEER = ROOT / "tests" / "obj_interop_peer.py"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Case(ServerPerClass, TestCase):
    server_options = {"jetstream": True}
    timeout = 60

    async def js(self) -> JetStreamContext:
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url, name=self._testMethodName)
        self.addCleanup(nc.close)
        return nc.jetstream()

    async def peer(self, script: Path, *args: str) -> dict[str, Any]:
        """Run a nats-py peer; every JSON line it printed, merged into one dict."""
        assert self.server is not None
        d = getProcessOutputAndValue(
            sys.executable, [str(script), args[0], self.server.url, *args[1:]],
            env=dict(os.environ), path=str(ROOT), reactor=reactor,
        )
        out, err, code = await bounded(d, 30.0)
        self.assertEqual(code, 0, f"peer {args} failed: {err.decode(errors='replace')}")
        merged: dict[str, Any] = {}
        for line in out.splitlines():
            if line.strip() and line.strip() != b"ready":
                merged.update(json.loads(line))
        return merged


async def next_of(w: KeyWatcher, key: str, seconds: float) -> Entry:
    """The watcher's next entry of ``key`` (others are skipped)."""
    while True:
        e = await bounded(w.next_update(), seconds)
        if e is not None and e.key == key:
            return e


class TTLTests(_Case):
    async def test_figure_3_key_with_ttl_1_is_gone_within_2_s(self) -> None:
        """A key created with ttl=1 is gone within 2 s and a watcher sees its limit
        marker (a PURGE); nats-py reads the same bucket: the key gone, the other key
        there; a key nats-py publishes with Nats-TTL: 1 expires the same way."""
        js = await self.js()
        kv = await bounded(js.create_key_value("ttl_fig", limit_marker_ttl=5))
        self.addCleanup(lambda: js.delete_key_value("ttl_fig").addErrback(lambda _: None))
        w = await bounded(kv.watch(updates_only=True))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update()))
        await bounded(kv.put("long", b"stays"))

        start = time.monotonic()
        rev = await bounded(kv.create("short", b"brief", ttl=1))
        put_seen = await next_of(w, "short", 2)
        marker = await next_of(w, "short", 3)
        marker_s = time.monotonic() - start
        with self.assertRaises(KeyNotFoundError):  # KeyDeletedError: the marker
            await bounded(kv.get("short"))
        gone_s = time.monotonic() - start
        self.assertEqual((put_seen.operation, put_seen.revision), (PUT, rev))
        self.assertEqual(marker.operation, PURGE)
        self.assertGreater(marker.revision, rev)

        out = await self.peer(KV_PEER, "ttl", "ttl_fig")
        # nats-py 2.16 predates ADR-48: it reads the limit marker as an entry with an
        # empty value and no operation; either way the value is gone for it too.
        self.assertIn(out["short"], (
            "KeyNotFoundError", "KeyDeletedError", {"value": "", "operation": None},
        ))
        self.assertEqual(base64.b64decode(out["long"]), b"stays")
        py_start = time.monotonic()
        py_put = await next_of(w, "frompy", 5)
        self.assertEqual((py_put.revision, py_put.value), (out["frompy"], b"from nats-py"))
        py_marker = await next_of(w, "frompy", 3)
        py_gone_s = time.monotonic() - py_start
        self.assertEqual(py_marker.operation, PURGE)
        self.assertEqual(sorted(await bounded(kv.keys())), ["long"])
        figure(
            3, ttl_s=1, marker_seen_s=marker_s, get_fails_s=gone_s,
            natspy_sees=json.dumps(out["short"]).replace(" ", ""),
            natspy_key_marker_seen_s=py_gone_s,
        )
        self.assertLess(marker_s, 2.0)
        self.assertLess(gone_s, 2.0)

    async def test_ttl_needs_limit_markers_and_put_ttl_needs_history_1(self) -> None:
        js = await self.js()
        plain = await bounded(js.create_key_value("ttl_plain"))
        self.addCleanup(lambda: js.delete_key_value("ttl_plain").addErrback(lambda _: None))
        deep = await bounded(js.create_key_value("ttl_deep", history=3, limit_marker_ttl=2))
        self.addCleanup(lambda: js.delete_key_value("ttl_deep").addErrback(lambda _: None))
        with self.assertRaises(KeyValueError):
            await plain.create("k", b"v", ttl=5)
        with self.assertRaises(KeyValueError):
            await deep.put("k", b"v", ttl=5)
        with self.assertRaises(InvalidArgumentError):
            await deep.create("k", b"v", ttl=0.5)
        await bounded(deep.create("k", b"v", ttl=5))  # create is fine with history
        st = await bounded(deep.status())
        self.assertEqual(st.limit_marker_ttl, 2.0)

    async def test_purge_with_ttl_leaves_no_trace(self) -> None:
        js = await self.js()
        kv = await bounded(js.create_key_value("ttl_purge", limit_marker_ttl=1))
        self.addCleanup(lambda: js.delete_key_value("ttl_purge").addErrback(lambda _: None))
        await bounded(kv.put("k", b"v"))
        await bounded(kv.purge("k", ttl=1))
        with self.assertRaises(KeyDeletedError):
            await bounded(kv.get("k"))
        for _ in range(60):
            st = await bounded(kv.status())
            if st.values == 0:
                break
            await sleep(0.1)
        self.assertEqual(st.values, 0)


class InteropTests(_Case):
    async def test_figure_4_both_stores_read_both_ways(self) -> None:
        """In one run: nats-py reads the keys (a value, a deleted key, keys, history)
        and objects (one of three chunks, a link to it, a deleted one, the listing)
        txnats wrote; txnats reads the key, the deleted key, the object and the
        deleted object nats-py wrote, by get and by streaming."""
        js = await self.js()
        kv: KeyValue = await bounded(js.create_key_value("fig4", history=3))
        self.addCleanup(lambda: js.delete_key_value("fig4").addErrback(lambda _: None))
        obs = await bounded(js.create_object_store("fig4"))
        self.addCleanup(lambda: js.delete_object_store("fig4").addErrback(lambda _: None))
        checks: dict[str, bool] = {}

        # keys: txnats writes, nats-py reads and writes back
        value = bytes(range(256)) * 2 + b"\r\nMSG x 1 3\r\n"
        r0 = await bounded(kv.put("from.txnats", b"v0"))
        r1 = await bounded(kv.put("from.txnats", value))
        await bounded(kv.put("gone", b"x"))
        await bounded(kv.delete("gone"))
        got = await self.peer(KV_PEER, "exchange", "fig4")
        checks["kv natspy get"] = got["get"] == {
            "key": "from.txnats", "value": base64.b64encode(value).decode(), "revision": r1,
        }
        checks["kv natspy deleted"] = got["gone"] in ("KeyNotFoundError", "KeyDeletedError")
        checks["kv natspy keys"] = got["keys"] == ["from.txnats"]
        checks["kv natspy history"] = [h[0] for h in got["history"]] == [r0, r1]
        e = await bounded(kv.get("from.natspy"))
        checks["kv txnats get"] = (e.value, e.revision) == (NATSPY_VALUE, got["put"])
        try:
            await bounded(kv.get("natspy.deleted"))
            checks["kv txnats deleted"] = False
        except KeyDeletedError:
            checks["kv txnats deleted"] = True

        # objects: txnats writes (an object, a link, a deleted one), nats-py reads
        data = os.urandom(3 * 128 * 1024 - 5)
        plain = await bounded(obs.put("plain", data))
        await bounded(obs.add_link("alias", plain))
        await bounded(obs.put("removed", b"bye"))
        await bounded(obs.delete("removed"))
        got = await self.peer(OBJ_PEER, "exchange", "fig4", "-")
        want = {"size": len(data), "sha256": sha(data)}
        checks["obj natspy get"] = got["plain"] == want
        checks["obj natspy link"] = got["alias"] == want
        checks["obj natspy deleted"] = isinstance(got["removed"], str)
        checks["obj natspy list"] = got["list"] == [
            ["alias", False], ["plain", False], ["removed", True],
        ]
        py = payload(EXCHANGE_SIZE, 7)
        checks["obj txnats get"] = await bounded(obs.get("py.obj")) == py
        streamed = b"".join([c async for c in obs.get_chunks("py.obj")])
        checks["obj txnats stream"] = streamed == py
        info = await bounded(obs.get_info("py.obj"))
        checks["obj txnats info"] = (info.size, info.digest) == (
            EXCHANGE_SIZE, got["py.obj"]["digest"],
        )
        try:
            await bounded(obs.get("py.removed"))
            checks["obj txnats deleted"] = False
        except ObjectNotFoundError:
            checks["obj txnats deleted"] = (
                await bounded(obs.get_info("py.removed", show_deleted=True))
            ).deleted
        figure(4, checks=len(checks), passed=sum(checks.values()),
               failed=[k.replace(" ", "_") for k, ok in checks.items() if not ok])
        self.assertEqual([k for k, ok in checks.items() if not ok], [])
