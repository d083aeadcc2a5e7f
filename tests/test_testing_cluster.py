"""
Tests for L{txnats.testing.NatsCluster} against real C{nats-server} processes.

The fixture tests speak the NATS protocol by hand over blocking sockets with
timeouts (L{RawClient}), so that they prove the fixture and nothing of the
client under development; one test class checks that txnats itself works
across the cluster.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import deque
from typing import Any, ClassVar

from twisted.internet import defer, reactor
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from tests.support.servers import PerClass
from txnats.testing import ClusterNode, NatsCluster, ServerStartError, _cluster

#: Seconds any single wait in these tests may take.
TIMEOUT = 5.0


class RawClient:
    """
    A minimal NATS client over a blocking socket: every read is bounded by a
    socket timeout, and it answers the server's PINGs.
    """

    def __init__(self, port: int, host: str = "127.0.0.1", handshake: bool = True) -> None:
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        self._buffer = b""
        self.infos: list[dict[str, Any]] = []
        self.msgs: deque[tuple[str, bytes]] = deque()
        kind, info = self._event(time.monotonic() + TIMEOUT)
        assert kind == "INFO", (kind, info)
        if handshake:
            self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\n')
            self.flush()

    @property
    def info(self) -> dict[str, Any]:
        """The latest INFO received."""
        return self.infos[-1]

    def close(self) -> None:
        self.sock.close()

    def _recv(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("nothing more from the server in time")
        self.sock.settimeout(remaining)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"server closed the connection; unread {self._buffer!r}")
        self._buffer += chunk

    def _line(self, deadline: float) -> bytes:
        while b"\r\n" not in self._buffer:
            self._recv(deadline)
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line

    def _event(self, deadline: float) -> tuple[str, Any]:
        """
        Read one protocol message, answering PING. Returns its kind and
        body: INFO -> dict, MSG -> (subject, payload), others -> line.
        """
        while True:
            line = self._line(deadline)
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"INFO "):
                info = json.loads(line[5:])
                self.infos.append(info)
                return "INFO", info
            if line.startswith(b"MSG "):
                parts = line.split(b" ")
                size = int(parts[-1])
                while len(self._buffer) < size + 2:
                    self._recv(deadline)
                payload, self._buffer = self._buffer[:size], self._buffer[size + 2 :]
                message = (parts[1].decode(), payload)
                self.msgs.append(message)
                return "MSG", message
            return line.decode().split(" ", 1)[0], line

    def flush(self, timeout: float = TIMEOUT) -> None:
        """PING and wait for the PONG: the server has processed all before it."""
        self.sock.sendall(b"PING\r\n")
        deadline = time.monotonic() + timeout
        while True:
            kind, body = self._event(deadline)
            if kind == "PONG":
                return
            if kind == "-ERR":
                raise AssertionError(body)

    def sub(self, subject: str, sid: int) -> None:
        self.sock.sendall(f"SUB {subject} {sid}\r\n".encode())
        self.flush()

    def pub(self, subject: str, payload: bytes) -> None:
        self.sock.sendall(f"PUB {subject} {len(payload)}\r\n".encode() + payload + b"\r\n")
        self.flush()

    def next_msg(self, timeout: float = TIMEOUT) -> tuple[str, bytes]:
        deadline = time.monotonic() + timeout
        while not self.msgs:
            self._event(deadline)
        return self.msgs.popleft()

    def wait_info(self, predicate: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Wait for an asynchronous INFO satisfying C{predicate}."""
        deadline = time.monotonic() + timeout
        while True:
            kind, body = self._event(deadline)
            if kind == "INFO" and predicate(body):
                return dict(body)


def assertRefused(case: SynchronousTestCase, port: int) -> None:
    case.assertRaises(
        ConnectionRefusedError, socket.create_connection, ("127.0.0.1", port), TIMEOUT
    )


class ClusterPerClass(PerClass):
    """
    One L{NatsCluster} for all the tests of a TestCase class (see
    C{tests.support.servers}), healed before each test that finds it running.
    """

    fixture_name = "cluster"
    cluster: ClassVar[NatsCluster | None] = None

    @classmethod
    def start_fixture(cls) -> NatsCluster:
        return NatsCluster().start()

    def reuse_fixture(self, fixture: Any) -> None:
        for node in fixture:
            node.resume()
            if not node.running:
                node.start()
        fixture.wait_until_formed()

    def client(self, node: ClusterNode, **kwargs: Any) -> RawClient:
        client = RawClient(node.port, **kwargs)
        self.addCleanup(client.close)  # type: ignore[attr-defined]
        return client


