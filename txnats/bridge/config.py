"""What a bridge is told to do: :class:`BridgeConfig`, built by ``tap.py`` from the
command line (or by a program, from Python)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from txnats.bridge.security import SubjectPolicy, check_listen
from txnats.errors import InvalidArgumentError

__all__ = ["DEFAULT_LISTEN", "BridgeConfig"]

#: Where the bridge serves HTTP unless told otherwise: loopback only.
DEFAULT_LISTEN = "tcp:8080:interface=127.0.0.1"


@dataclass
class BridgeConfig:
    """Everything a :class:`~txnats.bridge.service.BridgeService` needs.

    :param servers: NATS server URLs; None starts an embedded nats-server.
    :param connect_options: keyword arguments for :func:`txnats.connect` (credentials,
        TLS files, name).
    :param listen: a Twisted server endpoint description for HTTP.
    :param auth_token: the token HTTP clients must present, or None for none.
    :param max_body: the largest request body accepted, in bytes (413 above).
    :param stream_queue: how many messages an SSE or WebSocket client may have queued
        in the bridge before new ones are dropped (and counted).
    :param stream_queue_bytes: the same bound, in payload bytes.
    :param max_request_timeout: the longest ``?timeout=`` a request may ask for.
    :param policy: the subject allow/deny lists per route.
    :param forwards: the ``--forward`` routes (parsed by ``txnats.bridge.forward``).
    :param data_dir: the embedded server's JetStream directory (None: a temporary one).
    :param server_binary: the embedded server's executable (None: found as usual).
    :param access_log: log one line per answered HTTP request; without it only the
        refused and failed ones (status 400 and above) are logged. A line per request
        cost 22-36% of the bridge's CPU per publish at 2,000 publishes/s.
    :param idle_timeout: seconds an HTTP connection may stay idle (no byte from the
        client while no request is being answered) before it is closed; a request only
        partly sent by then is answered 408.
    :param insecure_no_auth: serve beyond loopback without a token (see
        :func:`~txnats.bridge.security.check_listen`): for a network where something
        else (a proxy, a firewall) decides who may connect.
    """

    servers: Sequence[str] | None = None
    connect_options: dict[str, Any] = field(default_factory=dict, repr=False)
    listen: str = DEFAULT_LISTEN
    auth_token: str | None = field(default=None, repr=False)
    max_body: int = 1024 * 1024
    stream_queue: int = 1000
    stream_queue_bytes: int = 8 * 1024 * 1024
    max_request_timeout: float = 60.0
    policy: SubjectPolicy = field(default_factory=SubjectPolicy)
    forwards: Sequence[Any] = ()
    data_dir: str | None = None
    server_binary: str | None = None
    access_log: bool = False
    idle_timeout: float = 60.0
    insecure_no_auth: bool = False

    def check(self) -> None:
        """Refuse what must not run.

        :raises InvalidArgumentError: for a listener others could reach without a token
            (unless ``insecure_no_auth``), or an idle timeout that is not a positive
            number of seconds.
        """
        check_listen(self.listen, has_token=self.auth_token is not None,
                     insecure_no_auth=self.insecure_no_auth)
        if not 0 < self.idle_timeout < float("inf"):
            raise InvalidArgumentError(
                f"idle_timeout must be a positive number of seconds, not {self.idle_timeout!r}")
