"""Moved to :mod:`tests.support.servers`.

Only a re-export, for the modules that still import from here; once they import from
:mod:`tests.support.servers`, delete this file.
"""

from tests.support.servers import ServerPerClass

__all__ = ["ServerPerClass"]
