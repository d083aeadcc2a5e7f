"""NUIDs and server addresses (parsing, redaction, discovery)."""

from __future__ import annotations

import random

from twisted.trial.unittest import SynchronousTestCase

from txnats.errors import ConnectError
from txnats.nuid import NUID
from txnats.servers import Server, ServerPool, parse_server, parse_servers


class NUIDTests(SynchronousTestCase):
    def test_unique_and_shaped(self) -> None:
        """100,000 ids are distinct, 22 characters, base-62."""
        n = NUID()
        ids = [n.next() for _ in range(100_000)]
        self.assertEqual(len(set(ids)), len(ids))
        for i in ids[:1000]:
            self.assertEqual(len(i), 22)
            self.assertTrue(i.isalnum() and i.isascii())

    def test_rollover_draws_new_prefix(self) -> None:
        """When the sequence runs out, a new random prefix is drawn and ids stay unique."""
        n = NUID()
        before = n.next()
        n._seq = 62**10 - 1
        after = n.next()
        self.assertNotEqual(before[:12], after[:12])


class ServerParsingTests(SynchronousTestCase):
    def test_url_forms(self) -> None:
        """nats:// URLs, bare host:port and default ports parse as expected."""
        s = parse_server("nats://demo.example:4333")
        self.assertEqual((s.scheme, s.host, s.port), ("nats", "demo.example", 4333))
        self.assertEqual(parse_server("localhost").port, 4222)
        self.assertEqual(parse_server("127.0.0.1:5000").port, 5000)
        self.assertEqual(parse_server("ws://h").port, 80)
        self.assertEqual(parse_server("nats://[::1]:4222").host, "::1")

    def test_credentials_and_redaction(self) -> None:
        """user:pass and token userinfo are honoured and never rendered."""
        s = parse_server("nats://alice:s3cret@h:1")
        self.assertEqual((s.user, s.password, s.token), ("alice", "s3cret", None))
        self.assertEqual(s.redacted, "nats://alice:***@h:1")
        self.assertNotIn("s3cret", repr(s) + str(s))
        t = parse_server("nats://tok3n@h:1")
        self.assertEqual((t.user, t.token), (None, "tok3n"))
        self.assertEqual(t.redacted, "nats://***@h:1")
        self.assertNotIn("tok3n", repr(t) + str(t))

    def test_endpoint_strings(self) -> None:
        """Twisted endpoint strings are kept as endpoint descriptions."""
        s = parse_server("tcp:host=127.0.0.1:port=4222")
        self.assertEqual(s.endpoint_description, "tcp:host=127.0.0.1:port=4222")

    def test_lists(self) -> None:
        """Comma strings and lists both give every server; empty input is refused."""
        self.assertEqual(len(parse_servers("nats://a:1, nats://b:2")), 2)
        self.assertEqual(len(parse_servers(["nats://a:1", "b:2"])), 2)
        self.assertRaises(ConnectError, parse_servers, "")
        self.assertRaises(ConnectError, parse_servers, [])

    def test_bad_urls(self) -> None:
        """Bad schemes, ports and hosts raise ConnectError."""
        for bad in ["http://h:1", "nats://h:notaport", "nats://:4222", "   "]:
            self.assertRaises(ConnectError, parse_server, bad)


class ServerPoolTests(SynchronousTestCase):
    def test_no_randomize_keeps_order_and_rotates(self) -> None:
        """Without randomizing, servers are tried in order and rotate."""
        pool = ServerPool(parse_servers("a:1,b:2,c:3"), randomize=False)
        self.assertEqual([pool.next_server().host for _ in range(4)], ["a", "b", "c", "a"])

    def test_discovered_merge(self) -> None:
        """connect_urls add new servers once, marked discovered, with the seed's scheme."""
        pool = ServerPool(parse_servers("nats://a:1"), randomize=True, rng=random.Random(1))
        seed: Server = pool.servers[0]
        new = pool.add_discovered(["a:1", "b:2", "c:3", "b:2"], seed)
        self.assertEqual(sorted(s.hostport for s in new), ["b:2", "c:3"])
        self.assertTrue(all(s.discovered and s.scheme == "nats" for s in new))
        self.assertEqual(len(pool), 3)
