"""Finding and watching services: :func:`ping`, :func:`info` and :func:`stats` ask
every instance that answers (or those of one service, or one instance) and return
their typed responses."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from twisted.logger import Logger

from txnats._args import check_timeout
from txnats.errors import NoRespondersError
from txnats.micro.errors import InvalidResponseError
from txnats.micro.responses import InfoResponse, PingResponse, StatsResponse
from txnats.micro.service import API_PREFIX, control_subject

if TYPE_CHECKING:
    from txnats.client import Client
    from txnats.protocol.events import Msg

__all__ = ["info", "ping", "stats"]

log = Logger()

T = TypeVar("T", PingResponse, InfoResponse, StatsResponse)


async def _gather(
    nc: Client,
    verb: str,
    parse: Callable[[object], T],
    name: str | None,
    id: str | None,
    timeout: float,
    stall: float | None,
    prefix: str,
) -> list[T]:
    subject = control_subject(verb, name, id, prefix=prefix)
    timeout = check_timeout("timeout", timeout, allow_none=False)  # type: ignore[assignment]
    if stall is not None:
        stall = check_timeout("stall", stall)
    try:
        msgs: list[Msg] = await nc.request_many(
            subject, b"", timeout=timeout, stall=stall, max_msgs=1 if id is not None else None
        )
    except NoRespondersError:
        return []
    out: list[T] = []
    for msg in msgs:
        try:
            out.append(parse(json.loads(msg.data)))
        except (ValueError, RecursionError, InvalidResponseError) as e:
            log.warn(
                "Ignored a malformed answer to {subject}: {error}", subject=subject, error=e
            )
    return out


async def ping(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = 1.0,
    stall: float | None = None,
    prefix: str = API_PREFIX,
) -> list[PingResponse]:
    """Ping every service instance (or those called ``name``, or instance ``id`` of
    it) and return their answers.

    Gathers answers for ``timeout`` seconds, or until ``stall`` seconds pass without
    one (for one instance, until it answers). No service at all is an empty list; an
    answer that is not ADR-32 JSON is logged and left out. ``prefix`` replaces
    ``$SRV`` for services that use another.

    :raises InvalidServiceConfigError: for a bad ``name``, ``id`` or ``prefix``.
    :raises InvalidArgumentError: for a bad ``timeout`` or ``stall``.
    """
    return await _gather(nc, "PING", PingResponse.from_dict, name, id, timeout, stall, prefix)


async def info(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = 1.0,
    stall: float | None = None,
    prefix: str = API_PREFIX,
) -> list[InfoResponse]:
    """Ask every service instance (or those called ``name``, or instance ``id``) for
    its info (endpoints, subjects, queue groups, metadata); see :func:`ping`."""
    return await _gather(nc, "INFO", InfoResponse.from_dict, name, id, timeout, stall, prefix)


async def stats(
    nc: Client,
    name: str | None = None,
    id: str | None = None,
    *,
    timeout: float = 1.0,
    stall: float | None = None,
    prefix: str = API_PREFIX,
) -> list[StatsResponse]:
    """Ask every service instance (or those called ``name``, or instance ``id``) for
    its statistics per endpoint; see :func:`ping`."""
    return await _gather(nc, "STATS", StatsResponse.from_dict, name, id, timeout, stall, prefix)