class NatsClusterTests(ClusterPerClass, SynchronousTestCase):
    """
    A three-node cluster, shared by the tests of this class.
    """

    cluster: NatsCluster

    def test_nodesAndUrls(self) -> None:
        """
        A cluster has three running nodes on distinct loopback ports, named
        after the cluster; C{urls} lists their client URLs in node order.
        """
        nodes = self.cluster.nodes
        self.assertEqual(len(nodes), 3)
        self.assertTrue(all(node.running for node in nodes))
        self.assertEqual([node.name for node in nodes], ["txnats-1", "txnats-2", "txnats-3"])
        self.assertEqual(self.cluster.urls, [f"nats://127.0.0.1:{n.port}" for n in nodes])
        ports = [p for n in nodes for p in (n.port, n.route_port, n.monitor_port)]
        self.assertEqual(len(set(ports)), 9)
        self.assertIs(self.cluster[1], nodes[1])

    def test_infoListsOtherNodes(self) -> None:
        """
        Once started, every node greets clients with an C{INFO} naming the
        cluster and listing the other nodes in C{connect_urls}, and has
        routes to both others.
        """
        nodes = self.cluster.nodes
        for node in nodes:
            info = RawClient(node.port, handshake=False)
            self.addCleanup(info.close)
            self.assertEqual(info.info["cluster"], "txnats")
            self.assertEqual(info.info["server_name"], node.name)
            others = {f"127.0.0.1:{peer.port}" for peer in nodes if peer is not node}
            self.assertLessEqual(others, set(info.info["connect_urls"]))
            self.assertEqual(node.route_names(), {peer.name for peer in nodes} - {node.name})

    def test_configuration(self) -> None:
        """
        Each node's configuration names it, enables monitoring and lists the
        other nodes' route URLs.
        """
        node = self.cluster[0]
        self.assertIn('server_name: "txnats-1"', node.config_text)
        self.assertIn(f'"127.0.0.1:{node.monitor_port}"', node.config_text)
        for peer in self.cluster.nodes[1:]:
            self.assertIn(f'"{peer.route_url}"', node.config_text)
        self.assertNotIn(f'"{node.route_url}"', node.config_text)
        self.assertEqual(node.monitor("varz")["server_name"], "txnats-1")

    def test_waitForLog(self) -> None:
        """
        C{wait_for_log} returns a line the node printed containing the text,
        looking from C{since} on, and raises L{TimeoutError} quoting the log
        when no such line comes in time. C{pid} is the process id.
        """
        node = self.cluster[0]
        line = node.wait_for_log("Route connection created", timeout=TIMEOUT)
        self.assertIn("Route connection created", line)
        error = self.assertRaises(
            TimeoutError,
            node.wait_for_log,
            "Server is ready",
            0.1,
            since=len(node.log_lines),
        )
        self.assertIn("Server is ready", str(error))
        self.assertIsInstance(node.pid, int)

    def test_messageCrossesCluster(self) -> None:
        """
        A message published on node 0 reaches a subscriber on node 2 once
        L{NatsCluster.wait_for_interest} says node 0 knows of the
        subscription.
        """
        subscriber = self.client(self.cluster[2])
        subscriber.sub("cross.*", 1)
        self.cluster.wait_for_interest("cross.one", timeout=TIMEOUT)
        publisher = self.client(self.cluster[0])
        publisher.pub("cross.one", b"hello from node 0")
        self.assertEqual(subscriber.next_msg(), ("cross.one", b"hello from node 0"))

    def test_waitForInterestTimesOut(self) -> None:
        """
        L{NatsCluster.wait_for_interest} raises L{TimeoutError} when nobody
        subscribes.
        """
        error = self.assertRaises(
            TimeoutError, self.cluster.wait_for_interest, "nobody.listens", 0.2
        )
        self.assertIn("nobody.listens", str(error))

    def test_killAndRestart(self) -> None:
        """
        L{ClusterNode.kill} takes a node down at once: its port refuses
        connections and the other nodes stop advertising it. After
        L{ClusterNode.restart} it is back on the same port, routed to the
        others, advertised again, and receives messages published elsewhere.
        """
        watcher = self.client(self.cluster[0])
        node = self.cluster[2]
        port, address = node.port, node.client_address
        node.kill()
        self.assertFalse(node.running)
        assertRefused(self, port)
        watcher.wait_info(lambda info: address not in info.get("connect_urls", []))

        node.restart()
        self.assertEqual(node.port, port)
        self.assertEqual(node.route_names(), {"txnats-1", "txnats-2"})
        watcher.wait_info(lambda info: address in info.get("connect_urls", []))

        subscriber = self.client(node)
        subscriber.sub("after.restart", 7)
        self.cluster.wait_for_interest("after.restart")
        watcher.pub("after.restart", b"welcome back")
        self.assertEqual(subscriber.next_msg(), ("after.restart", b"welcome back"))

    def test_pauseResume(self) -> None:
        """
        A paused node accepts TCP connections (the kernel does) but sends
        nothing, not even C{INFO}, and holds messages routed to it; after
        L{ClusterNode.resume} the greeting and the held message arrive.
        """
        node = self.cluster[1]
        subscriber = self.client(node)
        subscriber.sub("paused.subject", 3)
        self.cluster.wait_for_interest("paused.subject")

        node.pause()
        self.assertTrue(node.paused)
        self.assertTrue(node.running)
        publisher = self.client(self.cluster[0])
        publisher.pub("paused.subject", b"held")
        self.assertRaises(TimeoutError, subscriber.next_msg, 0.3)
        greeting = socket.create_connection(("127.0.0.1", node.port), timeout=TIMEOUT)
        self.addCleanup(greeting.close)
        greeting.settimeout(0.2)
        self.assertRaises(TimeoutError, greeting.recv, 100)

        node.resume()
        self.assertFalse(node.paused)
        self.assertEqual(subscriber.next_msg(), ("paused.subject", b"held"))
        greeting.settimeout(TIMEOUT)
        self.assertTrue(greeting.recv(100).startswith(b"INFO "))

    def test_pausedNodeStops(self) -> None:
        """
        L{ClusterNode.stop} stops a paused node promptly (it is continued
        first, so SIGTERM takes effect) and it can be started again.
        """
        node = self.cluster[2]
        node.pause()
        started = time.monotonic()
        node.stop(timeout=5.0)
        self.assertLess(time.monotonic() - started, 4.0)
        self.assertFalse(node.running)
        self.assertFalse(node.paused)
        self.assertTrue(any("Server Exiting" in line for line in node.log_lines))

    def test_lameDuck(self) -> None:
        """
        L{ClusterNode.lame_duck} puts a node into lame duck mode: a client
        connected to it is told with an C{INFO} carrying C{ldm}, the node
        stops accepting new clients, node 0 stops advertising it, and
        L{ClusterNode.stop} still stops it promptly.
        """
        node = self.cluster[2]
        self.addCleanup(node.restart)
        address = node.client_address
        client = self.client(node)
        watcher = self.client(self.cluster[0])
        node.lame_duck()
        self.assertTrue(any("lame duck" in line for line in node.log_lines))
        client.wait_info(lambda info: info.get("ldm") is True)
        assertRefused(self, node.port)
        watcher.wait_info(lambda info: address not in info.get("connect_urls", []))
        # nats-server ignores SIGTERM during the lame duck grace period (10 s
        # by default); stop() uses SIGINT then, which it acts on at once.
        started = time.monotonic()
        node.stop(timeout=8.0)
        self.assertLess(time.monotonic() - started, 5.0)
        self.assertTrue(any("Server Exiting" in line for line in node.log_lines))
        self.assertFalse(node.in_lame_duck)

    def test_formedAroundLameDuck(self) -> None:
        """
        L{NatsCluster.wait_until_formed} leaves out a node in lame duck mode
        (it refuses clients) rather than failing on it.
        """
        node = self.cluster[1]
        self.addCleanup(node.restart)
        keep_busy = self.client(node)  # a client keeps it in its grace period
        node.lame_duck()
        self.assertTrue(node.in_lame_duck)
        self.assertFalse(node.live)
        self.cluster.wait_until_formed(timeout=TIMEOUT)
        keep_busy.close()


