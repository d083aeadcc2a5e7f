"""Events the parser produces, and the message type users receive."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txnats.errors import NoReplySubjectError
from txnats.protocol.headers import HeaderInput, Headers

__all__ = [
    "OK",
    "PING",
    "PONG",
    "BadHeaders",
    "Err",
    "Event",
    "Info",
    "Msg",
    "Ok",
    "Ping",
    "Pong",
    "Respond",
]

#: What a delivered message's ``respond()`` publishes with: ``respond(reply, data,
#: headers)``, the client's (set on each message as it is delivered).
Respond = Callable[[str, bytes, "HeaderInput | None"], None]


@dataclass(frozen=True, slots=True)
class Info:
    """``INFO {json}``: the server's description of itself (already type-checked)."""

    options: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Err:
    """``-ERR <message>``, with surrounding quotes removed."""

    message: str


@dataclass(frozen=True, slots=True)
class BadHeaders:
    """Follows the :class:`Msg` of an ``HMSG`` whose header block does not parse: that
    message's ``headers`` are :meth:`Headers.unparsed`. ``reason`` says what is wrong."""

    subject: str
    sid: int
    reason: str


@dataclass(frozen=True, slots=True)
class Ping:
    """``PING``."""


@dataclass(frozen=True, slots=True)
class Pong:
    """``PONG``."""


@dataclass(frozen=True, slots=True)
class Ok:
    """``+OK`` (only sent to verbose clients)."""


PING = Ping()
PONG = Pong()
OK = Ok()


class Msg:
    """A message delivered by the server (``MSG`` / ``HMSG``).

    ``data`` is the payload, ``headers`` a :class:`Headers` or ``None``, ``reply`` the
    reply subject or ``None``, ``sid`` the id of the subscription it arrived on.
    """

    __slots__ = ("_respond", "data", "headers", "reply", "sid", "subject")

    # The one place that sets a Msg's slots: every slot, every time. The parser's fast
    # path calls it as a plain function on ``object.__new__(Msg)``, skipping only the
    # dispatch in ``type.__call__`` (``Msg(...)`` there made a repeated-line message 8%
    # dearer: 397 against 365 ns); its other paths call ``Msg(...)``.
    # tests/test_parser.py checks that it sets every slot and that the parser uses it.
    def __init__(
        self,
        subject: str,
        reply: str | None,
        data: bytes,
        headers: Headers | None,
        sid: int,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self.headers = headers
        self.sid = sid
        self._respond: Respond | None = None

    def respond(self, data: bytes = b"", headers: HeaderInput | None = None) -> None:
        """Publish ``data`` to this message's reply subject.

        Raises :class:`~txnats.errors.NoReplySubjectError` when there is none.
        """
        if not self.reply:
            raise NoReplySubjectError(f"message on {self.subject!r} has no reply subject")
        if self._respond is None:
            raise NoReplySubjectError("message is not bound to a client")
        self._respond(self.reply, data, headers)

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 32 else self.data[:32] + b"..."
        return (
            f"<Msg subject={self.subject!r} reply={self.reply!r} sid={self.sid} "
            f"data={data!r} headers={self.headers!r}>"
        )


Event = Info | Msg | Err | Ping | Pong | Ok | BadHeaders
