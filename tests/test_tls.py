"""TLS against real nats-server processes: the issue #4 matrix.

Certificates are made at test time with ``trustme`` (nothing secret is committed).
Every failing case goes through a ``FaultProxy`` (passing bytes through), and the bytes
the client sent are checked: a plaintext ``CONNECT`` (which carries the credentials)
never leaves the client. Every wait is bounded.

The eight cases of the matrix:

1. valid chain (``tls://`` and ``nats://`` to a ``tls_required`` server)
2. wrong CA
3. hostname mismatch
4. ``tls://`` to a plaintext server
5. server requires TLS, client has no TLS options (platform roots: fails closed)
6. handshake-first mismatch, both ways
7. mTLS: without a client certificate, and with one
8. an IP-only discovered server keeps the seed's TLS hostname
"""

from __future__ import annotations

import os
from typing import Any

import trustme
from twisted.trial import unittest

import txnats
from tests.support.files import temp_file, write_file
from tests.support.waits import WAIT, bounded, reactor, sleep, wait_until
from txnats import ConnectError, TLSError
from txnats.servers import ServerPool, parse_server
from txnats.testing import FaultProxy, NatsCluster, NatsServer
from txnats.tls import TLSConfig

#: connect_timeout given to clients in failure cases.
CONNECT_TIMEOUT = 2.0
#: Slack on top of connect_timeout before a failure counts as a hang.
SLACK = 1.5







class RecordingProxy:
    """A FaultProxy (passing bytes through) in front of a server; records client bytes."""

    def __init__(self, server: NatsServer) -> None:
        self.proxy = FaultProxy(reactor, server.host, server.port)
        self.port = self.proxy.listen()

    @property
    def client_to_server(self) -> bytes:
        """Everything every client sent through the proxy."""
        return b"".join(self.proxy.client_data)

    def url(self, scheme: str = "nats", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{self.port}"


def make_proxy(case: unittest.TestCase, server: NatsServer) -> RecordingProxy:
    proxy = RecordingProxy(server)
    case.addCleanup(proxy.proxy.stop)
    return proxy


# ---------------------------------------------------------------------- certificates
class Certs:
    """A CA, a server certificate and a client certificate, written to ``directory``."""

    def __init__(self, directory: str, names: tuple[str, ...] = ("localhost", "127.0.0.1")):
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.ca = trustme.CA()
        server = self.ca.issue_cert(*names)
        client = self.ca.issue_cert("client.example")
        self.ca_file = self._write("ca.pem", self.ca.cert_pem.bytes())
        self.server_cert = self._write(
            "server.pem", b"".join(p.bytes() for p in server.cert_chain_pems)
        )
        self.server_key = self._write("server-key.pem", server.private_key_pem.bytes())
        self.client_cert = self._write(
            "client.pem", b"".join(p.bytes() for p in client.cert_chain_pems)
        )
        self.client_key = self._write("client-key.pem", client.private_key_pem.bytes())
        # A CA that signed nothing the server uses.
        self.other_ca_file = self._write("other-ca.pem", trustme.CA().cert_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        return write_file(self.dir, name, data)

    def tls_block(self, *, verify: bool = False, handshake_first: bool = False) -> str:
        lines = [f'  cert_file: "{self.server_cert}"', f'  key_file: "{self.server_key}"']
        if verify:
            lines += [f'  ca_file: "{self.ca_file}"', "  verify: true"]
        if handshake_first:
            lines.append("  handshake_first: true")
        return "tls {\n" + "\n".join(lines) + "\n}\n"


class TLSTestCase(unittest.TestCase):
    """Helpers: certificates per test, servers with a given TLS block."""

    def setUp(self) -> None:
        self.certs = Certs(temp_file(self, "certs"))

    def start_server(self, config: str | None = None) -> NatsServer:
        server = NatsServer(config=config).start()
        self.addCleanup(server.stop)
        return server

    def tls_server(self, **kwargs: bool) -> NatsServer:
        return self.start_server(self.certs.tls_block(**kwargs))

    async def connect(self, url: str, **kwargs: Any) -> txnats.Client:
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)
        kwargs.setdefault("allow_reconnect", False)
        nc = await bounded(txnats.connect(reactor, url, **kwargs))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc

    async def assert_connect_fails(
        self, url: str, expected: type[BaseException], **kwargs: Any
    ) -> BaseException:
        """Connecting fails with ``expected`` within connect_timeout (+ slack)."""
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)
        kwargs.setdefault("allow_reconnect", False)
        start = reactor.seconds()
        err = await self.assertFailure(
            bounded(txnats.connect(reactor, url, **kwargs), CONNECT_TIMEOUT + SLACK + 2),
            expected,
        )
        elapsed = reactor.seconds() - start
        self.assertLess(elapsed, CONNECT_TIMEOUT + SLACK, f"took {elapsed:.2f}s: a hang")
        return err

    async def assert_no_plaintext_connect(self, proxy: RecordingProxy) -> None:
        """The client sent no plaintext CONNECT: nothing at all, or only TLS records."""
        await sleep(0.05)  # anything still in flight reaches the proxy
        sent = bytes(proxy.client_to_server)
        self.assertNotIn(b"CONNECT", sent.upper())
        if sent:
            # TLS records only: 0x16 is the handshake content type (ClientHello).
            self.assertEqual(sent[:1], b"\x16", f"non-TLS bytes sent: {sent[:40]!r}")

    async def assert_works(self, nc: txnats.Client) -> None:
        sub = nc.subscribe("tls.check")
        nc.publish("tls.check", b"over tls")
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"over tls")


