"""Credentials: user/password, tokens, NKEYs and JWTs (the auth fields of CONNECT).

Secrets stay in this module's objects: they are never logged, and their ``repr`` shows
only which method is configured. A ``.creds`` file is read on every connection attempt,
so rotated credentials apply at the next reconnect.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from txnats.errors import CredentialsError

__all__ = ["Credentials", "parse_creds", "sign_nonce"]

_BLOCK = re.compile(
    r"-{3,}[^\n]*BEGIN[^\n]*-{3,}\s*\n(?P<body>.+?)\n\s*-{3,}[^\n]*END[^\n]*-{3,}", re.DOTALL
)


def parse_creds(text: str) -> tuple[str, bytes]:
    """Split a ``.creds`` file into (user JWT, user seed)."""
    blocks = [m.group("body").strip() for m in _BLOCK.finditer(text)]
    if len(blocks) < 2:
        raise CredentialsError("creds file must hold a JWT block and an NKEY seed block")
    jwt, seed = blocks[0], blocks[1]
    if not seed.startswith("SU"):
        raise CredentialsError("creds file seed is not a user seed")
    return jwt, seed.encode("ascii")


def sign_nonce(seed: bytes, nonce: str) -> tuple[str, str]:
    """Sign ``nonce`` with an NKEY seed; return (public key, base64url signature, no padding)."""
    try:
        import nkeys
    except ImportError:  # pragma: no cover - depends on the environment
        raise CredentialsError("NKEY and JWT auth need the nkeys package: pip install txnats[nkeys]"
                               ) from None
    try:
        kp = nkeys.from_seed(bytearray(seed))
        sig = kp.sign(nonce.encode("utf-8"))
        public = kp.public_key.decode("ascii")
        kp.wipe()
    except Exception as e:
        raise CredentialsError(f"cannot sign with the NKEY seed: {type(e).__name__}") from None
    return public, base64.urlsafe_b64encode(sig).rstrip(b"=").decode("ascii")


_SEED = re.compile(r"S[A-Z2-7]{50,}")


def _looks_like_seed(text: str) -> bool:
    """An NKEY seed: 'S', then base32 (58 characters in all); a path has '/' or '.'."""
    return _SEED.fullmatch(text) is not None


def _call_for(name: str, cb: Callable[[], tuple[str, str]]) -> tuple[str, str]:
    """``cb()``, checked to be a ``(user, password)`` pair of strings (named, never shown)."""
    pair = cb()
    if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
        raise CredentialsError(f"{name} must return (user, password), two strings")
    return pair


def _read(path: str, what: str) -> str:
    """Read the file ``path``, given as the option ``what`` names.

    :raises CredentialsError: it cannot be read. The message names the option, never
        the value: credentials given where a path belongs (a ``.creds`` file's content,
        a seed, a JWT) must not come back in an error or a log line.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, ValueError) as e:  # (ValueError: a NUL in the "path")
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        hint = (
            "; it looks like credentials, not a path: pass a file's path"
            if "\n" in path or "-----" in path or len(path) > 1024 else ""
        )
        raise CredentialsError(
            f"cannot read the {what}: {reason} (the value is not shown, as it may be a "
            f"secret{hint})"
        ) from None


