"""Every NATS auth method against a real nats-server configured for it.

user/password, token (option and URL), token handler (called on every connect), NKEY
(seed string and seed file), JWT in operator mode with a ``.creds`` file (re-read on
every reconnect) and with ``user_jwt_cb`` + ``signature_cb``. Wrong credentials give
``AuthorizationError`` and the client stops within a bounded time, whatever its retry
settings.

Operator, account and user JWTs are minted fresh by :mod:`tests.support.credentials`,
signed with fresh NKEYs; nothing secret is committed.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial import unittest

import txnats
from tests.support.credentials import KeyPair, Operator, creds_text
from tests.support.files import free_port, temp_file
from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats import AuthorizationError, ClientState, ConnectError, CredentialsError, auth
from txnats.servers import ServerPool, parse_server
from txnats.testing import NatsCluster, NatsServer

# ---------------------------------------------------------------------- server configs
USER, PASSWORD = "alice", "pw-Alice-9f3c1e"
TOKEN = "tok-5b7e0c2d9a"
USERS_CONFIG = f'authorization {{ users = [{{user: "{USER}", password: "{PASSWORD}"}}] }}\n'
TOKEN_CONFIG = f'authorization {{ token: "{TOKEN}" }}\n'


def nkey_config(public: str) -> str:
    return f'authorization {{ users = [{{nkey: "{public}"}}] }}\n'


class AuthTestCase(unittest.TestCase):
    """Helpers: a server per test, bounded connects, clients closed at the end."""

    def start_server(self, config: str, monitor: bool = False) -> NatsServer:
        args: list[str] = []
        if monitor:
            self.monitor_port = free_port()
            args = ["-m", str(self.monitor_port)]
        server = NatsServer(config=config, args=args).start()
        self.addCleanup(server.stop)
        return server

    async def connect(self, url: str, **kwargs: Any) -> txnats.Client:
        kwargs.setdefault("connect_timeout", 2.0)
        nc = await bounded(txnats.connect(reactor, url, **kwargs))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc

    async def assert_refused(self, url: str, **kwargs: Any) -> AuthorizationError:
        """Connecting fails with AuthorizationError within a bounded time."""
        kwargs.setdefault("connect_timeout", 2.0)
        err: AuthorizationError = await self.assertFailure(
            bounded(txnats.connect(reactor, url, **kwargs), 10.0), AuthorizationError
        )
        return err

    async def assert_works(self, nc: txnats.Client) -> None:
        sub = nc.subscribe("auth.check")
        nc.publish("auth.check", b"ok")
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"ok")

    def connz(self, cid: int) -> dict[str, Any]:
        """The server's view of connection ``cid`` (monitoring, with auth details)."""
        url = f"http://127.0.0.1:{self.monitor_port}/connz?cid={cid}&auth=true"
        with urllib.request.urlopen(url, timeout=10.0) as resp:
            conns = json.load(resp)["connections"]
        self.assertEqual(len(conns), 1, conns)
        conn: dict[str, Any] = conns[0]
        return conn

    async def force_reconnect(self, nc: txnats.Client) -> None:
        """Drop the connection and wait (bounded) until the client is back."""
        before = nc.stats.reconnects
        nc.force_reconnect()
        await wait_until(lambda: nc.stats.reconnects > before and nc.is_connected)


class UserPasswordTests(AuthTestCase):
    """authorization { users = [{user, password}] }."""

    def setUp(self) -> None:
        self.server = self.start_server(USERS_CONFIG)

    async def test_options(self) -> None:
        """user= and password= authenticate."""
        nc = await self.connect(self.server.url, user=USER, password=PASSWORD)
        await self.assert_works(nc)

    async def test_url_userinfo(self) -> None:
        """nats://user:pass@host authenticates; connected_url shows user:***."""
        nc = await self.connect(f"nats://{USER}:{PASSWORD}@127.0.0.1:{self.server.port}")
        await self.assert_works(nc)
        self.assertEqual(nc.connected_url, f"nats://{USER}:***@127.0.0.1:{self.server.port}")

    async def test_wrong_password(self) -> None:
        """A wrong password -> AuthorizationError."""
        await self.assert_refused(self.server.url, user=USER, password="wrong")

    async def test_no_credentials(self) -> None:
        """No credentials at all -> AuthorizationError."""
        await self.assert_refused(self.server.url)


