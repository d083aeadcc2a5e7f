"""The errors of the service API, each in the txnats exception tree."""

from __future__ import annotations

from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError, NatsError

__all__ = [
    "AlreadyRespondedError",
    "InvalidResponseError",
    "InvalidServiceConfigError",
    "ServiceError",
    "ServiceStoppedError",
]


class InvalidServiceConfigError(InvalidArgumentError):
    """A service, group or endpoint was given a bad name, version, subject, queue group
    or metadata (ADR-32's rules). A ``ValueError`` (an :class:`InvalidArgumentError`);
    the message names the argument and the rule it breaks."""


class ServiceError(NatsError):
    """An error a request handler raises to answer with a service error.

    The reply carries ``Nats-Service-Error: <description>`` and
    ``Nats-Service-Error-Code: <code>`` headers and ``data`` as its payload; the
    endpoint counts it as an error.

    :param code: the error code (a whole number, 400 or 500 say).
    :param description: what went wrong, shown to the caller (one line).
    :param data: the reply's payload.
    :raises InvalidArgumentTypeError: if ``code`` is not an ``int``, ``description``
        not a ``str`` or ``data`` not ``bytes`` (a handler raising that is answered
        with error 500).
    """

    def __init__(self, code: int, description: str, data: bytes = b"") -> None:
        if isinstance(code, bool) or not isinstance(code, int):
            raise InvalidArgumentTypeError(f"code must be a whole number, not {code!r}")
        if not isinstance(description, str):
            raise InvalidArgumentTypeError(
                f"description must be a string, not {type(description).__name__}"
            )
        if not isinstance(data, bytes):
            raise InvalidArgumentTypeError(f"data must be bytes, not {type(data).__name__}")
        super().__init__(f"{code}: {description}")
        self.code = code
        self.description = description
        self.data = data


class AlreadyRespondedError(NatsError):
    """A request was answered already: a request is answered once."""


class ServiceStoppedError(NatsError):
    """The service is stopped (or its client closed): it takes no new endpoints."""


class InvalidResponseError(NatsError, ValueError):
    """A service sent a response that is not the ADR-32 JSON it should be."""
