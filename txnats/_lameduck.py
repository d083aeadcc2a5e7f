"""Moving off a server in lame duck mode without a gap.

The next server is dialled while the old connection keeps working. Once the new one is
up, every subscription is made on it and confirmed (PONG); then the client takes it
over (publishes switch to it), the old connection unsubscribes everything, and it is
closed once its server has answered a last PING. Until then, whatever the old server
sends (replies to requests made before the switch among it) is still delivered: pending
requests and flushes complete where they were sent. In the instant both connections are
subscribed a message may arrive on both (a plain subscription sees it twice; requests
take the first reply); none is lost. If the new server cannot be reached, the client
reconnects as after a loss.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._connector import Connector, Retired
from txnats._registry import Subscriptions
from txnats.connection import ConnectionHandler, NatsProtocol
from txnats.protocol.commands import encode_unsub
from txnats.servers import Server

__all__ = ["Mover"]

log = Logger()


class Mover:
    """One client's lame-duck moves (one at a time)."""

    def __init__(
        self,
        connector: Connector,
        subs: Subscriptions,
        live: ConnectionHandler,
        current: Callable[[], NatsProtocol | None],
        take_over: Callable[[NatsProtocol, Server], None],
        fall_back: Callable[[], None],
    ) -> None:
        self._connector = connector
        self._subs = subs
        self._live = live
        #: The client's connection now, or None when it is not connected.
        self._current = current
        #: Make ``proto`` (connected to ``server``) the client's connection.
        self._take_over = take_over
        #: The move failed: reconnect as after a loss.
        self._fall_back = fall_back
        self._dialling: Deferred[NatsProtocol] | None = None

    @property
    def moving(self) -> bool:
        return self._dialling is not None

    def start(self, current_server: Server | None) -> None:
        """Dial the next server (not ``current_server``); nothing if one is under way."""
        if self._dialling is not None or self._current() is None:
            return
        server = self._connector.other_than(current_server)
        if server is None:
            return
        log.info("Moving from {old} to {new} (lame duck)", old=current_server, new=server)
        d = self._dialling = self._connector.dial(server)
        d.addCallbacks(self._up, self._failed, (server,), errbackArgs=(server,))

    def cancel(self) -> None:
        """Drop a move under way (the client lost its connection, or closed)."""
        if self._dialling is not None:
            d, self._dialling = self._dialling, None
            d.cancel()

    def _up(self, new: NatsProtocol, server: Server) -> None:
        old = self._current()
        if old is None:
            self._dialling = None
            new.abort()
            return
        frames = self._subs.frames()
        if frames:
            new.write_many(frames, sum(len(f) for f in frames))
        new.ping().addCallbacks(
            lambda _: self._switch(old, new, server), self._failed, errbackArgs=(server,)
        )

    def _failed(self, failure: Failure, server: Server) -> None:
        self._dialling = None
        if self._current() is None:
            return
        log.info(
            "Could not move to {url}: {error}; reconnecting instead",
            url=server, error=failure.getErrorMessage(),
        )
        self._fall_back()

    def _switch(self, old: NatsProtocol, new: NatsProtocol, server: Server) -> None:
        """The new connection has every subscription: retire the old one."""
        self._dialling = None
        if self._current() is not old or new.lost:
            new.abort()
            return
        old.handler = Retired(self._live)
        for sid in self._subs.by_sid:
            old.write(encode_unsub(sid))
        old.ping().addBoth(lambda _: old.close())
        # Behind what was published to it. (Now, not at the end of this turn: the
        # client flushes only its current connection then.)
        old.flush_now()
        self._take_over(new, server)
