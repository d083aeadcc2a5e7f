"""What the JetStream modules share: name checks, API errors, publish acknowledgements
(:class:`PubAck` lives in :mod:`txnats.jetstream.config`, importable here too),
stored messages and the headers of a publish.

The bottom layer of ``txnats.jetstream``: of its sibling modules it imports only the
typed records (:mod:`txnats.jetstream.config`) and the message (:mod:`txnats.jetstream.msg`),
so the context, the consumers and the stores can all build on it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats._turns import call_user
from txnats.errors import (
    API_ERRORS,
    APIError,
    BucketNotFoundError,
    ConsumerNotFoundError,
    InvalidArgumentError,
    JetStreamError,
    MsgNotFoundError,
    NatsError,
    ProtocolError,
    StreamNotFoundError,
)
from txnats.jetstream.config import PubAck
from txnats.jetstream.msg import whole_number
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput, Headers, parse_headers, salvage_headers
from txnats.request import REPLY_ROOM

if TYPE_CHECKING:
    from txnats.client import Client

__all__ = [
    "MAX_NAME_BYTES",
    "PubAck",
    "RawStreamMsg",
    "answer_value",
    "api_error",
    "bucket_not_found",
    "check_name",
    "check_publish_args",
    "consumer_gone",
    "headers_for",
    "parse_pub_ack",
    "raw_from_direct",
    "raw_from_json",
    "report",
    "shown",
    "subject_room",
]

_FORBIDDEN_IN_NAMES = frozenset(" \t\r\n.*>/\\")

#: The longest stream or consumer name the server takes, in bytes (its JSMaxNameLen).
MAX_NAME_BYTES = 255


def shown(text: str, keep: int = 40) -> str:
    """``text`` quoted, cut to its first ``keep`` characters if longer (for errors about
    names and keys too long to print whole)."""
    return repr(text) if len(text) <= keep else f"{text[:keep]!r}... ({len(text)} characters)"


def check_name(kind: str, name: object) -> str:
    """Validate a stream, consumer or bucket name (ADR-6, and at most
    :data:`MAX_NAME_BYTES` bytes); return it."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{kind} name must be a non-empty string, not {name!r}")
    if any(c in _FORBIDDEN_IN_NAMES for c in name) or not name.isprintable():
        raise InvalidArgumentError(
            f"{kind} name {shown(name)} must not contain whitespace, '.', '*', '>', '/' or '\\'"
        )
    size = len(name.encode())
    if size > MAX_NAME_BYTES:
        raise InvalidArgumentError(
            f"{kind} name {shown(name)} is {size} bytes: the server takes at most"
            f" {MAX_NAME_BYTES}"
        )
    return name


def report(client: Client, error: NatsError) -> None:
    """Hand ``error`` to ``client``'s ``error_cb`` in its next batch of work, as the
    client reports its own asynchronous errors (for what a reader skips: it goes on)."""
    client.schedule(call_user, "error", client.options.error_cb, error)


def subject_room(client: Client) -> int:
    """The longest subject, in bytes, of a request on ``client`` (a JetStream publish,
    an API call): its ``max_control_line`` less what the request adds to the line (the
    reply inbox, the sizes and the spaces between them)."""
    return client.max_control_line - REPLY_ROOM - len(client.options.inbox_prefix)


V = TypeVar("V")


def answer_value(resp: Mapping[str, Any], key: str, kind: type[V], default: V) -> V:
    """``resp[key]`` if it is a ``kind`` (a ``bool`` is no ``int`` here), else
    ``default``: an API answer is relayed bytes (a foreign responder on ``$JS.API.>``
    may write anything), and what reads it must meet only the types it expects."""
    v = resp.get(key, default)
    if isinstance(v, kind) and (kind is bool or not isinstance(v, bool)):
        return v
    return default