@dataclass(frozen=True)
class Credentials:
    """How the client authenticates; at most one method besides user/password per URL."""

    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    #: Called on each connection attempt for a fresh token.
    token_handler: Callable[[], str] | None = field(default=None, repr=False)
    #: An NKEY user seed (``SU...``) as a string, or a path to a file holding it
    #: (anything that is not a seed is read as a path).
    nkeys_seed: str | None = field(default=None, repr=False)
    nkeys_seed_file: str | None = field(default=None, repr=False)
    #: A ``.creds`` file (user JWT + seed); read on every connection attempt.
    user_credentials: str | None = field(default=None, repr=False)
    #: A ``.creds`` file's content (nats.go's ``UserCredentialBytes``).
    user_credentials_bytes: bytes | None = field(default=None, repr=False)
    #: A user JWT and its NKEY seed, as strings (nats.go's ``UserJWTAndSeed``).
    user_jwt: str | None = field(default=None, repr=False)
    user_seed: str | None = field(default=None, repr=False)
    #: Called on each connection attempt for ``(user, password)`` (``UserInfoHandler``).
    user_info_cb: Callable[[], tuple[str, str]] | None = field(default=None, repr=False)
    #: An NKEY user's public key (``U...``), whose nonce ``signature_cb`` signs
    #: (nats.go's ``Nkey(pub, sigCB)``): the seed stays with the caller.
    nkey: str | None = field(default=None, repr=False)
    #: Callbacks for JWT auth without a file: the user JWT, and the raw Ed25519
    #: signature of the server's nonce.
    user_jwt_cb: Callable[[], str] | None = field(default=None, repr=False)
    signature_cb: Callable[[str], bytes] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"Credentials({', '.join(self.methods) or 'none'})"

    @property
    def methods(self) -> list[str]:
        names = []
        if self.user is not None or self.user_info_cb is not None:
            names.append("user/password")
        if self.token is not None or self.token_handler is not None:
            names.append("token")
        if self.nkeys_seed is not None or self.nkeys_seed_file is not None or self.nkey:
            names.append("nkey")
        if (self.user_credentials is not None or self.user_credentials_bytes is not None
                or self.user_jwt is not None or self.user_jwt_cb is not None):
            names.append("jwt")
        return names

    def check(self) -> None:
        """Refuse what cannot work together, before anything is dialled.

        :raises CredentialsError: naming the options (never their values).
        """
        jwt_ways = [name for name, value in (
            ("user_credentials", self.user_credentials),
            ("user_credentials_bytes", self.user_credentials_bytes),
            ("user_jwt", self.user_jwt), ("user_jwt_cb", self.user_jwt_cb),
        ) if value is not None]
        if len(jwt_ways) > 1:
            raise CredentialsError(f"give one of {', '.join(jwt_ways)}, not several")
        if (self.user_jwt is None) != (self.user_seed is None):
            raise CredentialsError("user_jwt and user_seed go together")
        if self.nkey is not None and self.signature_cb is None:
            raise CredentialsError("nkey needs a signature_cb that signs the server's nonce")
        if self.user_credentials_bytes is not None and not isinstance(
            self.user_credentials_bytes, (bytes, bytearray)
        ):
            raise CredentialsError("user_credentials_bytes must be bytes (a .creds file's content)")

    def _creds(self) -> tuple[str, bytes] | None:
        """The user JWT and seed, from whichever form they were given in (a file read
        now, content, or the two strings), or None."""
        if self.user_credentials is not None:
            return parse_creds(_read(self.user_credentials, "creds file (user_credentials)"))
        if self.user_credentials_bytes is not None:
            try:
                text = bytes(self.user_credentials_bytes).decode("utf-8")
            except UnicodeDecodeError:
                raise CredentialsError("user_credentials_bytes is not UTF-8 text") from None
            return parse_creds(text)
        if self.user_jwt is not None and self.user_seed is not None:
            seed = self.user_seed.strip()
            if not seed.startswith("SU"):
                raise CredentialsError("user_seed is not a user seed ('SU...')")
            return self.user_jwt.strip(), seed.encode("ascii")
        return None

    def connect_fields(
        self,
        info: dict[str, Any],
        *,
        url_user: str | None = None,
        url_password: str | None = None,
        url_token: str | None = None,
    ) -> dict[str, Any]:
        """The auth fields of CONNECT for this server's INFO (its ``nonce``)."""
        out: dict[str, Any] = {}
        user = url_user if url_user is not None else self.user
        password = url_password if url_password is not None else self.password
        token = url_token if url_token is not None else self.token
        if user is None and self.user_info_cb is not None:
            user, password = _call_for("user_info_cb", self.user_info_cb)
        if user is not None:
            out["user"] = user
            out["pass"] = password or ""
        elif token is not None:
            out["auth_token"] = token
        elif self.token_handler is not None:
            out["auth_token"] = self.token_handler()
        nonce = info.get("nonce")
        creds = self._creds()
        if creds is not None:
            jwt, seed = creds
            out["jwt"] = jwt
            if nonce:
                out["sig"] = sign_nonce(seed, nonce)[1]
        elif self.user_jwt_cb is not None:
            out["jwt"] = self.user_jwt_cb()
            if nonce:
                if self.signature_cb is None:
                    raise CredentialsError("user_jwt_cb needs a signature_cb")
                raw = self.signature_cb(nonce)
                out["sig"] = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        elif self.nkey is not None:
            assert self.signature_cb is not None  # (check() refuses it otherwise)
            out["nkey"] = self.nkey
            if nonce:
                raw = self.signature_cb(nonce)
                out["sig"] = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        elif self.nkeys_seed is not None or self.nkeys_seed_file is not None:
            seed_text = self.nkeys_seed
            if seed_text is None:
                assert self.nkeys_seed_file is not None
                seed_text = _read(self.nkeys_seed_file, "seed file (nkeys_seed_file)")
            elif not _looks_like_seed(seed_text.strip()):
                # nats-py users pass a path here: accept one. (The value is never put in
                # an error message: it may be a mistyped seed.)
                try:
                    with open(seed_text, encoding="utf-8") as f:
                        seed_text = f.read()
                except (OSError, ValueError):
                    raise CredentialsError(
                        "nkeys_seed is neither an NKEY seed ('SU...') nor a readable file"
                    ) from None
            seed_text = seed_text.strip()
            if not seed_text.startswith("S"):
                raise CredentialsError("NKEY seed must start with 'S'")
            public, sig = sign_nonce(seed_text.encode("ascii"), nonce or "")
            out["nkey"] = public
            if nonce:
                out["sig"] = sig
        return out
