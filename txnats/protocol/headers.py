"""Message headers (ADR-4): multi-valued, case-preserving, order-keeping.

The wire form is a header block::

    NATS/1.0[ <status>[ <description>]]\\r\\n
    Name: value\\r\\n
    ...
    \\r\\n

:class:`Headers` behaves as a mapping from a name to its *first* value, with
:meth:`Headers.get_all`, :meth:`Headers.add` and :meth:`Headers.multi_items` for the rest.
Lookups are case-sensitive, as in nats.go and the ADR.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Union

from txnats.errors import BadHeaderError, ProtocolError

__all__ = ["HeaderInput", "Headers", "encode_headers", "parse_headers", "salvage_headers"]

HEADER_LINE = b"NATS/1.0"
_HEADER_LINE_STR = "NATS/1.0"

#: What ``publish(headers=...)`` accepts: a :class:`Headers`, or a mapping whose values
#: are a string or a sequence of strings (one header line per value).
HeaderInput = Union["Headers", Mapping[str, str | Sequence[str]]]


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise BadHeaderError(f"header name must be a non-empty str, not {name!r}")
    for ch in name:
        o = ord(ch)
        if o < 33 or o > 126 or ch == ":":
            raise BadHeaderError(
                f"header name {name!r} may only hold printable ASCII other than ':'"
            )


def _values(name: str, value: object) -> Iterable[str]:
    """The values a mapping entry stands for: a str, or a sequence of str."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise BadHeaderError(
            f"value of header {name!r} must be a str or a sequence of str, "
            f"not {type(value).__name__}"
        )
    return value


