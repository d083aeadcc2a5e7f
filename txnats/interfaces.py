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
    """A key-value bucket (ADR-8). Every operation returns a Deferred."""

    bucket = Attribute("The bucket's name (str).")

    def get(key: str, revision: int | None = None) -> object:
        """The latest Entry (or the one at ``revision``)."""

    def put(key: str, value: bytes) -> object:
        """Store ``value``; fires with the revision."""

    def create(key: str, value: bytes) -> object:
        """Store ``value`` only if ``key`` has none; fires with the revision."""

    def update(key: str, value: bytes, last: int) -> object:
        """Store ``value`` only if ``key``'s latest revision is ``last``."""

    def delete(key: str, last: int | None = None) -> object:
        """Mark ``key`` deleted (history kept)."""

    def purge(key: str, last: int | None = None) -> object:
        """Mark ``key`` purged (history removed)."""

    def keys(key_pattern: Any = ">") -> object:
        """The keys holding a value."""

    def history(key: str) -> object:
        """Every Entry still stored for ``key``, oldest first."""

    def watch(key_pattern: Any = ">") -> object:
        """A KeyWatcher: ``async for entry in watcher``."""

    def status() -> object:
        """The bucket's status."""


class IObjectStore(Interface):
    """An object store bucket (ADR-20). Every operation returns a Deferred."""

    bucket = Attribute("The bucket's name (str).")

    def put(name: str, data: Any) -> object:
        """Store an object (bytes or a binary file object); fires with its ObjectInfo."""

    def get(name: str) -> object:
        """The object's bytes, checked against its digest."""

    def get_info(name: str, show_deleted: bool = False) -> object:
        """The object's ObjectInfo."""

    def delete(name: str) -> object:
        """Delete the object."""

    def list(show_deleted: bool = False) -> object:
        """Every object's ObjectInfo."""

    def status() -> object:
        """The store's status."""
