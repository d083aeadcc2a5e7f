"""Forwarding between NATS systems (``txnats.bridge.forward``).

Unit tests parse specs and map subjects. The integration tests run two real
``nats-server -js`` processes (a source and a target system, each with its own store
directory, restarted on the same port where a test says so) and a
:class:`~txnats.bridge.forward.Forwarder` in this process:

- core mode: every message forwarded (mapped, with its headers); two forwarders share
  the work through their queue group; with the target down and its buffer full, the
  messages it cannot take are counted as dropped, not lost quietly;
- JetStream mode (figure 3): 10,000 messages across two kills of the target server, 0
  lost, the target's duplicate window counted; a restart of the source loses nothing;
  two forwarders on one durable share the work; a target without a stream gets
  nothing acknowledged until it has one.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.internet.threads import deferToThread
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from txnats.bridge._forward_js import forwarded_headers
from txnats.bridge.forward import Forwarder, ForwardRoute, SubjectMap, parse_forward
from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError
from txnats.jetstream import JetStreamContext
from txnats.testing import NatsServer, ServerSide

from .support.clients import ClientTestMixin
from .support.figures import figure
from .support.files import free_port
from .support.waits import bounded, reactor, sleep, wait_until
from .support.wire import info_line, msg_frame

# ============================================================================ unit


class ParseTests(SynchronousTestCase):
    def test_issue_example(self) -> None:
        """The issue's spec: core mode, same subjects, a queue group, a safe name."""
        r = parse_forward("orders.>=nats://other:4222")
        self.assertFalse(r.jetstream)
        self.assertEqual((r.source, r.stream, r.servers), ("orders.>", None, "nats://other:4222"))
        self.assertEqual(r.target_subject("orders.eu.1"), "orders.eu.1")
        self.assertEqual(r.name, "orders.>=nats://other:4222")
        self.assertTrue(r.queue.startswith("txnats-forward-"))

    def test_same_spec_same_group(self) -> None:
        """Two bridges given one spec share a queue group and a durable; another target
        gets other ones (it must get every message too)."""
        a = parse_forward("js:S:orders.>=nats://other:4222")
        b = parse_forward("js:S:orders.>=nats://other:4222")
        c = parse_forward("js:S:orders.>=nats://third:4222")
        self.assertEqual((a.durable, a.queue), (b.durable, b.queue))
        self.assertNotEqual(a.durable, c.durable)

    def test_jetstream_and_options(self) -> None:
        """js:STREAM: selects JetStream mode; options after '?' set the durable, batch
        and creds; credentials never reach the name."""
        r = parse_forward(
            "js:ORDERS:orders.>:archive.orders.>=nats://u:secret@a:1,nats://b:2"
            "?durable=fwd&batch=50&creds=/x.creds"
        )
        self.assertTrue(r.jetstream)
        self.assertEqual((r.stream, r.durable, r.batch, r.creds), ("ORDERS", "fwd", 50, "/x.creds"))
        self.assertEqual(r.target_subject("orders.eu.1"), "archive.orders.eu.1")
        self.assertEqual(r.name, "js:ORDERS:orders.>:archive.orders.>=nats://u:***@a:1,nats://b:2")
        self.assertNotIn("secret", repr(r))
        self.assertEqual(parse_forward("a=nats://x?queue=workers").queue, "workers")

    def test_mapping(self) -> None:
        """'*' takes the source's wildcards in order, $N the N-th, '>' the tail."""
        cases = [
            ("orders.*.*", "by.*.*", "orders.eu.7", "by.eu.7"),
            ("orders.*.*", "by.$2.$1", "orders.eu.7", "by.7.eu"),
            ("orders.*.>", "x.$1.>", "orders.eu.a.b.c", "x.eu.a.b.c"),
            ("orders.>", "archive.orders.>", "orders.a", "archive.orders.a"),
            ("orders.*", "all", "orders.a", "all"),
            ("a.b", "$JS.x", "a.b", "$JS.x"),
        ]
        for source, target, subject, want in cases:
            self.assertEqual(SubjectMap.build(source, target).apply(subject), want)

    def test_bad_specs(self) -> None:
        """Every bad spec is an InvalidArgumentError naming what is wrong."""
        bad = {
            "orders": "expected SUBJECT=URL",
            "=nats://x": "expected SUBJECT=URL",
            "a=": "expected SUBJECT=URL",
            "a b=nats://x": "whitespace",
            "a..b=nats://x": "empty token",
            "a.>.b=nats://x": "last token",
            "a.>:b.>.c=nats://x": "must be the last token",
            "a.*:b.>=nats://x": "does not",
            "a.*:*.*=nats://x": "more '*'",
            "a.*:$2=nats://x": "$2 names no",
            "a:b:c=nats://x": "SOURCE or SOURCE:TARGET",
            "a:b c=nats://x": "whitespace",
            "js:A.B:c=nats://x": "stream name",
            "js::c=nats://x": "stream name",
            "a=ftp://x": "scheme",
            "a=nats://x?foo=1": "unknown option 'foo'",
            "a=nats://x?queue=": "empty",
            "a=nats://x?queue=a&queue=b": "twice",
            "a=nats://x?queue=a b": "whitespace",
            "a=nats://x?batch=3": "JetStream options",
            "js:S:a=nats://x?queue=q": "core option",
            "js:S:a=nats://x?batch=0": "1 to 1000",
            "js:S:a=nats://x?batch=1001": "1 to 1000",
            "js:S:a=nats://x?durable=a.b": "durable name",
        }
        for spec, why in bad.items():
            with self.assertRaises(InvalidArgumentError, msg=spec) as cm:
                parse_forward(spec)
            self.assertIn(why, str(cm.exception), spec)
            self.assertIn("e.g. 'orders.>=nats://other:4222'", str(cm.exception))
        with self.assertRaises(InvalidArgumentTypeError):
            parse_forward(b"a=nats://x")  # type: ignore[arg-type]

    def test_headers_forwarded(self) -> None:
        """The source's own msg id and expectations stay behind; the rest goes on."""
        h = txnats.Headers([("A", "1"), ("Nats-Msg-Id", "x"), ("Nats-Expected-Stream", "S"),
                            ("A", "2")])
        out = forwarded_headers(h)
        assert out is not None
        self.assertEqual(out.multi_items(), [("A", "1"), ("A", "2")])
        self.assertIsNone(forwarded_headers(None))
        self.assertIsNone(forwarded_headers(txnats.Headers({"Nats-Msg-Id": "x"})))

    def test_forwarder_arguments(self) -> None:
        """A route that is not a ForwardRoute, a bad callback or target option: refused."""
        from twisted.internet.testing import MemoryReactorClock

        clock = MemoryReactorClock()
        source = txnats.Client(clock, "nats://127.0.0.1:4222")
        route = parse_forward("a=nats://127.0.0.1:1")
        with self.assertRaises(InvalidArgumentTypeError):
            Forwarder(clock, "a=nats://x", source)  # type: ignore[arg-type]
        with self.assertRaises(InvalidArgumentTypeError):
            Forwarder(clock, route, source, on_forward=3)  # type: ignore[arg-type]
        with self.assertRaises(InvalidArgumentError):
            Forwarder(clock, route, source, target_options={"no_such_option": 1})
        with self.assertRaises(InvalidArgumentError):
            Forwarder(clock, route, source, target_options={"reconnect_wait": -1})
        self.assertIsInstance(Forwarder(clock, route, source).route, ForwardRoute)

    def test_target_connection_options(self) -> None:
        """The target connection reconnects forever; ``creds`` and target options reach
        it (the caller's options win)."""
        from twisted.internet.testing import MemoryReactorClock

        clock = MemoryReactorClock()
        source = txnats.Client(clock, "nats://127.0.0.1:4222")
        route = parse_forward("a=nats://127.0.0.1:1?creds=/etc/x.creds")
        fwd = Forwarder(clock, route, source, target_options={"reconnect_wait": 0.5})
        opts = fwd.target.options
        self.assertEqual((opts.max_reconnect_attempts, opts.retry_on_failed_connect),
                         (-1, True))
        self.assertEqual((opts.user_credentials, opts.reconnect_wait), ("/etc/x.creds", 0.5))
        self.assertIn(route.name, opts.name or "")


