"""The client's lifecycle: its states, the data each holds, and the moves between them.

A :class:`~txnats.client.Client` is always in exactly one of these states; what exists
only in a state (the first connect's Deferred, the connection, the drain's result, the
flushes waiting for a connection) is held by that state's object, handed to the
client's handlers with it, and gone when the state is left:

==================  =====================  ============================================
state               ``Client.state``       holds
==================  =====================  ============================================
:class:`New`        ``CONNECTING``         flushes waiting for a first connection
:class:`Connecting` ``CONNECTING``         the first connect's Deferred, flushes
:class:`Connected`  ``CONNECTED``          the connection, its server, lame duck seen
:class:`Reconnecting` ``RECONNECTING``     flushes waiting for the next connection
:class:`Draining`   ``DRAINING_SUBS/PUBS`` the connection, its server, the drain's result
:class:`Closing`    ``CLOSED``             the connection, closing
:class:`Closed`     ``CLOSED``             nothing
==================  =====================  ============================================

:data:`MOVES` is the table of the moves allowed; the client refuses any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from txnats.connection import NatsProtocol
    from txnats.servers import Server

__all__ = [
    "MOVES",
    "ClientState",
    "Closed",
    "Closing",
    "Connected",
    "Connecting",
    "Draining",
    "New",
    "Reconnecting",
    "State",
]


class ClientState(StrEnum):
    """The states of a client, as users see them (strings, for logging and comparison)."""

    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    RECONNECTING = "RECONNECTING"
    DRAINING_SUBS = "DRAINING_SUBS"
    DRAINING_PUBS = "DRAINING_PUBS"
    CLOSED = "CLOSED"


@dataclass
class New:
    """Built; :meth:`~txnats.client.Client.start` not called yet."""

    #: Flushes made meanwhile: they wait for the first connection.
    flushes: list[Deferred[None]] = field(default_factory=list)
    public = ClientState.CONNECTING


@dataclass
class Connecting:
    """The first connection is being made."""

    #: Fires with the client once connected (what ``connect()`` returns); None with
    #: ``retry_on_failed_connect``, whose ``connect()`` fired at once.
    first: Deferred[Any] | None
    flushes: list[Deferred[None]] = field(default_factory=list)
    public = ClientState.CONNECTING


@dataclass
class Connected:
    """Connected to ``server`` through ``proto``."""

    proto: NatsProtocol
    server: Server
    #: The server announced lame duck mode (told once per connection).
    lame_duck_seen: bool = False
    public = ClientState.CONNECTED


@dataclass
class Reconnecting:
    """The connection was lost; the connector dials the pool."""

    #: The server lost (dialled last), for the log.
    lost: Server
    #: Flushes waiting for the next connection (or their timeout).
    flushes: list[Deferred[None]] = field(default_factory=list)
    public = ClientState.RECONNECTING


@dataclass
class Draining:
    """Draining the subscriptions (``pubs`` False), then the publishes."""

    proto: NatsProtocol
    server: Server
    #: Fires once the drain is over (the client is closed).
    result: Deferred[None]
    pubs: bool = False

    @property
    def public(self) -> ClientState:
        return ClientState.DRAINING_PUBS if self.pubs else ClientState.DRAINING_SUBS


@dataclass
class Closing:
    """Closed; the connection's socket is going."""

    proto: NatsProtocol
    public = ClientState.CLOSED


@dataclass
class Closed:
    """Closed, the socket gone: nothing runs any more."""

    public = ClientState.CLOSED


State = New | Connecting | Connected | Reconnecting | Draining | Closing | Closed

#: For each state, the states the client may move to.
MOVES: dict[type[Any], tuple[type[Any], ...]] = {
    New: (Connecting, Closed),
    Connecting: (Connected, Closing, Closed),
    Connected: (Reconnecting, Draining, Closing, Closed),
    Reconnecting: (Connected, Closed),
    Draining: (Draining, Closing, Closed),
    Closing: (Closed,),
    Closed: (),
}
