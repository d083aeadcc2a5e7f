"""One drain of a client, step by step (see :meth:`txnats.Client.drain`).

1. Every subscription but the reply inboxes is unsubscribed, keeping what it holds;
   once the server has seen the UNSUBs (a PONG) no more input comes, and the drain
   waits for each to hand out what it holds.
2. Publishes are then refused (the client moves to ``DRAINING_PUBS``), and the drain
   waits for the requests already sent to end (an answer, or their own timeout).
3. A flush, and the client closes: the drain's result fires with the close.

``drain_timeout`` bounds it all: past it the client closes anyway and the result fails
with :class:`~txnats.errors.DrainTimeoutError`, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._registry import Subscriptions
from txnats.connection import NatsProtocol
from txnats.errors import DrainTimeoutError, NatsError

__all__ = ["Drain"]

log = Logger()


class Drain:
    """The steps of one drain; the client holds it in its ``Draining`` state.

    :param to_pubs: move the client to draining its publishes; False if it left the
        drain meanwhile (closed).
    :param replies: the Deferreds of the requests still waiting for answers.
    :param flush: the client's ``flush(None)``; :param close: its ``close()``.
    """

    def __init__(
        self,
        clock: IReactorTime,
        timeout: float,
        subs: Subscriptions,
        *,
        to_pubs: Callable[[], bool],
        replies: Callable[[], list[Deferred[Any]]],
        flush: Callable[[], Deferred[None]],
        close: Callable[[], Deferred[None]],
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._subs = subs
        self._to_pubs = to_pubs
        self._replies = replies
        self._flush = flush
        self._close = close
        #: Fires once the drain is over (the client closed), or fails.
        self.result: Deferred[None] = Deferred()
        self._expired = False

    def start(self, proto: NatsProtocol, later: frozenset[int]) -> None:
        """Begin on ``proto``; the subscriptions whose sids are in ``later`` (reply
        inboxes) are left for step 2."""
        subs, ended = self._subs.begin_drain(proto, later)
        self._timer = self._clock.callLater(self._timeout, self._expire)

        def subs_flushed(_: object) -> Deferred[Any]:
            self._subs.input_done(subs)
            return DeferredList(ended)

        proto.ping().addCallback(subs_flushed).addCallback(self._subs_done).addBoth(
            self._finished
        )

    def _subs_done(self, _: object) -> Deferred[Any] | None:
        if not self._to_pubs():
            return None
        # Requests already sent get their answer (or time out); then flush, close.
        return DeferredList(self._replies()).addCallback(lambda _: self._flush())

    def _finished(self, res: object) -> None:
        if self._timer.active():
            self._timer.cancel()
        result = self.result
        if result.called or self._expired:
            return  # (the deadline answered already, or is answering)
        if isinstance(res, Failure):
            err = res.value
            self._close()
            result.errback(res if isinstance(err, NatsError) else Failure(NatsError(str(err))))
            return
        self._close().chainDeferred(result)

    def _expire(self) -> None:
        if not self.result.called:
            self._expired = True  # the close below may end the drain's steps: not twice
            log.warn("Drain did not finish within {t}s; closing", t=self._timeout)
            self._close()
            self.result.errback(DrainTimeoutError(f"drain did not finish in {self._timeout}s"))
