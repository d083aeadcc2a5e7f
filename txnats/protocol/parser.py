"""Incremental, sans-IO parser for server -> client frames.

``Parser.feed(data)`` takes bytes as they arrive and returns the complete events they
finish. Control lines are found by searching for CRLF from where the previous search
stopped, so a frame split over many reads is scanned once (O(bytes)); payloads are read
by their announced length, never by searching. Both control lines and payloads are
bounded, and an announced size is checked before anything waits for it.

MSG, the commonest frame by far, has one fast path (:meth:`Parser._parse`): a line as
nats-server writes it is split by one regex match and cached, and a repeat of the
cached line (a subscription's messages) is recognised by one comparison. Every other
line, MSG written any other way included, goes through the general path.

The only exception that leaves :meth:`Parser.feed` is :class:`ProtocolError`; it
carries the events completed before the fault in ``events``. After an error the
parser refuses further input.
"""

from __future__ import annotations

import json
import re
from typing import Any

from txnats.errors import ProtocolError
from txnats.protocol.events import (
    OK,
    PING,
    PONG,
    BadHeaders,
    Err,
    Event,
    Info,
    Msg,
    Ok,
    Ping,
    Pong,
)
from txnats.protocol.headers import Headers, parse_headers

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
# False, so the next MSG line takes the regex or the general path, which test its
# length and size against the limits before it is cached. (A real line here would skip
# those checks: it would be accepted however low max_control_line is.)
_NO_LINE: tuple[()] = ()
_NO_LINE_MEANS: tuple[str, int, str | None, int] = ("", 0, None, 0)
# The operations that take no arguments, and their events.
_BARE: dict[bytes, Ping | Pong | Ok] = {b"PING": PING, b"PONG": PONG, b"+OK": OK}
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
        "_max_control_line",
        "_max_payload",
        "_pending",
        "_repeat",
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
        # The control line of the last MSG parsed by the fast path, CRLF included and
        # preceded by the CRLF that ends a payload, and what it said: (subject, sid,
        # reply, total). A subscription's messages arrive with the same line over and
        # over; one comparison after a payload checks its CRLF and recognises the next
        # line. Only a line that passed both limits is cached, and a limit change
        # empties the cache.
        self._repeat: bytes | tuple[()] = _NO_LINE
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
        self._forget_line()  # its length was checked against the old limit

    @property
    def max_payload(self) -> int:
        """Largest ``#total bytes`` accepted in MSG/HMSG; never above HARD_MAX_PAYLOAD."""
        return self._max_payload

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self._max_payload = min(value, HARD_MAX_PAYLOAD)
        self._forget_line()  # its size was checked against the old limit

    def _forget_line(self) -> None:
        """Empty the line cache: the next MSG line is checked against the limits."""
        self._repeat = _NO_LINE
        self._last = _NO_LINE_MEANS

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Event]:
        """Consume ``data``; return the events it completes, in order.

        :raises ProtocolError: the input breaks the protocol or a limit; its ``events``
            holds the events completed before the fault, and the parser refuses any
            further input.
        """
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
        self._scan = max(self._scan - pos, 0)
        if pos >= len(buf):
            self._buf = b""
        elif isinstance(buf, bytearray):
            del buf[:pos]
            self._buf = buf
        else:
            self._buf = buf[pos:]
        return events

    def _parse(self, buf: bytes, events: list[Event]) -> int:
        """Parse whole frames from ``buf``; return the offset of the first one left.

        The loop is the one MSG fast path. A control line equal to the last MSG line
        parsed needs no parsing: after a payload, one comparison with ``repeat`` checks
        its CRLF and recognises the repeated line. A MSG line as nats-server writes it
        that is not cached yet is split by one regex match and becomes the cached line.
        Either way the payload is taken here if it has arrived. Anything else goes to
        :meth:`_control`. ``pos`` is 0 or just after a CRLF (of a control line or a
        payload), so ``repeat`` (CRLF + line) is looked for at ``pos - 2``.

        :param buf: the held bytes and the new ones; really a bytearray while a long
            payload arrives (then every slice kept is copied to bytes).
        """
        pos = self._take_pending(buf, 0, events)
        if self._pending is not None:
            return pos
        n2 = len(buf) - 2  # the last offset a payload's CRLF may start at
        append = events.append
        startswith = buf.startswith
        msg_match = _MSG_LINE.match
        new_msg = object.__new__
        init_msg = Msg.__init__  # called directly: skips type.__call__ (see Msg.__init__)
        is_bytes = type(buf) is bytes
        repeat = self._repeat  # CRLF + the cached line
        line_len = len(repeat) - 2
        l_subject, l_sid, l_reply, l_total = self._last
        cached = startswith(repeat, pos - 2) if pos else startswith(repeat[2:])
        while True:
            if not cached:
                m = msg_match(buf, pos)
                if m is None:
                    was = pos
                    pos = self._control(buf, pos, events)
                    if pos == was or self._pending is not None:
                        break  # an incomplete line, or a payload still to come
                    cached = startswith(repeat, pos - 2)
                    continue
                # A MSG line as nats-server writes it, not the cached one: the regex
                # has split and checked it; check the limits, then cache it.
                subj_raw, sid_raw, reply_raw, size_raw = m.groups()
                line_len = m.end() - pos
                if line_len - 2 > self._max_control_line:
                    raise ProtocolError("control line exceeds the maximum length")
                l_total = int(size_raw)
                if l_total > self._max_payload:
                    raise ProtocolError(
                        f"message of {l_total} bytes exceeds the limit {self._max_payload}"
                    )
                try:
                    l_subject = subj_raw.decode()
                except UnicodeDecodeError:
                    l_subject = subj_raw.decode("utf-8", "surrogateescape")
                l_reply = None if reply_raw is None else _text(reply_raw)
                l_sid = int(sid_raw)
                repeat = buf[pos - 2 : pos + line_len] if pos else b"\r\n" + buf[:line_len]
                if not is_bytes:
                    repeat = bytes(repeat)
            # The cached MSG line is at pos: take its payload if it is all here.
            start = pos + line_len
            end = start + l_total
            if end > n2:
                self._pending = (l_subject, l_sid, l_reply, -1, l_total)
                pos = start
                break
            msg = new_msg(Msg)
            data = buf[start:end] if is_bytes else bytes(buf[start:end])
            init_msg(msg, l_subject, l_reply, data, None, l_sid)
            cached = startswith(repeat, end)
            if not cached and (buf[end] != 13 or buf[end + 1] != 10):
                raise ProtocolError("payload not followed by CRLF")
            append(msg)
            pos = end + 2
        # The line cached last, kept for the next feed (a failed parser needs none).
        self._repeat = repeat
        self._last = (l_subject, l_sid, l_reply, l_total)
        return pos

    def _take_pending(self, buf: bytes, pos: int, events: list[Event]) -> int:
        """Take the payload the pending MSG/HMSG line announced, if all of it is here.

        A header block that does not parse was written by the publisher, not the
        server (which relays it unchecked): the message is delivered with
        :meth:`Headers.unparsed` headers, followed by a :class:`BadHeaders` event.

        :returns: the offset after its CRLF, or ``pos`` if nothing is pending or the
            payload has not all arrived (then it stays pending).
        :raises ProtocolError: the payload is not followed by CRLF.
        """
        pending = self._pending
        if pending is None:
            return pos
        subject, sid, reply, hlen, total = pending
        end = pos + total
        if end + 2 > len(buf):
            return pos
        if buf[end : end + 2] != b"\r\n":
            raise ProtocolError("payload not followed by CRLF")
        bad = None
        if hlen < 0:
            hdr, start = None, pos
        else:
            block, start = bytes(buf[pos : pos + hlen]), pos + hlen
            try:
                hdr = parse_headers(block)
            except ProtocolError as e:
                hdr = Headers.unparsed(block)
                bad = BadHeaders(subject, sid, str(e)[:200])
        events.append(Msg(subject, reply, bytes(buf[start:end]), hdr, sid))
        if bad is not None:
            events.append(bad)
            self.controls += 1
        self._pending = None
        return end + 2

    def _control(self, buf: bytes, pos: int, events: list[Event]) -> int:
        """Parse the control line at ``pos``, one the fast path did not take.

        The search for its CRLF resumes where the last one stopped (``_scan``), so a
        line arriving in many reads is scanned once. A MSG/HMSG line leaves its frame
        pending; its payload is taken at once if it has arrived.

        :returns: the offset after the frame, after the line if its payload is still
            pending, or ``pos`` if the line is not complete yet.
        :raises ProtocolError: the line is too long or breaks the protocol.
        """
        n = len(buf)
        max_line = self._max_control_line
        i = buf.find(b"\r\n", max(pos, self._scan))
        if i < 0:
            # A final CR may be the start of the line's CRLF: don't count it yet.
            held = n - pos - (1 if buf[n - 1 : n] == b"\r" else 0)
            if held > max_line:
                raise ProtocolError("control line exceeds the maximum length")
            # Resume next time just before the end (a CR may be the last byte).
            self._scan = max(pos, n - 1)
            return pos
        if i - pos > max_line:
            raise ProtocolError("control line exceeds the maximum length")
        line = bytes(buf[pos:i])
        if b"\n" in line or b"\r" in line:
            raise ProtocolError("bare CR or LF in control line")
        self._line(line, events)
        return self._take_pending(buf, i + 2, events)

    def _line(self, line: bytes, events: list[Event]) -> None:
        """Act on one whole control line (CRLF removed): an event, or a pending frame.

        :raises ProtocolError: an unknown operation, or bad arguments for a known one.
        """
        args = line.split()
        if not args:
            raise ProtocolError("empty control line")
        op = args[0].upper()
        if op == b"MSG":
            self._msg_line(args, False)
            return
        if op == b"HMSG":
            self._msg_line(args, True)
            return
        bare = _BARE.get(op)
        if bare is not None:
            if len(args) != 1:
                raise ProtocolError(f"{op.decode()} takes no arguments")
            events.append(bare)
        elif op == b"-ERR":
            text = line.split(None, 1)[1].strip() if len(args) > 1 else b""
            if len(text) >= 2 and text[:1] == b"'" and text[-1:] == b"'":
                text = text[1:-1]
            events.append(Err(_text(text)))
        elif op == b"INFO":
            if len(args) < 2:
                raise ProtocolError("INFO without a payload")
            try:
                options = json.loads(line.split(None, 1)[1])
            except (ValueError, RecursionError) as e:
                raise ProtocolError(f"INFO is not valid JSON: {e}") from None
            events.append(Info(validate_info(options)))
        else:
            raise ProtocolError(f"unknown protocol operation {args[0][:16]!r}")
        self.controls += 1

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
            # (A block too short to be one, b"NATS/1.0\r\n\r\n" being the shortest,
            # is the publisher's doing: delivered unparsed, as any malformed block.)
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
