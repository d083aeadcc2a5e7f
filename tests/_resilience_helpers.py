"""Moved to :mod:`tests.support` (``waits``, ``events`` and ``figures``).

Only re-exports, for the modules that still import from here; once they import from
:mod:`tests.support`, delete this file.
"""

from tests.support.events import ClientEvents, FailureLog
from tests.support.figures import figure, rss_bytes
from tests.support.waits import bounded, reactor, sleep, turn, wait_until

__all__ = [
    "ClientEvents",
    "FailureLog",
    "bounded",
    "figure",
    "reactor",
    "rss_bytes",
    "sleep",
    "turn",
    "wait_until",
]
