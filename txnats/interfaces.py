"""The public contracts, as zope.interface interfaces.

Classes declare them with ``@implementer``; test doubles that users write against them
can be checked with ``zope.interface.verify.verifyObject``.
"""

from __future__ import annotations

from typing import Any

from zope.interface import Attribute, Interface

__all__ = ["IClient", "IMsg", "ISubscription"]


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

    def subscribe(subject: str, handler: Any = None, queue: str | None = None) -> object:
        """Subscribe; returns an ISubscription."""

    def request(
        subject: str, data: bytes = b"", timeout: float | None = 1.0, headers: Any = None
    ) -> object:
        """Deferred firing with the first response."""

    def flush(timeout: float | None = 10.0) -> object:
        """Deferred firing once the server processed everything sent."""

    def drain() -> object:
        """Drain subscriptions, then close."""

    def close() -> object:
        """Close now."""

    def when_closed() -> object:
        """A fresh Deferred fired once closed."""