class ValidChainTests(TLSTestCase):
    """Case 1: a chain signed by the configured CA works, over tls:// and nats://."""

    async def test_tls_url_valid_chain(self) -> None:
        """tls:// with the right CA file connects over TLS, verifying the name."""
        server = self.tls_server()
        proxy = make_proxy(self, server)
        nc = await self.connect(proxy.url("tls", "localhost"), tls_ca_file=self.certs.ca_file)
        self.assertTrue(nc._proto is not None and nc._proto.tls_active)
        self.assertTrue(nc.server_info.get("tls_required"))
        await self.assert_works(nc)
        await nc.close()
        # Even a working session never shows CONNECT in the clear.
        await self.assert_no_plaintext_connect(proxy)

    async def test_nats_url_upgrades_to_tls(self) -> None:
        """nats:// to a tls_required server upgrades after INFO and works."""
        server = self.tls_server()
        nc = await self.connect(f"nats://127.0.0.1:{server.port}", tls_ca_file=self.certs.ca_file)
        self.assertTrue(nc._proto is not None and nc._proto.tls_active)
        await self.assert_works(nc)

    async def test_tls_config_object(self) -> None:
        """tls=TLSConfig(ca_file=...) is the same as the tls_* keyword arguments."""
        server = self.tls_server()
        nc = await self.connect(server.url, tls=TLSConfig(ca_file=self.certs.ca_file))
        await self.assert_works(nc)


class WrongCATests(TLSTestCase):
    """Case 2: a server certificate from another CA is refused."""

    async def test_wrong_ca(self) -> None:
        """A CA that did not sign the server's certificate -> TLSError, no CONNECT."""
        server = self.tls_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(
            proxy.url("tls"), TLSError, tls_ca_file=self.certs.other_ca_file
        )
        await self.assert_no_plaintext_connect(proxy)


class HostnameMismatchTests(TLSTestCase):
    """Case 3: hostname verification is always on."""

    async def test_tls_hostname_mismatch(self) -> None:
        """tls_hostname="wrong.example" against a localhost certificate -> TLSError."""
        server = self.tls_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(
            proxy.url("tls"),
            TLSError,
            tls_ca_file=self.certs.ca_file,
            tls_hostname="wrong.example",
        )
        await self.assert_no_plaintext_connect(proxy)

    async def test_certificate_for_another_name(self) -> None:
        """A certificate issued for another name (URL host 127.0.0.1) -> TLSError."""
        self.certs = Certs(temp_file(self, "certs"), names=("other.example",))
        server = self.tls_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(proxy.url("tls"), TLSError, tls_ca_file=self.certs.ca_file)
        await self.assert_no_plaintext_connect(proxy)


class PlaintextServerTests(TLSTestCase):
    """Case 4: tls:// to a server that offers no TLS fails before anything is sent."""

    async def test_tls_url_to_plaintext_server(self) -> None:
        """tls:// against a plaintext server -> TLSError, and 0 bytes sent."""
        server = self.start_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(proxy.url("tls"), TLSError)
        await self.assert_no_plaintext_connect(proxy)
        self.assertEqual(bytes(proxy.client_to_server), b"")

    async def test_tls_options_to_plaintext_server(self) -> None:
        """TLS options with a nats:// URL also insist on TLS -> TLSError, 0 bytes sent."""
        server = self.start_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(proxy.url(), TLSError, tls_ca_file=self.certs.ca_file)
        self.assertEqual(bytes(proxy.client_to_server), b"")


