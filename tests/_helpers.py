"""Moved to :mod:`tests.support` (``waits`` and ``files``).

Only re-exports, for the modules that still import from here; once they import from
:mod:`tests.support`, delete this file.
"""

from tests.support.files import free_port, temp_file, write_file
from tests.support.waits import WAIT, bounded, reactor, sleep, wait_until

__all__ = ["WAIT", "bounded", "free_port", "reactor", "sleep", "temp_file", "wait_until",
           "write_file"]
