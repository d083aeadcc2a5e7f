"""Fast unique identifiers (the NUID scheme: a random prefix and a counter).

An id is 22 base-62 characters: a 12-character random prefix, drawn from the operating
system's CSPRNG, and a 10-character sequence that grows by a random increment. When the
sequence runs out, a new prefix is drawn. Ids are unique per process and unguessable
enough for inbox names; they are not secrets.
"""

from __future__ import annotations

import secrets

__all__ = ["NUID", "next_nuid"]

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE = 62
_PREFIX_LEN = 12
_SEQ_LEN = 10
_MAX_SEQ = _BASE**_SEQ_LEN
_MIN_INC = 33
_MAX_INC = 333


class NUID:
    """A generator of 22-character unique ids."""

    __slots__ = ("_inc", "_prefix", "_seq")

    def __init__(self) -> None:
        self._prefix = ""
        self._seq = 0
        self._inc = 0
        self._reset()

    def _reset(self) -> None:
        self._prefix = "".join(secrets.choice(_DIGITS) for _ in range(_PREFIX_LEN))
        self._seq = secrets.randbelow(_MAX_SEQ)
        self._inc = _MIN_INC + secrets.randbelow(_MAX_INC - _MIN_INC)

    def next(self) -> str:
        """Return the next id."""
        self._seq += self._inc
        if self._seq >= _MAX_SEQ:
            self._reset()
        n = self._seq
        out = []
        for _ in range(_SEQ_LEN):
            n, r = divmod(n, _BASE)
            out.append(_DIGITS[r])
        return self._prefix + "".join(reversed(out))


_global = NUID()


def next_nuid() -> str:
    """Return the next id from the process-wide generator."""
    return _global.next()
