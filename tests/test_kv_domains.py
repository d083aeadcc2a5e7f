"""Key-value buckets across JetStream domains (issue #16: "bucket mirrors and sources,
and cross-domain buckets"), on real servers: a **hub** nats-server (JetStream domain
``hub``, a leafnode listener) and a **leaf** one (domain ``leaf``, a leafnode remote to
the hub), the topology of ADR-8's leafnode section and of nats.go's
``TestKeyValueMirrorCrossDomains``.

Between the two, a key's own subject (``$KV.b.k``) does not cross: a write reaches a
bucket in the other domain only through that domain's API prefix
(``$JS.hub.API.$KV.b.k``), which is what a domain context and a cross-domain mirror
use (tests/test_kv_domains_unit.py pins the subjects). The unit-level argument checks
(a bad domain, a domain and an api_prefix together, ...) are there too.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import TestCase

import txnats
from tests.support.files import free_port
from tests.support.peers import WAIT, Peer
from tests.support.servers import PerClass
from tests.support.waits import bounded, reactor, sleep
from txnats.errors import (
    BucketNotFoundError,
    KeyDeletedError,
    NatsError,
    NoStreamResponseError,
)
from txnats.jetstream.kv import DEL, PUT, Entry, KeyValue, KeyWatcher
from txnats.testing import NatsServer, ServerStartError

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "kv_domains_peer.py"

HUB_CONFIG = """
server_name: hub
jetstream {{ domain: hub }}
leafnodes {{ listen: "127.0.0.1:{port}" }}
"""

LEAF_CONFIG = """
server_name: leaf
jetstream {{ domain: leaf }}
leafnodes {{ remotes = [ {{ url: "nats://127.0.0.1:{port}" }} ] }}
"""

#: Seconds a value may take to reach a mirror or an aggregate in the other domain.
SYNC = 10.0


class HubAndLeaf:
    """A hub nats-server and a leaf joined to it, each with JetStream in its domain."""

    def __init__(self) -> None:
        self.hub: NatsServer | None = None
        self.leaf: NatsServer | None = None

    def start(self) -> HubAndLeaf:
        """Start both; return once the leaf logs its leafnode connection. The leafnode
        port is picked free; if another process takes it first, another is tried."""
        for attempt in range(3):
            port = free_port()
            hub = NatsServer(jetstream=True, config=HUB_CONFIG.format(port=port))
            try:
                self.hub = hub.start()
                break
            except ServerStartError:
                if attempt == 2:
                    raise
        assert self.hub is not None
        try:
            self.leaf = NatsServer(jetstream=True, config=LEAF_CONFIG.format(port=port)).start()
            self.leaf.wait_for_log("Leafnode connection created", 15)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in (self.leaf, self.hub):
            if server is not None:
                server.stop()


class HubAndLeafPerClass(PerClass):
    """One hub and leaf for all the tests of a class (``self.pair``)."""

    fixture_name = "pair"
    pair: HubAndLeaf | None = None

    @classmethod
    def start_fixture(cls) -> HubAndLeaf:
        return HubAndLeaf().start()


async def eventually(check: Any, what: str, seconds: float = SYNC) -> Any:
    """Call the coroutine function ``check`` until it returns without a
    :class:`NatsError` or ``AssertionError``; its result. Fails after ``seconds``."""
    start = reactor.seconds()
    while True:
        try:
            return await check()
        except (NatsError, AssertionError) as e:
            if reactor.seconds() - start > seconds:
                raise AssertionError(f"{what} did not happen within {seconds:g} s: {e!r}") from e
        await sleep(0.05)


async def take(watcher: KeyWatcher, n: int) -> list[Entry | None]:
    """The next ``n`` items of ``watcher`` (``None`` included), each within 5 s."""
    return [await bounded(watcher.next_update(), 5.0, f"watch item {i + 1} of {n}")
            for i in range(n)]


def summary(items: list[Entry | None]) -> list[tuple[str, str, bytes, int] | None]:
    """``(key, operation, value, revision)`` of each entry; ``None`` stays."""
    return [None if e is None else (e.key, e.operation, e.value, e.revision) for e in items]


class CrossDomainKeyValueTests(HubAndLeafPerClass, TestCase):
    """Buckets in one domain used, mirrored and sourced from the other."""

    timeout = 60

    async def client(self, where: str) -> txnats.Client:
        """A client of the hub or the leaf, closed after the test, once JetStream in the
        other domain answers it (the leafnode's interest may come after the link)."""
        assert self.pair is not None
        server = self.pair.hub if where == "hub" else self.pair.leaf
        assert server is not None
        nc = await bounded(txnats.connect(reactor, server.url, name=f"{where}-client"))
        self.addCleanup(nc.close)
        other = "leaf" if where == "hub" else "hub"

        async def answers() -> None:
            info = await nc.jetstream(domain=other, timeout=1.0).account_info()
            self.assertEqual(info.domain, other)

        await eventually(answers, f"JetStream of domain {other} answering the {where}")
        return nc

    async def bucket(self, nc: txnats.Client, name: str, **config: Any) -> KeyValue:
        """Create bucket ``name`` in the client's own domain, deleted after the test."""
        js = nc.jetstream()
        kv = await bounded(js.create_key_value(name, **config))
        self.addCleanup(lambda: js.delete_key_value(name).addErrback(lambda _: None))
        return kv

    # ---------------------------------------------------------------- 1. a domain
    async def test_leaf_client_uses_a_hub_bucket_through_the_domain(self) -> None:
        """A leaf client with ``nc.jetstream(domain="hub")`` creates a bucket in the
        hub and puts, gets, deletes, lists history and keys, and watches it; a hub
        client sees the same values and revisions, and the leaf sees the hub's."""
        nl, nh = await self.client("leaf"), await self.client("hub")
        remote = nl.jetstream(domain="hub")
        kv = await bounded(remote.create_key_value("cross1", history=5))
        self.addCleanup(lambda: remote.delete_key_value("cross1").addErrback(lambda _: None))
        with self.assertRaises(BucketNotFoundError):  # made in the hub, not the leaf
            await bounded(nl.jetstream().key_value("cross1"))
        on_hub = await bounded(nh.jetstream().key_value("cross1"))
        watcher = await bounded(kv.watch())
        self.addCleanup(watcher.stop)

        r1 = await bounded(kv.put("a", b"leaf-1"))
        got = await bounded(on_hub.get("a"))
        self.assertEqual((got.value, got.revision), (b"leaf-1", r1))
        r2 = await bounded(on_hub.put("b", b"hub-2"))
        got = await bounded(kv.get("b"))
        self.assertEqual((got.value, got.revision), (b"hub-2", r2))
        r3 = await bounded(kv.put("a", b"leaf-3"))
        rd = await bounded(kv.delete("b"))
        with self.assertRaises(KeyDeletedError) as cm:
            await bounded(on_hub.get("b"))
        self.assertEqual(cm.exception.revision, rd)

        want_a = [("a", PUT, b"leaf-1", r1), ("a", PUT, b"leaf-3", r3)]
        self.assertEqual(summary(await bounded(kv.history("a"))), want_a)  # type: ignore[arg-type]
        self.assertEqual(summary(await bounded(on_hub.history("a"))), want_a)  # type: ignore[arg-type]
        self.assertEqual(await bounded(kv.keys()), ["a"])
        self.assertEqual(await bounded(on_hub.keys()), ["a"])
        self.assertEqual(summary(await take(watcher, 5)), [
            None, ("a", PUT, b"leaf-1", r1), ("b", PUT, b"hub-2", r2),
            ("a", PUT, b"leaf-3", r3), ("b", DEL, b"", rd),
        ])
        st = await bounded(on_hub.status())
        self.assertEqual(st.values, 4)

    async def test_hub_client_uses_a_leaf_bucket_through_the_domain(self) -> None:
        """The reverse: a hub client with ``domain="leaf"`` writes to and reads a
        bucket that lives in the leaf; a leaf client sees its writes and the hub the
        leaf's."""
        nh, nl = await self.client("hub"), await self.client("leaf")
        local = await self.bucket(nl, "cross2", history=2)
        remote = await bounded(nh.jetstream(domain="leaf").key_value("cross2"))
        r1 = await bounded(remote.put("k", b"from-hub"))
        got = await bounded(local.get("k"))
        self.assertEqual((got.value, got.revision), (b"from-hub", r1))
        r2 = await bounded(local.update("k", b"from-leaf", r1))
        got = await bounded(remote.get("k"))
        self.assertEqual((got.value, got.revision), (b"from-leaf", r2))
        self.assertEqual(await bounded(remote.keys()), ["k"])
        with self.assertRaises(BucketNotFoundError):  # not in the hub
            await bounded(nh.jetstream().key_value("cross2"))

    async def test_a_keys_own_subject_does_not_cross_domains(self) -> None:
        """Why writes go through the API prefix: published from the leaf on its own
        subject, a key of a hub bucket reaches no stream (nats-py's KV, which does
        so, fails this way through a domain); through ``$JS.hub.API`` it is stored."""
        nl, nh = await self.client("leaf"), await self.client("hub")
        on_hub = await self.bucket(nh, "cross6")
        local = nl.jetstream()
        with self.assertRaises(NoStreamResponseError):
            await bounded(local.publish("$KV.cross6.k", b"bare", retry_attempts=0))
        ack = await bounded(local.publish("$JS.hub.API.$KV.cross6.k", b"prefixed"))
        self.assertEqual((ack.stream, ack.domain), ("KV_cross6", "hub"))
        self.assertEqual((await bounded(on_hub.get("k"))).value, b"prefixed")

    # ---------------------------------------------------------------- 2. a mirror
    async def test_leaf_mirror_of_a_hub_bucket(self) -> None:
        """A leaf bucket mirroring a hub bucket (``{"bucket", "domain": "hub"}``):
        the hub's values reach it; ``get`` reads them from it; a ``put`` through it
        lands in the hub's origin (same revision) and comes back through it; a
        watcher on it sees every change in order."""
        nh, nl = await self.client("hub"), await self.client("leaf")
        origin = await self.bucket(nh, "origin3", history=3)
        r1 = await bounded(origin.put("a", b"1"))
        mirror = await self.bucket(nl, "mirror3", mirror={"bucket": "origin3", "domain": "hub"})
        st = await bounded(mirror.status())
        self.assertEqual(st.mirror, "origin3")
        assert st.stream_info is not None and st.stream_info.config.mirror is not None
        external = st.stream_info.config.mirror.external
        self.assertEqual(external.api if external else None, "$JS.hub.API")

        async def value_in_mirror(key: str, value: bytes, revision: int) -> None:
            got = await mirror.get(key)
            self.assertEqual((got.value, got.revision), (value, revision))

        await eventually(lambda: value_in_mirror("a", b"1", r1), "the hub's value in the mirror")
        watcher = await bounded(mirror.watch())
        self.addCleanup(watcher.stop)
        r2 = await bounded(origin.put("b", b"2"))
        await eventually(lambda: value_in_mirror("b", b"2", r2), "a later value in the mirror")

        r3 = await bounded(mirror.put("c", b"3"))  # a write through the mirror
        got = await bounded(origin.get("c"))
        self.assertEqual((got.value, got.revision), (b"3", r3))
        await eventually(lambda: value_in_mirror("c", b"3", r3), "the mirror's write back")
        rd = await bounded(mirror.delete("a"))
        with self.assertRaises(KeyDeletedError):
            await bounded(origin.get("a"))
        self.assertEqual(summary(await take(watcher, 5)), [
            ("a", PUT, b"1", r1), None, ("b", PUT, b"2", r2), ("c", PUT, b"3", r3),
            ("a", DEL, b"", rd),
        ])
        self.assertEqual(await bounded(mirror.keys()), ["b", "c"])
        with self.assertRaises(BucketNotFoundError):  # the origin is not in the leaf
            await bounded(nl.jetstream().key_value("origin3"))

    # ---------------------------------------------------------------- 3. sources
    async def test_leaf_bucket_sources_a_hub_bucket_and_a_local_one(self) -> None:
        """A leaf bucket sourcing a hub bucket (through the domain) and a leaf bucket
        holds the keys of both, under their own names, and takes later ones too."""
        nh, nl = await self.client("hub"), await self.client("leaf")
        hub_src = await self.bucket(nh, "hubsrc4")
        leaf_src = await self.bucket(nl, "leafsrc4")
        await bounded(hub_src.put("from.hub", b"H"))
        await bounded(leaf_src.put("from.leaf", b"L"))
        agg = await self.bucket(nl, "agg4", sources=[
            {"bucket": "hubsrc4", "domain": "hub"}, "leafsrc4",
        ])

        async def keys(want: list[str]) -> None:
            self.assertEqual(sorted(await agg.keys()), want)

        await eventually(lambda: keys(["from.hub", "from.leaf"]), "both sources' keys")
        self.assertEqual((await bounded(agg.get("from.hub"))).value, b"H")
        self.assertEqual((await bounded(agg.get("from.leaf"))).value, b"L")
        await bounded(hub_src.put("later.hub", b"H2"))
        await eventually(
            lambda: keys(["from.hub", "from.leaf", "later.hub"]), "a later hub key"
        )
        self.assertEqual((await bounded(agg.get("later.hub"))).value, b"H2")
        st = await bounded(agg.status())
        self.assertEqual(st.sources, ("hubsrc4", "leafsrc4"))

    # ---------------------------------------------------------------- nats-py
    async def test_nats_py_reads_through_the_domain_what_txnats_wrote(self) -> None:
        """nats-py on the leaf, with ``jetstream(domain="hub")``, reads the keys txnats
        wrote into a hub bucket from the leaf through the same domain."""
        nl = await self.client("leaf")
        remote = nl.jetstream(domain="hub")
        kv = await bounded(remote.create_key_value("interop5", history=2))
        self.addCleanup(lambda: remote.delete_key_value("interop5").addErrback(lambda _: None))
        value = b"from txnats \x00\xff\r\n"
        r1 = await bounded(kv.put("k", value))
        await bounded(kv.put("gone", b"x"))
        await bounded(kv.delete("gone"))
        assert self.pair is not None and self.pair.leaf is not None
        peer = Peer([str(PEER), self.pair.leaf.url, "hub", "interop5"])
        transport = reactor.spawnProcess(
            peer, sys.executable, [sys.executable, *peer.args], env=dict(os.environ),
            path=str(ROOT),
        )

        def reap() -> defer.Deferred[None] | None:
            if peer.ended:
                return None
            transport.signalProcess("KILL")
            return defer.ensureDeferred(peer._wait(lambda: peer.ended, "die", WAIT))

        self.addCleanup(reap)
        out = await peer.wait_exit()
        self.assertEqual(out, [
            {"key": "k", "value": base64.b64encode(value).decode(), "revision": r1},
            {"key": "gone", "error": "KeyNotFoundError"},
            {"keys": ["k"]},
        ])
