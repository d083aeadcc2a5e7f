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
from txnats._turns import Turns
from txnats.connection import NatsProtocol
from txnats.errors import NatsError, ServerError
from txnats.protocol.events import Msg
from txnats.servers import Server

__all__ = ["Link", "LinkedClient"]

#: The client's internals this module calls, declared by :class:`LinkedClient`.
HOUSE_PRIVATE_OK = {
    "_deliver", "_info_received", "_server_error", "_outbound_drained",
    "_connection_lost", "_connected", "_gave_up", "_turns", "_connector",
}


class LinkedClient(Protocol):
    """What :class:`Link` forwards to (the client's side of the connection hooks)."""

    _turns: Turns
    _connector: Connector

    def _deliver(self, msgs: list[Msg]) -> None: ...
    def _info_received(self, info: dict[str, Any]) -> None: ...
    def _server_error(self, error: ServerError) -> None: ...
    def _outbound_drained(self) -> None: ...
    def _connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None: ...
    def _connected(self, proto: NatsProtocol, server: Server) -> None: ...
    def _gave_up(self, error: NatsError) -> None: ...


class Link:
    """What the client's connections and its connector report to: the
    :class:`~txnats.connection.ConnectionHandler` and
    :class:`~txnats._connector.ConnectorHost` of one client, kept off its public API."""

    def __init__(self, client: LinkedClient) -> None:
        self._client = client

    def connect_options(self, info: dict[str, Any]) -> dict[str, Any]:
        return self._client._connector.connect_options(info)

    def msgs_received(self, msgs: list[Msg]) -> None:
        self._client._deliver(msgs)

    def info_received(self, info: dict[str, Any]) -> None:
        self._client._info_received(info)

    def server_error(self, error: ServerError) -> None:
        self._client._server_error(error)

    def schedule(self, fn: Callable[..., object], *args: object) -> None:
        self._client._turns.schedule(fn, *args)

    def read_started(self) -> None:
        self._client._turns.read_started()

    def read_finished(self) -> None:
        self._client._turns.read_finished()

    def outbound_drained(self) -> None:
        self._client._outbound_drained()

    def connection_lost(self, proto: NatsProtocol, reason: NatsError) -> None:
        self._client._connection_lost(proto, reason)

    def connected(self, proto: NatsProtocol, server: Server) -> None:
        self._client._connected(proto, server)

    def gave_up(self, error: NatsError) -> None:
        self._client._gave_up(error)
