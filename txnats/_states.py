"""The client's states and the transitions allowed between them."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TRANSITIONS", "ClientState"]


class ClientState(StrEnum):
    """The states of a client (strings, for logging and comparison)."""

    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    RECONNECTING = "RECONNECTING"
    DRAINING_SUBS = "DRAINING_SUBS"
    DRAINING_PUBS = "DRAINING_PUBS"
    CLOSED = "CLOSED"


_S = ClientState
#: From each state, the states the client may move to.
TRANSITIONS: dict[ClientState, frozenset[ClientState]] = {
    _S.CONNECTING: frozenset({_S.CONNECTED, _S.CLOSED}),
    _S.CONNECTED: frozenset({_S.RECONNECTING, _S.DRAINING_SUBS, _S.CLOSED}),
    _S.RECONNECTING: frozenset({_S.CONNECTED, _S.CLOSED}),
    _S.DRAINING_SUBS: frozenset({_S.DRAINING_PUBS, _S.CLOSED}),
    _S.DRAINING_PUBS: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
}
