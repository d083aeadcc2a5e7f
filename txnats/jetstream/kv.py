"""The JetStream key-value store (ADR-8).

A bucket ``B`` is the stream ``KV_B`` taking the subjects ``$KV.B.>``; the key ``k`` is
the subject ``$KV.B.k`` and its revisions are the stream sequences of the messages on
it. The stream keeps ``history`` messages per subject. A delete is a message with the
header ``KV-Operation: DEL`` (history stays); a purge is ``KV-Operation: PURGE`` with
``Nats-Rollup: sub``, which makes the server drop every earlier message of the key.

Reads of one key use the Direct Get API when the stream allows it (every bucket created
here does); ``keys``, ``history`` and ``watch`` read through an ordered consumer.

Only the default subject prefix ``$KV.<bucket>`` is supported: binding through a
JetStream domain or an imported API prefix (ADR-19), mirrored and sourced buckets
(ADR-8 topologies) and per-key TTLs (ADR-48) are not implemented.

::

    kv = await js.create_key_value("config", history=5, ttl=3600)
    rev = await kv.put("db.host", b"10.0.0.7")
    entry = await kv.get("db.host")             # Entry(..., value=b"10.0.0.7", revision=rev)
    async with await kv.watch("db.>") as w:
        async for entry in w:                    # Entry, ..., None (initial values done), ...
            ...
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from txnats._args import check_count, check_delay
from txnats.errors import (
    APIError,
    InvalidArgumentError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValueError,
    MsgNotFoundError,
    NatsError,
)
from txnats.jetstream._api import PubAck, RawStreamMsg, bucket_not_found
from txnats.jetstream._kv_entry import (
    DEL,
    OP_HEADER,
    PURGE,
    PUT,
    Entry,
    operation,
    parse_time,
)
from txnats.jetstream._kv_watch import KeyWatcher
from txnats.jetstream.config import StreamConfig, StreamInfo

if TYPE_CHECKING:
    from txnats.jetstream.context import JetStreamContext

# PUT, DEL, PURGE, Entry and KeyWatcher live in _kv_entry and _kv_watch (so that the
# watcher needs nothing of this module at run time); they are part of this one's API.
__all__ = [
    "DEL",
    "MAX_HISTORY",
    "PURGE",
    "PUT",
    "Entry",
    "KeyValue",
    "KeyValueStatus",
    "KeyWatcher",
    "bucket_stream_config",
    "check_bucket",
    "check_key",
    "check_key_pattern",
]

#: The most values a bucket may keep per key.
MAX_HISTORY: Final = 64

_ROLLUP_HEADER = "Nats-Rollup"
#: A duplicate window never longer than this (seconds), as nats.go sets it.
_MAX_DUPLICATE_WINDOW = 120.0
#: The default age of the delete markers ``purge_deletes`` removes (seconds).
_PURGE_DELETES_OLDER_THAN = 30 * 60.0
#: err_codes of "wrong last sequence" (10071, and 10164 the constant form).
_WRONG_LAST_SEQUENCE = frozenset({10071, 10164})

_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")
_KEY_RE = re.compile(r"[-/_=.a-zA-Z0-9]+")
_KEY_TOKEN_RE = re.compile(r"[-/_=a-zA-Z0-9]+")


# ---------------------------------------------------------------------- validation
def check_bucket(bucket: object) -> str:
    """Return ``bucket`` if it is a valid bucket name (``[a-zA-Z0-9_-]+``), else raise
    :class:`InvalidArgumentError`."""
    if not isinstance(bucket, str) or not _BUCKET_RE.fullmatch(bucket):
        raise InvalidArgumentError(f"invalid bucket name {bucket!r}: use [a-zA-Z0-9_-]+")
    return bucket


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid key, else raise :class:`InvalidArgumentError`.

    A key is ``[-/_=.a-zA-Z0-9]+`` with no empty token: no leading, trailing or
    doubled ``.`` (ADR-8).
    """
    if (
        not isinstance(key, str) or not _KEY_RE.fullmatch(key)
        or key[0] == "." or key[-1] == "." or ".." in key
    ):
        raise InvalidArgumentError(
            f"invalid key {key!r}: use [-/_=.a-zA-Z0-9]+ without empty '.'-separated tokens"
        )
    return key


