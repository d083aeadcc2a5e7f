"""The naming rules of ADR-32, checked before anything is subscribed.

- a service or endpoint name: ``A-Z a-z 0-9 - _``, not empty;
- a version: semantic versioning, by the regular expression semver.org suggests;
- an endpoint subject or a queue group: no space and no ``>`` but at the very end
  (the client then checks the subject's tokens as it does for any subscription);
- a group's name: the same, without ``>`` at all (it prefixes subjects);
- metadata: a mapping of strings to strings;
- a monitoring prefix (``$SRV`` unless changed): tokens without wildcards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from txnats.micro.errors import InvalidServiceConfigError

__all__ = [
    "check_group_name",
    "check_metadata",
    "check_name",
    "check_prefix",
    "check_queue_group",
    "check_subject",
    "check_version",
]

NAME = re.compile(r"[A-Za-z0-9_-]+")
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
SUBJECT = re.compile(r"[^ >]*>?")


def _text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidServiceConfigError(f"{what} must be a string, not {type(value).__name__}")
    return value


def check_name(what: str, value: object) -> str:
    """Return ``value`` if it is a valid service or endpoint name.

    :raises InvalidServiceConfigError: naming ``what`` otherwise.
    """
    name = _text(what, value)
    if not NAME.fullmatch(name):
        raise InvalidServiceConfigError(
            f"{what} {name!r} is not valid: use only letters, digits, '-' and '_' "
            "(at least one)"
        )
    return name


def check_version(value: object) -> str:
    """Return ``value`` if it is a semantic version (``1.0.0``, ``2.1.3-alpha.1+b5``).

    :raises InvalidServiceConfigError: otherwise.
    """
    version = _text("version", value)
    if not SEMVER.fullmatch(version):
        raise InvalidServiceConfigError(
            f"version {version!r} is not a semantic version (MAJOR.MINOR.PATCH, "
            "like 1.0.0 or 2.1.3-alpha.1, see semver.org)"
        )
    return version


def check_subject(what: str, value: object) -> str:
    """Return ``value`` if it may be an endpoint's subject: not empty, no space, and
    ``>`` only as its last character.

    :raises InvalidServiceConfigError: naming ``what`` otherwise.
    """
    subject = _text(what, value)
    if not subject or not SUBJECT.fullmatch(subject) or "\t" in subject:
        raise InvalidServiceConfigError(
            f"{what} {subject!r} is not valid: it must not be empty, must hold no "
            "whitespace, and may hold '>' only at its end"
        )
    return subject


def check_group_name(value: object) -> str:
    """Return ``value`` if it may prefix subjects: no whitespace and no ``>``.

    :raises InvalidServiceConfigError: otherwise.
    """
    name = _text("group name", value)
    if ">" in name or any(c.isspace() for c in name):
        raise InvalidServiceConfigError(
            f"group name {name!r} is not valid: it prefixes subjects, so it must hold "
            "no whitespace and no '>'"
        )
    return name


def check_queue_group(value: object) -> str | None:
    """Return ``value`` if it is ``None`` (no queue group) or a valid queue group name.

    :raises InvalidServiceConfigError: otherwise.
    """
    if value is None:
        return None
    queue = _text("queue_group", value)
    if not queue or not SUBJECT.fullmatch(queue) or any(c.isspace() for c in queue):
        raise InvalidServiceConfigError(
            f"queue_group {queue!r} is not valid: it must not be empty and must hold no "
            "whitespace (None means no queue group)"
        )
    return queue


def check_metadata(what: str, value: object) -> dict[str, str]:
    """Return a copy of ``value`` (``None`` is an empty mapping) if it maps strings to
    strings.

    :raises InvalidServiceConfigError: naming ``what`` otherwise.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidServiceConfigError(
            f"{what} must be a mapping of strings to strings, not {type(value).__name__}"
        )
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidServiceConfigError(
                f"{what} must map strings to strings, not {k!r} to {v!r}"
            )
        out[k] = v
    return out


_TOKEN = re.compile(r"[^\s.*>]+")


def check_prefix(value: object) -> str:
    """Return ``value`` if it may start the monitoring subjects (``$SRV``, or another
    for services reached across accounts): dot-separated tokens, no wildcard.

    :raises InvalidServiceConfigError: otherwise.
    """
    prefix = _text("prefix", value)
    if not all(_TOKEN.fullmatch(t) for t in prefix.split(".")):
        raise InvalidServiceConfigError(
            f"prefix {prefix!r} is not valid: it must be tokens separated by '.', without "
            "whitespace or wildcards"
        )
    return prefix
