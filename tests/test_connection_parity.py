"""What a nats.go user reaches for first when connecting, against real servers.

- Starting without a server (``retry_on_failed_connect``): ``connect()`` fires at once,
  publishes and subscriptions wait for the first connection, ``connected_cb`` says when
  it came (nats.go's ``RetryOnFailedConnect``).
- ADR-40's reconnect hooks: ``reconnect_delay_cb(attempt)``,
  ``reconnect_to_server_cb(servers, info)``, ``reconnect_error_cb(url, error)``, and
  ``Client.last_error``.
- Every credential form: a ``.creds`` file's content, a JWT and seed as strings, a
  user/password callback, an NKEY public key with a signing callback, TLS certificate
  and CA callbacks read at each connection.
- WebSocket headers through ``connect()``; ``set_servers()`` and ``inbox_prefix``.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import trustme
from twisted.internet.defer import Deferred
from twisted.trial import unittest

import txnats
from txnats import Msg, connect
from txnats.options import PoolServer
from txnats.testing import FaultProxy, NatsServer

from .support.credentials import KeyPair, Operator, creds_text
from .support.files import free_port, temp_file, write_file
from .support.waits import WAIT, bounded, reactor, wait_until


class ParityTestCase(unittest.TestCase):
    def server(self, **kwargs: Any) -> NatsServer:
        s = NatsServer(**kwargs).start()
        self.addCleanup(s.stop)
        return s

    async def client(self, url: str | list[str], **opts: Any) -> txnats.Client:
        opts.setdefault("connect_timeout", 2.0)
        nc = await bounded(connect(reactor, url, **opts), 10.0, "connect")
        self.addCleanup(lambda: bounded(nc.close(), 10.0))
        return nc

    async def works(self, nc: txnats.Client) -> None:
        sub = nc.subscribe("parity.check")
        nc.publish("parity.check", b"ok")
        self.assertEqual((await sub.next_msg(timeout=WAIT)).data, b"ok")


class StartWithoutServerTests(ParityTestCase):
    async def test_connect_fires_at_once_and_connects_later(self) -> None:
        """With retry_on_failed_connect and no server up, connect() fires at once; a
        subscription, a publish and a flush made then all take effect on the first
        connection, which connected_cb reports; failed attempts reach
        reconnect_error_cb, and last_error says why."""
        port = free_port()
        connected: Deferred[None] = Deferred()
        failures: list[tuple[str, Exception]] = []
        nc = await self.client(
            f"nats://127.0.0.1:{port}", retry_on_failed_connect=True,
            max_reconnect_attempts=-1, reconnect_wait=0.1, reconnect_jitter=0.0,
            connected_cb=lambda: connected.callback(None),
            reconnect_error_cb=lambda url, err: failures.append((url, err)),
        )
        self.assertEqual(nc.state, txnats.ClientState.CONNECTING)
        got: list[bytes] = []
        nc.subscribe("early", lambda m: got.append(m.data))
        nc.publish("early", b"sent before any server")
        flushed = nc.flush(timeout=20)
        await wait_until(lambda: len(failures) >= 2, what="two failed attempts")
        self.assertIsInstance(nc.last_error, txnats.ConnectError)
        self.assertEqual(failures[0][0], f"nats://127.0.0.1:{port}")
        self.server(port=port)
        await bounded(connected, 15.0, "connected_cb")
        await bounded(flushed, 15.0, "the early flush")
        await wait_until(lambda: got == [b"sent before any server"], what="the early message")
        await self.works(nc)


class ReconnectHookTests(ParityTestCase):
    async def test_custom_delay(self) -> None:
        """reconnect_delay_cb(attempt) decides the wait before each attempt: it is
        called with 1, 2, 3 ... and the attempts come no sooner than it says."""
        server = self.server()
        attempts: list[int] = []
        tried_at: list[float] = []

        def delay(attempt: int) -> float:
            attempts.append(attempt)
            return 0.2 * attempt

        nc = await self.client(
            server.url, reconnect_delay_cb=delay, max_reconnect_attempts=-1,
            reconnect_error_cb=lambda url, err: tried_at.append(reactor.seconds()),
        )
        server.kill()
        await wait_until(lambda: len(tried_at) >= 3, 15.0, "three failed attempts")
        self.assertEqual(attempts[:3], [1, 2, 3])
        for (a, b), wait in zip(itertools.pairwise(tried_at), (0.4, 0.6), strict=False):
            self.assertGreaterEqual(b - a, wait - 0.05)
        reconnected: Deferred[None] = Deferred()
        nc.add_status_listener(
            lambda s: s == txnats.ClientState.CONNECTED and not reconnected.called
            and reconnected.callback(None)
        )
        server.start()
        await bounded(reconnected, 15.0, "the reconnection")
        await self.works(nc)

    async def test_reconnect_to_a_chosen_server(self) -> None:
        """reconnect_to_server_cb sees the pool (each server's URL, attempts, whether
        discovered) and the latest INFO, and chooses where to go: here the last server
        of the pool, which the client's own order would try last."""
        a, b, c = self.server(), self.server(), self.server()
        seen: list[tuple[list[PoolServer], dict[str, Any]]] = []

        def choose(servers: list[PoolServer], info: dict[str, Any]) -> tuple[str, float]:
            seen.append((servers, info))
            return c.url, 0.0

        nc = await self.client(
            [a.url, b.url, c.url], no_randomize=True, reconnect_to_server_cb=choose,
            ignore_discovered_servers=True,
        )
        self.assertEqual(nc.connected_url, a.url)
        first_id = nc.server_info["server_id"]
        a.kill()
        await wait_until(lambda: nc.connected_url == c.url, 10.0, "a move to the third")
        servers, info = seen[0]
        self.assertEqual({s.url for s in servers}, {a.url, b.url, c.url})
        self.assertFalse(any(s.discovered for s in servers))
        self.assertEqual(info["server_id"], first_id)
        await self.works(nc)

    async def test_a_choice_outside_the_pool_is_ignored(self) -> None:
        """A URL that is not in the pool is refused (logged): the client chooses as
        usual and still reconnects."""
        a, b = self.server(), self.server()
        nc = await self.client(
            [a.url, b.url], no_randomize=True, ignore_discovered_servers=True,
            reconnect_to_server_cb=lambda servers, info: ("nats://10.9.9.9:4222", 0.0),
        )
        a.kill()
        await wait_until(lambda: nc.connected_url == b.url, 10.0, "a move to the second")
        self.flushLoggedErrors()


