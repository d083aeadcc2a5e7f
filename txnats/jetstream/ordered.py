"""The ordered consumer (ADR-17): a stream's messages in order, each once, no acks.

A push consumer with flow control and idle heartbeats, delivering to an inbox of ours.
Every delivery's consumer sequence must be one more than the last; on a gap, on a
heartbeat saying we missed something, on missed heartbeats or when the server deletes
the consumer, it is recreated to start after the last stream sequence we handed on.
Key-value watches and object gets are built on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_count, check_timeout
from txnats.errors import NatsError, OrderedConsumerError, StreamNotFoundError
from txnats.jetstream.config import ConsumerConfig, ConsumerInfo
from txnats.jetstream.msg import JsMsg, MsgMetadata, parse_metadata
from txnats.nuid import next_nuid
from txnats.protocol.events import Msg

if TYPE_CHECKING:
    from txnats.jetstream.context import JetStreamContext
    from txnats.subscription import Subscription

__all__ = ["OrderedConsumer"]

log = Logger()

#: Attempts to recreate the consumer after a reset before giving up.
MAX_RESETS = 10
#: Seconds before another attempt when recreating the consumer failed.
RETRY_WAIT = 0.5


class OrderedConsumer:
    """Deliver ``stream``'s messages (on ``filter_subjects``) to ``on_msg`` in order.

    ``deliver_policy`` is the server's (``all``, ``last``, ``new``,
    ``last_per_subject``, ``by_start_sequence`` with ``opt_start_seq``);
    ``headers_only`` leaves payloads out. ``on_msg`` gets each :class:`JsMsg`, its
    ``metadata`` already parsed; ``on_error`` gets the error that ends it, after which
    nothing more is delivered. ``start()`` fires with the first consumer's info once the
    consumer exists (its ``num_pending`` says how many messages are on their way).

    ``heartbeat`` is the server's idle heartbeat in seconds (finite, above zero; three
    missed ones reset the consumer); ``opt_start_seq`` a stream sequence of at least 1.
    A bad one raises :class:`InvalidArgumentError` here, before any I/O.
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
    ) -> None:
        check_timeout("heartbeat", heartbeat, allow_none=False)
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
        self._hb_timer: IDelayedCall | None = None
        #: Consumer deliveries so far (a reset starts a new consumer; this goes on).
        self.delivered = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Deferred[ConsumerInfo]:
        """Create the consumer; fires with its info."""
        return self._create()

    def stop(self) -> None:
        """Stop delivering; the consumer is deleted (best effort; it also expires)."""
        if self._stopped:
            return
        self._stopped = True
        self._drop_current()

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

        def deliver(msg: Msg) -> None:
            if gen == self._gen:
                self._deliver(msg)

        self._sub = client.subscribe(inbox, deliver, backpressure=True)
        d = self.js.add_consumer(self.stream, ConsumerConfig.from_json(self._config(inbox)))

        def created(info: ConsumerInfo) -> ConsumerInfo:
            self._creating = False
            self._resets = 0
            self._seen = True
            self._schedule_hb_check()
            return info

        def failed(f: Failure) -> Failure:
            self._creating = False
            if self._sub is not None:
                self._sub.unsubscribe()
                self._sub = None
            self._name = ""
            return f

        return d.addCallbacks(created, failed)

    def _schedule_hb_check(self) -> None:
        if self._stopped:
            return
        self._hb_timer = self.js.client.clock.callLater(3 * self._heartbeat, self._hb_check)

    def _hb_check(self) -> None:
        self._hb_timer = None
        if not self._seen:
            self._reset("missed heartbeats")
            return
        self._seen = False
        self._schedule_hb_check()

    # ------------------------------------------------------------------ delivery
    def _deliver(self, msg: Msg) -> None:
        if self._stopped:
            return
        self._seen = True
        client = self.js.client
        h = msg.headers
        if h is not None and h.status is not None:
            if h.status == 100:
                if msg.reply:  # flow control: answer so the server sends more
                    client.publish(msg.reply, b"")
                    return
                stalled = h.get("Nats-Consumer-Stalled")
                if stalled:
                    client.publish(stalled, b"")
                last = h.get("Nats-Last-Consumer")
                if last is not None and last.isdigit() and int(last) != self._cseq:
                    self._reset(f"heartbeat says consumer sequence {last}, we have {self._cseq}")
                return
            self._reset(f"status {h.status} {h.description or ''}".strip())
            return
        try:
            meta: MsgMetadata = parse_metadata(msg.reply)
        except NatsError:
            log.warn("Ordered consumer on {stream} got a non-JetStream message", stream=self.stream)
            return
        if meta.sequence.consumer != self._cseq + 1:
            self._reset(f"gap: consumer sequence {meta.sequence.consumer} after {self._cseq}")
            return
        self._cseq = meta.sequence.consumer
        self._sseq = meta.sequence.stream
        self.delivered += 1
        self._on_msg(JsMsg(msg, client, metadata=meta))

    def _reset(self, why: str) -> None:
        if self._stopped or self._creating:
            return
        self._resets += 1
        if self._resets > MAX_RESETS:
            self._fail(OrderedConsumerError(f"gave up after {MAX_RESETS} resets ({why})"))
            return
        log.info("Ordered consumer on {stream} resets: {why}", stream=self.stream, why=why)
        self._drop_current()
        self._create().addErrback(self._reset_failed)

    def _reset_failed(self, f: Failure) -> None:
        e = f.value
        if isinstance(e, StreamNotFoundError) or not isinstance(e, NatsError):
            self._fail(e if isinstance(e, NatsError) else OrderedConsumerError(str(e)))
            return
        # Transient (a timeout or no responders while the cluster moves): try again soon.
        self.js.client.clock.callLater(RETRY_WAIT, self._reset, f"recreate failed: {e}")

    def _fail(self, e: NatsError) -> None:
        if self._stopped:
            return
        self.stop()
        if self._on_error is not None:
            self._on_error(e)
        else:
            log.error("Ordered consumer on {stream} ended: {error}", stream=self.stream, error=e)