class TokenTests(AuthTestCase):
    """authorization { token }: option, URL, handler."""

    def setUp(self) -> None:
        self.server = self.start_server(TOKEN_CONFIG)

    async def test_option(self) -> None:
        """token= authenticates."""
        nc = await self.connect(self.server.url, token=TOKEN)
        await self.assert_works(nc)

    async def test_url_token(self) -> None:
        """nats://token@host (a user without password) is a token; URL shows ***@."""
        nc = await self.connect(f"nats://{TOKEN}@127.0.0.1:{self.server.port}")
        await self.assert_works(nc)
        self.assertEqual(nc.connected_url, f"nats://***@127.0.0.1:{self.server.port}")

    async def test_wrong_token(self) -> None:
        """A wrong token -> AuthorizationError."""
        await self.assert_refused(self.server.url, token="not-the-token")

    async def test_token_handler_called_on_each_connect(self) -> None:
        """token_handler runs once per connection: 1 at connect, 2 after a reconnect."""
        calls: list[int] = []

        def handler() -> str:
            calls.append(1)
            return TOKEN

        nc = await self.connect(self.server.url, token_handler=handler, reconnect_wait=0.1)
        self.assertEqual(len(calls), 1)
        await self.force_reconnect(nc)
        self.assertEqual(len(calls), 2)
        await self.assert_works(nc)

    async def test_token_handler_rotation_refused_stops(self) -> None:
        """A handler whose token goes bad: reconnecting stops with AuthorizationError."""
        calls: list[int] = []
        closed: Deferred[None] = Deferred()

        def handler() -> str:
            calls.append(1)
            return TOKEN if len(calls) == 1 else "revoked"

        nc = await self.connect(
            self.server.url,
            token_handler=handler,
            reconnect_wait=0.05,
            reconnect_jitter=0.0,
            max_reconnect_attempts=-1,  # forever: only the auth rule may stop it
            closed_cb=lambda: closed.callback(None),
        )
        nc.force_reconnect()
        await bounded(closed, 10.0)
        self.assertEqual(nc.state, ClientState.CLOSED)
        self.assertIsInstance(nc._connector.last_error, AuthorizationError)
        # One good connect, then the same refusal twice removes the server.
        self.assertLessEqual(len(calls), 4)


class NKeyTests(AuthTestCase):
    """authorization { users = [{nkey: U...}] }: the INFO nonce is signed."""

    def setUp(self) -> None:
        self.user = KeyPair.user()
        self.server = self.start_server(nkey_config(self.user.public))

    async def test_seed_string(self) -> None:
        """nkeys_seed='SU...' authenticates by signing the INFO nonce."""
        nonces: list[str] = []
        real = auth.sign_nonce

        def spy(seed: bytes, nonce: str) -> tuple[str, str]:
            nonces.append(nonce)
            return real(seed, nonce)

        self.patch(auth, "sign_nonce", spy)
        nc = await self.connect(self.server.url, nkeys_seed=self.user.seed)
        self.assertEqual(len(nonces), 1)
        self.assertTrue(nonces[0], "the server sent no nonce to sign")
        await self.assert_works(nc)

    async def test_seed_file(self) -> None:
        """nkeys_seed_file=<path> authenticates (surrounding whitespace ignored)."""
        path = temp_file(self)
        with open(path, "w") as f:
            f.write(f"\n{self.user.seed}\n")
        nc = await self.connect(self.server.url, nkeys_seed_file=path)
        await self.assert_works(nc)

    async def test_seed_path_in_nkeys_seed(self) -> None:
        """nkeys_seed=<path> (as nats-py users write it) reads the seed from the file."""
        path = temp_file(self, "user.nk")
        with open(path, "w") as f:
            f.write(f"{self.user.seed}\n")
        nc = await self.connect(self.server.url, nkeys_seed=path)
        await self.assert_works(nc)

    async def test_nkeys_seed_neither_seed_nor_file(self) -> None:
        """nkeys_seed that is no seed and no readable file fails with CredentialsError,
        without echoing the value (it may be a mistyped seed)."""
        bad = "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORR"[:-3] + "!!!"
        try:
            nc = await self.connect(self.server.url, nkeys_seed=bad)
        except CredentialsError as e:
            self.assertIn("neither an NKEY seed", str(e))
            self.assertNotIn(bad, str(e))
        else:  # pragma: no cover - the assertion below reports it
            await nc.close()
            self.fail("connected with a malformed seed")

    async def test_other_seed_refused(self) -> None:
        """A seed of an unknown user -> AuthorizationError."""
        await self.assert_refused(self.server.url, nkeys_seed=KeyPair.user().seed)