class CredentialFormTests(ParityTestCase):
    def setUp(self) -> None:
        self.op = Operator()

    async def test_creds_content(self) -> None:
        """user_credentials_bytes: a .creds file's content, no file."""
        server = self.server(config=self.op.server_config())
        user, jwt = self.op.new_user("bytes")
        nc = await self.client(
            server.url, user_credentials_bytes=creds_text(jwt, user.seed).encode()
        )
        await self.works(nc)

    async def test_jwt_and_seed(self) -> None:
        """user_jwt + user_seed: the two strings."""
        server = self.server(config=self.op.server_config())
        user, jwt = self.op.new_user("strings")
        nc = await self.client(server.url, user_jwt=jwt, user_seed=user.seed)
        await self.works(nc)

    async def test_user_info_callback(self) -> None:
        """user_info_cb() -> (user, password) on each attempt: a reconnection asks
        again."""
        server = self.server(config='authorization { users = [{user: "cb", password: "pw"}] }\n')
        calls: list[int] = []

        def info() -> tuple[str, str]:
            calls.append(1)
            return "cb", "pw"

        nc = await self.client(server.url, user_info_cb=info, reconnect_wait=0.1)
        await self.works(nc)
        nc.force_reconnect()
        await wait_until(lambda: len(calls) == 2 and nc.is_connected, what="a second ask")
        await self.works(nc)

    async def test_nkey_with_signing_callback(self) -> None:
        """nkey (the public key) + signature_cb: the seed stays with the caller, who
        signs each nonce."""
        user = KeyPair.user()
        server = self.server(config=f'authorization {{ users = [{{nkey: "{user.public}"}}] }}\n')
        signed: list[str] = []

        def sign(nonce: str) -> bytes:
            signed.append(nonce)
            return user.sign(nonce.encode())

        nc = await self.client(server.url, nkey=user.public, signature_cb=sign)
        await self.works(nc)
        self.assertEqual(len(signed), 1)  # (the server checked the signature: we are in)

    async def test_bad_forms_are_refused_by_name(self) -> None:
        """Forms that cannot work together fail at once, naming the options only."""
        user = KeyPair.user()
        for opts, words in [
            ({"user_jwt": "eyJ.x.y"}, "user_jwt and user_seed"),
            ({"nkey": user.public}, "signature_cb"),
            ({"user_jwt": "a", "user_seed": user.seed, "user_credentials_bytes": b"x"},
             "not several"),
        ]:
            d = connect(reactor, "nats://127.0.0.1:1", **opts)
            err = await self.assertFailure(d, txnats.CredentialsError)
            self.assertIn(words, str(err))
            self.assertNotIn(user.seed, str(err))


