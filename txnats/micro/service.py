"""Services (ADR-32): endpoints, groups, discovery and statistics, built on the client's
public API.

A :class:`Service` subscribes its endpoints (in queue group ``q`` unless told
otherwise) and nine monitoring subscriptions: ``$SRV.<VERB>``, ``$SRV.<VERB>.<name>``
and ``$SRV.<VERB>.<name>.<id>`` for ``PING``, ``INFO`` and ``STATS``. Each endpoint
counts its requests, errors and handler time; :meth:`Service.stop` drains every
subscription, and a service stops by itself when its client closes (it listens to
the client's state through :meth:`txnats.Client.add_status_listener`).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from inspect import iscoroutine
from typing import TYPE_CHECKING, Any, Final, Literal

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats._args import check_timeout
from txnats.client import ClientState
from txnats.errors import (
    ConnectionClosedError,
    InvalidArgumentTypeError,
    NatsError,
    SlowConsumerError,
    SubscriptionClosedError,
)
from txnats.micro._checks import (
    check_group_name,
    check_metadata,
    check_name,
    check_prefix,
    check_queue_group,
    check_subject,
    check_version,
)
from txnats.micro.errors import InvalidServiceConfigError, ServiceError, ServiceStoppedError
from txnats.micro.request import Request, one_line
from txnats.micro.responses import (
    EndpointInfo,
    EndpointStats,
    InfoResponse,
    PingResponse,
    StatsResponse,
)
from txnats.nuid import next_nuid

if TYPE_CHECKING:
    from txnats.client import Client
    from txnats.protocol.events import Msg
    from txnats.subscription import Subscription

__all__ = [
    "API_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "INHERIT",
    "Endpoint",
    "ErrorHandler",
    "Group",
    "Handler",
    "Service",
    "StatsHandler",
    "add_service",
    "control_subject",
]

log = Logger()

#: The queue group of endpoints not given another (ADR-32).
DEFAULT_QUEUE_GROUP: Final = "q"

#: The root of the monitoring subjects.
API_PREFIX: Final = "$SRV"

#: The verbs every service answers.
VERBS: Final = ("PING", "INFO", "STATS")


class _Inherit(enum.Enum):
    INHERIT = "inherit"


#: ``queue_group=INHERIT`` (the default of groups and endpoints): the queue group of
#: the group or service it belongs to. ``None`` means no queue group at all.
INHERIT: Final = _Inherit.INHERIT

QueueGroup = str | None | Literal[_Inherit.INHERIT]

#: A request handler: called with each :class:`Request`; returns ``None``, a Deferred
#: or a coroutine (awaited before the endpoint counts the request as handled).
Handler = Callable[[Request], object]

#: Called with each endpoint when stats are asked for; returns JSON-able data,
#: reported as that endpoint's ``data``.
StatsHandler = Callable[["Endpoint"], Any]

#: Called as ``error_handler(service, error)`` with what goes wrong outside a handler
#: (see :func:`add_service`); returns nothing.
ErrorHandler = Callable[["Service", NatsError], object]


def control_subject(
    verb: str, name: str | None = None, id: str | None = None, *, prefix: str = API_PREFIX
) -> str:
    """The monitoring subject for ``verb`` (``PING``, ``INFO``, ``STATS``): of every
    service, of the services called ``name``, or of the instance ``id`` of ``name``;
    under ``prefix`` (ADR-32 lets tools reach services across accounts through another).

    :raises InvalidServiceConfigError: for an unknown verb, a bad name or prefix, or an
        ``id`` without a ``name``.
    """
    if prefix != API_PREFIX:
        check_prefix(prefix)
    if verb not in VERBS:
        raise InvalidServiceConfigError(f"verb must be one of {', '.join(VERBS)}, not {verb!r}")
    if name is None:
        if id is not None:
            raise InvalidServiceConfigError("an id needs the service's name")
        return f"{prefix}.{verb}"
    check_name("service name", name)
    if id is None:
        return f"{prefix}.{verb}.{name}"
    return f"{prefix}.{verb}.{name}.{check_name('service id', id)}"


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class Endpoint:
    """One endpoint of a service: its subscription and its counters.

    Made by :meth:`Service.add_endpoint` and :meth:`Group.add_endpoint`. Times are
    nanoseconds of handler time (up to the Deferred or coroutine's end for handlers
    that return one).
    """

    def __init__(
        self,
        nc: Client,
        name: str,
        subject: str,
        queue_group: str | None,
        metadata: dict[str, str],
        handler: Handler,
        concurrency: int,
        limits: tuple[int | None, int | None],
        report: Callable[[NatsError, Endpoint | None], None],
        failed: Callable[[NatsError, Endpoint | None], None],
    ) -> None:
        self.name = name
        self.subject = subject
        self.queue_group = queue_group
        self._metadata = metadata
        self._handler = handler
        self._report = report
        self._failed_with = failed
        self.num_requests = 0
        self.num_errors = 0
        self.last_error = ""
        self.processing_time = 0
        self._dropping = False
        self._sub: Subscription = nc.subscribe(
            subject, self._on_msg, queue=queue_group, concurrency=concurrency,
            pending_msgs_limit=limits[0], pending_bytes_limit=limits[1],
            on_drop=self._on_drop,
        )
        self._sub.when_ended().addCallback(self._ended)

    @property
    def metadata(self) -> dict[str, str]:
        """A copy of the endpoint's metadata (immutable once set)."""
        return dict(self._metadata)

    @property
    def average_processing_time(self) -> int:
        """``processing_time // num_requests`` (0 before any request)."""
        n = self.num_requests
        return self.processing_time // n if n else 0

    @property
    def is_active(self) -> bool:
        """True until the endpoint's subscription has ended."""
        return self._sub.is_active

    @property
    def pending_msgs_limit(self) -> int:
        """How many requests may wait for the handler; over that, a request is answered
        with error 503 at once (and counted as an error)."""
        return self._sub.pending_msgs_limit

    @property
    def pending_bytes_limit(self) -> int:
        """How many bytes of requests may wait for the handler; over that, as for
        :attr:`pending_msgs_limit`."""
        return self._sub.pending_bytes_limit

    # ------------------------------------------------------------------ requests
    def _on_msg(self, msg: Msg) -> Deferred[None] | None:
        self.num_requests += 1
        self._dropping = False
        start = time.perf_counter_ns()
        req = Request(msg)
        try:
            result = self._handler(req)
        except Exception:
            self._done(start, self._failed(req, Failure()))
            return None
        if result is None:
            self._done(start, req.error)
            return None
        if iscoroutine(result):
            result = Deferred.fromCoroutine(result)
        if isinstance(result, Deferred):
            return result.addCallbacks(
                self._async_done, self._async_failed,
                callbackArgs=(req, start), errbackArgs=(req, start),
            )
        self._done(start, req.error)
        return None

    def _on_drop(self, msg: Msg) -> None:
        """A request arrived over the pending limits: answer 503 at once, count it, and
        tell the service's error handler once per run of them."""
        self.num_requests += 1
        description = (f"too many requests pending ({self.pending_msgs_limit} msgs / "
                       f"{self.pending_bytes_limit} bytes)")
        self.num_errors += 1
        self.last_error = f"503:{description}"
        if msg.reply:
            try:
                Request(msg).respond_error(503, description)
            except NatsError as e:
                self._report(e, self)
        if not self._dropping:
            self._dropping = True
            self._report(SlowConsumerError(
                f"endpoint {self.name!r} ({self.subject!r}): {description}, answering 503",
                sid=self._sub.sid, subject=self.subject, dropped=self._sub.dropped,
            ), self)

    def _ended(self, _: None) -> None:
        reason = self._sub.end_reason
        if reason is not None and not isinstance(reason, (SubscriptionClosedError,
                                                           ConnectionClosedError)):
            self.num_errors += 1
            self.last_error = one_line(str(reason))
            self._failed_with(reason, self)

    def _async_done(self, _: object, req: Request, start: int) -> None:
        self._done(start, req.error)

    def _async_failed(self, failure: Failure, req: Request, start: int) -> None:
        self._done(start, self._failed(req, failure))

    def _failed(self, req: Request, failure: Failure) -> str:
        """The handler raised: answer with an error if it had not answered; return the
        error to count."""
        error = failure.value
        if isinstance(error, ServiceError):
            code, description, data = error.code, error.description, error.data
        else:
            log.failure(
                "Handler of endpoint {endpoint!r} ({subject!r}) raised", failure,
                endpoint=self.name, subject=req.subject,
            )
            code, description, data = 500, f"{type(error).__name__}: {error}", b""
            description = description.rstrip(": ")
        counted = f"{code}:{one_line(description)}"
        if req.responded:
            return counted
        try:
            req.respond_error(code, description, data)
        except NatsError as e:
            log.warn(
                "Endpoint {endpoint!r} could not send its error reply to {subject!r}: "
                "{error}", endpoint=self.name, subject=req.subject, error=e,
            )
            self._report(e, self)
            return f"{counted} (not sent: {e})"
        return counted

    def _done(self, start: int, error: str | None) -> None:
        self.processing_time += time.perf_counter_ns() - start
        if error is not None:
            self.num_errors += 1
            self.last_error = error

    # ------------------------------------------------------------------ state
    def info(self) -> EndpointInfo:
        """The endpoint as ``$SRV.INFO`` describes it."""
        return EndpointInfo(self.name, self.subject, self.queue_group or "", self.metadata)

    def stats(self, data: Any = None) -> EndpointStats:
        """The endpoint's counters, with ``data`` from the stats handler."""
        return EndpointStats(
            self.name, self.subject, self.queue_group or "", self.num_requests,
            self.num_errors, self.last_error, self.processing_time,
            self.average_processing_time, data,
        )

    def reset(self) -> None:
        """Set every counter back to zero."""
        self.num_requests = self.num_errors = self.processing_time = 0
        self.last_error = ""

    def drain(self, timeout: float | None = None) -> Deferred[None]:
        """Unsubscribe; fire once every request received so far is handled (or fail
        with :class:`DrainTimeoutError` after ``timeout`` seconds)."""
        return self._sub.drain(timeout)

    def __repr__(self) -> str:
        return f"<txnats.micro.Endpoint {self.name!r} on {self.subject!r}>"


