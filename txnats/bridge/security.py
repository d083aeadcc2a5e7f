"""The bridge's guards: the HTTP token, the listen check, subject allow/deny lists.

Everything here is pure (no reactor, no I/O but reading a token file), so the rules are
tested with plain values.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from txnats.errors import BadSubjectError, ControlLineTooLongError, InvalidArgumentError
from txnats.options import DEFAULT_MAX_CONTROL_LINE, Options
from txnats.protocol.commands import publish_subject, subscribe_subject

__all__ = [
    "CONTROL_LINE_RESERVE",
    "ROUTES",
    "SubjectPolicy",
    "check_fits",
    "check_listen",
    "check_subject",
    "is_public",
    "max_control_line",
    "parse_listen",
    "parse_rule",
    "read_token_file",
    "token_matches",
]

#: The HTTP routes a subject rule may name (``*`` names them all).
ROUTES = ("publish", "request", "subscribe", "js", "kv")


def token_matches(expected: str, given: bytes | str | None) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time, byte for byte (the
    token's UTF-8 bytes: a token sent in bytes that are not UTF-8 matches nothing).

    :param expected: the configured token.
    :param given: what the client sent (its bytes), or None when it sent nothing.
    """
    if given is None:
        return False
    if isinstance(given, str):
        given = given.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(expected.encode("utf-8"), given)


def read_token_file(path: str) -> str:
    """The token in ``path``: its first line, stripped.

    :raises InvalidArgumentError: if the file cannot be read or holds no token.
    """
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline().strip()
    except OSError as e:
        raise InvalidArgumentError(f"--auth-token-file: cannot read {path}: {e.strerror}") from e
    if not token:
        raise InvalidArgumentError(f"--auth-token-file: {path} holds no token")
    return token


def _split_unescaped(text: str) -> list[str]:
    """Split a Twisted endpoint description on ``:`` not preceded by a backslash."""
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ":":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_listen(description: str) -> tuple[str, list[str], dict[str, str]]:
    """A server endpoint description as ``(type, positional args, keyword args)``.

    :raises InvalidArgumentError: if it is empty.
    """
    if not description.strip():
        raise InvalidArgumentError("--listen must not be empty")
    kind, *rest = _split_unescaped(description)
    args: list[str] = []
    kwargs: dict[str, str] = {}
    for part in rest:
        name, sep, value = part.partition("=")
        if sep:
            kwargs[name] = value
        else:
            args.append(part)
    return kind.lower(), args, kwargs


