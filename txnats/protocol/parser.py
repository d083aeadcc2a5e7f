"""Incremental, sans-IO parser for server -> client frames.

``Parser.feed(data)`` takes bytes as they arrive and returns the complete events they
finish. Control lines are found by searching for CRLF from where the previous search
stopped, so a frame split over many reads is scanned once (O(bytes)); payloads are read
by their announced length, never by searching. Both control lines and payloads are
bounded, and an announced size is checked before anything waits for it.

The only exception that leaves :meth:`Parser.feed` is :class:`ProtocolError`; it
carries the events completed before the fault in ``events``. After an error the
parser refuses further input.
"""

from __future__ import annotations

import json
import re
from typing import Any

from txnats.errors import ProtocolError
from txnats.protocol.events import OK, PING, PONG, Err, Event, Info, Msg
from txnats.protocol.headers import parse_headers

__all__ = ["DEFAULT_MAX_CONTROL_LINE", "HARD_MAX_PAYLOAD", "Parser", "validate_info"]

#: Longest control line accepted. INFO from a large cluster exceeds 4 KiB easily.
DEFAULT_MAX_CONTROL_LINE = 64 * 1024
#: Largest payload ever accepted, whatever the server announces (nats-server's own cap).
HARD_MAX_PAYLOAD = 64 * 1024 * 1024
_MAX_DIGITS = 10
# MSG as nats-server writes it: MSG <subject> <sid> [reply] <size>, single spaces.
# Anything else (tabs, lowercase, errors) takes the general path.
_TOKEN = rb"([^ \t\r\n\x0b\x0c]+)"
_MSG_LINE = re.compile(
    rb"MSG " + _TOKEN + rb" ([0-9]{1,20}) (?:" + _TOKEN + rb" )?([0-9]{1,10})\r\n"
)
# The parser's one-line cache when it holds no line. ``bytes.startswith(())`` is always
# False, so the next MSG line takes the checked paths (regex or general), which test its
# length and size against the limits before it is cached. (A real line here would skip
# those checks: it would be accepted however low max_control_line is.)
_NO_LINE: tuple[()] = ()
_NO_LINE_MEANS: tuple[str, int, str | None, int] = ("", 0, None, 0)
# Below this many held bytes, the next read is joined to them as bytes.
_SMALL = 64 * 1024

# (field, accepted types) for the INFO fields the client reads.
_INFO_TYPES: dict[str, tuple[type, ...]] = {
    "server_id": (str,),
    "server_name": (str,),
    "version": (str,),
    "go": (str,),
    "host": (str,),
    "port": (int,),
    "max_payload": (int,),
    "proto": (int,),
    "client_id": (int,),
    "client_ip": (str,),
    "headers": (bool,),
    "auth_required": (bool,),
    "tls_required": (bool,),
    "tls_verify": (bool,),
    "tls_available": (bool,),
    "jetstream": (bool,),
    "ldm": (bool,),
    "nonce": (str,),
    "cluster": (str,),
    "domain": (str,),
    "connect_urls": (list,),
    "ws_connect_urls": (list,),
}


def validate_info(options: object) -> dict[str, Any]:
    """Check the INFO fields the client relies on; raise ``ProtocolError`` if wrong."""
    if not isinstance(options, dict):
        raise ProtocolError("INFO payload is not a JSON object")
    for key, types in _INFO_TYPES.items():
        if key in options:
            value = options[key]
            # bool is an int subclass: keep numeric fields strictly numeric.
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                raise ProtocolError(f"INFO field {key!r} has the wrong type")
    mp = options.get("max_payload")
    if mp is not None and mp <= 0:
        raise ProtocolError("INFO max_payload must be positive")
    for key in ("connect_urls", "ws_connect_urls"):
        urls = options.get(key)
        if urls is not None and not all(isinstance(u, str) for u in urls):
            raise ProtocolError(f"INFO {key} must be a list of strings")
    return options


def _size(raw: bytes) -> int:
    if not raw.isdigit() or len(raw) > _MAX_DIGITS:
        raise ProtocolError(f"invalid size {raw[:20]!r}")
    return int(raw)


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