class NoTLSOptionsTests(TLSTestCase):
    """Case 5: the server requires TLS; a client with no TLS options fails closed."""

    async def test_server_requires_tls_client_has_no_options(self) -> None:
        """Upgrade verifies against the platform roots, which lack our CA -> TLSError."""
        server = self.tls_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(proxy.url(), TLSError)
        await self.assert_no_plaintext_connect(proxy)


class HandshakeFirstTests(TLSTestCase):
    """Case 6: handshake-first mismatch, both ways, ends within connect_timeout."""

    async def test_handshake_first_both_sides(self) -> None:
        """Client and server both handshake first: works."""
        server = self.tls_server(handshake_first=True)
        nc = await self.connect(
            server.url, tls_ca_file=self.certs.ca_file, tls_handshake_first=True
        )
        await self.assert_works(nc)

    async def test_client_first_server_normal(self) -> None:
        """A TLS-first client against a normal TLS server -> an error, no hang.

        Usually TLSError (INFO arrives where a ServerHello should); if the server
        resets first, the client may only see the connection lost: still a ConnectError.
        """
        server = self.tls_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(
            proxy.url("tls"), ConnectError, tls_ca_file=self.certs.ca_file, tls_handshake_first=True
        )
        await self.assert_no_plaintext_connect(proxy)

    async def test_client_first_plaintext_server(self) -> None:
        """A TLS-first client against a plaintext server -> an error (as above), no hang."""
        server = self.start_server()
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(
            proxy.url("tls"), ConnectError, tls_ca_file=self.certs.ca_file, tls_handshake_first=True
        )
        await self.assert_no_plaintext_connect(proxy)

    async def test_client_normal_server_first(self) -> None:
        """A normal client against a handshake_first server -> ConnectError in time."""
        server = self.tls_server(handshake_first=True)
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(
            proxy.url("tls"), ConnectError, tls_ca_file=self.certs.ca_file
        )
        await self.assert_no_plaintext_connect(proxy)
        self.assertEqual(bytes(proxy.client_to_server), b"")


class MutualTLSTests(TLSTestCase):
    """Case 7: a server with verify: true needs a client certificate."""

    async def test_without_client_cert(self) -> None:
        """No client certificate -> ConnectError (TLS refused), no plaintext CONNECT.

        Usually TLSError ("certificate required" alert); if the server's reset beats
        the alert, the client only sees the connection lost.
        """
        server = self.tls_server(verify=True)
        proxy = make_proxy(self, server)
        await self.assert_connect_fails(
            proxy.url("tls"), ConnectError, tls_ca_file=self.certs.ca_file
        )
        await self.assert_no_plaintext_connect(proxy)

    async def test_with_client_cert(self) -> None:
        """tls_cert_file + tls_key_file -> mutual TLS works."""
        server = self.tls_server(verify=True)
        proxy = make_proxy(self, server)
        nc = await self.connect(
            proxy.url("tls"),
            tls_ca_file=self.certs.ca_file,
            tls_cert_file=self.certs.client_cert,
            tls_key_file=self.certs.client_key,
        )
        self.assertTrue(nc.server_info.get("tls_verify"))
        await self.assert_works(nc)
        await nc.close()
        await self.assert_no_plaintext_connect(proxy)