def _is_loopback(interface: str) -> bool:
    if interface.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(interface.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(description: str, *, has_token: bool, insecure_no_auth: bool = False) -> None:
    """Refuse an HTTP listener that others could reach without a token.

    Loopback TCP or TLS (``interface=127.0.0.1``, ``::1``, ``localhost``) and UNIX
    sockets are local: anything else (all interfaces, a public address, another kind of
    endpoint) needs ``--auth-token``, TLS or not. TLS keeps the traffic and the token
    from being read or changed on the way; it does not decide who may connect, so an
    ``ssl:`` listener without a token would let anyone who reaches the port publish and
    subscribe. ``insecure_no_auth`` (``--insecure-no-auth``) accepts such a listener
    anyway, for a network where something in front of the bridge decides who connects.

    :raises InvalidArgumentError: saying why, and what to do about it.
    """
    if has_token or insecure_no_auth or not is_public(description):
        return
    interface = parse_listen(description)[2].get("interface", "")
    where = f"interface {interface}" if interface else "all interfaces"
    raise InvalidArgumentError(
        f"refusing to listen on {where} ({description}) without --auth-token "
        f"(or --auth-token-file): TLS protects the traffic but lets anyone connect. "
        f"For local use only, add interface=127.0.0.1; if something in front of the "
        f"bridge decides who may connect, add --insecure-no-auth"
    )


def is_public(description: str) -> bool:
    """Whether a listener is reachable beyond this host (not loopback, not UNIX)."""
    kind, _args, kwargs = parse_listen(description)
    if kind == "unix":
        return False
    return not (kind in ("tcp", "tcp6", "ssl") and _is_loopback(kwargs.get("interface", "")))


def _tokens_overlap(a: list[str], b: list[str]) -> bool:
    """Whether some subject matches both patterns (token lists)."""
    for x, y in zip(a, b, strict=False):
        if x == ">" or y == ">":
            return True
        if x != y and x != "*" and y != "*":
            return False
    return len(a) == len(b)


def _tokens_within(subject: list[str], pattern: list[str]) -> bool:
    """Whether every subject ``subject`` (possibly a wildcard) matches is in ``pattern``."""
    for i, p in enumerate(pattern):
        if p == ">":
            return i < len(subject)
        if i >= len(subject):
            return False
        s = subject[i]
        if s == ">":
            return False
        if p != "*" and (s == "*" or s != p):
            return False
    return len(subject) == len(pattern)


def parse_rule(text: str) -> tuple[str, str]:
    """An allow/deny rule ``ROUTE:PATTERN`` (or a bare ``PATTERN`` for every route).

    :raises InvalidArgumentError: for an unknown route or a bad pattern.
    """
    route, sep, pattern = text.partition(":")
    if not sep:
        route, pattern = "*", text
    if route != "*" and route not in ROUTES:
        raise InvalidArgumentError(
            f"unknown route {route!r} in {text!r}: one of {', '.join(ROUTES)} or *"
        )
    try:
        subscribe_subject(pattern)
    except BadSubjectError as e:
        raise InvalidArgumentError(f"bad subject pattern in {text!r}: {e}") from e
    return route, pattern


@dataclass
class SubjectPolicy:
    """Which subjects each route may use: allowed if no allow rule names the route or one
    holds the subject, and no deny rule for it overlaps the subject (deny wins)."""

    allow: Sequence[tuple[str, str]] = field(default_factory=list)
    deny: Sequence[tuple[str, str]] = field(default_factory=list)

    @staticmethod
    def _for(rules: Iterable[tuple[str, str]], route: str) -> list[list[str]]:
        return [p.split(".") for r, p in rules if r in ("*", route)]

    def permits(self, route: str, subject: str) -> bool:
        """Whether ``route`` may use ``subject`` (a pattern for ``subscribe``)."""
        tokens = subject.split(".")
        allowed = self._for(self.allow, route)
        if allowed and not any(_tokens_within(tokens, p) for p in allowed):
            return False
        return not any(_tokens_overlap(tokens, p) for p in self._for(self.deny, route))


#: Bytes of a control line kept for what the client adds to a subject on the wire: a
#: request's reply inbox, the header and payload sizes, a subscription's id.
CONTROL_LINE_RESERVE = 128


class _HasOptions(Protocol):
    @property
    def options(self) -> Options: ...


def max_control_line(client: _HasOptions | None) -> int:
    """The longest control line ``client``'s server takes, in bytes (its
    ``max_control_line`` option; nats-server's default without a client)."""
    if client is None:
        return DEFAULT_MAX_CONTROL_LINE
    return client.options.max_control_line


def check_fits(subject: str, limit: int, *, extra: str = "") -> None:
    """Refuse a subject whose control line could pass ``limit`` bytes, before anything
    is sent: nats-server closes the connection of a client that sends a longer one.

    Stricter than the client's own check (which knows each frame exactly), by
    :data:`CONTROL_LINE_RESERVE` bytes for what goes on the line besides the subject,
    so that one bound holds for every route: a subject (with a queue group, ``extra``)
    of at most ``limit - 128`` bytes.

    :param subject: the subject as it goes on the wire (the longest one an operation
        sends, for the key-value store's API subjects).
    :param limit: the server's ``max_control_line``, in bytes.
    :param extra: what else goes on the same line (a queue group).
    :raises ControlLineTooLongError: naming the sizes.
    """
    size = len(subject.encode("utf-8", "surrogateescape"))
    if extra:
        size += 1 + len(extra.encode("utf-8", "surrogateescape"))
    room = limit - CONTROL_LINE_RESERVE
    if size > room:
        raise ControlLineTooLongError(
            f"subject of {size} bytes: at most {room} fit in the server's control line "
            f"of {limit} bytes", length=size + CONTROL_LINE_RESERVE, limit=limit,
        )


def check_subject(subject: str, *, wildcards: bool) -> str:
    """``subject`` if NATS would take it (wildcards only where ``wildcards``).

    :raises BadSubjectError: naming what is wrong.
    """
    if wildcards:
        subscribe_subject(subject)
    else:
        publish_subject(subject)
    return subject