class CoreBackPressureTests(ClientTestMixin, SynchronousTestCase):
    """Core mode against fake servers on a ``MemoryReactorClock``."""

    def target_server(self) -> ServerSide:
        """Answer the forwarder's dial to the target and complete its handshake."""
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line(headers=True))
        server.send(b"PONG\r\n")
        self.clock.advance(0)
        server.reset()
        return server

    def test_full_target_buffer_applies_back_pressure(self) -> None:
        """The target's socket takes nothing and its outbound buffer fills: the source
        subscription waits (no drop); once the socket has room, every message goes on,
        in order."""
        source, src = self.connected(info={"headers": True})
        fwd = Forwarder(self.clock, parse_forward("a.>=nats://127.0.0.1:4333"), source,
                        target_options={"max_outbound_bytes": 2048})
        d = fwd.start()
        target = self.target_server()
        self.assertNoResult(d)  # not before the source server has the subscription
        src.send(b"PONG\r\n")
        self.clock.advance(0)
        self.successResultOf(d)
        sub = re.search(rb"SUB a\.> txnats-forward-\w+ (\d+)", src.transport.value())
        assert sub is not None
        target.transport.producer.pauseProducing()  # the socket is full
        payloads = [b"%03d" % i + b"x" * 97 for i in range(100)]
        src.send(b"".join(msg_frame("a.x", int(sub.group(1)), p) for p in payloads))
        self.pump(src)
        self.assertLess(fwd.stats.forwarded, 30)  # 2 KiB of ~120-byte frames, then a wait
        self.assertEqual(fwd.stats.dropped, 0)
        for _ in range(100):
            target.transport.producer.resumeProducing()
            self.pump(src)
            if fwd.stats.forwarded == 100:
                break
        self.assertEqual((fwd.stats.forwarded, fwd.stats.dropped), (100, 0))
        sent = re.findall(rb"PUB a\.x 100\r\n(.{100})\r\n", target.transport.value(), re.S)
        self.assertEqual(sent, payloads)


