"""JSON schemas of the ADR-32 responses, written from the ADR's text, and a validator.

ADR-32 gives each response as a TypeScript shape; here each is a JSON schema (draft
2020-12) that holds an implementation to it: every field the ADR lists is required
(``data`` of endpoint stats is optional), names follow its naming rule, versions the
semver.org expression, metadata maps strings to strings, counters and nanosecond
times are whole numbers of at least 0, and ``started`` is an RFC 3339 time in UTC.
"""

from __future__ import annotations

from typing import Any

import jsonschema

__all__ = ["SCHEMAS", "validate"]

_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"}
_SEMVER = {
    "type": "string",
    "pattern": (
        r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
        r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
        r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
        r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
    ),
}
_METADATA = {"type": "object", "additionalProperties": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 0}
_SUBJECT = {"type": "string", "minLength": 1, "pattern": r"^[^ \t\r\n>]*>?$"}
_QUEUE = {"type": "string", "pattern": r"^[^ \t\r\n]*$"}
_RFC3339_UTC = {
    "type": "string",
    "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|\+00:00)$",
}


def _response(type_: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The standard fields every response has (ADR-32 "Standard Field"), plus ``extra``."""
    props = {
        "type": {"const": type_},
        "name": _NAME,
        "id": {"type": "string", "minLength": 1},
        "version": _SEMVER,
        "metadata": _METADATA,
        **extra,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://txnats.invalid/schemas/{type_}.json",
        "type": "object",
        "properties": props,
        "required": sorted(props),
    }


_ENDPOINT_INFO = {
    "type": "object",
    "properties": {
        "name": _NAME,
        "subject": _SUBJECT,
        "queue_group": _QUEUE,
        "metadata": _METADATA,
    },
    "required": ["metadata", "name", "queue_group", "subject"],
}

_ENDPOINT_STATS = {
    "type": "object",
    "properties": {
        "name": _NAME,
        "subject": _SUBJECT,
        "queue_group": _QUEUE,
        "num_requests": _COUNT,
        "num_errors": _COUNT,
        "last_error": {"type": "string"},
        "processing_time": _COUNT,
        "average_processing_time": _COUNT,
        "data": {},
    },
    "required": [
        "average_processing_time", "last_error", "name", "num_errors", "num_requests",
        "processing_time", "queue_group", "subject",
    ],
}

#: The schema of each response, by its ``type``.
SCHEMAS: dict[str, dict[str, Any]] = {
    "io.nats.micro.v1.ping_response": _response("io.nats.micro.v1.ping_response", {}),
    "io.nats.micro.v1.info_response": _response(
        "io.nats.micro.v1.info_response",
        {
            "description": {"type": "string"},
            "endpoints": {"type": "array", "items": _ENDPOINT_INFO},
        },
    ),
    "io.nats.micro.v1.stats_response": _response(
        "io.nats.micro.v1.stats_response",
        {"started": _RFC3339_UTC, "endpoints": {"type": "array", "items": _ENDPOINT_STATS}},
    ),
}

for _schema in SCHEMAS.values():
    jsonschema.Draft202012Validator.check_schema(_schema)


def validate(obj: Any, type_: str | None = None) -> None:
    """Check ``obj`` against the schema of its ``type`` (or of ``type_``, which it must
    then have).

    :raises jsonschema.ValidationError: if it does not fit.
    """
    if type_ is None:
        type_ = obj.get("type") if isinstance(obj, dict) else None
    schema = SCHEMAS.get(type_ or "")
    if schema is None:
        raise jsonschema.ValidationError(f"no ADR-32 response type: {type_!r}")
    jsonschema.Draft202012Validator(schema).validate(obj)
