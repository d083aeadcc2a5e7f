"""Secrets never reach logs, reprs, exception messages or ``connected_url``.

One full session against real servers, with every ``twisted.logger`` event captured
(debug level included: an observer on the global publisher sees every event, before
any level filter): user/password in the URL, token (option, URL and handler), NKEY seed
(string and file), a ``.creds`` file, JWT + signature callbacks, reconnects, and auth
failures. Then every captured event (formatted, and the raw event dict's ``repr``), every
``repr(client)``, ``connected_url``, ``servers`` and exception message is searched for the
password, token, seeds, JWTs and signatures. None may appear. (The NKEY and JWT part
needs the ``nkeys`` package; without it only that part is left out.)
"""

from __future__ import annotations

import base64
import urllib.parse
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial import unittest

import txnats
from tests.support.credentials import KeyPair, Operator, creds_text
from tests.support.files import temp_file
from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats import AuthorizationError, ConnectError, auth
from txnats.testing import NatsServer

PASSWORD = "pw/Alice+9f3c@1e%z"  # characters that need percent-encoding in a URL
USER = "alice"
TOKEN = "tok-77f0c1d2e3b4"
WRONG_PASSWORD = "wrong-pw-5e6f"
WRONG_TOKEN = "wrong-tok-8a9b"


def url_forms(secret: str) -> list[str]:
    """A secret as written, and percent-encoded as it would be in a URL."""
    return sorted({secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret)})