# ============================================================================ integration


class TwoSystems(TestCase):
    """A source and a target ``nats-server -js``, each with a store kept across kills."""

    timeout = 90

    def setUp(self) -> None:
        self.dirs: list[str] = []
        self.source = self.server("source")
        self.target = self.server("target")

    def server(self, name: str) -> NatsServer:
        directory = tempfile.mkdtemp(prefix=f"txnats-fwd-{name}-")
        self.addCleanup(shutil.rmtree, directory, True)
        server = NatsServer(jetstream=True, store_dir=directory).start()
        self.addCleanup(server.stop)
        return server

    def restart(self, server: NatsServer) -> None:
        """Kill the server (SIGKILL, as a crash) and start it again on the same port."""
        server.kill()
        server.start()

    async def client(self, server: NatsServer, name: str) -> txnats.Client:
        nc = await bounded(txnats.connect(
            reactor, server.url, name=name, max_reconnect_attempts=-1, reconnect_wait=0.2,
            reconnect_jitter=0.0,
        ))
        self.addCleanup(nc.close)
        return nc

    def forwarder(self, source: txnats.Client, spec: str, **kw: Any) -> Forwarder:
        kw.setdefault("target_options", {"reconnect_wait": 0.2, "reconnect_jitter": 0.0})
        fwd = Forwarder(reactor, parse_forward(spec), source, **kw)
        self.addCleanup(lambda: bounded(fwd.stop(), 20))
        return fwd

    async def stream(self, js: JetStreamContext, name: str, subject: str) -> None:
        await bounded(js.add_stream(name=name, subjects=[subject], storage="file"))

    async def stored(self, js: JetStreamContext, stream: str) -> int:
        info = await bounded(js.api_request(f"STREAM.INFO.{stream}"))
        return int(info["state"]["messages"])

    async def read_ids(self, js: JetStreamContext, stream: str, n: int) -> Counter[str]:
        """The Nats-Msg-Id of every message of ``stream`` (``n`` of them expected)."""
        await bounded(js.add_consumer(stream, durable_name="check", ack_policy="none"))
        consumer = js.pull_consumer(stream, "check")
        ids: Counter[str] = Counter()
        got = 0
        while got < n:
            batch = await bounded(consumer.fetch(1000, expires=2.0), 10)
            if not batch:
                break
            for m in batch:
                assert m.headers is not None
                ids[m.headers["Nats-Msg-Id"]] += 1
            got += len(batch)
        return ids

    async def setup_streams(self, n: int) -> tuple[txnats.Client, JetStreamContext,
                                                    JetStreamContext]:
        """ORDERS on the source (orders.>), ARCHIVE on the target (archive.orders.>),
        and ``n`` messages published into ORDERS."""
        src = await self.client(self.source, "src")
        dst = await self.client(self.target, "dst")
        sjs, tjs = src.jetstream(), dst.jetstream()
        await self.stream(sjs, "ORDERS", "orders.>")
        await self.stream(tjs, "ARCHIVE", "archive.orders.>")
        pub = src.jetstream(publish_async_max_pending=500)
        for i in range(n):
            if pub.publish_async_pending >= 500:
                await bounded(pub.publish_async_room(), 10)
            pub.publish_async(f"orders.{i % 10}", b"%06d" % i)
        await bounded(pub.publish_async_complete(), 30)
        self.assertEqual(await self.stored(sjs, "ORDERS"), n)
        return src, sjs, tjs

    #: A JetStream route from ORDERS to ARCHIVE's subjects.
    SPEC = "js:ORDERS:orders.>:archive.orders.>={url}?batch=200"

    async def wait_stored(self, js: JetStreamContext, stream: str, n: int) -> None:
        """Poll until ``stream`` holds ``n`` messages (or fail after 30 s)."""
        start = reactor.seconds()
        while await self.stored(js, stream) < n:
            if reactor.seconds() - start > 30:
                raise AssertionError(f"{stream} never held {n} messages")
            await sleep(0.1)


