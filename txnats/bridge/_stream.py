"""The bounded queue between one NATS subscription and one slow HTTP client.

A message goes straight to the client's connection while its transport takes data.
When the transport's buffer is full, the transport pauses this producer; messages then
wait here, up to ``max_msgs`` messages and ``max_bytes`` bytes. Past that they are
dropped and counted, and the count goes into the stream (where the gap is) when the
client catches up: memory in the bridge never grows with a client's slowness.
"""

from __future__ import annotations

import base64
import json
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from txnats.protocol.events import Msg

__all__ = ["Pump", "message_dict"]


def _utf8(text: str) -> bool:
    """Whether ``text`` came from UTF-8 bytes (the client decodes other bytes with
    ``surrogateescape``: lone surrogates, which JSON parsers refuse or mangle)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


def message_dict(msg: Msg) -> dict[str, Any]:
    """A NATS message as JSON-ready data holding only proper Unicode text.

    The payload goes as ``data`` when it is UTF-8, else base64-encoded as
    ``data_base64``. The same for the subject and the reply subject (``subject`` or
    ``subject_base64``, ``reply`` or ``reply_base64``), whose bytes another client may
    have chosen; and header values that are not UTF-8 go base64-encoded under
    ``headers_base64`` (``{name: [values]}``, as ``headers``). A header block that does
    not parse goes whole, base64-encoded, as ``headers_unparsed_base64``. The bytes
    NATS carried are kept either way: two different subjects never render alike.
    """
    out: dict[str, Any] = {}
    for key, text in (("subject", msg.subject), ("reply", msg.reply)):
        if not text:
            continue
        if _utf8(text):
            out[key] = text
        else:
            out[key + "_base64"] = _b64(text)
    if msg.headers is not None and msg.headers.raw is not None and not msg.headers:
        # A header block that did not parse (the client delivers it as it came).
        out["headers_unparsed_base64"] = base64.b64encode(msg.headers.raw).decode("ascii")
    elif msg.headers:
        headers: dict[str, list[str]] = {}
        encoded: dict[str, list[str]] = {}
        for name, value in msg.headers.multi_items():
            # (Names are printable ASCII: the client's parser takes no other.)
            if _utf8(value):
                headers.setdefault(name, []).append(value)
            else:
                encoded.setdefault(name, []).append(_b64(value))
        if headers:
            out["headers"] = headers
        if encoded:
            out["headers_base64"] = encoded
    try:
        out["data"] = msg.data.decode("utf-8")
    except UnicodeDecodeError:
        out["data_base64"] = base64.b64encode(msg.data).decode("ascii")
    return out


class _Dropped:
    """A place in the queue where messages were dropped, and how many."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


@implementer(IPushProducer)
class Pump:
    """Feeds one stream client; its transport pauses and resumes it.

    :param write: writes one encoded frame to the client.
    :param encode: a message as one frame (SSE event, WebSocket message).
    :param encode_dropped: the frame saying how many messages were dropped.
    :param max_msgs: the most messages held while the client does not read.
    :param max_bytes: the most frame bytes held.
    :param on_drop: called once per dropped message (metrics).
    """

    def __init__(
        self, write: Callable[[bytes], object], encode: Callable[[Msg], bytes],
        encode_dropped: Callable[[int], bytes], *, max_msgs: int, max_bytes: int,
        on_drop: Callable[[], object],
    ) -> None:
        self._write = write
        self._encode = encode
        self._encode_dropped = encode_dropped
        self._max_msgs = max_msgs
        self._max_bytes = max_bytes
        self._on_drop = on_drop
        self._queue: deque[bytes | _Dropped] = deque()
        self._queued_msgs = 0
        self._queued_bytes = 0
        self.paused = False
        self.stopped = False
        #: Messages written to the client, and dropped for it, so far.
        self.sent = 0
        self.dropped = 0

    @property
    def queued(self) -> int:
        """Messages waiting in the bridge for this client."""
        return self._queued_msgs

    @property
    def queued_bytes(self) -> int:
        """Frame bytes waiting in the bridge for this client."""
        return self._queued_bytes

    def offer(self, msg: Msg) -> None:
        """A message for the client: written now, queued, or dropped and counted."""
        if self.stopped:
            return
        frame = self._encode(msg)
        if not self.paused and not self._queue:
            self.sent += 1
            self._write(frame)
            return
        if self._queued_msgs >= self._max_msgs or (
            self._queued_bytes + len(frame) > self._max_bytes and self._queued_msgs
        ):
            last = self._queue[-1] if self._queue else None
            if not isinstance(last, _Dropped):
                last = _Dropped()
                self._queue.append(last)
            last.count += 1
            self.dropped += 1
            self._on_drop()
            return
        self._queue.append(frame)
        self._queued_msgs += 1
        self._queued_bytes += len(frame)
        if not self.paused:
            self._flush()

    def _flush(self) -> None:
        while self._queue and not self.paused and not self.stopped:
            item = self._queue.popleft()
            if isinstance(item, _Dropped):
                self._write(self._encode_dropped(item.count))
            else:
                self._queued_msgs -= 1
                self._queued_bytes -= len(item)
                self.sent += 1
                self._write(item)

    def pauseProducing(self) -> None:
        """The client's transport is full: hold messages here."""
        self.paused = True

    def resumeProducing(self) -> None:
        """The client's transport has room: send what waits."""
        self.paused = False
        self._flush()

    def stopProducing(self) -> None:
        """The client is gone: forget what waits."""
        self.stopped = True
        self._queue.clear()
        self._queued_msgs = self._queued_bytes = 0


def dropped_json(count: int) -> bytes:
    """The JSON body of a dropped-messages notice."""
    return json.dumps({"dropped": count}).encode()
