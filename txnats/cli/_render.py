"""How the JetStream commands print: tables, label/value columns, sizes, durations,
times, JSON for scripts, and a message's headers and data."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, Any

from txnats.protocol.headers import Headers

__all__ = [
    "ago",
    "columns",
    "data_text",
    "headers_dict",
    "human_bytes",
    "human_count",
    "human_seconds",
    "limit",
    "print_json",
    "stdout_bytes",
    "table",
    "when",
]


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON (datetimes as ISO 8601, bytes as base64)."""
    print(json.dumps(value, indent=2, default=_json_default), flush=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def table(head: Sequence[str], rows: Iterable[Sequence[object]], right: Iterable[int] = ()) -> str:
    """A plain table: a header, a rule, the rows; columns ``right`` aligned right."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in [list(head), *cells]) for i in range(len(head))]
    to_right = set(right)

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(widths[i]) if i in to_right else c.ljust(widths[i]) for i, c in enumerate(row)
        ).rstrip()

    return "\n".join([line(head), "  ".join("-" * w for w in widths), *(line(r) for r in cells)])


def columns(title: str, rows: Iterable[tuple[str, object] | None]) -> str:
    """A title, then ``label: value`` lines with the labels aligned; a row of None is
    left out, a row with an empty label starts a new section named by its value."""
    kept = [r for r in rows if r is not None]
    width = max((len(label) for label, _ in kept if label), default=0)
    out = [title]
    for label, value in kept:
        if not label:
            out += ["", f"{value}:"]
        else:
            shown = str(value).lower() if isinstance(value, bool) else value
            out.append(f"  {label.rjust(width)}: {shown}")
    return "\n".join(out)


def human_bytes(n: float) -> str:
    """Bytes for people, in powers of 1024: ``512 B``, ``1.5 KiB``, ``3.0 GiB``."""
    if n < 0:
        return "unlimited"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_count(n: int) -> str:
    """A count with thousands separators."""
    return f"{n:,}"


def limit(n: int | float | None, show: Any = human_count) -> str:
    """A limit: ``unlimited`` for None, 0 or -1, else ``show(n)``."""
    if n is None or n <= 0:
        return "unlimited"
    return str(show(n))


def human_seconds(seconds: float | None) -> str:
    """A duration for people: ``1d2h3m4s``, ``1.5s``, ``250ms``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms" if seconds else "0s"
    whole = int(seconds)
    if seconds < 60 and seconds != whole:
        return f"{seconds:.2f}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts)


def when(t: datetime | None) -> str:
    """A time as ``2024-05-01 12:00:00 UTC``; ``-`` for none (or the zero time)."""
    if t is None or t.year <= 1:
        return "-"
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(t: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``t`` was (``3m12s ago``); ``never`` for none."""
    if t is None or t.year <= 1:
        return "never"
    gone = ((now or datetime.now(UTC)) - t).total_seconds()
    return human_seconds(max(0.0, round(gone))) + " ago"


def headers_dict(headers: Headers | None) -> dict[str, list[str]]:
    """A message's headers as name -> values (empty without headers)."""
    out: dict[str, list[str]] = {}
    if headers is not None:
        for name, value in headers.multi_items():
            out.setdefault(name, []).append(value)
    return out


def data_text(data: bytes, width: int | None = None) -> str:
    """A message's data to print: as text if it is UTF-8 without control characters
    (tabs and newlines allowed), else base64; cut to ``width`` characters if given."""
    try:
        text = data.decode()
        printable = all(c.isprintable() or c in "\t\r\n" for c in text)
    except UnicodeDecodeError:
        printable = False
    if not printable:
        text = base64.b64encode(data).decode()
    if width is not None and len(text) > width:
        text = text[:width] + "..."
    return text


def stdout_bytes() -> IO[bytes]:
    """Standard output for bytes."""
    return sys.stdout.buffer
