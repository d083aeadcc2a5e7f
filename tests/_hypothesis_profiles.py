"""Hypothesis settings profiles for the test suite: ``dev`` locally, ``ci`` under CI.

``tests/__init__.py`` calls :func:`load` when the package is first imported, which both
pytest and trial do before any test module. That order matters: an ``@settings(...)``
decorator copies the active profile's values for every key it does not name when its
module is imported, so the profile must be loaded first. (A ``conftest.py`` would only
work under pytest; trial never reads it.)

- ``dev`` (no ``CI``): Hypothesis' own defaults. Each run explores new random examples,
  and failing ones are saved in ``.hypothesis/`` and replayed first next time.
- ``ci`` (``CI`` set to a non-empty value, as CI services set ``CI=true``): the same
  examples on every run of the same code (``derandomize``), no example database, no
  deadline and no ``too_slow`` health check (both depend on the machine's speed), and a
  reproduction blob printed with any failure.

Run the suite with ``CI=true`` to see locally exactly what CI runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hypothesis import HealthCheck, settings

DEV = "dev"
CI = "ci"

_BASE = settings.get_profile("default")
settings.register_profile(DEV, _BASE, derandomize=False)
settings.register_profile(
    CI,
    _BASE,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def profile_for(environ: Mapping[str, str]) -> str:
    """The profile's name for the environment ``environ``.

    :param environ: environment variables, such as :data:`os.environ`.
    :returns: :data:`CI` if ``CI`` is set and not empty, else :data:`DEV`.
    """
    return CI if environ.get("CI") else DEV


def load(environ: Mapping[str, str] = os.environ) -> str:
    """Load the profile :func:`profile_for` picks for ``environ``, and name it.

    :param environ: environment variables; :data:`os.environ` by default.
    :returns: the name of the profile now active.
    """
    name = profile_for(environ)
    settings.load_profile(name)
    return name