class Group:
    """A prefix for endpoint subjects, with its own default queue group.

    Made by :meth:`Service.add_group` and :meth:`Group.add_group`.
    """

    def __init__(self, service: Service, prefix: str, queue_group: str | None) -> None:
        self.service = service
        self.prefix = prefix
        self.queue_group = queue_group

    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        queue_group: QueueGroup = INHERIT,
        metadata: Mapping[str, str] | None = None,
        concurrency: int = 1,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Endpoint:
        """Add an endpoint on ``<prefix>.<subject or name>``; see
        :meth:`Service.add_endpoint`. Its queue group is this group's unless given."""
        check_name("endpoint name", name)
        tail = name if subject is None else check_subject("subject", subject)
        full = f"{self.prefix}.{tail}" if self.prefix else tail
        queue = self.queue_group if queue_group is INHERIT else queue_group
        return self.service.add_endpoint(
            name, handler, subject=full, queue_group=queue, metadata=metadata,
            concurrency=concurrency, pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
        )

    def add_group(self, name: str, *, queue_group: QueueGroup = INHERIT) -> Group:
        """A group under this one: prefix ``<prefix>.<name>``, queue group this
        group's unless given.

        :raises InvalidServiceConfigError: for a bad name or queue group.
        """
        check_group_name(name)
        prefix = ".".join(p for p in (self.prefix, name) if p)
        queue = self.queue_group if queue_group is INHERIT else check_queue_group(queue_group)
        return Group(self.service, prefix, queue)

    def __repr__(self) -> str:
        return f"<txnats.micro.Group {self.prefix!r}>"