def api_error(resp: Mapping[str, Any]) -> APIError:
    """The exception for a JetStream API error object ``{code, err_code, description}``
    (a malformed one gives a plain :class:`APIError` saying so)."""
    err = resp.get("error")
    if not isinstance(err, Mapping):
        return APIError(f"malformed JetStream API error {str(err)[:64]!r}", 0, 0)
    err_code = answer_value(err, "err_code", int, 0)
    cls = API_ERRORS.get(err_code, APIError)
    description = err.get("description", "unknown error")
    return cls(str(description)[:1024], answer_value(err, "code", int, 0), err_code)


def bucket_not_found(what: str) -> Callable[[Failure], Failure]:
    """An errback turning :class:`StreamNotFoundError` into :class:`BucketNotFoundError`
    (``no <what>``), for the stores whose buckets are streams."""

    def errback(f: Failure) -> Failure:
        if f.check(StreamNotFoundError):
            err = BucketNotFoundError(f"no {what}")
            err.__cause__ = f.value
            return Failure(err)
        return f

    return errback


@dataclass(frozen=True, slots=True)
class RawStreamMsg:
    """A message read from a stream by sequence or by subject."""

    subject: str
    seq: int
    data: bytes
    headers: Headers | None
    #: The stored time as the server wrote it (RFC 3339), or "" if not given.
    time: str = ""


#: The common acknowledgement, parsed without the JSON decoder (which costs four times
#: as much): a stream name (no quote, no backslash) and a sequence, nothing else.
_PLAIN_ACK = re.compile(rb'\{"stream":"([^"\\]+)","seq":(\d+)\}')


def parse_pub_ack(msg: Msg) -> PubAck:
    """A publish acknowledgement; :class:`JetStreamError` if malformed, the matching
    :class:`APIError` if the stream refused the message."""
    m = _PLAIN_ACK.fullmatch(msg.data)
    if m is not None:
        return PubAck(m[1].decode(), int(m[2]))
    try:
        resp = json.loads(msg.data)
    except (ValueError, RecursionError):  # (RecursionError: nesting past Python's stack)
        raise JetStreamError(f"malformed publish acknowledgement {msg.data[:64]!r}") from None
    if not isinstance(resp, dict):
        raise JetStreamError(f"malformed publish acknowledgement {msg.data[:64]!r}")
    if "error" in resp:
        raise api_error(resp)
    try:
        return PubAck(
            resp["stream"], int(resp["seq"]), bool(resp.get("duplicate", False)),
            resp.get("domain") or "",
        )
    except (KeyError, TypeError, ValueError):
        raise JetStreamError(f"malformed publish acknowledgement {msg.data[:64]!r}") from None


def headers_for(
    headers: HeaderInput | None,
    msg_id: str | None,
    expected_stream: str | None,
    expected_last_seq: int | None,
    expected_last_subject_seq: int | None,
    expected_last_msg_id: str | None,
    ttl: float | None,
) -> HeaderInput | None:
    """The headers of a publish; its numbers were checked by :func:`check_publish_args`."""
    if (
        msg_id is None and expected_stream is None and expected_last_seq is None
        and expected_last_subject_seq is None and expected_last_msg_id is None and ttl is None
    ):
        return headers
    h = Headers(headers) if headers is not None else Headers()
    if msg_id is not None:
        h["Nats-Msg-Id"] = msg_id
    if expected_stream is not None:
        h["Nats-Expected-Stream"] = expected_stream
    if expected_last_seq is not None:
        h["Nats-Expected-Last-Sequence"] = str(expected_last_seq)
    if expected_last_subject_seq is not None:
        h["Nats-Expected-Last-Subject-Sequence"] = str(expected_last_subject_seq)
    if expected_last_msg_id is not None:
        h["Nats-Expected-Last-Msg-Id"] = expected_last_msg_id
    if ttl is not None:
        h["Nats-TTL"] = f"{int(ttl)}s" if ttl == int(ttl) else f"{int(ttl * 1000)}ms"
    return h


