"""The bridge as one Twisted service: the embedded server (when there is no ``--nats``),
the NATS connection, the forwarders and the HTTP site, started and stopped in order.

One :class:`~twisted.application.service.Service` rather than a ``MultiService`` of
children: the steps depend on each other's results (the server's random port, the
connected client), and a ``MultiService`` stops its children all at once, where the
bridge must stop in order: stop listening, end the streams, let the HTTP requests
already taken get their answers (new ones on open connections are answered 503
``stopping``), stop the forwarders, drain the connection, then stop the embedded
server. ``twistd`` waits for the Deferred
:meth:`BridgeService.stopService` returns, so SIGTERM drains before the process exits.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._connect import connect
from txnats.bridge.config import BridgeConfig
from txnats.bridge.context import BridgeContext
from txnats.bridge.embedded import EmbeddedServer
from txnats.bridge.http import BridgeSite, make_site
from txnats.bridge.metrics import BridgeMetrics
from txnats.bridge.security import is_public
from txnats.client import ClientState

__all__ = ["BridgeService"]

log = Logger()

def _exit_failed() -> None:
    """End the process with status 1 once twistd has cleaned up (it has no way to say
    that a service failed: it exits 0 unless a signal stopped it)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # closed or redirected away: nothing to flush
            pass
    os._exit(1)


