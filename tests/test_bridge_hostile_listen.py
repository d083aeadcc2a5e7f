"""Who may connect: TLS is not access control.

Anything but a loopback or UNIX listener needs a token, TLS or not, unless
``--insecure-no-auth`` says that something in front of the bridge decides who connects
(and the bridge then warns that it serves without one). Checked with
``Options().parseOptions([...])`` as twistd runs it, and with the service.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from tests.support.bridge import BridgeTestCase, http, start_bridge
from tests.support.waits import reactor
from txnats import errors
from txnats.bridge.config import BridgeConfig
from txnats.bridge.service import BridgeService
from txnats.bridge.tap import Options


def _observe(case: SynchronousTestCase) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    case.addCleanup(globalLogPublisher.removeObserver, events.append)
    return events


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


#: Listeners others could reach: each needs a token, TLS or not.
PUBLIC = ("tcp:8080", "tcp:8080:interface=0.0.0.0", "tcp:80:interface=10.1.2.3",
          "ssl:8443:privateKey=k.pem", "ssl:8443:privateKey=k.pem:interface=0.0.0.0",
          "tcp6:8080:interface=\\:\\:", "systemd:domain=INET:index=0")
#: Listeners only this host reaches.
LOCAL = ("tcp:8080:interface=127.0.0.1", "ssl:8443:privateKey=k.pem:interface=127.0.0.1",
         "tcp6:8080:interface=\\:\\:1", "ssl:8443:interface=localhost:privateKey=k.pem",
         "unix:/tmp/bridge.sock")


class ListenOptionsTests(SynchronousTestCase):
    def test_public_listeners_need_a_token_tls_or_not(self) -> None:
        """Every public listener, ssl: included, is refused without a token, the message
        naming --auth-token and --insecure-no-auth; with a token, or with
        --insecure-no-auth, it is accepted; local ones need neither."""
        for listen in PUBLIC:
            with self.assertRaises(usage.UsageError) as e:
                parse("--listen", listen)
            self.assertIn("without --auth-token", str(e.exception), listen)
            self.assertIn("--insecure-no-auth", str(e.exception), listen)
            config = parse("--listen", listen, "--insecure-no-auth").config
            assert config is not None
            self.assertTrue(config.insecure_no_auth)
            self.assertEqual(parse("--listen", listen, "--auth-token", "t").config.auth_token,
                             "t")  # type: ignore[union-attr]
        for listen in LOCAL:
            config = parse("--listen", listen).config
            assert config is not None
            self.assertFalse(config.insecure_no_auth)


class ListenServiceTests(BridgeTestCase):
    async def test_service_refuses_and_warns(self) -> None:
        """BridgeService refuses a public TLS listener without a token at once; with
        insecure_no_auth it serves on all interfaces and logs a warning saying that
        whoever reaches it may publish and subscribe."""
        assert self.server is not None
        with self.assertRaises(errors.InvalidArgumentError):
            BridgeService(BridgeConfig(servers=[self.server.url],
                                       listen="ssl:0:privateKey=k.pem"), reactor)
        events = _observe(self)
        _, url = await start_bridge(self, servers=[self.server.url],
                                    listen="tcp:0:interface=0.0.0.0", insecure_no_auth=True)
        self.assertEqual((await http("GET", f"{url}/readyz")).code, 200)
        warned = [formatEvent(e) for e in events if e.get("log_level") == LogLevel.warn]
        self.assertTrue(any("without a token" in (w or "") for w in warned), warned)