class SecretsInLogsTests(unittest.TestCase):
    """A whole session at debug level leaks no secret anywhere observable."""

    def setUp(self) -> None:
        # What was observed: log texts, reprs, URLs, exception messages.
        self.texts: list[tuple[str, str]] = []
        self.levels: set[LogLevel] = set()
        self.secrets: dict[str, str] = {}
        globalLogPublisher.addObserver(self.observe)
        self.addCleanup(globalLogPublisher.removeObserver, self.observe)
        # Signatures the client computes: spy on the signing function.
        real_sign = auth.sign_nonce

        def spy(seed: bytes, nonce: str) -> tuple[str, str]:
            public, sig = real_sign(seed, nonce)
            self.secret(f"signature of {nonce!r}", sig)
            return public, sig

        self.patch(auth, "sign_nonce", spy)

    def observe(self, event: dict[str, Any]) -> None:
        level = event.get("log_level")
        if level is not None:
            self.levels.add(level)
        self.texts.append(("log event (formatted)", formatEvent(event)))
        self.texts.append(("log event (repr)", repr(event)))
        failure = event.get("log_failure")
        if failure is not None:
            self.texts.append(("log traceback", failure.getTraceback()))

    def secret(self, name: str, value: str) -> None:
        for i, form in enumerate(url_forms(value)):
            self.secrets[f"{name} [{i}]"] = form

    def see(self, where: str, value: object) -> None:
        self.texts.append((where, value if isinstance(value, str) else repr(value)))

    def see_client(self, nc: txnats.Client, label: str) -> None:
        self.see(f"{label}: repr(client)", repr(nc))
        self.see(f"{label}: connected_url", str(nc.connected_url))
        self.see(f"{label}: servers", nc.servers)
        self.see(f"{label}: discovered_servers", nc.discovered_servers)
        self.see(f"{label}: options", repr(nc.options))
        self.see(f"{label}: credentials", repr(nc._connector._credentials))
        self.see(f"{label}: pool", [repr(s) for s in nc._connector.pool.servers])
        self.see(f"{label}: str(pool)", [str(s) for s in nc._connector.pool.servers])

    def see_error(self, label: str, err: BaseException) -> None:
        self.see(f"{label}: str(error)", str(err))
        self.see(f"{label}: repr(error)", repr(err))
        if err.__cause__ is not None:
            self.see(f"{label}: cause", repr(err.__cause__))

    def server(self, config: str) -> NatsServer:
        server = NatsServer(config=config).start()
        self.addCleanup(server.stop)
        return server

    async def session(self, label: str, url: str, **kwargs: Any) -> None:
        """Connect, use, reconnect once, look at everything, close."""
        before: list[int] = []
        nc = await bounded(
            txnats.connect(reactor, url, reconnect_wait=0.05, connect_timeout=2.0, **kwargs)
        )
        try:
            self.see_client(nc, label)
            sub = nc.subscribe("secrets.echo", lambda m: m.respond(m.data))
            reply = await nc.request("secrets.echo", b"hi", timeout=WAIT)
            self.assertEqual(reply.data, b"hi")
            before.append(nc.stats.reconnects)
            nc.force_reconnect()
            await wait_until(
                lambda: nc.stats.reconnects > before[0] and nc.is_connected, interval=0.02
            )
            self.see_client(nc, label + " after reconnect")
            sub.unsubscribe()
        finally:
            await bounded(nc.close())
        self.see_client(nc, label + " closed")

    async def refused(self, label: str, url: str, **kwargs: Any) -> None:
        err = await self.assertFailure(
            bounded(txnats.connect(reactor, url, connect_timeout=2.0, **kwargs), 10.0),
            ConnectError,
        )
        self.see_error(label, err)

    async def nkey_and_jwt(self, host: str) -> None:
        """The NKEY and JWT part of the session (needs the nkeys package)."""
        nkey_user = KeyPair.user()
        nkeys_srv = self.server(f'authorization {{ users = [{{nkey: "{nkey_user.public}"}}] }}\n')
        op = Operator()
        jwt_srv = self.server(op.server_config())
        creds_user, creds_jwt = op.new_user("creds")
        cb_user, cb_jwt = op.new_user("callbacks")
        rogue_user, rogue_jwt = op.new_user("rogue", account=KeyPair.account())

        for name, value in [
            ("nkey seed", nkey_user.seed),
            ("creds seed", creds_user.seed),
            ("creds jwt", creds_jwt),
            ("callback seed", cb_user.seed),
            ("callback jwt", cb_jwt),
            ("rogue seed", rogue_user.seed),
            ("rogue jwt", rogue_jwt),
        ]:
            self.secret(name, value)

        def signature_cb(nonce: str) -> bytes:
            raw = cb_user.sign(nonce.encode())
            self.secret("callback signature", base64.urlsafe_b64encode(raw).rstrip(b"=").decode())
            self.secret("callback signature (std b64)", base64.b64encode(raw).decode())
            self.secret("callback signature (hex)", raw.hex())
            return raw

        # NKEY seed, as a string and in a file.
        await self.session("nkey seed", nkeys_srv.url, nkeys_seed=nkey_user.seed)
        seed_file = temp_file(self)
        with open(seed_file, "w") as f:
            f.write(nkey_user.seed + "\n")
        await self.session("nkey seed file", nkeys_srv.url, nkeys_seed_file=seed_file)
        # JWT: a .creds file, and the callbacks.
        creds = temp_file(self)
        with open(creds, "w") as f:
            f.write(creds_text(creds_jwt, creds_user.seed))
        await self.session("creds", jwt_srv.url, user_credentials=creds)
        await self.session(
            "jwt callbacks", jwt_srv.url, user_jwt_cb=lambda: cb_jwt, signature_cb=signature_cb
        )

        # Auth failures.
        await self.refused("wrong nkey", nkeys_srv.url, nkeys_seed=creds_user.seed)
        rogue = temp_file(self)
        with open(rogue, "w") as f:
            f.write(creds_text(rogue_jwt, rogue_user.seed))
        await self.refused("untrusted jwt", jwt_srv.url, user_credentials=rogue)

    async def test_no_secret_anywhere(self) -> None:
        """0 occurrences of any password, token, seed, JWT or signature in what is observable."""
        users = self.server(
            f'authorization {{ users = [{{user: "{USER}", password: "{PASSWORD}"}}] }}\n'
        )
        tokens = self.server(f'authorization {{ token: "{TOKEN}" }}\n')
        for name, value in [
            ("password", PASSWORD),
            ("wrong password", WRONG_PASSWORD),
            ("token", TOKEN),
            ("wrong token", WRONG_TOKEN),
        ]:
            self.secret(name, value)

        quoted_pw = urllib.parse.quote(PASSWORD, safe="")
        host = "127.0.0.1"

        # user/password in the URL; token as option, in the URL and from a handler.
        await self.session("userinfo", f"nats://{USER}:{quoted_pw}@{host}:{users.port}")
        await self.session("user option", users.url, user=USER, password=PASSWORD)
        await self.session("token option", tokens.url, token=TOKEN)
        await self.session("token url", f"nats://{TOKEN}@{host}:{tokens.port}")
        await self.session("token handler", tokens.url, token_handler=lambda: TOKEN)
        # Auth failures, first connect.
        await self.refused(
            "wrong password url", f"nats://{USER}:{WRONG_PASSWORD}@{host}:{users.port}"
        )
        await self.refused("wrong token", tokens.url, token=WRONG_TOKEN)
        await self.refused("wrong token url", f"nats://{WRONG_TOKEN}@{host}:{tokens.port}")
        await self.nkey_and_jwt(host)

        # An auth failure while reconnecting (the token is revoked): the client gives up.
        tokens_given: list[str] = []

        def rotating() -> str:
            tokens_given.append(TOKEN if not tokens_given else WRONG_TOKEN)
            return tokens_given[-1]

        closed: Deferred[None] = Deferred()
        nc = await bounded(
            txnats.connect(
                reactor,
                tokens.url,
                token_handler=rotating,
                reconnect_wait=0.05,
                max_reconnect_attempts=-1,
                closed_cb=lambda: closed.callback(None),
            )
        )
        nc.force_reconnect()
        await bounded(closed, 10.0)
        self.assertIsInstance(nc._connector.last_error, AuthorizationError)
        self.see_error("revoked token", nc._connector.last_error)
        self.see_client(nc, "revoked token")

        # The capture worked: many events, debug ones among them, signatures recorded.
        self.assertIn(LogLevel.debug, self.levels)
        log_events = sum(1 for where, _ in self.texts if where == "log event (formatted)")
        self.assertGreater(log_events, 50)
        self.assertTrue(any(k.startswith("signature of") for k in self.secrets))
        self.assertTrue(any(k.startswith("callback signature") for k in self.secrets))

        found = [
            f"{name} in {where}"
            for name, value in self.secrets.items()
            for where, text in self.texts
            if value in text
        ]
        self.assertEqual(found, [], f"{len(found)} secrets leaked")
        # The URLs render with credentials redacted.
        self.assertIn(
            ("userinfo: connected_url", f"nats://{USER}:***@{host}:{users.port}"), self.texts
        )
        self.assertIn(("token url: connected_url", f"nats://***@{host}:{tokens.port}"), self.texts)