class TxnatsAcrossClusterTests(ClusterPerClass, TestCase):
    """
    txnats itself on a cluster.
    """

    cluster: NatsCluster

    async def test_publishSubscribeAcrossNodes(self) -> None:
        """
        A txnats client on node 2 receives what a txnats client on node 0
        publishes, and learns the other nodes from C{connect_urls}.
        """
        publisher = await txnats.connect(reactor, self.cluster.urls[0])
        self.addCleanup(publisher.close)
        subscriber = await txnats.connect(reactor, self.cluster.urls[2])
        self.addCleanup(subscriber.close)
        received: defer.Deferred[Any] = defer.Deferred()

        def handler(msg: Any) -> None:
            if not received.called:
                received.callback(msg)

        subscriber.subscribe("txnats.cluster", handler)
        await subscriber.flush(timeout=TIMEOUT)
        self.cluster.wait_for_interest("txnats.cluster")
        publisher.publish("txnats.cluster", b"across")
        await publisher.flush(timeout=TIMEOUT)
        msg = await received.addTimeout(TIMEOUT, reactor)
        self.assertEqual((msg.subject, msg.data), ("txnats.cluster", b"across"))
        discovered = " ".join(str(url) for url in publisher.discovered_servers)
        for node in self.cluster.nodes[1:]:
            self.assertIn(str(node.port), discovered)


