"""
The server's half of the NATS client protocol, sans I/O, for :class:`~txnats.testing.MemoryNats`.

The client's parser (:mod:`txnats.protocol.parser`) reads what a server sends. This
module reads what a client sends -- ``CONNECT``, ``PUB``, ``HPUB``, ``SUB``, ``UNSUB``,
``PING``, ``PONG`` -- and refuses what nats-server refuses, the way it refuses it, so
that a test against the in-memory server fails where one against ``nats-server`` would.
:meth:`ClientParser.receive_data` stores bytes and :meth:`ClientParser.next_event` hands
out one event at a time (as h11 does), so the server can act on a ``CONNECT`` (which
allows ``HPUB``) before the next frame is read.

What it does when a client breaks the rules, as measured on nats-server 2.15.1 with
raw sockets (see :mod:`txnats.testing._memory` for what happens to valid frames):

- A control line's arguments (the bytes after the operation and the blanks after it, up
  to the line end) may be 4096 bytes (``max_control_line``); one byte more, even before
  the line end arrives, is ``-ERR 'maximum control line exceeded'`` and the connection
  is closed. ``CONNECT`` is limited the same way.
- An operation it does not know (``FOO``, ``PUBX``, an empty line, a leading blank,
  ``MSG``, a bare ``SUB``) is ``-ERR 'Unknown Protocol Operation'`` and a close; so is a
  bad operation seen before its line ends (``SX``), and a payload not followed by CRLF.
  Operations are case-insensitive; control lines may end in LF alone.
- Arguments of the wrong number or form (``PUB x``, ``PUB x abc``, ``PUB x +1``,
  ``SUB a q 1 2``, ``HPUB`` with a header size above the total) and a ``CONNECT`` that is
  not a JSON object, or has a field of the wrong type, close the connection *without* an
  ``-ERR``, as nats-server does. So does ``HPUB`` on a connection whose ``CONNECT`` did
  not say ``"headers": true``, and ``-ERR`` sent by a client.
- A payload above ``max_payload`` (``HPUB``: headers and payload together) is
  ``-ERR 'Maximum Payload Violation'`` and a close, before the payload is read.
- ``PING`` and ``PONG`` ignore whatever follows them on the line (``PINGX`` is a PING);
  ``+OK`` and ``INFO {...}`` from a client are ignored.

Where this parser differs, it is on edges no client writes: nats-server ignores a
client's ``HMSG`` (here it is an unknown operation), and it repeats a size written with
leading zeros (``PUB x 01``) in the ``MSG`` it sends (the server here writes ``1``).
Header blocks are never looked into: nats-server relays them untouched, whatever they
hold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_CONTROL_LINE",
    "ClientParser",
    "ClientViolation",
    "Connect",
    "Ping",
    "Pong",
    "Pub",
    "Sub",
    "Unsub",
    "is_literal_subject",
    "is_valid_subject",
    "subject_matches",
]

#: nats-server's default ``max_control_line``: the most bytes of arguments on one line.
MAX_CONTROL_LINE = 4096

#: The ``-ERR`` texts of the faults that close a connection.
UNKNOWN_OPERATION = "Unknown Protocol Operation"
CONTROL_LINE_EXCEEDED = "maximum control line exceeded"
MAX_PAYLOAD_VIOLATION = "Maximum Payload Violation"

_BLANKS = re.compile(rb"[ \t]+")
# Operations that take arguments, and the operations a line may start with however it
# goes on (nats-server reads PING/PONG/+OK and then skips to the line end).
_WITH_ARGS = (b"PUB", b"HPUB", b"SUB", b"UNSUB", b"CONNECT", b"INFO")
_BARE = (b"PING", b"PONG", b"+OK", b"-ERR")
# The CONNECT fields nats-server decodes with a type, and the types it accepts.
_CONNECT_TYPES: dict[str, tuple[type, ...]] = {
    "verbose": (bool,), "pedantic": (bool,), "tls_required": (bool,),
    "echo": (bool,), "headers": (bool,), "no_responders": (bool,),
    "name": (str,), "lang": (str,), "version": (str,), "user": (str,),
    "pass": (str,), "auth_token": (str,), "jwt": (str,), "nkey": (str,), "sig": (str,),
    "protocol": (int,),
}


@dataclass(frozen=True, slots=True)
class Connect:
    """``CONNECT {json}``: the options as decoded (a JSON object; ``null`` is ``{}``)."""

    options: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Pub:
    """``PUB`` or ``HPUB``: a message to route. ``headers`` is the raw header block
    (``None`` for ``PUB``)."""

    subject: bytes
    reply: bytes | None
    headers: bytes | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class Sub:
    """``SUB <subject> [queue] <sid>``. A sid is any token, as nats-server takes it."""

    subject: bytes
    queue: bytes | None
    sid: bytes


@dataclass(frozen=True, slots=True)
class Unsub:
    """``UNSUB <sid> [max]``; ``max_msgs`` is ``None`` without a count, and ``0`` for a
    count that is not a positive number (nats-server then unsubscribes at once)."""

    sid: bytes
    max_msgs: int | None


@dataclass(frozen=True, slots=True)
class Ping:
    """``PING``: the client asks for a ``PONG``."""


@dataclass(frozen=True, slots=True)
class Pong:
    """``PONG``: the client answers the server's ``PING``."""


