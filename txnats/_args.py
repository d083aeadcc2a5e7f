"""Checking the numbers callers pass, before anything is sent, queued or changed.

Every public call that takes a timeout, an interval, a jitter, a limit or a count checks
it here first, so that a bad value fails at the call with an
:class:`~txnats.errors.InvalidArgumentError` naming the argument, never deep inside
Twisted's ``callLater`` with half of an operation done.

The rules, one per kind of number:

- :func:`check_timeout` -- seconds to wait: a finite number above zero, or ``None``
  (wait without limit) where the call allows it. ``0``, negatives, NaN and infinity
  are refused: a zero wait can only fail, and ``None`` is how "no limit" is spelt.
- :func:`check_delay` -- seconds that may be zero (an interval or a jitter): finite,
  not negative.
- :func:`check_count` -- a whole number (``bool`` refused) at least ``minimum``.
"""

from __future__ import annotations

import math
from numbers import Real

from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["check_count", "check_delay", "check_reactor", "check_timeout"]


def _seconds(name: str, value: object) -> float:
    if type(value) is float or type(value) is int:
        seconds = float(value)  # (the common case, without the slower ABC check below)
        if math.isnan(seconds):
            raise InvalidArgumentError(f"{name} must be a number of seconds, not NaN")
        return seconds
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidArgumentTypeError(
            f"{name} must be a number of seconds, not {type(value).__name__}"
        )
    seconds = float(value)
    if math.isnan(seconds):
        raise InvalidArgumentError(f"{name} must be a number of seconds, not NaN")
    return seconds


def check_timeout(name: str, value: object, *, allow_none: bool = True) -> float | None:
    """Return ``value`` as seconds (> 0 and finite), or ``None`` where allowed.

    :raises InvalidArgumentError: for NaN, infinity, zero, a negative number, a
        non-number, or ``None`` where ``allow_none`` is false.
    """
    if value is None:
        if allow_none:
            return None
        raise InvalidArgumentTypeError(f"{name} must be a number of seconds, not None")
    seconds = _seconds(name, value)
    if math.isinf(seconds):
        hint = "; use None for no limit" if allow_none else ""
        raise InvalidArgumentError(f"{name} must be finite, not {value!r}{hint}")
    if seconds <= 0:
        raise InvalidArgumentError(f"{name} must be above zero, not {value!r}")
    return seconds


def check_delay(name: str, value: object) -> float:
    """Return ``value`` as seconds (>= 0 and finite).

    :raises InvalidArgumentError: for NaN, infinity, a negative number or a non-number.
    """
    seconds = _seconds(name, value)
    if math.isinf(seconds):
        raise InvalidArgumentError(f"{name} must be finite, not {value!r}")
    if seconds < 0:
        raise InvalidArgumentError(f"{name} must not be negative, not {value!r}")
    return seconds


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``.

    :raises InvalidArgumentError: otherwise (:class:`InvalidArgumentTypeError` for a
        value that is not an ``int``: floats, NaN and infinity included).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(
            f"{name} must be a whole number, not {type(value).__name__} {value!r}"
        )
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, not {value!r}")
    return value


def check_reactor(what: str, reactor: object) -> None:
    """Refuse a first argument that is not a reactor (``connect("nats://...")``).

    :raises InvalidArgumentTypeError: naming the call, ``what``.
    """
    if isinstance(reactor, (str, bytes)) or not callable(getattr(reactor, "callLater", None)):
        raise InvalidArgumentTypeError(
            f"{what}(reactor, servers, ...): the first argument must be a reactor, "
            f"not {type(reactor).__name__}"
        )