class CoreForwardTests(TwoSystems):
    async def test_forwards_mapped_with_headers(self) -> None:
        """Every core message reaches the target, subject mapped, headers and data kept;
        on_forward hears each one, by route name."""
        src = await self.client(self.source, "src")
        dst = await self.client(self.target, "dst")
        got: list[txnats.Msg] = []
        sub = dst.subscribe("archive.>", got.append)
        await bounded(dst.flush())
        heard: list[tuple[str, int]] = []
        fwd = self.forwarder(
            src, f"orders.*.>:archive.$1.>={self.target.url}",
            on_forward=lambda s, n: heard.append((s, n)),
        )
        await bounded(fwd.start())
        await wait_until(lambda: fwd.target.is_connected, what="target connection")
        for i in range(200):
            src.publish(f"orders.eu.{i}.x", b"%d" % i, headers={"Trace": str(i)})
        await wait_until(lambda: len(got) == 200, what="200 forwarded messages")
        self.assertEqual([m.subject for m in got], [f"archive.eu.{i}.x" for i in range(200)])
        self.assertEqual([m.data for m in got], [b"%d" % i for i in range(200)])
        self.assertEqual([m.headers and m.headers["Trace"] for m in got],
                         [str(i) for i in range(200)])
        self.assertEqual(heard[:2], [(fwd.route.name, 1), (fwd.route.name, 1)])
        self.assertEqual((fwd.stats.forwarded, fwd.stats.dropped, len(heard)), (200, 0, 200))
        await bounded(fwd.stop(), 20)
        self.assertTrue(fwd.target.is_closed)
        sub.unsubscribe()

    async def test_two_forwarders_share_the_queue_group(self) -> None:
        """Two bridges with the same spec: each message goes across once, and both work."""
        src1 = await self.client(self.source, "src1")
        src2 = await self.client(self.source, "src2")
        dst = await self.client(self.target, "dst")
        got: list[bytes] = []
        dst.subscribe("orders.>", lambda m: got.append(m.data))
        await bounded(dst.flush())
        spec = f"orders.>={self.target.url}"
        fwds = [self.forwarder(src1, spec), self.forwarder(src2, spec)]
        for f in fwds:
            await bounded(f.start())
            await wait_until(lambda f=f: f.target.is_connected, what="target connection")
        await bounded(src1.flush())
        await bounded(src2.flush())
        pub = await self.client(self.source, "pub")
        for i in range(1000):
            pub.publish("orders.x", b"%d" % i)
        await wait_until(lambda: len(got) >= 1000, what="1,000 forwarded messages")
        await bounded(dst.flush())
        self.assertEqual(sorted(got), sorted(b"%d" % i for i in range(1000)))
        counts = [f.stats.forwarded for f in fwds]
        self.assertEqual(sum(counts), 1000)
        self.assertTrue(all(c > 0 for c in counts), counts)

    async def test_drops_are_counted_and_logged(self) -> None:
        """Target down, its reconnect buffer full: the messages it cannot take are
        counted as dropped and logged (at most once); the rest arrive once it is back."""
        src = await self.client(self.source, "src")
        logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)
        fwd = self.forwarder(src, f"orders.>={self.target.url}", target_options={
            "reconnect_wait": 0.2, "reconnect_jitter": 0.0, "reconnect_buffer_size": 2000,
        })
        await bounded(fwd.start())
        await wait_until(lambda: fwd.target.is_connected, what="target connection")
        self.target.kill()
        await wait_until(lambda: not fwd.target.is_connected, what="target disconnected")
        for i in range(100):
            src.publish("orders.x", b"%05d" % i)
        await bounded(src.flush())
        await wait_until(lambda: fwd.stats.forwarded + fwd.stats.dropped == 100,
                         what="100 messages handled")
        self.assertGreater(fwd.stats.dropped, 0)
        self.assertGreater(fwd.stats.forwarded, 0)  # the buffered ones
        warnings = [e for e in logged if "dropping messages" in e.get("log_format", "")]
        self.assertEqual(len(warnings), 1)  # once per run of drops, not per message
        self.target.start()
        dst = await self.client(self.target, "dst")
        got: list[bytes] = []
        dst.subscribe("orders.>", lambda m: got.append(m.data))
        await bounded(dst.flush())
        await wait_until(lambda: fwd.target.is_connected, what="target reconnection")
        src.publish("orders.x", b"after")
        await wait_until(lambda: b"after" in got, what="a message after the reconnection")


