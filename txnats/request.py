"""The request multiplexer: one wildcard inbox subscription for every request.

Each request gets a token; its reply subject is ``<prefix>.<token>`` under one
subscription to ``<prefix>.*``. A response fires the token's Deferred; a ``503`` status
(no responders) fails it at once; a timeout or a cancel removes the token, and a late
response is dropped quietly. If the inbox subscription has to drop a response (its
pending limits), the request it belonged to fails at once with ``SlowConsumerError``
instead of waiting for its timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IDelayedCall
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import (
    ConnectionClosedError,
    InvalidArgumentTypeError,
    NatsError,
    NoRespondersError,
    SlowConsumerError,
    TimeoutError,
)
from txnats.protocol.commands import check_control_line, pub_frame, publish_subject, shorten
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput, encode_headers

if TYPE_CHECKING:
    from txnats.client import Client
    from txnats.subscription import Subscription

__all__ = ["REPLY_ROOM", "RequestMux", "check_request_line", "is_no_responders", "request_many"]


#: Pending limits of the shared inbox subscription: large, since every request's
#: response passes through it.
MUX_PENDING_MSGS = 1 << 20
MUX_PENDING_BYTES = 1 << 30


def is_no_responders(msg: Msg) -> bool:
    """True for the server's 503 status message (no subscriber for a request)."""
    h = msg.headers
    return h is not None and h.status == 503 and not msg.data


#: What a request's reply subject adds to its control line past the inbox prefix: the
#: dot, a 22-character NUID, a dot, a token of up to 16 hex digits, and the sizes with
#: their spaces (up to 10 digits each).
REPLY_ROOM = 1 + 22 + 1 + 16 + 2 * 11 + 2


def check_request_line(
    subj: bytes, prefix: str, size: int, hdr: bytes | None, limit: int
) -> None:
    """Raise :class:`ControlLineTooLongError` if a request to ``subj`` would need a
    control line over ``limit`` bytes, before its inbox is made: its reply subject is
    ``prefix`` (the inbox's, or the inbox prefix and room for a NUID) and a token of up
    to 16 hex digits; ``size`` is the message's (headers included), ``hdr`` its
    encoded header block."""
    reply = prefix.encode() + b"f" * 16
    frame = pub_frame(subj, b"", reply, hdr)[0]
    line = frame[: frame.find(b"\r\n")].rsplit(b" ", 1)[0] + b" %d" % size
    check_control_line(line, limit, "request " + shorten(subj.decode("utf-8", "replace")))


class _Pending:
    __slots__ = ("deferred", "subject", "timeout")

    def __init__(self, deferred: Deferred[Msg], subject: str, timeout: float | None):
        self.deferred = deferred
        self.subject = subject
        self.timeout = timeout


