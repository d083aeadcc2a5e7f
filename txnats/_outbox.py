"""The reconnect buffer: publishes kept while the client has no connection.

Frames are kept whole, packed into blocks of about :data:`BLOCK` bytes (a bytes object
per small frame would cost more than the frame). Frames a lost connection never handed
to its socket go in front, in their order; publishes made while disconnected go behind.

When the next connection is up, :meth:`ReconnectBuffer.take` hands the blocks over,
first checking them against the new server's limits: a frame the new server would
refuse (over its ``max_payload``, or carrying headers it does not support) would make
it close the connection and take the frames behind it down too, so such frames are
taken out and counted instead, and the rest is sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from txnats.protocol.commands import split_frames

__all__ = ["BLOCK", "ReconnectBuffer", "Refused"]

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

    def __len__(self) -> int:
        return self.msgs

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