class JetStreamForwardTests(TwoSystems):
    async def crash_mid_flight(self, server: NatsServer, client: txnats.Client) -> None:
        """Freeze ``server`` (SIGSTOP), wait until ``client`` (of the forwarder) has
        written more to it, then kill it and start it again on the same port: what the
        frozen server held unanswered is lost with it."""
        server.pause()
        sent = client.stats.out_msgs
        await wait_until(lambda: client.stats.out_msgs > sent, 20,
                         what="a publish to the frozen server")
        await deferToThread(self.restart, server)

    def crash_at(self, marks: tuple[int, ...], fwd: Forwarder, server: NatsServer,
                 client: Callable[[], txnats.Client]) -> list[Deferred[None]]:
        """Crash ``server`` mid-flight (see :meth:`crash_mid_flight`) as soon as the
        forwarder's count passes each mark; the returned list gets one Deferred each."""
        crashes: list[Deferred[None]] = []

        def check(subject: str, size: int) -> None:
            if len(crashes) < len(marks) and fwd.stats.forwarded >= marks[len(crashes)]:
                crashes.append(ensureDeferred(self.crash_mid_flight(server, client())))

        fwd.on_forward = check
        return crashes

    async def test_figure3_target_restarts(self) -> None:
        """Figure 3: 10,000 messages across two crashes of the target server, 0 lost.

        Each crash freezes the target while the forwarder publishes to it, then kills
        and restarts it: the publishes it held are never confirmed, so their source
        messages are not acknowledged and come again.
        """
        n = 10_000
        src, _, tjs = await self.setup_streams(n)
        fwd = self.forwarder(src, self.SPEC.format(url=self.target.url))
        marks = (n * 3 // 10, n * 6 // 10)
        crashes = self.crash_at(marks, fwd, self.target, lambda: fwd.target)
        killed_at: list[int] = []  # messages forwarded when the target connection dropped
        fwd.target.add_status_listener(
            lambda state: state == txnats.ClientState.RECONNECTING
            and killed_at.append(fwd.stats.forwarded)
        )
        start = reactor.seconds()
        await bounded(fwd.start())
        await wait_until(lambda: len(crashes) == 2, 60, what="two crashes")
        await bounded(gatherResults(crashes), 60)
        dst = await self.client(self.target, "dst-after")
        tjs = dst.jetstream()
        await wait_until(lambda: fwd.stats.forwarded >= n, 60, what=f"{n} forwarded")
        elapsed = reactor.seconds() - start
        stored = await self.stored(tjs, "ARCHIVE")
        ids = await self.read_ids(tjs, "ARCHIVE", stored)
        twice = sum(c - 1 for c in ids.values())
        lost = n - len(ids)
        figure(
            3, part="target_restarts", messages=n, target_restarts=len(killed_at),
            killed_after=killed_at, stored=stored, lost=lost,
            unconfirmed_redelivered=fwd.stats.retried,
            window_duplicates=fwd.stats.duplicates, landed_twice=twice, seconds=elapsed,
        )
        self.assertEqual(set(ids), {f"ORDERS:{s}" for s in range(1, n + 1)})
        self.assertEqual(lost, 0)
        self.assertEqual(twice, 0)  # the duplicate window removed every redelivery
        self.assertEqual(stored, n)
        self.assertEqual(fwd.stats.forwarded, n)
        self.assertEqual(len(killed_at), 2)
        self.assertGreater(fwd.stats.retried, 0)  # the crashes did catch publishes

    async def test_source_restart_loses_nothing(self) -> None:
        """The source server crashed mid-run (frozen while the forwarder acks to it,
        then killed and restarted): every message arrives once; the acks it lost bring
        their messages again, and the target's duplicate window recognises them."""
        n = 2000
        src, _, tjs = await self.setup_streams(n)
        fwd = self.forwarder(src, self.SPEC.format(url=self.target.url).replace("200", "50"))
        crashes = self.crash_at((n // 3,), fwd, self.source, lambda: src)
        await bounded(fwd.start())
        await wait_until(lambda: len(crashes) == 1, 30, what="a crash")
        await bounded(crashes[0], 60)
        await wait_until(lambda: fwd.stats.forwarded >= n, 60, what=f"{n} forwarded")
        ids = await self.read_ids(tjs, "ARCHIVE", n)
        figure(3, part="source_restart", messages=n, lost=n - len(ids),
               window_duplicates=fwd.stats.duplicates,
               landed_twice=sum(c - 1 for c in ids.values()))
        self.assertEqual(set(ids), {f"ORDERS:{s}" for s in range(1, n + 1)})
        self.assertEqual(await self.stored(tjs, "ARCHIVE"), n)
        # Lost acks: their messages come again and are recognised. When the server had
        # written the consumer's state just before the crash, only the acks sent to the
        # frozen server are lost, and their messages come again only after the ack wait
        # (the server's default, 30 s): wait for that, not less (seen once under load).
        await wait_until(lambda: fwd.stats.duplicates > 0, 45,
                         what="a message whose ack was lost coming again as a duplicate")
        self.assertEqual(await self.stored(tjs, "ARCHIVE"), n)

    async def test_two_forwarders_share_the_durable(self) -> None:
        """Two bridges on one durable: each forwards some, together exactly all."""
        n = 2000
        src, _, tjs = await self.setup_streams(n)
        src2 = await self.client(self.source, "src2")
        spec = self.SPEC.format(url=self.target.url).replace("200", "50")
        fwds = [self.forwarder(src, spec), self.forwarder(src2, spec)]
        for f in fwds:
            await bounded(f.start())
        await wait_until(lambda: sum(f.stats.forwarded for f in fwds) >= n, 30,
                         what=f"{n} forwarded")
        counts = [f.stats.forwarded for f in fwds]
        self.assertEqual(sum(counts), n)
        self.assertTrue(all(c > 0 for c in counts), counts)
        self.assertEqual(await self.stored(tjs, "ARCHIVE"), n)

    async def test_no_target_stream_nothing_acked(self) -> None:
        """A target with no stream for the subjects refuses every publish: nothing is
        acknowledged on the source; once the stream exists, every message arrives."""
        n = 50
        src, sjs, _ = await self.setup_streams(n)
        dst = await self.client(self.target, "dst2")
        tjs = dst.jetstream()
        await bounded(tjs.delete_stream("ARCHIVE"))
        fwd = self.forwarder(src, self.SPEC.format(url=self.target.url))
        await bounded(fwd.start())
        await wait_until(lambda: fwd.stats.retried >= n, 20, what="every message refused")
        info = await bounded(sjs.api_request(f"CONSUMER.INFO.ORDERS.{fwd.route.durable}"))
        self.assertEqual(info["ack_floor"]["stream_seq"], 0)
        self.assertEqual(fwd.stats.forwarded, 0)
        await self.stream(tjs, "ARCHIVE", "archive.orders.>")
        await wait_until(lambda: fwd.stats.forwarded >= n, 30, what=f"{n} forwarded")
        self.assertEqual(await self.stored(tjs, "ARCHIVE"), n)

    async def test_target_down_at_start(self) -> None:
        """The target is down when the forwarder starts: start() still fires, nothing is
        pulled (nothing refused, nothing acked) until the target is up, then all arrive;
        stop() while waiting for the target ends at once."""
        n = 300
        src, sjs, _ = await self.setup_streams(n)
        self.target.kill()
        fwd = self.forwarder(src, self.SPEC.format(url=self.target.url))
        await bounded(fwd.start())
        await sleep(1.0)  # time to pull, were the pump not waiting for the target
        self.assertEqual((fwd.stats.forwarded, fwd.stats.retried), (0, 0))
        info = await bounded(sjs.api_request(f"CONSUMER.INFO.ORDERS.{fwd.route.durable}"))
        self.assertEqual((info["num_pending"], info["num_ack_pending"]), (n, 0))
        self.target.start()
        await wait_until(lambda: fwd.stats.forwarded >= n, 30, what=f"{n} forwarded")
        dst = await self.client(self.target, "dst-late")
        self.assertEqual(await self.stored(dst.jetstream(), "ARCHIVE"), n)

        idle = self.forwarder(src, f"js:ORDERS:orders.>=nats://127.0.0.1:{free_port()}")
        await bounded(idle.start())
        await bounded(idle.stop(), 5, "stop while waiting for the target")
        self.assertTrue(idle.target.is_closed)

    async def test_start_fails_without_source_stream(self) -> None:
        """No such source stream: start() fails and the target connection is closed."""
        src = await self.client(self.source, "src")
        fwd = self.forwarder(src, f"js:NOPE:x.>={self.target.url}")
        await self.assertFailure(bounded(fwd.start()), txnats.StreamNotFoundError)
        await wait_until(lambda: fwd.target.is_closed, what="target closed")



class TwistdForwardTests(TwoSystems):
    async def test_twistd_forwards_both_modes(self) -> None:
        """``twistd -n nats-bridge --forward ...`` (twice: JetStream and core): the
        stream's messages reach the target stream, core messages the target's
        subscriber, /metrics counts them per route, and SIGTERM stops it cleanly."""
        from .support.bridge import BridgeProcess, http

        n = 500
        src, _, tjs = await self.setup_streams(n)
        dst = await self.client(self.target, "dst-core")
        got: list[bytes] = []
        dst.subscribe("copied.>", lambda m: got.append(m.data))
        await bounded(dst.flush())
        port = free_port()
        js_spec = self.SPEC.format(url=self.target.url)
        bridge = BridgeProcess.start(
            self, "--nats", self.source.url, "--listen", f"tcp:{port}:interface=127.0.0.1",
            "--forward", js_spec, "--forward", f"events.>:copied.>={self.target.url}",
        )
        await bridge.wait_for(r"forwarding events\.>")
        await wait_until(lambda: bridge.find("Forwarding js:ORDERS") is not None, 20,
                         what="the JetStream forwarder started")

        await self.wait_stored(tjs, "ARCHIVE", n)
        self.assertEqual(await self.stored(tjs, "ARCHIVE"), n)
        for i in range(20):
            src.publish("events.a", b"%d" % i)
        await bounded(src.flush())
        await wait_until(lambda: len(got) == 20, 20, what="20 core messages forwarded")
        metrics = await http("GET", f"http://127.0.0.1:{port}/metrics")
        self.assertIn(f'nats_bridge_forwarded_total{{route="{parse_forward(js_spec).name}"}} '
                      f'{n}.0', metrics.body.decode())
        assert bridge.transport is not None
        bridge.transport.signalProcess("TERM")
        await bounded(bridge.ended, 30, "the bridge exiting")
        self.assertEqual(bridge.exit_code, 0, "\n".join(bridge.lines[-30:]))
        self.assertIsNotNone(bridge.find("Stopped forwarding js:ORDERS"))

