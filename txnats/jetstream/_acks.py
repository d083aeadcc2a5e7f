"""Where ``publish_async`` acknowledgements arrive: one inbox for all of a context's.

The context counts the publishes it sends and keeps the window (how many may await
their acknowledgement, who waits for room); :class:`AckInbox` matches each
acknowledgement to its publish, fails those that time out or that a close cuts off, and
tells the context, through the ``done`` callback it was given, whenever one ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall

from txnats.errors import ConnectionClosedError, NatsError, NoStreamResponseError, TimeoutError
from txnats.jetstream._api import PubAck, parse_pub_ack
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput

if TYPE_CHECKING:
    from txnats.client import Client

__all__ = ["AckInbox"]


class _AckHost(Protocol):
    """What the inbox needs of its JetStream context (:class:`JetStreamContext` has it)."""

    @property
    def client(self) -> Client: ...

    @property
    def timeout(self) -> float: ...


class AckInbox:
    """``publish_async``'s acknowledgements: one wildcard inbox subscription,
    token -> Deferred, and coarse timeouts.

    Every publish gets the same timeout, so instead of a deadline each, pending
    publishes sit in generations: new ones join the youngest, and every half timeout
    the oldest generation fails with :class:`TimeoutError` and a new one starts. That
    keeps a publish down to one Deferred and one dict entry (a window of thousands of
    them otherwise costs more in the garbage collector than in the work).

    ``done`` is called once for every publish that ends (acknowledged, refused, timed
    out or cut off by a close), before its Deferred fires.
    """

    def __init__(self, host: _AckHost, done: Callable[[], None]) -> None:
        self._host = host
        self._done = done
        client = host.client
        self.prefix = f"{client.new_inbox()}."
        self._plen = len(self.prefix)
        self._next = 0
        self._gens: list[dict[str, Deferred[PubAck]]] = [{}, {}, {}]
        self._timer: IDelayedCall | None = None
        self._sub = client.subscribe(
            self.prefix + "*", self._on_ack,
            pending_msgs_limit=1 << 20, pending_bytes_limit=1 << 30,
        )
        client.when_closed().addBoth(self._closed)

    def publish(self, subject: str, data: bytes, headers: HeaderInput | None) -> Deferred[PubAck]:
        """Publish with a reply to this inbox; the Deferred fires with the acknowledgement.

        If the client refuses the publish, this raises and nothing is pending.
        """
        self._next += 1
        token = f"{self._next:x}"
        client = self._host.client
        client.publish(subject, data, reply=self.prefix + token, headers=headers)
        # No canceller: cancelling only stops the caller waiting (Twisted then ignores
        # the result); the message is in flight all the same, so it keeps its place in
        # the window until its acknowledgement or its timeout. (A bound-method
        # canceller would also be one more object per publish for the GC to follow.)
        d: Deferred[PubAck] = Deferred()
        self._gens[0][token] = d
        if self._timer is None:
            self._timer = client.clock.callLater(self._host.timeout / 2, self._rotate)
        return d

    def _take(self, token: str) -> Deferred[PubAck] | None:
        for gen in self._gens:
            d = gen.pop(token, None)
            if d is not None:
                self._done()
                return d
        return None

    def _on_ack(self, msg: Msg) -> None:
        d = self._take(msg.subject[self._plen:])
        if d is None:
            return  # timed out or cancelled already: that was reported then
        h = msg.headers
        if h is not None and h.status == 503:
            d.errback(NoStreamResponseError("no stream answers this publish"))
            return
        try:
            ack = parse_pub_ack(msg)
        except NatsError as e:
            d.errback(e)
            return
        d.callback(ack)

    def _rotate(self) -> None:
        self._timer = None
        gens = self._gens
        expired = gens.pop()
        gens.insert(0, {})
        for _ in expired:
            self._done()
        for d in expired.values():
            d.errback(TimeoutError(f"no acknowledgement within {self._host.timeout}s"))
        if any(gens):
            self._timer = self._host.client.clock.callLater(
                self._host.timeout / 2, self._rotate
            )

    def _closed(self, _: object) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        pending = [d for gen in self._gens for d in gen.values()]
        self._gens = [{}, {}, {}]
        for _d in pending:
            self._done()
        for d in pending:
            d.errback(ConnectionClosedError("client closed before the acknowledgement came"))
