"""Moving off a server in lame duck mode without a gap.

The next server is dialled while the old connection keeps working. Once the new one is
up, every subscription is made on it and confirmed (PONG); then the client takes it
over (publishes switch to it) and the old connection unsubscribes everything but the
inboxes (subjects under the inbox prefix: replies, acknowledgements). Those it keeps for
:data:`LINGER` seconds more: a reply may still be routed to the old server, by one that
sent it before it learned of the new subscription; then they go too, and the old
connection is closed once its server has answered a last PING. Until then, whatever the
old server sends is still delivered: pending requests and flushes complete where they
were sent. In the instant both connections are subscribed a message may arrive on both
(a plain subscription sees it twice; a request takes the first reply); none is lost. If
the new server cannot be reached, the client reconnects as after a loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._connector import Connector
from txnats._hooks import ConnectionHooks, retired
from txnats._registry import Subscriptions
from txnats.connection import NatsProtocol
from txnats.protocol.commands import encode_unsub
from txnats.servers import Server

__all__ = ["LINGER", "Mover"]

#: Seconds the old connection keeps its inbox subscriptions after a move. Servers learn
#: of the new subscriptions over their routes within milliseconds; nats-server keeps a
#: lame-duck server's clients for its grace period (10 s by default) before closing them.
LINGER = 1.0

log = Logger()


class Mover:
    """One client's lame-duck moves (one at a time)."""

    def __init__(
        self,
        connector: Connector,
        subs: Subscriptions,
        live: ConnectionHooks,
        current: Callable[[], NatsProtocol | None],
        take_over: Callable[[NatsProtocol, Server], None],
        fall_back: Callable[[], None],
        clock: IReactorTime,
        inbox_prefix: str,
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
        self._clock = clock
        self._inboxes = inbox_prefix + "."
        self._dialling: Deferred[NatsProtocol] | None = None
        # Old connections keeping their inboxes for LINGER seconds, and their timers.
        self._lingering: dict[NatsProtocol, IDelayedCall] = {}

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

    def close(self) -> None:
        """The client closes: drop a move under way and close the old connections now
        (what was queued on them is still sent first)."""
        self.cancel()
        lingering, self._lingering = self._lingering, {}
        for old, call in lingering.items():
            if call.active():
                call.cancel()
            old.close()

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
        old.handler = retired(self._live)
        kept = []
        for sub in self._subs.all():
            sid = sub.sid
            if sub.subject.startswith(self._inboxes):
                kept.append(sid)
            else:
                old.write(encode_unsub(sid))
        # Behind what was published to it. (Now, not at the end of this turn: the
        # client flushes only its current connection then.)
        old.flush_now()
        self._lingering[old] = self._clock.callLater(LINGER, self._retire, old, kept)
        self._take_over(new, server)

    def _retire(self, old: NatsProtocol, kept: Sequence[int]) -> None:
        """The old connection's last inboxes go; it closes after its last PONG."""
        self._lingering.pop(old, None)
        if old.lost:
            return
        for sid in kept:
            old.write(encode_unsub(sid))
        old.ping().addBoth(lambda _: old.close())
        old.flush_now()
