"""Connecting: the server pool's policy, attempts with back-off and jitter, the dial
itself (TCP, TLS or WebSocket, and the NATS handshake), and the CONNECT fields.

The :class:`Connector` knows nothing of subscriptions or publishing. It reports to its
:class:`ConnectorHost` (the client): a connection whose handshake is done, or that no
server can be reached.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IDelayedCall, IReactorCore, IReactorTime
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_delay
from txnats._hooks import ConnectionHooks
from txnats._version import __version__
from txnats.connection import NatsProtocol
from txnats.endpoints import server_endpoint
from txnats.errors import (
    AuthorizationError,
    ConnectError,
    CredentialsError,
    NatsError,
    NoServersError,
    TLSError,
)
from txnats.options import Options, PoolServer
from txnats.servers import Server, ServerPool, parse_servers
from txnats.tls import TLSConfig

__all__ = ["Connector"]

log = Logger()


class _OneProtocolFactory(Factory):
    """Hands out the one protocol instance made for this attempt."""

    def __init__(self, proto: NatsProtocol) -> None:
        self._proto = proto

    def buildProtocol(self, addr: object) -> NatsProtocol:
        return self._proto


class Connector:
    """Dials servers of the pool for one client, retrying by the options' rules."""

    def __init__(
        self,
        reactor: IReactorCore,
        clock: IReactorTime,
        servers: str | Sequence[str],
        options: Options,
        hooks: ConnectionHooks,
        *,
        connected: Callable[[NatsProtocol, Server], None],
        gave_up: Callable[[NatsError], None],
        failed: Callable[[Server, NatsError], None],
        info: Callable[[], dict[str, Any]],
        rng: random.Random,
    ) -> None:
        self._reactor = reactor
        self._clock = clock
        self._options = options
        #: What the protocols this connector makes report to (each dial adds its own
        #: ``connect_options``, for the server it dials).
        self.hooks = hooks
        #: Told of an attempt that succeeded: its protocol finished the handshake.
        self._connected = connected
        #: Told that no server is left to try (attempts used up), and why.
        self._gave_up = gave_up
        #: Told of each failed attempt: the server, and why.
        self._failed_one = failed
        #: The latest server INFO (for ``reconnect_to_server_cb``).
        self._info = info
        # Attempts scheduled since the client was last connected (reconnect_delay_cb).
        self._attempt = 0
        self._rng = rng
        self.pool = ServerPool(parse_servers(servers), randomize=not options.no_randomize, rng=rng)
        self._credentials = options.credentials()
        #: True until the first connection is made: each server is tried once then,
        #: unless ``retry_on_failed_connect``.
        self.first = True
        #: Why the latest attempt (or connection) failed.
        self.last_error: NatsError | None = None
        self._call: IDelayedCall | None = None
        self._stopped = False
        self._dialling: Deferred[NatsProtocol] | None = None

    # ------------------------------------------------------------------ the pool
    def set_servers(self, servers: str | Sequence[str]) -> None:
        """Replace the pool (raises :class:`ConnectError` for a bad URL, keeping it)."""
        parsed = parse_servers(servers)
        self.pool = ServerPool(parsed, randomize=not self._options.no_randomize, rng=self._rng)

    def merge_discovered(self, urls: list[str], current: Server) -> list[Server]:
        """Take a cluster's current ``connect_urls``; return the servers that are new."""
        return self.pool.add_discovered(urls, current)

    def to_back(self, server: Server | None) -> None:
        """Try ``server`` last (the one just lost or left): others first."""
        pool = self.pool.servers
        if server in pool and len(pool) > 1:
            pool.remove(server)
            pool.append(server)

    def other_than(self, current: Server | None) -> Server | None:
        """The next server of the pool that is not ``current`` (lame duck: move there)."""
        for _ in range(len(self.pool)):
            candidate = self.pool.next_server()
            if candidate is not current:
                return candidate
        return None

    # ------------------------------------------------------------------ attempts
    def _pick(self) -> Server | None:
        opts = self._options
        once = self.first and not opts.retry_on_failed_connect
        limit = 1 if once else opts.max_reconnect_attempts
        for _ in range(len(self.pool)):
            server = self.pool.next_server()
            if limit >= 0 and server.attempts >= limit:
                continue
            return server
        return None

    def schedule(self) -> None:
        """Dial the next server that may still be tried, honouring ``reconnect_wait``
        (plus jitter) since its previous attempt, or what ``reconnect_delay_cb`` and
        ``reconnect_to_server_cb`` say; or report that none is left."""
        server = self._pick()
        chosen = None
        if server is not None and not (self.first and not self._options.retry_on_failed_connect):
            self._attempt += 1
            chosen = self._chosen()
            if chosen is not None:
                server = chosen[0]
        if server is None:
            last = self.last_error
            err: NatsError
            if isinstance(last, (AuthorizationError, TLSError, CredentialsError)):
                err = last  # a refusal that retrying cannot mend says more
            else:
                err = NoServersError(
                    "no server could be reached" + (f"; last error: {last}" if last else "")
                )
                err.__cause__ = last
            self._gave_up(err)
            return
        if chosen is not None:
            delay = chosen[1]
        elif self._options.reconnect_delay_cb is not None and self._attempt:
            delay = self._custom_delay()
        else:
            delay = 0.0
            if server.last_attempt is not None:
                elapsed = self._clock.seconds() - server.last_attempt
                wait = self._options.reconnect_wait
                if elapsed < wait:
                    delay = wait - elapsed + self._rng.uniform(0, self._options.reconnect_jitter)
        self._call = self._clock.callLater(delay, self._dial_now, server)

    def _custom_delay(self) -> float:
        """``reconnect_delay_cb(attempt)``, checked; ``reconnect_wait`` if it fails."""
        cb = self._options.reconnect_delay_cb
        assert cb is not None
        try:
            return check_delay("reconnect_delay_cb's answer", cb(self._attempt))
        except Exception:
            log.failure("reconnect_delay_cb failed; waiting reconnect_wait instead")
            return self._options.reconnect_wait

    def _chosen(self) -> tuple[Server, float] | None:
        """The server and delay ``reconnect_to_server_cb`` chooses, if it does (from
        the pool, with attempts left)."""
        cb = self._options.reconnect_to_server_cb
        if cb is None:
            return None
        pool = self.pool.servers
        seen = [PoolServer(s.redacted, s.attempts, s.discovered) for s in pool]
        try:
            choice = cb(seen, dict(self._info()))
            if choice is None:
                return None
            url, delay = choice
            delay = check_delay("reconnect_to_server_cb's delay", delay)
        except Exception:
            log.failure("reconnect_to_server_cb failed; choosing the server as usual")
            return None
        limit = self._options.max_reconnect_attempts
        for server in pool:
            if server.redacted == url and (limit < 0 or server.attempts < limit):
                return server, delay
        log.warn("reconnect_to_server_cb chose {url}, not a server of the pool with "
                 "attempts left; choosing as usual", url=url)
        return None

    def _dial_now(self, server: Server) -> None:
        self._call = None
        d = self._dialling = self.dial(server)
        d.addCallbacks(self._succeeded, self._failed, (server,), errbackArgs=(server,))

    def _succeeded(self, proto: NatsProtocol, server: Server) -> None:
        self._dialling = None
        if self._stopped:
            proto.abort()
            return
        self.connected_to(server)
        self._connected(proto, server)

    def connected_to(self, server: Server) -> None:
        """The client is connected to ``server`` (an attempt, or a lame-duck move):
        its failed attempts are forgotten."""
        server.attempts = 0
        server.last_auth_error = None
        self.first = False
        self._attempt = 0

    def _failed(self, failure: Failure, server: Server) -> None:
        self._dialling = None
        if self._stopped:
            return
        err = failure.value
        if not isinstance(err, NatsError):
            err = ConnectError(f"cannot connect to {server}: {failure.getErrorMessage()}")
        self.last_error = err
        log.info("Connect to {url} failed: {error}", url=server, error=str(err))
        self._failed_one(server, err)
        if isinstance(err, AuthorizationError):
            if server.last_auth_error == str(err):
                log.warn("{url} refused the same credentials twice; removed", url=server)
                self.pool.servers.remove(server)
            server.last_auth_error = str(err)
        else:
            server.last_auth_error = None
        self.schedule()

    def cancel(self) -> None:
        """Stop for good (the client closed): no attempt is scheduled any more, and a
        dial under way is dropped."""
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._dialling is not None:
            d, self._dialling = self._dialling, None
            d.cancel()

    # ------------------------------------------------------------------ the dial
    def make_protocol(self, server: Server) -> NatsProtocol:
        """The protocol for one attempt on ``server``: its TLS settings, and hooks whose
        ``connect_options`` build the CONNECT for this server (its URL's credentials)."""
        opts = self._options
        websocket = server.scheme in ("ws", "wss")
        return NatsProtocol(
            replace(self.hooks, connect_options=partial(self.connect_options, server=server)),
            self._clock,
            ping_interval=opts.ping_interval,
            max_pings_out=opts.max_pings_out,
            server_max_control_line=opts.max_control_line,
            tls_creator=partial(self._tls_creator, server),
            # TLS options make a nats:// server TLS-only; for ws:// they mean nothing
            # (a WebSocket has no in-band upgrade: use wss://).
            tls_wanted=server.scheme in ("tls", "wss") or (opts.tls is not None and not websocket),
            tls_first=self._tls_first(server),
        )

    def _tls_creator(self, server: Server) -> Any:
        """The TLS connection creator for ``server``, verifying its name."""
        return (self._options.tls or TLSConfig()).client_creator(
            server.tls_hostname or server.host
        )

    def _tls_first(self, server: Server) -> bool:
        """TLS starts before INFO: under a wss:// WebSocket (started by the endpoint),
        or for a server configured with ``handshake_first``."""
        tls = self._options.tls
        if server.scheme in ("ws", "wss"):
            return server.scheme == "wss"
        return tls is not None and tls.handshake_first

    def dial(self, server: Server) -> Deferred[NatsProtocol]:
        """Connect to ``server``: fires with the protocol once its handshake is done,
        or fails (within ``connect_timeout``, the error naming the step it cut short)."""
        server.attempts += 1
        server.last_attempt = self._clock.seconds()
        opts = self._options
        websocket = server.scheme in ("ws", "wss")
        tls_first = self._tls_first(server)
        proto = self.make_protocol(server)

        def tls_creator() -> Any:
            return self._tls_creator(server)

        try:
            if websocket:
                endpoint = server_endpoint(
                    server,
                    self._reactor,
                    opts.connect_timeout,
                    tls_creator if tls_first else None,
                    compression=opts.ws_compression,
                    headers=opts.ws_headers,
                )
            else:
                endpoint = server_endpoint(server, self._reactor, opts.connect_timeout)
                if tls_first:
                    from twisted.internet.endpoints import wrapClientTLS

                    endpoint = wrapClientTLS(tls_creator(), endpoint)
        except NatsError as e:
            return fail(e)
        except Exception as e:
            return fail(ConnectError(f"bad endpoint: {e}"))
        connected = endpoint.connect(_OneProtocolFactory(proto))
        d: Deferred[NatsProtocol] = connected.addCallback(lambda _: proto.handshake)

        def on_timeout(result: object, timeout: float) -> object:
            # Called only when the timeout fired. Cancelling fails the dial with
            # whatever its current step says (ConnectingCancelledError, or a
            # DNSLookupError from the resolver): report a timeout, naming the step.
            if isinstance(result, Failure):
                phase = proto.phase
                if phase == "TCP connect" and not _is_ip(server.host):
                    phase = "name resolution or TCP connect"
                err = ConnectError(f"connect to {server} timed out after {timeout}s ({phase})")
                err.__cause__ = result.value
                return Failure(err)
            return result

        d.addTimeout(opts.connect_timeout, self._clock, onTimeoutCancel=on_timeout)
        return d

    def connect_options(self, info: dict[str, Any], server: Server) -> dict[str, Any]:
        """The CONNECT fields for ``info``, the INFO of ``server``, credentials included."""
        opts = self._options
        if opts.no_echo and int(info.get("proto", 0)) < 1:
            raise ConnectError("server does not support no_echo")
        headers = bool(info.get("headers", False))
        out: dict[str, Any] = {
            "verbose": opts.verbose,
            "pedantic": opts.pedantic,
            "tls_required": False,
            "lang": "python-txnats",
            "version": __version__,
            "protocol": 1,
            "echo": not opts.no_echo,
            "headers": headers,
            "no_responders": headers,
        }
        if opts.name:
            out["name"] = opts.name
        out.update(
            self._credentials.connect_fields(
                info,
                url_user=server.user,
                url_password=server.password,
                url_token=server.token,
            )
        )
        return out


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
