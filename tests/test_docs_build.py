"""Figure 3: the documentation, built as ``.ci/run`` builds it (Sphinx, warnings as
errors), has every public name in its reference, and renders in a real browser: Debian's
headless ``chromium`` opens the index and the ``Client`` API page, whose navigation and
``Client.publish`` entry are on screen when the screenshot is taken.

``.ci/run`` builds the docs once and names the build in ``TXNATS_DOCS_HTML``; without it
the build is made here (skipped where Sphinx is not installed: ``pip install -e
'.[docs]'``). The browser test is skipped only where chromium is missing."""

from __future__ import annotations

import base64
import importlib
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from tests import test_bridge_browser as browser
from tests.support.figures import figure
from tests.support.waits import WAIT, bounded
from tests.test_docstrings import STILL_MISSING, public_modules

ROOT = Path(__file__).resolve().parent.parent
_built: list[Path] = []


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
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
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


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, from its IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


class DocsBuildTests(TestCase):
    timeout = 600

    async def html(self) -> Path:
        return await deferToThread(build_docs)

    async def test_every_public_name_is_in_the_reference(self) -> None:
        """Each name in the ``__all__`` of the public modules is a documented object
        (but the constants STILL_MISSING lists: autodoc leaves out a constant that has
        no doc comment)."""
        documented = inventory(await self.html())
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

    open_browser = browser.BrowserTests.open_browser
    open_page = browser.BrowserTests.open_page

    async def page(self, devtools: int, url: str) -> Any:
        """A page opened at url, loaded, in a 1280 x 900 viewport."""
        cdp = await self.open_page(devtools, url)
        await bounded(cdp.call("Emulation.setDeviceMetricsOverride", width=1280,
                               height=900, deviceScaleFactor=1, mobile=False), WAIT)
        for _ in range(300):
            if await cdp.evaluate("document.readyState") == "complete":
                break
            await bounded(browser._later(0.1), WAIT)
        return cdp

    async def screenshot(self, cdp: Any, name: str) -> bytes:
        shot = await bounded(cdp.call("Page.captureScreenshot", format="png"), WAIT)
        data = base64.b64decode(shot["data"])
        self.assertEqual(png_size(data), (1280, 900))
        out = Path(os.environ.get("TXNATS_DOCS_SCREENSHOTS") or tempfile.gettempdir())
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
        return data

    async def test_figure3_index_and_client_page_in_chromium(self) -> None:
        """The index shows its title and the navigation to the guide and the reference;
        the txnats API page, scrolled to ``Client.publish``, shows that entry and the
        navigation, in the screenshot's viewport."""
        html = await self.html()
        if browser.find_chromium() is None:
            raise SkipTest("chromium is missing (.ci/run installs Debian's chromium "
                           "where it can)")
        _, devtools = await self.open_browser()

        index = await self.page(devtools, (html / "index.html").as_uri())
        title = await index.evaluate("document.title")
        self.assertEqual(title, f"txnats {_version()}")
        nav = await index.evaluate(
            "Array.from(document.querySelectorAll('.sidebar-tree a'))"
            ".map(a => a.textContent.trim())")
        for entry in ("Getting started", "JetStream", "The bridge, for operators",
                      "For nats-py users", "API reference", "Changelog"):
            self.assertIn(entry, nav)
        await self.screenshot(index, "txnats-docs-index.png")

        api = await self.page(devtools, (html / "api" / "txnats.html").as_uri())
        self.assertEqual(await api.evaluate("document.title"),
                         f"txnats: the client - txnats {_version()}")
        box = await api.evaluate(
            "(() => { const e = document.getElementById('txnats.Client.publish');"
            " e.scrollIntoView({behavior: 'instant', block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.top, r.bottom, r.height, e.textContent.trim().split('(')[0]]; })()")
        top, bottom, height, text = box
        self.assertTrue(0 <= top < bottom <= 900 and height > 0, box)
        self.assertEqual(text, "publish")
        sidebar = await api.evaluate(
            "(() => { const s = document.querySelector('.sidebar-tree');"
            " const r = s.getBoundingClientRect(); const cs = getComputedStyle(s);"
            " return [r.width > 0 && r.height > 0, cs.visibility, s.textContent]; })()")
        self.assertEqual(sidebar[:2], [True, "visible"])
        self.assertIn("API reference", sidebar[2])
        data = await self.screenshot(api, "txnats-docs-client-publish.png")
        figure(3, index_title=title, api_title=f"txnats: the client - txnats {_version()}",
               publish_box_px=[round(top), round(bottom)], screenshot_bytes=len(data))


def _version() -> str:
    import txnats

    return txnats.__version__
