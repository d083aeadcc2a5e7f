"""Word that a stream or a consumer was deleted, for the readers that would otherwise
learn it only from missed heartbeats.

The server announces every deletion in the account (the JetStream advisories of its
documentation): ``$JS.EVENT.ADVISORY.STREAM.DELETED.<stream>`` and
``$JS.EVENT.ADVISORY.CONSUMER.DELETED.<stream>.<consumer>``. :class:`DeletionNotices`,
one per client, subscribes to them while a reader wants them: one subscription to every
stream's deletion (``...STREAM.DELETED.*``, rare and small), and one per watched stream
to its consumers' deletions (so a reader does not hear of every consumer the account
deletes).

A notice is a hint, never a verdict: anyone may publish to those subjects, and a stream
of the same name may live in another JetStream domain. The reader told asks the
JetStream API (its own context's) whether its consumer or stream is gone and acts only
on that answer. The payload is not read at all; the subject names what was deleted.

An account that may not subscribe to ``$JS.EVENT.>`` gets one permission error
reported (as any refused subscription is), and the notices stop for that client; the
readers still ask at their first missed heartbeat.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.logger import Logger

from txnats.errors import NatsError, PermissionViolationError

if TYPE_CHECKING:
    from txnats.client import Client
    from txnats.protocol.events import Msg
    from txnats.subscription import Subscription

__all__ = ["CONSUMER_DELETED", "STREAM_DELETED", "DeletionNotices", "notices_for"]

log = Logger()

STREAM_DELETED = "$JS.EVENT.ADVISORY.STREAM.DELETED"
CONSUMER_DELETED = "$JS.EVENT.ADVISORY.CONSUMER.DELETED"

#: ``on_notice(consumer)``: ``""`` when the stream was deleted, else the consumer's name.
OnNotice = Callable[[str], object]


class DeletionNotices:
    """The deletion advisories of one client's account, handed to registered readers."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._readers: dict[str, dict[int, OnNotice]] = {}
        self._streams_sub: Subscription | None = None
        self._consumer_subs: dict[str, Subscription] = {}
        self._ids = 0
        #: True once the server refused a subscription: no more are tried.
        self.refused = False

    def watch(self, stream: str, on_notice: OnNotice) -> Callable[[], None]:
        """Call ``on_notice`` when ``stream`` (or one of its consumers) may have been
        deleted; returns the function that stops it (harmless twice)."""
        self._ids += 1
        key = self._ids
        self._readers.setdefault(stream, {})[key] = on_notice
        if not self.refused and not self._client.is_closed:
            try:
                if self._streams_sub is None:
                    self._streams_sub = self._subscribe(f"{STREAM_DELETED}.*")
                if stream not in self._consumer_subs:
                    self._consumer_subs[stream] = self._subscribe(
                        f"{CONSUMER_DELETED}.{stream}.*"
                    )
            except NatsError as e:  # a stream name no subject can hold: heartbeats only
                log.debug("No deletion notices for {stream}: {error}", stream=stream, error=e)

        def unwatch() -> None:
            readers = self._readers.get(stream)
            if readers is None or readers.pop(key, None) is None:
                return
            if not readers:
                del self._readers[stream]
                sub = self._consumer_subs.pop(stream, None)
                if sub is not None and sub.is_active:
                    sub.unsubscribe()
            if not self._readers and self._streams_sub is not None:
                sub, self._streams_sub = self._streams_sub, None
                if sub.is_active:
                    sub.unsubscribe()

        return unwatch

    def _subscribe(self, subject: str) -> Subscription:
        sub = self._client.subscribe(subject, self._on_advisory)
        sub.when_ended().addBoth(lambda _: self._ended(subject, sub))
        return sub

    def _ended(self, subject: str, sub: Subscription) -> None:
        if isinstance(sub.end_reason, PermissionViolationError) and not self.refused:
            self.refused = True
            log.info("Deletion advisories refused ({subject}); readers rely on heartbeats",
                     subject=subject)
        if self._streams_sub is sub:
            self._streams_sub = None
        for stream, s in list(self._consumer_subs.items()):
            if s is sub:
                del self._consumer_subs[stream]

    def _on_advisory(self, msg: Msg) -> None:
        tokens = msg.subject.split(".")
        # $JS.EVENT.ADVISORY.STREAM.DELETED.<stream> / ...CONSUMER.DELETED.<stream>.<c>
        if len(tokens) == 6 and tokens[3] == "STREAM":
            stream, consumer = tokens[5], ""
        elif len(tokens) == 7 and tokens[3] == "CONSUMER":
            stream, consumer = tokens[5], tokens[6]
        else:
            return
        for on_notice in list(self._readers.get(stream, {}).values()):
            on_notice(consumer)


_NOTICES: weakref.WeakKeyDictionary[Client, DeletionNotices] = weakref.WeakKeyDictionary()


def notices_for(client: Client) -> DeletionNotices:
    """The client's :class:`DeletionNotices` (made on first use)."""
    notices = _NOTICES.get(client)
    if notices is None:
        notices = _NOTICES[client] = DeletionNotices(client)
    return notices