class DiscoveredHostnameTests(TLSTestCase):
    """Case 8: a discovered server known only by IP is verified with the seed's name."""

    def test_pool_keeps_seed_hostname(self) -> None:
        """add_discovered with an IP-only connect_url sets tls_hostname to the seed's host."""
        seed = parse_server("tls://nats.example.com:4222")
        pool = ServerPool([seed], randomize=False)
        new = pool.add_discovered(["10.0.0.7:4222", "[::1]:4333", "other.example:4222"], seed)
        by_host = {s.host: s for s in new}
        self.assertEqual(by_host["10.0.0.7"].tls_hostname, "nats.example.com")
        self.assertEqual(by_host["::1"].tls_hostname, "nats.example.com")
        self.assertEqual(by_host["10.0.0.7"].scheme, "tls")
        # A discovered server with a name verifies its own name.
        self.assertIsNone(by_host["other.example"].tls_hostname)

    def test_pool_keeps_explicit_tls_hostname_and_ip_seed(self) -> None:
        """A seed's own tls_hostname propagates; an IP seed gives IPs no override."""
        seed = parse_server("tls://nats.example.com:4222")
        seed.tls_hostname = "cert-name.example"
        new = ServerPool([seed]).add_discovered(["10.0.0.8:4222"], seed)
        self.assertEqual(new[0].tls_hostname, "cert-name.example")
        ip_seed = parse_server("tls://10.0.0.1:4222")
        new = ServerPool([ip_seed]).add_discovered(["10.0.0.9:4222"], ip_seed)
        self.assertIsNone(new[0].tls_hostname)

    async def test_cluster_failover_to_ip_only_node(self) -> None:
        """With a 'localhost'-only certificate, failover to 127.0.0.1:<B> verifies as localhost."""
        self.certs = Certs(temp_file(self, "certs"), names=("localhost",))
        # NatsCluster picks the route ports and starts again on fresh ones if a node
        # cannot bind its own (nats-server says it is ready before it binds the route
        # port, then exits), and returns once the two nodes are routed to each other.
        cluster = NatsCluster(2, cluster_name="tlsc", config=self.certs.tls_block()).start()
        self.addCleanup(cluster.stop)
        node_a, node_b = cluster[0], cluster[1]
        b_hostport = f"127.0.0.1:{node_b.port}"
        # Control: the certificate does not cover the IP address.
        await self.assert_connect_fails(
            f"tls://{b_hostport}", TLSError, tls_ca_file=self.certs.ca_file
        )
        reconnected: list[bool] = []
        nc = await self.connect(
            f"tls://localhost:{node_a.port}",
            tls_ca_file=self.certs.ca_file,
            allow_reconnect=True,
            reconnect_wait=0.1,
            reconnect_jitter=0.0,
            max_reconnect_attempts=20,
            reconnected_cb=lambda: reconnected.append(True),
        )
        await wait_until(lambda: any(b_hostport in s for s in nc.discovered_servers))
        discovered = [s for s in nc._connector.pool.servers if s.hostport == b_hostport]
        self.assertEqual(discovered[0].tls_hostname, "localhost")
        node_a.stop()
        await wait_until(lambda: bool(reconnected) and nc.is_connected, 10.0)
        self.assertEqual(nc.connected_url, f"tls://{b_hostport}")
        await self.assert_works(nc)


class BadTLSOptionsTests(TLSTestCase):
    """Unusable TLS options end the attempt with a typed error before anything is sent."""

    async def test_missing_ca_file(self) -> None:
        """A CA file that does not exist -> TLSError, no plaintext CONNECT."""
        server = self.tls_server()
        proxy = make_proxy(self, server)
        missing = temp_file(self, "missing.pem")
        await self.assert_connect_fails(proxy.url("tls"), TLSError, tls_ca_file=missing)
        await self.assert_no_plaintext_connect(proxy)

    async def test_ca_file_without_certificate(self) -> None:
        """A CA file holding no certificate -> TLSError, also in TLS-first mode."""
        server = self.tls_server(handshake_first=True)
        proxy = make_proxy(self, server)
        garbage = temp_file(self, "garbage.pem")
        with open(garbage, "w") as f:
            f.write("not a certificate\n")
        await self.assert_connect_fails(
            proxy.url("tls"), TLSError, tls_ca_file=garbage, tls_handshake_first=True
        )
        self.assertEqual(bytes(proxy.client_to_server), b"")

    async def test_key_not_matching_certificate(self) -> None:
        """A client key that does not match its certificate -> TLSError."""
        server = self.tls_server(verify=True)
        proxy = make_proxy(self, server)
        other_key = temp_file(self, "other-key.pem")
        with open(other_key, "wb") as f:
            f.write(self.certs.ca.issue_cert("x.example").private_key_pem.bytes())
        await self.assert_connect_fails(
            proxy.url("tls"),
            TLSError,
            tls_ca_file=self.certs.ca_file,
            tls_cert_file=self.certs.client_cert,
            tls_key_file=other_key,
        )
        await self.assert_no_plaintext_connect(proxy)
