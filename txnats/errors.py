"""The txnats exception tree.

Every error txnats raises to its users derives from :class:`NatsError`. Some also derive
from the matching built-in (``ValueError``, ``TimeoutError``) so that generic handlers keep
working.
"""

from __future__ import annotations

import builtins

__all__ = [
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "CredentialsError",
    "DrainTimeoutError",
    "FlushTimeoutError",
    "InvalidArgumentError",
    "MaxPayloadError",
    "NatsError",
    "NoReplySubjectError",
    "NoRespondersError",
    "NoServersError",
    "OutboundBufferFullError",
    "PermissionViolationError",
    "ProtocolError",
    "ServerError",
    "SlowConsumerError",
    "StaleConnectionError",
    "SubscriptionClosedError",
    "TLSError",
    "TimeoutError",
]


class NatsError(Exception):
    """The root of every error raised by txnats."""


class ProtocolError(NatsError):
    """The peer sent bytes that break the NATS protocol; the connection is closed.

    When raised by the parser, ``events`` holds the events completed before the fault.
    """

    def __init__(self, message: str = "", events: list[object] | None = None) -> None:
        super().__init__(message)
        self.events: list[object] = events if events is not None else []


class BadSubjectError(NatsError, ValueError):
    """A subject, reply subject or queue group name is not valid for this command."""


class BadHeaderError(NatsError, ValueError):
    """A header name or value cannot be encoded (CR/LF, ``:`` in a name, non-ASCII name)."""


class MaxPayloadError(NatsError, ValueError):
    """A message (headers included) is larger than the server's ``max_payload``."""


class ConnectionClosedError(NatsError):
    """The client is closed, or the connection closed before the operation completed."""


class ConnectionDrainingError(NatsError):
    """The client is draining and refuses new work."""


class ConnectError(NatsError):
    """A connection attempt failed (TCP, handshake or server refusal)."""


class NoServersError(ConnectError):
    """No server in the pool could be reached."""


class TimeoutError(NatsError, builtins.TimeoutError):
    """An operation did not complete within its timeout."""


class FlushTimeoutError(TimeoutError):
    """``flush()`` saw no PONG within its timeout."""


class DrainTimeoutError(TimeoutError):
    """``drain()`` did not finish within ``drain_timeout``; the client was closed anyway."""


class NoRespondersError(NatsError):
    """A request found no subscriber: the server answered with status 503."""


class SlowConsumerError(NatsError):
    """A subscription's pending limits were exceeded and messages were dropped.

    ``sid`` and ``subject`` name the subscription; ``dropped`` counts its drops so far.
    """

    def __init__(self, message: str, *, sid: int = 0, subject: str = "", dropped: int = 0):
        super().__init__(message)
        self.sid = sid
        self.subject = subject
        self.dropped = dropped


class OutboundBufferFullError(NatsError):
    """Publishing would grow the outbound (or reconnect) buffer past its bound."""


class SubscriptionClosedError(NatsError):
    """The subscription was unsubscribed, drained or closed."""


class ServerError(NatsError):
    """The server sent ``-ERR``; ``server_message`` holds its text without quotes."""

    def __init__(self, server_message: str):
        super().__init__(server_message)
        self.server_message = server_message


class AuthorizationError(ServerError, ConnectError):
    """The server refused the credentials (``Authorization Violation`` and kin)."""


class PermissionViolationError(ServerError):
    """The server refused a publish or subscribe on a subject for lack of permission."""

    def __init__(self, server_message: str, *, operation: str = "", subject: str = ""):
        super().__init__(server_message)
        self.operation = operation
        self.subject = subject


class StaleConnectionError(NatsError):
    """PINGs went unanswered (or the server said ``Stale Connection``)."""


class NoReplySubjectError(NatsError):
    """``respond()`` was called on a message that carries no reply subject."""


class InvalidArgumentError(NatsError, ValueError):
    """An argument is of the wrong type or out of range (a timeout below zero, say)."""


class TLSError(ConnectError):
    """TLS could not be set up: no TLS offered, a failed handshake or verification."""


class CredentialsError(ConnectError):
    """Local credentials are unusable (unreadable creds file, malformed seed)."""
