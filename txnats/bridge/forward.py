"""Forwarding between NATS systems: ``--forward SPEC``, one :class:`Forwarder` per route.

Two modes, chosen by the spec (see :func:`parse_forward`):

- **Core** (``orders.>=nats://other:4222``): a queue subscription on the source; each
  message is published to the target as it comes, **at most once**. Several bridges
  with the same spec join the same queue group, so each message is forwarded by one
  of them. A message the target connection cannot take (its reconnect buffer full
  while the target is down, the client closed, a subject too long for the target's
  control line or a payload over its limit) is counted in ``stats.dropped`` and
  logged, never dropped quietly, and never sent to close the target's connection; a
  full outbound buffer while connected applies back-pressure to the source
  subscription instead (its pending limits then decide).
  Reply subjects are not forwarded (the reply would have to come back across).
- **JetStream** (``js:ORDERS:orders.>=nats://other:4222``): a durable pull consumer on
  the source stream, shared by every bridge with the same spec; each message is
  published with ``js.publish`` and acknowledged on the source only after the target's
  stream answered with a PubAck, so restarts of either side lose nothing (**at least
  once**). ``Nats-Msg-Id`` is ``<stream>:<sequence>`` of the source message, so the
  target stream's duplicate window drops most redeliveries; ``stats.duplicates``
  counts those it recognised. The target needs a stream taking the target subjects.
  A message the target can never take (a subject too long for its control line, a
  payload over its limit) is terminated on the source (``term``), counted in
  ``stats.dropped`` and logged, rather than redelivered for ever.

A :class:`Forwarder` owns its connection to the target (reconnecting forever); the
source client is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorCore, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats.bridge.security import check_fits, max_control_line
from txnats.client import Client
from txnats.errors import (
    ConnectionClosedError,
    FlushTimeoutError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NatsError,
    OutboundBufferFullError,
)
from txnats.options import Options
from txnats.protocol.events import Msg
from txnats.subscription import Subscription

from ._forward_js import JsPump
from ._forward_spec import ForwardRoute, ForwardStats, SubjectMap, parse_forward

__all__ = ["ForwardRoute", "ForwardStats", "Forwarder", "SubjectMap", "parse_forward"]

log = Logger()

#: Seconds start() waits for the source server to confirm a core subscription.
_SUBSCRIBED_WITHIN = 10.0

#: Options of the target connection unless the caller gives others.
TARGET_DEFAULTS: Mapping[str, Any] = {
    "max_reconnect_attempts": -1,
    "retry_on_failed_connect": True,
    "reconnect_wait": 1.0,
}


class Forwarder:
    """Forwards one route from the ``source`` client to the route's target servers.

    :param reactor: the reactor (the target connection and the retries use it).
    :param route: from :func:`parse_forward`.
    :param source: a client connected to the source system (not closed by us).
    :param on_forward: called as ``on_forward(route.name, payload_bytes)`` for each
        message forwarded (core: handed to the target connection; JetStream: stored by
        the target's stream), for per-route metrics (the route's name, not the subject:
        a bounded set of labels); what it raises is logged.
    :param target_options: more :class:`txnats.client.Options` fields for the target
        connection (TLS, credentials...), over :data:`TARGET_DEFAULTS`.
    :raises InvalidArgumentTypeError: ``route`` is not a :class:`ForwardRoute`.
    :raises InvalidArgumentError: a bad target option.
    """

    def __init__(
        self,
        reactor: IReactorCore,
        route: ForwardRoute,
        source: Client,
        *,
        on_forward: Callable[[str, int], None] | None = None,
        target_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(route, ForwardRoute):
            raise InvalidArgumentTypeError(
                f"route must be a ForwardRoute (from parse_forward), not {type(route).__name__}"
            )
        if on_forward is not None and not callable(on_forward):
            raise InvalidArgumentTypeError("on_forward must be callable")
        self.route = route
        self.source = source
        self.stats = ForwardStats()
        #: Called for each message forwarded (see above); may be replaced later.
        self.on_forward = on_forward
        fields: dict[str, Any] = {"name": f"txnats-forward {route.name}", **TARGET_DEFAULTS}
        if route.creds is not None:
            fields["user_credentials"] = route.creds
        fields.update(target_options or {})
        try:
            options = Options(**fields)
        except TypeError as e:
            raise InvalidArgumentError(f"bad target option: {e}") from None
        #: The connection to the target system (ours: started and closed by us).
        self.target = Client(reactor, route.servers, options)
        clock: IReactorTime = reactor  # type: ignore[assignment]
        self._pump: JsPump | None = None
        if route.jetstream:
            self._pump = JsPump(clock, route, source, self.target, self.stats, self._forwarded)
        self._sub: Subscription | None = None
        self._started = False
        self._stopped: Deferred[None] | None = None
        self._dropping = 0

    @property
    def name(self) -> str:
        """The route's name (safe to log: no credentials)."""
        return self.route.name

    def __repr__(self) -> str:
        return f"<Forwarder {self.route.name} {self.stats}>"

    # ------------------------------------------------------------------ life
    def start(self) -> Deferred[None]:
        """Start the target connection (in the background) and the source side.

        Fires once the source side is ready: the queue subscription made (core), or the
        durable consumer created or joined (JetStream). It does not wait for the target:
        until that connects, core messages go to its bounded reconnect buffer and
        JetStream messages wait in the source stream. Fails (having stopped what it
        started) if the source side cannot be set up.
        """
        if self._started:
            return fail(InvalidArgumentError(f"forwarder {self.name} was started already"))
        self._started = True
        self.target.start().addErrback(self._target_ended)
        if self._pump is not None:
            d = self._pump.start()
        else:
            try:
                self._sub = self.source.subscribe(
                    self.route.source, self._on_core, queue=self.route.queue
                )
            except NatsError as e:
                d = fail(e)
            else:
                # Ready once the server has the subscription: what is published
                # after start() fired is forwarded.
                d = self.source.flush(timeout=_SUBSCRIBED_WITHIN).addErrback(
                    self._flush_failed
                )
        def started(_: object) -> None:
            log.info("Forwarding {route}", route=self.name)

        def failed(f: Failure) -> Failure:
            self.target.close()
            return f

        return d.addCallbacks(started, failed)

    def _flush_failed(self, f: Failure) -> None:
        if not f.check(FlushTimeoutError):
            f.raiseException()
        # Reconnecting: the subscription is sent again with the others.
        log.warn("Forward {route}: the source did not confirm the subscription "
                 "within {s} s; it is made as the connection comes back",
                 route=self.name, s=_SUBSCRIBED_WITHIN)

    def stop(self) -> Deferred[None]:
        """Stop forwarding and close the target connection after draining it.

        Core: the subscription drains (messages received are still forwarded).
        JetStream: no new pull; the publishes under way are answered and acknowledged
        (or refused back). Idempotent.
        """
        if self._stopped is None:
            self._stopped = self._stop()
        return _chain(self._stopped)

    def _stop(self) -> Deferred[None]:
        if self._pump is not None:
            d = self._pump.stop()
        elif self._sub is not None:
            d = self._sub.drain(timeout=10.0)
        else:
            d = succeed(None)

        def close_target(result: object) -> Deferred[None]:
            if isinstance(result, Failure):
                log.failure("Forward {route}: stopping", result, route=self.name)
            return self.target.drain().addErrback(lambda _: self.target.close())

        return d.addBoth(close_target).addCallback(self._stopped_log)

    def _stopped_log(self, _: object) -> None:
        log.info("Stopped forwarding {route}: {stats}", route=self.name, stats=self.stats)

    def _target_ended(self, failure: Failure) -> None:
        if self._stopped is None and not failure.check(ConnectionClosedError):
            log.failure("Forward {route}: no target connection", failure, route=self.name)

    # ------------------------------------------------------------------ core mode
    def _on_core(self, msg: Msg) -> Deferred[None] | None:
        subject = self.route.target_subject(msg.subject)
        try:
            # The source server took this subject; the target's control line may be
            # shorter, or the mapping longer: the target would close the connection.
            check_fits(subject, max_control_line(self.target))
            self.target.publish(subject, msg.data, headers=msg.headers)
        except OutboundBufferFullError as e:
            if not self.target.is_connected:
                self._drop(msg, e)
                return None
            # Back-pressure: this subscription waits until the socket took the queue.
            return self.target.wait_for_room().addCallbacks(
                lambda _: self._again(subject, msg), lambda f: self._drop(msg, f.value)
            )
        except NatsError as e:
            self._drop(msg, e)
            return None
        except Exception as e:  # a defect; still counted and said, never quietly lost
            log.failure("Forward {route}: publishing to the target raised", route=self.name)
            self._drop(msg, e)
            return None
        self._forwarded(subject, len(msg.data))
        return None

    def _again(self, subject: str, msg: Msg) -> None:
        try:
            self.target.publish(subject, msg.data, headers=msg.headers)
        except Exception as e:
            self._drop(msg, e)
        else:
            self._forwarded(subject, len(msg.data))

    def _drop(self, msg: Msg, error: BaseException) -> None:
        self.stats.dropped += 1
        if not self._dropping:
            log.warn(
                "Forward {route}: dropping messages (at most once): {subject} not "
                "forwarded: {error}", route=self.name, subject=msg.subject, error=str(error),
            )
        self._dropping += 1

    def _forwarded(self, subject: str, size: int) -> None:
        if self._dropping:
            log.info("Forward {route}: forwarding again after {n} dropped",
                     route=self.name, n=self._dropping)
            self._dropping = 0
        if self._pump is None:
            self.stats.forwarded += 1
            self.stats.forwarded_bytes += size
        if self.on_forward is not None:
            try:
                self.on_forward(self.route.name, size)
            except Exception:
                log.failure("Forward {route}: on_forward raised", route=self.name)


def _chain(d: Deferred[None]) -> Deferred[None]:
    """A new Deferred firing as ``d`` does (``d`` itself is kept for later callers)."""
    out: Deferred[None] = Deferred()

    def relay(result: object) -> object:
        if isinstance(result, Failure):
            out.errback(result)
        else:
            out.callback(None)
        return result

    d.addBoth(relay)
    return out
