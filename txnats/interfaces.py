"""The public contracts, as zope.interface interfaces.

Classes declare them with ``@implementer``; test doubles that users write against them
can be checked with ``zope.interface.verify.verifyObject``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zope.interface import Attribute, Interface

__all__ = ["IClient", "IJsMsg", "IKeyValue", "IMsg", "IObjectStore", "ISubscription"]


class IMsg(Interface):
    """A message received from the server."""

    subject = Attribute("The subject it was published to (str).")
    reply = Attribute("The reply subject, or None.")
    data = Attribute("The payload (bytes).")
    headers = Attribute("A txnats.Headers, or None.")
    sid = Attribute("The id of the subscription it arrived on (int).")

    def respond(data: bytes = b"", headers: Any = None) -> None:
        """Publish to the reply subject."""


class ISubscription(Interface):
    """Interest in a subject."""

    sid = Attribute("Subscription id (int).")
    subject = Attribute("The subject (str).")
    queue = Attribute("The queue group, or None.")
    pending_msgs = Attribute("Messages waiting in the mailbox.")
    pending_bytes = Attribute("Payload bytes waiting in the mailbox.")
    delivered = Attribute("Messages handed to the handler or a reader.")
    dropped = Attribute("Messages dropped over the pending limits.")

    def unsubscribe() -> None:
        """Stop interest now."""

    def auto_unsubscribe(max_msgs: int) -> None:
        """Unsubscribe after max_msgs messages."""

    def drain() -> object:
        """Unsubscribe; Deferred fired once everything received is handled."""

    def next_msg(timeout: float | None = 1.0) -> object:
        """Coroutine returning the next message: ``await sub.next_msg()``.

        Wrap it with ``Deferred.fromCoroutine(...)`` where a Deferred is needed
        (cancelling that Deferred withdraws the read), or ``yield`` it inside
        ``inlineCallbacks``.
        """


class IClient(Interface):
    """A connection to a NATS system."""

    stats = Attribute("Statistics: in/out msgs and bytes, reconnects.")
    server_info = Attribute("The server's INFO (dict).")

    def publish(
        subject: str, data: bytes = b"", reply: str | None = None, headers: Any = None
    ) -> None:
        """Publish a message (buffered)."""

    def subscribe(subject: str, handler: Any = None, *, queue: str | None = None) -> object:
        """Subscribe; returns an ISubscription (every argument after ``handler`` is
        keyword-only)."""

    def request(
        subject: str, data: bytes = b"", timeout: float | None = 1.0, headers: Any = None
    ) -> object:
        """Deferred firing with the first response."""

    def flush(timeout: float | None = 10.0) -> object:
        """Deferred firing once the server processed everything sent."""

    def drain() -> object:
        """Drain subscriptions, then close."""

    def start() -> object:
        """Make the first connection of a client built directly; Deferred firing with it."""

    def close() -> object:
        """Close now."""

    def when_closed() -> object:
        """A fresh Deferred fired once closed."""

    def add_status_listener(fn: Callable[[Any], object]) -> Callable[[], None]:
        """Call ``fn(state)`` after every state change; returns a remover."""


class IJsMsg(IMsg):
    """A message delivered by a JetStream consumer."""

    metadata = Attribute(
        "MsgMetadata: stream, consumer, num_delivered, sequence (consumer, stream), "
        "timestamp_ns, num_pending, domain."
    )

    def ack() -> None:
        """Acknowledge."""

    def nak(delay: float | None = None) -> None:
        """Ask for redelivery (after ``delay`` seconds)."""

    def in_progress() -> None:
        """Reset the ack wait; may be repeated."""

    def term(reason: str | None = None) -> None:
        """Never redeliver."""

    def ack_sync(timeout: float = 5.0) -> object:
        """Acknowledge; Deferred fired once the server confirmed it."""


class IKeyValue(Interface):
    """A key-value bucket (ADR-8). Every operation returns a Deferred, except
    ``list_keys`` (an async iterator)."""

    bucket = Attribute("The bucket's name (str).")

    def get(key: str, revision: int | None = None) -> object:
        """The latest Entry (or the one at ``revision``)."""

    def put(key: str, value: bytes, *, ttl: float | None = None) -> object:
        """Store ``value``; fires with the revision. ``ttl`` (seconds, ADR-48) needs a
        bucket with per-key TTLs and ``history=1``."""

    def create(key: str, value: bytes, *, ttl: float | None = None) -> object:
        """Store ``value`` only if ``key`` has none; fires with the revision."""

    def update(key: str, value: bytes, last: int) -> object:
        """Store ``value`` only if ``key``'s latest revision is ``last``."""

    def delete(key: str, last: int | None = None) -> object:
        """Mark ``key`` deleted (history kept)."""

    def purge(key: str, last: int | None = None, *, ttl: float | None = None) -> object:
        """Mark ``key`` purged (history removed); ``ttl`` makes the marker expire."""

    def purge_deletes(older_than: float = 1800.0) -> object:
        """Remove delete and purge markers older than ``older_than`` seconds."""

    def keys(key_pattern: Any = ">") -> object:
        """The keys holding a value, as a list."""

    def list_keys(key_pattern: Any = ">") -> object:
        """The keys holding a value, one at a time: ``async for key in ...``."""

    def history(key: str) -> object:
        """Every Entry still stored for ``key``, oldest first."""

    def watch(
        key_pattern: Any = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
        max_pending: int = 4096,
    ) -> object:
        """A KeyWatcher: ``async for entry in watcher``; a None entry marks the end
        of the initial values."""

    def status() -> object:
        """The bucket's status."""

    def destroy() -> object:
        """Delete the bucket and everything in it."""


