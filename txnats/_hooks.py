"""What a client's connections report to: its parts, as callables.

A :class:`~txnats.connection.NatsProtocol` reports to a
:class:`~txnats.connection.ConnectionHandler`. For a client's connections that is a
:class:`ConnectionHooks`: each report goes straight to the part of the client it is for
(messages to the subscription registry, the read's start and end to the turn scheduler,
room in the outbound buffer to the publisher, INFO, errors and the loss to the client's
lifecycle, the CONNECT fields to the connector that dialled), with no object in between.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from txnats.errors import ConnectError, NatsError, ServerError
from txnats.protocol.events import Msg

if TYPE_CHECKING:
    from txnats.connection import NatsProtocol

__all__ = ["ConnectionHooks", "retired"]


def _no_connect(info: dict[str, Any]) -> dict[str, Any]:
    raise ConnectError("this connection does not connect")  # pragma: no cover


@dataclass(frozen=True)
class ConnectionHooks:
    """A :class:`~txnats.connection.ConnectionHandler` made of callables."""

    msgs_received: Callable[[list[Msg]], None]
    info_received: Callable[[dict[str, Any]], None]
    server_error: Callable[[ServerError], None]
    message_error: Callable[[NatsError], None]
    schedule: Callable[..., None]
    read_started: Callable[[], None]
    read_finished: Callable[[], None]
    outbound_drained: Callable[[], None]
    connection_lost: Callable[[NatsProtocol, NatsError], None]
    #: The CONNECT fields for the server's INFO: set by the connector for each dial.
    connect_options: Callable[[dict[str, Any]], dict[str, Any]] = _no_connect


def _ignore(*args: object) -> None:
    pass


def retired(hooks: ConnectionHooks) -> ConnectionHooks:
    """The hooks of a connection the client moved away from (lame duck): its messages
    are still delivered and its errors reported until it closes; its INFO, room and
    loss no longer concern the client."""
    return replace(
        hooks, info_received=_ignore, outbound_drained=_ignore, connection_lost=_ignore,
        connect_options=_no_connect,
    )
