"""The txnats exception tree.

Every error txnats raises to its users derives from :class:`NatsError`. Some also derive
from the matching built-in (``ValueError``, ``TimeoutError``) so that generic handlers keep
working.
"""

from __future__ import annotations

import builtins

__all__ = [
    "APIError",
    "AuthorizationError",
    "BadHeaderError",
    "BadSubjectError",
    "BucketNotFoundError",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConsumerDeletedError",
    "ConsumerDoesNotExistError",
    "ConsumerExistsError",
    "ConsumerNotFoundError",
    "ControlLineTooLongError",
    "CredentialsError",
    "DigestMismatchError",
    "DrainTimeoutError",
    "FlushTimeoutError",
    "HandlerError",
    "HeadersNotSupportedError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "KeyDeletedError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValueError",
    "MalformedHeadersError",
    "MaxPayloadError",
    "MsgNotFoundError",
    "NatsError",
    "NoHeartbeatError",
    "NoReplySubjectError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamResponseError",
    "ObjectNotFoundError",
    "ObjectStoreError",
    "OrderedConsumerError",
    "OutboundBufferFullError",
    "PermissionViolationError",
    "ProtocolError",
    "ServerError",
    "SlowConsumerError",
    "StaleConnectionError",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "SubscriptionClosedError",
    "TLSError",
    "TimeoutError",
    "TooManyStalledMsgsError",
    "WrongLastSequenceError",
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


class ControlLineTooLongError(BadSubjectError):
    """A command's control line (the subject, reply subject or queue group and the
    sizes, after ``PUB``/``HPUB``/``SUB``) would be longer than the server accepts.

    nats-server closes the connection of a client that sends a longer one
    (``maximum control line exceeded``); its limit, 4,096 bytes by default, is not
    announced in INFO, so the client enforces the ``max_control_line`` connect option
    instead and refuses the call, having sent nothing. ``limit`` is that option and
    ``length`` the line's length in bytes (both without the operation name and CRLF).
    """

    def __init__(self, message: str, *, length: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.length = length
        self.limit = limit


class MalformedHeadersError(NatsError):
    """A message arrived with a header block that cannot be parsed (another client
    published it; the server relays header blocks unchecked).

    Reported to ``error_cb``; the connection stays up and the message is delivered
    anyway, its ``headers`` an empty :class:`~txnats.Headers` whose ``raw`` holds the
    block as received. ``subject`` and ``sid`` say where it arrived.
    """

    def __init__(self, message: str, *, subject: str = "", sid: int = 0) -> None:
        super().__init__(message)
        self.subject = subject
        self.sid = sid


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
    """An argument is out of range (a timeout below zero, NaN, say) or of the wrong type.

    The message names the argument. Raised at the call, before anything was sent or
    queued and before any state changed.
    """


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument is of the wrong type (a string where a reactor or a handler is due).

    Both an :class:`InvalidArgumentError` and a ``TypeError``.
    """


class HeadersNotSupportedError(NatsError):
    """A message with headers, but the server does not support headers.

    Raised by ``publish()`` and ``request()`` (nothing is queued) when the server's INFO
    says ``headers: false``; such a server would close the connection on the frame.
    """


class HandlerError(NatsError):
    """A subscription's handler raised; reported to ``error_cb``.

    The handler's own exception is the ``__cause__``; :attr:`subject` and :attr:`sid`
    name the subscription.
    """

    def __init__(self, message: str, *, subject: str = "", sid: int = 0) -> None:
        super().__init__(message)
        self.subject = subject
        self.sid = sid


class TLSError(ConnectError):
    """TLS could not be set up: no TLS offered, a failed handshake or verification."""


class CredentialsError(ConnectError):
    """Local credentials are unusable (unreadable creds file, malformed seed)."""


# ---------------------------------------------------------------------- JetStream
class JetStreamError(NatsError):
    """Something went wrong in JetStream, the key-value store or the object store."""


class APIError(JetStreamError):
    """The JetStream API answered with an error object.

    ``code`` is the HTTP-like status, ``err_code`` the server's stable error number
    (ADR-7: match on it, never on ``description``).
    """

    #: The ``err_code`` this class stands for; ``None`` on the generic class.
    ERR_CODE: int | None = None

    def __init__(self, description: str, code: int = 0, err_code: int = 0) -> None:
        super().__init__(f"{description} (code {code}, err_code {err_code})")
        self.description = description
        self.code = code
        self.err_code = err_code


class JetStreamNotEnabledError(APIError):
    """The server or the account has no JetStream: no responder on the JetStream API
    (``code`` 503, ``err_code`` 0), or the server's err_code 10039 (not for this
    account) or 10076 (not enabled)."""

    def __init__(self, description: str, code: int = 503, err_code: int = 0) -> None:
        super().__init__(description, code, err_code)


class StreamNotFoundError(APIError):
    """No stream of that name (err_code 10059)."""

    ERR_CODE = 10059


class ConsumerNotFoundError(APIError):
    """No consumer of that name (err_code 10014)."""

    ERR_CODE = 10014


class ConsumerExistsError(APIError):
    """Creating a consumer that exists with another configuration (err_code 10148):
    ``create_consumer`` never changes an existing consumer; ``update_consumer`` does."""

    ERR_CODE = 10148


class ConsumerDoesNotExistError(ConsumerNotFoundError):
    """Updating a consumer that does not exist (err_code 10149); a
    :class:`ConsumerNotFoundError` too."""

    ERR_CODE = 10149


class MsgNotFoundError(APIError):
    """No stored message matches (err_code 10037)."""

    ERR_CODE = 10037


class StreamNameInUseError(APIError):
    """A stream of that name exists with another configuration (err_code 10058)."""

    ERR_CODE = 10058


class WrongLastSequenceError(APIError):
    """A publish's expected last sequence did not hold (err_code 10071)."""

    ERR_CODE = 10071


class NoStreamResponseError(JetStreamError, NoRespondersError):
    """A JetStream publish found no stream listening on its subject (status 503)."""


class TooManyStalledMsgsError(JetStreamError):
    """``publish_async`` found its window of unacknowledged publishes still full after
    waiting its ``stall_wait`` for room.

    That publish was not sent; wait for ``publish_async_room()`` and try again.
    """


class OrderedConsumerError(JetStreamError):
    """An ordered consumer could not be (re)created, or its stream went away."""


class ConsumerDeletedError(APIError):
    """A pull ended because its consumer was deleted (status 409 "Consumer Deleted"):
    ``consume()`` and ``messages()`` end with it."""


class NoHeartbeatError(JetStreamError, TimeoutError):
    """A consumer heard nothing (no message, no idle heartbeat) for twice its idle
    heartbeat interval. Reported to ``error_cb`` as a warning: the consumer pulls (or
    subscribes) again and goes on."""


class KeyValueError(JetStreamError):
    """A key-value store operation failed."""


class BucketNotFoundError(KeyValueError):
    """No key-value bucket or object store of that name."""


class KeyNotFoundError(KeyValueError):
    """The key has no value (never set, or deleted/purged)."""


class KeyDeletedError(KeyNotFoundError):
    """The key's latest entry is a delete or purge marker; ``revision`` is its sequence."""

    def __init__(self, message: str, revision: int = 0) -> None:
        super().__init__(message)
        self.revision = revision


class KeyExistsError(KeyValueError):
    """``create`` found the key holding a value, or ``update`` a newer revision."""


class ObjectStoreError(JetStreamError):
    """An object store operation failed."""


class ObjectNotFoundError(ObjectStoreError):
    """No object of that name (or it was deleted)."""


class DigestMismatchError(ObjectStoreError):
    """An object's chunks did not match the SHA-256 digest in its metadata."""


#: err_code -> the APIError subclass that stands for it.
API_ERRORS: dict[int, type[APIError]] = {
    c.ERR_CODE: c
    for c in (
        StreamNotFoundError,
        ConsumerNotFoundError,
        ConsumerExistsError,
        ConsumerDoesNotExistError,
        MsgNotFoundError,
        StreamNameInUseError,
        WrongLastSequenceError,
    )
    if c.ERR_CODE is not None
}
