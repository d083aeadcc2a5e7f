"""JetStream forwarding: at least once, from a shared durable pull consumer.

The pump pulls a batch from the source stream's durable consumer, publishes each
message to the target with ``js.publish`` (``Nats-Msg-Id`` = source stream and
sequence, so the target stream's duplicate window drops a redelivery), and acknowledges
a source message only once the target's stream answered with its PubAck. A message the
target did not confirm is refused back (``nak`` with a delay growing with its delivery
count) and comes again; nothing is acknowledged that was not stored on the far side.

While the target is disconnected the pump does not pull: the messages wait in the
source stream. Several pumps (bridges) on one durable share the messages between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import (
    CancelledError,
    Deferred,
    ensureDeferred,
    fail,
    gatherResults,
    succeed,
)
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats.bridge.security import check_fits, max_control_line
from txnats.client import Client, ClientState
from txnats.errors import APIError, BadHeaderError, BadSubjectError, MaxPayloadError, NatsError
from txnats.jetstream import JsMsg, PubAck, PullConsumer
from txnats.protocol.headers import Headers

from ._forward_spec import ForwardRoute, ForwardStats

__all__ = ["JsPump", "forwarded_headers"]

log = Logger()

#: Headers of the source message that must not reach the target's stream: the id is
#: ours to set, and the expectations were about the source stream.
_STRIP = ("nats-msg-id", "nats-expected-")
#: Failures that no retry mends: the target refuses the message itself.
_NEVER: tuple[type[BaseException], ...] = (BadSubjectError, BadHeaderError, MaxPayloadError)
#: Seconds one pull waits for messages before asking again.
PULL_EXPIRES = 2.0
#: Seconds before a message the target refused is delivered again (times its count).
RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 30.0


def forwarded_headers(headers: Headers | None) -> Headers | None:
    """The source message's headers as they go to the target (see ``_STRIP``).

    A header block that did not parse goes as it came (as the server relays it).
    """
    if headers is None:
        return None
    if headers.raw is not None and not headers:
        return headers
    items = [(k, v) for k, v in headers.multi_items() if not k.lower().startswith(_STRIP)]
    return Headers(items) if items else None


def _with_id(block: bytes, msg_id: str) -> Headers:
    """A header block that did not parse, relayed as it came with ``Nats-Msg-Id``
    added before its end (the target's stream reads it; nothing else is changed).

    :raises BadHeaderError: if the block does not end as header blocks do.
    """
    if not block.endswith(b"\r\n\r\n"):
        raise BadHeaderError("a header block that does not parse nor end with CRLF CRLF")
    return Headers.unparsed(block[:-2] + b"Nats-Msg-Id: " + msg_id.encode() + b"\r\n\r\n")


class _Complaints:
    """Logs the first failure of a run of failures, and the recovery after it."""

    def __init__(self, what: str, name: str) -> None:
        self.what = what
        self.name = name
        self.failing = 0

    def failed(self, error: object) -> None:
        if not self.failing:
            log.warn(
                "Forward {route}: {what} failed: {error}",
                route=self.name, what=self.what, error=str(error),
            )
        self.failing += 1

    def ok(self) -> None:
        if self.failing:
            log.info(
                "Forward {route}: {what} works again after {n} failures",
                route=self.name, what=self.what, n=self.failing,
            )
            self.failing = 0


class JsPump:
    """Pulls from the source consumer and publishes to the target, acking after PubAck.

    :param clock: times retries.
    :param route: a JetStream route (``route.stream`` set).
    :param source: the connected source client (the bridge's).
    :param target: the target client (started by the caller).
    :param stats: the counters to add to.
    :param forwarded: called with the target subject and payload size of each message
        the target stored.
    """

    def __init__(
        self, clock: IReactorTime, route: ForwardRoute, source: Client, target: Client,
        stats: ForwardStats, forwarded: Callable[[str, int], None],
    ) -> None:
        assert route.stream is not None
        self.clock = clock
        self.route = route
        self.stream = route.stream
        self.source = source
        self.target = target
        self.stats = stats
        self.forwarded = forwarded
        self.source_js = source.jetstream()
        self.target_js = target.jetstream(timeout=5.0)
        self.consumer: PullConsumer | None = None
        self.stopping = False
        #: What the pump waits for now (a pull, the target, a pause): cancelled by stop.
        self.waiting: Deferred[Any] | None = None
        #: Fired by the target's next CONNECTED, while the pump waits for it.
        self.target_up: Deferred[None] | None = None
        self.running: Deferred[None] | None = None
        self.pulls = _Complaints("pulling from the source", route.name)
        self.pushes = _Complaints("publishing to the target", route.name)
        self.remove_listener = target.add_status_listener(self._target_state)

    # ------------------------------------------------------------------ life
    def start(self) -> Deferred[None]:
        """Create (or join) the durable consumer; then pull until :meth:`stop`.

        Fails if the consumer cannot be made (no such stream, JetStream off, another
        consumer of that name with another configuration).
        """
        d = self._ensure_consumer()

        def run(_: object) -> None:
            self.running = ensureDeferred(self._run())
            self.running.addErrback(self._crashed)

        return d.addCallback(run)

    def stop(self) -> Deferred[None]:
        """Stop pulling; fire once the publishes under way are answered and acked."""
        self.stopping = True
        self.remove_listener()
        if self.waiting is not None:
            self.waiting.cancel()
        if self.running is None:
            return succeed(None)
        running, self.running = self.running, None
        return running

    def _crashed(self, failure: Failure) -> None:
        log.failure("Forward {route}: the pump stopped", failure, route=self.route.name)

    def _ensure_consumer(self) -> Deferred[None]:
        route = self.route
        config = {
            "durable_name": route.durable,
            "ack_policy": "explicit",
            "deliver_policy": "all",
            "filter_subject": route.source,
        }  # ack_wait: the server's default (30 s), far above a publish's worst case

        def made(_: object) -> None:
            self.consumer = self.source_js.pull_consumer(self.stream, route.durable)

        return self.source_js.add_consumer(self.stream, config).addCallback(made)

    def _target_state(self, state: ClientState) -> None:
        if state == ClientState.CONNECTED and self.target_up is not None:
            up, self.target_up = self.target_up, None
            if not up.called:
                up.callback(None)

    # ------------------------------------------------------------------ the loop
    async def _wait(self, d: Deferred[Any]) -> Any:
        """Await ``d`` as the thing :meth:`stop` cancels."""
        self.waiting = d
        try:
            return await d
        finally:
            if self.waiting is d:
                self.waiting = None

    async def _run(self) -> None:
        while not self.stopping and not self.source.is_closed:
            try:
                if not self.target.is_connected:
                    self.target_up = Deferred()  # fired by _target_state
                    await self._wait(self.target_up)
                    continue
                if self.consumer is None:
                    await self._wait(self._ensure_consumer())
                    continue
                msgs = await self._wait(
                    self.consumer.fetch(self.route.batch, expires=PULL_EXPIRES)
                )
            except CancelledError:
                continue  # stop() (the loop ends), or a cancelled pull that got nothing
            except NatsError as e:
                self.pulls.failed(e)
                if isinstance(e, APIError):
                    self.consumer = None  # made again (the server may have lost it)
                await self._pause()
                continue
            self.pulls.ok()
            if self._stopping():  # (stop() ran during the pull)
                self._give_back(msgs)
            elif msgs:
                await self._forward(msgs)

    def _stopping(self) -> bool:
        return self.stopping

    async def _pause(self) -> None:
        try:
            await self._wait(deferLater(self.clock, RETRY_DELAY, lambda: None))
        except CancelledError:
            pass

    def _give_back(self, msgs: list[JsMsg]) -> None:
        """Pulled while stopping: hand them back at once, for another bridge."""
        for m in msgs:
            try:
                m.nak()
            except NatsError:
                pass  # redelivered after the ack wait anyway

    # ------------------------------------------------------------------ one batch
    async def _forward(self, msgs: list[JsMsg]) -> None:
        await gatherResults([self._forward_one(m) for m in msgs])

    def _forward_one(self, m: JsMsg) -> Deferred[None]:
        subject = self.route.target_subject(m.subject)
        try:
            check_fits(subject, max_control_line(self.target))
            meta = m.metadata
            headers = forwarded_headers(m.headers)
            msg_id: str | None = f"{meta.stream}:{meta.sequence.stream}"
            if headers is not None and headers.raw is not None and not headers:
                headers, msg_id = _with_id(headers.raw, msg_id or ""), None
            d = self.target_js.publish(subject, m.data, headers=headers, msg_id=msg_id)
        except Exception as e:  # (a defect outside NatsError too: refused, not a crash)
            d = fail(e)
        return d.addCallbacks(
            self._accepted, self._refused, callbackArgs=(m, subject), errbackArgs=(m,)
        )

    def _accepted(self, ack: PubAck, m: JsMsg, subject: str) -> None:
        self.pushes.ok()
        if ack.duplicate:
            self.stats.duplicates += 1
        else:
            self.stats.forwarded += 1
            self.stats.forwarded_bytes += len(m.data)
            self.forwarded(subject, len(m.data))
        try:
            m.ack()
        except NatsError as e:
            # Stored on the far side but not acked here: it comes again, and the target's
            # duplicate window recognises it.
            log.info("Forward {route}: ack not sent ({error})", route=self.route.name,
                     error=str(e))

    def _refused(self, failure: Failure, m: JsMsg) -> None:
        if failure.check(*_NEVER):
            self._terminate(failure.value, m)
            return
        self.stats.retried += 1
        self.pushes.failed(failure.value)
        try:
            count = m.metadata.num_delivered
            m.nak(delay=min(RETRY_DELAY * count, MAX_RETRY_DELAY))
        except NatsError:
            pass  # not acked: the source redelivers it after its ack wait

    def _terminate(self, error: BaseException | None, m: JsMsg) -> None:
        """A message the target can never take: counted, said, and not redelivered."""
        self.stats.dropped += 1
        log.warn("Forward {route}: {subject} can never be forwarded, terminated on the "
                 "source: {error}", route=self.route.name, subject=m.subject, error=str(error))
        try:
            m.term(reason=f"nats-bridge cannot forward it: {error}"[:200])
        except NatsError:
            pass  # not acked: redelivered after the ack wait, and refused again