class NatsClusterLifecycleTests(SynchronousTestCase):
    """
    Starting and stopping clusters of their own.
    """

    def test_contextManagerAndIdempotentStop(self) -> None:
        """
        A two-node cluster used as a context manager runs inside the block;
        afterwards every port refuses connections, and C{stop} again (or on a
        cluster never started) does nothing.
        """
        with NatsCluster(2, cluster_name="pair") as cluster:
            self.assertEqual([node.name for node in cluster], ["pair-1", "pair-2"])
            info = RawClient(cluster[0].port, handshake=False)
            info.close()
            self.assertIn(cluster[1].client_address, info.info["connect_urls"])
            ports = [node.port for node in cluster]
        for port in ports:
            assertRefused(self, port)
        cluster.stop()
        NatsCluster().stop()

    def test_jetstream(self) -> None:
        """
        C{jetstream=True} runs clustered JetStream: once started every node
        knows the same meta leader, each node stores in its own directory,
        and L{NatsCluster.stop} removes the stores.
        """
        cluster = NatsCluster(3, jetstream=True, cluster_name="js")
        self.addCleanup(cluster.stop)
        cluster.start()
        leaders = {node.monitor("jsz")["meta_cluster"]["leader"] for node in cluster}
        self.assertEqual(len(leaders), 1)
        self.assertLessEqual(leaders, {node.name for node in cluster})
        stores = []
        for node in cluster:
            self.assertIs(node.info()["jetstream"], True)
            config = node.monitor("varz")["jetstream"]["config"]
            stores.append(config["store_dir"])
        self.assertEqual(len(set(stores)), 3)
        self.assertTrue(all(os.path.isdir(store) for store in stores))
        cluster.stop()
        self.assertFalse(any(os.path.exists(store) for store in stores))

    def start_with_port_taken(self, index: int) -> tuple[NatsCluster, list[list[int]], int]:
        """Start a 2-node cluster whose first set of ports has port ``index`` (client,
        route, monitor ports, node by node) already taken; return the cluster, every
        set of ports offered, and the taken port."""
        blocker = socket.socket()
        self.addCleanup(blocker.close)
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        real_free_ports = _cluster._free_ports
        offered: list[list[int]] = []

        def free_ports(host: str, count: int) -> list[int]:
            ports = real_free_ports(host, count)
            if not offered:
                ports[index] = taken
            offered.append(ports)
            return ports

        self.patch(_cluster, "_free_ports", free_ports)
        cluster = NatsCluster(2, cluster_name="race")
        self.addCleanup(cluster.stop)
        cluster.start()
        return cluster, offered, taken

    def test_retryOnPortRace(self) -> None:
        """
        When a port picked for the cluster is taken before a node binds it,
        :meth:`NatsCluster.start` starts over on fresh ports.
        """
        cluster, offered, taken = self.start_with_port_taken(1)  # node 2's client port
        self.assertEqual(len(offered), 2)
        self.assertNotIn(taken, [node.port for node in cluster])

    def test_retryOnRoutePortRace(self) -> None:
        """
        A taken route port is a failed start too, retried on fresh ports:
        nats-server binds it only after it says it is ready for clients, then
        exits, which used to leave :meth:`NatsCluster.start` returning with that
        node dead.
        """
        cluster, offered, taken = self.start_with_port_taken(3)  # node 2's route port
        self.assertEqual(len(offered), 2)
        self.assertNotIn(taken, [node.route_port for node in cluster])
        self.assertTrue(all(node.running for node in cluster))

    def test_failureReported(self) -> None:
        """
        A configuration the servers reject makes L{NatsCluster.start} raise
        L{ServerStartError} with the server's complaint, leaving nothing
        running.
        """
        cluster = NatsCluster(2, config="broken {{{")
        self.addCleanup(cluster.stop)
        error = self.assertRaises(ServerStartError, cluster.start)
        self.assertIn("Parse error", str(error))
        self.assertEqual(cluster.nodes, [])

    def test_atLeastOneNode(self) -> None:
        """
        A cluster of no nodes is refused.
        """
        self.assertRaises(ValueError, NatsCluster, 0)

    def test_subjectMatching(self) -> None:
        """
        The wildcard matcher behind L{NatsCluster.wait_for_interest} follows
        NATS rules.
        """
        match = _cluster._subject_matches
        self.assertTrue(match("a.b", "a.b"))
        self.assertTrue(match("a.*", "a.b"))
        self.assertTrue(match("a.>", "a.b.c"))
        self.assertFalse(match("a.>", "a"))
        self.assertFalse(match("a.*", "a.b.c"))
        self.assertFalse(match("a.b", "a.c"))
        self.assertFalse(match("a.b.c", "a.b"))
