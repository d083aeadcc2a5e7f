"""The examples the guide (docs/guide/) includes, run as a user would run them, each
printing what the guide says it prints. The older examples have their tests in
test_examples.py, test_examples_stores.py, test_micro_examples.py, test_js_manage.py and
test_js_consume.py; tests/test_docs.py checks that every example the guide includes is
run by one of these files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

import txnats
from tests.support.bridge import start_bridge
from tests.support.files import free_port
from tests.support.servers import ServerPerClass
from tests.support.waits import reactor
from tests.test_examples import EXAMPLES, ROOT, RUN_TIMEOUT, run_example

#: Seconds the JetStream command-line tour may take: it runs about 30 ``txnats``
#: commands, each a new Python process (about 20 s in all on a machine with load 4).
CLI_JETSTREAM_TIMEOUT = 240


def run_script(name: str, env: dict[str, str],
               timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``sh examples/<name>`` with this interpreter's scripts first on PATH."""
    full = dict(os.environ, **env)
    full["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full.get("PATH", "")])
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full.get("PYTHONPATH")]))
    return subprocess.run(["sh", str(EXAMPLES / name)], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_trial(name: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m twisted.trial examples/<name>`` as the testing page says, its
    _trial_temp in a temporary directory (blocking; call it in a thread)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        return subprocess.run(
            [sys.executable, "-m", "twisted.trial", "--temp-directory",
             os.path.join(tmp, "_trial_temp"), str(EXAMPLES / name)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
            check=False,
        )


def run_pytest(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pytest examples/<name>`` as the testing page says, in a child
    process that finds the plugin through its entry point; ``--nats-server-required``
    makes a missing nats-server an error rather than a skip (blocking; call it in a
    thread)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "--nats-server-required", f"examples/{name}", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )


class GuideExampleTests(TestCase):
    """Examples that start their own servers."""

    timeout = RUN_TIMEOUT + 30

    async def example(self, name: str, *args: str) -> list[str]:
        result = await deferToThread(run_example, name, *args)
        self.assertEqual(result.returncode, 0, f"{name} exited {result.returncode}\n"
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result.stdout.splitlines()

    async def test_publishing(self) -> None:
        """Headers (multi-valued), refusals at the call, and 200,002 publishes in loops."""
        self.assertEqual(await self.example("publishing"), [
            "sensor.kitchen: 21.5 ['kitchen', 'ground-floor']",
            "sensor.hall: 19.0",
            "refused: BadSubjectError",
            "refused: MaxPayloadError",
            "published 200002 messages",
        ])

    async def test_subscriptions(self) -> None:
        """Order, a pool of 4, drops counted and reported, back-pressure losing none,
        next_msg and its timeout."""
        self.assertEqual(await self.example("subscriptions"), [
            "ordered handler saw all 20 in order",
            "pool ran at most 4 handlers at once",
            "lossy: 100 pending, dropped some: True, received == delivered + dropped"
            " + pending: True",
            "error_cb heard: ['SlowConsumerError']",
            "lossy: read the 100 it held after unsubscribing",
            "back-pressure: read 10000, dropped 0",
            "next_msg: b'first'",
            "next_msg: TimeoutError after 0.1 s",
        ])

    async def test_reconnect(self) -> None:
        """A crash and a restart: the subscription is back and the buffered publishes
        arrive, in order."""
        self.assertEqual(await self.example("reconnect"), [
            "disconnected: state RECONNECTING",
            "reconnected: state CONNECTED, reconnects 1",
            "received ['before', 'while-down-0', 'while-down-1', 'while-down-2']",
        ])

    async def test_auth(self) -> None:
        """User/password (URL and options), token, token_handler, and a refusal that
        does not show the secret."""
        lines = await self.example("auth")
        self.assertRegex(lines[0], r"^user/password in the URL: connected to "
                         r"nats://alice:\*\*\*@127\.0\.0\.1:\d+$")
        self.assertEqual(lines[1:], [
            "user/password as options: connected",
            "token: connected",
            "token_handler (called on every connect): connected",
            "wrong password: AuthorizationError, secret shown: False",
        ])

    async def test_tls(self) -> None:
        """A verified chain with a client certificate; tls:// to plain text refused."""
        self.assertEqual(await self.example("tls"), [
            "connected over TLS: True",
            "tls:// to a plaintext server: TLSError",
        ])

    async def test_websocket(self) -> None:
        """Request/reply over a ws:// URL with compression offered."""
        lines = await self.example("websocket")
        self.assertRegex(lines[0], r"^connected over WebSocket to ws://127\.0\.0\.1:\d+")
        self.assertEqual(lines[1:], ["echo replied b'desserts'"])

    async def test_forward(self) -> None:
        """A core route with subject mapping, and a JetStream route storing all 10."""
        self.assertEqual(await self.example("forward"), [
            "core: archive.orders.eu.7 b'core order'",
            "jetstream: 10 stored, forwarded 10, dropped 0",
        ])

    async def test_js_publish(self) -> None:
        """Acks, a duplicate, a stale expected_last_seq, 10,000 publish_async, a direct
        get and a subject no stream takes."""
        self.assertEqual(await self.example("js_publish"), [
            "stored: stream=ORDERS seq=1 duplicate=False",
            "same msg_id again: seq=1 duplicate=True",
            "expected_last_seq out of date: WrongLastSequenceError",
            "after publish_async: 10002 messages, 0 failed",
            "last on orders.new: b'order 18' at seq 2",
            "no stream for nowhere.new: NoStreamResponseError",
        ])

    async def trial_example(self, name: str, passed: int) -> None:
        """Run a trial example; assert that all its ``passed`` tests pass."""
        result = await deferToThread(run_trial, name)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"PASSED (successes={passed})", result.stdout)

    async def pytest_example(self, name: str, passed: int, *args: str) -> None:
        """Run a pytest example; assert that all its ``passed`` tests pass, none
        skipped."""
        result = await deferToThread(run_pytest, name, *args)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertRegex(result.stdout, rf"(?m)^{passed} passed in ")

    async def test_greeter_tests(self) -> None:
        """The testing page's trial TestCase against a real server passes, both tests."""
        await self.trial_example("greeter_tests.py", 2)

    async def test_cluster_tests(self) -> None:
        """The trial example on a three-node NatsCluster passes, both tests."""
        await self.trial_example("cluster_tests.py", 2)

    async def test_fault_proxy_tests(self) -> None:
        """The trial example through a FaultProxy passes, both tests."""
        await self.trial_example("fault_proxy_tests.py", 2)

    async def test_memory_tests(self) -> None:
        """The trial example on MemoryNats and a task.Clock passes, all five tests."""
        await self.trial_example("memory_tests.py", 5)

    async def test_greeter_fixtures(self) -> None:
        """The pytest example of nats_server, nats_client, nats_connect and
        nats_jetstream_server passes, per test and with one server per session."""
        await self.pytest_example("test_greeter_fixtures.py", 3)
        await self.pytest_example("test_greeter_fixtures.py", 3, "--nats-server-scope=session")

    async def test_cluster_fixtures(self) -> None:
        """The pytest example of nats_cluster passes."""
        await self.pytest_example("test_cluster_fixtures.py", 2)

    async def test_fault_proxy_fixtures(self) -> None:
        """The pytest example of nats_fault_proxy passes."""
        await self.pytest_example("test_fault_proxy_fixtures.py", 2)

    async def test_memory_fixtures(self) -> None:
        """The pytest example of memory_nats (on a Clock) and memory_nats_client
        passes."""
        await self.pytest_example("test_memory_fixtures.py", 4)

    async def test_trial_and_pytest_examples_in_one_session(self) -> None:
        """The testing page's mixed session: a pytest example, then two trial ones, in
        one pytest run: all 11 tests pass (the plugin hands the reactor back after the
        pytest-twisted tests)."""
        await self.pytest_example("test_memory_fixtures.py", 11, "examples/memory_tests.py",
                                  "examples/greeter_tests.py")

    async def test_cli_tour(self) -> None:
        """The command line page's script: server, reply, req, sub, pub, two benches."""
        result = await deferToThread(run_script, "cli_tour.sh", {"PORT": str(free_port())})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        out = result.stdout
        self.assertIn('[#2] Received on "greet.joe"', out)
        self.assertIn("X-Trace: 1", out)
        self.assertRegex(out, r"Pub stats: [\d,]+ msgs/sec")
        self.assertRegex(out, r"Req stats: [\d,]+ req/sec")

    async def test_cli_jetstream(self) -> None:
        """The command line page's JetStream tour, its context in a temporary
        XDG_CONFIG_HOME: each verb prints what the page says, the context is written
        where the nats CLI keeps them, and removed again."""
        with tempfile.TemporaryDirectory() as config:
            result = await deferToThread(
                run_script, "cli_jetstream.sh",
                {"PORT": str(free_port()), "XDG_CONFIG_HOME": config}, CLI_JETSTREAM_TIMEOUT)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            nats_dir = Path(config) / "nats"
            self.assertEqual((nats_dir / "context.txt").read_text(), "")
            self.assertEqual((nats_dir / "previous-context.txt").read_text(), "tour")
            self.assertFalse((nats_dir / "context" / "tour.json").exists())
        out, lines = result.stdout, result.stdout.splitlines()
        self.assertIn(f"Path: {config}/nats/context/tour.json", out)
        self.assertIn("tour*  the JetStream tour", lines)
        view = lines.index('{"id": 1}')
        self.assertEqual(lines[view + 1], '{"id": 2}')
        self.assertRegex(out, r'"seq": 2,\s+"time": "[^"]+",\s+"headers": \{\s+"X-Trace"')
        self.assertRegex(out, r"Messages: 2\n")
        taken = [json.loads(x) for x in lines if x.startswith('{"subject": "orders.new"')]
        self.assertEqual([(m["stream_seq"], m["outcome"]) for m in taken],
                         [(1, "Acknowledged message"), (2, "Acknowledged message")])
        self.assertEqual(taken[1]["headers"], {"X-Trace": ["7"]})
        self.assertIn("WORKER", lines)
        self.assertIn("postgres://db", lines)
        self.assertRegex(out, r"db\.url +2 +PUT .* postgres://db2\n")
        [watched] = [json.loads(x) for x in lines if x.startswith('{"bucket": "CONFIG"')]
        self.assertEqual((watched["revision"], watched["value"]), (2, "postgres://db2"))
        self.assertEqual(lines[-3:], ["notes.txt", "backup.tar", "ORDERS"])
        for said in ("Deleted CONFIG > db.url", "Put FILES > backup.tar",
                     "Wrote FILES > backup.tar to stdout", "Deleted stream ORDERS",
                     "Deleted context 'tour'"):
            self.assertIn(said, result.stderr)

    test_cli_jetstream.timeout = CLI_JETSTREAM_TIMEOUT + 30  # type: ignore[attr-defined]


class ReadmeExampleTests(ServerPerClass, TestCase):
    """The README's first program, as written, against a server."""

    timeout = RUN_TIMEOUT + 30

    async def test_readme_program(self) -> None:
        """It connects, reads its own publish, gets the reply, drains and exits 0."""
        assert self.server is not None
        readme = (ROOT / "README.rst").read_text(encoding="utf-8")
        block = readme.split(".. code-block:: python\n", 1)[1]
        block = re.split(r"\n(?=\S)", block, maxsplit=1)[0]
        program = "\n".join(line[4:] for line in block.splitlines())
        self.assertIn('task.react(main, ["nats://127.0.0.1:4222"])', program)
        program = program.replace("nats://127.0.0.1:4222", self.server.url)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        result = await deferToThread(
            subprocess.run, [sys.executable, "-c", program], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "b'hello' b'HELLO, TWISTED'\n")


class BridgeCurlTests(ServerPerClass, TestCase):
    """examples/bridge_curl.sh against a bridge on a JetStream server."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = RUN_TIMEOUT + 30

    async def test_getting_started_curls(self) -> None:
        """The three curl commands of the getting-started page, as written, against a
        bridge (its URL in place of 127.0.0.1:8080; the stream read for 2 s)."""
        if shutil.which("curl") is None:
            raise SkipTest("curl is not installed")
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url)
        self.addCleanup(nc.close)
        nc.subscribe("svc.echo", lambda msg: msg.respond(msg.data))
        await nc.flush()
        _, url = await start_bridge(self, servers=[self.server.url])
        page = (ROOT / "docs" / "guide" / "getting-started.rst").read_text(encoding="utf-8")
        commands = re.findall(r"^    (curl .*)$", page, re.M)
        self.assertEqual(len(commands), 3)
        script = "\n".join(
            c.replace("http://127.0.0.1:8080", url).replace("curl -N", "curl -N --max-time 2")
            + (" || true" if "-N" in c else "") + "; echo" for c in commands)
        result = await deferToThread(subprocess.run, ["sh", "-c", script], capture_output=True,
                                     text=True, timeout=RUN_TIMEOUT, check=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        self.assertEqual(lines[0], '{"published": "greet.joe", "bytes": 5}')
        self.assertEqual(lines[1], "hi")
        self.assertIn("event: subscribed", lines)

    async def test_bridge_curl(self) -> None:
        """Every route the script calls answers as the bridge page says."""
        if shutil.which("curl") is None:
            raise SkipTest("curl is not installed")
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
        self.addCleanup(lambda: js.delete_stream("ORDERS"))
        await js.create_key_value("config")
        self.addCleanup(lambda: js.delete_key_value("config"))
        nc.subscribe("svc.echo", lambda msg: msg.respond(msg.data))
        await nc.flush()
        _, url = await start_bridge(self, servers=[self.server.url])
        result = await deferToThread(run_script, "bridge_curl.sh", {"BRIDGE": url})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        self.assertEqual(lines[0], '{"published": "greet.joe", "bytes": 5}')
        self.assertEqual(lines[1], "hi")
        self.assertIn("event: subscribed", lines)
        self.assertRegex(result.stdout, r'\{"stream": "ORDERS", "seq": 1, "duplicate": false')
        self.assertRegex(result.stdout, r'\{"stream": "ORDERS", "seq": 1, "duplicate": true')
        self.assertIn('{"revision": 1}', lines)
        self.assertTrue(any(re.fullmatch(r"(?i)kv-revision: 1\s*", x) for x in lines), lines)
        self.assertIn("blue", lines)
        self.assertIn('{"revision": 2}', lines)
        self.assertRegex(result.stdout, r'"code": "key_not_found"')
        self.assertIn("healthz 200", lines)
        self.assertIn("readyz 200", lines)
