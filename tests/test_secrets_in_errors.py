"""Credentials given where a path belongs never come back in an error, a log or a repr.

A user who passes a ``.creds`` file's content as ``user_credentials`` (nats.go has
``UserCredentialBytes`` for that; the parity issue adds it here), a seed as
``nkeys_seed_file``, or a private key's PEM as a TLS ``key_file`` used to read it back
in ``CredentialsError: cannot read creds file '<the JWT and the seed>'`` and in the
connect-failure log. Each case below connects a client (against a fake server asking
for credentials, with a nonce) with a secret in the wrong argument, captures every log
event meanwhile, and searches the error, the log, ``repr(client)`` and ``repr`` of the
options for any part of the secret.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial import unittest

from txnats import ConnectError, CredentialsError, TLSError
from txnats.testing import ServerSide
from txnats.tls import TLSConfig

from .support.clients import ClientTestMixin
from .support.credentials import KeyPair, creds_text, encode_jwt
from .support.wire import info_line

PEM_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDsecretKEYdata0\n"
    "-----END PRIVATE KEY-----\n"
)


def secret_cases() -> list[tuple[str, dict[str, Any], list[str]]]:
    """(name, client options, the secret strings none of which may be seen)."""
    user = KeyPair.user()
    account = KeyPair.account()
    jwt = encode_jwt({"sub": user.public, "nats": {"type": "user", "version": 2}}, account)
    creds = creds_text(jwt, user.seed)
    jwt_parts = jwt.split(".")
    return [
        ("creds content as user_credentials", {"user_credentials": creds},
         [user.seed, jwt, *jwt_parts[1:]]),
        ("a JWT as user_credentials", {"user_credentials": jwt}, [jwt, *jwt_parts[1:]]),
        ("a seed as user_credentials", {"user_credentials": user.seed}, [user.seed]),
        ("a token as user_credentials", {"user_credentials": "tok-9f8e7d6c5b"},
         ["tok-9f8e7d6c5b"]),
        ("a seed as nkeys_seed_file", {"nkeys_seed_file": user.seed}, [user.seed]),
        ("creds content as nkeys_seed_file", {"nkeys_seed_file": creds}, [user.seed, jwt]),
        ("a NUL in user_credentials", {"user_credentials": "sec\x00ret-path-77"},
         ["ret-path-77"]),
        ("a PEM key as the TLS key_file",
         {"tls": TLSConfig(cert_file=__file__, key_file=PEM_KEY)}, ["secretKEYdata0"]),
        ("a PEM key as the TLS cert_file", {"tls": TLSConfig(cert_file=PEM_KEY)},
         ["secretKEYdata0"]),
        ("a PEM key as the TLS ca_file", {"tls": TLSConfig(ca_file=PEM_KEY)},
         ["secretKEYdata0"]),
    ]


class SecretsInErrorsTests(ClientTestMixin, unittest.SynchronousTestCase):
    """No secret in an error, a log line or a repr, whatever argument it came in."""

    def setUp(self) -> None:
        self.logged: list[str] = []

        def observe(event: dict[str, Any]) -> None:
            self.logged.append(repr(event))
            self.logged.append(formatEvent(event))

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)

    def attempt(self, options: dict[str, Any]) -> Exception:
        """Connect once with ``options``; the error the first connect fails with."""
        client = self.make_client(**options)
        self.logged.append(repr(client) + repr(client.options))
        d = client.start()
        self.clock.advance(0)
        server = ServerSide(self.clock)
        server.send(info_line(auth_required=True, nonce="n0nce", tls_available=True))
        self.clock.advance(0)
        if not server.lost:
            server.lose()
        self.clock.advance(0)
        error = self.failureResultOf(d, ConnectError).value
        self.logged.append(repr(client) + repr(client.options))
        return error

    def test_no_secret_in_errors_logs_or_reprs(self) -> None:
        """Each case fails to connect with a CredentialsError or TLSError that names
        the option; no part of the secret is in the error (str, repr, or the errors it
        was raised from), the log, or a repr."""
        cases = secret_cases()
        self.assertGreaterEqual(len(cases), 10)
        for name, options, secrets in cases:
            self.logged.clear()
            error = self.attempt(options)
            self.assertIsInstance(error, (CredentialsError, TLSError), name)
            seen = [str(error), repr(error), *self.logged]
            cause = error.__cause__ or error.__context__
            while cause is not None:
                seen.append(repr(cause))
                cause = cause.__cause__ or cause.__context__
            for i, secret in enumerate(secrets):
                for text in seen:
                    where = text.find(secret)
                    self.assertEqual(where, -1, f"{name}: secret {i} seen in a text")

    def test_errors_name_the_option(self) -> None:
        """What the user gets instead of the value: which option, and why."""
        error = self.attempt({"user_credentials": "/no/such/dir/user.creds"})
        self.assertIn("user_credentials", str(error))
        self.assertIn("No such file", str(error))
        user = KeyPair.user()
        error = self.attempt({"user_credentials": creds_text("eyJ0.eyJ1.c2ln", user.seed)})
        self.assertIn("looks like credentials", str(error))
