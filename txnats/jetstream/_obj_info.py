"""An object's metadata as ADR-20 lays it out (:class:`ObjectInfo`, :class:`ObjectLink`),
a bucket's status (:class:`ObjectStoreStatus`), and the checks of names and metadata.

What the object store (:mod:`txnats.jetstream.object_store`), its watcher and its
streaming readers and writers share; it imports none of them.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from txnats.errors import InvalidArgumentError, ObjectStoreError
from txnats.jetstream.config import StreamInfo
from txnats.protocol.headers import HeaderInput, Headers

__all__ = [
    "ObjectInfo",
    "ObjectLink",
    "ObjectStoreStatus",
    "check_bucket",
    "encode_name",
    "headers_dict",
    "metadata_dict",
    "parse_time",
]

_BUCKET_RE = re.compile(r"[A-Za-z0-9_-]+")
#: The longest bucket name: its stream's, ``OBJ_<bucket>``, is at most 255 bytes.
MAX_BUCKET = 255 - len("OBJ_")
#: What nats.go writes for ``mtime`` (Go's zero time): the time is never stored.
_ZERO_TIME = "0001-01-01T00:00:00Z"



def check_bucket(bucket: object) -> str:
    if not isinstance(bucket, str) or not _BUCKET_RE.fullmatch(bucket):
        raise InvalidArgumentError(
            f"object store bucket name must be 1 or more of A-Z, a-z, 0-9, '-', '_'; "
            f"not {bucket!r}"
        )
    if len(bucket) > MAX_BUCKET:
        raise InvalidArgumentError(
            f"object store bucket name {bucket[:40]!r}... ({len(bucket)} characters) is"
            f" too long: at most {MAX_BUCKET} (its stream OBJ_<bucket> is a name of at"
            " most 255 bytes)"
        )
    return bucket


def encode_name(name: object) -> str:
    """The meta subject's last token for object ``name``; raises on a bad name."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"object name must be a non-empty string, not {name!r}")
    try:
        raw = name.encode()
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"object name {name!r} is not valid Unicode") from None
    return base64.urlsafe_b64encode(raw).decode()


def parse_time(text: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def headers_dict(headers: HeaderInput | None) -> dict[str, list[str]]:
    """Headers as nats.go's ``Header`` JSON: every name to its list of values."""
    if not headers:
        return {}
    out: dict[str, list[str]] = {}
    for k, v in Headers(headers).multi_items():  # validates names and values
        out.setdefault(k, []).append(v)
    return out


def metadata_dict(metadata: Mapping[str, str] | None) -> dict[str, str]:
    if not metadata:
        return {}
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidArgumentError("object metadata must map strings to strings")
    return dict(metadata)


@dataclass(frozen=True, slots=True)
class ObjectLink:
    """Where a link points: an object (``name``) or, with ``name`` empty, a bucket."""

    bucket: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """An object's metadata: what its meta message holds, plus the time it was stored.

    ``size`` is in bytes, ``digest`` is ``SHA-256=<padded base64 URL>``; ``headers``
    maps each name to its values and ``metadata`` strings to strings. ``mtime`` is the
    time the server stored the meta message (on a put's result, our clock's "now").
    ``link`` is set on a link to another object or bucket.
    """

    name: str
    bucket: str
    nuid: str
    size: int = 0
    chunks: int = 0
    mtime: datetime | None = None
    digest: str = ""
    deleted: bool = False
    description: str | None = None
    headers: dict[str, list[str]] = field(default_factory=dict, hash=False)
    metadata: dict[str, str] = field(default_factory=dict, hash=False)
    max_chunk_size: int = 0
    link: ObjectLink | None = None

    @property
    def is_link(self) -> bool:
        return self.link is not None

    def to_json(self) -> bytes:
        """The meta message's payload (nats.go's layout; ``mtime`` is never stored)."""
        obj: dict[str, Any] = {"name": self.name}
        if self.description:
            obj["description"] = self.description
        if self.headers:
            obj["headers"] = self.headers
        if self.metadata:
            obj["metadata"] = self.metadata
        opts: dict[str, Any] = {}
        if self.link is not None:
            link: dict[str, str] = {"bucket": self.link.bucket}
            if self.link.name:
                link["name"] = self.link.name
            opts["link"] = link
        if self.max_chunk_size:
            opts["max_chunk_size"] = self.max_chunk_size
        if opts:
            obj["options"] = opts
        obj.update(
            bucket=self.bucket, nuid=self.nuid, size=self.size, mtime=_ZERO_TIME,
            chunks=self.chunks,
        )
        if self.digest:
            obj["digest"] = self.digest
        if self.deleted:
            obj["deleted"] = True
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, mtime: datetime | None = None) -> ObjectInfo:
        """Parse a meta message's payload; :class:`ObjectStoreError` if malformed."""
        try:
            obj = json.loads(data)
            if not isinstance(obj, dict):
                raise TypeError(type(obj))
            opts = obj.get("options") or {}
            link_obj = opts.get("link")
            link = None
            if link_obj:
                link = ObjectLink(
                    str(link_obj.get("bucket") or ""), str(link_obj.get("name") or "")
                )
            headers: dict[str, list[str]] = {}
            for k, v in (obj.get("headers") or {}).items():
                headers[str(k)] = [str(x) for x in v] if isinstance(v, list) else [str(v)]
            return cls(
                name=str(obj["name"]),
                bucket=str(obj.get("bucket") or ""),
                nuid=str(obj.get("nuid") or ""),
                size=int(obj.get("size") or 0),
                chunks=int(obj.get("chunks") or 0),
                mtime=mtime,
                digest=str(obj.get("digest") or ""),
                deleted=bool(obj.get("deleted", False)),
                description=str(obj.get("description") or "") or None,
                headers=headers,
                metadata={str(k): str(v) for k, v in (obj.get("metadata") or {}).items()},
                max_chunk_size=int(opts.get("max_chunk_size") or 0),
                link=link,
            )
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
            raise ObjectStoreError(f"malformed object metadata {bytes(data[:80])!r}") from None


@dataclass(frozen=True, slots=True)
class ObjectStoreStatus:
    """A bucket's configuration and state, from its stream's info."""

    bucket: str
    description: str | None
    #: Seconds an object is kept (0: for ever).
    ttl: float
    storage: str
    replicas: int
    sealed: bool
    #: Bytes stored, chunks and metadata together.
    size: int
    compressed: bool
    metadata: dict[str, str] = field(hash=False)
    #: The stream's info as the server sent it.
    stream_info: StreamInfo = field(hash=False, repr=False)
    backing_store: str = "JetStream"
