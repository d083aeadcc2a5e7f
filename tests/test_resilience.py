"""Resilience figures (issue 3), proven against real nats-server processes.

Each ``Figure*`` TestCase proves one figure of the issue and prints one line
``FIGURE <n>: key=value ...`` with what it measured, then asserts the issue's threshold.
Servers and clusters are started in ``setUp`` (trial never calls ``setUpClass``) and
stopped by cleanups; every wait is bounded. ``NatsServer``/``NatsCluster`` calls block the
reactor thread: the tests rely on that where it matters (see figure 1).
"""

from __future__ import annotations

import itertools
import os
import tracemalloc
from collections import Counter
from random import Random
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txnats import (
    Client,
    ConnectionClosedError,
    Msg,
    NoRespondersError,
    Options,
    OutboundBufferFullError,
    SubscriptionClosedError,
    connect,
)
from txnats.testing import FaultProxy, NatsCluster, NatsServer

from .support.clients import CLIENT_STATES, ClientTestMixin, endpoint
from .support.events import ClientEvents, FailureLog
from .support.figures import figure, rss_bytes
from .support.waits import bounded, reactor, sleep, turn, wait_until


def runs(seqs: list[int]) -> list[tuple[int, int]]:
    """Group sorted integers into inclusive (first, last) runs of consecutive values."""
    out: list[tuple[int, int]] = []
    for _, group in itertools.groupby(enumerate(seqs), lambda p: p[1] - p[0]):
        g = [v for _, v in group]
        out.append((g[0], g[-1]))
    return out


class ClusterTestCase(TestCase):
    """Starts a fresh ``NatsCluster(nodes)`` for each test; clients close before it stops."""

    nodes = 3

    def setUp(self) -> None:
        self.cluster = NatsCluster(self.nodes).start()
        self.addCleanup(self.cluster.stop)

    async def client(self, url: str | list[str], **kwargs: Any) -> Client:
        kwargs.setdefault("connect_timeout", 2.0)
        nc = await bounded(connect(reactor, url, **kwargs), 10, f"connect to {url}")
        self.addCleanup(nc.close)
        return nc


