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

Each has an upper bound too, so that an absurd number fails here, naming the argument
and the bound, rather than as an untyped ``OverflowError`` in a nanosecond conversion
or a timer once a subscription is made: seconds are at most :data:`MAX_SECONDS`
(JetStream sends durations as int64 nanoseconds: about 292 years), counts at most
:data:`MAX_COUNT` (an int64, what the server reads).
"""

from __future__ import annotations

import math
from numbers import Real

from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "MAX_COUNT",
    "MAX_SECONDS",
    "check_count",
    "check_delay",
    "check_reactor",
    "check_timeout",
]

#: The most seconds any timeout, delay or duration may be: the whole seconds that fit
#: in an int64 of nanoseconds (Go's ``time.Duration``, as JetStream reads durations),
#: about 292 years. ``int(MAX_SECONDS * 1e9)`` still fits.
MAX_SECONDS = float((2**63 - 1) // 1_000_000_000)
#: The largest count: an int64, the widest number the server reads.
MAX_COUNT = 2**63 - 1


def _seconds(name: str, value: object) -> float:
    if type(value) is float:
        if math.isnan(value):  # (the common case, without the slower ABC check below)
            raise InvalidArgumentError(f"{name} must be a number of seconds, not NaN")
        return value
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidArgumentTypeError(
            f"{name} must be a number of seconds, not {type(value).__name__}"
        )
    try:
        seconds = float(value)
    except OverflowError:  # an int (or Fraction) past what a float holds
        raise InvalidArgumentError(
            f"{name} must be at most {MAX_SECONDS:.10g} seconds, not {_shown(value)}"
        ) from None
    if math.isnan(seconds):
        raise InvalidArgumentError(f"{name} must be a number of seconds, not NaN")
    return seconds


def _shown(value: object) -> str:
    """``repr(value)``, short even for an int too long to print (past 4,300 digits
    Python refuses to convert one)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    return repr(value)


def _too_long(name: str, value: object, seconds: float, maximum: float) -> None:
    if seconds > maximum:
        raise InvalidArgumentError(
            f"{name} must be at most {maximum:.10g} seconds, not {_shown(value)}"
            + (" (about 292 years, what an int64 of nanoseconds holds)"
               if maximum == MAX_SECONDS else "")
        )


def check_timeout(
    name: str, value: object, *, allow_none: bool = True, maximum: float = MAX_SECONDS
) -> float | None:
    """Return ``value`` as seconds (> 0, finite, at most ``maximum``), or ``None``
    where allowed.

    :raises InvalidArgumentError: for NaN, infinity, zero, a negative number, more
        than ``maximum`` seconds, a non-number, or ``None`` where ``allow_none`` is false.
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
    _too_long(name, value, seconds, maximum)
    return seconds


def check_delay(name: str, value: object, *, maximum: float = MAX_SECONDS) -> float:
    """Return ``value`` as seconds (>= 0, finite, at most ``maximum``).

    :raises InvalidArgumentError: for NaN, infinity, a negative number, more than
        ``maximum`` seconds or a non-number.
    """
    seconds = _seconds(name, value)
    if math.isinf(seconds):
        raise InvalidArgumentError(f"{name} must be finite, not {value!r}")
    if seconds < 0:
        raise InvalidArgumentError(f"{name} must not be negative, not {value!r}")
    _too_long(name, value, seconds, maximum)
    return seconds


def check_count(
    name: str, value: object, *, minimum: int = 1, maximum: int = MAX_COUNT
) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) from ``minimum`` to
    ``maximum``.

    :raises InvalidArgumentError: otherwise (:class:`InvalidArgumentTypeError` for a
        value that is not an ``int``: floats, NaN and infinity included).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(
            f"{name} must be a whole number, not {type(value).__name__} {value!r}"
        )
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be at least {minimum}, not {_shown(value)}")
    if value > maximum:
        raise InvalidArgumentError(f"{name} must be at most {maximum}, not {_shown(value)}")
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
