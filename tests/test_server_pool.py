"""The server pool keeps what the cluster announces now, within a bound.

``ServerPool.add_discovered`` takes each INFO's ``connect_urls`` as the cluster's current
view: discovered servers it no longer lists leave the pool (never the ones the user gave,
never the current one), and at most ``MAX_DISCOVERED`` discovered servers are kept. The
last two classes show what that buys a client: after the cluster forgets five dead
servers, failover dials the live one first, on a fake clock and against real servers.
"""

from __future__ import annotations

import random
import sys
import tracemalloc
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.trial.unittest import SynchronousTestCase, TestCase

from txnats import Client, _connector, connect
from txnats.servers import MAX_DISCOVERED, Server, ServerPool, parse_server, parse_servers
from txnats.testing import NatsCluster, ServerSide

from .support.clients import ClientTestMixin, endpoint
from .support.events import ClientEvents
from .support.waits import bounded, reactor, wait_until
from .support.wire import info_line

DEAD = [f"127.0.0.1:{port}" for port in range(5001, 5006)]
LIVE = "127.0.0.1:4223"


def hostports(pool: ServerPool) -> list[str]:
    return [s.hostport for s in pool.servers]


def ip_urls(n: int, port: int = 4222) -> list[str]:
    """``n`` distinct ``host:port`` strings (10.x.y.z addresses)."""
    return [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:{port}" for i in range(n)]


class PruningTests(SynchronousTestCase):
    def fixed(self, servers: str = "nats://u1:1,nats://u2:2") -> tuple[ServerPool, Server]:
        """A pool of user servers in the given order; the first is the current one."""
        pool = ServerPool(parse_servers(servers), randomize=False)
        return pool, pool.servers[0]

    def test_later_info_replaces_discovered_servers(self) -> None:
        """INFO [A, B] then INFO [C] leaves the user's servers and C: A and B are gone."""
        pool, current = self.fixed()
        self.assertEqual(
            [s.hostport for s in pool.add_discovered(["a:4222", "b:4222"], current)],
            ["a:4222", "b:4222"],
        )
        new = pool.add_discovered(["c:4222"], current)
        self.assertEqual([s.hostport for s in new], ["c:4222"])
        self.assertEqual(hostports(pool), ["u1:1", "u2:2", "c:4222"])
        self.assertEqual([s.discovered for s in pool.servers], [False, False, True])

    def test_user_servers_are_never_pruned(self) -> None:
        """Servers the user gave stay when INFO does not list them, in their order."""
        pool, current = self.fixed("nats://u1:1,nats://u2:2,nats://u3:3")
        pool.add_discovered(["a:4222"], current)
        pool.add_discovered(["b:4222"], current)
        self.assertEqual(hostports(pool), ["u1:1", "u2:2", "u3:3", "b:4222"])
        # Even when the current server is a discovered one.
        pool.add_discovered(["c:4222"], pool.servers[-1])
        self.assertEqual(hostports(pool), ["u1:1", "u2:2", "u3:3", "b:4222", "c:4222"])

    def test_current_server_is_never_pruned(self) -> None:
        """A discovered server the client is connected to stays although INFO drops it;
        it goes at the next INFO received while connected elsewhere."""
        pool, seed = self.fixed("nats://u1:1")
        pool.add_discovered(["a:4222", "b:4222"], seed)
        a = pool.servers[1]
        self.assertEqual(pool.add_discovered(["b:4222"], a), [])
        self.assertEqual(hostports(pool), ["u1:1", "a:4222", "b:4222"])
        pool.add_discovered(["b:4222"], pool.servers[2])
        self.assertEqual(hostports(pool), ["u1:1", "b:4222"])

    def test_empty_info_prunes_nothing(self) -> None:
        """An INFO announcing no servers (no_advertise, or an old server) is no view:
        nothing is removed, nothing added."""
        pool, current = self.fixed()
        pool.add_discovered(["a:4222"], current)
        self.assertEqual(pool.add_discovered([], current), [])
        self.assertEqual(hostports(pool), ["u1:1", "u2:2", "a:4222"])

    def test_servers_stays_the_same_list(self) -> None:
        """Pruning changes ``servers`` in place: a reference taken before still sees it."""
        pool, current = self.fixed()
        servers = pool.servers
        pool.add_discovered(["a:4222"], current)
        pool.add_discovered(["b:4222"], current)
        self.assertIs(pool.servers, servers)
        self.assertEqual([s.hostport for s in servers], ["u1:1", "u2:2", "b:4222"])

    def test_kept_servers_keep_their_state_and_order(self) -> None:
        """A server still announced is the same object (its reconnect bookkeeping stays),
        in the place the client moved it to; only the forgotten one goes."""
        pool, current = self.fixed("nats://u1:1")
        pool.add_discovered(["a:4222", "b:4222", "c:4222"], current)
        a = pool.servers[1]
        a.attempts = 3
        pool.servers.remove(a)  # as the client does with a lost server
        pool.servers.append(a)
        self.assertEqual(pool.add_discovered(["c:4222", "a:4222"], current), [])
        self.assertEqual(hostports(pool), ["u1:1", "c:4222", "a:4222"])
        self.assertIs(pool.servers[-1], a)
        self.assertEqual(a.attempts, 3)

    def test_forgotten_server_comes_back_as_new(self) -> None:
        """A server dropped by one INFO and announced again by a later one is new again
        (the client reports it to discovered_servers_cb once more)."""
        pool, current = self.fixed("nats://u1:1")
        pool.add_discovered(["a:4222", "b:4222"], current)
        pool.add_discovered(["b:4222"], current)
        again = pool.add_discovered(["b:4222", "a:4222"], current)
        self.assertEqual([s.hostport for s in again], ["a:4222"])
        self.assertEqual(hostports(pool), ["u1:1", "b:4222", "a:4222"])

    def test_server_removed_by_the_client_is_forgotten(self) -> None:
        """A discovered server the client took out of ``servers`` (refused credentials
        twice) is not resurrected by pruning; a later INFO may add it as new."""
        pool, current = self.fixed("nats://u1:1")
        pool.add_discovered(["a:4222", "b:4222"], current)
        pool.servers.remove(pool.servers[1])
        self.assertEqual(pool.add_discovered(["b:4222"], current), [])
        self.assertEqual(hostports(pool), ["u1:1", "b:4222"])
        self.assertEqual([s.hostport for s in pool.add_discovered(["a:4222"], current)],
                         ["a:4222"])
        self.assertEqual(hostports(pool), ["u1:1", "a:4222"])

    def test_duplicates(self) -> None:
        """Repeated entries, the user's own servers (in any case) and servers already
        known are not added twice; the same INFO again adds nothing and removes nothing."""
        pool, current = self.fixed("nats://seed.example:4222,nats://u2:2")
        info = ["a:4222", "a:4222", "SEED.example:4222", "u2:2", "b:4222", "A:4222", "b:4222"]
        new = pool.add_discovered(info, current)
        self.assertEqual([s.hostport for s in new], ["a:4222", "b:4222"])
        before = list(pool.servers)
        for _ in range(3):
            self.assertEqual(pool.add_discovered(info, current), [])
            self.assertEqual(pool.servers, before)

    def test_bad_entries_are_skipped(self) -> None:
        """Entries that are not addresses are skipped; the good ones still count."""
        pool, current = self.fixed("nats://u1:1")
        new = pool.add_discovered(["", "a:notaport", "[::1:4222", "b:4222"], current)
        self.assertEqual([s.hostport for s in new], ["b:4222"])


class CapTests(SynchronousTestCase):
    def test_cap_value(self) -> None:
        """The cap is a stated, small, positive number (see ``MAX_DISCOVERED``)."""
        self.assertTrue(16 <= MAX_DISCOVERED <= 1024, MAX_DISCOVERED)

    def test_100001_urls_leave_the_pool_bounded(self) -> None:
        """100,001 announced URLs: the pool keeps the user's server and MAX_DISCOVERED
        discovered ones, all among those announced, and little memory stays allocated;
        the same INFO again adds nothing. A debug line says how many were ignored,
        without the seed's password."""
        urls = ip_urls(100_001)
        for randomize in (False, True):
            seed = parse_server("nats://alice:s3cret@seed.example:4222")
            pool = ServerPool([seed], randomize=randomize, rng=random.Random(7))
            tracemalloc.start()
            try:
                with capturedLogs() as events:
                    new = pool.add_discovered(urls, seed)
                retained, _peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            self.assertEqual(len(new), MAX_DISCOVERED)
            self.assertEqual(len(pool), 1 + MAX_DISCOVERED)
            self.assertLessEqual({s.hostport for s in new}, set(urls))
            self.assertEqual(len({s.hostport for s in new}), MAX_DISCOVERED)
            # The old pool kept ~34 MB here; 128 servers are well under one.
            self.assertLess(retained, 1_000_000)
            debug = [e for e in events if e["log_level"] == LogLevel.debug]
            self.assertEqual(len(debug), 1)
            text = formatEvent(debug[0])
            self.assertIn(str(100_001 - MAX_DISCOVERED), text)
            self.assertIn("nats://alice:***@seed.example:4222", text)
            self.assertNotIn("s3cret", text + repr(debug[0]))
            self.assertEqual(pool.add_discovered(urls, seed), [])
            self.assertEqual(len(pool), 1 + MAX_DISCOVERED)

    def test_which_servers_the_cap_keeps(self) -> None:
        """Without randomizing the first MAX_DISCOVERED announced are kept, in order;
        with it, a random choice that differs between two random generators."""
        urls = ip_urls(10 * MAX_DISCOVERED)
        seed = parse_server("nats://seed.example:4222")
        pool = ServerPool([seed], randomize=False)
        pool.add_discovered(urls, seed)
        self.assertEqual(hostports(pool)[1:], urls[:MAX_DISCOVERED])
        chosen = []
        for n in (1, 2):
            pool = ServerPool([seed], randomize=True, rng=random.Random(n))
            pool.add_discovered(urls, seed)
            chosen.append({s.hostport for s in pool.servers[1:]})
        self.assertNotEqual(chosen[0], chosen[1])
        self.assertTrue(any(int(h.split(".")[2]) > 0 for h in chosen[0]))

    def test_cap_counts_servers_already_kept(self) -> None:
        """Discovered servers kept from earlier INFO use up the cap; user servers do not."""
        users = ",".join(f"nats://u{i}:{i + 1}" for i in range(10))
        pool = ServerPool(parse_servers(users), randomize=False)
        current = pool.servers[0]
        first = ip_urls(MAX_DISCOVERED - 8)
        pool.add_discovered(first, current)
        more = ip_urls(100, port=5222)
        new = pool.add_discovered(first + more, current)
        self.assertEqual([s.hostport for s in new], more[:8])
        self.assertEqual(len(pool), 10 + MAX_DISCOVERED)
        self.assertEqual(sum(s.discovered for s in pool.servers), MAX_DISCOVERED)

    def test_pruning_frees_room(self) -> None:
        """When the cluster's view changes completely, the forgotten servers make room
        for the new ones."""
        seed = parse_server("nats://seed.example:4222")
        pool = ServerPool([seed], randomize=False)
        pool.add_discovered(ip_urls(2 * MAX_DISCOVERED), seed)
        fresh = ip_urls(2 * MAX_DISCOVERED, port=6222)
        new = pool.add_discovered(fresh, seed)
        self.assertEqual([s.hostport for s in new], fresh[:MAX_DISCOVERED])
        self.assertEqual(hostports(pool), ["seed.example:4222", *fresh[:MAX_DISCOVERED]])

    def test_current_discovered_server_counts_against_the_cap(self) -> None:
        """A discovered current server kept past its INFO takes one place of the cap."""
        seed = parse_server("nats://seed.example:4222")
        pool = ServerPool([seed], randomize=False)
        pool.add_discovered(["a:4222"], seed)
        current = pool.servers[1]
        new = pool.add_discovered(ip_urls(2 * MAX_DISCOVERED), current)
        self.assertEqual(len(new), MAX_DISCOVERED - 1)
        self.assertIn(current, pool.servers)


class InheritanceTests(SynchronousTestCase):
    def test_credentials_from_the_current_server(self) -> None:
        """New servers take the current server's user:pass or token unless their URL
        has its own, as before pruning existed."""
        seed = parse_server("nats://alice:s3cret@seed.example:4222")
        new = ServerPool([seed]).add_discovered(["10.0.0.2:4222", "u2:p2@10.0.0.3:4222"], seed)
        by_host = {s.host: s for s in new}
        self.assertEqual((by_host["10.0.0.2"].user, by_host["10.0.0.2"].password),
                         ("alice", "s3cret"))
        self.assertEqual((by_host["10.0.0.3"].user, by_host["10.0.0.3"].password), ("u2", "p2"))
        token_seed = parse_server("nats://tok3n@seed.example:4222")
        new = ServerPool([token_seed]).add_discovered(["10.0.0.4:4222"], token_seed)
        self.assertEqual(new[0].token, "tok3n")
        self.assertEqual(new[0].redacted, "nats://***@10.0.0.4:4222")

    def test_tls_hostname_and_scheme(self) -> None:
        """A server known only by IP verifies the named seed's TLS name (or the name the
        seed itself verifies); a named one its own name; all take the seed's scheme."""
        seed = parse_server("tls://nats.example:4222")
        info = ["10.0.0.7:4222", "[::1]:4333", "o.example:1"]
        new = ServerPool([seed]).add_discovered(info, seed)
        by_host = {s.host: s for s in new}
        self.assertEqual(by_host["10.0.0.7"].tls_hostname, "nats.example")
        self.assertEqual(by_host["::1"].tls_hostname, "nats.example")
        self.assertIsNone(by_host["o.example"].tls_hostname)
        self.assertEqual({s.scheme for s in new}, {"tls"})
        seed.tls_hostname = "cert.example"
        new = ServerPool([seed]).add_discovered(["10.0.0.8:4222"], seed)
        self.assertEqual(new[0].tls_hostname, "cert.example")
        ip_seed = parse_server("tls://10.0.0.1:4222")
        new = ServerPool([ip_seed]).add_discovered(["10.0.0.9:4222"], ip_seed)
        self.assertIsNone(new[0].tls_hostname)


class OrderingTests(SynchronousTestCase):
    def test_no_randomize_appends_in_announced_order(self) -> None:
        """Without randomizing, new servers go behind the others in INFO order."""
        pool = ServerPool(parse_servers("nats://u1:1,nats://u2:2"), randomize=False)
        current = pool.servers[0]
        pool.add_discovered(["c:1", "a:1", "b:1"], current)
        pool.add_discovered(["c:1", "a:1", "b:1", "e:1", "d:1"], current)
        self.assertEqual(hostports(pool), ["u1:1", "u2:2", "c:1", "a:1", "b:1", "e:1", "d:1"])

    def test_randomize_shuffles_only_the_new_ones(self) -> None:
        """With randomizing, the servers already in the pool keep their order and the
        new ones are appended behind them in a random order."""
        pool = ServerPool(parse_servers("nats://u1:1,nats://u2:2"), rng=random.Random(5))
        current = pool.servers[0]
        first = [f"a{i}:1" for i in range(20)]
        pool.add_discovered(first, current)
        before = list(pool.servers)
        second = [f"b{i}:1" for i in range(20)]
        new = pool.add_discovered(first + second, current)
        self.assertEqual(pool.servers[:22], before)
        self.assertEqual(pool.servers[22:], new)
        self.assertEqual(sorted(s.hostport for s in new), sorted(second))
        self.assertNotEqual([s.hostport for s in new], second)

    def test_default_generators_differ(self) -> None:
        """Clients made without ``rng`` shuffle with generators of their own, seeded
        differently: 8 clients, 8 orders of 20 servers (the same order twice by chance:
        about 1 in 10**17). Figure 4 (test_resilience) seeds its clients, so this is
        what proves that clients left to themselves spread over a cluster."""
        urls = [f"nats://127.0.0.1:{4000 + i}" for i in range(20)]
        orders = {tuple(Client(MemoryReactorClock(), urls).servers) for _ in range(8)}
        self.assertEqual(len(orders), 8)


class FailoverSkipsForgottenServersTests(ClientTestMixin, SynchronousTestCase):
    """A client over fake sockets: five dead servers announced once, then forgotten."""

    def reconnect(self, lost: ServerSide) -> tuple[list[int], float]:
        """Lose ``lost``; leave every dial unanswered (a dead host) except to the live
        server, which completes the handshake. Return the dialled ports and the time
        (fake clock) from the loss to the reconnection."""
        reconnected: list[float] = []
        self.client.options.reconnected_cb = lambda: reconnected.append(self.clock.seconds())
        lost_at = self.clock.seconds()
        seen = len(self.clock.tcpClients)
        lost.lose()
        ports: list[int] = []
        for _ in range(1000):
            self.clock.advance(0)
            while seen < len(self.clock.tcpClients):
                port = self.clock.tcpClients[seen][1]
                ports.append(port)
                if port == 4223:
                    self.accept(index=seen)
                seen += 1
            self.clock.advance(0)
            if reconnected:
                return ports, reconnected[0] - lost_at
            calls = self.clock.getDelayedCalls()
            self.assertTrue(calls, f"the client stopped trying after dialling {ports}")
            self.clock.advance(max(0.0, min(c.getTime() for c in calls) - self.clock.seconds()))
        self.fail(f"no reconnection after dialling {ports}")

    def test_failover_dials_the_live_server_first(self) -> None:
        """After INFO announced five dead servers and a later INFO dropped them, losing
        the server dials only the live one: no connect timeout is spent on the dead."""
        client, server = self.connected(
            servers=[endpoint(4222)], connect_timeout=0.5, reconnect_jitter=0.0,
            info={"connect_urls": [*DEAD, LIVE]},
        )
        self.assertEqual(len(client.discovered_servers), 6)
        server.send(info_line(connect_urls=[LIVE]))
        self.clock.advance(0)
        ports, took = self.reconnect(server)
        self.assertEqual(ports, [4223])
        self.assertEqual(took, 0.0)
        self.assertTrue(client.is_connected)
        self.assertEqual(client.connected_url, f"nats://{LIVE}")
        self.assertEqual(client.discovered_servers, [f"nats://{LIVE}"])

    def test_stale_servers_would_be_walked(self) -> None:
        """The contrast: while INFO still lists the five dead servers they stay, and
        the failover dials each of them (a connect timeout apiece) before the live one."""
        _, server = self.connected(
            servers=[endpoint(4222)], connect_timeout=0.5, reconnect_jitter=0.0,
            info={"connect_urls": [*DEAD, LIVE]},
        )
        ports, took = self.reconnect(server)
        self.assertEqual(ports, [5001, 5002, 5003, 5004, 5005, 4223])
        self.assertEqual(took, 2.5)


class RealClusterFailoverTests(TestCase):
    """Seven real servers; five are killed, the cluster's next INFO forgets them, then
    the server the client is on dies: the client dials only the survivor."""

    timeout = 60

    def setUp(self) -> None:
        self.cluster = NatsCluster(7).start()
        self.addCleanup(self.cluster.stop)
        self.dialled: list[str] = []
        real = _connector.server_endpoint
        dialled = self.dialled

        def recording(server: Server, *args: Any, **kwargs: Any) -> IStreamClientEndpoint:
            dialled.append(server.hostport)
            return real(server, *args, **kwargs)

        self.patch(_connector, "server_endpoint", recording)

    async def connected(self, events: ClientEvents) -> Client:
        nc = await bounded(
            connect(
                # A dead server refuses at once; a live one may take longer than 0.5 s
                # to complete the handshake on a loaded machine, and the survivor would
                # then be dialled twice.
                reactor, self.cluster[0].url, no_randomize=True, connect_timeout=5.0,
                reconnect_jitter=0.0, **events.callbacks(),
            ),
            10, "connect",
        )
        self.addCleanup(nc.close)
        await wait_until(lambda: len(nc.discovered_servers) == 6, 10, "discovery")
        return nc

    def test_failover_after_the_cluster_forgot_dead_servers(self) -> Any:
        """Only the survivor is dialled after the loss (and the dead never are); the
        wall time from the kill to the reconnection is printed."""

        async def run() -> None:
            events = ClientEvents()
            nc = await self.connected(events)
            by_hostport: dict[str, Any] = {n.client_address: n for n in self.cluster}
            # The survivor is the discovered server dialled last, so that keeping the
            # forgotten ones would put every one of them before it.
            order = [s.hostport for s in nc._connector.pool.servers if s.discovered]
            survivor = by_hostport[order[-1]]
            dead = [by_hostport[h] for h in order[:-1]]
            self.assertEqual(len(dead), 5)
            for node in dead:
                node.kill()
            gone = {n.client_address for n in dead}

            def forgotten() -> bool:
                urls = set(nc.server_info.get("connect_urls", []))
                return not urls & gone

            await wait_until(forgotten, 15, "an INFO without the killed servers")
            self.dialled.clear()
            killed_at = reactor.seconds()
            self.cluster[0].kill()
            await bounded(events.wait("reconnected"), 10, "reconnection")
            took = reactor.seconds() - killed_at
            sys.stdout.write(
                f"\nfailover: {len(self.dialled)} dial(s), {took * 1000:.1f} ms to reconnect\n"
            )
            self.assertEqual(self.dialled, [survivor.client_address])
            self.assertEqual(nc.connected_url, f"nats://{survivor.client_address}")

        return ensureDeferred(run())