class JWTTests(AuthTestCase):
    """Operator mode: operator JWT, account JWTs preloaded in a memory resolver."""

    def setUp(self) -> None:
        self.op = Operator()
        self.server = self.start_server(self.op.server_config(), monitor=True)

    def write_creds(self, path: str, user: KeyPair, jwt: str) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(creds_text(jwt, user.seed))
        os.replace(tmp, path)

    async def test_creds_file(self) -> None:
        """user_credentials=<.creds> authenticates as the user named in the JWT."""
        user, jwt = self.op.new_user("u1")
        path = temp_file(self)
        self.write_creds(path, user, jwt)
        nc = await self.connect(self.server.url, user_credentials=path)
        await self.assert_works(nc)
        conn = self.connz(nc.client_id or 0)
        self.assertEqual(conn["authorized_user"], user.public)
        self.assertEqual(conn["account"], self.op.account.public)

    async def test_creds_reread_on_reconnect(self) -> None:
        """Rewriting the .creds file between connections: the reconnect uses the new user."""
        user1, jwt1 = self.op.new_user("first")
        user2, jwt2 = self.op.new_user("second")
        path = temp_file(self)
        self.write_creds(path, user1, jwt1)
        nc = await self.connect(self.server.url, user_credentials=path, reconnect_wait=0.1)
        self.assertEqual(self.connz(nc.client_id or 0)["authorized_user"], user1.public)
        self.write_creds(path, user2, jwt2)
        await self.force_reconnect(nc)
        self.assertEqual(self.connz(nc.client_id or 0)["authorized_user"], user2.public)
        await self.assert_works(nc)

    async def test_jwt_and_signature_callbacks(self) -> None:
        """user_jwt_cb + signature_cb (raw Ed25519 bytes) authenticate."""
        user, jwt = self.op.new_user("cb")
        nonces: list[str] = []

        def sign(nonce: str) -> bytes:
            nonces.append(nonce)
            return user.sign(nonce.encode())

        nc = await self.connect(self.server.url, user_jwt_cb=lambda: jwt, signature_cb=sign)
        self.assertEqual(len(nonces), 1)
        self.assertTrue(nonces[0])
        self.assertEqual(self.connz(nc.client_id or 0)["authorized_user"], user.public)
        await self.assert_works(nc)

    async def test_wrong_signature_refused(self) -> None:
        """A JWT signed with another user's key -> AuthorizationError."""
        _user, jwt = self.op.new_user("cb")
        other = KeyPair.user()
        await self.assert_refused(
            self.server.url,
            user_jwt_cb=lambda: jwt,
            signature_cb=lambda nonce: other.sign(nonce.encode()),
        )

    async def test_untrusted_account_refused(self) -> None:
        """A user JWT issued by an account the operator never signed -> AuthorizationError."""
        rogue = KeyPair.account()
        user, jwt = self.op.new_user("rogue", account=rogue)
        path = temp_file(self)
        self.write_creds(path, user, jwt)
        await self.assert_refused(self.server.url, user_credentials=path)