# ====================================================================== figure 1
class Figure1PublishThroughKillsTests(ClusterTestCase):
    timeout = 120
    nodes = 2

    N = 100_000
    PAYLOAD = 128
    KILLS = 5
    BATCH = 1000
    #: How far (in messages) the subscriber may trail what was handed to the socket
    #: before the publisher waits for it (see the docstring).
    LAG = 2000
    #: Bound on the messages one kill may take with it: at most LAG were handed to the
    #: socket and not yet delivered when it died (the loop waits for that before each
    #: kill), plus what it writes to the dead socket before the client sees the reset:
    #: the batch of its turn (BATCH), which publish() hands over in 64 KiB writes past
    #: WRITE_THROUGH_AT queued bytes. Measured (4 runs, 20 kills): 1,000 (the batch),
    #: 1,455 or 1,910 (the batch and one or two 455-frame 64 KiB writes) per kill.
    MAX_LOST_PER_KILL = LAG + 2 * BATCH

    async def test_every_publish_raised_or_delivered_across_five_kills(self) -> None:
        """100k publishes, 5 kills: each raised, arrived once in order, or died in the socket."""
        # Topology: a 2-node cluster. The publisher is pinned to node 0 (seeded with it
        # alone, ignore_discovered_servers) so every kill sends it through RECONNECTING
        # with its 8 MiB buffer; the subscriber is on node 1, which never dies, so it
        # loses nothing itself. node.start() + wait_until_formed() + wait_for_interest()
        # run synchronously on the reactor thread, so the publisher cannot reconnect to
        # the restarted node before it has its route and knows the subscription (a
        # message dropped by a half-started server would be the server's loss, not ours).
        #
        # The subscriber shares this process and is slower than the publisher. Left
        # alone, nats-server would stall the publisher's socket (its flow control for
        # slow consumers) and megabytes would sit in kernel buffers at each kill. While
        # connected the loop therefore lets the subscriber trail by at most LAG
        # messages, so what a kill can take is bounded (MAX_LOST_PER_KILL).
        #
        # What is proven, exactly: at every loss the client keeps precisely the frames
        # it had not handed to the socket (a whole number of frames, counted from
        # pending_bytes when the loop first sees RECONNECTING); the missing messages
        # of each connection are one run ending right before the first kept frame.
        pub_node, sub_node = self.cluster[0], self.cluster[1]
        received: list[int] = []
        done: Deferred[None] = Deferred()
        catch_up: list[tuple[int, Deferred[None]]] = []

        def on_msg(msg: Msg) -> None:
            if msg.data == b"END":
                done.callback(None)
                return
            seq = int(msg.data[:8])
            received.append(seq)
            if catch_up and seq >= catch_up[0][0]:
                catch_up.pop()[1].callback(None)

        sub_nc = await self.client(sub_node.url, ignore_discovered_servers=True)
        sub_nc.subscribe("fig1", on_msg, pending_msgs_limit=1 << 20)
        await bounded(sub_nc.flush(5), 5, "subscriber flush")
        self.cluster.wait_for_interest("fig1")

        events = ClientEvents()
        nc = await self.client(
            pub_node.url,
            ignore_discovered_servers=True,
            reconnect_wait=0.1,
            reconnect_jitter=0.05,
            max_reconnect_attempts=-1,
            reconnect_buffer_size=8 << 20,
            **events.callbacks(),
        )
        pad = b"x" * (self.PAYLOAD - 8)
        frame_len = len(b"PUB fig1 %d\r\n" % self.PAYLOAD) + self.PAYLOAD + 2
        seq = 0
        raised: list[int] = []
        buffered: list[int] = []  # published while RECONNECTING: into the buffer
        losses: list[dict[str, int]] = []  # per kill: seq at the kill, first kept, kept
        was_connected = True

        async def wait_for_subscriber() -> None:
            handed = seq - nc.pending_bytes // frame_len
            target = handed - self.LAG
            # Nothing received yet is the furthest behind, not a reason not to wait: on a
            # busy machine the first 4000 (or, after a kill took them all, the next
            # 8000) can still be in the servers when the node dies.
            if (received[-1] if received else 0) < target:
                d: Deferred[None] = Deferred()
                catch_up.append((target, d))
                await bounded(d, 15, f"subscriber catching up to {target}")

        async def publish(
            count: int | None = None, until_raised: int | None = None, pace: bool = True
        ) -> None:
            nonlocal seq, was_connected
            n = 0
            raised_before = len(raised)
            while seq < self.N:
                if count is not None and n >= count:
                    return
                if until_raised is not None and len(raised) - raised_before >= until_raised:
                    return
                connected = nc.is_connected
                if was_connected and not connected:
                    # First publish since the loss: the buffer holds just the frames
                    # the client had not handed to the socket.
                    kept = nc.pending_bytes
                    self.assertEqual(kept % frame_len, 0, "a partial frame was kept")
                    losses[-1]["first_kept"] = seq + 1 - kept // frame_len
                    losses[-1]["kept"] = kept // frame_len
                was_connected = connected
                seq += 1
                n += 1
                try:
                    nc.publish("fig1", b"%08d" % seq + pad)
                except OutboundBufferFullError:
                    raised.append(seq)
                else:
                    if not connected:
                        buffered.append(seq)
                if connected and nc.pending_bytes > 1 << 20:
                    await bounded(nc.wait_for_room(), 10, "room in the outbound buffer")
                if seq % self.BATCH == 0:
                    await turn()
                    if pace and nc.is_connected:
                        await wait_for_subscriber()

        started = reactor.seconds()
        # Four short outages, then one that overflows the 8 MiB buffer.
        plan = [(4000, 3000, None)] * (self.KILLS - 1) + [(4000, None, 500)]
        for i, (connected_count, offline_count, overflow) in enumerate(plan):
            await publish(connected_count)
            self.assertTrue(nc.is_connected)
            losses.append({"at": seq})
            pub_node.kill()
            # No pacing now: until the client sees the reset, what it wrote may be lost.
            await publish(offline_count, until_raised=overflow, pace=False)
            self.assertTrue(nc.is_reconnecting, "the client never noticed the kill")
            self.assertIn("first_kept", losses[-1])
            pub_node.start()
            self.cluster.wait_until_formed()
            self.cluster.wait_for_interest("fig1")
            await publish(self.BATCH)  # into the buffer while the client reconnects
            await bounded(events.wait("reconnected", i + 1), 10, f"reconnection {i + 1}")
        await publish()  # the rest, connected
        self.assertEqual(seq, self.N)
        nc.publish("fig1", b"END")
        await bounded(nc.flush(10), 10, "publisher flush")
        await bounded(done, 30, "END marker at the subscriber")
        elapsed = reactor.seconds() - started

        # Delivered at most once and in order.
        duplicates = len(received) - len(set(received))
        out_of_order = sum(1 for a, b in itertools.pairwise(received) if b <= a)
        got = set(received)
        raised_set = set(raised)
        raised_delivered = raised_set & got
        buffered_lost = [s for s in buffered if s not in got]
        # What each dead connection took: the missing messages among those handed to
        # it (from the previous loss's first kept frame to this loss's first kept one).
        missing = [s for s in range(1, self.N + 1) if s not in got and s not in raised_set]
        per_connection = []
        previous = 1
        for loss in losses:
            per_connection.append(
                (loss, [s for s in missing if previous <= s < loss["first_kept"]])
            )
            previous = loss["first_kept"]
        after_last = [s for s in missing if s >= previous]
        lost_per_kill = [len(mine) for _, mine in per_connection]
        figure(
            1,
            published=self.N,
            raised=len(raised),
            delivered=len(received),
            buffered_offline=len(buffered),
            buffered_delivered=len(buffered) - len(buffered_lost),
            lost_in_socket_per_kill=lost_per_kill,
            lost_total=len(missing),
            bound_per_kill=self.MAX_LOST_PER_KILL,
            worst_kill_bytes=max(lost_per_kill) * frame_len,
            kept_unsent_at_loss=[loss["kept"] for loss in losses],
            duplicates=duplicates,
            out_of_order=out_of_order,
            reconnects=nc.stats.reconnects,
            seconds=elapsed,
        )
        self.assertEqual(duplicates, 0)
        self.assertEqual(out_of_order, 0)
        self.assertEqual(raised_delivered, set(), "a publish that raised was delivered")
        self.assertEqual(runs(buffered_lost), [], "buffered publishes were lost")
        for loss, mine in per_connection:
            if mine:
                # One run, ending right before the first frame the client kept.
                self.assertEqual(
                    runs(mine),
                    [(mine[0], loss["first_kept"] - 1)],
                    f"losses of the connection killed at {loss['at']} are not one run "
                    f"right before the first kept frame {loss['first_kept']}",
                )
        self.assertEqual(runs(after_last), [], "messages lost after the last kill")
        self.assertLessEqual(max(lost_per_kill), self.MAX_LOST_PER_KILL)
        self.assertEqual(nc.stats.reconnects, self.KILLS)


