"""The public contracts, as zope.interface interfaces.

Classes declare them with ``@implementer``; test doubles that users write against them
can be checked with ``zope.interface.verify.verifyObject``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from zope.interface import Attribute, Interface

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from txnats.protocol.events import Msg
    from txnats.protocol.headers import HeaderInput

__all__ = [
    "Handler", "IClient", "IJsMsg", "IKeyValue", "IMsg", "IObjectStore", "IReader", "ISubscription",
]


#: A subscription's handler: called with each message; it may return None, a Deferred
#: or a coroutine, which is awaited before the next message.
Handler: TypeAlias = (
    "Callable[[Msg], Deferred[Any] | Coroutine[Any, Any, Any] | Awaitable[Any] | None]"
)


class IMsg(Interface):
    """A message received from the server."""

    subject = Attribute("The subject it was published to (str).")
    reply = Attribute("The reply subject (str), or None.")
    data = Attribute("The payload (bytes).")
    headers = Attribute(
        "The headers (txnats.Headers), or None; a block that could not be parsed is an "
        "empty Headers whose ``raw`` holds it."
    )
    sid = Attribute("The id of the subscription it arrived on (int).")

    def respond(data: bytes = b"", headers: HeaderInput | None = None) -> None:
        """Publish ``data`` to the reply subject; raises NoReplySubjectError without one,
        and what :meth:`IClient.publish` raises."""


class IReader(Interface):
    """Something messages (or entries) are read from, one at a time: a subscription
    without a handler, and every JetStream, key-value and object-store reader.

    Every reader offers the same two ways to read, with the same meaning:
    ``await reader.next_msg(timeout)`` and ``async for item in reader``.
    """

    pending = Attribute("Items waiting to be taken (int).")

    def next_msg(timeout: float | None = 1.0) -> Deferred[Any]:
        """A Deferred firing with the next item (at once if one is waiting).

        ``timeout`` is in seconds (None: wait for as long as it takes); past it the
        Deferred fails with :class:`~txnats.errors.TimeoutError`. Once the reader has
        ended and nothing is left, it fails with the reason it ended. Cancelling it
        while it waits withdraws the read: nothing is lost.
        """

    def __aiter__() -> Any:
        """``async for item in reader``: the items in order; the loop ends when the
        reader ends normally, and raises the reason when it ends for another."""


class ISubscription(IReader):
    """Interest in a subject: its mailbox, counters and ending."""

    sid = Attribute("Subscription id (int).")
    subject = Attribute("The subject (str), wildcards allowed.")
    queue = Attribute("The queue group (str), or None.")
    max_msgs = Attribute("The auto-unsubscribe limit (int), or None.")
    backpressure = Attribute("True when a full mailbox pauses reading instead of dropping.")
    pending_msgs = Attribute("Messages waiting in the mailbox (int).")
    pending_bytes = Attribute("Payload bytes waiting in the mailbox (int).")
    received = Attribute("Messages that arrived (int): delivered + dropped + pending_msgs.")
    delivered = Attribute("Messages handed to the handler or a reader (int).")
    dropped = Attribute("Messages dropped over the pending limits (int).")
    is_active = Attribute("True until the subscription has ended (bool).")
    end_reason = Attribute("Why it ended (a NatsError), or None while it has not.")

    def unsubscribe() -> None:
        """Stop interest now; what was received is still handed out."""

    def auto_unsubscribe(max_msgs: int) -> None:
        """Unsubscribe once ``max_msgs`` messages in all have arrived."""

    def drain(timeout: float | None = None) -> Deferred[None]:
        """Unsubscribe; fires once everything received before has been handled
        (:class:`~txnats.errors.DrainTimeoutError` past ``timeout`` seconds)."""

    def when_ended() -> Deferred[None]:
        """A fresh Deferred that fires once the subscription has ended."""


class IClient(Interface):
    """A connection to a NATS system (:class:`txnats.Client`)."""

    options = Attribute("The txnats.Options the client was made with.")
    state = Attribute("The txnats.ClientState it is in.")
    clock = Attribute("The IReactorTime it times everything with.")
    stats = Attribute("A txnats.Statistics snapshot: messages and bytes in/out, reconnects.")
    server_info = Attribute("The INFO of the server it is (or was last) connected to (dict).")
    is_connected = Attribute("True while connected (bool).")
    is_closed = Attribute("True once closed (bool).")
    is_reconnecting = Attribute("True while reconnecting (bool).")
    is_draining = Attribute("True while draining (bool).")
    connected_url = Attribute("The current server's URL, credentials redacted, or None.")
    client_id = Attribute("The id the server gave this connection (int), or None.")
    servers = Attribute("The server pool's URLs, credentials redacted (list of str).")
    discovered_servers = Attribute("The pool's servers a cluster announced (list of str).")
    max_payload = Attribute("The largest message, headers included, the server takes (bytes).")
    max_control_line = Attribute("The longest control line the client sends (bytes).")
    pending_bytes = Attribute("Bytes published and not yet handed to the socket (int).")
    subscriptions = Attribute("The active subscriptions (list of ISubscription).")
    last_error = Attribute(
        "Why the latest connection attempt failed or the connection was lost (a "
        "NatsError), or None."
    )

    def publish(
        subject: str, data: bytes = b"", reply: str | None = None,
        headers: HeaderInput | None = None,
    ) -> None:
        """Publish a message (buffered: it leaves at the end of the reactor turn).
        Raises, having queued nothing, BadSubjectError, ControlLineTooLongError,
        BadHeaderError, MaxPayloadError, HeadersNotSupportedError,
        OutboundBufferFullError, ConnectionDrainingError or ConnectionClosedError."""

    def subscribe(
        subject: str,
        handler: Handler | None = None,
        *,
        queue: str | None = None,
        max_msgs: int | None = None,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
        concurrency: int = 1,
        backpressure: bool = False,
        on_drop: Callable[[Msg], object] | None = None,
    ) -> ISubscription:
        """Subscribe; the handler's messages come in order (with ``concurrency`` > 1,
        that many at once); ``on_drop(msg)`` hears of each message dropped over the
        pending limits. Raises BadSubjectError, ControlLineTooLongError,
        InvalidArgumentError, ConnectionClosedError or ConnectionDrainingError."""

    def request(
        subject: str, data: bytes = b"", timeout: float | None = 1.0,
        headers: HeaderInput | None = None,
    ) -> Deferred[Msg]:
        """Fires with the first response; fails with TimeoutError after ``timeout``
        seconds, NoRespondersError when nobody listens, ConnectionClosedError."""

    def request_many(
        subject: str,
        data: bytes = b"",
        *,
        timeout: float = 1.0,
        stall: float | None = None,
        max_msgs: int | None = None,
        sentinel: Callable[[Msg], bool] | None = None,
        headers: HeaderInput | None = None,
    ) -> Deferred[list[Msg]]:
        """Fires with the responses gathered until ``timeout`` or ``stall`` seconds,
        ``max_msgs`` responses or a ``sentinel`` one (ADR-47)."""

    def new_inbox() -> str:
        """A unique subject under the inbox prefix."""

    def flush(timeout: float | None = 10.0) -> Deferred[None]:
        """Fires once the server has processed everything sent (FlushTimeoutError
        after ``timeout`` seconds)."""

    def rtt(timeout: float | None = 10.0) -> Deferred[float]:
        """Fires with the round-trip time to the server, in seconds."""

    def wait_for_room() -> Deferred[None]:
        """Fires once the outbound buffer has been handed to the socket."""

    def jetstream(**options: Any) -> Any:
        """A JetStream context on this connection (txnats.jetstream.JetStreamContext)."""

    def start() -> Deferred[Any]:
        """Make the first connection of a client built directly; fires with it."""

    def drain() -> Deferred[None]:
        """Drain the subscriptions, let the requests in flight end, flush and close."""

    def close() -> Deferred[None]:
        """Close now; fires once the connection is gone."""

    def when_closed() -> Deferred[None]:
        """A fresh Deferred that fires once the client is closed."""

    def add_status_listener(fn: Callable[[Any], object]) -> Callable[[], None]:
        """Call ``fn(state)`` after every state change; returns a remover."""

    def set_servers(servers: str | Sequence[str]) -> None:
        """Replace the server pool (used from the next reconnection on)."""

    def force_reconnect() -> None:
        """Close the current connection and reconnect."""

    def schedule(fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` in the client's next batch of work."""


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
