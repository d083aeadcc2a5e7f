"""``twistd nats-bridge`` (and ``twist nats-bridge``): the options and the service maker.

With no options the bridge starts an embedded nats-server (JetStream on, on a random
loopback port) and serves HTTP on ``tcp:8080:interface=127.0.0.1``.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.service import IService
from twisted.python import usage

from txnats.bridge.config import DEFAULT_LISTEN, BridgeConfig
from txnats.bridge.forward import parse_forward
from txnats.bridge.security import SubjectPolicy, parse_rule, read_token_file
from txnats.errors import InvalidArgumentError

__all__ = ["Options", "makeService"]

#: File options: the option, the txnats.connect keyword it becomes.
_FILES = (
    ("creds", "user_credentials"),
    ("nkey", "nkeys_seed_file"),
    ("tls-ca", "tls_ca_file"),
    ("tls-cert", "tls_cert_file"),
    ("tls-key", "tls_key_file"),
)

#: Options that only mean something with --nats (the embedded server takes none).
_CLIENT_ONLY = ("user", "password", "token", "creds", "nkey", "tls-ca", "tls-cert", "tls-key")


def _positive_int(text: str) -> int:
    value = int(text.replace("_", ""))
    if value < 1:
        raise ValueError(f"must be at least 1, not {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise ValueError(f"must be a positive number, not {text}")
    return value


class Options(usage.Options):
    """The command line of ``twistd nats-bridge``."""

    synopsis = "[options]"
    longdesc = (
        "An HTTP, Server-Sent Events and WebSocket bridge to NATS. Without --nats it "
        "starts an embedded nats-server with JetStream. Without --listen it serves on "
        f"{DEFAULT_LISTEN}. Listening beyond loopback needs --auth-token, TLS or not "
        "(or --insecure-no-auth). "
        "ROUTE in --allow/--deny is publish, request, subscribe, js or kv."
    )

    optParameters: list[list[Any]] = [
        ["nats", None, None,
         "NATS server URL(s), comma-separated (default: start an embedded nats-server)"],
        ["listen", None, DEFAULT_LISTEN, "HTTP listener, a Twisted server endpoint string"],
        ["auth-token", None, None, "token HTTP clients must send (Authorization: Bearer)"],
        ["auth-token-file", None, None, "read the HTTP token from this file's first line"],
        ["user", None, None, "NATS user name"],
        ["password", None, None, "NATS password (for --user)"],
        ["token", None, None, "NATS authentication token"],
        ["creds", None, None, "NATS user credentials file (JWT and NKey seed)"],
        ["nkey", None, None, "NATS NKey seed file"],
        ["tls-ca", None, None, "CA certificates to verify the NATS server"],
        ["tls-cert", None, None, "client certificate for NATS (PEM)"],
        ["tls-key", None, None, "client private key for NATS (PEM)"],
        ["name", None, "nats-bridge", "NATS connection name"],
        ["connect-timeout", None, 5.0, "seconds for each NATS connection attempt",
         _positive_float],
        ["max-body", None, 1024 * 1024, "largest request body in bytes (413 above)",
         _positive_int],
        ["stream-queue", None, 1000,
         "messages held per SSE/WebSocket client that does not keep up (then dropped)",
         _positive_int],
        ["max-request-timeout", None, 60.0, "longest ?timeout= of /v1/request",
         _positive_float],
        ["data-dir", None, None,
         "embedded server's JetStream directory (default: a temporary one, removed on exit)"],
        ["nats-server-bin", None, None, "embedded server's executable"],
    ]
    optFlags: list[list[Any]] = [
        ["access-log", None,
         "log every HTTP request (default: only those answered with 400 or above)"],
        ["insecure-no-auth", None,
         "serve beyond loopback without --auth-token (something in front of the bridge "
         "decides who may connect)"],
    ]

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self["forward"] = []
        self["allow"] = []
        self["deny"] = []
        self.config: BridgeConfig | None = None

    def opt_forward(self, spec: str) -> None:
        """Forward to another NATS system, e.g. 'orders.>=nats://host:4222' (repeatable)"""
        self["forward"].append(spec)

    def opt_allow(self, rule: str) -> None:
        """Allow only these subjects: ROUTE:PATTERN, or PATTERN for every route (repeatable)"""
        self["allow"].append(rule)

    def opt_deny(self, rule: str) -> None:
        """Refuse these subjects: ROUTE:PATTERN or PATTERN (repeatable; wins over --allow)"""
        self["deny"].append(rule)

    def postOptions(self) -> None:
        try:
            self.config = self._build()
            self.config.check()
        except InvalidArgumentError as e:
            raise usage.UsageError(str(e)) from None

    def _build(self) -> BridgeConfig:
        token = self["auth-token"]
        if self["auth-token-file"] is not None:
            if token is not None:
                raise InvalidArgumentError("give --auth-token or --auth-token-file, not both")
            token = read_token_file(self["auth-token-file"])
        if token is not None and not token.strip():
            raise InvalidArgumentError("--auth-token must not be empty")
        servers = None
        if self["nats"] is not None:
            servers = [u.strip() for u in self["nats"].split(",") if u.strip()]
            if not servers:
                raise InvalidArgumentError("--nats: no server URL given")
        else:
            given = [f"--{o}" for o in _CLIENT_ONLY if self[o] is not None]
            if given:
                raise InvalidArgumentError(
                    f"{', '.join(given)} need --nats (the embedded server takes none)")
        policy = SubjectPolicy(allow=[parse_rule(r) for r in self["allow"]],
                               deny=[parse_rule(r) for r in self["deny"]])
        return BridgeConfig(
            servers=servers, connect_options=self._connect_options(), listen=self["listen"],
            auth_token=token, max_body=self["max-body"], stream_queue=self["stream-queue"],
            max_request_timeout=self["max-request-timeout"], policy=policy,
            forwards=self._forwards(), data_dir=self["data-dir"],
            server_binary=self["nats-server-bin"], access_log=bool(self["access-log"]),
            insecure_no_auth=bool(self["insecure-no-auth"]),
        )

    def _connect_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"name": self["name"],
                                   "connect_timeout": self["connect-timeout"]}
        if self["user"] is not None:
            options["user"] = self["user"]
            options["password"] = self["password"] or ""
        elif self["password"] is not None:
            raise InvalidArgumentError("--password needs --user")
        if self["token"] is not None:
            options["token"] = self["token"]
        for flag, keyword in _FILES:
            path = self[flag]
            if path is None:
                continue
            if not os.path.isfile(path):
                raise InvalidArgumentError(f"--{flag}: no such file: {path}")
            options[keyword] = path
        return options

    def _forwards(self) -> list[Any]:
        routes = []
        for spec in self["forward"]:
            try:
                routes.append(parse_forward(spec))
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"--forward {spec!r}: {e}") from e
        return routes


def makeService(options: Options) -> IService:
    """The bridge service for ``twistd``/``twist`` (on the reactor they installed)."""
    # The one place the global reactor is taken: twistd's IServiceMaker.makeService
    # receives only the options, after twistd installed the reactor it chose. Everything
    # below is given it (BridgeService(config, reactor)); tests build BridgeService
    # with their own.
    from twisted.internet import reactor

    from txnats.bridge.service import BridgeService

    config = options.config
    if config is None:  # parseOptions was not called: build from the defaults
        options.postOptions()
        config = options.config
    assert config is not None
    return BridgeService(config, reactor, handle_signals=True)