class BoundedFailureTests(AuthTestCase):
    """Wrong credentials never make the client loop forever."""

    def setUp(self) -> None:
        self.server = self.start_server(TOKEN_CONFIG)

    async def test_retry_forever_settings_still_stop(self) -> None:
        """retry_on_failed_connect + max_reconnect_attempts=-1: stops on the 2nd refusal."""
        calls: list[int] = []

        def handler() -> str:
            calls.append(1)
            return "bad-token"

        start = reactor.seconds()
        closed: Deferred[None] = Deferred()
        errors: list[Exception] = []
        nc = await txnats.connect(  # (retry_on_failed_connect: fires at once)
            reactor, self.server.url, token_handler=handler, retry_on_failed_connect=True,
            max_reconnect_attempts=-1, reconnect_wait=0.05, reconnect_jitter=0.0,
            closed_cb=lambda: closed.callback(None), error_cb=errors.append,
        )
        self.addCleanup(nc.close)
        await bounded(closed, 10.0, "the client giving up")
        self.assertLess(reactor.seconds() - start, 5.0)
        self.assertEqual(len(calls), 2)
        self.assertIsInstance(nc.last_error, AuthorizationError)
        await wait_until(lambda: any(isinstance(e, AuthorizationError) for e in errors))

    async def test_auth_error_is_connect_error(self) -> None:
        """AuthorizationError is a ConnectError and carries the server's text."""
        err = await self.assert_refused(self.server.url, token="nope")
        self.assertIsInstance(err, ConnectError)
        self.assertIn("authorization", err.server_message.lower())


class DiscoveredServerCredentialsTests(AuthTestCase):
    """URL credentials carry over to servers discovered through that URL (as nats.go)."""

    def test_pool_copies_url_credentials(self) -> None:
        """add_discovered copies user:pass or token of the seed, unless the URL has its own."""
        seed = parse_server(f"nats://{USER}:{PASSWORD}@seed.example:4222")
        new = ServerPool([seed]).add_discovered(["10.0.0.2:4222", "u2:p2@10.0.0.3:4222"], seed)
        by_host = {s.host: s for s in new}
        self.assertEqual((by_host["10.0.0.2"].user, by_host["10.0.0.2"].password), (USER, PASSWORD))
        self.assertEqual((by_host["10.0.0.3"].user, by_host["10.0.0.3"].password), ("u2", "p2"))
        self.assertNotIn(PASSWORD, by_host["10.0.0.2"].redacted)
        token_seed = parse_server(f"nats://{TOKEN}@seed.example:4222")
        new = ServerPool([token_seed]).add_discovered(["10.0.0.4:4222"], token_seed)
        self.assertEqual(new[0].token, TOKEN)
        self.assertEqual(new[0].redacted, "nats://***@10.0.0.4:4222")

    async def test_failover_keeps_url_credentials(self) -> None:
        """user:pass@seed of a 2-node cluster: after the seed dies, the other node accepts."""
        # NatsCluster, not free_port(): see DiscoveredHostnameTests in test_tls.py.
        cluster = NatsCluster(2, cluster_name="authc", config=USERS_CONFIG).start()
        self.addCleanup(cluster.stop)
        node_a, node_b = cluster[0], cluster[1]
        b_hostport = f"127.0.0.1:{node_b.port}"
        reconnected: list[bool] = []
        nc = await self.connect(
            f"nats://{USER}:{PASSWORD}@127.0.0.1:{node_a.port}",
            reconnect_wait=0.1,
            reconnect_jitter=0.0,
            max_reconnect_attempts=20,
            reconnected_cb=lambda: reconnected.append(True),
        )
        await wait_until(lambda: any(b_hostport in s for s in nc.discovered_servers))
        node_a.stop()
        await wait_until(lambda: bool(reconnected) and nc.is_connected, 10.0)
        self.assertEqual(nc.connected_url, f"nats://{USER}:***@{b_hostport}")
        await self.assert_works(nc)
