"""The changelog: NEWS.rst is built by towncrier from one fragment per change in
newsfragments/, each named ``<issue>.<type>`` or ``+<name>.<type>``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

ROOT = Path(__file__).resolve().parent.parent
FRAGMENTS = ROOT / "newsfragments"


def fragment_types() -> set[str]:
    """The fragment types pyproject.toml configures."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {t["directory"] for t in config["tool"]["towncrier"]["type"]}


class NewsTests(SynchronousTestCase):
    def test_types(self) -> None:
        """The five types of fragment the project uses, as Twisted's."""
        self.assertEqual(fragment_types(), {"feature", "bugfix", "removal", "doc", "misc"})

    def test_fragment_names(self) -> None:
        """Every file in newsfragments/ (but its README) is a fragment towncrier takes:
        an issue number or ``+name``, a known type, an optional counter; not empty."""
        types = "|".join(sorted(fragment_types()))
        name = re.compile(rf"(\d+|\+[\w-]+)\.({types})(\.\d+)?")
        for path in FRAGMENTS.iterdir():
            if path.name in ("README.rst", ".gitignore"):
                continue
            self.assertRegex(path.name, name)
            self.assertTrue(path.read_text(encoding="utf-8").strip(), path.name)

    def test_news_has_an_entry(self) -> None:
        """NEWS.rst starts with a release's entry, as towncrier writes it."""
        text = (ROOT / "NEWS.rst").read_text(encoding="utf-8")
        self.assertRegex(text, r"^txnats \d+\.\d+\.\d+\S* \(.+\)\n=+\n")

    def test_draft_builds(self) -> None:
        """``towncrier build --draft`` renders the fragments waiting for the next release."""
        if not _has_module("towncrier"):
            raise SkipTest("towncrier is not installed (pip install -e '.[docs]')")
        result = subprocess.run(
            [sys.executable, "-m", "towncrier", "build", "--draft", "--version", "0.0.0"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
