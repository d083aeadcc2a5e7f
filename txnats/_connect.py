"""``connect()``: every connection option as a keyword, a connected client out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IReactorCore

from txnats._args import check_reactor
from txnats.client import Client
from txnats.errors import NatsError
from txnats.options import (
    DEFAULT_MAX_CONTROL_LINE,
    DEFAULT_MAX_OUTBOUND,
    DEFAULT_PENDING_BYTES,
    DEFAULT_PENDING_MSGS,
    DEFAULT_RECONNECT_BUFFER,
    DEFAULT_URL,
    Options,
)
from txnats.tls import TLSConfig

__all__ = ["connect"]


# long-function: the signature lists every connection option, one keyword each
def connect(
    reactor: IReactorCore,
    servers: str | Sequence[str] = DEFAULT_URL,
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    verbose: bool = False,
    pedantic: bool = False,
    no_echo: bool = False,
    connect_timeout: float = 2.0,
    ping_interval: float = 120.0,
    max_pings_out: int = 2,
    inbox_prefix: str = "_INBOX",
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
    drain_timeout: float = 30.0,
    max_outbound_bytes: int = DEFAULT_MAX_OUTBOUND,
    max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_wait: float = 2.0,
    reconnect_jitter: float = 0.1,
    reconnect_buffer_size: int = DEFAULT_RECONNECT_BUFFER,
    no_randomize: bool = False,
    ignore_discovered_servers: bool = False,
    retry_on_failed_connect: bool = False,
    token_handler: Callable[[], str] | None = None,
    nkeys_seed: str | None = None,
    nkeys_seed_file: str | None = None,
    user_credentials: str | None = None,
    user_jwt_cb: Callable[[], str] | None = None,
    signature_cb: Callable[[str], bytes] | None = None,
    tls: TLSConfig | None = None,
    tls_ca_file: str | None = None,
    tls_cert_file: str | None = None,
    tls_key_file: str | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    ws_compression: bool = False,
    error_cb: Callable[[Exception], object] | None = None,
    disconnected_cb: Callable[[NatsError], object] | None = None,
    reconnected_cb: Callable[[], object] | None = None,
    closed_cb: Callable[[], object] | None = None,
    lame_duck_cb: Callable[[], object] | None = None,
    discovered_servers_cb: Callable[[list[str]], object] | None = None,
) -> Deferred[Client]:
    """Connect to a NATS server; the Deferred fires with a connected :class:`Client`.

    ``servers`` is a URL (``nats://[user:pass@|token@]host:port``), a comma-separated
    string of them, a list, or Twisted client endpoint strings (``tcp:host=...:port=...``).
    Fails with :class:`AuthorizationError` if the server refuses the credentials and
    :class:`NoServersError` if no server can be reached. ``ws_compression`` offers
    permessage-deflate on ``ws://``/``wss://`` connections (used if the server enables
    WebSocket compression). ``max_control_line`` (bytes, default 4,096 as nats-server's)
    is the longest control line the server accepts; INFO does not announce it, so set it
    to the server's ``max_control_line`` if that was raised: a publish, request or
    subscription whose subjects would make a longer line raises
    :class:`ControlLineTooLongError` instead of costing the connection.
    """
    if tls is None and (
        tls_ca_file or tls_cert_file or tls_key_file or tls_hostname or tls_handshake_first
    ):
        tls = TLSConfig(
            ca_file=tls_ca_file,
            cert_file=tls_cert_file,
            key_file=tls_key_file,
            hostname=tls_hostname,
            handshake_first=tls_handshake_first,
        )
    opts = Options(
        token_handler=token_handler, nkeys_seed=nkeys_seed, nkeys_seed_file=nkeys_seed_file,
        user_credentials=user_credentials, user_jwt_cb=user_jwt_cb, signature_cb=signature_cb,
        tls=tls, ws_compression=ws_compression,
        name=name, user=user, password=password, token=token, verbose=verbose,
        pedantic=pedantic, no_echo=no_echo, connect_timeout=connect_timeout,
        ping_interval=ping_interval, max_pings_out=max_pings_out, inbox_prefix=inbox_prefix,
        pending_msgs_limit=pending_msgs_limit, pending_bytes_limit=pending_bytes_limit,
        drain_timeout=drain_timeout, max_outbound_bytes=max_outbound_bytes,
        max_control_line=max_control_line,
        allow_reconnect=allow_reconnect, max_reconnect_attempts=max_reconnect_attempts,
        reconnect_wait=reconnect_wait, reconnect_jitter=reconnect_jitter,
        reconnect_buffer_size=reconnect_buffer_size, no_randomize=no_randomize,
        ignore_discovered_servers=ignore_discovered_servers,
        retry_on_failed_connect=retry_on_failed_connect, error_cb=error_cb,
        disconnected_cb=disconnected_cb, reconnected_cb=reconnected_cb, closed_cb=closed_cb,
        lame_duck_cb=lame_duck_cb, discovered_servers_cb=discovered_servers_cb,
    )
    check_reactor("connect", reactor)  # a programming error: raised, not a failed Deferred
    try:
        client = Client(reactor, servers, opts)
    except NatsError as e:
        return fail(e)
    return client.start()