class Service:
    """A running service: its identity, endpoints, monitoring subscriptions and counters.

    Made by :func:`add_service`.
    """

    def __init__(
        self,
        nc: Client,
        name: str,
        version: str,
        description: str,
        metadata: dict[str, str],
        queue_group: str | None,
        stats_handler: StatsHandler | None,
        prefix: str = API_PREFIX,
        error_handler: ErrorHandler | None = None,
    ) -> None:
        self._nc = nc
        self._error_handler = error_handler
        self.name = name
        self.version = version
        self.description = description
        self._metadata = metadata
        self.queue_group = queue_group
        self._stats_handler = stats_handler
        self.id = next_nuid()
        self.started = datetime.now(UTC)
        self._endpoints: list[Endpoint] = []
        self._stopping: Deferred[None] | None = None
        self._stopped = False
        self._reason: Exception | None = None
        self._waiters: list[Deferred[Exception | None]] = []
        self._ping = _dumps(self.ping().to_dict())
        self._monitors: list[Subscription] = []
        try:
            for verb, handler in (
                ("PING", self._on_ping), ("INFO", self._on_info), ("STATS", self._on_stats)
            ):
                for subject in (
                    control_subject(verb, prefix=prefix),
                    control_subject(verb, name, prefix=prefix),
                    control_subject(verb, name, self.id, prefix=prefix),
                ):
                    self._monitors.append(nc.subscribe(subject, handler))
        except NatsError:
            for sub in self._monitors:
                sub.unsubscribe()
            raise
        for sub in self._monitors:
            sub.when_ended().addCallback(self._monitor_ended, sub)
        self._unlisten = nc.add_status_listener(self._on_state)

    @property
    def metadata(self) -> dict[str, str]:
        """A copy of the service's metadata (immutable once set)."""
        return dict(self._metadata)

    @property
    def endpoints(self) -> list[Endpoint]:
        """The endpoints, in the order they were added."""
        return list(self._endpoints)

    @property
    def is_stopped(self) -> bool:
        """True once :meth:`stop` was called or the client closed."""
        return self._stopping is not None

    # ------------------------------------------------------------------ building
    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        queue_group: QueueGroup = INHERIT,
        metadata: Mapping[str, str] | None = None,
        concurrency: int = 1,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> Endpoint:
        """Add an endpoint: ``handler(request)`` is called with every request sent to
        ``subject`` (``name`` unless given), in the service's queue group unless
        ``queue_group`` says otherwise (``None``: no queue group). Up to
        ``concurrency`` handler calls run at once (a handler that returns a Deferred
        or a coroutine is running until it completes).

        A handler that raises answers the request (if it had not) with error 500, or
        with the code and description of a :class:`ServiceError`; the endpoint counts
        it as an error. Call ``await nc.flush()`` to be sure that the server has the
        endpoint's subscription.

        Requests wait for the handler up to ``pending_msgs_limit`` requests and
        ``pending_bytes_limit`` bytes (the client's ``pending_msgs_limit`` and
        ``pending_bytes_limit`` options unless given); one arriving over either is
        answered at once with error 503 (``Nats-Service-Error-Code: 503``), counted as
        a request and an error, and the first of each run is passed to the service's
        ``error_handler`` as a :class:`~txnats.errors.SlowConsumerError`.

        :raises InvalidServiceConfigError: for a bad name, subject, queue group or
            metadata.
        :raises InvalidArgumentTypeError: for a handler that is not callable.
        :raises InvalidArgumentError: for a ``concurrency`` or a pending limit below 1.
        :raises BadSubjectError: for a subject the client refuses (``a..b``, say).
        :raises ServiceStoppedError: if the service is stopped.
        """
        check_name("endpoint name", name)
        subject = name if subject is None else check_subject("subject", subject)
        queue = self.queue_group if queue_group is INHERIT else check_queue_group(queue_group)
        meta = check_metadata("metadata", metadata)
        if not callable(handler):
            raise InvalidArgumentTypeError(f"handler must be callable, not {handler!r}")
        if self._stopping is not None:
            raise ServiceStoppedError(f"service {self.name!r} ({self.id}) is stopped")
        endpoint = Endpoint(
            self._nc, name, subject, queue, meta, handler, concurrency,
            (pending_msgs_limit, pending_bytes_limit), self._report, self._subscription_failed,
        )
        self._endpoints.append(endpoint)
        return endpoint

    def add_group(self, name: str, *, queue_group: QueueGroup = INHERIT) -> Group:
        """A group of endpoints whose subjects start with ``name.``; their queue group
        is the service's unless ``queue_group`` says otherwise.

        :raises InvalidServiceConfigError: for a bad name or queue group.
        """
        check_group_name(name)
        queue = self.queue_group if queue_group is INHERIT else check_queue_group(queue_group)
        return Group(self, name, queue)

    # ------------------------------------------------------------------ monitoring
    def ping(self) -> PingResponse:
        """What ``$SRV.PING`` answers."""
        return PingResponse(self.name, self.id, self.version, self.metadata)

    def info(self) -> InfoResponse:
        """What ``$SRV.INFO`` answers."""
        return InfoResponse(
            self.name, self.id, self.version, self.description,
            tuple(e.info() for e in self._endpoints), self.metadata,
        )

    def stats(self) -> StatsResponse:
        """What ``$SRV.STATS`` answers (the stats handler called for each endpoint)."""
        return StatsResponse(
            self.name, self.id, self.version, self.started,
            tuple(e.stats(self._data(e)) for e in self._endpoints), self.metadata,
        )

    def _data(self, endpoint: Endpoint) -> Any:
        handler = self._stats_handler
        if handler is None:
            return None
        try:
            data = handler(endpoint)
            json.dumps(data)
        except Exception:
            log.failure("Stats handler of service {name!r} failed", name=self.name)
            return None
        return data

    def reset(self) -> None:
        """Set every endpoint's counters back to zero, and ``started`` to now."""
        for e in self._endpoints:
            e.reset()
        self.started = datetime.now(UTC)

    def _on_ping(self, msg: Msg) -> None:
        self._answer(msg, self._ping)

    def _on_info(self, msg: Msg) -> None:
        self._answer(msg, _dumps(self.info().to_dict()))

    def _on_stats(self, msg: Msg) -> None:
        self._answer(msg, _dumps(self.stats().to_dict()))

    def _answer(self, msg: Msg, body: bytes) -> None:
        if not msg.reply:
            log.debug("{subject} without a reply subject: not answered", subject=msg.subject)
            return
        try:
            msg.respond(body)
        except NatsError as e:
            log.warn(
                "Service {name!r} could not answer {subject}: {error}",
                name=self.name, subject=msg.subject, error=e,
            )
            self._report(e, None)

    # ------------------------------------------------------------------ errors
    def _report(self, error: NatsError, endpoint: Endpoint | None = None) -> None:
        # To the error_handler, if any (endpoint: what it is about, None for the
        # monitoring subscriptions); what it raises is logged, never passed on.
        handler = self._error_handler
        if handler is None:
            return
        try:
            handler(self, error)
        except Exception:
            log.failure("The error handler of service {name!r} raised", name=self.name)

    def _subscription_failed(self, error: NatsError, endpoint: Endpoint | None) -> None:
        """A subscription of the service ended with ``error`` (the server refused it):
        report it and stop the service with it, as a part of it no longer works."""
        if self._stopping is not None:
            return
        log.warn("Service {name!r} stops: {error}", name=self.name, error=error)
        self._report(error, endpoint)
        self.stop(error)

    def _monitor_ended(self, _: None, sub: Subscription) -> None:
        reason = sub.end_reason
        if reason is not None and not isinstance(reason, (SubscriptionClosedError,
                                                           ConnectionClosedError)):
            self._subscription_failed(reason, None)

    # ------------------------------------------------------------------ stopping
    def stop(
        self, error: Exception | None = None, *, timeout: float | None = None
    ) -> Deferred[None]:
        """Stop the service: drain every endpoint (requests received are handled and
        answered) and the monitoring subscriptions. Fires once they are drained, or
        after ``timeout`` seconds if given (handlers still running are then left to
        finish; the drain is logged as incomplete); :meth:`when_stopped` waiters then
        fire with ``error``. Calling it again returns a Deferred that fires at the
        same time.

        :raises InvalidArgumentError: for a ``timeout`` that is not a number of
            seconds above zero (nothing is stopped).
        """
        if self._stopping is None:
            timeout = check_timeout("timeout", timeout)
            self._reason = error
            self._unlisten()
            subs: list[Endpoint | Subscription] = [*self._endpoints, *self._monitors]
            self._stopping = DeferredList(
                [self._drain(s, timeout) for s in subs], consumeErrors=True
            ).addCallback(self._drained)
        return _copy(self._stopping)

    def _drain(self, sub: Endpoint | Subscription, timeout: float | None) -> Deferred[None]:
        try:
            return sub.drain(timeout)
        except NatsError as e:  # (the client is closing, say)
            return Deferred.fromCoroutine(_raise(e))

    def _drained(self, results: list[tuple[bool, Any]]) -> None:
        for ok, value in results:
            if not ok and not value.check(ConnectionClosedError):
                log.warn(
                    "Service {name!r}: a subscription did not drain: {error}",
                    name=self.name, error=value.value,
                )
        self._stopped = True
        waiters, self._waiters = self._waiters, []
        for d in waiters:
            d.callback(self._reason)

    def _on_state(self, state: ClientState) -> None:
        if state == ClientState.CLOSED and self._stopping is None:
            self.stop(ConnectionClosedError(f"the client of service {self.name!r} closed"))

    def when_stopped(self) -> Deferred[Exception | None]:
        """A fresh Deferred that fires once the service has stopped, with the reason:
        ``None`` after :meth:`stop`, the error given to ``stop(error)``, or a
        :class:`ConnectionClosedError` if the client closed."""
        if self._stopped:
            return succeed(self._reason)
        d: Deferred[Exception | None] = Deferred()
        self._waiters.append(d)
        return d

    def __repr__(self) -> str:
        state = " stopped" if self._stopping is not None else ""
        return f"<txnats.micro.Service {self.name!r} {self.version} {self.id}{state}>"


