"""The ADR-32 responses as typed values: what ``$SRV.PING``, ``$SRV.INFO`` and
``$SRV.STATS`` return, both ways (a service writes them with ``to_dict()``, a caller
reads them with ``from_dict()``).

Reading is lenient where other implementations differ: ``metadata`` may be ``null``,
``description`` may be missing, ``started`` may carry up to nanoseconds (nats.go) or
microseconds (nats-py, txnats), ``data`` may be absent. Writing follows ADR-32 and
what nats.go and nats-py both read: every field present, metadata as objects,
``started`` in UTC with microseconds and a ``Z``, ``data`` null when there is none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from txnats.micro.errors import InvalidResponseError

__all__ = [
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "EndpointInfo",
    "EndpointStats",
    "InfoResponse",
    "InvalidResponseError",
    "PingResponse",
    "StatsResponse",
    "format_time",
    "parse_time",
]

#: The ``type`` field of a service's answer to ``$SRV.PING`` (ADR-32).
PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
#: The ``type`` field of a service's answer to ``$SRV.INFO`` (ADR-32).
INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
#: The ``type`` field of a service's answer to ``$SRV.STATS`` (ADR-32).
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"

_TIME = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)"
)


def format_time(when: datetime) -> str:
    """``when`` in UTC as RFC 3339 with microseconds: ``2026-12-03T12:00:00.123456Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (fraction of up to 9 digits, ``Z`` or an offset), aware.

    :raises InvalidResponseError: if ``text`` is not one.
    """
    m = _TIME.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidResponseError(f"not an RFC 3339 time: {text!r}")
    base, frac, zone = m.groups()
    micros = (frac or "").ljust(6, "0")[:6]
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(f"{base}.{micros}{zone}")


def _str(d: dict[str, Any], key: str, default: str | None = None) -> str:
    value = d.get(key, default)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise InvalidResponseError(f"{key!r} must be a string, not {value!r}")
    return value


def _int(d: dict[str, Any], key: str) -> int:
    value = d.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidResponseError(f"{key!r} must be a whole number, not {value!r}")
    return value


def _meta(d: dict[str, Any]) -> dict[str, str]:
    value = d.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidResponseError(f"'metadata' must map strings to strings, not {value!r}")
    return dict(value)


def _object(d: object, type_: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise InvalidResponseError(f"a {type_} is a JSON object, not {type(d).__name__}")
    got = d.get("type", type_)
    if got != type_:
        raise InvalidResponseError(f"expected type {type_!r}, got {got!r}")
    return d


def _list(d: dict[str, Any], key: str) -> list[Any]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidResponseError(f"{key!r} must be a list, not {value!r}")
    return value


@dataclass(frozen=True)
class PingResponse:
    """A service instance's identity: the answer to ``$SRV.PING``."""

    name: str
    id: str
    version: str
    metadata: dict[str, str] = field(default_factory=dict)
    type: str = PING_RESPONSE_TYPE

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object."""
        return {
            "type": self.type, "name": self.name, "id": self.id, "version": self.version,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: object) -> PingResponse:
        """Read a decoded ping response.

        :raises InvalidResponseError: if it is not one.
        """
        o = _object(d, PING_RESPONSE_TYPE)
        return cls(_str(o, "name"), _str(o, "id"), _str(o, "version"), _meta(o))


@dataclass(frozen=True)
class EndpointInfo:
    """An endpoint as ``$SRV.INFO`` describes it (``queue_group`` is ``""`` for an
    endpoint without a queue group)."""

    name: str
    subject: str
    queue_group: str
    metadata: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object."""
        return {
            "name": self.name, "subject": self.subject, "queue_group": self.queue_group,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: object) -> EndpointInfo:
        """Read a decoded endpoint info.

        :raises InvalidResponseError: if it is not one.
        """
        if not isinstance(d, dict):
            raise InvalidResponseError(f"an endpoint is a JSON object, not {d!r}")
        return cls(_str(d, "name"), _str(d, "subject"), _str(d, "queue_group", ""), _meta(d))


@dataclass(frozen=True)
class InfoResponse:
    """A service instance and its endpoints: the answer to ``$SRV.INFO``."""

    name: str
    id: str
    version: str
    description: str = ""
    endpoints: tuple[EndpointInfo, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    type: str = INFO_RESPONSE_TYPE

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object."""
        return {
            "type": self.type, "name": self.name, "id": self.id, "version": self.version,
            "metadata": dict(self.metadata), "description": self.description,
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, d: object) -> InfoResponse:
        """Read a decoded info response.

        :raises InvalidResponseError: if it is not one.
        """
        o = _object(d, INFO_RESPONSE_TYPE)
        return cls(
            _str(o, "name"), _str(o, "id"), _str(o, "version"), _str(o, "description", ""),
            tuple(EndpointInfo.from_dict(e) for e in _list(o, "endpoints")), _meta(o),
        )


@dataclass(frozen=True)
class EndpointStats:
    """An endpoint's counters as ``$SRV.STATS`` reports them; times in nanoseconds,
    ``data`` what the service's stats handler returned (or ``None``)."""

    name: str
    subject: str
    queue_group: str
    num_requests: int = 0
    num_errors: int = 0
    last_error: str = ""
    processing_time: int = 0
    average_processing_time: int = 0
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object."""
        return {
            "name": self.name, "subject": self.subject, "queue_group": self.queue_group,
            "num_requests": self.num_requests, "num_errors": self.num_errors,
            "last_error": self.last_error, "processing_time": self.processing_time,
            "average_processing_time": self.average_processing_time, "data": self.data,
        }

    @classmethod
    def from_dict(cls, d: object) -> EndpointStats:
        """Read decoded endpoint stats.

        :raises InvalidResponseError: if they are not.
        """
        if not isinstance(d, dict):
            raise InvalidResponseError(f"endpoint stats are a JSON object, not {d!r}")
        return cls(
            _str(d, "name"), _str(d, "subject"), _str(d, "queue_group", ""),
            _int(d, "num_requests"), _int(d, "num_errors"), _str(d, "last_error", ""),
            _int(d, "processing_time"), _int(d, "average_processing_time"), d.get("data"),
        )


@dataclass(frozen=True)
class StatsResponse:
    """A service instance's counters per endpoint: the answer to ``$SRV.STATS``."""

    name: str
    id: str
    version: str
    started: datetime
    endpoints: tuple[EndpointStats, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    type: str = STATS_RESPONSE_TYPE

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object."""
        return {
            "type": self.type, "name": self.name, "id": self.id, "version": self.version,
            "metadata": dict(self.metadata), "started": format_time(self.started),
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, d: object) -> StatsResponse:
        """Read a decoded stats response.

        :raises InvalidResponseError: if it is not one.
        """
        o = _object(d, STATS_RESPONSE_TYPE)
        return cls(
            _str(o, "name"), _str(o, "id"), _str(o, "version"),
            parse_time(_str(o, "started")),
            tuple(EndpointStats.from_dict(e) for e in _list(o, "endpoints")), _meta(o),
        )
