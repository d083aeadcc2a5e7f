"""The JetStream object store (ADR-20): large objects as chunks in a stream.

A bucket ``B`` is the stream ``OBJ_B`` with the subjects ``$O.B.C.>`` (chunks) and
``$O.B.M.>`` (metadata). An object named ``name`` has one metadata message, rolled up
per subject, on ``$O.B.M.<name in padded base64 URL encoding>``: its
:class:`ObjectInfo` as JSON, laid out as nats.go writes it, so that every NATS client
reads what we store and we read what they store. Its bytes are the messages on
``$O.B.C.<nuid>``, the nuid being drawn afresh for every put; the digest is SHA-256
in padded base64 URL encoding (``SHA-256=...=``).

``js.create_object_store(bucket, ...)`` or ``js.object_store(bucket)`` give an
:class:`ObjectStore`; every method returns a Deferred. Moving the bytes themselves
(the chunks of a put, reading and checking them back) is done in ``_obj_chunks``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from twisted.internet.defer import Deferred, fail
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_count, check_delay
from txnats.errors import (
    BucketNotFoundError,
    InvalidArgumentError,
    MsgNotFoundError,
    NatsError,
    NoRespondersError,
    ObjectNotFoundError,
    ObjectStoreError,
    StreamNotFoundError,
)
from txnats.jetstream._api import (
    RawStreamMsg,
    bucket_not_found,
    report,
    shown,
    subject_room,
)
from txnats.jetstream._kv_entry import time_from_ns
from txnats.jetstream._obj_chunks import encode_digest, nothing_to_deliver, send_chunks
from txnats.jetstream._obj_get import ChunkStream, ConsumerSink, ObjectReader, write_to_file
from txnats.jetstream._obj_info import (
    ObjectInfo,
    ObjectLink,
    ObjectStoreStatus,
    check_bucket,
    encode_name,
    headers_dict,
    metadata_dict,
    parse_time,
)
from txnats.jetstream._obj_put import ObjectWriter, source_for
from txnats.jetstream._obj_watch import ObjectWatcher
from txnats.jetstream.config import ConsumerInfo, StreamConfig, StreamInfo
from txnats.jetstream.ordered import ONE_SHOT_RESETS, OrderedConsumer
from txnats.jetstream.store_config import ObjectStoreConfig
from txnats.nuid import next_nuid
from txnats.protocol.headers import HeaderInput

if TYPE_CHECKING:
    from twisted.internet.interfaces import IConsumer

    from txnats.jetstream.context import JetStreamContext
    from txnats.jetstream.msg import JsMsg

__all__ = [
    "ObjectInfo",
    "ObjectLink",
    "ObjectReader",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "ObjectWriter",
    "list_stores",
    "store_names",
]

log = Logger()

#: The chunk size of a put unless told otherwise (ADR-20).
DEFAULT_CHUNK_SIZE = 128 * 1024
#: The most chunk bytes one put keeps unacknowledged at once.
PUT_WINDOW_BYTES = 8 * 1024 * 1024

_ROLLUP = {"Nats-Rollup": "sub"}


class _Keep(enum.Enum):
    KEEP = 0


#: ``update_meta``'s default: leave the field as it is.
KEEP = _Keep.KEEP


class ObjectStore:
    """One object store bucket. Obtain it with ``js.object_store(bucket)`` or
    ``js.create_object_store(bucket, ...)``."""

    def __init__(self, js: JetStreamContext, bucket: str, *, direct: bool = True) -> None:
        self.js = js
        self.bucket = check_bucket(bucket)
        self.stream = f"OBJ_{bucket}"
        self._direct = direct
        self._chunk_prefix = f"$O.{bucket}.C."
        self._meta_prefix = f"$O.{bucket}.M."

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"

    # ------------------------------------------------------------------ binding
    @classmethod
    def bind(cls, js: JetStreamContext, bucket: str) -> Deferred[ObjectStore]:
        """Bind to the existing bucket; :class:`BucketNotFoundError` if there is none."""
        try:
            check_bucket(bucket)
        except NatsError as e:
            return fail(e)

        def bound(info: StreamInfo) -> ObjectStore:
            return cls(js, bucket, direct=bool(info.config.allow_direct))

        return js.stream_info(f"OBJ_{bucket}").addCallbacks(
            bound, bucket_not_found(f"object store {bucket!r}")
        )

    @classmethod
    def create(
        cls,
        js: JetStreamContext,
        bucket: str | ObjectStoreConfig,
        *,
        description: str | None = None,
        ttl: float | None = None,
        max_bytes: int | None = None,
        storage: str = "file",
        replicas: int = 1,
        compression: bool = False,
        metadata: Mapping[str, str] | None = None,
        placement: Mapping[str, Any] | None = None,
    ) -> Deferred[ObjectStore]:
        """Create the bucket (or bind to it if it exists with the same configuration).

        ``ttl`` is in seconds (finite; objects older are removed; 0 or ``None``: kept for
        ever), ``max_bytes`` bounds the bucket (a whole number; 0 or ``None``: no limit),
        ``storage`` is ``"file"`` or ``"memory"``, ``replicas`` at least 1,
        ``compression`` compresses it on disk (S2, server 2.10+). ``bucket`` may be an
        :class:`ObjectStoreConfig` instead (its fields as these arguments; an argument
        given as well wins). A bad value fails it with :class:`InvalidArgumentError`,
        naming the argument, before any request.
        """
        if isinstance(bucket, ObjectStoreConfig):
            args: dict[str, Any] = bucket.create_arguments()
            given = {  # the arguments given here that differ from their defaults
                "description": description, "ttl": ttl, "max_bytes": max_bytes,
                "storage": None if storage == "file" else storage,
                "replicas": None if replicas == 1 else replicas,
                "compression": compression or None, "metadata": metadata,
                "placement": placement,
            }
            args.update((k, v) for k, v in given.items() if v is not None)
            return cls.create(js, bucket.bucket or "", **args)
        try:
            check_bucket(bucket)
            if ttl is not None:
                check_delay("ttl", ttl)
            if max_bytes is not None:
                check_count("max_bytes", max_bytes, minimum=0)
            if storage not in ("file", "memory"):
                raise InvalidArgumentError(f"storage must be 'file' or 'memory', not {storage!r}")
            check_count("replicas", replicas)
            meta = metadata_dict(metadata)
        except NatsError as e:
            return fail(e)
        cfg: dict[str, Any] = {
            "name": f"OBJ_{bucket}",
            "subjects": [f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
            "max_age": int((ttl or 0) * 1e9),
            "max_bytes": max_bytes or -1,
            "storage": storage,
            "num_replicas": replicas,
            "discard": "new",
            "allow_rollup_hdrs": True,
            "allow_direct": True,
        }
        if description:
            cfg["description"] = description
        if compression:
            cfg["compression"] = "s2"
        if meta:
            cfg["metadata"] = meta
        if placement:
            cfg["placement"] = dict(placement)
        return js.add_stream(StreamConfig.from_json(cfg)).addCallback(lambda _: cls(js, bucket))

    # ------------------------------------------------------------------ subjects
    def _meta_subject(self, name: str) -> str:
        """``name``'s metadata subject; :class:`InvalidArgumentError` for a bad name, or
        one whose subject (with a publish's reply inbox) would not fit the client's
        ``max_control_line``: every call checks it before anything is sent, so a
        ``put`` never leaves chunks without their metadata."""
        subject = self._meta_prefix + encode_name(name)
        client = self.js.client
        room = subject_room(client)
        if len(subject) > room:
            longest = (room - len(self._meta_prefix)) // 4 * 3  # base64: 4 bytes per 3
            raise InvalidArgumentError(
                f"object name {shown(name)} is too long for bucket {self.bucket!r}: its"
                f" subject would be {len(subject)} bytes, at most {room} (the"
                f" max_control_line of {client.max_control_line} bytes less a request's"
                f" reply subject), so about {longest} bytes of name"
            )
        return subject

    def _chunk_subject(self, nuid: str) -> str:
        return self._chunk_prefix + nuid

    # ------------------------------------------------------------------ info
    def get_info(self, name: str, show_deleted: bool = False) -> Deferred[ObjectInfo]:
        """The object's info; :class:`ObjectNotFoundError` if it does not exist or (unless
        ``show_deleted``) was deleted."""
        try:
            subject = self._meta_subject(name)
        except NatsError as e:
            return fail(e)
        return self._load_meta(name, subject).addCallback(self._visible, show_deleted)

    def _visible(self, info: ObjectInfo, show_deleted: bool) -> ObjectInfo:
        if info.deleted and not show_deleted:
            raise ObjectNotFoundError(f"object {info.name!r} was deleted")
        return info

    def _load_meta(self, name: str, subject: str) -> Deferred[ObjectInfo]:
        d = self.js.get_msg(self.stream, last_by_subject=subject, direct=self._direct)

        def parse(msg: RawStreamMsg) -> ObjectInfo:
            return ObjectInfo.from_json(msg.data, parse_time(msg.time))

        def missing(f: Failure) -> Failure | Deferred[ObjectInfo]:
            if f.check(MsgNotFoundError):
                return Failure(ObjectNotFoundError(f"no object {name!r} in {self.bucket!r}"))
            if f.check(NoRespondersError) and self._direct:
                # A stream made without allow_direct (old clients): ask the API instead.
                self._direct = False
                return self._load_meta(name, subject)
            if f.check(StreamNotFoundError):
                return Failure(BucketNotFoundError(f"no object store {self.bucket!r}"))
            return f

        return d.addCallbacks(parse, missing)

    # ------------------------------------------------------------------ get
    def get(self, name: str) -> Deferred[bytes]:
        """The object's bytes, checked against its size and digest: for objects that
        fit in memory (:meth:`get_chunks`, :meth:`get_to_file` and
        :meth:`get_to_consumer` stream larger ones).

        Fails with :class:`ObjectNotFoundError` (no such object, or deleted) and with
        :class:`DigestMismatchError` if what is stored is not what was put. A link to an
        object is followed. Cancelling the Deferred stops the transfer.
        """
        try:
            self._meta_subject(name)
        except NatsError as e:
            return fail(e)
        reader = self.get_chunks(name)

        async def collect() -> bytes:
            parts: list[bytes] = []
            while True:
                chunks = await reader.next_chunks()
                if not chunks:
                    return b"".join(parts)
                parts += chunks

        d = Deferred.fromCoroutine(collect())
        d.addErrback(self._stop_on_error, reader)
        return d

    @staticmethod
    def _stop_on_error(f: Failure, reader: ObjectReader) -> Failure:
        reader.stop()
        return f

    def get_chunks(self, name: str) -> ObjectReader:
        """``async for chunk in store.get_chunks(name)``: the object's bytes, chunk by
        chunk, read as fast as they are taken (at most two batches of about 4 MiB wait
        unread). The iteration raises :class:`ObjectNotFoundError` if there is no such
        object, and :class:`DigestMismatchError` after the last chunk if the bytes do
        not match the object's size and digest. A link is followed. A bad name raises
        :class:`InvalidArgumentError` here.
        """
        self._meta_subject(name)
        return ObjectReader(lambda: self.open_chunks(name, 0))

    def open_chunks(self, name: str, hops: int = 0) -> Deferred[ChunkStream]:
        """Find object ``name`` (following links, ``hops`` of them so far) and start
        reading its chunks: what :meth:`get_chunks` builds on."""
        async def run() -> ChunkStream:
            info = self._visible(await self._load_meta(name, self._meta_subject(name)), False)
            if info.link is not None:
                link = info.link
                if not link.name:
                    raise ObjectStoreError(f"object {info.name!r} is a link to a bucket")
                if hops >= 8:
                    raise ObjectStoreError(f"object {name!r}: too many links")
                other = self if link.bucket == self.bucket else await ObjectStore.bind(
                    self.js, link.bucket
                )
                inner = ObjectReader(lambda: other.open_chunks(link.name, hops + 1))
                await inner.open()
                assert inner.chunk_stream is not None
                return inner.chunk_stream
            if not info.nuid:
                raise ObjectStoreError(f"object {info.name!r} has no nuid in its metadata")
            stream = ChunkStream(
                self.js, self.stream, self._chunk_subject(info.nuid), info,
                direct=self._direct,
            )
            stream.start()
            return stream

        return Deferred.fromCoroutine(run())

    def get_to_file(
        self, name: str, target: str | os.PathLike[str] | BinaryIO
    ) -> Deferred[ObjectInfo]:
        """Write the object to ``target``: a path or a binary file object; every write
        runs in the reactor's thread pool. Fires with the object's info once the size
        and digest are checked.

        A path is written under a temporary name beside it and renamed once checked;
        on any failure (:class:`DigestMismatchError` included) the partial file is
        removed and ``path`` is left as it was. A file object is left open; what was
        written to it before a failure stays.
        """
        try:
            reader = self.get_chunks(name)
        except NatsError as e:
            return fail(e)
        return Deferred.fromCoroutine(write_to_file(reader, target, self.js.client.clock))

    def get_to_consumer(self, name: str, consumer: IConsumer) -> Deferred[ObjectInfo]:
        """Write the object to ``consumer``, registered as its push producer (so that
        it pauses the transfer when it needs to); fires with the object's info once the
        size and digest are checked (:class:`DigestMismatchError` otherwise, the bytes
        having been written) and the producer is unregistered."""
        try:
            reader = self.get_chunks(name)
        except NatsError as e:
            return fail(e)
        return ConsumerSink(reader, consumer).done

    # ------------------------------------------------------------------ put
    def put(
        self,
        name: str,
        data: Any,
        *,
        description: str | None = None,
        headers: HeaderInput | None = None,
        metadata: Mapping[str, str] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> Deferred[ObjectInfo]:
        """Store ``data`` as object ``name``, replacing any older version; fires with
        its info once every chunk and then the metadata are acknowledged.

        ``data`` is bytes; a binary file object (read ``chunk_size`` bytes at a time
        in the reactor's thread pool, one read ahead; a ``BytesIO`` in place); an async
        iterator of bytes pieces of any size; an
        :class:`~twisted.web.iweb.IBodyProducer` (``FileBodyProducer``...), paused
        while 4 MiB wait; or an :class:`ObjectWriter` from :meth:`put_writer`. It is
        sent chunk by chunk, at most 8 MiB awaiting acknowledgement: the object is
        never whole in memory.

        ``chunk_size`` (a whole number of bytes, at least 1; :class:`InvalidArgumentError`
        otherwise, before any I/O) is capped at the server's max_payload. If a chunk
        cannot be stored (or ``data`` fails) the put fails and the chunks already
        stored are purged.
        """
        try:
            subject = self._meta_subject(name)
            check_count("chunk_size", chunk_size)
            if description is not None and not isinstance(description, str):
                raise InvalidArgumentError("description must be a string")
            hdrs = headers_dict(headers)
            meta = metadata_dict(metadata)
            chunk_size = min(chunk_size, self.js.client.max_payload)
            source = source_for(data, chunk_size, self.js.client.clock)
        except NatsError as e:
            return fail(e)
        info = ObjectInfo(
            name=name, bucket=self.bucket, nuid=next_nuid(), description=description or None,
            headers=hdrs, metadata=meta, max_chunk_size=chunk_size,
        )
        return Deferred.fromCoroutine(self._put(subject, info, source))

    def put_writer(
        self,
        name: str,
        *,
        description: str | None = None,
        headers: HeaderInput | None = None,
        metadata: Mapping[str, str] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> ObjectWriter:
        """An :class:`ObjectWriter` (an ``IConsumer``) whose bytes become object
        ``name``: register any push or pull producer with it, or ``write()`` to it
        (waiting for ``room()``), then ``close()``; its ``done`` fires with the info.
        Arguments as for :meth:`put`; a bad one raises :class:`InvalidArgumentError`.
        """
        self._meta_subject(name)
        check_count("chunk_size", chunk_size)
        writer = ObjectWriter(min(chunk_size, self.js.client.max_payload))
        self.put(
            name, writer, description=description, headers=headers, metadata=metadata,
            chunk_size=chunk_size,
        ).chainDeferred(writer.done)
        return writer

    async def _put(self, meta_subject: str, info: ObjectInfo, source: Any) -> ObjectInfo:
        try:
            old: ObjectInfo | None = await self._load_meta(info.name, meta_subject)
        except ObjectNotFoundError:
            old = None
        except BaseException as e:
            source.abort(e)
            raise
        chunk_subject = self._chunk_subject(info.nuid)
        try:
            size, chunks, sha = await send_chunks(
                self.js, chunk_subject, source, max(1, PUT_WINDOW_BYTES // info.max_chunk_size),
            )
            info = replace(info, size=size, chunks=chunks, digest=encode_digest(sha))
            await self.js.publish(meta_subject, info.to_json(), headers=_ROLLUP)
        except BaseException:
            await self._purge_quietly(chunk_subject)
            raise
        if old is not None and not old.deleted and old.nuid and old.nuid != info.nuid:
            await self._purge_quietly(self._chunk_subject(old.nuid))
        return replace(info, mtime=datetime.now(UTC))

    async def _purge_quietly(self, subject: str) -> None:
        try:
            await self.js.purge_stream(self.stream, subject=subject)
        except NatsError as e:
            log.warn("Object store {bucket}: could not purge {subject}: {error}",
                     bucket=self.bucket, subject=subject, error=e)

    # ------------------------------------------------------------------ delete
    def delete(self, name: str) -> Deferred[None]:
        """Delete the object: a deleted marker replaces its info, its chunks are purged.

        :class:`ObjectNotFoundError` if there is no such object; deleting a deleted
        object does nothing.
        """
        try:
            subject = self._meta_subject(name)
        except NatsError as e:
            return fail(e)
        return Deferred.fromCoroutine(self._delete(name, subject))

    async def _delete(self, name: str, subject: str) -> None:
        info = await self._load_meta(name, subject)
        if info.deleted:
            return
        marker = replace(info, deleted=True, size=0, chunks=0, digest="")
        await self.js.publish(subject, marker.to_json(), headers=_ROLLUP)
        if info.nuid:
            await self.js.purge_stream(self.stream, subject=self._chunk_subject(info.nuid))

    # ------------------------------------------------------------------ update_meta
    def update_meta(
        self,
        name: str,
        *,
        new_name: str | None = None,
        description: str | _Keep | None = KEEP,
        headers: HeaderInput | _Keep | None = KEEP,
        metadata: Mapping[str, str] | _Keep | None = KEEP,
    ) -> Deferred[ObjectInfo]:
        """Change an object's name, description, headers or metadata (the bytes stay).

        Arguments not given keep their value. :class:`ObjectNotFoundError` if the object
        does not exist or was deleted; :class:`ObjectStoreError` if ``new_name`` names
        an existing object.
        """
        try:
            subject = self._meta_subject(name)
            new_subject = subject if new_name is None else self._meta_subject(new_name)
            changes: dict[str, Any] = {}
            if new_name is not None:
                changes["name"] = new_name
            if description is not KEEP:
                if description is not None and not isinstance(description, str):
                    raise InvalidArgumentError("description must be a string")
                changes["description"] = description or None
            if headers is not KEEP:
                changes["headers"] = headers_dict(headers)
            if metadata is not KEEP:
                changes["metadata"] = metadata_dict(metadata)
        except NatsError as e:
            return fail(e)
        return Deferred.fromCoroutine(self._update_meta(name, subject, new_subject, changes))

    async def _update_meta(
        self, name: str, subject: str, new_subject: str, changes: dict[str, Any]
    ) -> ObjectInfo:
        info = self._visible(await self._load_meta(name, subject), False)
        if new_subject != subject:
            try:
                existing = await self._load_meta(changes["name"], new_subject)
            except ObjectNotFoundError:
                pass
            else:
                if not existing.deleted:
                    raise ObjectStoreError(f"an object named {changes['name']!r} exists")
        info = replace(info, **changes)
        await self.js.publish(new_subject, info.to_json(), headers=_ROLLUP)
        if new_subject != subject:
            await self.js.purge_stream(self.stream, subject=subject)
        return replace(info, mtime=datetime.now(UTC))

    # ------------------------------------------------------------------ links
    def add_link(self, name: str, target: ObjectInfo) -> Deferred[ObjectInfo]:
        """Add object ``name``, a link to the object ``target`` (in any bucket).

        Linking to a deleted object or to a link, or naming the link after an existing
        object that is not a link, fails with :class:`ObjectStoreError`.
        """
        if not isinstance(target, ObjectInfo) or not target.name or not target.bucket:
            return fail(InvalidArgumentError("the link target must be an ObjectInfo"))
        if target.deleted:
            return fail(ObjectStoreError("cannot link to a deleted object"))
        if target.link is not None:
            return fail(ObjectStoreError("cannot link to a link"))
        return self._add_link(name, ObjectLink(target.bucket, target.name))

    def add_bucket_link(self, name: str, bucket: ObjectStore | str) -> Deferred[ObjectInfo]:
        """Add object ``name``, a link to a whole bucket."""
        try:
            target = check_bucket(bucket.bucket if isinstance(bucket, ObjectStore) else bucket)
        except NatsError as e:
            return fail(e)
        return self._add_link(name, ObjectLink(target))

    def _add_link(self, name: str, link: ObjectLink) -> Deferred[ObjectInfo]:
        try:
            subject = self._meta_subject(name)
        except NatsError as e:
            return fail(e)

        async def run() -> ObjectInfo:
            try:
                existing = await self._load_meta(name, subject)
            except ObjectNotFoundError:
                pass
            else:
                if not existing.deleted and existing.link is None:
                    raise ObjectStoreError(f"an object named {name!r} exists")
            info = ObjectInfo(name=name, bucket=self.bucket, nuid=next_nuid(), link=link)
            await self.js.publish(subject, info.to_json(), headers=_ROLLUP)
            return replace(info, mtime=datetime.now(UTC))

        return Deferred.fromCoroutine(run())

    # ------------------------------------------------------------------ list
    def list(self, show_deleted: bool = False) -> Deferred[list[ObjectInfo]]:
        """Every object's info (deleted ones only with ``show_deleted``); ``[]`` if none."""
        result: list[ObjectInfo] = []
        done: Deferred[list[ObjectInfo]] = Deferred(lambda _: consumer.stop())

        def finish() -> None:
            consumer.stop()
            if not done.called:
                done.callback(result)

        def failed(e: BaseException) -> None:
            consumer.stop()
            if not done.called:
                done.errback(Failure(e))

        def on_msg(msg: JsMsg) -> None:
            if done.called:
                return
            meta = msg.metadata
            try:
                info = ObjectInfo.from_json(
                    msg.data,
                    time_from_ns(meta.timestamp_ns),
                )
            except ObjectStoreError as e:  # another client's bytes: reported, skipped
                log.warn("Object store {bucket}: skipping {error}", bucket=self.bucket, error=e)
                report(self.js.client, ObjectStoreError(
                    f"listing {self.bucket!r} skipped {msg.subject!r}: {e}"
                ))
            else:
                if show_deleted or not info.deleted:
                    result.append(info)
            if meta.num_pending == 0:
                finish()

        consumer = OrderedConsumer(
            self.js, self.stream, on_msg, filter_subjects=[f"{self._meta_prefix}>"],
            deliver_policy="last_per_subject", on_error=failed, max_resets=ONE_SHOT_RESETS,
        )

        def started(cinfo: ConsumerInfo) -> None:
            if nothing_to_deliver(cinfo):
                finish()

        def start_failed(f: Failure) -> None:
            if not done.called:
                if f.check(StreamNotFoundError):
                    f = Failure(BucketNotFoundError(f"no object store {self.bucket!r}"))
                done.errback(f)

        consumer.start().addCallbacks(started, start_failed)
        return done

    # ------------------------------------------------------------------ watch
    def watch(
        self, *, include_history: bool = False, ignore_deletes: bool = False,
        updates_only: bool = False, max_pending: int = 4096,
    ) -> Deferred[ObjectWatcher]:
        """Watch the bucket's objects: fires with an :class:`ObjectWatcher` once the
        server is delivering (every object's info, then ``None``, then each change;
        see the class). A bad ``max_pending`` fails it with
        :class:`InvalidArgumentError` before any I/O."""
        try:
            w = ObjectWatcher(
                self.js, self.bucket, include_history=include_history,
                ignore_deletes=ignore_deletes, updates_only=updates_only,
                max_pending=max_pending,
            )
        except NatsError as e:
            return fail(e)
        return w.start()

    # ------------------------------------------------------------------ bucket
    def status(self) -> Deferred[ObjectStoreStatus]:
        """The bucket's configuration and state."""

        def build(si: StreamInfo) -> ObjectStoreStatus:
            cfg = si.config
            return ObjectStoreStatus(
                bucket=self.bucket,
                description=cfg.description or None,
                ttl=cfg.max_age or 0.0,
                storage=str(cfg.storage or "file"),
                replicas=cfg.num_replicas or 1,
                sealed=bool(cfg.sealed),
                size=si.state.bytes,
                compressed=(cfg.compression or "none") != "none",
                metadata=dict(cfg.metadata or {}),
                stream_info=si,
            )

        return self._stream_info().addCallback(build)

    def _stream_info(self) -> Deferred[StreamInfo]:
        return self.js.stream_info(self.stream).addErrback(
            bucket_not_found(f"object store {self.bucket!r}")
        )

    def seal(self) -> Deferred[ObjectStoreStatus]:
        """Seal the bucket: no object may be put, changed or deleted any more."""

        def update(si: StreamInfo) -> Deferred[StreamInfo]:
            return self.js.update_stream(si.config, sealed=True)

        return self._stream_info().addCallback(update).addCallback(lambda _: self.status())


# ---------------------------------------------------------------------- listings
def store_names(js: JetStreamContext) -> Deferred[list[str]]:
    """The names of every object store (streams named ``OBJ_...``), sorted."""

    def names(streams: list[str]) -> list[str]:
        return sorted(n[4:] for n in streams if n.startswith("OBJ_") and len(n) > 4)

    return js.stream_names().addCallback(names)


def list_stores(js: JetStreamContext) -> Deferred[list[ObjectStoreStatus]]:
    """The status of every object store, sorted by name."""

    async def collect() -> list[ObjectStoreStatus]:
        out = []
        for name in await store_names(js):
            try:
                out.append(await ObjectStore(js, name).status())
            except BucketNotFoundError:
                continue  # deleted meanwhile
        return out

    return Deferred.fromCoroutine(collect())
