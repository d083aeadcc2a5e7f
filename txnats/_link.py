"""What a client's connections and its connector report to, kept off the public API.

A :class:`~txnats.connection.NatsProtocol` reports to a
:class:`~txnats.connection.ConnectionHandler`, a :class:`~txnats._connector.Connector`
to a :class:`~txnats._connector.ConnectorHost`. :class:`Link` is both for one client:
it forwards each call to the client's own (private) method, so that none of them is a
public method of :class:`~txnats.client.Client`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from txnats._connector import Connector
from txnats._registry import Subscriptions
from txnats._turns import Turns
from txnats.connection import NatsProtocol
from txnats.errors import NatsError, ServerError
from txnats.protocol.events import Msg
from txnats.servers import Server

__all__ = ["Link", "LinkedClient"]

#: The client's internals this module calls, declared by :class:`LinkedClient`.
HOUSE_PRIVATE_OK = {
    "_info_received", "_server_error", "_outbound_drained", "_connection_lost",
    "_connected", "_gave_up", "_turns", "_connector", "_subs", "_report",
}


class LinkedClient(Protocol):
    """What :class:`Link` forwards to (the client's side of the connection hooks)."""

    _turns: Turns
    _connector: Connector
    _subs: Subscriptions

    def _info_received(self, info: dict[str, Any]) -> None: ...
    def _server_error(self, error: ServerError) -> None: ...
    def _outbound_drained(self) -> None: ...
    def _connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None: ...
    def _connected(self, proto: NatsProtocol, server: Server) -> None: ...
    def _gave_up(self, error: NatsError) -> None: ...
    def _report(self, error: Exception) -> None: ...


class Link:
    """What the client's connections and its connector report to: the
    :class:`~txnats.connection.ConnectionHandler` and
    :class:`~txnats._connector.ConnectorHost` of one client, kept off its public API.

    The hooks a connection calls on every read (delivery, the turn scheduler, room in
    the outbound buffer) are the client's own bound methods, stored here: no forwarding
    call per read. The rest forward.
    """

    def __init__(self, client: LinkedClient) -> None:
        self._client = client
        turns = client._turns
        self.msgs_received: Callable[[list[Msg]], None] = client._subs.deliver
        self.schedule: Callable[..., None] = turns.schedule
        self.read_started: Callable[[], None] = turns.read_started
        self.read_finished: Callable[[], None] = turns.read_finished
        self.outbound_drained: Callable[[], None] = client._outbound_drained

    def connect_options(self, info: dict[str, Any]) -> dict[str, Any]:
        return self._client._connector.connect_options(info)

    def info_received(self, info: dict[str, Any]) -> None:
        self._client._info_received(info)

    def server_error(self, error: ServerError) -> None:
        self._client._server_error(error)

    def message_error(self, error: NatsError) -> None:
        self._client._report(error)

    def connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None:
        self._client._connection_lost(proto, reason)

    def connected(self, proto: NatsProtocol, server: Server) -> None:
        self._client._connected(proto, server)

    def gave_up(self, error: NatsError) -> None:
        self._client._gave_up(error)
