"""Figure 3: the documentation, built as ``.ci/run`` builds it (Sphinx, warnings as
errors), has every public name in its reference, and renders in a real browser: Debian's
headless ``chromium`` opens the index and the ``Client`` API page, whose navigation and
``Client.publish`` entry are on screen when the screenshot is taken
(tests/support/docs_browser.py, run by trial in a process of its own).

``.ci/run`` builds the docs once and names the build in ``TXNATS_DOCS_HTML``; without it
the build is made here (skipped where Sphinx is not installed: ``pip install -e
'.[docs]'``). The browser test is skipped only where chromium is missing."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from tests import test_bridge_browser as browser
from tests.test_docstrings import STILL_MISSING, public_modules

ROOT = Path(__file__).resolve().parent.parent
_built: list[Path] = []
#: Seconds the build may take (about 20 on 2 quiet cores), and the browser check.
BUILD_TIMEOUT = 600
BROWSER_TIMEOUT = 180


def build_docs() -> Path:
    """The built HTML: ``$TXNATS_DOCS_HTML``, or a build made once per process."""
    given = os.environ.get("TXNATS_DOCS_HTML")
    if given and (Path(given) / "index.html").exists():
        return Path(given)
    if _built:
        return _built[0]
    if importlib.util.find_spec("sphinx") is None:
        raise SkipTest("sphinx is not installed (pip install -e '.[docs]')")
    out = Path(tempfile.mkdtemp(prefix="txnats-docs-"))
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
         str(ROOT / "docs"), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"the docs build failed:\n{result.stdout}\n{result.stderr}")
    _built.append(out)
    return out


def inventory(html: Path) -> set[str]:
    """The Python objects the build documents (its objects.inv)."""
    from sphinx.util.inventory import InventoryFile

    with open(html / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", os.path.join)
    return {name for kind, entries in inv.items() if kind.startswith("py:")
            for name in entries}


class DocsBuildTests(SynchronousTestCase):
    def test_every_public_name_is_in_the_reference(self) -> None:
        """Each name in the ``__all__`` of the public modules is a documented object
        (but the constants STILL_MISSING lists: autodoc leaves out a constant that has
        no doc comment)."""
        documented = inventory(build_docs())
        missing = []
        for modname in public_modules():
            module = importlib.import_module(modname)
            for name in getattr(module, "__all__", ()):
                if name.startswith("__") or f"{modname}.{name}" in STILL_MISSING:
                    continue
                if not any(full == f"{modname}.{name}" or full.endswith(f".{name}")
                           for full in documented):
                    missing.append(f"{modname}.{name}")
        self.assertEqual(missing, [])
        self.assertIn("txnats.Client.publish", documented)

    def test_figure3_index_and_client_page_in_chromium(self) -> None:
        """The index shows its title and the navigation to the guide and the reference;
        the txnats API page, scrolled to ``Client.publish``, shows that entry and the
        navigation in the screenshot's viewport (both screenshots are saved in
        ``$TXNATS_DOCS_SCREENSHOTS``, else the temporary directory)."""
        html = build_docs()
        if browser.find_chromium() is None:
            raise SkipTest("chromium is missing (.ci/run installs Debian's chromium "
                           "where it can)")
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, TXNATS_DOCS_HTML=str(html),
                       PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                os.environ.get("PYTHONPATH")])))
            result = subprocess.run(
                [sys.executable, "-m", "twisted.trial", "--temp-directory",
                 os.path.join(tmp, "_trial_temp"), "tests.support.docs_browser"],
                cwd=ROOT, env=env, capture_output=True, text=True,
                timeout=BROWSER_TIMEOUT, check=False,
            )
        out = result.stdout + result.stderr
        self.assertEqual(result.returncode, 0, out)
        self.assertIn("PASSED (successes=1)", out)
        lines = [line for line in out.splitlines() if line.startswith("FIGURE 3:")]
        self.assertEqual(len(lines), 1, out)
        print("\n" + lines[0])
