"""A request to a service endpoint, as its handler sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from txnats.errors import InvalidArgumentTypeError
from txnats.micro.errors import AlreadyRespondedError
from txnats.protocol.headers import HeaderInput, Headers

if TYPE_CHECKING:
    from txnats.protocol.events import Msg

__all__ = ["ERROR_CODE_HEADER", "ERROR_HEADER", "Request", "one_line"]

#: The header of an error reply (ADR-32) that holds a description people can read.
ERROR_HEADER = "Nats-Service-Error"
#: The header of an error reply (ADR-32) that holds its code (a number, as text).
ERROR_CODE_HEADER = "Nats-Service-Error-Code"

#: The longest error description put in a header (a longer one is cut).
_MAX_DESCRIPTION = 1024


def one_line(text: str) -> str:
    """``text`` made fit for a header value: one line, at most 1024 characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_DESCRIPTION else flat[: _MAX_DESCRIPTION - 3] + "..."


class Request:
    """One request to an endpoint: its ``subject``, ``data`` and ``headers``, and the
    means to answer it once, with :meth:`respond` or :meth:`respond_error`.

    :param msg: the message the endpoint received.
    """

    __slots__ = ("_error", "_msg", "_responded")

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self._responded = False
        self._error: str | None = None

    @property
    def subject(self) -> str:
        """The subject the request was sent to."""
        return self._msg.subject

    @property
    def data(self) -> bytes:
        """The request's payload."""
        return self._msg.data

    @property
    def headers(self) -> Headers | None:
        """The request's headers, or ``None``."""
        return self._msg.headers

    @property
    def reply(self) -> str | None:
        """The subject the answer goes to (``None`` for a request sent without one)."""
        return self._msg.reply

    @property
    def msg(self) -> Msg:
        """The message itself."""
        return self._msg

    @property
    def responded(self) -> bool:
        """True once :meth:`respond` or :meth:`respond_error` has answered."""
        return self._responded

    @property
    def error(self) -> str | None:
        """``"<code>:<description>"`` once answered with an error, else ``None``."""
        return self._error

    def respond(self, data: bytes = b"", headers: HeaderInput | None = None) -> None:
        """Answer the request with ``data`` (and ``headers``).

        :raises AlreadyRespondedError: if it was answered already (nothing is sent).
        :raises NoReplySubjectError: if it carries no reply subject.
        :raises NatsError: whatever publishing raises (a closed client, bad headers).
        """
        if self._responded:
            raise AlreadyRespondedError(
                f"the request on {self._msg.subject!r} was answered already"
            )
        self._msg.respond(data, headers)
        self._responded = True

    def respond_error(
        self,
        code: int,
        description: str,
        data: bytes = b"",
        headers: HeaderInput | None = None,
    ) -> None:
        """Answer with a service error: the ``Nats-Service-Error`` (``description``)
        and ``Nats-Service-Error-Code`` (``code``) headers, added to ``headers``, and
        ``data``. The endpoint counts it as an error.

        :param code: a whole number (400, 500...).
        :param description: shown to the caller; made one line.
        :raises AlreadyRespondedError: if the request was answered already.
        :raises InvalidArgumentTypeError: if ``code`` is not an ``int`` or
            ``description`` not a ``str``.
        """
        if isinstance(code, bool) or not isinstance(code, int):
            raise InvalidArgumentTypeError(f"code must be a whole number, not {code!r}")
        if not isinstance(description, str):
            raise InvalidArgumentTypeError(
                f"description must be a string, not {type(description).__name__}"
            )
        out = Headers(headers) if headers is not None else Headers()
        description = one_line(description)
        out[ERROR_HEADER] = description
        out[ERROR_CODE_HEADER] = str(code)
        self.respond(data, out)
        self._error = f"{code}:{description}"

    def __repr__(self) -> str:
        return f"<txnats.micro.Request on {self._msg.subject!r}>"
