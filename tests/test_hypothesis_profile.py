"""Tests for the Hypothesis settings profiles chosen in ``tests/__init__.py``.

Under CI (``CI`` set) every property test must run the same examples on every run and
keep no example database; locally it must keep exploring at random. The profile is
picked when the ``tests`` package is imported, so the end-to-end checks import it in a
fresh interpreter with and without ``CI``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from hypothesis import settings
from twisted.trial.unittest import SynchronousTestCase

from tests import _hypothesis_profiles as profiles

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The modules whose tests carry their own @settings(...) decorators.
_MODULES = (
    "tests.test_parser",
    "tests.test_commands",
    "tests.test_headers",
    "tests.test_hostile_input",
)

# Run in a fresh interpreter: import the tests package (which loads the profile) and the
# modules above, then report the active profile and the settings each property test
# ended up with (its @settings(...) arguments over the profile loaded at import time).
_REPORT = """
import importlib, json, sys
import tests
from hypothesis import settings
out = {"derandomize": settings.default.derandomize,
       "no_database": settings.default.database is None,
       "no_deadline": settings.default.deadline is None,
       "tests": {}}
for name in sys.argv[1:]:
    for cls in vars(importlib.import_module(name)).values():
        for attr, fn in vars(cls).items() if isinstance(cls, type) else ():
            s = getattr(fn, "_hypothesis_internal_use_settings", None)
            if s is not None:
                out["tests"][name + "." + cls.__name__ + "." + attr] = [
                    s.derandomize, s.database is None]
print(json.dumps(out))
"""


def _report(ci: str | None) -> dict[str, Any]:
    """What a fresh interpreter reports with ``CI`` set to ``ci`` (or unset if None)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, *_MODULES],
        cwd=_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"report failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


class ProfileChoiceTests(SynchronousTestCase):
    """Which profile an environment picks, and what each profile holds."""

    def test_ci_set_picks_ci(self) -> None:
        """Any non-empty ``CI`` (CI services set ``CI=true``) picks the ``ci`` profile."""
        for value in ("true", "1", "yes", "True"):
            self.assertEqual(profiles.profile_for({"CI": value}), "ci", value)

    def test_ci_unset_or_empty_picks_dev(self) -> None:
        """Without ``CI``, or with it empty, the ``dev`` profile is picked."""
        self.assertEqual(profiles.profile_for({}), "dev")
        self.assertEqual(profiles.profile_for({"CI": ""}), "dev")
        self.assertEqual(profiles.profile_for({"HOME": "/root"}), "dev")

    def test_ci_profile_is_derandomized_without_database(self) -> None:
        """The ``ci`` profile is derandomized, has no database and no deadline."""
        ci = settings.get_profile("ci")
        self.assertIs(ci.derandomize, True)
        self.assertIsNone(ci.database)
        self.assertIsNone(ci.deadline)

    def test_dev_profile_explores_at_random(self) -> None:
        """The ``dev`` profile is not derandomized and keeps an example database."""
        dev = settings.get_profile("dev")
        self.assertIs(dev.derandomize, False)
        self.assertIsNotNone(dev.database)

    def test_active_profile_follows_this_environment(self) -> None:
        """In this very run, the active profile is the one ``CI`` calls for."""
        expected = settings.get_profile(profiles.profile_for(os.environ))
        self.assertIs(settings.default, expected)


class FreshInterpreterTests(SynchronousTestCase):
    """Importing ``tests`` with and without ``CI`` loads the right profile, and no
    per-test ``@settings(...)`` undoes it."""

    def test_ci_true_loads_a_derandomized_profile_without_database(self) -> None:
        """With ``CI=true`` the loaded profile is derandomized, with no database or
        deadline, and so is every property test in the modules with @settings(...)."""
        report = _report("true")
        self.assertEqual(
            (report["derandomize"], report["no_database"], report["no_deadline"]),
            (True, True, True),
        )
        tests = report["tests"]
        for module in _MODULES:
            self.assertTrue(any(t.startswith(module + ".") for t in tests), module)
        for name, (derandomize, no_database) in tests.items():
            self.assertEqual((derandomize, no_database), (True, True), name)

    def test_without_ci_loads_the_random_dev_profile(self) -> None:
        """Without ``CI`` the loaded profile explores at random, and so do the tests."""
        report = _report(None)
        self.assertIs(report["derandomize"], False)
        self.assertIs(report["no_database"], False)
        self.assertGreater(len(report["tests"]), 0)
        for name, (derandomize, _) in report["tests"].items():
            self.assertIs(derandomize, False, name)
