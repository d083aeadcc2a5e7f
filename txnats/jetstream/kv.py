"""The JetStream key-value store (ADR-8).

A bucket ``B`` is the stream ``KV_B`` taking the subjects ``$KV.B.>``; the key ``k`` is
the subject ``$KV.B.k`` and its revisions are the stream sequences of the messages on
it. The stream keeps ``history`` messages per subject. A delete is a message with the
header ``KV-Operation: DEL`` (history stays); a purge is ``KV-Operation: PURGE`` with
``Nats-Rollup: sub``, which makes the server drop every earlier message of the key.

Reads of one key use the Direct Get API when the stream allows it (every bucket created
here does); ``keys``, ``history`` and ``watch`` read through an ordered consumer, which
is made again after a reconnection or a server restart.

A bucket made with ``limit_marker_ttl`` (ADR-48) takes per-key TTLs (``create(...,
ttl=)``, ``put(..., ttl=)`` on a bucket keeping one value per key, ``purge(...,
ttl=)``), and a key removed by its TTL or the bucket's ``ttl`` leaves a marker that
watchers see as a ``PURGE``. A mirror bucket reads its origin's keys and sends writes
to the origin; a context for another JetStream domain (``nc.jetstream(domain=...)``)
writes through that domain's API prefix (ADR-8 cross-domain).

::

    kv = await js.create_key_value("config", history=5, ttl=3600)
    rev = await kv.put("db.host", b"10.0.0.7")
    entry = await kv.get("db.host")             # Entry(..., value=b"10.0.0.7", revision=rev)
    async with await kv.watch("db.>") as w:
        async for entry in w:                    # Entry, ..., None (initial values done), ...
            ...
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
from txnats.jetstream._api import PubAck, RawStreamMsg, bucket_not_found, shown, subject_room
from txnats.jetstream._kv_config import (
    MAX_HISTORY,
    bucket_stream_config,
    check_bucket,
    check_key,
    check_key_pattern,
    patterns,
)
from txnats.jetstream._kv_entry import (
    DEL,
    OP_HEADER,
    PURGE,
    PUT,
    Entry,
    operation,
    parse_time,
)
from txnats.jetstream._kv_watch import KeyLister, KeyWatcher
from txnats.jetstream.config import StreamConfig, StreamInfo
from txnats.jetstream.store_config import KeyValueConfig

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
    "KeyLister",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueStatus",
    "KeyWatcher",
    "bucket_names",
    "bucket_stream_config",
    "check_bucket",
    "check_key",
    "check_key_pattern",
    "list_buckets",
]

_ROLLUP_HEADER = "Nats-Rollup"
#: The default age of the delete markers ``purge_deletes`` removes (seconds).
_PURGE_DELETES_OLDER_THAN = 30 * 60.0
#: err_codes of "wrong last sequence" (10071, and 10164 the constant form).
_WRONG_LAST_SEQUENCE = frozenset({10071, 10164})


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
    #: Seconds a limit marker is kept (ADR-48); 0: no markers, no per-key TTL.
    limit_marker_ttl: float = 0.0
    #: The bucket this one mirrors (``None``: none).
    mirror: str | None = None
    #: The buckets this one takes values from.
    sources: tuple[str, ...] = ()


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
    fails the Deferred with :class:`InvalidArgumentError` at once): a key's subject
    must fit the client's ``max_control_line`` (4,096 bytes by default) with a
    request's reply inbox, which leaves about 4,000 bytes for the key.
    """

    def __init__(self, js: JetStreamContext, bucket: str, stream_info: StreamInfo) -> None:
        self.js = js
        self.bucket = check_bucket(bucket)
        self.stream = f"KV_{bucket}"
        cfg = stream_info.config
        self._prefix = f"$KV.{bucket}."
        self._direct = bool(cfg.allow_direct or cfg.mirror_direct)
        self._history = cfg.max_msgs_per_subject or 1
        self._allow_ttl = bool(cfg.allow_msg_ttl)
        #: Writes of a mirror go to its origin, through the origin's domain if given.
        self._external: str | None = None
        mirror = cfg.mirror
        if mirror is not None and mirror.name and mirror.name.startswith("KV_"):
            self._prefix = f"$KV.{mirror.name[3:]}."
            self._external = mirror.external.api if mirror.external is not None else None

    def __repr__(self) -> str:
        return f"<KeyValue bucket={self.bucket!r}>"

    @property
    def _put_prefix(self) -> str:
        """Where writes go: the keys' subjects, behind another JetStream domain's API
        prefix when the context (or a mirror's origin) is in one (as nats.go does)."""
        if self._external:
            return f"{self._external}.{self._prefix}"
        api = self.js.prefix
        return self._prefix if api == "$JS.API" else f"{api}.{self._prefix}"

    def _check_key(self, key: object) -> str:
        """``key`` if valid (:func:`check_key`) and short enough that its subject, with
        a request's reply inbox, fits the client's ``max_control_line``."""
        check_key(key)
        assert isinstance(key, str)
        client = self.js.client
        room = subject_room(client) - len(self._put_prefix)
        if len(key) > room:
            raise InvalidArgumentError(
                f"invalid key {shown(key)}: too long for bucket {self.bucket!r}, at most"
                f" {room} bytes (the max_control_line of {client.max_control_line} bytes"
                f" less the key's subject prefix and a request's reply subject)"
            )
        return key

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
        bucket: str | KeyValueConfig,
        *,
        update: bool = False,
        **config: Any,
    ) -> Deferred[KeyValue]:
        """Create the bucket and bind to it; with ``update=True`` change an existing
        bucket's configuration instead (:class:`StreamNotFoundError` if there is none).

        ``bucket`` is a name, with the configuration as keyword arguments (see
        :func:`bucket_stream_config`: ``history``, ``ttl``, ``max_value_size``,
        ``max_bytes``, ``storage``, ``replicas``, ``description``, ``compression``,
        ``placement``, ``republish``, ``limit_marker_ttl``, ``mirror``, ``sources``,
        ``metadata``; durations in seconds), or a :class:`KeyValueConfig` (keyword
        arguments override its fields). Creating a bucket that exists with the same
        configuration binds to it; one that exists with another fails with
        :class:`StreamNameInUseError`. A bad or unknown argument fails it with
        :class:`InvalidArgumentError` before any request.
        """
        try:
            if isinstance(bucket, KeyValueConfig):
                config = {**bucket.create_arguments(), **config}
                bucket = bucket.bucket or ""
            try:
                cfg = bucket_stream_config(bucket, **config)
            except TypeError as e:
                if isinstance(e, NatsError):  # an argument check: it names the argument
                    raise
                raise InvalidArgumentError(f"create_key_value: {e}") from None
        except NatsError as e:
            return fail(e)
        call = js.update_stream if update else js.add_stream
        return call(StreamConfig.from_json(cfg)).addCallback(
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
                limit_marker_ttl=cfg.subject_delete_marker_ttl or 0.0,
                mirror=(cfg.mirror.name or "")[3:] or None if cfg.mirror else None,
                sources=tuple((src.name or "")[3:] for src in cfg.sources or ()),
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
            self._check_key(key)
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
            pats = patterns(key_pattern)
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
            pats = patterns(key)
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
        resume_from_revision: int | None = None,
        max_pending: int = 4096,
    ) -> Deferred[KeyWatcher]:
        """Watch the keys matching ``key_pattern`` (one pattern or several).

        Fires with a :class:`KeyWatcher` once the server is delivering: ``async for``
        it (or ``next_update()``) to get the latest entry of every matching key (every
        kept one with ``include_history``), then ``None`` once, then each change as it
        happens. ``ignore_deletes`` leaves markers out, ``meta_only`` leaves values
        out, ``updates_only`` starts with ``None`` and gives changes only.
        ``resume_from_revision`` (at least 1) gives every kept entry from that revision
        on instead (to pick up where an earlier watcher's ``last_revision`` left off).
        ``max_pending`` (at least 1) bounds the entries waiting unread (see
        :class:`KeyWatcher` for the overflow policy). The watcher survives
        reconnections and server restarts. A bad argument fails it with
        :class:`InvalidArgumentError` before any I/O.
        """
        try:
            pats = patterns(key_pattern)
            w = KeyWatcher(
                self, [self._prefix + p for p in pats], include_history=include_history,
                ignore_deletes=ignore_deletes, meta_only=meta_only,
                updates_only=updates_only, resume_from_revision=resume_from_revision,
                max_pending=max_pending,
            )
        except NatsError as e:
            return fail(e)
        return w.start()

    def _watch(
        self, patterns: list[str], include_history: bool, ignore_deletes: bool,
        meta_only: bool, updates_only: bool,
    ) -> Deferred[KeyWatcher]:
        w = KeyWatcher(
            self, [self._prefix + p for p in patterns], include_history=include_history,
            ignore_deletes=ignore_deletes, meta_only=meta_only, updates_only=updates_only,
        )
        return w.start()

    def list_keys(self, key_pattern: str | Sequence[str] = ">") -> KeyLister:
        """``async for key in kv.list_keys()``: every key (matching ``key_pattern``)
        whose latest entry is a value, as they are read (:meth:`keys` gives the list).
        A bad pattern raises :class:`InvalidArgumentError` here."""
        pats = patterns(key_pattern)
        return KeyLister(lambda: self._watch(pats, False, True, True, False))

    # ------------------------------------------------------------------ writes
    def _check_ttl(self, ttl: float | None, what: str) -> None:
        if ttl is None:
            return
        check_delay("ttl", ttl)
        if not self._allow_ttl:
            raise KeyValueError(
                f"bucket {self.bucket!r} takes no per-key TTL: create it with "
                "limit_marker_ttl (ADR-48)"
            )
        if what == "put" and self._history > 1:
            raise KeyValueError(
                f"put(ttl=) on bucket {self.bucket!r}, which keeps {self._history} values "
                "per key: the older value would come back when this one expires "
                "(ADR-48); use create(ttl=), or a bucket with history=1"
            )

    def put(self, key: str, value: bytes, *, ttl: float | None = None) -> Deferred[int]:
        """Store ``value`` as the latest of ``key``; fires with its revision.

        ``ttl`` (seconds, at least 1) removes it that long after, leaving a limit
        marker: only on a bucket made with ``limit_marker_ttl`` that keeps one value
        per key (:class:`KeyValueError` otherwise, before anything is sent).
        """
        try:
            self._check_key(key)
            self._check_ttl(ttl, "put")
        except NatsError as e:
            return fail(e)
        return self.js.publish(self._put_prefix + key, value, ttl=ttl).addCallback(_seq)

    def update(self, key: str, value: bytes, last: int) -> Deferred[int]:
        """Store ``value`` only if ``key``'s latest revision is ``last`` (0: the key has
        no message at all); fires with the new revision.

        Otherwise fails with :class:`KeyExistsError`, its ``__cause__`` the server's
        :class:`WrongLastSequenceError` (nats.go's ``ErrKeyExists`` is that API error).
        ``last`` must be a whole number of at least 0 (:class:`InvalidArgumentError`).
        """
        try:
            self._check_key(key)
            check_count("last", last, minimum=0)
        except NatsError as e:
            return fail(e)
        return self._update(key, value, last, None)

    def _update(self, key: str, value: bytes, last: int, ttl: float | None) -> Deferred[int]:
        return self.js.publish(
            self._put_prefix + key, value, expected_last_subject_seq=last, ttl=ttl
        ).addCallbacks(_seq, _key_exists(key))

    def create(self, key: str, value: bytes, *, ttl: float | None = None) -> Deferred[int]:
        """Store ``value`` only if ``key`` has no value
        (never set, or its latest entry is a delete or purge marker). Fires with the
        revision; fails with :class:`KeyExistsError` if the key has a value.

        ``ttl`` (seconds, at least 1; ADR-48) removes the key that long after, leaving
        a limit marker; the bucket needs ``limit_marker_ttl`` (:class:`KeyValueError`).
        """
        try:
            self._check_key(key)
            self._check_ttl(ttl, "create")
        except NatsError as e:
            return fail(e)

        async def attempt() -> int:
            try:
                return await self._update(key, value, 0, ttl)
            except KeyExistsError:
                # The key has messages: if the latest is a marker, replace it.
                try:
                    await self.get(key)
                except KeyDeletedError as deleted:
                    return await self._update(key, value, deleted.revision, ttl)
                except KeyNotFoundError:
                    pass
                raise

        return Deferred.fromCoroutine(attempt())

    def delete(self, key: str, last: int | None = None) -> Deferred[int]:
        """Mark ``key`` deleted, keeping its history; fires with the marker's revision.

        With ``last`` (a whole number, 0 or more), only if the key's latest revision is
        ``last`` (:class:`KeyExistsError` otherwise).
        """
        return self._marker(key, DEL, last, None)

    def purge(
        self, key: str, last: int | None = None, *, ttl: float | None = None
    ) -> Deferred[int]:
        """Mark ``key`` purged and drop all its history; fires with the marker's
        revision. ``last`` as for :meth:`delete`. ``ttl`` (seconds, at least 1; a
        bucket with ``limit_marker_ttl``) removes the marker itself that long after,
        so the key leaves no trace (ADR-48)."""
        return self._marker(key, PURGE, last, ttl)

    def _marker(self, key: str, op: str, last: int | None, ttl: float | None) -> Deferred[int]:
        try:
            self._check_key(key)
            if last is not None:
                check_count("last", last, minimum=0)
            self._check_ttl(ttl, "purge")
        except NatsError as e:
            return fail(e)
        headers = {OP_HEADER: op}
        if op == PURGE:
            headers[_ROLLUP_HEADER] = "sub"
        return self.js.publish(
            self._put_prefix + key, b"", headers=headers, expected_last_subject_seq=last,
            ttl=ttl,
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


# ---------------------------------------------------------------------- listings
def bucket_names(js: JetStreamContext) -> Deferred[list[str]]:
    """The names of every key-value bucket (streams named ``KV_...``), sorted."""

    def names(streams: list[str]) -> list[str]:
        return sorted(n[3:] for n in streams if n.startswith("KV_") and len(n) > 3)

    return js.stream_names().addCallback(names)


def list_buckets(js: JetStreamContext) -> Deferred[list[KeyValueStatus]]:
    """The status of every key-value bucket, sorted by name."""

    async def collect() -> list[KeyValueStatus]:
        out = []
        for name in await bucket_names(js):
            try:
                kv = await KeyValue.bind(js, name)
                out.append(await kv.status())
            except KeyValueError:
                continue  # deleted meanwhile, or a KV_ stream that is not a bucket
        return out

    return Deferred.fromCoroutine(collect())
