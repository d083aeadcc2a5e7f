"""JetStream messages: the ack protocol and the metadata in a delivery's reply subject.

A message delivered by a JetStream consumer carries a reply subject of the form
``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`` (v1, 9 tokens) or
``$JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``
followed by optional tokens (v2, 11 or more; ADR-15). Acknowledgements are publishes to
that subject: ``+ACK``, ``-NAK`` (optionally with a delay), ``+WPI``, ``+TERM``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from txnats._args import check_delay, check_timeout
from txnats.errors import JetStreamError, NatsError
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput, Headers

if TYPE_CHECKING:
    from txnats.client import Client

__all__ = ["JsMsg", "MsgMetadata", "SequencePair", "parse_metadata", "whole_number"]

_ACK = b"+ACK"
_NAK = b"-NAK"
_WPI = b"+WPI"
_TERM = b"+TERM"


@dataclass(frozen=True, slots=True)
class SequencePair:
    """A consumer's sequence and the stream's sequence of one delivery."""

    consumer: int
    stream: int


@dataclass(frozen=True, slots=True)
class MsgMetadata:
    """What a JetStream delivery's reply subject says about it."""

    stream: str
    consumer: str
    num_delivered: int
    sequence: SequencePair
    #: Nanoseconds since the epoch at which the stream stored the message.
    timestamp_ns: int
    num_pending: int
    domain: str = ""


def whole_number(text: str | None) -> int | None:
    """``text`` as a whole number (ASCII digits only, at most 20 of them: a uint64),
    else ``None``: for the numbers a server puts in subjects and headers, which
    another client may have written instead (``int()`` would take ``" 7"``, ``"1_0"``,
    ``"-3"`` or ``"٣"``, and ``str.isdigit`` passes ``"²"``, which ``int()`` refuses)."""
    if text is None or not 0 < len(text) <= 20 or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def parse_metadata(reply: str | None) -> MsgMetadata:
    """Parse a ``$JS.ACK`` reply subject; :class:`JetStreamError` if it is not one."""
    if not reply or not reply.startswith("$JS.ACK."):
        raise JetStreamError(f"not a JetStream delivery (reply {reply!r})")
    tokens = reply.split(".")
    n = len(tokens)
    try:
        if n == 9:
            domain = ""
            stream, consumer = tokens[2], tokens[3]
            rest = tokens[4:9]
        elif n >= 11:
            domain = "" if tokens[2] == "_" else tokens[2]
            stream, consumer = tokens[4], tokens[5]
            rest = tokens[6:11]
        else:
            raise ValueError(n)
        digits = "".join(rest)  # (ASCII digits only: no sign, no "_", no other script)
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(rest)
        delivered, sseq, cseq, ts, pending = (int(t) for t in rest)
    except ValueError:
        raise JetStreamError(f"malformed JetStream reply subject {reply[:200]!r}") from None
    return MsgMetadata(
        stream=stream,
        consumer=consumer,
        num_delivered=delivered,
        sequence=SequencePair(consumer=cseq, stream=sseq),
        timestamp_ns=ts,
        num_pending=pending,
        domain=domain,
    )


class JsMsg:
    """A message delivered by a JetStream consumer, with the ack protocol.

    ``subject``, ``reply``, ``data``, ``headers`` and ``sid`` are those of the underlying
    :class:`~txnats.Msg`. Once a terminal acknowledgement (``ack``, ``nak``, ``term``) is
    sent, further ones raise :class:`JetStreamError`; ``in_progress`` may repeat.
    ``metadata``, if given, is the reply subject's already parsed (the ordered consumer
    parses it to check the order): it is not parsed again.
    """

    __slots__ = ("_acked", "_client", "_meta", "_msg")

    def __init__(
        self, msg: Msg, client: Client, *, metadata: MsgMetadata | None = None
    ) -> None:
        self._msg = msg
        self._client = client
        self._meta = metadata
        self._acked = False

    @property
    def subject(self) -> str:
        return self._msg.subject

    @property
    def reply(self) -> str | None:
        return self._msg.reply

    @property
    def data(self) -> bytes:
        return self._msg.data

    @property
    def headers(self) -> Headers | None:
        return self._msg.headers

    @property
    def sid(self) -> int:
        return self._msg.sid

    @property
    def metadata(self) -> MsgMetadata:
        """Stream, consumer, sequences, delivery count, timestamp and pending count."""
        if self._meta is None:
            self._meta = parse_metadata(self._msg.reply)
        return self._meta

    def respond(self, data: bytes = b"", headers: HeaderInput | None = None) -> None:
        """Publish to the reply subject (for a JetStream message, that is an ack)."""
        self._msg.respond(data, headers)

    def _send(self, payload: bytes, terminal: bool) -> None:
        if self._acked:
            raise JetStreamError("message was already acknowledged")
        if not self._msg.reply:
            raise JetStreamError("message has no reply subject: it cannot be acknowledged")
        self._client.publish(self._msg.reply, payload)
        if terminal:
            self._acked = True

    def ack(self) -> None:
        """Acknowledge: the consumer will not deliver this message again."""
        self._send(_ACK, True)

    def nak(self, delay: float | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds (finite, 0 or more) if given.

        :raises InvalidArgumentError: a bad ``delay``; nothing is sent.
        """
        if delay is None:
            self._send(_NAK, True)
            return
        seconds = check_delay("delay", delay)
        self._send(_NAK + b" " + json.dumps({"delay": int(seconds * 1e9)}).encode(), True)

    def in_progress(self) -> None:
        """Tell the server work goes on: its ack wait starts again. May be repeated."""
        self._send(_WPI, False)

    def term(self, reason: str | None = None) -> None:
        """Never deliver this message again, and do not count it as acknowledged."""
        self._send(_TERM if not reason else _TERM + b" " + reason.encode(), True)

    def ack_sync(self, timeout: float | None = 5.0) -> Deferred[None]:
        """Acknowledge and wait for the server to confirm it (a "double ack").

        ``timeout`` is in seconds (finite, above zero; ``None``: no limit). A bad one
        fails it with :class:`InvalidArgumentError`; nothing is sent and the message
        stays unacknowledged.
        """
        try:
            check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        if self._acked:
            return fail(JetStreamError("message was already acknowledged"))
        if not self._msg.reply:
            return fail(JetStreamError("message has no reply subject"))
        try:
            d = self._client.request(self._msg.reply, _ACK, timeout=timeout)
        except NatsError as e:
            return fail(e)
        self._acked = True  # while it is under way, a second ack is refused

        def done(_: Msg) -> None:
            return None

        def unconfirmed(f: Failure) -> Failure:
            # As nats.go: an ack the server did not confirm may be sent again.
            self._acked = False
            return f

        return d.addCallbacks(done, unconfirmed)

    def __repr__(self) -> str:
        return f"<JsMsg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}>"