class TLSCallbackTests(ParityTestCase):
    async def test_certificates_read_at_each_connection(self) -> None:
        """tls_cert_cb and tls_ca_cb are called on each connection attempt, so a
        rotated client certificate is used from the next connection on."""
        ca = trustme.CA()
        server_cert = ca.issue_cert("127.0.0.1", "localhost")
        d = os.path.dirname(temp_file(self))
        cert = write_file(d, "s.pem", b"".join(p.bytes() for p in server_cert.cert_chain_pems))
        key = write_file(d, "s.key", server_cert.private_key_pem.bytes())
        ca_file = write_file(d, "ca.pem", ca.cert_pem.bytes())
        server = self.server(config=(
            f'tls {{ cert_file: "{cert}"\n key_file: "{key}"\n ca_file: "{ca_file}"\n'
            " verify: true }\n"
        ))
        issued: list[str] = []

        def client_cert() -> tuple[bytes, bytes]:
            name = f"client-{len(issued)}.example"
            issued.append(name)
            c = ca.issue_cert(name)
            return b"".join(p.bytes() for p in c.cert_chain_pems), c.private_key_pem.bytes()

        cas: list[int] = []

        def ca_pem() -> bytes:
            cas.append(1)
            return ca.cert_pem.bytes()

        nc = await self.client(
            f"tls://127.0.0.1:{server.port}", tls_cert_cb=client_cert, tls_ca_cb=ca_pem,
            reconnect_wait=0.1,
        )
        await self.works(nc)
        nc.force_reconnect()
        await wait_until(lambda: len(issued) == 2 and nc.is_connected, what="a second cert")
        await self.works(nc)
        self.assertEqual((issued, len(cas)), (["client-0.example", "client-1.example"], 2))


class WebSocketHeaderTests(ParityTestCase):
    async def test_headers_reach_the_upgrade_request(self) -> None:
        """ws_headers are sent with the WebSocket upgrade request."""
        port = free_port()
        server = self.server(config=f"websocket {{ port: {port}\n no_tls: true }}\n")
        self.assertTrue(server.running)
        proxy = FaultProxy(reactor, "127.0.0.1", port)
        proxy.listen()
        self.addCleanup(proxy.stop)
        nc = await self.client(
            f"ws://127.0.0.1:{proxy.port}", ws_headers={"X-Parity": "yes", "X-Token": "t1"}
        )
        await self.works(nc)
        sent = b"".join(proxy.client_data)
        self.assertIn(b"X-Parity: yes", sent)
        self.assertIn(b"X-Token: t1", sent)


class PoolAndInboxTests(ParityTestCase):
    async def test_set_servers_then_reconnect(self) -> None:
        """set_servers() replaces the pool: the next reconnection goes to the new one."""
        a, b = self.server(), self.server()
        nc = await self.client(a.url, ignore_discovered_servers=True, reconnect_wait=0.1)
        nc.set_servers([b.url])
        self.assertEqual(nc.servers, [b.url])
        nc.force_reconnect()
        await wait_until(lambda: nc.connected_url == b.url, what="the move to the new pool")
        await self.works(nc)

    async def test_inbox_prefix(self) -> None:
        """inbox_prefix names the reply subjects of requests, as the responder sees."""
        server = self.server()
        responder = await self.client(server.url)
        replies: list[str] = []

        def answer(m: Msg) -> None:
            assert m.reply is not None
            replies.append(m.reply)
            m.respond(b"ok")

        responder.subscribe("parity.svc", answer)
        await responder.flush(timeout=5)
        nc = await self.client(server.url, inbox_prefix="_MY.INBOX")
        self.assertEqual((await nc.request("parity.svc", b"", timeout=5)).data, b"ok")
        self.assertTrue(replies[0].startswith("_MY.INBOX."))
        self.assertTrue(nc.new_inbox().startswith("_MY.INBOX."))