class IObjectStore(Interface):
    """An object store bucket (ADR-20). Every operation returns a Deferred, except
    ``get_chunks`` (an async iterator) and ``put_writer`` (an IConsumer)."""

    bucket = Attribute("The bucket's name (str).")

    def put(
        name: str,
        data: Any,
        *,
        description: str | None = None,
        headers: Any = None,
        metadata: Any = None,
        chunk_size: int = 128 * 1024,
    ) -> object:
        """Store an object from bytes, a binary file object, an async iterator of
        chunks or an IBodyProducer, chunk by chunk; fires with its ObjectInfo."""

    def put_writer(
        name: str,
        *,
        description: str | None = None,
        headers: Any = None,
        metadata: Any = None,
        chunk_size: int = 128 * 1024,
    ) -> object:
        """An IConsumer to register a producer on; its ``done`` fires with the
        ObjectInfo."""

    def get(name: str) -> object:
        """The object's bytes, checked against its digest (for small objects)."""

    def get_chunks(name: str) -> object:
        """The object's chunks: ``async for chunk in ...``, checked at the end."""

    def get_to_file(name: str, target: Any) -> object:
        """Write the object to a path (atomically) or a binary file object; fires
        with its ObjectInfo."""

    def get_to_consumer(name: str, consumer: Any) -> object:
        """Write the object to an IConsumer; fires with its ObjectInfo."""

    def get_info(name: str, show_deleted: bool = False) -> object:
        """The object's ObjectInfo."""

    def update_meta(
        name: str,
        *,
        new_name: str | None = None,
        description: Any = None,
        headers: Any = None,
        metadata: Any = None,
    ) -> object:
        """Rename the object or change its description, headers or metadata; what is
        not given is kept."""

    def add_link(name: str, target: Any) -> object:
        """A link to another object (an ObjectInfo)."""

    def add_bucket_link(name: str, bucket: Any) -> object:
        """A link to another bucket."""

    def delete(name: str) -> object:
        """Delete the object."""

    def list(show_deleted: bool = False) -> object:
        """Every object's ObjectInfo."""

    def watch(
        *, include_history: bool = False, ignore_deletes: bool = False,
        updates_only: bool = False, max_pending: int = 4096,
    ) -> object:
        """An ObjectWatcher: ``async for info in watcher``."""

    def status() -> object:
        """The store's status."""

    def seal() -> object:
        """Seal the store: no more changes."""
