"""Publishing: the publish paths, the outbound bound, and the reconnect buffer.

:class:`Publisher` is the publishing half of :class:`~txnats.client.Client` (a mixin,
so that ``publish()``'s hot path reads its state as the client's own attributes, with
no call in between: each call there is paid once per message). Connected, a
publish goes on the connection's out-list; over plain TCP, past :data:`WRITE_THROUGH_AT`
queued bytes, it is handed to the socket at once, so a loop that never yields keeps
going. Disconnected, it goes to the :class:`ReconnectBuffer`.

The reconnect buffer keeps frames whole, packed into blocks of about :data:`BLOCK`
bytes (a bytes object per small frame would cost more than the frame). Frames a lost
connection never handed to its socket go in front, in their order; publishes made while
disconnected go behind. When the next connection is up, :meth:`ReconnectBuffer.take`
hands the blocks over, first checking them against the new server's limits: a frame the
new server would refuse (over its ``max_payload``, or carrying headers it does not
support) would make it close the connection and take the frames behind it down too, so
such frames are taken out and counted instead, and the rest is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import Logger

from txnats.connection import WRITE_THROUGH_AT, NatsProtocol
from txnats.errors import (
    ConnectionClosedError,
    HeadersNotSupportedError,
    InvalidArgumentTypeError,
    MaxPayloadError,
    NatsError,
    OutboundBufferFullError,
)
from txnats.options import DEFAULT_MAX_PAYLOAD, Options
from txnats.protocol.commands import (
    FAST_PREFIX_MAX,
    SIZE_TAILS,
    _pub_cache,
    check_control_line,
    control_line_length,
    pub_frame,
    pub_prefix,
    reply_subject,
    shorten,
    split_frames,
)
from txnats.protocol.headers import HeaderInput, encode_headers
from txnats.protocol.outbox import Outbox

__all__ = ["BLOCK", "Publisher", "ReconnectBuffer", "Refused"]

log = Logger()

#: The size blocks of whole frames are packed to.
BLOCK = 64 * 1024


@dataclass(frozen=True)
class Refused:
    """Buffered messages the new server would refuse (see :meth:`ReconnectBuffer.take`)."""

    #: Messages, and their frames' bytes, over the new server's ``max_payload``.
    too_large: int = 0
    too_large_bytes: int = 0
    #: Messages with headers, for a server without header support.
    with_headers: int = 0
    with_headers_bytes: int = 0

    @property
    def msgs(self) -> int:
        return self.too_large + self.with_headers


class ReconnectBuffer:
    """PUB/HPUB frames waiting for a connection, bounded by the caller."""

    def __init__(self) -> None:
        self._blocks: list[bytes] = []
        self._tail = bytearray()
        #: Bytes (whole frames) and messages held.
        self.bytes = 0
        self.msgs = 0
        # The largest message size (headers included) held, and whether any frame
        # carries headers: a reconnection only cuts the blocks back into frames when
        # the new server's limits could refuse one of them.
        self._max_size = 0
        self._headers = False

    @property
    def blocks(self) -> int:
        """How many bytes objects hold the frames (the tail that is filling included)."""
        return len(self._blocks) + (1 if self._tail else 0)

    def append(self, frame: bytes, size: int) -> None:
        """Keep one frame published while disconnected; ``size`` is its message size."""
        tail = self._tail
        tail += frame
        self.bytes += len(frame)
        self.msgs += 1
        if size > self._max_size:
            self._max_size = size
        if frame[:1] == b"H":
            self._headers = True
        if len(tail) >= BLOCK:
            self._blocks.append(bytes(tail))
            self._tail = bytearray()

    def prepend(self, frames: list[bytes]) -> None:
        """Put frames a lost connection never sent in front of what is held, in order."""
        if not frames:
            return
        blocks: list[bytes] = []
        run: list[bytes] = []
        size = 0
        for frame in frames:
            run.append(frame)
            size += len(frame)
            self._note(frame)
            if size >= BLOCK:
                blocks.append(b"".join(run))
                run, size = [], 0
        if run:
            blocks.append(b"".join(run))
        self._blocks[:0] = blocks
        self.msgs += len(frames)
        self.bytes += sum(len(f) for f in frames)

    def _note(self, frame: bytes) -> None:
        eol = frame.find(b"\r\n")
        size = int(frame[:eol].rsplit(b" ", 1)[1])
        if size > self._max_size:
            self._max_size = size
        if frame[:1] == b"H":
            self._headers = True

    def take(self, max_payload: int, headers_ok: bool) -> tuple[list[bytes], Refused]:
        """Empty the buffer: the blocks to send, and what the new server would refuse."""
        blocks = self._blocks
        if self._tail:
            blocks.append(bytes(self._tail))
        check_size = self._max_size > max_payload
        check_headers = self._headers and not headers_ok
        self.clear()
        if not (check_size or check_headers):
            return blocks, Refused()
        kept: list[bytes] = []
        too_large = too_large_bytes = with_headers = with_headers_bytes = 0
        for frame in split_frames(b"".join(blocks)):
            eol = frame.find(b"\r\n")
            if check_headers and frame[:1] == b"H":
                with_headers += 1
                with_headers_bytes += len(frame)
            elif check_size and int(frame[:eol].rsplit(b" ", 1)[1]) > max_payload:
                too_large += 1
                too_large_bytes += len(frame)
            else:
                kept.append(frame)
        return [b"".join(kept)] if kept else [], Refused(
            too_large, too_large_bytes, with_headers, with_headers_bytes
        )

    def clear(self) -> None:
        """Forget everything held."""
        self._blocks = []
        self._tail = bytearray()
        self.bytes = 0
        self.msgs = 0
        self._max_size = 0
        self._headers = False


def _nothing() -> None:
    pass


def _subject_of(frame: bytes) -> str:
    """The subject of a PUB/HPUB frame, shortened for an error message."""
    subject = frame[frame.find(b" ") + 1 : frame.find(b"\r\n")].split(b" ", 1)[0]
    return shorten(subject.decode("utf-8", "replace"))


class Publisher:
    """The publishing half of the client (see the module's docstring).

    A base class of :class:`~txnats.client.Client` so that ``publish()``'s hot path
    reads its state as the client's own attributes; what it needs of the client comes
    in as callables, and the client tells it which connection to publish to
    (:meth:`_use_connection`).

    :param schedule: run a function in the client's next batch of work.
    :param report: report an asynchronous error to ``error_cb``.
    :param refusal: why publishes are refused now (closed, draining), or None.
    :param url: the URL of the server connected to (redacted), or None.
    """

    options: Options

    def __init__(
        self,
        options: Options,
        *,
        schedule: Callable[..., None],
        report: Callable[[Exception], None],
        refusal: Callable[[], NatsError | None],
        url: Callable[[], str | None],
    ) -> None:
        self._later = schedule
        self._tell = report
        self._refusal = refusal
        self._url = url
        # The connection now (None: not connected), and the one publishes go to (it, or
        # None when publishing is not allowed on it) with its outbox.
        self._connection: NatsProtocol | None = None
        self._writer: NatsProtocol | None = None
        self._out: Outbox | None = None
        # The writer's schedule_flush: called by the fast path when its outbox was empty.
        self._wake: Callable[[], None] = _nothing
        self._max_outbound = options.max_outbound_bytes
        # publish()'s fast path queues up to _through_at bytes; past it, the slow path
        # hands the queue to the socket itself over plain TCP (see _write_through), so
        # a loop that never yields keeps going. _through_base is where it starts.
        self._through_base = self._through_at = self._max_outbound
        #: The longest control line the server accepts (see ``max_control_line``).
        self._max_line = options.max_control_line
        self._max_payload = DEFAULT_MAX_PAYLOAD
        # Payloads below this size take publish()'s fast path (see _set_max_payload).
        self._fast_size = 0
        self._set_max_payload(DEFAULT_MAX_PAYLOAD)
        # Whether the server (the current one, or the last) accepts HPUB.
        self._headers_supported = True
        self._out_msgs = self._out_bytes = 0
        # Disconnected: frames to send once connected.
        self._reconnect_buf = ReconnectBuffer()
        self._room_waiters: list[Deferred[None]] = []

    # What the client tells the publisher -----------------------------------------
    def _use_connection(self, proto: NatsProtocol | None, writable: bool) -> None:
        """Publish to ``proto`` when ``writable``, else keep publishes (or refuse them)."""
        self._connection = proto
        if writable and proto is not None:
            self._writer, self._out, self._wake = proto, proto.outbox, proto.schedule_flush
        else:
            self._writer, self._out, self._wake = None, None, _nothing

    def _adopt_limits(self, proto: NatsProtocol) -> None:
        """Take the limits of the server ``proto`` is connected to."""
        info = proto.info
        mp = info.get("max_payload")
        self._set_max_payload(mp if isinstance(mp, int) else DEFAULT_MAX_PAYLOAD)
        self._headers_supported = bool(info.get("headers", False))
        self._through_base = self._through_at = (
            min(WRITE_THROUGH_AT, self._max_outbound)
            if proto.can_write_through
            else self._max_outbound
        )

    def _set_max_payload(self, mp: int) -> None:
        self._max_payload = mp
        # The fast path needs a prebuilt size line and no max_payload check, and takes
        # only subjects short enough that the control line needs no check either: with
        # a max_control_line below that, every publish takes the checked path.
        self._fast_size = min(len(SIZE_TAILS), mp + 1) if self._max_line >= FAST_PREFIX_MAX else 0

    def _outbound_drained(self) -> None:
        """The connection handed its queue to the transport: room again."""
        self._through_at = self._through_base
        if self._room_waiters:
            waiters = self._room_waiters
            self._room_waiters = []
            for d in waiters:
                self._later(d.callback, None)

    def _report_refused(self, refused: Refused) -> None:
        """Report buffered publishes the new server would have refused (not sent)."""
        parts = []
        if refused.too_large:
            parts.append(
                f"{refused.too_large} over its max_payload of {self._max_payload} bytes "
                f"({refused.too_large_bytes} bytes)"
            )
        if refused.with_headers:
            parts.append(
                f"{refused.with_headers} with headers, which it does not support "
                f"({refused.with_headers_bytes} bytes)"
            )
        err = MaxPayloadError if refused.too_large else HeadersNotSupportedError
        error = err(
            f"{refused.msgs} publishes buffered while disconnected were not sent to "
            f"{self._url()}: " + "; ".join(parts) + ". The others were sent."
        )
        log.warn("{error}", error=str(error))
        self._tell(error)

    def _fail_room_waiters(self, error: NatsError) -> None:
        waiters = self._room_waiters
        self._room_waiters = []
        for d in waiters:
            d.errback(error)

    # The public API ----------------------------------------------------------------
    @property
    def max_payload(self) -> int:
        """The largest message (headers included) the server accepts."""
        return self._max_payload

    @property
    def max_control_line(self) -> int:
        """The longest control line, in bytes, that the client sends (the
        ``max_control_line`` option): the subject, reply subject or queue group and the
        sizes of a command together. A call that would need a longer one raises
        :class:`~txnats.errors.ControlLineTooLongError`."""
        return self._max_line

    @property
    def pending_bytes(self) -> int:
        """Bytes accepted by publish() that are not yet handed to the socket."""
        proto = self._connection
        if proto is not None:
            return proto.outbox.nbytes
        return self._reconnect_buf.bytes

    # The hot path stays in one function: every call made in it is paid once per message.
    def publish(
        self,
        subject: str,
        data: bytes = b"",
        reply: str | None = None,
        headers: HeaderInput | None = None,
    ) -> None:
        """Publish ``data`` to ``subject``; buffered, written at the end of the turn.

        Raises :class:`BadSubjectError`, :class:`BadHeaderError`,
        :class:`MaxPayloadError` (headers included), :class:`OutboundBufferFullError`,
        :class:`HeadersNotSupportedError`, :class:`InvalidArgumentTypeError`,
        :class:`ConnectionDrainingError` or :class:`ConnectionClosedError`; when it
        raises, nothing was queued.
        """
        try:
            entry = _pub_cache[subject]
        except (KeyError, TypeError):  # new, or unhashable: pub_prefix() checks it
            entry = pub_prefix(subject)
            if entry[1] > FAST_PREFIX_MAX:  # too long for the fast path's assumptions
                self._publish_checked(entry[0], data, reply, headers)
                return
        if headers is None and type(data) is bytes:
            size = len(data)
            outbox = self._out
            if outbox is not None and size < self._fast_size:
                # The hot path: the frame's parts go on the connection's outbox as they
                # are, laid out as txnats.protocol.outbox describes; joining them there,
                # once per flush, is the only copy of the payload. _send() has the rest.
                prefix, plen = entry
                line, rest = SIZE_TAILS[size]
                if reply is None:
                    pending = outbox.nbytes + plen + rest
                    if pending <= self._through_at:
                        parts = outbox.parts
                        if not parts:
                            self._wake()
                        parts += (prefix, line, data, b"\r\n")
                        outbox.nbytes = pending
                        self._out_msgs += 1
                        self._out_bytes += size
                        return
                else:
                    # With a reply subject (JetStream publishes, requests made by
                    # hand): validated each time, since replies are rarely repeated.
                    rep = reply_subject(reply)
                    pending = outbox.nbytes + plen + len(rep) + 1 + rest
                    # (plen + len(rep) + 1 bounds the control line: see FAST_PREFIX_MAX.)
                    if pending <= self._through_at and plen + len(rep) < self._max_line:
                        parts = outbox.parts
                        if not parts:
                            self._wake()
                        parts += (prefix, rep, b" ", line, data, b"\r\n")
                        outbox.nbytes = pending
                        self._out_msgs += 1
                        self._out_bytes += size
                        return
        self._publish_checked(entry[0], data, reply, headers)

    def _publish_checked(
        self, prefix: bytes, data: bytes, reply: str | None, headers: HeaderInput | None
    ) -> None:
        """publish() for what its fast path does not take: every limit checked."""
        payload, hdr = self._payload(data, headers)
        rep_b = None if reply is None else reply_subject(reply)
        frame, size = pub_frame(prefix[4:-1], payload, rep_b, hdr)
        self._send(frame, size, len(payload))

    def _respond(self, reply: str, data: bytes, headers: HeaderInput | None) -> None:
        """Publish to a reply subject: validated, but never put in the subject cache."""
        payload, hdr = self._payload(data, headers)
        frame, size = pub_frame(reply_subject(reply), payload, None, hdr)
        self._send(frame, size, len(payload))

    def _payload(self, data: bytes, headers: HeaderInput | None) -> tuple[bytes, bytes | None]:
        """Check a message's data and headers; return the data as bytes and the encoded
        header block (None without headers)."""
        if type(data) is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise InvalidArgumentTypeError(
                    f"data must be bytes, not {type(data).__name__}"
                )
            data = bytes(data)  # (a memoryview's len() counts items, not bytes)
        if headers is None:
            return data, None
        if not self._headers_supported:
            raise HeadersNotSupportedError(
                f"the server ({self._url() or 'last connected'}) does not support "
                "headers; the message was not sent"
            )
        return data, encode_headers(headers)

    def _check_size(self, size: int) -> None:
        if size > self._max_payload:
            raise MaxPayloadError(
                f"message of {size} bytes exceeds the server's max_payload {self._max_payload}"
            )

    def _send(self, frame: bytes, size: int, payload: int) -> None:
        """Queue an encoded PUB/HPUB frame (the tail of publish(), for the slower paths).

        :raises ControlLineTooLongError: its control line is over ``max_control_line``.
        """
        if size > self._max_payload:
            self._check_size(size)
        if control_line_length(frame) > self._max_line:
            check_control_line(frame, self._max_line, "publish " + _subject_of(frame))
        proto = self._writer
        if proto is not None:
            outbox = proto.outbox
            pending = outbox.nbytes + len(frame)
            if pending > self._through_at:
                self._write_through(proto)
                pending = outbox.nbytes + len(frame)
            if pending > self._max_outbound:
                raise OutboundBufferFullError(
                    f"outbound buffer full ({outbox.nbytes} bytes pending); "
                    "wait for wait_for_room()"
                )
            proto.write(frame)
        else:
            self._publish_offline(frame, size)
        self._out_msgs += 1
        self._out_bytes += payload

    def _write_through(self, proto: NatsProtocol) -> None:
        """Past ``_through_at`` queued bytes: hand the queue to the socket (plain TCP).

        If the socket takes nothing (the server is not keeping up), the next attempt
        waits for another :data:`WRITE_THROUGH_AT` bytes, so a full socket costs one
        system call per 64 KiB published, not one per message.
        """
        proto.write_through()  # (a flush resets _through_at, in _outbound_drained)
        if proto.outbox.nbytes:
            self._through_at = min(self._max_outbound, proto.outbox.nbytes + WRITE_THROUGH_AT)

    def _publish_offline(self, frame: bytes, size: int) -> None:
        refused = self._refusal()
        if refused is not None:
            raise refused
        limit = self.options.reconnect_buffer_size
        buf = self._reconnect_buf
        if buf.bytes + len(frame) > limit:
            raise OutboundBufferFullError(
                f"reconnect buffer full ({buf.bytes} of {limit} bytes) while disconnected"
            )
        buf.append(frame, size)

    def wait_for_room(self) -> Deferred[None]:
        """Fire when the outbound buffer has been handed to the socket.

        While disconnected it fires at once (publishes go to the bounded reconnect
        buffer, or raise), and so does a call pending when the connection is lost.
        """
        refused = self._refusal()
        if isinstance(refused, ConnectionClosedError):
            return fail(refused)
        proto = self._connection
        if proto is None or proto.outbox.nbytes == 0:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._room_waiters.append(d)
        return d