# ====================================================================== figure 2
class Figure2ReconnectBufferSweepTests(TestCase):
    timeout = 90
    #: Allowed on top of bound + 10%: the few objects the loop itself keeps alive
    #: (exceptions, the block being copied) and, for RSS, whole allocator pages.
    HEAP_SLACK = 64 * 1024
    RSS_SLACK = 256 * 1024

    def setUp(self) -> None:
        self.server = NatsServer().start()
        self.addCleanup(self.server.stop)

    async def sweep(self, bound: int, label: str, payload: int) -> None:
        events = ClientEvents()
        nc = await bounded(
            connect(
                reactor,
                self.server.url,
                reconnect_wait=0.1,
                reconnect_jitter=0.0,
                max_reconnect_attempts=-1,
                reconnect_buffer_size=bound,
                **events.callbacks(),
            ),
            10,
            "connect",
        )
        self.addCleanup(nc.close)
        received: list[int] = []
        done: Deferred[None] = Deferred()

        def on_msg(msg: Msg) -> None:
            if msg.data == b"END":
                done.callback(None)
            else:
                received.append(int(msg.data))

        # The publisher's own subscription (echo on): after the reconnection its SUB
        # goes out before the buffered PUBs, on the same socket, so nothing that fit
        # can miss it.
        nc.subscribe("fig2", on_msg, pending_msgs_limit=1 << 20)
        await bounded(nc.flush(5), 5, "flush")
        self.server.kill()
        await bounded(events.wait("disconnected", 1), 5, "disconnection")
        self.assertTrue(nc.is_reconnecting)
        frame_len = len(b"PUB fig2 %d\r\n" % payload) + payload + 2

        rss_before = rss_bytes()
        tracemalloc.start(1)
        try:
            fit = 0
            first_raise = None
            while first_raise is None:
                try:
                    nc.publish("fig2", b"%0*d" % (payload, fit + 1))
                except OutboundBufferFullError:
                    first_raise = fit + 1
                else:
                    fit += 1
            held = nc.pending_bytes
            for _ in range(3):  # and it keeps raising, queueing nothing
                self.assertRaises(OutboundBufferFullError, nc.publish, "fig2", b"x" * payload)
            py_heap, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        rss_delta = rss_bytes() - rss_before
        self.assertEqual(nc.pending_bytes, held)
        self.assertEqual(nc.pending_bytes, held)

        log_mark = len(self.server.log_lines)
        self.server.start()
        await bounded(events.wait("reconnected", 1), 10, "reconnection")
        nc.publish("fig2", b"END")
        await bounded(done, 30, "END marker")
        server_errors = [
            line
            for line in self.server.log_lines[log_mark:]
            if "[ERR]" in line or "parser" in line.lower()
        ]
        figure(
            2,
            bound=label,
            frame_bytes=frame_len,
            fit=fit,
            buffered_bytes=held,
            first_overflow_raised_at=first_raise,
            delivered=len(received),
            delivered_once_in_order=received == list(range(1, fit + 1)),
            server_parse_errors=len(server_errors),
            heap_bytes=py_heap,
            heap_over_bound=f"{py_heap / bound:.3f}" if bound >= 1 << 20 else "n/a",
            rss_delta_bytes=rss_delta,
        )
        # Whole frames only, as many as fit, and the first one that did not fit raised.
        self.assertEqual(fit, bound // frame_len)
        self.assertEqual(held, fit * frame_len)
        self.assertLessEqual(held, bound)
        self.assertEqual(first_raise, fit + 1)
        # Memory: what Python allocated (and kept) while filling the buffer, exactly
        # (tracemalloc), and the resident set, which is lower when the allocator
        # reuses pages freed earlier in the process.
        self.assertLessEqual(py_heap, bound * 1.1 + self.HEAP_SLACK)
        self.assertLessEqual(rss_delta, bound * 1.1 + self.RSS_SLACK)
        # What fit arrived once, in order; the server never saw a partial frame.
        self.assertEqual(received, list(range(1, fit + 1)))
        self.assertEqual(server_errors, [])

    async def test_disabled(self) -> None:
        """Buffer 0: the first publish while disconnected raises; nothing is sent later."""
        await self.sweep(0, "0", payload=8)

    async def test_32_bytes(self) -> None:
        """A 32 B buffer takes one 22 B frame, raises on the next, sends that frame once."""
        await self.sweep(32, "32B", payload=8)

    async def test_1_mib(self) -> None:
        """1 MiB of 144 B frames: all that fit, then a raise; sent once; memory <= bound + 10%."""
        await self.sweep(1 << 20, "1MiB", payload=128)

    async def test_8_mib(self) -> None:
        """8 MiB of 144 B frames: all that fit, then a raise; sent once; memory <= bound + 10%."""
        await self.sweep(8 << 20, "8MiB", payload=128)


# ====================================================================== figure 3
class Figure3ClusterFailoverTests(ClusterTestCase):
    timeout = 60
    nodes = 3
    SUBS = 50
    REQUESTS = 100
    #: A SIGSTOPped node keeps advertising the client's old queue subscriptions over
    #: its (half-open) routes, and nats-server may pick that member: each queue
    #: subscription gets this many messages and must receive at least one (the
    #: chance that all go to the frozen member is 2**-16). connz proves the rest.
    QUEUE_COPIES = 16
    RECONNECT_WAIT = 0.5
    PING_INTERVAL = 0.5
    MAX_PINGS_OUT = 2
    #: Scheduler slack on a loaded 2-core machine: timer lateness, the dial and the
    #: handshake with the next server, the reactor turn that runs the callback.
    SLACK = 0.25

    async def prepare(self, **options: Any) -> tuple[Client, ClientEvents, dict[str, Any]]:
        """A responder on node 2, and the client seeded with node 0 alone, with 50 subs."""
        responder = await self.client(self.cluster[2].url, ignore_discovered_servers=True)
        responder.subscribe("fig3.svc", lambda m: m.respond(b"re:" + m.data))
        await bounded(responder.flush(5), 5, "responder flush")
        self.cluster.wait_for_interest("fig3.svc")

        events = ClientEvents()
        nc = await self.client(
            self.cluster[0].url,
            name="fig3",
            reconnect_wait=self.RECONNECT_WAIT,
            max_reconnect_attempts=-1,
            **options,
            **events.callbacks(),
        )
        self.assertEqual(nc.connected_url, self.cluster[0].url)
        got: dict[str, list[bytes]] = {}
        subs: dict[str, Any] = {}
        for i in range(self.SUBS):
            kind = ("plain", "queue", "auto")[i % 3]
            subject = f"fig3.{kind}.{i}"
            got[subject] = []
            handler = got[subject].append
            if kind == "plain":
                subs[subject] = nc.subscribe(subject, lambda m, h=handler: h(m.data))
            elif kind == "queue":
                subs[subject] = nc.subscribe(
                    subject, lambda m, h=handler: h(m.data), queue="workers"
                )
            else:
                subs[subject] = nc.subscribe(subject, lambda m, h=handler: h(m.data), max_msgs=3)
        # One message to each auto-unsubscribe subscription before the failure (its
        # limit is then 2 more), and one request, so that the request inbox exists.
        for subject in got:
            if ".auto." in subject:
                nc.publish(subject, b"before")
        reply = await bounded(nc.request("fig3.svc", b"x", timeout=2), 3, "first request")
        self.assertEqual(reply.data, b"re:x")
        await bounded(nc.flush(5), 5, "flush")
        autos = [s for s in got if ".auto." in s]
        await wait_until(lambda: all(got[s] == [b"before"] for s in autos), 5, "auto subs")
        return nc, events, {"got": got, "subs": subs}

    async def check_restored(
        self, nc: Client, state: dict[str, Any], publisher_url: str
    ) -> dict[str, Any]:
        """Publish to every subscription after the failover, then make 100 requests.

        Returns what it measured; the test asserts on it after printing its figure.
        """
        got: dict[str, list[bytes]] = state["got"]
        subs: dict[str, Any] = state["subs"]
        await bounded(nc.flush(5), 5, "flush after reconnect")
        # What the new node holds for this client: every subscription, queue groups
        # kept, auto-unsubscribe limits reduced by what was delivered (3 - 1 = 2).
        node = next(n for n in self.cluster if n.url == nc.connected_url)
        conns = node.monitor("connz", subs="detail")["connections"]
        on_server = {
            (s["subject"], s.get("qgroup"), s.get("max"))
            for c in conns
            if c.get("name") == "fig3"
            for s in c.get("subscriptions_list_detail") or []
        }
        expected = {
            (s, "workers" if ".queue." in s else None, 2 if ".auto." in s else None) for s in got
        }
        for subject in got:
            self.cluster.wait_for_interest(subject)
        pub = await self.client(publisher_url, ignore_discovered_servers=True)
        for subject in got:
            count = self.QUEUE_COPIES if ".queue." in subject else 3 if ".auto." in subject else 1
            for _ in range(count):
                pub.publish(subject, b"after")
        marker = "fig3.plain.0"
        pub.publish(marker, b"marker")  # after everything else, on the same route
        await bounded(pub.flush(5), 5, "publisher flush")
        await wait_until(lambda: got[marker][-1:] == [b"marker"], 5, "marker")
        autos = [s for s in got if ".auto." in s]
        not_delivered = [s for s in got if b"after" not in got[s]]
        timeouts = failures = 0
        for i in range(self.REQUESTS):
            try:
                # 5 s, not 1: a lost request fails either way, and a loaded machine
                # must not turn a slow answer into a counted timeout.
                msg = await nc.request("fig3.svc", b"%d" % i, timeout=5.0)
            except TimeoutError:
                timeouts += 1
            except Exception:
                failures += 1
            else:
                if msg.data != b"re:%d" % i:
                    failures += 1
        return {
            "missing_on_server": sorted(expected - on_server),
            "not_delivered": not_delivered,
            "auto_counts": {len(got[s]) for s in autos},
            "autos_active": [s for s in autos if subs[s].is_active],
            "restored": len(got) - len(not_delivered),
            "timeouts": timeouts,
            "failures": failures,
        }

    def assert_restored(self, result: dict[str, Any]) -> None:
        self.assertEqual(result["missing_on_server"], [], "subscriptions not re-sent")
        self.assertEqual(result["not_delivered"], [], "subscriptions not restored")
        # Auto-unsubscribe limits were reduced by what was delivered: 1 + 2, never 1 + 3.
        self.assertEqual(result["auto_counts"], {3})
        self.assertEqual(result["autos_active"], [])
        self.assertEqual((result["timeouts"], result["failures"]), (0, 0))

    async def test_kill_connected_node(self) -> None:
        """Kill the node: elsewhere within 2 x reconnect_wait, 50 subs restored, 100 requests ok."""
        nc, events, state = await self.prepare()
        node0 = self.cluster[0]
        t0 = reactor.seconds()
        node0.kill()
        t1 = await bounded(events.wait("reconnected", 1), 5, "reconnection")
        took = t1 - t0
        survivors = {self.cluster[1].url, self.cluster[2].url}
        self.assertIn(nc.connected_url, survivors)
        # Publish from the survivor the client is not on: across a route.
        other = (survivors - {nc.connected_url}).pop()
        result = await self.check_restored(nc, state, other)
        figure(
            3,
            case="kill",
            reconnect_seconds=took,
            bound_seconds=2 * self.RECONNECT_WAIT,
            subscriptions_restored=f"{result['restored']}/{self.SUBS}",
            requests=self.REQUESTS,
            request_timeouts=result["timeouts"],
        )
        self.assertLessEqual(took, 2 * self.RECONNECT_WAIT)
        self.assert_restored(result)

    async def test_sigstop_connected_node(self) -> None:
        """SIGSTOP the node: stale within (N+1)P, reconnected within (N+1)P + reconnect_wait."""
        nc, events, state = await self.prepare(
            ping_interval=self.PING_INTERVAL, max_pings_out=self.MAX_PINGS_OUT
        )
        node0 = self.cluster[0]
        t0 = reactor.seconds()
        node0.pause()
        t_detect = await bounded(events.wait("disconnected", 1), 10, "stale detection")
        t_rec = await bounded(events.wait("reconnected", 1), 10, "reconnection")
        stale = (self.MAX_PINGS_OUT + 1) * self.PING_INTERVAL
        detected, reconnected = t_detect - t0, t_rec - t0
        self.assertIn("PING", str(events.disconnect_reasons[0]))
        self.assertIn(nc.connected_url, {self.cluster[1].url, self.cluster[2].url})
        result = await self.check_restored(nc, state, nc.connected_url or "")
        figure(
            3,
            case="sigstop",
            detect_seconds=detected,
            detect_bound=stale,
            reconnect_seconds=reconnected,
            reconnect_bound=stale + self.RECONNECT_WAIT,
            slack=self.SLACK,
            subscriptions_restored=f"{result['restored']}/{self.SUBS}",
            requests=self.REQUESTS,
            request_timeouts=result["timeouts"],
        )
        self.assertLessEqual(detected, stale + self.SLACK)
        self.assertLessEqual(reconnected, stale + self.RECONNECT_WAIT + self.SLACK)
        self.assert_restored(result)


# ====================================================================== figure 4
class Figure4ThunderingHerdTests(ClusterTestCase):
    timeout = 60
    nodes = 3
    CLIENTS = 32
    DEADLINE = 5.0

    async def test_32_clients_fail_over_and_spread(self) -> None:
        """32 clients on one node of 3, kill it: all back within 5 s, 8..24 per survivor.

        Each client shuffles the two servers it discovers with its own generator, and
        tries the first of them when node 0 dies. With unseeded generators the split is
        Binomial(32, 1/2), outside 8..24 once in ~480 runs; each client here gets
        ``Random(i)`` instead, so its coin is fixed: node 0 gives every client the
        same ``connect_urls``, and seeds 0..31 split them 14/18 (18/14 for the other
        order). That clients made without ``rng`` are seeded independently is
        ``test_server_pool.OrderingTests.test_default_generators_differ``.
        """
        node0 = self.cluster[0]
        clients: list[tuple[Client, ClientEvents]] = []
        for i in range(self.CLIENTS):
            events = ClientEvents()
            options = Options(
                connect_timeout=2.0,
                reconnect_wait=0.5,
                max_reconnect_attempts=-1,
                **events.callbacks(),
            )
            client = Client(reactor, node0.url, options, rng=Random(i))
            nc = await bounded(client.start(), 10, f"connect to {node0.url}")
            self.addCleanup(nc.close)
            self.assertEqual(nc.connected_url, node0.url)
            self.assertEqual(len(nc.servers), 3)  # the other two were discovered
            clients.append((nc, events))
        t0 = reactor.seconds()
        node0.kill()
        times = []
        for _nc, events in clients:
            t = await bounded(events.wait("reconnected", 1), self.DEADLINE + 5, "reconnection")
            times.append(t - t0)
        on = {n.url: 0 for n in self.cluster}
        for nc, _ in clients:
            on[nc.connected_url or ""] = on.get(nc.connected_url or "", 0) + 1
        counts = [on[self.cluster[1].url], on[self.cluster[2].url]]
        even = self.CLIENTS / 2
        figure(
            4,
            clients=self.CLIENTS,
            all_reconnected_seconds=max(times),
            median_seconds=sorted(times)[len(times) // 2],
            per_survivor=counts,
            allowed=f"{even * 0.5:.0f}..{even * 1.5:.0f}",
            on_killed_node=on[node0.url],
        )
        self.assertLessEqual(max(times), self.DEADLINE)
        self.assertEqual(sum(counts), self.CLIENTS)
        for c in counts:
            self.assertGreaterEqual(c, even * 0.5)
            self.assertLessEqual(c, even * 1.5)


# ====================================================================== figure 5
class Figure5LameDuckTests(ClusterTestCase):
    timeout = 60
    nodes = 3
    REQUESTS = 3000
    WORKERS = 2
    LAME_DUCK_AFTER = 1000

    async def test_lame_duck_during_request_loop(self) -> None:
        """Lame duck mid-loop: callback once, moved before the node exits, 0 timeouts."""
        # The client (on node 0, seeded with it alone) runs WORKERS request loops
        # against a responder on node 1; after LAME_DUCK_AFTER requests node 0 enters
        # lame duck mode (nats-server then keeps serving its clients for its 10 s
        # grace period). The client connects to another node first, subscribes there,
        # switches, and only then closes the old connection: the replies to requests
        # in flight at the switch still arrive, so every request must succeed.
        node0, node1 = self.cluster[0], self.cluster[1]
        responder = await self.client(node1.url, ignore_discovered_servers=True)
        responder.subscribe("fig5.svc", lambda m: m.respond(m.data))
        await bounded(responder.flush(5), 5, "responder flush")
        self.cluster.wait_for_interest("fig5.svc")

        events = ClientEvents()
        switch: dict[str, Any] = {}

        def on_reconnected() -> None:
            # Where the old node is at the moment the client is on a new one.
            switch.setdefault("old_running", node0.running)
            switch.setdefault("old_in_lame_duck", node0.in_lame_duck)
            switch.setdefault(
                "old_exited", any("Server Exiting" in line for line in node0.log_lines)
            )

        events.on_reconnected.append(on_reconnected)
        nc = await self.client(
            node0.url, reconnect_wait=0.5, max_reconnect_attempts=-1, **events.callbacks()
        )
        counts = {"ok": 0, "timeouts": 0, "failed": 0, "started": 0}
        in_flight = {"now": 0, "at_switch": 0}

        async def worker(w: int) -> None:
            while counts["started"] < self.REQUESTS:
                counts["started"] += 1
                i = counts["started"]
                in_flight["now"] += 1
                try:
                    # 5 s, not 1: a request lost in the switch times out either way;
                    # one queued behind a handshake slowed by a loaded machine must not.
                    msg = await nc.request("fig5.svc", b"%d" % i, timeout=5.0)
                except TimeoutError:
                    counts["timeouts"] += 1
                except Exception:
                    counts["failed"] += 1
                else:
                    counts["ok" if msg.data == b"%d" % i else "failed"] += 1
                finally:
                    in_flight["now"] -= 1

        async def lame_duck() -> None:
            await wait_until(
                lambda: counts["started"] >= self.LAME_DUCK_AFTER, 30, "first requests"
            )
            switch["t_ldm"] = reactor.seconds()
            in_flight["at_switch"] = in_flight["now"]
            node0.lame_duck()

        started = reactor.seconds()
        ldm = Deferred.fromCoroutine(lame_duck())
        workers = [Deferred.fromCoroutine(worker(w)) for w in range(self.WORKERS)]
        await bounded(ldm, 30, "lame duck")
        t_rec = await bounded(events.wait("reconnected", 1), 10, "move to another node")
        for d in workers:
            await bounded(d, 60, "request loop")
        elapsed = reactor.seconds() - started
        total = counts["ok"] + counts["timeouts"] + counts["failed"]
        figure(
            5,
            requests=total,
            ok=counts["ok"],
            timeouts=counts["timeouts"],
            other_failures=counts["failed"],
            timeout_pct=100.0 * counts["timeouts"] / total,
            in_flight_at_switch=in_flight["at_switch"],
            lame_duck_callbacks=events.count("lame_duck"),
            moved_seconds=t_rec - switch["t_ldm"],
            old_node_running_when_moved=switch["old_running"],
            seconds=elapsed,
        )
        self.assertEqual(total, self.REQUESTS)
        self.assertEqual(events.count("lame_duck"), 1)
        self.assertEqual(events.count("reconnected"), 1)
        self.assertNotEqual(nc.connected_url, node0.url)
        self.assertTrue(switch["old_running"] and switch["old_in_lame_duck"])
        self.assertFalse(switch["old_exited"])
        self.assertTrue(node0.running, "the lame duck node must outlive the switch")
        self.assertEqual(counts["timeouts"], 0)
        self.assertEqual(counts["failed"], 0)


# ====================================================================== figure 7
def _chaos_seconds() -> float:
    return float(os.environ.get("TXNATS_CHAOS_SECONDS", "20"))


class Figure7ChaosTests(ClusterTestCase):
    nodes = 2
    timeout = _chaos_seconds() + 60
    WORKERS = 4
    PING_INTERVAL = 0.3
    MAX_PINGS_OUT = 2
    #: RSS growth allowed from the end of the warm-up to the end of the run.
    RSS_SLACK = 4 << 20

    async def test_chaos_through_fault_proxies(self) -> None:
        """Resets, delays, blackholes, cut frames: >= 99% requests ok, no errors, flat memory."""
        duration = _chaos_seconds()
        failures = FailureLog()
        self.addCleanup(failures.install())
        proxies = []
        for node in self.cluster:
            proxy = FaultProxy(reactor, node.host, node.port)
            proxy.listen()
            self.addCleanup(proxy.stop)
            proxies.append(proxy)
        by_url = {p.url: p for p in proxies}
        responder = await self.client(self.cluster[0].url, ignore_discovered_servers=True)
        responder.subscribe("fig7.svc", lambda m: m.respond(m.data))
        await bounded(responder.flush(5), 5, "responder flush")
        self.cluster.wait_for_interest("fig7.svc")

        events = ClientEvents()
        nc = await self.client(
            [p.url for p in proxies],
            ignore_discovered_servers=True,
            ping_interval=self.PING_INTERVAL,
            max_pings_out=self.MAX_PINGS_OUT,
            reconnect_wait=0.2,
            connect_timeout=1.0,
            max_reconnect_attempts=-1,
            **events.callbacks(),
        )
        counts = {"ok": 0, "timeouts": 0, "failed": 0}
        other_errors: list[str] = []
        running = [True]

        async def worker(w: int) -> None:
            i = 0
            while running[0]:
                i += 1
                body = b"%d.%d" % (w, i)
                try:
                    msg = await nc.request("fig7.svc", body, timeout=1.0)
                except TimeoutError:
                    counts["timeouts"] += 1
                except Exception as e:
                    counts["failed"] += 1
                    other_errors.append(repr(e))
                    await sleep(0.01)
                else:
                    counts["ok" if msg.data == body else "failed"] += 1

        async def current_proxy() -> FaultProxy:
            await wait_until(lambda: nc.is_connected, 10, "reconnection")
            return by_url[nc.connected_url or ""]

        def forget_recordings() -> None:
            # FaultProxy records every byte for assertions; this test does not need
            # them, and they would grow with the traffic (test memory, not client's).
            for proxy in proxies:
                for session in proxy.sessions:
                    session._client_chunks.clear()
                    session._server_chunks.clear()

        faults = {"reset": 0, "delay": 0, "blackhole": 0, "cut": 0}
        blackhole_detect: list[float] = []
        rss: dict[str, int] = {}

        async def chaos() -> None:
            start = reactor.seconds()
            kinds = itertools.cycle(faults)
            while reactor.seconds() - start < duration:
                if "start" not in rss and reactor.seconds() - start > min(3.0, duration / 4):
                    forget_recordings()
                    rss["start"] = rss_bytes()
                await sleep(0.7)
                kind = next(kinds)
                proxy = await current_proxy()
                faults[kind] += 1
                if kind == "reset":
                    proxy.reset_all()
                elif kind == "delay":
                    proxy.delay(0.1)
                    await sleep(1.0)
                    proxy.pass_through()
                elif kind == "blackhole":
                    lost = events.wait("disconnected")
                    t0 = reactor.seconds()
                    proxy.blackhole()
                    blackhole_detect.append(await bounded(lost, 5, "stale detection") - t0)
                    await sleep(0.2)
                    proxy.pass_through()
                else:
                    armed_on, armed_at = proxy.url, reactor.seconds()
                    try:
                        await bounded(proxy.cut_next_frame(), 5, "a cut frame")
                    except AssertionError as e:
                        # Seen once in ~50 full runs under load (a session whose client
                        # side was gone took the cut: guarded in the proxy since). Should
                        # it happen again, say where things were.
                        state = [
                            (p.url, str(p.mode), [(c.number, c.open, c.bytes_from_server)
                                                  for c in p.sessions[-3:]])
                            for p in proxies
                        ]
                        recent = {k: [round(t - armed_at, 3) for t in v[-3:]]
                                  for k, v in events.times.items()}
                        raise AssertionError(
                            f"{e}: armed on {armed_on}; client now on {nc.connected_url} "
                            f"({nc.state}); proxies (url, mode, last sessions (number, open, "
                            f"bytes from server)) {state}; client events since arming {recent}"
                        ) from None
                forget_recordings()

        workers = [Deferred.fromCoroutine(worker(w)) for w in range(self.WORKERS)]
        try:
            await bounded(Deferred.fromCoroutine(chaos()), duration + 30, "the chaos run")
        finally:
            running[0] = False
            for d in workers:
                await bounded(d, 5, "workers to stop")
        for proxy in proxies:
            proxy.pass_through()
        await current_proxy()
        forget_recordings()
        rss["end"] = rss_bytes()
        total = sum(counts.values())
        ok_pct = 100.0 * counts["ok"] / total
        stale = (self.MAX_PINGS_OUT + 1) * self.PING_INTERVAL
        figure(
            7,
            seconds=duration,
            requests=total,
            ok=counts["ok"],
            timeouts=counts["timeouts"],
            other_failures=counts["failed"],
            ok_pct=ok_pct,
            faults="/".join(f"{k}:{v}" for k, v in faults.items()),
            reconnects=nc.stats.reconnects,
            blackhole_detect_max=max(blackhole_detect, default=0.0),
            stale_bound=stale,
            error_cb=len(events.errors),
            logged_failures=len(failures.events),
            rss_start=rss.get("start", 0),
            rss_growth=rss["end"] - rss.get("start", rss["end"]),
        )
        self.assertGreaterEqual(ok_pct, 99.0)
        self.assertEqual(other_errors, [])
        self.assertEqual(events.errors, [])
        self.assertEqual(failures.events, [])
        self.assertLessEqual(rss["end"] - rss["start"], self.RSS_SLACK)
        self.assertTrue(all(faults.values()), faults)


# ====================================================================== figure 6
# Already proven by the existing fake-clock unit tests (not repeated here):
#   - stale detection at exactly (N+1)P, PINGs at P..NP, for 25 seeded random (P, N)
#     and handshake times: test_connection.PingTests.test_stale_random_parameters and
#     test_stale_at_exactly_n_plus_one_intervals (at the protocol level);
#   - 3 dead servers x max_reconnect_attempts=5 -> 15 dials, 5 per server, waits in
#     [reconnect_wait, reconnect_wait + jitter], closed once with NoServersError, no
#     timers left: test_client_unit.ReconnectScheduleTests.test_attempts_and_waits
#     (first connect with retry_on_failed_connect; it does not check the close time);
#   - close() and drain() twice in 8 states (CONNECTING scheduled/dialling/handshake,
#     CONNECTED, RECONNECTING waiting/dialling/handshake, CLOSED): their Deferreds and
#     the first connect fire, no delayed calls, closed_cb once:
#     test_client_unit.CloseDrainTests.test_close_every_state / test_drain_every_state.
# Added below: stale detection through the client (and where it redials), exact dial
# and close times after losing a live connection, and that no dial or transport and
# no pending flush/request/next_msg is left behind by close()/drain().
def _dial_protocol(clock: MemoryReactorClock, index: int) -> Any:
    factory = clock.tcpClients[index][2]
    return getattr(factory, "_wrappedFactory", factory)._proto


class Figure6LifecycleTests(ClientTestMixin, SynchronousTestCase):
    def test_stale_detected_at_n_plus_one_p_then_redial_elsewhere_at_once(self) -> None:
        """Random P, N: a silent server is dropped at exactly (N+1)P and another dialled then."""
        rng = Random(3003)
        eps = 1 / 64
        cases = []
        for _ in range(12):
            p = rng.randint(2, 40) / 8
            n = rng.randint(1, 4)  # (max_pings_out=0 is refused: it drops any connection)
            wait = rng.randint(1, 16) / 4
            lost: list[float] = []
            client = self.make_client(
                [endpoint(4222)],
                ping_interval=p,
                max_pings_out=n,
                reconnect_wait=wait,
                reconnect_jitter=0.0,
                disconnected_cb=lambda e, lost=lost: lost.append(self.clock.seconds()),
            )
            self.clock.advance(rng.randint(0, 100) / 4)  # a random handshake time
            client.start()
            self.clock.advance(0)
            # The server announces a second one, discovered behind the seed.
            server = self.accept(connect_urls=["127.0.0.1:4223"])
            ready = self.clock.seconds()
            self.assertEqual(len(client.servers), 2)
            for _ in range(n):  # (Clock.advance runs one tick per call of a periodic timer)
                self.clock.advance(p)
            self.clock.advance(p - eps)
            self.assertFalse(server.transport.disconnected, (p, n))
            self.assertEqual(server.transport.value(), b"PING\r\n" * n)
            self.clock.advance(eps)
            self.assertTrue(server.transport.disconnected, (p, n))
            server.lose()
            self.clock.advance(0)
            self.assertEqual(lost, [ready + (n + 1) * p])
            # The first retry: at once, and to the other server, not the silent one.
            self.assertEqual(len(self.clock.tcpClients), 2)
            self.assertEqual(self.clock.tcpClients[-1][1], 4223)
            cases.append((p, n))
            client.close()
            self.clock.advance(0)
        figure(6, check="stale_detection", cases=len(cases), exact=True, first_retry="other_server")

    def test_reconnect_schedule_exact_dials_and_close_time(self) -> None:
        """3 dead servers x 5 attempts after a loss: 15 dials at exact times, closed at the last."""
        results = {}
        for refuse in (True, False):
            wait, timeout = 2.0, 0.5
            closed: list[float] = []
            client, server = self.connected(
                servers=[endpoint(4222), endpoint(4223), endpoint(4224)],
                max_reconnect_attempts=5,
                reconnect_wait=wait,
                reconnect_jitter=0.0,
                connect_timeout=timeout,
                closed_cb=lambda closed=closed: closed.append(self.clock.seconds()),
            )
            self.clock.advance(10.0)
            server.lose()
            dials = self.fail_dials(refuse)
            self.assertEqual(len(dials), 15)
            self.assertEqual(Counter(port for _, port in dials), {4222: 5, 4223: 5, 4224: 5})
            # The lost server goes last; each server again no sooner than reconnect_wait
            # after its previous dial; with timeouts each dial also waits for the last.
            step = 0.0 if refuse else timeout
            expected = [
                (10.0 + k * wait + i * step, port)
                for k in range(5)
                for i, port in enumerate((4223, 4224, 4222))
            ]
            self.assertEqual(dials, expected)
            close_at = dials[-1][0] + (0.0 if refuse else timeout)
            self.assertEqual(closed, [close_at])
            self.assertTrue(client.is_closed)
            self.assertEqual(self.clock.getDelayedCalls(), [])
            results["refused" if refuse else "silent"] = (len(dials), closed[0])
        figure(
            6,
            check="reconnect_schedule",
            refused_dials=results["refused"][0],
            refused_closed_at=results["refused"][1],
            silent_dials=results["silent"][0],
            silent_closed_at=results["silent"][1],
            loss_at=10.0,
        )

    def test_close_and_drain_leave_nothing_behind_in_any_state(self) -> None:
        """close()/drain() twice in any state: pending ops fire; no dial, transport, timer left."""
        checked = 0
        for state in CLIENT_STATES:
            for op in (Client.close, Client.drain):
                server, first = self.setup_state(state)
                client = self.client
                pending = []
                if state != "CLOSED":
                    pending.append(client.flush(timeout=None))
                    pending.append(client.request("svc", b"x", timeout=None))
                    pending.append(client.subscribe("z").next_msg(timeout=None))
                results = [op(client), op(client)]
                if first is not None:
                    first.addErrback(lambda f: None)
                self.pump(server)
                for d in results:
                    self.assertIsNone(self.successResultOf(d), (state, op))
                for d in pending:
                    self.assertTrue(d.called, (state, op))
                    # (Draining a connected client lets the request end first: the
                    # cooperative server answers it as nats-server would, no responders.)
                    d.addErrback(lambda f: f.trap(
                        ConnectionClosedError, SubscriptionClosedError, NoRespondersError
                    ))
                for i, connector in enumerate(self.clock.connectors):
                    proto = _dial_protocol(self.clock, i)
                    if proto.transport is None:
                        self.assertTrue(connector.stoppedConnecting, (state, op, i))
                    else:
                        self.assertTrue(proto.lost, (state, op, i))
                self.assertIsNone(client._proto)
                self.assertIsNone(client._connector._call)
                self.assertIsNone(client._connector._dialling)
                self.assertEqual(self.clock.getDelayedCalls(), [], (state, op))
                self.assertTrue(client.is_closed)
                checked += 1
        figure(
            6,
            check="close_drain_every_state",
            states=len(CLIENT_STATES),
            ops=2,
            calls_each=2,
            cases=checked,
            timers_left=0,
            transports_left=0,
        )


# ====================================================================== found on the way
class WaitForRoomAcrossLossTests(ClientTestMixin, SynchronousTestCase):
    """The publish loop of figure 1 waits for room; a loss must not leave it stuck."""

    def test_room_waiter_fires_when_the_connection_drops(self) -> None:
        """wait_for_room() pending at a loss fires then, as it does when called disconnected."""
        client, server = self.connected(reconnect_wait=100, reconnect_jitter=0)
        proto = client._proto
        assert proto is not None
        proto.pauseProducing()  # the socket is full: publishes stay in the client
        for _ in range(10):
            client.publish("a", b"x" * 1000)
        waiting = client.wait_for_room()
        self.clock.advance(0)
        self.assertNoResult(waiting)
        server.lose()
        self.clock.advance(0)
        # Disconnected: wait_for_room() called now returns at once, so the pending one
        # fires too (publishes go to the bounded reconnect buffer, or raise).
        self.assertTrue(client.wait_for_room().called)
        self.assertIsNone(self.successResultOf(waiting))
        self.assertEqual(client.pending_bytes, 10 * len(b"PUB a 1000\r\n" + b"x" * 1000 + b"\r\n"))