def check_publish_args(
    expected_last_seq: int | None, expected_last_subject_seq: int | None, ttl: float | None,
) -> None:
    """Check the numbers ``publish`` and ``publish_async`` share, before any header is
    built or anything sent.

    :raises InvalidArgumentError: an expected sequence that is not a whole number >= 0
        (0: nothing stored yet), or a ``ttl`` that is not a finite number of seconds of
        at least 1 (the server's minimum).
    """
    if expected_last_seq is not None:
        check_count("expected_last_seq", expected_last_seq, minimum=0)
    if expected_last_subject_seq is not None:
        check_count("expected_last_subject_seq", expected_last_subject_seq, minimum=0)
    if ttl is not None:
        check_timeout("ttl", ttl)
        if ttl < 1:
            raise InvalidArgumentError(
                f"ttl must be at least 1 second (the server's minimum), not {ttl!r}"
            )



def stored_headers(block: bytes) -> Headers:
    """A stored message's header block, parsed; one that does not parse (its publisher
    wrote it so) is :meth:`Headers.unparsed`, as the client delivers such a block."""
    try:
        return parse_headers(block)
    except ProtocolError:
        return Headers.unparsed(block)


def raw_from_json(resp: dict[str, Any]) -> RawStreamMsg:
    """A ``STREAM.MSG.GET`` answer as a :class:`RawStreamMsg`."""
    m = answer_value(resp, "message", dict, {})
    try:
        hdrs = m.get("hdrs")
        data = m.get("data")
        return RawStreamMsg(
            subject=m["subject"],
            seq=int(m["seq"]),
            data=base64.b64decode(data) if data else b"",
            headers=stored_headers(base64.b64decode(hdrs)) if hdrs else None,
            time=m.get("time", ""),
        )
    except (KeyError, TypeError, ValueError, NatsError):
        raise JetStreamError(f"malformed stored message {str(m)[:64]!r}") from None


def raw_from_direct(msg: Msg) -> RawStreamMsg:
    """A Direct Get answer as a :class:`RawStreamMsg` (404 -> :class:`MsgNotFoundError`)."""
    h = msg.headers
    if h is None:
        raise JetStreamError("Direct Get answer without headers")
    if h.status is not None:
        if h.status == 404:
            raise MsgNotFoundError(h.description or "no message found", 404, 10037)
        raise APIError(h.description or "Direct Get failed", h.status, 0)
    # A stored block that does not parse comes back with the server's lines joined to
    # it: read those from it, and give the block as it came (unparsed).
    fields = h if h.raw is None else salvage_headers(h.raw)
    subject, seq = fields.get("Nats-Subject"), whole_number(fields.get("Nats-Sequence"))
    if not subject or seq is None:
        raise JetStreamError("Direct Get answer lacks Nats-Subject/Nats-Sequence")
    return RawStreamMsg(
        subject=subject, seq=seq, data=msg.data, headers=h,
        time=fields.get("Nats-Time-Stamp", ""),
    )


def consumer_gone(
    info: Deferred[Any], stream: str, consumer: str, reader: str
) -> Deferred[ConsumerNotFoundError | None]:
    """Read a consumer-info answer for a reader that heard nothing (or no responders):
    fires with the :class:`ConsumerNotFoundError` that should end ``reader`` if the
    consumer or its stream no longer exists, else with ``None`` (it exists, or the
    answer says nothing either way, such as a timeout while no leader is elected)."""

    def missing(f: Failure) -> ConsumerNotFoundError | None:
        gone = f.check(ConsumerNotFoundError, StreamNotFoundError)
        if gone is None:
            return None
        what = "consumer" if gone is ConsumerNotFoundError else "stream"
        return ConsumerNotFoundError(
            f"{reader} {stream}/{consumer} ended: the {what} no longer exists",
            404, ConsumerNotFoundError.ERR_CODE,
        )

    return info.addCallbacks(lambda _: None, missing)