class BridgeService(Service):
    """``twistd nats-bridge``, or a bridge inside any Twisted program.

    :param config: what to run.
    :param reactor: the reactor to run on.
    :param on_start_failure: called with the failure if the bridge cannot start (by
        default it is logged and the reactor stopped, as a program should end).
    :param handle_signals: take SIGTERM, SIGINT and SIGHUP from the reactor
        (``twistd`` does this): the first one stops the bridge in order (draining the
        connection, then stopping the embedded server, which runs in a process group of
        its own so that a terminal's Ctrl-C does not reach it first) and
        then the reactor; a second one stops the reactor at once. Without it the
        reactor's own shutdown closes the NATS client without draining (the client
        closes itself when the reactor stops).
    """

    name = "nats-bridge"

    def __init__(
        self, config: BridgeConfig, reactor: Any,
        on_start_failure: Callable[[Failure], object] | None = None,
        handle_signals: bool = False,
    ) -> None:
        config.check()
        self.config = config
        self.metrics = BridgeMetrics()
        self.ctx = BridgeContext(reactor, config, self.metrics)
        self._reactor = reactor
        self._on_start_failure = on_start_failure or self._stop_reactor
        self._embedded: EmbeddedServer | None = None
        self._port: Any = None
        self._site: BridgeSite | None = None
        self._forwarders: list[Any] = []
        self._started: Deferred[str] | None = None
        self._waiting: list[Deferred[str]] = []
        self._address: str | None = None
        self._stopping: Deferred[None] | None = None
        self._last_state: ClientState | None = None
        self._handle_signals = handle_signals

    # -- starting -------------------------------------------------------------------
    def startService(self) -> None:
        super().startService()  # type: ignore[no-untyped-call]
        self._stopping = None
        self.ctx.stopping = False
        self._started = ensureDeferred(self._start())
        self._started.addCallbacks(self._up, self._start_failed)
        if self._handle_signals:  # after the reactor has installed its own handlers
            self._reactor.callWhenRunning(self._install_signal_handlers)

    def _install_signal_handlers(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._signalled)

    def _signalled(self, signum: int, frame: object) -> None:
        self._reactor.callFromThread(self._graceful_exit, signal.Signals(signum).name)

    def _graceful_exit(self, name: str) -> None:
        if self._stopping is not None:
            log.info("nats-bridge: {signal} again, stopping now", signal=name)
            self._end_reactor()
            return
        log.info("nats-bridge: {signal}, draining before exit", signal=name)
        self.stopService().addBoth(lambda _: self._end_reactor())

    def when_listening(self) -> Deferred[str]:
        """Fires with the HTTP base URL (``http://127.0.0.1:PORT``) once the bridge
        serves; fails if it cannot start."""
        d: Deferred[str] = Deferred()
        if self._address is not None:
            d.callback(self._address)
        else:
            self._waiting.append(d)
        return d

    async def _start(self) -> str:
        servers: Any = self.config.servers
        if servers is None:
            self._embedded = EmbeddedServer(
                self._reactor, data_dir=self.config.data_dir, binary=self.config.server_binary
            )
            url = await self._embedded.start()
            self.ctx.embedded_url, self.ctx.data_dir = url, self._embedded.data_dir
            log.info("nats-bridge: embedded nats-server on {url}, JetStream data in {data_dir} "
                     "(pid {pid})", url=url, data_dir=self._embedded.data_dir,
                     pid=self._embedded.pid)
            servers = [url]
        options = {"name": "nats-bridge", "max_reconnect_attempts": -1,
                   **self.config.connect_options}
        client = await connect(self._reactor, servers, **options)
        self.ctx.client = client
        self._last_state = client.state
        self.metrics.connected.set(1)
        client.add_status_listener(self._on_state)
        log.info("nats-bridge: connected to {url}", url=client.connected_url)
        await self._start_forwarders()
        endpoint = serverFromString(  # type: ignore[no-untyped-call]
            self._reactor, self.config.listen)
        self._site = make_site(self.ctx)
        self._port = await endpoint.listen(self._site)
        if self.config.auth_token is None and is_public(self.config.listen):
            log.warn("nats-bridge: serving {listen} without a token (--insecure-no-auth): "
                     "whoever reaches it may publish and subscribe", listen=self.config.listen)
        return self._base_url()

    async def _start_forwarders(self) -> None:
        if not self.config.forwards:
            return
        from txnats.bridge.forward import Forwarder

        client = self.ctx.nats()
        for route in self.config.forwards:
            fw = Forwarder(self._reactor, route, client, on_forward=self.metrics.on_forward)
            await fw.start()
            self._forwarders.append(fw)
            log.info("nats-bridge: forwarding {route}", route=route.name)

    def _base_url(self) -> str:
        addr = self._port.getHost()
        host = getattr(addr, "host", None)
        scheme = "https" if self.config.listen.lower().startswith("ssl:") else "http"
        if host is None:
            return f"{scheme}+unix://{getattr(addr, 'name', '?')}"
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{addr.port}"

    def _up(self, address: str) -> None:
        self._address = address
        log.info("nats-bridge listening on {address}", address=address)
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(address)

    def _start_failed(self, failure: Failure) -> None:
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.errback(failure)
        if self.ctx.stopping:  # stopped while starting: nothing more to report
            return
        self._on_start_failure(failure)

    def _stop_reactor(self, failure: Failure) -> None:
        log.critical("nats-bridge could not start: {error}", error=failure.getErrorMessage())
        if self._handle_signals:  # the program is the bridge (twistd): exit status 1
            atexit.register(_exit_failed)
        self.stopService().addBoth(lambda _: self._end_reactor())

    def _end_reactor(self) -> None:
        try:
            self._reactor.stop()
        except Exception as e:  # ReactorNotRunning: it is stopping already
            log.debug("reactor already stopping: {error}", error=e)

    def _on_state(self, state: ClientState) -> None:
        if state == ClientState.CONNECTED and self._last_state == ClientState.RECONNECTING:
            self.metrics.reconnects.inc()
        self._last_state = state
        self.metrics.connected.set(1 if state == ClientState.CONNECTED else 0)
        log.info("nats-bridge: NATS connection {state}", state=str(state))

    # -- stopping -------------------------------------------------------------------
    def stopService(self) -> Deferred[None]:
        """Stop listening, end the streams, let the HTTP requests under way be answered,
        stop the forwarders, drain the connection and stop the embedded server; fires
        when all is done."""
        if self._stopping is None:
            super().stopService()  # type: ignore[no-untyped-call]
            self._stopping = ensureDeferred(self._stop())
        d: Deferred[None] = Deferred()

        def done(result: object) -> object:
            d.callback(None)
            return result

        self._stopping.addBoth(done)
        return d

    async def _stop(self) -> None:
        self.ctx.stopping = True
        if self._started is not None and not self._started.called:
            self._started.cancel()
        port, self._port = self._port, None
        if port is not None:
            await port.stopListening()
        self.ctx.close_streams()
        await self._answer_in_flight()
        for fw in reversed(self._forwarders):
            await self._quietly("stopping a forwarder", fw.stop)
        self._forwarders = []
        client, self.ctx.client = self.ctx.client, None
        if client is not None:
            await self._quietly("draining the NATS connection", client.drain)
            self.metrics.connected.set(0)
        embedded, self._embedded = self._embedded, None
        if embedded is not None:
            await self._quietly("stopping the embedded nats-server", embedded.stop)
        self._address = None
        log.info("nats-bridge stopped")

    async def _answer_in_flight(self) -> None:
        """Let the HTTP requests that wait for NATS get their answers (for at most the
        client's ``drain_timeout``) before the connection drains; then close the idle
        HTTP connections. New requests meanwhile are answered 503 ``stopping``."""
        client = self.ctx.client
        waiting = len(self.ctx.in_flight)
        if client is not None and waiting:
            log.info("nats-bridge: waiting for {n} HTTP requests to be answered", n=waiting)
            wait = self.ctx.answered()
            wait.addTimeout(client.options.drain_timeout, self._reactor)
            try:
                await wait
            except Exception:  # the timeout: draining answers the rest (503 at worst)
                log.warn("nats-bridge: {n} HTTP requests still unanswered after {s} s",
                         n=len(self.ctx.in_flight), s=client.options.drain_timeout)
        if self._site is not None:
            self._site.close_idle()

    async def _quietly(self, what: str, step: Callable[[], Deferred[Any]]) -> None:
        try:
            await step()
        except Exception as e:
            log.warn("nats-bridge: {what} failed: {error}", what=what, error=e)