def _check_value(name: str, value: str) -> None:
    if not isinstance(value, str):
        raise BadHeaderError(f"value of header {name!r} must be a str, not {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise BadHeaderError(f"value of header {name!r} contains CR or LF")
    if not value.isascii():
        try:
            value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise BadHeaderError(f"value of header {name!r} cannot be encoded") from None


class Headers(MutableMapping[str, str]):
    """An ordered multi-map of header names to values, plus an optional status line.

    ``headers["Name"]`` is the first value; assigning replaces every value of that name;
    ``del`` removes them all. ``status`` and ``description`` hold the inline status of
    the header line (``NATS/1.0 503``), which servers use for no-responders, heartbeats
    and JetStream pull results.

    ``raw`` is None, but for the headers of a received message whose header block could
    not be parsed (another client wrote it; the server relays header blocks unchecked):
    then it holds the block as received, the mapping is empty and ``status`` is None,
    and encoding these headers (publishing them again) sends ``raw`` unchanged, until a
    header is added.
    """

    __slots__ = ("_items", "description", "raw", "status")

    def __init__(
        self,
        items: Mapping[str, str | Sequence[str]] | Iterable[tuple[str, str]] | None = None,
        *,
        status: int | None = None,
        description: str | None = None,
        _checked: list[tuple[str, str]] | None = None,
    ) -> None:
        # (_checked: pairs this module's parser has checked already, taken as they are.)
        self._items: list[tuple[str, str]] = [] if _checked is None else _checked
        self.status = status
        self.description = description
        self.raw: bytes | None = None
        if items is None:
            return
        if isinstance(items, Headers):
            self._items = items.multi_items()
            self.raw = items.raw
            if status is None:
                self.status = items.status
                self.description = items.description
            return
        if isinstance(items, Mapping):
            for name, value in items.items():
                for v in _values(name, value):
                    self.add(name, v)
        else:
            for name, value in items:
                self.add(name, value)

    @classmethod
    def unparsed(cls, block: bytes) -> Headers:
        """Headers standing for a received header block that could not be parsed:
        empty, with ``raw`` holding ``block``."""
        h = cls()
        h.raw = block
        return h

    # Mapping protocol -------------------------------------------------------------
    def __getitem__(self, name: str) -> str:
        for k, v in self._items:
            if k == name:
                return v
        raise KeyError(name)

    def __setitem__(self, name: str, value: str) -> None:
        _check_name(name)
        _check_value(name, value)
        items = self._items
        for i, (k, _) in enumerate(items):
            if k == name:
                items[i] = (name, value)
                self._items = [it for j, it in enumerate(items) if j <= i or it[0] != name]
                return
        items.append((name, value))

    def __delitem__(self, name: str) -> None:
        before = len(self._items)
        self._items = [it for it in self._items if it[0] != name]
        if len(self._items) == before:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for k, _ in self._items:
            if k not in seen:
                seen.add(k)
                yield k

    def __len__(self) -> int:
        return len({k for k, _ in self._items})

    def __contains__(self, name: object) -> bool:
        return any(k == name for k, _ in self._items)

    # Multi-value -------------------------------------------------------------------
    def add(self, name: str, value: str) -> None:
        """Append one more value for ``name``, keeping existing ones."""
        _check_name(name)
        _check_value(name, value)
        self._items.append((name, value))

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name`` in the order received (empty list if absent)."""
        return [v for k, v in self._items if k == name]

    def multi_items(self) -> list[tuple[str, str]]:
        """Every ``(name, value)`` pair in order, repeated names included."""
        return list(self._items)

    def copy(self) -> Headers:
        """A new Headers with the same pairs, status line and ``raw`` block; changing
        one leaves the other as it was."""
        return Headers(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return (
                self._items == other.multi_items()
                and self.status == other.status
                and self.description == other.description
                and self.raw == other.raw
            )
        if isinstance(other, Mapping):
            try:
                return self.status is None and self == Headers(other)
            except BadHeaderError:
                return False  # could never be equal to a valid Headers
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        status = "" if self.status is None else f", status={self.status}"
        if self.raw is not None:
            raw = self.raw if len(self.raw) <= 64 else self.raw[:64] + b"..."
            return f"Headers(raw={raw!r})"
        return f"Headers({self._items!r}{status})"


def encode_headers(headers: HeaderInput) -> bytes:
    """Encode a header block, validating every name and value.

    Raises :class:`~txnats.errors.BadHeaderError` for a name or value that cannot be
    carried; nothing is returned in that case.
    """
    if isinstance(headers, Headers):
        if headers.raw is not None and not headers and headers.status is None:
            return headers.raw  # relayed as it came, as the server relays it
        pairs: Iterable[tuple[str, str]] = headers.multi_items()
        first = _HEADER_LINE_STR
        if headers.status is not None:
            status = int(headers.status)
            if not 0 <= status <= 999:
                raise BadHeaderError(f"status {status} does not fit in three digits")
            first = f"{first} {status:03d}"
            if headers.description:
                _check_value("description", headers.description)
                first = f"{first} {headers.description}"
    else:
        if not isinstance(headers, Mapping):
            raise BadHeaderError(
                "headers must be a txnats.Headers or a mapping of names to values, "
                f"not {type(headers).__name__}"
            )
        first = _HEADER_LINE_STR
        flat: list[tuple[str, str]] = []
        for name, value in headers.items():
            _check_name(name)
            for v in _values(name, value):
                _check_value(name, v)
                flat.append((name, v))
        pairs = flat
    parts = [first]
    for name, value in pairs:
        parts.append(f"{name}: {value}")
    parts.append("\r\n")
    # surrogateescape: values parse_headers decoded that way re-encode unchanged.
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


def parse_headers(block: bytes) -> Headers:
    """Parse a header block received in ``HMSG``; raise ``ProtocolError`` if malformed."""
    if not block.startswith(HEADER_LINE) or not block.endswith(b"\r\n\r\n"):
        raise ProtocolError("malformed header block: bad version line or terminator")
    try:
        text = block[:-4].decode("utf-8")
    except UnicodeDecodeError:
        text = block[:-4].decode("utf-8", "surrogateescape")
    lines = text.split("\r\n")
    first = lines[0]
    status: int | None = None
    description: str | None = None
    if "\r" in first or "\n" in first:
        raise ProtocolError("bare CR or LF in header block")
    rest = first[len(_HEADER_LINE_STR):]
    if rest:
        if rest[0] not in " \t":
            raise ProtocolError(f"malformed header version line {first!r}")
        rest = rest.strip()
        if rest:
            code, _, desc = rest.partition(" ")
            if len(code) != 3 or not code.isdigit() or not code.isascii():
                raise ProtocolError(f"malformed status in header line {first!r}")
            status = int(code)
            description = desc.strip() or None
    items: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name:
            raise ProtocolError(f"malformed header line {line!r}")
        if "\r" in line or "\n" in line:
            raise ProtocolError("bare CR or LF in header block")
        for ch in name:
            o = ord(ch)
            if o < 33 or o > 126:
                raise ProtocolError(f"malformed header name {name!r}")
        items.append((name, value.strip(" \t")))
    return Headers(status=status, description=description, _checked=items)


def salvage_headers(block: bytes) -> Headers:
    """The well-formed ``Name: value`` lines of a header block that does not parse as a
    whole, the rest skipped: for reading the server's own headers (Direct Get's
    ``Nats-*``) out of a block where it joined them to a publisher's malformed ones."""
    items: list[tuple[str, str]] = []
    text = block.decode("utf-8", "surrogateescape")
    for line in text.split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name and all(33 <= ord(ch) <= 126 for ch in name) and "\n" not in line:
            items.append((name, value.strip(" \t")))
    return Headers(_checked=items)
