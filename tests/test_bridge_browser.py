"""Figure 2: a real browser (Debian's headless ``chromium``, driven over the DevTools
protocol with autobahn's WebSocket client) opens the bridge's status page, which shows
the connection state and opens its live tail (an EventSource); a message published
through NATS then appears in the page's tail. Skipped only where chromium is missing
(``.ci/run`` installs it when it can)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Any

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure
from twisted.trial.unittest import SkipTest, TestCase

import txnats
from tests.support.bridge import http, start_bridge
from tests.support.figures import figure
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor, wait_until


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _Browser(ProcessProtocol):
    """The chromium process: its stderr (where it prints the DevTools address)."""

    def __init__(self) -> None:
        self.err = b""
        self.ended: Deferred[None] = Deferred()
        self.exited = False

    def errReceived(self, data: bytes) -> None:
        self.err += data

    def processEnded(self, reason: Failure) -> None:
        self.exited = True
        self.ended.callback(None)


class _Cdp(WebSocketClientProtocol):  # type: ignore[misc]
    """One DevTools page session: send a command, get a Deferred of its result."""

    def onOpen(self) -> None:
        self.next_id = 0
        self.waiting: dict[int, Deferred[Any]] = {}
        self.closed: Deferred[None] = Deferred()
        self.factory.opened.callback(self)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if hasattr(self, "closed") and not self.closed.called:
            self.closed.callback(None)

    def close(self) -> Deferred[None]:
        """Close the session and wait for the browser's answer."""
        self.sendClose()
        return bounded(self.closed, 20, "the DevTools session closing")

    def call(self, method: str, **params: Any) -> Deferred[Any]:
        self.next_id += 1
        d: Deferred[Any] = Deferred()
        self.waiting[self.next_id] = d
        self.sendMessage(json.dumps({"id": self.next_id, "method": method,
                                     "params": params}).encode())
        return d

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        msg = json.loads(payload)
        d = self.waiting.pop(msg.get("id", -1), None)
        if d is not None:
            d.callback(msg.get("result", msg.get("error")))

    async def evaluate(self, expression: str) -> Any:
        result = await bounded(self.call("Runtime.evaluate", expression=expression,
                                         returnByValue=True), WAIT, expression)
        return result.get("result", {}).get("value")


class BrowserTests(ServerPerClass, TestCase):
    timeout = 90

    async def open_browser(self) -> tuple[_Browser, int]:
        chromium = find_chromium()
        if chromium is None:
            raise SkipTest("chromium is missing (.ci/run installs Debian's chromium "
                           "where it can)")
        profile = tempfile.mkdtemp(prefix="txnats-chromium-")
        self.addCleanup(shutil.rmtree, profile, True)
        browser = _Browser()
        args = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                f"--user-data-dir={profile}", "about:blank"]
        reactor.spawnProcess(browser, chromium, args, env=dict(os.environ))

        async def stop() -> None:
            """SIGTERM (chromium ends its helper processes), SIGKILL if it hangs."""
            if browser.exited or browser.transport is None:
                return
            browser.transport.signalProcess("TERM")
            try:
                await bounded(browser.ended, 10, "chromium exiting on SIGTERM")
            except AssertionError:
                if not browser.exited:
                    browser.transport.signalProcess("KILL")
                    await bounded(browser.ended, 20, "chromium exiting")

        self.addCleanup(lambda: Deferred.fromCoroutine(stop()))
        pattern = re.compile(rb"DevTools listening on ws://127\.0\.0\.1:(\d+)/")
        await wait_until(lambda: pattern.search(browser.err) is not None or browser.exited,
                         30, "chromium's DevTools address")
        found = pattern.search(browser.err)
        if found is None:
            self.fail(f"chromium exited: {browser.err[-2000:]!r}")
        return browser, int(found.group(1))

    async def open_page(self, devtools: int, url: str) -> _Cdp:
        r = await http("PUT", f"http://127.0.0.1:{devtools}/json/new?{url}", seconds=20)
        self.assertEqual(r.code, 200, r)
        target = r.json()
        factory = WebSocketClientFactory(target["webSocketDebuggerUrl"])
        factory.protocol = _Cdp
        factory.opened = Deferred()
        endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", devtools)
        await bounded(endpoint.connect(factory), 20, "the DevTools WebSocket")
        cdp: _Cdp = await bounded(factory.opened, 20, "the DevTools session")
        self.addCleanup(cdp.close)
        return cdp

    async def test_figure2_status_page_live_tail(self) -> None:
        """Figure 2: the page shows CONNECTED, its tail subscribes (the page marks it
        open on the 'subscribed' event), and a message published through NATS appears
        in the tail's table."""
        assert self.server is not None
        _, base = await start_bridge(self, servers=[self.server.url])
        _, devtools = await self.open_browser()
        started = reactor.seconds()
        cdp = await self.open_page(devtools, f"{base}/#subject=browser.tail")
        state: dict[str, Any] = {}

        async def poll(expression: str, expected: Any, what: str, seconds: float = 30) -> None:
            async def check() -> bool:
                state[what] = await cdp.evaluate(expression)
                return bool(state[what] == expected)

            deadline = reactor.seconds() + seconds
            while not await check():
                if reactor.seconds() > deadline:
                    self.fail(f"{what}: {expression} is {state[what]!r}, not {expected!r}")
                await bounded(_later(0.1), WAIT)

        await poll("document.body.dataset.tail", "open", "tail open")
        await poll("document.getElementById('state').textContent", "CONNECTED", "state")
        opened = reactor.seconds() - started
        nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(nc.close)
        published = reactor.seconds()
        nc.publish("browser.tail", b"hello from NATS to the browser")
        await bounded(nc.flush())
        await poll("document.querySelector('#tail tbody').textContent.includes("
                   "'hello from NATS to the browser')", True, "message in the tail")
        shown = reactor.seconds() - published
        rows = await cdp.evaluate("document.querySelector('#tail tbody tr').textContent")
        self.assertEqual(rows, "browser.tailhello from NATS to the browser")
        figure(2, page_open_and_subscribed_s=opened, message_shown_s=shown,
               tail_row=rows)


def _later(seconds: float) -> Deferred[None]:
    d: Deferred[None] = Deferred()
    reactor.callLater(seconds, d.callback, None)
    return d
