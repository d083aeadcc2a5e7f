"""Every connection option with its default, and the client's statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from txnats._args import check_count, check_delay, check_timeout
from txnats.auth import Credentials
from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError, NatsError
from txnats.tls import TLSConfig

__all__ = [
    "DEFAULT_MAX_CONTROL_LINE",
    "DEFAULT_MAX_OUTBOUND",
    "DEFAULT_MAX_PAYLOAD",
    "DEFAULT_PENDING_BYTES",
    "DEFAULT_PENDING_MSGS",
    "DEFAULT_RECONNECT_BUFFER",
    "DEFAULT_URL",
    "Options",
    "PoolServer",
    "Statistics",
]

#: The server :func:`~txnats.connect` dials when given none.
DEFAULT_URL = "nats://127.0.0.1:4222"
#: The largest message, in bytes (headers included), assumed until the server's INFO
#: announces its own ``max_payload``.
DEFAULT_MAX_PAYLOAD = 1024 * 1024
#: A subscription's default pending limit, in messages (``pending_msgs_limit``).
DEFAULT_PENDING_MSGS = 512 * 1024
#: A subscription's default pending limit, in payload bytes (``pending_bytes_limit``).
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
#: The most bytes queued for the socket before ``publish`` raises
#: :class:`~txnats.errors.OutboundBufferFullError` (``max_outbound_bytes``).
DEFAULT_MAX_OUTBOUND = 32 * 1024 * 1024
#: The most bytes of publishes kept while disconnected (``reconnect_buffer_size``).
DEFAULT_RECONNECT_BUFFER = 8 * 1024 * 1024
#: nats-server's default ``max_control_line``, in bytes: the longest control line it
#: accepts from a client, counting the arguments after the operation name (INFO does
#: not announce it).
DEFAULT_MAX_CONTROL_LINE = 4096


@dataclass
class Statistics:
    """Counters since the client was created."""

    in_msgs: int = 0
    out_msgs: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    reconnects: int = 0


@dataclass(frozen=True)
class PoolServer:
    """A server of the pool, as ``reconnect_to_server_cb`` sees it."""

    #: Its URL, credentials redacted (what to return to choose it).
    url: str
    #: Failed attempts on it since the client was last connected to it.
    attempts: int
    #: True for a server a cluster announced, False for one given to ``connect()``.
    discovered: bool


@dataclass(kw_only=True)
class Options:
    """Every connection option, with its default: the one place they are declared.

    :func:`txnats.connect` takes each as a keyword (``connect(reactor, url,
    name="svc", ping_interval=30.0)``); ``Client(reactor, servers, Options(...))``
    takes them as one object. Times are in seconds, sizes in bytes. A bad value makes
    ``connect()`` fail, and ``Client()`` raise, with :class:`InvalidArgumentError`
    (:class:`InvalidArgumentTypeError` for a wrong type) naming the option; an unknown
    option is a ``TypeError`` naming it and the closest known name.
    """

    #: The client's name, shown by the server's monitoring (``connz``).
    name: str | None = None
    #: User and password (or put them in the URL: ``nats://user:pass@host``).
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    #: An authentication token (or in the URL: ``nats://token@host``).
    token: str | None = field(default=None, repr=False)
    #: Ask the server to acknowledge every command with ``+OK`` (debugging only).
    verbose: bool = False
    #: Ask the server for strict subject checking.
    pedantic: bool = False
    #: Do not receive the messages this connection publishes itself.
    no_echo: bool = False
    #: Seconds one connection attempt may take: TCP, TLS and the NATS handshake.
    connect_timeout: float = 2.0
    #: Seconds between the client's PINGs; 0 sends none.
    ping_interval: float = 120.0
    #: PINGs without a PONG after which the connection is declared stale (at least 1).
    max_pings_out: int = 2
    #: The prefix of reply subjects made by :meth:`~txnats.Client.new_inbox`.
    inbox_prefix: str = "_INBOX"
    #: Default pending limits of a subscription: messages, and payload bytes, held
    #: before it drops (or, with ``backpressure=True``, stops reading).
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES
    #: Seconds :meth:`~txnats.Client.drain` may take before the client closes anyway.
    drain_timeout: float = 30.0
    #: Bytes publishes may queue for the socket before ``publish`` raises
    #: :class:`OutboundBufferFullError` (32 MiB).
    max_outbound_bytes: int = DEFAULT_MAX_OUTBOUND
    #: The longest control line, in bytes, the server accepts (nats-server's default is
    #: 4,096; INFO does not announce it): a call that would need a longer one raises
    #: :class:`ControlLineTooLongError` instead of costing the connection.
    max_control_line: int = DEFAULT_MAX_CONTROL_LINE
    #: Reconnect when the connection is lost.
    allow_reconnect: bool = True
    #: Attempts per server before it is dropped from the pool; -1 for ever.
    max_reconnect_attempts: int = 60
    #: Seconds between two attempts on the same server, plus up to
    #: ``reconnect_jitter`` seconds chosen at random.
    reconnect_wait: float = 2.0
    reconnect_jitter: float = 0.1
    #: Bytes of publishes kept while disconnected, sent after the reconnection (8 MiB;
    #: 0 keeps none and publishing raises while disconnected).
    reconnect_buffer_size: int = DEFAULT_RECONNECT_BUFFER
    #: Try the servers in the order given instead of shuffled.
    no_randomize: bool = False
    #: Do not add the servers a cluster announces (``connect_urls``) to the pool.
    ignore_discovered_servers: bool = False
    #: Start without a server: :func:`~txnats.connect` fires at once with a client in
    #: the ``CONNECTING`` state, which keeps publishes in its reconnect buffer and
    #: subscriptions for the first connection, and goes through the pool as
    #: reconnecting would (``max_reconnect_attempts`` per server) until a server
    #: answers; ``connected_cb`` is called then (nats.go's ``RetryOnFailedConnect``).
    #: Without it the first connect tries each server once and fails if none answers.
    retry_on_failed_connect: bool = False
    #: ``reconnect_delay_cb(attempt) -> seconds``: the wait before reconnect attempt
    #: ``attempt`` (1, 2, ... since the connection was lost, or since the start with
    #: ``retry_on_failed_connect``), instead of ``reconnect_wait`` and
    #: ``reconnect_jitter`` (ADR-40's custom reconnect delay).
    reconnect_delay_cb: Callable[[int], float] | None = None
    #: ``reconnect_to_server_cb(servers, info) -> (url, seconds) | None``: before each
    #: reconnect attempt, choose the server from the pool (``servers``: a
    #: :class:`PoolServer` each; ``info``: the latest server INFO) and how long to wait
    #: first; None keeps the client's own choice. A URL outside the pool is ignored,
    #: and logged (ADR-40's reconnect to a specific server).
    reconnect_to_server_cb: (
        Callable[[list[PoolServer], dict[str, Any]], tuple[str, float] | None] | None
    ) = None
    #: Called on every connection attempt for a fresh token.
    token_handler: Callable[[], str] | None = field(default=None, repr=False)
    #: An NKEY user seed (``SU...``), or a path to a file holding one.
    nkeys_seed: str | None = field(default=None, repr=False)
    #: A path to a file holding an NKEY user seed.
    nkeys_seed_file: str | None = field(default=None, repr=False)
    #: A path to a ``.creds`` file (user JWT and seed), read on every connection
    #: attempt so that rotated credentials apply.
    user_credentials: str | None = field(default=None, repr=False)
    #: A ``.creds`` file's content, as bytes (nats.go's ``UserCredentialBytes``).
    user_credentials_bytes: bytes | None = field(default=None, repr=False)
    #: A user JWT and its NKEY seed (``SU...``), as strings (``UserJWTAndSeed``).
    user_jwt: str | None = field(default=None, repr=False)
    user_seed: str | None = field(default=None, repr=False)
    #: ``user_info_cb() -> (user, password)``, called on each connection attempt
    #: (nats.go's ``UserInfoHandler``).
    user_info_cb: Callable[[], tuple[str, str]] | None = field(default=None, repr=False)
    #: An NKEY user's public key (``U...``): the server's nonce is signed by
    #: ``signature_cb``, so the seed never reaches the client (``Nkey(pub, sigCB)``).
    nkey: str | None = field(default=None, repr=False)
    #: JWT authentication without a file: a callable returning the user JWT, and one
    #: returning the raw Ed25519 signature of the server's nonce.
    user_jwt_cb: Callable[[], str] | None = field(default=None, repr=False)
    signature_cb: Callable[[str], bytes] | None = field(default=None, repr=False)
    #: TLS settings as one object (for a ready ``creator`` among them); or the
    #: ``tls_*`` options below, not both. Either makes the client insist on TLS.
    tls: TLSConfig | None = None
    #: PEM file of the certificates to trust instead of the platform's.
    tls_ca_file: str | None = None
    #: PEM files of a client certificate and its key (mutual TLS).
    tls_cert_file: str | None = None
    tls_key_file: str | None = field(default=None, repr=False)
    #: The name to verify in the server's certificate (and send as SNI).
    tls_hostname: str | None = None
    #: ``tls_cert_cb() -> (certificate PEM, key PEM)`` and ``tls_ca_cb() -> CA PEM``,
    #: called on each connection attempt: certificates that rotate are picked up at
    #: the next connection (nats.go's ``ClientTLSConfig`` callbacks).
    tls_cert_cb: Callable[[], tuple[bytes, bytes]] | None = field(default=None, repr=False)
    tls_ca_cb: Callable[[], bytes] | None = None
    #: Start TLS before the server's INFO (servers configured with ``handshake_first``).
    tls_handshake_first: bool = False
    #: Offer permessage-deflate on ``ws://``/``wss://`` connections.
    ws_compression: bool = False
    #: Extra HTTP headers for the WebSocket upgrade request (``ws://``, ``wss://``):
    #: a proxy's authentication, say.
    ws_headers: dict[str, str] | None = field(default=None, repr=False)
    #: ``error_cb(error)``: asynchronous errors (slow consumers, handler errors,
    #: permission violations, messages that could not be delivered whole).
    error_cb: Callable[[Exception], object] | None = None
    #: ``disconnected_cb(reason)``: the connection was lost (or closed).
    disconnected_cb: Callable[[NatsError], object] | None = None
    #: ``connected_cb()``: the first connection is made (with
    #: ``retry_on_failed_connect``, how to learn that a server answered).
    connected_cb: Callable[[], object] | None = None
    #: ``reconnected_cb()``: connected again (after a loss, or a lame-duck move).
    reconnected_cb: Callable[[], object] | None = None
    #: ``reconnect_error_cb(url, error)``: a connection attempt failed (the server's
    #: URL, redacted, and why): one call per failed attempt (``ReconnectErrHandler``).
    reconnect_error_cb: Callable[[str, NatsError], object] | None = None
    #: ``closed_cb()``: the client is closed for good.
    closed_cb: Callable[[], object] | None = None
    #: ``lame_duck_cb()``: the server announced lame-duck mode.
    lame_duck_cb: Callable[[], object] | None = None
    #: ``discovered_servers_cb(urls)``: a cluster announced servers new to the pool.
    discovered_servers_cb: Callable[[list[str]], object] | None = None

    def __post_init__(self) -> None:
        shorthand = (
            self.tls_ca_file or self.tls_cert_file or self.tls_key_file or self.tls_hostname
            or self.tls_handshake_first or self.tls_cert_cb or self.tls_ca_cb
        )
        if shorthand and self.tls is None:
            self.tls = TLSConfig(
                ca_file=self.tls_ca_file, cert_file=self.tls_cert_file,
                key_file=self.tls_key_file, hostname=self.tls_hostname,
                handshake_first=self.tls_handshake_first, cert_cb=self.tls_cert_cb,
                ca_cb=self.tls_ca_cb,
            )
        elif shorthand and not self._tls_from_shorthand():
            raise InvalidArgumentError("give tls=TLSConfig(...) or the tls_* options, not both")

    def _tls_from_shorthand(self) -> bool:
        """True if ``tls`` is what the ``tls_*`` options make (a copy of these options)."""
        t = self.tls
        return t is not None and t.creator is None and (
            t.ca_file, t.cert_file, t.key_file, t.hostname, t.handshake_first, t.cert_cb,
            t.ca_cb,
        ) == (
            self.tls_ca_file, self.tls_cert_file, self.tls_key_file, self.tls_hostname,
            self.tls_handshake_first, self.tls_cert_cb, self.tls_ca_cb,
        )

    def check(self) -> None:
        """Check every number and callback (see :mod:`txnats._args`).

        :raises InvalidArgumentError: naming the first bad option.
        """
        check_timeout("connect_timeout", self.connect_timeout, allow_none=False)
        check_delay("ping_interval", self.ping_interval)  # 0: no PINGs
        check_count("max_pings_out", self.max_pings_out)  # (0 would drop a healthy connection)
        check_count("pending_msgs_limit", self.pending_msgs_limit)
        check_count("pending_bytes_limit", self.pending_bytes_limit)
        check_timeout("drain_timeout", self.drain_timeout, allow_none=False)
        check_count("max_outbound_bytes", self.max_outbound_bytes)
        check_count("max_control_line", self.max_control_line, minimum=64)
        check_count("max_reconnect_attempts", self.max_reconnect_attempts, minimum=-1)  # -1: ever
        check_delay("reconnect_wait", self.reconnect_wait)
        check_delay("reconnect_jitter", self.reconnect_jitter)
        check_count("reconnect_buffer_size", self.reconnect_buffer_size, minimum=0)  # 0: none
        for name in (
            "error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "lame_duck_cb",
            "discovered_servers_cb", "token_handler", "user_jwt_cb", "signature_cb",
            "connected_cb", "reconnect_error_cb", "reconnect_delay_cb",
            "reconnect_to_server_cb", "user_info_cb", "tls_cert_cb", "tls_ca_cb",
        ):
            cb = getattr(self, name)
            if cb is not None and not callable(cb):
                raise InvalidArgumentTypeError(
                    f"{name} must be callable, not {type(cb).__name__}"
                )
        if self.ws_headers is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in dict(self.ws_headers).items()
        ):
            raise InvalidArgumentTypeError("ws_headers must map header names to strings")
        self.credentials().check()

    def credentials(self) -> Credentials:
        """The authentication these options give (see :mod:`txnats.auth`)."""
        return Credentials(
            user=self.user, password=self.password, token=self.token,
            token_handler=self.token_handler, nkeys_seed=self.nkeys_seed,
            nkeys_seed_file=self.nkeys_seed_file, user_credentials=self.user_credentials,
            user_credentials_bytes=self.user_credentials_bytes, user_jwt=self.user_jwt,
            user_seed=self.user_seed, user_info_cb=self.user_info_cb, nkey=self.nkey,
            user_jwt_cb=self.user_jwt_cb, signature_cb=self.signature_cb,
        )