class RequestMux:
    """Owned by a client; created on its first request.

    :param client: the client it makes requests on.
    :param prefix: the inbox prefix of the reply subjects (ends with a dot).
    :param watch_drops: ``watch_drops(sub, fn)`` makes ``sub`` call ``fn(msg)`` for each
        message it drops over its pending limits (the client's registry).
    :param ended: told (with this mux) when the inbox has ended: the next request
        makes a new one.
    """

    def __init__(
        self,
        client: Client,
        prefix: str,
        *,
        watch_drops: Callable[[Subscription, Callable[[Msg], None]], None],
        ended: Callable[[RequestMux], None],
    ) -> None:
        self._client = client
        self._ended_cb = ended
        self._clock = client.clock
        #: Reply subjects are ``prefix + token``; ``prefix`` ends with a dot.
        self.prefix = prefix
        self._plen = len(prefix)
        self._pending: dict[str, _Pending] = {}
        self._next = 0
        # Request deadlines share one timed call, set for the earliest: (deadline, n,
        # token) in a heap. Answered requests leave their entry behind until it comes
        # up, or until the heap is rebuilt (see _compact).
        self._deadlines: list[tuple[float, int, str]] = []
        self._timer: IDelayedCall | None = None
        self._timer_at = 0.0
        # when_idle() callers, fired once no request is pending.
        self._idle: list[Deferred[None]] = []
        self.subscription: Subscription = client.subscribe(
            prefix + "*",
            self._on_response,
            pending_msgs_limit=MUX_PENDING_MSGS,
            pending_bytes_limit=MUX_PENDING_BYTES,
        )
        watch_drops(self.subscription, self._on_drop)
        self.subscription.when_ended().addCallback(self._ended)

    def __len__(self) -> int:
        return len(self._pending)

    def when_idle(self) -> Deferred[None]:
        """A fresh Deferred that fires (in a later batch) once no request is pending:
        each was answered, timed out, was cancelled or failed. A drain waits for it."""
        d: Deferred[None] = Deferred()
        self._idle.append(d)
        self._check_idle()
        return d

    def _check_idle(self) -> None:
        if not self._pending and self._idle:
            waiters, self._idle = self._idle, []
            for d in waiters:
                self._client.schedule(d.callback, None)

    def new_reply(self, subject: str, timeout: float | None) -> tuple[str, Deferred[Msg]]:
        """Register a request; return its reply subject and its Deferred."""
        self._next += 1
        token = f"{self._next:x}"
        d: Deferred[Msg] = Deferred(lambda _: self._cancel(token))
        if timeout is not None:
            clock = self._clock
            deadline = clock.seconds() + timeout
            if len(self._deadlines) > 1024 and len(self._deadlines) > 2 * len(self._pending):
                self._compact()  # (a new list: read self._deadlines after this)
            heappush(self._deadlines, (deadline, self._next, token))
            if self._timer is None or deadline < self._timer_at:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = clock.callLater(timeout, self._expire_due)
                self._timer_at = deadline
        self._pending[token] = _Pending(d, subject, timeout)
        return self.prefix + token, d

    def _compact(self) -> None:
        """Drop the deadlines of requests that already ended."""
        pending = self._pending
        self._deadlines = [e for e in self._deadlines if e[2] in pending]
        heapify(self._deadlines)

    def _expire_due(self) -> None:
        self._timer = None
        clock = self._clock
        now = clock.seconds()
        deadlines = self._deadlines
        pending = self._pending
        expired = []
        while deadlines and deadlines[0][0] <= now:
            p = pending.pop(heappop(deadlines)[2], None)
            if p is not None:
                expired.append(p)
        if deadlines:
            # Armed before the errbacks run: requests they make see the right timer.
            self._timer_at = deadlines[0][0]
            self._timer = clock.callLater(max(0.0, self._timer_at - now), self._expire_due)
        for p in expired:
            p.deferred.errback(
                Failure(TimeoutError(f"no response on {p.subject!r} within {p.timeout}s"))
            )
        self._check_idle()

    def _pop(self, token: str) -> _Pending | None:
        p = self._pending.pop(token, None)
        if not self._pending:
            # Every deadline left belongs to an ended request. The timer stays: the next
            # request will most likely need it (it finds nothing to do if not).
            self._deadlines.clear()
            if self._idle:
                self._check_idle()
        return p

    def forget(self, reply: str) -> None:
        """Drop a registration whose request could not be published."""
        self._pop(reply[self._plen :])
        if not self._pending and self._timer is not None:
            self._timer.cancel()  # no deadline is left behind for a request never sent
            self._timer = None

    def _cancel(self, token: str) -> None:
        self._pop(token)

    def _on_response(self, msg: Msg) -> None:
        p = self._pop(msg.subject[self._plen :])
        if p is None:
            return  # late or unknown: the request already ended
        if is_no_responders(msg):
            p.deferred.errback(NoRespondersError(f"no responders on {p.subject!r}"))
        else:
            p.deferred.callback(msg)

    def _on_drop(self, msg: Msg) -> None:
        p = self._pop(msg.subject[self._plen :])
        if p is not None:
            self._client.schedule(
                p.deferred.errback, SlowConsumerError(
                    f"response to request on {p.subject!r} dropped: inbox pending limits reached"
                ),
            )

    def _ended(self, _: object) -> None:
        """The inbox subscription ended (refused by the server, or the client closed)."""
        reason = self.subscription.end_reason
        self._ended_cb(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for token in list(self._pending):
            p = self._pop(token)
            if p is not None:
                p.deferred.errback(
                    reason
                    if isinstance(reason, Exception)
                    else ConnectionClosedError("request inbox ended")
                )

    def fail_subject(self, subject: str, error: Exception) -> None:
        """Fail the pending requests published to ``subject`` (publish was refused)."""
        for token, p in list(self._pending.items()):
            if p.subject == subject:
                self._pop(token)
                self._client.schedule(p.deferred.errback, error)


def _check_many(
    subject: str,
    data: bytes,
    timeout: float,
    stall: float | None,
    max_msgs: int | None,
    sentinel: Callable[[Msg], bool] | None,
    headers: HeaderInput | None,
) -> None:
    """Check request_many()'s arguments before its inbox is made."""
    check_timeout("timeout", timeout, allow_none=False)
    check_timeout("stall", stall)
    if max_msgs is not None:
        check_count("max_msgs", max_msgs)
    if sentinel is not None and not callable(sentinel):
        raise InvalidArgumentTypeError(f"sentinel must be callable, not {type(sentinel).__name__}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentTypeError(f"data must be bytes, not {type(data).__name__}")
    publish_subject(subject)
    if headers is not None:
        encode_headers(headers)


def request_many(
    client: Client,
    subject: str,
    data: bytes = b"",
    *,
    timeout: float = 1.0,
    stall: float | None = None,
    max_msgs: int | None = None,
    sentinel: Callable[[Msg], bool] | None = None,
    headers: HeaderInput | None = None,
    inboxes: set[int] | None = None,
) -> Deferred[list[Msg]]:
    """:meth:`txnats.Client.request_many`: a fresh inbox per call, on the client's public API.

    :param inboxes: the sids of reply inboxes that a drain leaves for last; this call's
        inbox is in it while it gathers.
    """
    try:
        _check_many(subject, data, timeout, stall, max_msgs, sentinel, headers)
    except NatsError as e:
        return fail(e)
    results: list[Msg] = []
    done: Deferred[list[Msg]] = Deferred(lambda _: finish(None))
    timers: dict[str, IDelayedCall] = {}
    clock = client.clock
    inbox = client.new_inbox()

    def finish(error: NatsError | None) -> None:
        for t in timers.values():
            if t.active():
                t.cancel()
        timers.clear()
        if inboxes is not None:
            inboxes.discard(sub.sid)
        if sub.is_active:
            sub.unsubscribe()
        if done.called:
            return
        if error is None:
            done.callback(results)
        else:
            done.errback(error)

    def on_msg(msg: Msg) -> None:
        if done.called:
            return
        if is_no_responders(msg):
            if results:
                finish(None)
            else:
                finish(NoRespondersError(f"no responders on {subject!r}"))
            return
        if sentinel is not None and sentinel(msg):
            finish(None)
            return
        results.append(msg)
        if max_msgs is not None and len(results) >= max_msgs:
            finish(None)
            return
        if stall is not None:
            old = timers.get("stall")
            if old is not None and old.active():
                old.reset(stall)
            else:
                timers["stall"] = clock.callLater(stall, finish, None)

    try:
        sub = client.subscribe(inbox, on_msg)
    except NatsError as e:
        return fail(e)
    try:
        client.publish(subject, data, inbox, headers)
    except NatsError as e:
        sub.unsubscribe()
        return fail(e)
    if inboxes is not None:
        inboxes.add(sub.sid)
    timers["total"] = clock.callLater(timeout, finish, None)
    return done

