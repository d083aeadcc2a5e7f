"""Stream and consumer management behind the context's methods: typed requests and
answers, consumer actions, pause, and the lazily paged listings.

Everything goes through the context's public ``api_request``; the context's methods are
thin calls into these functions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from twisted.internet.defer import Deferred

from txnats._args import check_count
from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError
from txnats.jetstream._api import answer_value, check_name
from txnats.jetstream._config_core import seconds
from txnats.jetstream.config import ConsumerConfig, ConsumerInfo, StreamInfo

if TYPE_CHECKING:
    from txnats.jetstream.context import JetStreamContext

__all__ = [
    "Paged",
    "consumer_listing",
    "consumer_request",
    "consumer_subject",
    "pause_request",
    "pause_time",
    "stream_info_pages",
    "stream_info_request",
    "stream_listing",
]

T = TypeVar("T")

#: The consumer actions of ``CONSUMER.CREATE`` (server 2.10+): "" creates or updates.
ACTIONS = ("create", "update", "")


def consumer_subject(stream: str, cfg: ConsumerConfig) -> str:
    """``CONSUMER.CREATE.<stream>[.<name>]``, the names checked (ADR-6)."""
    check_name("stream", stream)
    name = cfg.name or cfg.durable_name
    if name is not None:
        check_name("consumer", name)
        if cfg.name and cfg.durable_name and cfg.name != cfg.durable_name:
            raise InvalidArgumentError(
                f"consumer name {cfg.name!r} and durable_name {cfg.durable_name!r} differ"
            )
    return f"CONSUMER.CREATE.{stream}" + (f".{name}" if name else "")


def consumer_request(stream: str, cfg: ConsumerConfig, action: str) -> dict[str, Any]:
    """The ``CONSUMER.CREATE`` payload for ``cfg`` and ``action``."""
    payload: dict[str, Any] = {"stream_name": stream, "config": cfg.to_json()}
    if action:
        payload["action"] = action
    return payload


def pause_time(until: object, now: datetime) -> datetime:
    """``until`` as a time: a ``datetime`` (naive: UTC), or seconds or a ``timedelta``
    from ``now``."""
    if isinstance(until, datetime):
        return until if until.tzinfo is not None else until.replace(tzinfo=UTC)
    if isinstance(until, (int, float, timedelta)) and not isinstance(until, bool):
        return now + timedelta(seconds=seconds("until", until))
    raise InvalidArgumentTypeError(
        f"until must be a datetime, seconds or a timedelta, not {type(until).__name__}"
    )


def pause_request(until: datetime | None) -> dict[str, Any]:
    """The ``CONSUMER.PAUSE`` payload (``None``: resume)."""
    if until is None:
        return {}
    return {"pause_until": until.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"}


class Paged(Generic[T]):
    """A listing the server gives in pages, read lazily: ``async for x in listing``
    asks for the next page only once the one before is used up. ``all()`` gathers
    every page into a list (a Deferred).

    In Twisted, iterate inside a coroutine run by ``Deferred.fromCoroutine`` (or
    ``ensureDeferred``): ``async for info in js.consumers("ORDERS"): ...``. Each
    iteration starts from the first page; an API error fails the iteration.
    """

    def __init__(
        self,
        js: JetStreamContext,
        subject: str,
        key: str,
        payload: Mapping[str, Any],
        item: Callable[[Any], T],
    ) -> None:
        self._js = js
        self._subject = subject
        self._key = key
        self._payload = dict(payload)
        self._item = item
        #: Pages asked for by the iterations so far (for tests and curiosity).
        self.pages_requested = 0

    def __aiter__(self) -> AsyncIterator[T]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[T]:
        offset = 0
        while True:
            self.pages_requested += 1
            resp = await self._js.api_request(self._subject, {**self._payload, "offset": offset})
            got = answer_value(resp, self._key, list, [])
            want = str if self._item is str else Mapping  # names, or infos
            for raw in got:
                if isinstance(raw, want):  # (anything else: not the server's answer)
                    yield self._item(raw)
            offset += len(got)
            if not got or offset >= answer_value(resp, "total", int, 0):
                return

    def all(self) -> Deferred[list[T]]:
        """Every item of every page."""

        async def gather() -> list[T]:
            return [x async for x in self]

        return Deferred.fromCoroutine(gather())


def stream_listing(
    js: JetStreamContext, subject: str | None, names: bool
) -> Paged[Any]:
    """``STREAM.NAMES`` or ``STREAM.LIST`` (infos), optionally of the streams taking
    ``subject``."""
    payload: dict[str, Any] = {} if subject is None else {"subject": subject}
    if names:
        return Paged(js, "STREAM.NAMES", "streams", payload, str)
    return Paged(js, "STREAM.LIST", "streams", payload, StreamInfo.from_json)


def consumer_listing(js: JetStreamContext, stream: str, names: bool) -> Paged[Any]:
    """``CONSUMER.NAMES`` or ``CONSUMER.LIST`` (infos) of ``stream``."""
    check_name("stream", stream)
    if names:
        return Paged(js, f"CONSUMER.NAMES.{stream}", "consumers", {}, str)
    return Paged(js, f"CONSUMER.LIST.{stream}", "consumers", {}, ConsumerInfo.from_json)


def stream_info_request(
    deleted_details: bool, subjects_filter: str | None, offset: int = 0
) -> dict[str, Any] | None:
    """The ``STREAM.INFO`` payload (``None``: none needed)."""
    payload: dict[str, Any] = {}
    if deleted_details:
        payload["deleted_details"] = True
    if subjects_filter is not None:
        if not isinstance(subjects_filter, str) or not subjects_filter:
            raise InvalidArgumentError(
                f"subjects_filter must be a non-empty subject, not {subjects_filter!r}"
            )
        payload["subjects_filter"] = subjects_filter
    if offset:
        payload["offset"] = check_count("offset", offset, minimum=0)
    return payload or None



def _subjects(resp: Mapping[str, Any]) -> dict[str, Any]:
    return answer_value(answer_value(resp, "state", dict, {}), "subjects", dict, {})


async def stream_info_pages(
    js: JetStreamContext, name: str, deleted_details: bool, subjects_filter: str | None,
    payload: dict[str, Any] | None,
) -> StreamInfo:
    """``STREAM.INFO``, asking again from the next offset while the server pages the
    per-subject counts (it sends at most its limit, 100,000, per answer)."""
    resp = await js.api_request(f"STREAM.INFO.{name}", payload)
    subjects: dict[str, int] = dict(_subjects(resp))
    total = answer_value(resp, "total", int, 0)
    while subjects_filter is not None and total and len(subjects) < total:
        more = await js.api_request(
            f"STREAM.INFO.{name}",
            stream_info_request(deleted_details, subjects_filter, len(subjects)),
        )
        page = _subjects(more)
        if not page:
            break
        subjects.update(page)
    for k in ("total", "offset", "limit"):
        resp.pop(k, None)
    info = StreamInfo.from_json(resp)
    if subjects_filter is not None:
        info.state.subjects = subjects
    return info
