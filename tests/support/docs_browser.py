"""The browser half of figure 3 (tests/test_docs_build.py runs it with trial in a
process of its own, so that the browser's reactor run starts clean): headless chromium,
driven over the DevTools protocol as tests/test_bridge_browser.py drives it, opens the
index and the ``Client`` API page of the build ``TXNATS_DOCS_HTML`` names."""

from __future__ import annotations

import base64
import os
import struct
import tempfile
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SkipTest, TestCase

from tests import test_bridge_browser as browser
from tests.support.figures import figure
from tests.support.waits import WAIT, bounded


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, from its IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


class DocsBrowserCheck(TestCase):
    timeout = 120

    def setUp(self) -> None:
        self.built = Path(os.environ["TXNATS_DOCS_HTML"])

    open_browser = browser.BrowserTests.open_browser
    open_page = browser.BrowserTests.open_page

    async def page(self, devtools: int, url: str) -> Any:
        """A page opened at url, loaded, in a 1280 x 900 viewport."""
        cdp = await self.open_page(devtools, url)
        await bounded(cdp.call("Emulation.setDeviceMetricsOverride", width=1280,
                               height=900, deviceScaleFactor=1, mobile=False), WAIT)
        loaded = f"location.href.startsWith({url!r}) && document.readyState === 'complete'"
        for _ in range(300):  # 30 s: the new tab shows about:blank before the page
            if await cdp.evaluate(loaded):
                return cdp
            await bounded(browser._later(0.1), WAIT)
        self.fail(f"{url} did not load in 30 s")

    async def screenshot(self, cdp: Any, name: str) -> bytes:
        shot = await bounded(cdp.call("Page.captureScreenshot", format="png"), WAIT)
        data = base64.b64decode(shot["data"])
        self.assertEqual(png_size(data), (1280, 900))
        out = Path(os.environ.get("TXNATS_DOCS_SCREENSHOTS") or tempfile.gettempdir())
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
        return data

    async def test_index_and_client_page(self) -> None:
        """The index shows its title and the navigation to the guide and the reference;
        the txnats API page, scrolled to ``Client.publish``, shows that entry and the
        navigation, in the screenshot's viewport."""
        html = self.built
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
