"""Server frames as bytes, for tests that play the server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["INFO", "hmsg_frame", "info_line", "msg_frame"]

#: The INFO a fake server announces unless a test says otherwise.
INFO: dict[str, Any] = {
    "server_id": "NTEST",
    "version": "2.10.0",
    "proto": 1,
    "max_payload": 1048576,
    "headers": True,
}


def info_line(base: Mapping[str, Any] = INFO, /, **fields: Any) -> bytes:
    """An ``INFO`` frame: ``base`` (:data:`INFO` by default) with ``fields`` added or replaced."""
    return b"INFO " + json.dumps({**base, **fields}).encode() + b"\r\n"


def msg_frame(subject: str, sid: int, data: bytes = b"", reply: str | None = None) -> bytes:
    """A ``MSG`` frame for subscription ``sid``."""
    rep = b"" if reply is None else reply.encode() + b" "
    return b"MSG %s %d %s%d\r\n%s\r\n" % (subject.encode(), sid, rep, len(data), data)


def hmsg_frame(
    subject: str, sid: int, header_block: bytes, data: bytes = b"", reply: str | None = None
) -> bytes:
    """An ``HMSG`` frame for subscription ``sid``: ``header_block`` (``NATS/1.0 ...``)
    then ``data``."""
    rep = b"" if reply is None else reply.encode() + b" "
    return b"HMSG %s %d %s%d %d\r\n%s%s\r\n" % (
        subject.encode(), sid, rep, len(header_block), len(header_block) + len(data),
        header_block, data,
    )
