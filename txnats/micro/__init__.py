"""The NATS service API (ADR-32): request/reply services that ``nats micro``,
nats.go's ``micro`` and nats-py's ``nats.micro`` discover and measure as their own.

::

    svc = txnats.micro.add_service(nc, name="math", version="1.0.0")
    svc.add_group("math").add_endpoint("add", handle_add)     # subject math.add, queue q
    found = await txnats.micro.ping(nc, "math", timeout=0.5)   # every instance answers

Built on the client's public API only; see :mod:`txnats.micro.service` (services),
:mod:`txnats.micro.request` (what handlers get), :mod:`txnats.micro.responses` (the
ADR-32 JSON, typed) and :mod:`txnats.micro.client` (discovery).
"""

from __future__ import annotations

from txnats.micro.client import info, ping, stats
from txnats.micro.errors import (
    AlreadyRespondedError,
    InvalidResponseError,
    InvalidServiceConfigError,
    ServiceError,
    ServiceStoppedError,
)
from txnats.micro.request import ERROR_CODE_HEADER, ERROR_HEADER, Request
from txnats.micro.responses import (
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    EndpointInfo,
    EndpointStats,
    InfoResponse,
    PingResponse,
    StatsResponse,
)
from txnats.micro.service import (
    API_PREFIX,
    DEFAULT_QUEUE_GROUP,
    INHERIT,
    Endpoint,
    ErrorHandler,
    Group,
    Handler,
    Service,
    StatsHandler,
    add_service,
    control_subject,
)

__all__ = [
    "API_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "INFO_RESPONSE_TYPE",
    "INHERIT",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "AlreadyRespondedError",
    "Endpoint",
    "EndpointInfo",
    "EndpointStats",
    "ErrorHandler",
    "Group",
    "Handler",
    "InfoResponse",
    "InvalidResponseError",
    "InvalidServiceConfigError",
    "PingResponse",
    "Request",
    "Service",
    "ServiceError",
    "ServiceStoppedError",
    "StatsHandler",
    "StatsResponse",
    "add_service",
    "control_subject",
    "info",
    "ping",
    "stats",
]
