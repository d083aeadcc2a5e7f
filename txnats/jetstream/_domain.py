"""What a JetStream domain or an API prefix may be, checked before anything is sent.

A domain ``hub`` is reached through the API prefix ``$JS.hub.API`` (ADR-19): the
context of ``nc.jetstream(domain="hub")``, and the ``external`` API of a bucket that
mirrors or sources one in that domain. A bad name would otherwise make a prefix that
nothing answers (a request times out, a mirror never fills), so it is refused here.
No I/O; imports nothing of ``txnats.jetstream``.
"""

from __future__ import annotations

from txnats.errors import BadSubjectError, InvalidArgumentError, InvalidArgumentTypeError
from txnats.protocol.commands import publish_subject

__all__ = ["check_api_prefix", "check_domain", "domain_api_prefix"]

#: What a domain name may not contain (nats-server refuses such a domain too).
_FORBIDDEN_IN_DOMAIN = frozenset(" \t\r\n\f\v.*>")


def check_domain(domain: object, what: str = "domain") -> str:
    """Return ``domain`` if it is a valid JetStream domain name: a non-empty string
    without whitespace, ``.``, ``*`` or ``>``.

    :param what: the argument's name, for the error.
    :raises InvalidArgumentTypeError: if it is not a string.
    :raises InvalidArgumentError: if it is empty or holds a forbidden character.
    """
    if not isinstance(domain, str):
        raise InvalidArgumentTypeError(f"{what} must be a str, not {type(domain).__name__}")
    if not domain or not domain.isprintable() or any(c in _FORBIDDEN_IN_DOMAIN for c in domain):
        raise InvalidArgumentError(
            f"invalid {what} {domain!r}: a JetStream domain is a non-empty name without "
            "whitespace, '.', '*' or '>'"
        )
    return domain


def check_api_prefix(prefix: object, what: str = "api_prefix") -> str:
    """Return the JetStream API prefix ``prefix`` without trailing dots, if the rest is
    a subject without wildcards (``$JS.hub.API``, ``JS.acme.API``).

    :param what: the argument's name, for the error.
    :raises InvalidArgumentTypeError: if it is not a string.
    :raises InvalidArgumentError: if it is empty, has an empty token, whitespace or a
        wildcard.
    """
    if not isinstance(prefix, str):
        raise InvalidArgumentTypeError(f"{what} must be a str, not {type(prefix).__name__}")
    stripped = prefix.rstrip(".")
    try:
        publish_subject(stripped)
    except BadSubjectError:
        raise InvalidArgumentError(
            f"invalid {what} {prefix!r}: a JetStream API prefix is a subject without "
            "wildcards, empty tokens or whitespace"
        ) from None
    return stripped


def domain_api_prefix(domain: object, what: str = "domain") -> str:
    """The API prefix of the JetStream domain ``domain`` (checked): ``$JS.<domain>.API``.

    :param what: the argument's name, for the error.
    :raises InvalidArgumentError: as :func:`check_domain`.
    """
    return f"$JS.{check_domain(domain, what)}.API"
