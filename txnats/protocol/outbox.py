"""What waits to be written on one connection: its outbox of frames.

An :class:`Outbox` holds the client's frames in the order they were made, as a list of
bytes objects, and their size. Every command goes in whole (:meth:`Outbox.write`), but
for ``publish()``'s fast path, which appends a message's frame as the parts its encoder
made (``b"PUB <subject> "``, then the reply subject and a space if there is one, the
size line ``b"<n>\\r\\n"``, the payload, ``b"\\r\\n"``) straight onto :attr:`Outbox.parts`
and adds their length to :attr:`Outbox.nbytes`: joining them per message would cost
more than the rest of the publish, and they are joined once per write anyway
(:meth:`Outbox.take`). That is the whole layout; this module alone reads it back, when
a lost connection hands its unsent publishes to the next one
(:meth:`Outbox.take_publishes`).
"""

from __future__ import annotations

__all__ = ["Outbox"]

_PUB = b"PUB "
_HPUB = b"HPUB "
_CRLF = b"\r\n"


class Outbox:
    """The frames one connection has not handed to its transport yet."""

    __slots__ = ("nbytes", "parts")

    def __init__(self) -> None:
        #: The frames, whole or (publishes) in parts, oldest first. The list object is
        #: the same for the outbox's whole life: the publish fast path holds on to it.
        self.parts: list[bytes] = []
        #: Their length in bytes.
        self.nbytes = 0

    def __bool__(self) -> bool:
        return bool(self.parts)

    def write(self, frame: bytes) -> None:
        """Queue one whole frame."""
        self.parts.append(frame)
        self.nbytes += len(frame)

    def write_frames(self, frames: list[bytes], nbytes: int) -> None:
        """Queue whole frames (``nbytes`` is their total length)."""
        self.parts.extend(frames)
        self.nbytes += nbytes

    def take(self) -> bytes:
        """Everything queued, as one bytes object; the outbox is then empty."""
        parts = self.parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        self.nbytes = 0
        return data

    def take_publishes(self) -> list[bytes]:
        """The PUB and HPUB frames queued, each whole and in order; the rest (SUB,
        UNSUB, PING ... which belong to this connection) is dropped, and the outbox is
        then empty."""
        parts = self.parts
        frames: list[bytes] = []
        i, n = 0, len(parts)
        while i < n:
            part = parts[i]
            if part.startswith(_PUB) and part.endswith(b" "):
                # A fast-path publish: prefix, [reply, b" "], size line, payload, CRLF.
                j = i + 1
                if not parts[j].endswith(_CRLF):
                    j += 2  # the reply subject and its space
                end = j + 3
                frames.append(b"".join(parts[i:end]))
                i = end
                continue
            if part.startswith((_PUB, _HPUB)):
                frames.append(part)
            i += 1
        parts.clear()
        self.nbytes = 0
        return frames