async def _raise(error: Exception) -> None:
    raise error


def _copy(d: Deferred[None]) -> Deferred[None]:
    """A fresh Deferred that fires with ``d``'s result, leaving ``d`` as it is."""
    out: Deferred[None] = Deferred()

    def relay(result: object) -> object:
        out.callback(None)
        return result

    d.addBoth(relay)
    return out


def add_service(
    nc: Client,
    *,
    name: str,
    version: str,
    description: str | None = None,
    metadata: Mapping[str, str] | None = None,
    queue_group: str | None = DEFAULT_QUEUE_GROUP,
    stats_handler: StatsHandler | None = None,
    prefix: str = API_PREFIX,
    error_handler: ErrorHandler | None = None,
) -> Service:
    """Start a service on ``nc``: its monitoring subscriptions are sent at once (call
    ``await nc.flush()`` to be sure the server has them); add endpoints with
    :meth:`Service.add_endpoint` and :meth:`Service.add_group`.

    :param name: the kind of service (letters, digits, ``-``, ``_``).
    :param version: a semantic version (``1.0.0``).
    :param queue_group: the endpoints' queue group unless they say otherwise; ``None``
        for none (every instance gets every request).
    :param stats_handler: called with each endpoint when stats are asked for; what it
        returns (JSON-able) is the endpoint's ``data``.
    :param prefix: the root of the monitoring subjects (``$SRV``).
    :param error_handler: ``error_handler(service, error)`` is called with what goes
        wrong outside a handler: the server refusing one of the service's
        subscriptions (a :class:`~txnats.errors.PermissionViolationError`; the service
        then stops, and :meth:`Service.when_stopped` fires with that error), requests
        dropped over an endpoint's pending limits (a
        :class:`~txnats.errors.SlowConsumerError`, once per run; each is answered with
        error 503), and an answer or error reply that could not be sent. Handler
        exceptions are answered (500) and logged instead. It runs in the client's
        batch of work; what it raises is logged.
    :raises InvalidServiceConfigError: (a ``ValueError``) for a bad name, version,
        queue group, metadata or prefix.
    :raises InvalidArgumentTypeError: for a client, stats handler or error handler of
        the wrong type.
    :raises ConnectionClosedError: if the client is closed.
    """
    if not callable(getattr(nc, "subscribe", None)) or not callable(
        getattr(nc, "add_status_listener", None)
    ):
        raise InvalidArgumentTypeError(f"add_service needs a txnats Client, not {nc!r}")
    check_name("service name", name)
    check_version(version)
    if description is not None and not isinstance(description, str):
        raise InvalidArgumentTypeError(
            f"description must be a string, not {type(description).__name__}"
        )
    meta = check_metadata("metadata", metadata)
    queue = check_queue_group(queue_group)
    if stats_handler is not None and not callable(stats_handler):
        raise InvalidArgumentTypeError(f"stats_handler must be callable, not {stats_handler!r}")
    if error_handler is not None and not callable(error_handler):
        raise InvalidArgumentTypeError(f"error_handler must be callable, not {error_handler!r}")
    check_prefix(prefix)
    return Service(nc, name, version, description or "", meta, queue, stats_handler, prefix,
                   error_handler)
