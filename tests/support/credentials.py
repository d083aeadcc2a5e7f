"""NKEYs, JWTs and ``.creds`` files, minted fresh for the auth tests.

Operator, account and user JWTs follow the nats-io/jwt v2 layout: header
``{"typ":"JWT","alg":"ed25519-nkey"}``, claims with ``jti``/``iat``/``iss``/``sub``/
``name`` and a ``nats`` object carrying ``type`` and ``version: 2``, signed with fresh
NKEYs; nothing secret is committed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any

import nkeys  # in the test extra: NKEY and JWT auth are tested, never skipped

__all__ = [
    "KeyPair",
    "Operator",
    "account_jwt",
    "creds_text",
    "encode_jwt",
    "issue_jwt",
    "user_jwt",
]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class KeyPair:
    """A fresh NKEY of one role: ``seed`` (S...) and ``public`` (U..., A..., O...)."""

    def __init__(self, prefix: int) -> None:
        assert nkeys is not None
        self.seed = nkeys.encode_seed(os.urandom(32), prefix).decode("ascii")
        kp = nkeys.from_seed(bytearray(self.seed.encode("ascii")))
        self.public = kp.public_key.decode("ascii")
        self._kp = kp

    def sign(self, data: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature of ``data``."""
        return bytes(self._kp.sign(data))

    @classmethod
    def user(cls) -> KeyPair:
        assert nkeys is not None
        return cls(nkeys.PREFIX_BYTE_USER)

    @classmethod
    def account(cls) -> KeyPair:
        assert nkeys is not None
        return cls(nkeys.PREFIX_BYTE_ACCOUNT)

    @classmethod
    def operator(cls) -> KeyPair:
        assert nkeys is not None
        return cls(nkeys.PREFIX_BYTE_OPERATOR)


def encode_jwt(claims: dict[str, Any], signer: KeyPair) -> str:
    """A nats-io/jwt v2 token: header.claims.signature, base64url without padding."""
    header = b64url(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = dict(claims, iat=int(time.time()))
    # jti: a hash of the claims without it (base32 of SHA-512/256 in nats-io/jwt).
    raw = json.dumps(body, separators=(",", ":")).encode()
    body["jti"] = base64.b32encode(hashlib.sha512(raw).digest()[:32]).rstrip(b"=").decode()
    signing_input = header + "." + b64url(json.dumps(body, separators=(",", ":")).encode())
    return signing_input + "." + b64url(signer.sign(signing_input.encode("ascii")))


_UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}


def issue_jwt(subject: KeyPair, issuer: KeyPair, name: str, nats: dict[str, Any]) -> str:
    """A JWT for ``subject``, named ``name``, issued and signed by ``issuer``."""
    return encode_jwt(
        {"iss": issuer.public, "sub": subject.public, "name": name, "nats": nats}, issuer
    )


def account_jwt(account: KeyPair, operator: KeyPair, name: str) -> str:
    """An account JWT with no limits, signed by ``operator``."""
    nats = {
        "limits": _UNLIMITED,
        "default_permissions": {"pub": {}, "sub": {}},
        "type": "account",
        "version": 2,
    }
    return issue_jwt(account, operator, name, nats)


def user_jwt(user: KeyPair, account: KeyPair, name: str) -> str:
    """A user JWT with no limits, signed by ``account``."""
    nats = {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user",
            "version": 2}
    return issue_jwt(user, account, name, nats)


def creds_text(jwt: str, seed: str) -> str:
    """A ``.creds`` file as ``nsc`` writes it."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


class Operator:
    """An operator with an account (and a system account), and users of that account."""

    def __init__(self) -> None:
        self.operator = KeyPair.operator()
        self.account = KeyPair.account()
        self.system = KeyPair.account()
        self.operator_jwt = issue_jwt(
            self.operator, self.operator, "txnats-op", {"type": "operator", "version": 2}
        )
        self.account_jwt = account_jwt(self.account, self.operator, "APP")
        self.system_jwt = account_jwt(self.system, self.operator, "SYS")

    def new_user(self, name: str, account: KeyPair | None = None) -> tuple[KeyPair, str]:
        """A user key pair and its JWT (signed by our account unless told otherwise)."""
        user = KeyPair.user()
        return user, user_jwt(user, account or self.account, name)

    def server_config(self) -> str:
        return (
            f"operator: {self.operator_jwt}\n"
            f"system_account: {self.system.public}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"  {self.account.public}: {self.account_jwt}\n"
            f"  {self.system.public}: {self.system_jwt}\n"
            "}\n"
        )
