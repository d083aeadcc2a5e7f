"""The ordered consumer (ADR-17): a stream's messages in order, each once, no acks.

A push consumer with flow control and idle heartbeats, delivering to an inbox of ours.
Every delivery's consumer sequence must be one more than the last; on a gap, on a
heartbeat saying we missed something, on missed heartbeats, when the server deletes
the consumer, or after a reconnection (the server may have restarted and lost it), it
is recreated to start after the last stream sequence we handed on. Key-value watches
and object gets are built on it; ``js.ordered_consumer()`` hands it to applications,
with a handler or as :class:`OrderedMessages` to iterate.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import (
    ConsumerNotFoundError,
    JetStreamError,
    NatsError,
    OrderedConsumerError,
    StreamNotFoundError,
    SubscriptionClosedError,
    TimeoutError,
)
from txnats.jetstream._api import report
from txnats.jetstream._gone import notices_for
from txnats.jetstream.config import ConsumerConfig, ConsumerInfo
from txnats.jetstream.msg import JsMsg, MsgMetadata, parse_metadata, whole_number
from txnats.nuid import next_nuid
from txnats.protocol.events import Msg

if TYPE_CHECKING:
    from txnats.jetstream.context import JetStreamContext
    from txnats.subscription import Subscription

__all__ = ["HeldBuffer", "OrderedConsumer", "OrderedMessages"]

log = Logger()

#: Seconds before another attempt when recreating the consumer failed; it doubles
#: with each failure in a row, up to :data:`MAX_RETRY_WAIT`.
RETRY_WAIT = 0.5
#: The longest wait between two attempts to recreate the consumer.
MAX_RETRY_WAIT = 5.0
#: The attempts in a row that a one-shot reader (an object store get or listing)
#: allows before failing.
ONE_SHOT_RESETS = 10


class OrderedConsumer:
    """Deliver ``stream``'s messages (on ``filter_subjects``) to ``on_msg`` in order.

    ``deliver_policy`` is the server's (``all``, ``last``, ``new``,
    ``last_per_subject``, ``by_start_sequence`` with ``opt_start_seq``);
    ``headers_only`` leaves payloads out. ``on_msg`` gets each :class:`JsMsg`, its
    ``metadata`` already parsed; ``on_error`` gets the error that ends it, after which
    nothing more is delivered. ``start()`` fires with the first consumer's info once the
    consumer exists (its ``num_pending`` says how many messages are on their way).
    A Deferred or coroutine ``on_msg`` returns is awaited before the next message (and
    the server's flow control waits for it).

    ``resets`` counts the consumers recreated so far; ``hold_flow_control``, while
    true, keeps the server's flow control requests unanswered (so it stops sending)
    until :meth:`release_flow_control`.

    ``heartbeat`` is the server's idle heartbeat in seconds (finite, above zero; three
    missed ones reset the consumer); ``opt_start_seq`` a stream sequence of at least 1.
    A bad one raises :class:`InvalidArgumentError` here, before any I/O.

    A deleted stream ends it with :class:`StreamNotFoundError` (and a deleted consumer
    is recreated) at once where the account hears the server's deletion advisories
    (see :mod:`txnats.jetstream._gone`), else within about a heartbeat: the first
    missed one makes it ask the server whether its consumer and stream still exist.

    When recreating the consumer fails while connected (a timeout, no responders: a
    leader election, another JetStream domain out of reach), it tries again after
    0.5 s, doubling up to 5 s, logging each failure; it never gives up unless
    ``max_resets`` (attempts in a row, as nats.go's ``MaxResetAttempts``) is given,
    and then ends with :class:`OrderedConsumerError`. A deleted stream ends it at once.
    """

    def __init__(
        self,
        js: JetStreamContext,
        stream: str,
        on_msg: Callable[[JsMsg], object],
        *,
        filter_subjects: Sequence[str] = (),
        deliver_policy: str = "all",
        opt_start_seq: int | None = None,
        headers_only: bool = False,
        heartbeat: float = 5.0,
        on_error: Callable[[NatsError], object] | None = None,
        max_resets: int | None = None,
    ) -> None:
        check_timeout("heartbeat", heartbeat, allow_none=False)
        if max_resets is not None:
            check_count("max_resets", max_resets)
        self._max_resets = max_resets
        if opt_start_seq is not None:
            check_count("opt_start_seq", opt_start_seq)
        self.js = js
        self.stream = stream
        self._on_msg = on_msg
        self._on_error = on_error
        self._filters = list(filter_subjects)
        self._policy = deliver_policy
        self._start_seq = opt_start_seq
        self._headers_only = headers_only
        self._heartbeat = heartbeat
        self._cseq = 0  # last consumer sequence handed on
        self._sseq = 0  # last stream sequence handed on
        self._sub: Subscription | None = None
        self._name = ""
        self._stopped = False
        self._resets = 0
        self._creating = False
        self._gen = 0  # bumped per consumer created: deliveries to older inboxes are ignored
        self._seen = True  # anything arrived since the last heartbeat check
        self._silent = 0  # heartbeat checks (every quarter heartbeat) in a row with nothing
        self._asking = False  # a consumer-info request is under way
        self._unwatch: Callable[[], None] | None = None
        self._hb_timer: IDelayedCall | None = None
        #: Consumer deliveries so far (a reset starts a new consumer; this goes on).
        self.delivered = 0
        #: Consumers recreated so far (gaps, missed heartbeats, reconnections).
        self.resets = 0
        self.hold_flow_control = False
        self._held_fc: list[str] = []
        self._connected = True
        self._reset_when_created = False
        self._paused = False
        #: Times :meth:`pause` stopped it (a full reader's buffer).
        self.pauses = 0
        self._unlisten: Callable[[], None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Deferred[ConsumerInfo]:
        """Create the consumer; fires with its info."""
        self._unlisten = self.js.client.add_status_listener(self._on_state)
        self._unwatch = notices_for(self.js.client).watch(self.stream, self._notice)
        return self._create()

    def stop(self) -> None:
        """Stop delivering; the consumer is deleted (best effort; it also expires)."""
        if self._stopped:
            return
        self._stopped = True
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        self._drop_current()

    @property
    def name(self) -> str:
        """The name of the consumer delivering now ("" while none exists)."""
        return self._name

    @property
    def last_stream_sequence(self) -> int:
        """The stream sequence of the last message handed on (0: none yet)."""
        return self._sseq

    def release_flow_control(self) -> None:
        """Answer the flow control requests held while ``hold_flow_control`` was true."""
        held, self._held_fc = self._held_fc, []
        client = self.js.client
        for reply in held:
            if not client.is_closed:
                client.publish(reply, b"")

    def _on_state(self, state: str) -> None:
        if self._stopped:
            return
        if state == "CONNECTED":
            # Reconnected (or moved): the server may have lost the consumer, or its
            # deliveries while we were away. Start afresh after what we handed on.
            self._connected = True
            self._resets = 0
            if self._creating:  # the create under way may have met the old server
                self._reset_when_created = True
            else:
                self._reset("reconnected")
        elif state != "CLOSED":
            self._connected = False
            if self._hb_timer is not None and self._hb_timer.active():
                self._hb_timer.cancel()
            self._hb_timer = None

    def _drop_current(self) -> None:
        if self._hb_timer is not None and self._hb_timer.active():
            self._hb_timer.cancel()
        self._hb_timer = None
        if self._sub is not None:
            self._sub.unsubscribe()
            self._sub = None
        if self._name:
            name, self._name = self._name, ""
            if not self.js.client.is_closed:
                self.js.delete_consumer(self.stream, name).addErrback(lambda _: None)

    def _config(self, inbox: str) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "name": self._name,
            "deliver_subject": inbox,
            "ack_policy": "none",
            "max_deliver": 1,
            "flow_control": True,
            "idle_heartbeat": int(self._heartbeat * 1e9),
            "mem_storage": True,
            "num_replicas": 1,
            "inactive_threshold": int(300 * 1e9),
            "headers_only": self._headers_only,
        }
        if self._sseq:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = self._sseq + 1
        else:
            cfg["deliver_policy"] = self._policy
            if self._start_seq is not None:
                cfg["opt_start_seq"] = self._start_seq
        if len(self._filters) == 1:
            cfg["filter_subject"] = self._filters[0]
        elif self._filters:
            cfg["filter_subjects"] = self._filters
        return cfg

    def _create(self) -> Deferred[ConsumerInfo]:
        client = self.js.client
        self._creating = True
        self._cseq = 0
        self._name = next_nuid()
        inbox = client.new_inbox()
        # Back-pressure, not drops: a delivery dropped here would only cost a reset,
        # but pausing the socket is cheaper and keeps the order without one.
        self._gen += 1
        gen = self._gen

        def deliver(msg: Msg) -> Deferred[Any] | None:
            if gen == self._gen:
                return self._deliver(msg)
            return None

        self._sub = client.subscribe(inbox, deliver, backpressure=True)
        d = self.js.add_consumer(self.stream, ConsumerConfig.from_json(self._config(inbox)))

        def created(info: ConsumerInfo) -> ConsumerInfo:
            self._creating = False
            self._resets = 0
            if self._paused:  # paused while it was being made: it goes again
                self._drop_current()
                return info
            self._seen = True
            self._silent = 0
            self._schedule_hb_check()
            if self._reset_when_created:
                self._reset_when_created = False
                self._reset("reconnected while creating")
            return info

        def failed(f: Failure) -> Failure:
            self._creating = False
            self._reset_when_created = False
            if self._sub is not None:
                self._sub.unsubscribe()
                self._sub = None
            self._name = ""
            return f

        return d.addCallbacks(created, failed)

    def _schedule_hb_check(self) -> None:
        if self._stopped or not self._connected:
            return
        self._hb_timer = self.js.client.clock.callLater(self._heartbeat / 4, self._hb_check)

    def _hb_check(self) -> None:
        # Every quarter heartbeat: silence for a heartbeat (four checks) asks whether
        # the consumer and its stream still exist; for three (twelve) resets it.
        self._hb_timer = None
        if self._seen:
            self._seen = False
            self._silent = 0
        else:
            self._silent += 1
            if self._silent >= 12:
                self._silent = 0
                self._reset("missed heartbeats")
                return
            if self._silent == 4:
                self._ask()
        self._schedule_hb_check()

    def _notice(self, consumer: str) -> None:
        """A deletion advisory for our stream, or for a consumer of it."""
        if not consumer or (consumer == self._name and self._name):
            self._ask()

    def _ask(self) -> None:
        """Ask the server whether the consumer (and its stream) still exist: a stream
        that is gone ends this reader, a consumer that is gone is made again."""
        if self._stopped or self._creating or self._asking or not self._name:
            return
        self._asking = True
        name = self._name

        def answered(result: object) -> None:
            self._asking = False
            if not isinstance(result, Failure) or self._stopped:
                return
            if result.check(StreamNotFoundError):
                self._fail(result.value)  # type: ignore[arg-type]
            elif result.check(ConsumerNotFoundError) and name == self._name:
                self._reset("the consumer was deleted")

        self.js.consumer_info(self.stream, name).addBoth(answered)

    # ------------------------------------------------------------------ delivery
    def _deliver(self, msg: Msg) -> Deferred[Any] | None:
        if self._stopped:
            return None
        self._seen = True
        client = self.js.client
        h = msg.headers
        if h is not None and h.status is not None:
            if h.status == 100:
                if msg.reply:  # flow control: answer so the server sends more
                    if self.hold_flow_control:
                        self._held_fc.append(msg.reply)
                    else:
                        client.publish(msg.reply, b"")
                    return None
                stalled = h.get("Nats-Consumer-Stalled")
                if stalled:  # a flow control request we missed: the same rule applies
                    if self.hold_flow_control:
                        self._held_fc.append(stalled)
                    else:
                        client.publish(stalled, b"")
                last = whole_number(h.get("Nats-Last-Consumer"))
                if last is not None and last != self._cseq:
                    self._reset(f"heartbeat says consumer sequence {last}, we have {self._cseq}")
                return None
            self._reset(f"status {h.status} {h.description or ''}".strip())
            return None
        try:
            meta: MsgMetadata = parse_metadata(msg.reply)
        except NatsError as e:  # another client's publish to our inbox: reported, skipped
            log.warn("Ordered consumer on {stream} got a non-JetStream message", stream=self.stream)
            report(client, JetStreamError(
                f"ordered consumer on {self.stream!r} skipped a message on {msg.subject!r}"
                f" that is no JetStream delivery: {e}"
            ))
            return None
        if meta.sequence.consumer != self._cseq + 1:
            self._reset(f"gap: consumer sequence {meta.sequence.consumer} after {self._cseq}")
            return None
        self._cseq = meta.sequence.consumer
        self._sseq = meta.sequence.stream
        self.delivered += 1
        result = self._on_msg(JsMsg(msg, client, metadata=meta))
        if isinstance(result, Deferred):
            return result
        if inspect.iscoroutine(result):
            return ensureDeferred(result)
        return None

    # ------------------------------------------------------------------ pausing
    @property
    def paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._paused

    def pause(self) -> None:
        """Stop deliveries at once: what arrived and was not handed on yet is dropped
        and the consumer deleted. :meth:`resume` makes a new one, starting after the
        last message handed on (as a reset does), so nothing is lost or repeated."""
        if self._stopped or self._paused:
            return
        self._paused = True
        self.pauses += 1
        self._gen += 1  # deliveries already received are dropped
        if not self._creating:
            self._drop_current()

    def resume(self) -> None:
        """Deliver again after :meth:`pause`."""
        if not self._paused or self._stopped:
            return
        self._paused = False
        if self._creating:  # (its deliveries go to the generation before the pause)
            self._reset_when_created = True
            return
        self._create().addErrback(self._reset_failed)

    def _reset(self, why: str) -> None:
        if self._stopped or self._creating or self._paused:
            return
        self.resets += 1
        self._resets += 1
        limit = self._max_resets
        if limit is not None and self._resets > limit:
            self._fail(OrderedConsumerError(f"gave up after {limit} resets in a row ({why})"))
            return
        log.info("Ordered consumer on {stream} resets: {why}", stream=self.stream, why=why)
        self._drop_current()
        self._create().addErrback(self._reset_failed)

    def _reset_failed(self, f: Failure) -> None:
        e = f.value
        if (
            isinstance(e, StreamNotFoundError) or not isinstance(e, NatsError)
            or self.js.client.is_closed
        ):
            self._fail(e if isinstance(e, NatsError) else OrderedConsumerError(str(e)))
            return
        if not self._connected:
            return  # the next CONNECTED recreates it
        # Transient (a timeout or no responders while the cluster moves): try again,
        # less and less often.
        wait = min(RETRY_WAIT * 2 ** max(self._resets - 1, 0), MAX_RETRY_WAIT)
        log.warn("Ordered consumer on {stream}: recreating it failed ({error}); "
                 "trying again in {wait} s", stream=self.stream, error=e, wait=wait)
        self.js.client.clock.callLater(wait, self._reset, f"recreate failed: {e}")

    def _fail(self, e: NatsError) -> None:
        if self._stopped:
            return
        self.stop()
        if self._on_error is not None:
            self._on_error(e)
        else:
            log.error("Ordered consumer on {stream} ended: {error}", stream=self.stream, error=e)


T = TypeVar("T")


class HeldBuffer(Generic[T]):
    """What an ordered consumer delivered, for a reader taking it at its own pace.

    An item goes to the oldest waiting reader, else into :attr:`items`. Once ``high``
    items wait the consumer is paused (:meth:`OrderedConsumer.pause`: it is deleted,
    and what it had sent on its way is dropped unread), and once the reader has taken
    the queue down to half it is resumed after the last item queued. So at most
    ``high`` items ever wait, and nothing is lost or given twice. (Holding the server's
    flow control instead, as before, let it run on to its next flow-control request:
    a queue bounded at 50 held 19,830 of 20,000 entries.)
    """

    def __init__(self, high: int) -> None:
        self.high = high
        self.items: deque[T] = deque()
        #: Readers waiting for the next item (what they get is the owner's business).
        self.waiters: deque[Deferred[Any]] = deque()
        #: The consumer whose flow control is held; set once it exists.
        self.consumer: OrderedConsumer | None = None

    def push(self, item: T) -> None:
        if self.waiters:
            self.waiters.popleft().callback(item)
            return
        self.items.append(item)
        if len(self.items) >= self.high and self.consumer is not None:
            self.consumer.pause()

    def take(self) -> T:
        """The oldest item (there must be one); resumes the consumer at half."""
        item = self.items.popleft()
        c = self.consumer
        if c is not None and c.paused and len(self.items) <= self.high // 2:
            c.resume()
        return item

    def wait(self) -> Deferred[Any]:
        """A Deferred for the next item pushed; cancelling it withdraws the read."""
        d: Deferred[Any] = Deferred(self.waiters.remove)
        self.waiters.append(d)
        return d

    def release_waiters(self) -> list[Deferred[Any]]:
        """Take every waiting reader out (to be told the end)."""
        waiters = list(self.waiters)
        self.waiters.clear()
        return waiters


class OrderedMessages:
    """An ordered consumer read with ``async for msg in it`` or ``await it.next_msg()``
    (``js.ordered_consumer(stream)`` without a handler).

    Messages wait in a buffer of at most ``high_water``: once it is full the consumer
    is paused (deleted; what was on its way is dropped) and made again, after the last
    message buffered, once the reader has taken the buffer down to half (see
    :class:`HeldBuffer`). The loop ends after :meth:`stop`; if the consumer
    gave up (its stream deleted, recreation failing), it raises that error.
    """

    def __init__(
        self, js: JetStreamContext, stream: str, *, high_water: int = 4096, **options: Any
    ) -> None:
        self._buf: HeldBuffer[JsMsg] = HeldBuffer(check_count("high_water", high_water))
        self._error: NatsError | None = None
        self._ended = False
        self.consumer = OrderedConsumer(
            js, stream, self._buf.push, on_error=self._fail, **options
        )
        self._buf.consumer = self.consumer

    def start(self) -> Deferred[OrderedMessages]:
        """Create the consumer; fires with this reader."""
        return self.consumer.start().addCallback(lambda _: self)

    def stop(self) -> None:
        """Stop: the consumer is deleted; the loop ends once the buffer is read."""
        self.consumer.stop()
        self._end()

    def _end(self) -> None:
        self._ended = True
        for w in self._buf.release_waiters():
            w.errback(self._error or SubscriptionClosedError("ordered consumer stopped"))

    def _fail(self, e: NatsError) -> None:
        self._error = e
        log.error("Ordered consumer on {stream} ended: {error}",
                  stream=self.consumer.stream, error=e)
        self._end()

    @property
    def buffered(self) -> int:
        """Messages received and not yet read."""
        return len(self._buf.items)

    def next_msg(self, timeout: float | None = None) -> Deferred[JsMsg]:
        """The next message; :class:`TimeoutError` after ``timeout`` seconds,
        :class:`SubscriptionClosedError` (or the error that ended it) once it has
        ended and the buffer is empty."""
        try:
            check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        if self._buf.items:
            return succeed(self._buf.take())
        if self._ended:
            return fail(self._error or SubscriptionClosedError("ordered consumer stopped"))
        d: Deferred[JsMsg] = self._buf.wait()
        if timeout is not None:
            clock = self.consumer.js.client.clock
            waiters = self._buf.waiters  # (the same deque for the buffer's life)

            def expire() -> None:
                if d in waiters:
                    waiters.remove(d)
                    d.errback(TimeoutError(f"no ordered message within {timeout:g} s"))

            timer = clock.callLater(timeout, expire)

            def stop_timer(result: Any) -> Any:
                if timer.active():
                    timer.cancel()
                return result

            d.addBoth(stop_timer)
        return d

    def __aiter__(self) -> OrderedMessages:
        return self

    async def __anext__(self) -> JsMsg:
        if self._buf.items:
            return self._buf.take()
        try:
            return await self.next_msg()
        except SubscriptionClosedError:
            raise StopAsyncIteration from None