def check_key_pattern(pattern: object) -> str:
    """Return ``pattern`` if it is a valid key or key wildcard (``*`` for one token,
    ``>`` as the last token for the rest), else raise :class:`InvalidArgumentError`."""
    if isinstance(pattern, str) and pattern:
        tokens = pattern.split(".")
        last = len(tokens) - 1
        if all(
            t == "*" or (t == ">" and i == last) or _KEY_TOKEN_RE.fullmatch(t)
            for i, t in enumerate(tokens)
        ):
            return pattern
    raise InvalidArgumentError(
        f"invalid key pattern {pattern!r}: '.'-separated tokens of [-/_=a-zA-Z0-9], "
        "'*', or a final '>'"
    )


def _patterns(key_pattern: str | Sequence[str]) -> list[str]:
    pats = list(key_pattern) if isinstance(key_pattern, list | tuple) else [key_pattern]
    if not pats:
        raise InvalidArgumentError("give at least one key pattern")
    return [check_key_pattern(p) for p in pats]


def bucket_stream_config(
    bucket: str,
    *,
    history: int = 1,
    ttl: float | None = None,
    max_value_size: int | None = None,
    max_bytes: int | None = None,
    storage: str = "file",
    replicas: int = 1,
    description: str | None = None,
    compression: bool = False,
    placement: dict[str, Any] | None = None,
    republish: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The stream configuration of the bucket ``bucket`` (ADR-8); no I/O.

    ``history`` is 1 to :data:`MAX_HISTORY`. ``ttl`` (seconds, finite; 0 or ``None``:
    for ever) is the stream's ``max_age`` and caps its duplicate window (two minutes
    otherwise). ``max_value_size`` (the stream's ``max_msg_size``) and ``max_bytes``
    are whole numbers of bytes (0 or ``None``: no limit, as for the server);
    ``replicas`` at least 1. Raises :class:`InvalidArgumentError`, naming the
    argument, on a bad name or value.
    """
    check_bucket(bucket)
    check_count("history", history)
    if history > MAX_HISTORY:
        raise InvalidArgumentError(f"history must be at most {MAX_HISTORY}, not {history!r}")
    if ttl is not None:
        check_delay("ttl", ttl)
    if max_value_size is not None:
        check_count("max_value_size", max_value_size, minimum=0)
    if max_bytes is not None:
        check_count("max_bytes", max_bytes, minimum=0)
    if storage not in ("file", "memory"):
        raise InvalidArgumentError(f"storage must be 'file' or 'memory', not {storage!r}")
    check_count("replicas", replicas)
    window = _MAX_DUPLICATE_WINDOW
    if ttl and ttl < window:
        window = ttl
    cfg: dict[str, Any] = {
        "name": f"KV_{bucket}",
        "subjects": [f"$KV.{bucket}.>"],
        "retention": "limits",
        "max_msgs_per_subject": history,
        "max_msgs": -1,
        "max_bytes": max_bytes or -1,
        "max_age": int((ttl or 0) * 1e9),
        "max_msg_size": max_value_size or -1,
        "max_consumers": -1,
        "storage": storage,
        "discard": "new",
        "num_replicas": replicas,
        "duplicate_window": int(window * 1e9),
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
    }
    if description:
        cfg["description"] = description
    if compression:
        cfg["compression"] = "s2"
    if placement is not None:
        cfg["placement"] = placement
    if republish is not None:
        cfg["republish"] = republish
    return cfg


@dataclass(frozen=True, slots=True)
class KeyValueStatus:
    """A bucket's configuration and size, from its stream's info."""

    bucket: str
    #: Messages stored: every kept value of every key, markers included.
    values: int
    #: Values kept per key.
    history: int
    #: Seconds a value is kept (0: for ever).
    ttl: float
    #: Bytes stored.
    bytes: int
    is_compressed: bool
    backing_store: str = "JetStream"
    stream_info: StreamInfo | None = field(default=None, repr=False, compare=False)


def _key_exists(key: str) -> Callable[[Failure], Failure]:
    """An errback turning "wrong last sequence" into :class:`KeyExistsError`."""

    def errback(f: Failure) -> Failure:
        e = f.value
        if isinstance(e, APIError) and e.err_code in _WRONG_LAST_SEQUENCE:
            err = KeyExistsError(f"key {key!r}: {e.description}")
            err.__cause__ = e
            return Failure(err)
        return f

    return errback


def _seq(ack: PubAck) -> int:
    return ack.seq


# ---------------------------------------------------------------------- the bucket
class KeyValue:
    """A handle on the bucket ``bucket``: ``js.key_value(bucket)`` or
    ``js.create_key_value(bucket, ...)``.

    Every operation returns a Deferred. Keys are checked before any I/O (a bad one
    fails the Deferred with :class:`InvalidArgumentError` at once).
    """

    def __init__(self, js: JetStreamContext, bucket: str, stream_info: StreamInfo) -> None:
        self.js = js
        self.bucket = check_bucket(bucket)
        self.stream = f"KV_{bucket}"
        self._prefix = f"$KV.{bucket}."
        self._direct = bool(stream_info.config.allow_direct)

    def __repr__(self) -> str:
        return f"<KeyValue bucket={self.bucket!r}>"

    @property
    def subject_prefix(self) -> str:
        """``$KV.<bucket>.``: the subject of a key is this followed by the key."""
        return self._prefix

    # ------------------------------------------------------------------ binding
    @classmethod
    def bind(cls, js: JetStreamContext, bucket: str) -> Deferred[KeyValue]:
        """Bind to the existing bucket; :class:`BucketNotFoundError` if there is none,
        :class:`KeyValueError` if its stream is not a key-value bucket."""
        try:
            check_bucket(bucket)
        except NatsError as e:
            return fail(e)

        def bound(info: StreamInfo) -> KeyValue:
            if (info.config.max_msgs_per_subject or 0) < 1:
                raise KeyValueError(f"stream KV_{bucket} is not a key-value bucket")
            return cls(js, bucket, info)

        return js.stream_info(f"KV_{bucket}").addCallbacks(
            bound, bucket_not_found(f"key-value bucket {bucket!r}")
        )

    @classmethod
    def create_bucket(
        cls,
        js: JetStreamContext,
        bucket: str,
        *,
        history: int = 1,
        ttl: float | None = None,
        max_value_size: int | None = None,
        max_bytes: int | None = None,
        storage: str = "file",
        replicas: int = 1,
        description: str | None = None,
        compression: bool = False,
        placement: dict[str, Any] | None = None,
        republish: dict[str, Any] | None = None,
    ) -> Deferred[KeyValue]:
        """Create the bucket (see :func:`bucket_stream_config`) and bind to it.

        Creating a bucket that exists with the same configuration binds to it; one
        that exists with another fails with :class:`StreamNameInUseError`.
        """
        try:
            cfg = bucket_stream_config(
                bucket, history=history, ttl=ttl, max_value_size=max_value_size,
                max_bytes=max_bytes, storage=storage, replicas=replicas,
                description=description, compression=compression, placement=placement,
                republish=republish,
            )
        except NatsError as e:
            return fail(e)
        return js.add_stream(StreamConfig.from_json(cfg)).addCallback(
            lambda info: cls(js, bucket, info)
        )

    def destroy(self) -> Deferred[bool]:
        """Delete the bucket and everything in it; this handle is then of no use."""
        return self.js.delete_key_value(self.bucket)

    def status(self) -> Deferred[KeyValueStatus]:
        """The bucket's size and configuration."""

        def to_status(info: StreamInfo) -> KeyValueStatus:
            cfg = info.config
            return KeyValueStatus(
                bucket=self.bucket,
                values=info.state.messages,
                history=cfg.max_msgs_per_subject or 0,
                ttl=cfg.max_age or 0.0,
                bytes=info.state.bytes,
                is_compressed=(cfg.compression or "none") != "none",
                stream_info=info,
            )

        return self.js.stream_info(self.stream).addCallbacks(
            to_status, bucket_not_found(f"key-value bucket {self.bucket!r}")
        )

    # ------------------------------------------------------------------ reads
    def get(self, key: str, revision: int | None = None) -> Deferred[Entry]:
        """The latest entry of ``key``, or the one at ``revision``.

        Fails with :class:`KeyNotFoundError` if the key never had a value (or that
        revision is gone or belongs to another key), and with its subclass
        :class:`KeyDeletedError` (``revision`` the marker's) if the entry is a delete
        or purge marker. A ``revision`` below 1 fails it with
        :class:`InvalidArgumentError` at once.
        """
        try:
            check_key(key)
            if revision is not None:
                check_count("revision", revision)
        except NatsError as e:
            return fail(e)
        subject = self._prefix + key
        if revision is None:
            d = self.js.get_msg(self.stream, last_by_subject=subject, direct=self._direct)
        else:
            d = self.js.get_msg(self.stream, revision, direct=self._direct)

        def to_entry(m: RawStreamMsg) -> Entry:
            if m.subject != subject:
                raise KeyNotFoundError(f"revision {revision} is not of key {key!r}")
            op = operation(m.headers)
            if op != PUT:
                raise KeyDeletedError(f"key {key!r} was deleted ({op})", m.seq)
            return Entry(self.bucket, key, m.data, m.seq, parse_time(m.time))

        def not_found(f: Failure) -> Failure:
            if f.check(MsgNotFoundError):
                where = "" if revision is None else f" at revision {revision}"
                return Failure(KeyNotFoundError(f"key {key!r} not found{where}"))
            return f

        return d.addCallbacks(to_entry, not_found)

    def keys(self, key_pattern: str | Sequence[str] = ">") -> Deferred[list[str]]:
        """Every key (matching ``key_pattern``, one or several) whose latest entry is a
        value, not a marker; ``[]`` if there is none."""
        try:
            pats = _patterns(key_pattern)
        except NatsError as e:
            return fail(e)

        async def collect() -> list[str]:
            found: dict[str, None] = {}
            w = await self._watch(pats, False, True, True, False)
            try:
                async for e in w:
                    if e is None:
                        break
                    found[e.key] = None
            finally:
                w.stop()
            return list(found)

        return Deferred.fromCoroutine(collect())

    def history(self, key: str) -> Deferred[list[Entry]]:
        """Every kept entry of ``key`` (or of the keys matching a pattern), oldest first,
        markers included; :class:`KeyNotFoundError` if there is none."""
        try:
            pats = _patterns(key)
        except NatsError as e:
            return fail(e)

        async def collect() -> list[Entry]:
            entries: list[Entry] = []
            w = await self._watch(pats, True, False, False, False)
            try:
                async for e in w:
                    if e is None:
                        break
                    entries.append(e)
            finally:
                w.stop()
            if not entries:
                raise KeyNotFoundError(f"key {key!r} has no history")
            return entries

        return Deferred.fromCoroutine(collect())

    def watch(
        self,
        key_pattern: str | Sequence[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
    ) -> Deferred[KeyWatcher]:
        """Watch the keys matching ``key_pattern`` (one pattern or several).

        Fires with a :class:`KeyWatcher` once the server is delivering: ``async for``
        it (or ``next_update()``) to get the latest entry of every matching key (every
        kept one with ``include_history``), then ``None`` once, then each change as it
        happens. ``ignore_deletes`` leaves markers out, ``meta_only`` leaves values
        out, ``updates_only`` starts with ``None`` and gives changes only.
        """
        try:
            pats = _patterns(key_pattern)
        except NatsError as e:
            return fail(e)
        return self._watch(pats, include_history, ignore_deletes, meta_only, updates_only)

    def _watch(
        self, patterns: list[str], include_history: bool, ignore_deletes: bool,
        meta_only: bool, updates_only: bool,
    ) -> Deferred[KeyWatcher]:
        w = KeyWatcher(
            self, [self._prefix + p for p in patterns], include_history=include_history,
            ignore_deletes=ignore_deletes, meta_only=meta_only, updates_only=updates_only,
        )
        return w.start()

    # ------------------------------------------------------------------ writes
    def put(self, key: str, value: bytes) -> Deferred[int]:
        """Store ``value`` as the latest of ``key``; fires with its revision."""
        try:
            check_key(key)
        except NatsError as e:
            return fail(e)
        return self.js.publish(self._prefix + key, value).addCallback(_seq)

    def update(self, key: str, value: bytes, last: int) -> Deferred[int]:
        """Store ``value`` only if ``key``'s latest revision is ``last`` (0: the key has
        no message at all); fires with the new revision.

        Otherwise fails with :class:`KeyExistsError`, its ``__cause__`` the server's
        :class:`WrongLastSequenceError` (nats.go's ``ErrKeyExists`` is that API error).
        ``last`` must be a whole number of at least 0 (:class:`InvalidArgumentError`).
        """
        try:
            check_key(key)
            check_count("last", last, minimum=0)
        except NatsError as e:
            return fail(e)
        return self.js.publish(
            self._prefix + key, value, expected_last_subject_seq=last
        ).addCallbacks(_seq, _key_exists(key))

    def create(self, key: str, value: bytes) -> Deferred[int]:
        """Store ``value`` only if ``key`` has no value
        (never set, or its latest entry is a delete or purge marker). Fires with the
        revision; fails with :class:`KeyExistsError` if the key has a value.
        """
        try:
            check_key(key)
        except NatsError as e:
            return fail(e)

        async def attempt() -> int:
            try:
                return await self.update(key, value, 0)
            except KeyExistsError:
                # The key has messages: if the latest is a marker, replace it.
                try:
                    await self.get(key)
                except KeyDeletedError as deleted:
                    return await self.update(key, value, deleted.revision)
                except KeyNotFoundError:
                    pass
                raise

        return Deferred.fromCoroutine(attempt())

    def delete(self, key: str, last: int | None = None) -> Deferred[int]:
        """Mark ``key`` deleted, keeping its history; fires with the marker's revision.

        With ``last`` (a whole number, 0 or more), only if the key's latest revision is
        ``last`` (:class:`KeyExistsError` otherwise).
        """
        return self._marker(key, DEL, last)

    def purge(self, key: str, last: int | None = None) -> Deferred[int]:
        """Mark ``key`` purged and drop all its history; fires with the marker's
        revision. ``last`` as for :meth:`delete`."""
        return self._marker(key, PURGE, last)

    def _marker(self, key: str, op: str, last: int | None) -> Deferred[int]:
        try:
            check_key(key)
            if last is not None:
                check_count("last", last, minimum=0)
        except NatsError as e:
            return fail(e)
        headers = {OP_HEADER: op}
        if op == PURGE:
            headers[_ROLLUP_HEADER] = "sub"
        return self.js.publish(
            self._prefix + key, b"", headers=headers, expected_last_subject_seq=last
        ).addCallbacks(_seq, _key_exists(key))

    def purge_deletes(self, older_than: float = _PURGE_DELETES_OLDER_THAN) -> Deferred[int]:
        """Remove the delete and purge markers of deleted keys, and what history they
        kept. A marker younger than ``older_than`` seconds is kept (its older history
        goes); ``older_than=0`` removes every marker. Fires with the number of keys
        cleaned. A negative, NaN or infinite ``older_than`` fails it with
        :class:`InvalidArgumentError` before anything is read or purged.
        """
        try:
            check_delay("older_than", older_than)
        except NatsError as e:
            return fail(e)

        async def run() -> int:
            markers: list[Entry] = []
            w = await self._watch([">"], False, False, True, False)
            try:
                async for e in w:
                    if e is None:
                        break
                    if e.operation != PUT:
                        markers.append(e)
            finally:
                w.stop()
            limit = time.time() - older_than
            for e in markers:
                recent = older_than > 0 and (
                    e.created is None or e.created.timestamp() > limit
                )
                await self.js.purge_stream(
                    self.stream, subject=self._prefix + e.key, keep=1 if recent else None
                )
            return len(markers)

        return Deferred.fromCoroutine(run())