class Parser:
    """Turn server bytes into events. One parser per connection.

    **The control-line limit.** A control line's length is the number of bytes before
    its CRLF, the operation name included; the CRLF itself never counts. A line of
    ``max_control_line`` bytes is accepted and one of ``max_control_line + 1`` bytes
    raises :class:`ProtocolError`, whether the line arrives whole, a byte at a time or
    split anywhere: an incomplete line raises as soon as more than ``max_control_line``
    bytes of it are held (a final CR is not counted, since it may begin the CRLF).
    nats-server's own ``max_control_line`` likewise leaves the CRLF out; it measures only
    the arguments after the operation name, so this limit is stricter by the length of
    the name and its separator (``MSG``, ``HMSG``, ``INFO`` ...). Payload bytes never
    count.

    :param max_control_line: the longest control line accepted, in bytes, CRLF not
        counted (see above).
    :param max_payload: the largest ``#total bytes`` accepted in MSG/HMSG; capped at
        :data:`HARD_MAX_PAYLOAD`.
    """

    __slots__ = (
        "_buf",
        "_failed",
        "_last",
        "_last_line",
        "_max_control_line",
        "_max_payload",
        "_pending",
        "_scan",
        "controls",
    )

    def __init__(
        self,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = HARD_MAX_PAYLOAD,
    ) -> None:
        self._max_control_line = max_control_line
        self._max_payload = min(max_payload, HARD_MAX_PAYLOAD)
        # The control line (CRLF included) of the last MSG parsed by the fast path, and
        # what it said: (subject, sid, reply, total). A subscription's messages arrive
        # with the same line over and over; recognising it takes one comparison. Only a
        # line that passed both limits is cached, and a limit change empties the cache.
        self._last_line: bytes | tuple[()] = _NO_LINE
        self._last: tuple[str, int, str | None, int] = _NO_LINE_MEANS
        self._buf: bytes | bytearray = b""
        self._scan = 0
        # (subject, sid, reply, header length or -1, total length) awaiting its payload.
        self._pending: tuple[str, int, str | None, int, int] | None = None
        self._failed = False
        #: How many events other than MSG/HMSG the last feed() returned.
        self.controls = 0

    @property
    def max_control_line(self) -> int:
        """Longest control line accepted, in bytes before its CRLF (see :class:`Parser`)."""
        return self._max_control_line

    @max_control_line.setter
    def max_control_line(self, value: int) -> None:
        self._max_control_line = value
        # The cached line's length was checked against the old limit.
        self._last_line = _NO_LINE
        self._last = _NO_LINE_MEANS

    @property
    def max_payload(self) -> int:
        """Largest ``#total bytes`` accepted in MSG/HMSG; never above HARD_MAX_PAYLOAD."""
        return self._max_payload

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self._max_payload = min(value, HARD_MAX_PAYLOAD)
        # The cached line's size was checked against the old limit.
        self._last_line = _NO_LINE
        self._last = _NO_LINE_MEANS

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Event]:
        """Consume ``data``; return the events it completes, in order."""
        if self._failed:
            failed = ProtocolError("parser already failed")
            raise failed
        held = self._buf
        if not held:
            buf: bytes | bytearray = bytes(data)
        elif len(held) < _SMALL:
            # A short remainder (part of one frame): join as bytes, so that slices of
            # the buffer are bytes already and need no copy.
            buf = bytes(held) + bytes(data)
        else:
            # A long payload still arriving: grow in place, never copy it whole again.
            if isinstance(held, bytearray):
                held += data
                buf = held
            else:
                buf = bytearray(held)
                buf += data
        events: list[Event] = []
        self.controls = 0
        try:
            pos = self._parse(buf, events)  # type: ignore[arg-type]
        except ProtocolError as e:
            self._failed = True
            self._buf = b""
            self._pending = None
            e.events = list(events)
            raise
        except Exception as e:  # pragma: no cover - defensive: only ProtocolError leaves
            self._failed = True
            self._buf = b""
            err = ProtocolError(f"parser fault: {e!r}")
            err.events = list(events)
            raise err from e
        if pos >= len(buf):
            self._buf = b""
            self._scan = 0
        elif isinstance(buf, bytearray):
            del buf[:pos]
            self._buf = buf
            self._scan -= pos
        else:
            self._buf = buf[pos:]
            self._scan -= pos
        return events

    def _parse(self, buf: bytes, events: list[Event]) -> int:
        # ``buf`` may really be a bytearray (a long payload arriving): then every slice
        # kept is copied to bytes (``is_bytes`` is False).
        pos = 0
        scan = max(self._scan, 0)
        n = len(buf)
        append = events.append
        max_line = self._max_control_line
        is_bytes = type(buf) is bytes
        msg_match = _MSG_LINE.match
        new_msg = object.__new__
        last_line = self._last_line
        last_len = len(last_line)
        l_subject, l_sid, l_reply, l_total = self._last
        while True:
            pending = self._pending
            if pending is not None:
                subject, sid, reply, hlen, total = pending
                end = pos + total
                if end + 2 > n:
                    break
                if buf[end : end + 2] != b"\r\n":
                    raise ProtocolError("payload not followed by CRLF")
                if hlen < 0:
                    append(Msg(subject, reply, bytes(buf[pos:end]), None, sid))
                else:
                    hdr = parse_headers(bytes(buf[pos : pos + hlen]))
                    append(Msg(subject, reply, bytes(buf[pos + hlen : end]), hdr, sid))
                pos = end + 2
                scan = pos
                self._pending = None
                continue
            if buf.startswith(last_line, pos):
                # The same control line as the last MSG: same subject, sid, reply, size.
                start = pos + last_len
                end = start + l_total
                if end + 2 <= n:
                    if buf[end] != 13 or buf[end + 1] != 10:
                        raise ProtocolError("payload not followed by CRLF")
                    # Msg(...) without the call to __init__ (a third of the cost here).
                    msg = new_msg(Msg)
                    msg.subject = l_subject
                    msg.reply = l_reply
                    msg.data = buf[start:end] if is_bytes else bytes(buf[start:end])
                    msg.headers = None
                    msg.sid = l_sid
                    msg._client = None
                    append(msg)
                    pos = scan = end + 2
                else:
                    self._pending = (l_subject, l_sid, l_reply, -1, l_total)
                    pos = scan = start
                continue
            m = msg_match(buf, pos)
            if m is not None:
                # The commonest frame, as nats-server writes it (single spaces): one C
                # call finds, splits and checks the control line.
                subj_raw, sid_raw, reply_raw, size_raw = m.groups()
                start = m.end()
                if start - pos - 2 > max_line:
                    raise ProtocolError("control line exceeds the maximum length")
                total = int(size_raw)
                if total > self._max_payload:
                    raise ProtocolError(
                        f"message of {total} bytes exceeds the limit {self._max_payload}"
                    )
                try:
                    subject = subj_raw.decode()
                except UnicodeDecodeError:
                    subject = subj_raw.decode("utf-8", "surrogateescape")
                reply = None if reply_raw is None else _text(reply_raw)
                sid = int(sid_raw)
                last_line = buf[pos:start] if is_bytes else bytes(buf[pos:start])
                last_len = start - pos
                self._last_line = last_line
                l_subject, l_sid, l_reply, l_total = self._last = (subject, sid, reply, total)
                end = start + total
                if end + 2 <= n:
                    if buf[end : end + 2] != b"\r\n":
                        raise ProtocolError("payload not followed by CRLF")
                    msg = new_msg(Msg)  # as above: no __init__ call
                    msg.subject = subject
                    msg.reply = reply
                    msg.data = buf[start:end] if is_bytes else bytes(buf[start:end])
                    msg.headers = None
                    msg.sid = sid
                    msg._client = None
                    append(msg)
                    pos = scan = end + 2
                else:
                    self._pending = (subject, sid, reply, -1, total)
                    pos = scan = start
                continue
            i = buf.find(b"\r\n", scan)
            if i < 0:
                # A final CR may be the start of the line's CRLF: don't count it yet.
                held = n - pos - (1 if buf[n - 1 : n] == b"\r" else 0)
                if held > max_line:
                    raise ProtocolError("control line exceeds the maximum length")
                # Resume next time just before the end (a CR may be the last byte).
                scan = max(pos, n - 1)
                break
            if i - pos > max_line:
                raise ProtocolError("control line exceeds the maximum length")
            line = buf[pos:i] if is_bytes else bytes(buf[pos:i])
            pos = i + 2
            scan = pos
            if b"\n" in line or b"\r" in line:
                raise ProtocolError("bare CR or LF in control line")
            if line[:4] == b"MSG ":
                # Fast path for the commonest frame: parse it and, when the payload is
                # already here, take it at once.
                args = line.split()
                na = len(args)
                if na == 4:
                    reply = None
                elif na == 5:
                    reply = _text(args[3])
                else:
                    raise ProtocolError(f"MSG takes 3 or 4 arguments, got {na - 1}")
                size_raw = args[-1]
                sid_raw = args[2]
                if not size_raw.isdigit() or len(size_raw) > _MAX_DIGITS:
                    raise ProtocolError(f"invalid size {size_raw[:20]!r}")
                if not sid_raw.isdigit() or len(sid_raw) > 20:
                    raise ProtocolError(f"invalid sid {sid_raw[:20]!r}")
                total = int(size_raw)
                if total > self._max_payload:
                    raise ProtocolError(
                        f"message of {total} bytes exceeds the limit {self._max_payload}"
                    )
                try:
                    subject = args[1].decode()
                except UnicodeDecodeError:
                    subject = args[1].decode("utf-8", "surrogateescape")
                end = pos + total
                if end + 2 <= n:
                    if buf[end : end + 2] != b"\r\n":
                        raise ProtocolError("payload not followed by CRLF")
                    data = buf[pos:end] if is_bytes else bytes(buf[pos:end])
                    append(Msg(subject, reply, data, None, int(sid_raw)))
                    pos = scan = end + 2
                else:
                    self._pending = (subject, int(sid_raw), reply, -1, total)
                continue
            args = line.split()
            if not args:
                raise ProtocolError("empty control line")
            op = args[0].upper()
            if op == b"MSG":
                self._msg_line(args, False)
            elif op == b"HMSG":
                self._msg_line(args, True)
            elif op == b"PING":
                if len(args) != 1:
                    raise ProtocolError("PING takes no arguments")
                append(PING)
                self.controls += 1
            elif op == b"PONG":
                if len(args) != 1:
                    raise ProtocolError("PONG takes no arguments")
                append(PONG)
                self.controls += 1
            elif op == b"+OK":
                if len(args) != 1:
                    raise ProtocolError("+OK takes no arguments")
                append(OK)
                self.controls += 1
            elif op == b"-ERR":
                text = line.split(None, 1)[1].strip() if len(args) > 1 else b""
                if len(text) >= 2 and text[:1] == b"'" and text[-1:] == b"'":
                    text = text[1:-1]
                append(Err(_text(text)))
                self.controls += 1
            elif op == b"INFO":
                if len(args) < 2:
                    raise ProtocolError("INFO without a payload")
                try:
                    options = json.loads(line.split(None, 1)[1])
                except (ValueError, RecursionError) as e:
                    raise ProtocolError(f"INFO is not valid JSON: {e}") from None
                append(Info(validate_info(options)))
                self.controls += 1
            else:
                raise ProtocolError(f"unknown protocol operation {args[0][:16]!r}")
        self._scan = scan
        return pos

    def _msg_line(self, args: list[bytes], has_headers: bool) -> None:
        n = len(args)
        if has_headers:
            if n == 5:
                reply = None
            elif n == 6:
                reply = _text(args[3])
            else:
                raise ProtocolError(f"HMSG takes 4 or 5 arguments, got {n - 1}")
            hlen = _size(args[-2])
            total = _size(args[-1])
            if hlen > total:
                raise ProtocolError("HMSG header size exceeds total size")
            if hlen < 12:  # b"NATS/1.0\r\n\r\n"
                raise ProtocolError("HMSG header block too short")
        else:
            if n == 4:
                reply = None
            elif n == 5:
                reply = _text(args[3])
            else:
                raise ProtocolError(f"MSG takes 3 or 4 arguments, got {n - 1}")
            hlen = -1
            total = _size(args[-1])
        if total > self._max_payload:
            raise ProtocolError(f"message of {total} bytes exceeds the limit {self._max_payload}")
        sid_raw = args[2]
        if not sid_raw.isdigit() or len(sid_raw) > 20:
            raise ProtocolError(f"invalid sid {sid_raw[:20]!r}")
        self._pending = (_text(args[1]), int(sid_raw), reply, hlen, total)
