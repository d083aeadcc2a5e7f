"""A key-value entry, and how one is read from a stored message (ADR-8).

What the bucket (:mod:`txnats.jetstream.kv`) and its watcher
(:mod:`txnats.jetstream._kv_watch`) share; both import it, it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from txnats.protocol.headers import Headers

__all__ = [
    "DEL",
    "OP_HEADER",
    "PURGE",
    "PUT",
    "Entry",
    "operation",
    "parse_time",
    "time_from_ns",
]

#: The operations an :class:`Entry` stands for.
PUT: Final = "PUT"
DEL: Final = "DEL"
PURGE: Final = "PURGE"

#: The header saying what a key-value message is (a value if absent).
OP_HEADER: Final = "KV-Operation"
#: nats-server 2.11+ writes markers of its own (subject delete markers) with this header.
_MARKER_REASON = "Nats-Marker-Reason"


@dataclass(frozen=True, slots=True)
class Entry:
    """One value (or delete/purge marker) of a key."""

    bucket: str
    key: str
    #: Empty for a marker, and for entries of a ``meta_only`` watch.
    value: bytes
    #: The stream sequence of this value; unique in the bucket, increasing.
    revision: int
    #: When the stream stored it (UTC), or ``None`` if the server did not say.
    created: datetime | None
    #: How many newer messages follow it (in a watch or history: 0 for the latest).
    delta: int = 0
    #: ``"PUT"``, ``"DEL"`` or ``"PURGE"``.
    operation: str = PUT


def operation(headers: Headers | None) -> str:
    """What a stored message of a key is: ``PUT``, ``DEL`` or ``PURGE``."""
    if not headers:
        return PUT
    op = headers.get(OP_HEADER)
    if op == DEL or op == PURGE:
        return op
    reason = headers.get(_MARKER_REASON)
    if reason is not None:  # a marker the server wrote: "Remove" a delete, others a purge
        return DEL if reason == "Remove" else PURGE
    return PUT


def parse_time(stamp: str) -> datetime | None:
    """An RFC 3339 time as the server writes it (nanoseconds are cut to microseconds)."""
    if not stamp:
        return None
    try:
        head, sep, frac = stamp.partition(".")
        if sep:
            digits = len(frac) - len(frac.lstrip("0123456789"))
            stamp = f"{head}.{frac[:min(digits, 6)]}{frac[digits:]}"
        t = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def time_from_ns(ns: int) -> datetime | None:
    """Nanoseconds since the epoch as a UTC datetime (to the microsecond); ``None`` for
    one no datetime holds (past the year 9999: a timestamp the server would not write,
    but a delivery's reply subject is relayed bytes)."""
    seconds, rest = divmod(ns, 1_000_000_000)
    try:
        return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=rest // 1000)
    except (OverflowError, ValueError, OSError):
        return None