Event = Connect | Pub | Sub | Unsub | Ping | Pong


class ClientViolation(Exception):
    """
    The client broke the protocol: the server closes the connection.

    :param detail: what was wrong, for the server's log.
    :param error: the ``-ERR`` text to send first, or ``None`` where nats-server closes
        without one.
    """

    def __init__(self, detail: str, error: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.error = error


def _unknown(detail: str) -> ClientViolation:
    return ClientViolation(detail, UNKNOWN_OPERATION)


def _silent(detail: str) -> ClientViolation:
    return ClientViolation(detail, None)


def _size(token: bytes) -> int | None:
    """A size as nats-server reads it: ASCII digits only (no sign, no blanks)."""
    if token.isdigit() and token.isascii():
        return int(token)
    return None


class ClientParser:
    """
    Client -> server frames in, :data:`Event` objects out, one at a time.

    :param max_payload: the largest message (bytes, headers included) a client may send.
    :param max_control_line: the most bytes of arguments one control line may have.
    """

    def __init__(self, max_payload: int, max_control_line: int = MAX_CONTROL_LINE) -> None:
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        #: Whether ``HPUB`` is allowed (the client's CONNECT said ``"headers": true``).
        self.headers = False
        self._buf = bytearray()
        self._pos = 0
        # How far the search for the current line's end has gone (O(bytes) scanning).
        self._scanned = 0
        # A PUB/HPUB whose payload has not all arrived: (subject, reply, hdr, total).
        self._pending: tuple[bytes, bytes | None, int | None, int] | None = None
        self._broken = False

    def receive_data(self, data: bytes) -> None:
        """Store ``data`` (bytes as they arrived); nothing is parsed until
        :meth:`next_event`."""
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = self._scanned = 0
        elif self._pos > 65536:
            del self._buf[: self._pos]
            self._scanned -= self._pos
            self._pos = 0
        self._buf += data

    def next_event(self) -> Event | None:
        """
        The next complete event, or ``None`` until more bytes arrive.

        :raises ClientViolation: once the client broke the protocol; the parser then
            refuses everything (the server closes the connection).
        """
        if self._broken:
            raise _silent("the connection is being closed")
        try:
            return self._next()
        except ClientViolation:
            self._broken = True
            raise

    def _next(self) -> Event | None:
        while True:
            if self._pending is not None:
                return self._payload()
            buf = self._buf
            end = buf.find(b"\n", max(self._pos, self._scanned))
            if end < 0:
                self._scanned = len(buf)
                self._check_partial()
                return None
            line = bytes(buf[self._pos : end])
            self._pos = self._scanned = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            event = self._line(line)
            if event is not None:
                return event

    def _payload(self) -> Pub | None:
        assert self._pending is not None
        subject, reply, hdr, total = self._pending
        start = self._pos
        if len(self._buf) - start < total + 2:
            return None
        if self._buf[start + total : start + total + 2] != b"\r\n":
            raise _unknown("a payload not followed by CRLF")
        data = bytes(self._buf[start : start + total])
        self._pos = self._scanned = start + total + 2
        self._pending = None
        if hdr is None:
            return Pub(subject, reply, None, data)
        return Pub(subject, reply, data[:hdr], data[hdr:])

    def _check_partial(self) -> None:
        """Refuse a line that is already wrong before its end arrives: an unknown
        operation, or too many bytes of arguments."""
        head = bytes(self._buf[self._pos : self._pos + 9]).upper()
        if not head:
            return
        word = _BLANKS.split(head, 1)[0] if head[:1] not in (b" ", b"\t") else b""
        complete = len(word) < len(head)
        if any(head.startswith(op) for op in _BARE):
            return
        if not word or not any(
            (op == word if complete else op.startswith(word)) for op in (*_WITH_ARGS, *_BARE)
        ):
            raise _unknown(f"unknown operation {head!r}")
        if complete:
            rest = bytes(self._buf[self._pos + len(word) :]).lstrip(b" \t")
            if rest.endswith(b"\r"):
                rest = rest[:-1]
            if len(rest) > self.max_control_line:
                raise ClientViolation("control line too long", CONTROL_LINE_EXCEEDED)

    def _line(self, line: bytes) -> Event | None:
        upper = line[:8].upper()
        if upper.startswith(b"PING"):
            return Ping()
        if upper.startswith(b"PONG"):
            return Pong()
        if upper.startswith(b"+OK"):
            return None
        if upper.startswith(b"-ERR"):
            raise _silent("-ERR from a client")
        parts = _BLANKS.split(line, 1)
        op = parts[0].upper()
        if op not in _WITH_ARGS or not line[:1].strip():
            if op.startswith(b"CONNECT"):
                raise _silent(f"malformed CONNECT {line[:16]!r}")
            raise _unknown(f"unknown operation {line[:16]!r}")
        args = parts[1].strip(b" \t") if len(parts) > 1 else b""
        if len(parts[1] if len(parts) > 1 else b"") > self.max_control_line:
            raise ClientViolation("control line too long", CONTROL_LINE_EXCEEDED)
        if not args:
            if op in (b"CONNECT", b"INFO"):
                raise _silent(f"{op.decode()} without arguments")
            raise _unknown(f"{op.decode()} without arguments")
        if op in (b"PUB", b"HPUB"):
            self._pub(_BLANKS.split(args), headers=op == b"HPUB")
            return None  # the payload follows
        if op == b"SUB":
            return self._sub(_BLANKS.split(args))
        if op == b"UNSUB":
            return self._unsub(_BLANKS.split(args))
        if op == b"CONNECT":
            return Connect(_connect_options(args))
        return None  # INFO from a client: ignored

    def _pub(self, args: list[bytes], *, headers: bool) -> None:
        if headers and not self.headers:
            raise _silent("HPUB without headers: true in CONNECT")
        sizes = 2 if headers else 1
        if len(args) not in (1 + sizes, 2 + sizes):
            raise _silent(f"wrong number of arguments for {'HPUB' if headers else 'PUB'}")
        numbers = [_size(a) for a in args[-sizes:]]
        if any(n is None for n in numbers):
            raise _silent("a size that is not a number")
        total = numbers[-1]
        hdr = numbers[0] if headers else None
        assert total is not None
        if hdr is not None and hdr > total:
            raise _silent("a header size above the total size")
        if total > self.max_payload:
            raise ClientViolation(
                f"a message of {total} bytes, max_payload is {self.max_payload}",
                MAX_PAYLOAD_VIOLATION,
            )
        reply = args[1] if len(args) == 2 + sizes else None
        self._pending = (args[0], reply, hdr, total)

    @staticmethod
    def _sub(args: list[bytes]) -> Sub:
        if len(args) == 2:
            return Sub(args[0], None, args[1])
        if len(args) == 3:
            return Sub(args[0], args[1], args[2])
        raise _silent("wrong number of arguments for SUB")

    @staticmethod
    def _unsub(args: list[bytes]) -> Unsub:
        if len(args) == 1:
            return Unsub(args[0], None)
        if len(args) == 2:
            n = _size(args[1])
            return Unsub(args[0], n if n is not None else 0)
        raise _silent("wrong number of arguments for UNSUB")


def _connect_options(args: bytes) -> dict[str, Any]:
    try:
        options = json.loads(args)
    except ValueError:
        raise _silent("CONNECT is not JSON") from None
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise _silent("CONNECT is not a JSON object")
    for name, types in _CONNECT_TYPES.items():
        value = options.get(name)
        if value is None:
            continue
        if not isinstance(value, types) or (types == (int,) and isinstance(value, bool)):
            raise _silent(f"CONNECT field {name!r} has the wrong type")
    return options


def _tokens(subject: bytes) -> list[bytes]:
    return subject.split(b".")


def is_valid_subject(subject: bytes) -> bool:
    """Whether ``subject`` may be subscribed to: no empty token, and ``>`` (a whole
    token) only last. ``*`` and ``>`` inside a token (``a*``) are plain characters."""
    tokens = _tokens(subject)
    if any(not t for t in tokens):
        return False
    return b">" not in tokens[:-1]


def is_literal_subject(subject: bytes) -> bool:
    """Whether ``subject`` may be published to: valid, without wildcard tokens."""
    tokens = _tokens(subject)
    return all(t and t != b"*" and t != b">" for t in tokens)


def subject_matches(pattern: list[bytes], subject: list[bytes]) -> bool:
    """
    Whether the subscription tokens ``pattern`` match the subject tokens ``subject``.

    A ``*`` token of the pattern matches any one token, a final ``>`` one or more; a
    subject's own tokens are taken literally (nats-server routes a publish to ``a.*``,
    which it refuses with an ``-ERR``, to subscriptions that match it so). A subject
    with an empty token matches nothing.
    """
    if not all(subject):
        return False
    n = len(subject)
    last = len(pattern) - 1
    for i, tok in enumerate(pattern):
        if tok == b">" and i == last:
            return n > i
        if i >= n or (tok != b"*" and tok != subject[i]):
            return False
    return n == len(pattern)
