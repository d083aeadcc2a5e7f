"""Pure encoders for client -> server commands, and subject validation.

Every encoder validates what it is given and raises before returning anything, so an
invalid subject, queue or header never produces a byte on the wire.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from txnats.errors import BadSubjectError, ControlLineTooLongError
from txnats.protocol.headers import HeaderInput, encode_headers

__all__ = [
    "PING",
    "PONG",
    "check_control_line",
    "control_line_length",
    "encode_connect",
    "encode_hpub",
    "encode_pub",
    "encode_sub",
    "encode_unsub",
    "pub_frame",
    "pub_prefix",
    "publish_subject",
    "queue_name",
    "reply_subject",
    "shorten",
    "split_frames",
    "subscribe_subject",
]

PING = b"PING\r\n"
PONG = b"PONG\r\n"

# Characters that would split or end a control line (the server splits on space and tab;
# our own parser on every ASCII whitespace), plus NUL.
_BAD = re.compile(r"[ \t\r\n\x0b\x0c\x00]")
_CACHE_MAX = 4096
#: Only subjects of at most this many bytes are cached: ``publish()``'s fast path takes
#: only cached (or as short) subjects, and so needs no check of the control line's
#: length as long as the client's limit is at least :data:`FAST_PREFIX_MAX`.
CACHED_SUBJECT_MAX = 1000
#: The longest ``b"PUB <subject> "`` the fast path takes. Its control line without a
#: reply subject (subject, space, at most 4 size digits) is never longer than this.
FAST_PREFIX_MAX = len(b"PUB ") + CACHED_SUBJECT_MAX + 1
# Validated subjects. To publish: subject -> (b"PUB <subject> ", its length), the start
# of every PUB frame to it (the subject's bytes are [4:-1]). To subscribe: its bytes.
_pub_cache: dict[str, tuple[bytes, int]] = {}
_sub_cache: dict[str, bytes] = {}

#: ``SIZE_TAILS[n] == (b"%d\r\n" % n, len(b"%d\r\n" % n) + n + 2)``: the end of a PUB
#: control line for a payload of ``n`` bytes, and how many bytes the frame has after its
#: prefix; prebuilt for small payloads (formatting is most of the cost of a frame).
SIZE_TAILS: tuple[tuple[bytes, int], ...] = tuple(
    (b"%d\r\n" % n, len(b"%d\r\n" % n) + n + 2) for n in range(1024)
)


def _check(kind: str, subject: object, wildcards: bool) -> bytes:
    # Fast path: a plain subject with no wildcard characters at all.
    if (
        type(subject) is str
        and subject
        and subject[0] != "."
        and subject[-1] != "."
        and ".." not in subject
        and "*" not in subject
        and ">" not in subject
        and not _BAD.search(subject)
    ):
        try:
            return subject.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            pass  # the slow path says why
    return _check_tokens(kind, subject, wildcards)


def _check_tokens(kind: str, subject: object, wildcards: bool) -> bytes:
    if not isinstance(subject, str):
        raise BadSubjectError(f"{kind} must be a str, not {type(subject).__name__}")
    if not subject:
        raise BadSubjectError(f"{kind} must not be empty")
    if _BAD.search(subject):
        raise BadSubjectError(f"{kind} {subject!r} contains whitespace, CR, LF or NUL")
    tokens = subject.split(".")
    last = len(tokens) - 1
    for i, tok in enumerate(tokens):
        if not tok:
            raise BadSubjectError(f"{kind} {subject!r} has an empty token")
        if tok == "*" or tok == ">":
            if not wildcards:
                raise BadSubjectError(f"{kind} {subject!r} must not contain wildcards")
            if tok == ">" and i != last:
                raise BadSubjectError(f"{kind} {subject!r}: '>' must be the last token")
    try:
        return subject.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise BadSubjectError(f"{kind} {subject!r} cannot be encoded") from None


def publish_subject(subject: str) -> bytes:
    """Validate a subject to publish to (no wildcards) and return its wire bytes."""
    return pub_prefix(subject)[0][4:-1]


def pub_prefix(subject: str) -> tuple[bytes, int]:
    """Validate a subject to publish to; return ``b"PUB <subject> "`` and its length
    (cached)."""
    if type(subject) is not str:  # may be unhashable; never cached
        prefix = b"PUB %s " % _check("subject", subject, False)
        return prefix, len(prefix)
    entry = _pub_cache.get(subject)
    if entry is None:
        prefix = b"PUB %s " % _check("subject", subject, False)
        entry = (prefix, len(prefix))
        # A full cache keeps what it has: subjects seen first tend to be the hot ones,
        # and one-off subjects (reply inboxes) must not push them out.
        if len(_pub_cache) < _CACHE_MAX and len(prefix) <= FAST_PREFIX_MAX:
            _pub_cache[subject] = entry
    return entry


def reply_subject(subject: str) -> bytes:
    """Validate a reply subject (no wildcards) and return its wire bytes (not cached)."""
    return _check("reply subject", subject, False)


def subscribe_subject(subject: str) -> bytes:
    """Validate a subscription subject (``*`` and a final ``>`` allowed)."""
    if type(subject) is not str:  # may be unhashable; never cached
        return _check("subject", subject, True)
    b = _sub_cache.get(subject)
    if b is None:
        b = _check("subject", subject, True)
        if len(_sub_cache) < _CACHE_MAX and len(b) <= CACHED_SUBJECT_MAX:
            _sub_cache[subject] = b
    return b


def queue_name(queue: str) -> bytes:
    """Validate a queue group name and return its wire bytes."""
    if not isinstance(queue, str):
        raise BadSubjectError(f"queue group must be a str, not {type(queue).__name__}")
    if not queue:
        raise BadSubjectError("queue group must not be empty")
    if _BAD.search(queue):
        raise BadSubjectError(f"queue group {queue!r} contains whitespace, CR, LF or NUL")
    try:
        return queue.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise BadSubjectError(f"queue group {queue!r} cannot be encoded") from None


def encode_connect(options: Mapping[str, Any]) -> bytes:
    """``CONNECT {json}``; options are sent as given (the caller builds them)."""
    return b"CONNECT " + json.dumps(dict(options), separators=(",", ":")).encode() + b"\r\n"


def pub_frame(
    subj: bytes, payload: bytes, reply: bytes | None = None, header_block: bytes | None = None
) -> tuple[bytes, int]:
    """PUB (or, with a header block, HPUB) from parts already checked: the subject's
    and reply's wire bytes, the payload, the encoded headers. Returns the frame and the
    message's size (headers included), which ``max_payload`` limits.

    Every PUB and HPUB the client sends is built here, but for ``publish()``'s hot path,
    which queues a frame's parts from :func:`pub_prefix` and :data:`SIZE_TAILS` as they
    are (the same bytes, without joining them).
    """
    n = len(payload)
    if header_block is None:
        if reply is None:
            return b"PUB %s %d\r\n%s\r\n" % (subj, n, payload), n
        return b"PUB %s %s %d\r\n%s\r\n" % (subj, reply, n, payload), n
    hl = len(header_block)
    total = hl + n
    if reply is None:
        return b"HPUB %s %d %d\r\n%s%s\r\n" % (subj, hl, total, header_block, payload), total
    return (
        b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subj, reply, hl, total, header_block, payload),
        total,
    )


def encode_pub(subject: str, payload: bytes = b"", reply: str | None = None) -> bytes:
    """``PUB <subject> [reply] <size>\\r\\n<payload>\\r\\n``, checking the subjects."""
    rep = None if reply is None else reply_subject(reply)
    return pub_frame(publish_subject(subject), payload, rep)[0]


def encode_hpub(
    subject: str, payload: bytes, headers: HeaderInput | bytes, reply: str | None = None
) -> bytes:
    """``HPUB <subject> [reply] <hdr size> <total size>\\r\\n<headers><payload>\\r\\n``.

    ``headers`` may be an already encoded header block (bytes).
    """
    rep = None if reply is None else reply_subject(reply)
    hdr = headers if isinstance(headers, bytes) else encode_headers(headers)
    return pub_frame(publish_subject(subject), payload, rep, hdr)[0]


def encode_sub(
    subject: str, sid: int, queue: str | None = None, max_line: int | None = None
) -> bytes:
    """``SUB <subject> [queue] <sid>``.

    :param max_line: the server's ``max_control_line``, in bytes (None: not checked).
    :raises BadSubjectError: a bad subject or queue group name.
    :raises ControlLineTooLongError: the line would be longer than ``max_line``.
    """
    subj = subscribe_subject(subject)
    if queue is None:
        frame = b"SUB %s %d\r\n" % (subj, sid)
    else:
        frame = b"SUB %s %s %d\r\n" % (subj, queue_name(queue), sid)
    if max_line is not None and len(frame) - 6 > max_line:  # (b"SUB " and CRLF)
        check_control_line(frame, max_line, "subscribe " + shorten(subject))
    return frame


def encode_unsub(sid: int, max_msgs: int | None = None) -> bytes:
    """``UNSUB <sid> [max_msgs]``."""
    if max_msgs is None:
        return b"UNSUB %d\r\n" % sid
    return b"UNSUB %d %d\r\n" % (sid, max_msgs)


def control_line_length(frame: bytes) -> int:
    """The length nats-server's ``max_control_line`` limits in a frame the encoders here
    wrote: the bytes after the operation name and its space, up to the CRLF (the
    subject, reply subject or queue group, sid and sizes)."""
    eol = frame.find(b"\r\n")
    if eol < 0:
        eol = len(frame)
    return eol - frame.find(b" ") - 1


def check_control_line(frame: bytes, limit: int, what: str) -> None:
    """Raise :class:`ControlLineTooLongError` if ``frame``'s control line is longer
    than ``limit`` bytes (see :func:`control_line_length`); ``what`` names the subject
    (or other argument) in the message, shortened."""
    n = control_line_length(frame)
    if n > limit:
        raise ControlLineTooLongError(
            f"{what}: the control line would be {n} bytes, over the server's "
            f"max_control_line of {limit} bytes (the max_control_line connect option; "
            "nats-server closes a connection that sends a longer one)",
            length=n,
            limit=limit,
        )


def shorten(text: str, keep: int = 48) -> str:
    """``text`` for an error message: at most ``keep`` characters and its length."""
    if len(text) <= keep:
        return repr(text)
    return f"{text[:keep]!r}... ({len(text)} characters)"


def split_frames(data: bytes) -> list[bytes]:
    """Cut a stream of client -> server commands, as the encoders here write them, back
    into whole frames (a PUB/HPUB frame with its payload)."""
    frames: list[bytes] = []
    pos = 0
    n = len(data)
    while pos < n:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            raise ValueError(f"unterminated command at byte {pos}")
        end = eol + 2
        if data.startswith((b"PUB ", b"HPUB "), pos):
            end += int(data[pos:eol].rsplit(b" ", 1)[1]) + 2
            if end > n:
                raise ValueError(f"truncated payload at byte {pos}")
        frames.append(data[pos:end])
        pos = end
    return frames
