"""Every connection option with its default, and the client's statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from txnats._args import check_count, check_delay, check_timeout
from txnats.errors import InvalidArgumentTypeError, NatsError
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
    "Statistics",
]

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_MAX_PAYLOAD = 1024 * 1024
DEFAULT_PENDING_MSGS = 512 * 1024
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_OUTBOUND = 32 * 1024 * 1024
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


@dataclass
class Options:
    """Every connection option; see :func:`connect` for their meaning."""

    name: str | None = None
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    verbose: bool = False
    pedantic: bool = False
    no_echo: bool = False
    connect_timeout: float = 2.0
    ping_interval: float = 120.0
    max_pings_out: int = 2
    inbox_prefix: str = "_INBOX"
    pending_msgs_limit: int = DEFAULT_PENDING_MSGS
    pending_bytes_limit: int = DEFAULT_PENDING_BYTES
    drain_timeout: float = 30.0
    max_outbound_bytes: int = DEFAULT_MAX_OUTBOUND
    max_control_line: int = DEFAULT_MAX_CONTROL_LINE
    allow_reconnect: bool = True
    max_reconnect_attempts: int = 60
    reconnect_wait: float = 2.0
    reconnect_jitter: float = 0.1
    reconnect_buffer_size: int = DEFAULT_RECONNECT_BUFFER
    no_randomize: bool = False
    ignore_discovered_servers: bool = False
    retry_on_failed_connect: bool = False
    token_handler: Callable[[], str] | None = field(default=None, repr=False)
    nkeys_seed: str | None = field(default=None, repr=False)
    nkeys_seed_file: str | None = field(default=None, repr=False)
    user_credentials: str | None = field(default=None, repr=False)
    user_jwt_cb: Callable[[], str] | None = field(default=None, repr=False)
    signature_cb: Callable[[str], bytes] | None = field(default=None, repr=False)
    tls: TLSConfig | None = None
    ws_compression: bool = False
    error_cb: Callable[[Exception], object] | None = None
    disconnected_cb: Callable[[NatsError], object] | None = None
    reconnected_cb: Callable[[], object] | None = None
    closed_cb: Callable[[], object] | None = None
    lame_duck_cb: Callable[[], object] | None = None
    discovered_servers_cb: Callable[[list[str]], object] | None = None

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
        ):
            cb = getattr(self, name)
            if cb is not None and not callable(cb):
                raise InvalidArgumentTypeError(
                    f"{name} must be callable, not {type(cb).__name__}"
                )
