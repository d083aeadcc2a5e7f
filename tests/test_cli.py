"""The ``txnats`` command line and the benchmark scripts, run as users run them.

Every command runs in a subprocess (``python -m txnats ...``) against a real
``nats-server``; each subprocess is bounded by a timeout, and the blocking calls run
in threads so the reactor stays free.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import gatherResults
from twisted.internet.interfaces import IDelayedCall, IListeningPort
from twisted.internet.protocol import Protocol, connectionDone
from twisted.internet.task import Clock
from twisted.internet.threads import deferToThread
from twisted.logger import LogLevel, capturedLogs
from twisted.protocols.portforward import (
    ProxyClient,
    ProxyClientFactory,
    ProxyFactory,
    ProxyServer,
)
from twisted.python.failure import Failure
from twisted.trial.unittest import SkipTest, TestCase

import txnats
from txnats.cli._cmd_bench import human
from txnats.cli._progress import Bar
from txnats.cli.bench import WORKLOADS, run_workload
from txnats.cli.bench import core as bench_core
from txnats.errors import InvalidArgumentError, OutboundBufferFullError
from txnats.protocol.events import Msg
from txnats.testing import NatsServer

from .support.servers import ServerPerClass
from .support.waits import wait_until

ROOT = Path(__file__).resolve().parent.parent

#: Seconds any one subprocess may take.
RUN_TIMEOUT = 60

COMMANDS = ("pub", "sub", "req", "reply", "server", "bench")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NATS_URL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _run(*args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout,
        cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL,
    )


def _txnats(*args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return _run("-m", "txnats", *args, timeout=timeout)


class _ReadsStderr:
    """A child process whose stderr is read line by line (``Listening on``, errors)."""

    proc: subprocess.Popen[str]
    stderr_lines: list[str]

    def wait_for_stderr(self, marker: str) -> bool:
        """Read stderr until a line holds ``marker`` (True) or the stream ends (False)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            if marker in line:
                return True
        return False


class _Background(_ReadsStderr):
    """A long-running ``txnats`` command (``sub``, ``reply``) read from a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "txnats", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(),
            stdin=subprocess.DEVNULL,
        )
        self.stderr_lines: list[str] = []

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=RUN_TIMEOUT)
        return self.proc.returncode, out, "".join(self.stderr_lines) + err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class _OnTerminal(_ReadsStderr):
    """``txnats bench ...`` with its stdout on a pseudo-terminal, so that it draws its
    progress bar as it does for a user; stderr is a pipe (``Listening on`` and errors).
    """

    def __init__(self, *args: str) -> None:
        import pty

        master, slave = pty.openpty()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "txnats", "bench", *args], stdout=slave,
                stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(),
                stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(slave)
        self._master = master
        self._screen = bytearray()
        self._reader = threading.Thread(target=self._read_screen, daemon=True)
        self._reader.start()
        self.stderr_lines: list[str] = []

    def _read_screen(self) -> None:
        try:
            while True:
                chunk = os.read(self._master, 65536)
                if not chunk:
                    return
                self._screen += chunk
        except OSError:  # EIO: the child closed the terminal's last descriptor
            return

    def finish(self) -> tuple[int, str, str]:
        """Wait (bounded) for the command to exit: its status, screen and stderr."""
        try:
            _out, err = self.proc.communicate(timeout=RUN_TIMEOUT)
        finally:
            self.kill()
        self._reader.join(10)
        screen = bytes(self._screen).decode("utf-8", "replace")
        return self.proc.returncode, screen, "".join(self.stderr_lines) + (err or "")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        if self._master >= 0:
            self._reader.join(10)
            os.close(self._master)
            self._master = -1


def _bench_on_terminal(*args: str) -> tuple[int, str, str]:
    return _OnTerminal(*args).finish()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class CommandLineTests(TestCase):
    """``txnats pub|sub|req|reply|bench`` against a real server."""

    timeout = 120

    def setUp(self) -> None:
        self.server = NatsServer().start()
        self.addCleanup(self.server.stop)
        self.url = self.server.url

    async def _background(self, marker: str, *args: str) -> _Background:
        bg = _Background(*args)
        self.addCleanup(bg.kill)
        ready = await deferToThread(bg.wait_for_stderr, marker).addTimeout(
            RUN_TIMEOUT, reactor
        )
        if not ready:
            bg.kill()
            self.fail(f"{args[0]} never printed {marker!r}: {''.join(bg.stderr_lines)}")
        return bg

    async def test_pub_sub_round_trip(self) -> None:
        """Messages published by ``txnats pub`` reach ``txnats sub``, which prints their
        subject, headers and data, and exits after ``--count`` messages."""
        sub = await self._background(
            "Listening on [cli.x]", "sub", "cli.x", "--count", "2", "--server", self.url
        )
        pub = await deferToThread(
            _txnats, "pub", "cli.x", "hello {{Count}}", "--count", "2",
            "-H", "X-Test:1", "--server", self.url,
        )
        self.assertEqual(pub.returncode, 0, pub.stderr)
        self.assertIn("Published 2 messages", pub.stderr)
        code, out, err = await deferToThread(sub.finish)
        self.assertEqual(code, 0, err)
        self.assertIn('[#1] Received on "cli.x"', out)
        self.assertIn('[#2] Received on "cli.x"', out)
        self.assertIn("X-Test: 1", out)
        self.assertIn("hello 1", out)
        self.assertIn("hello 2", out)

    async def test_req_reply(self) -> None:
        """``txnats req`` gets its answer from ``txnats reply``, which echoes the data and
        headers by default; the reply command exits after ``--count`` requests."""
        reply = await self._background(
            "Listening on [cli.svc]", "reply", "cli.svc", "--count", "1", "--server", self.url
        )
        req = await deferToThread(
            _txnats, "req", "cli.svc", "ping", "-H", "K:V", "--timeout", "10",
            "--server", self.url,
        )
        self.assertEqual(req.returncode, 0, req.stderr)
        self.assertIn("Received with rtt", req.stderr)
        self.assertIn("K: V", req.stdout)
        self.assertIn("ping", req.stdout)
        code, _out, err = await deferToThread(reply.finish)
        self.assertEqual(code, 0, err)
        self.assertIn('[#1] Received on "cli.svc", answered', err)

    async def test_no_responders_is_one_line(self) -> None:
        """A request nobody subscribes to fails at once: one error line, exit status 1."""
        req = await deferToThread(_txnats, "req", "cli.nobody", "x", "--server", self.url)
        self.assertEqual(req.returncode, 1)
        last = req.stderr.splitlines()[-1]
        self.assertEqual(last, "txnats: error: no responders on 'cli.nobody'")
        self.assertNotIn("Traceback", req.stderr)

    async def test_bench_pub_json(self) -> None:
        """``txnats bench pub --json`` prints one JSON object with a positive rate."""
        run = await deferToThread(
            _txnats, "bench", "pub", "--msgs", "2000", "--json", "--server", self.url
        )
        self.assertEqual(run.returncode, 0, run.stderr)
        result: dict[str, Any] = json.loads(run.stdout)
        self.assertEqual(result["client"], "txnats")
        self.assertEqual(result["workload"], "pub")
        self.assertEqual(result["msgs"], 2000)
        self.assertGreater(result["msgs_per_sec"], 0)


class JetStreamBenchTests(TestCase):
    """``txnats bench js-pub|kv|obj`` against a server with JetStream."""

    timeout = 120

    def setUp(self) -> None:
        self.server = NatsServer(jetstream=True).start()
        self.addCleanup(self.server.stop)

    async def bench(self, *args: str) -> dict[str, Any]:
        run = await deferToThread(_txnats, "bench", *args, "--json", "--server", self.server.url)
        self.assertEqual(run.returncode, 0, run.stderr)
        result: dict[str, Any] = json.loads(run.stdout)
        self.assertEqual(result["client"], "txnats")
        self.assertEqual(result["workload"], args[0])
        return result

    async def test_js_pub_kv_obj(self) -> None:
        """Each JetStream workload reports its rates, and leaves no stream behind."""
        js = await self.bench("js-pub", "--msgs", "2000")
        self.assertEqual(js["msgs"], 2000)
        self.assertGreater(js["msgs_per_sec"], 0)
        kv = await self.bench("kv", "--msgs", "200")
        self.assertGreater(kv["put_ops_per_sec"], 0)
        self.assertGreater(kv["get_ops_per_sec"], 0)
        obj = await self.bench("obj", "--msgs", "2", "--size", str(300_000))
        self.assertEqual((obj["msgs"], obj["size"]), (2, 300_000))
        self.assertGreater(obj["mb_per_sec"], 0)
        nc = await txnats.connect(reactor, self.server.url)
        try:
            self.assertEqual(await nc.jetstream().stream_names(), [])
        finally:
            await nc.close()


class ErrorAndHelpTests(TestCase):
    """What the command line does without a server: help, usage and connection errors."""

    timeout = 60

    async def test_help_for_every_command(self) -> None:
        """``--help`` exits 0 for the program and for every subcommand, and shows the
        connection flags on every client command."""
        names = ("", *COMMANDS)
        runs = await gatherResults(
            [deferToThread(_txnats, *([name] if name else []), "--help") for name in names]
        )
        for name, run in zip(names, runs, strict=True):
            self.assertEqual(run.returncode, 0, f"{name} --help: {run.stderr}")
            self.assertIn("usage: txnats", run.stdout)
            if name and name != "server":
                for flag in ("--server", "--user", "--creds", "--tls-ca", "--connect-timeout"):
                    self.assertIn(flag, run.stdout, f"{name} --help lacks {flag}")

    async def test_bad_server_is_one_line(self) -> None:
        """An unreachable server, or a malformed URL, gives one error line and exit 1."""
        for url in (f"nats://127.0.0.1:{_closed_port()}", "nats://127.0.0.1:notaport"):
            run = await deferToThread(_txnats, "pub", "cli.x", "hi", "--server", url)
            self.assertEqual(run.returncode, 1, run.stderr)
            lines = run.stderr.splitlines()
            self.assertEqual(len(lines), 1, run.stderr)
            self.assertTrue(lines[0].startswith("txnats: error: "), lines[0])

    async def test_bench_help_columns(self) -> None:
        """``bench --help`` lists the workloads in two columns: every name, the longest
        (``pub-plain``) too, is followed by spaces, and every description starts in the
        same column."""
        run = await deferToThread(_txnats, "bench", "--help")
        self.assertEqual(run.returncode, 0, run.stderr)
        lines = run.stdout.splitlines()
        listed = lines[lines.index("Workloads:") + 1 :][: len(WORKLOADS)]
        starts = set()
        for (name, what), row in zip(WORKLOADS.items(), listed, strict=True):
            self.assertTrue(row.startswith(f"  {name}  "), row)
            self.assertTrue(row.endswith(what), row)
            starts.add(len(row) - len(what))
        self.assertEqual(len(starts), 1, f"the descriptions do not line up: {listed}")

    async def test_usage_error_exits_2(self) -> None:
        """A missing argument is a usage error: one line naming the command, exit 2."""
        run = await deferToThread(_txnats, "pub")
        self.assertEqual(run.returncode, 2)
        self.assertEqual(len(run.stderr.splitlines()), 1, run.stderr)
        self.assertTrue(run.stderr.startswith("txnats: error: pub: "), run.stderr)


class CompareTests(TestCase):
    """``benchmarks/compare.py`` in quick mode, as CI runs it."""

    timeout = 180

    async def test_compare_quick(self) -> None:
        """The quick comparison runs every workload through both clients on one server
        and prints a table naming txnats and nats-py."""
        run = await deferToThread(
            _run, str(ROOT / "benchmarks" / "compare.py"), "--quick", timeout=150
        )
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        self.assertIn("txnats", run.stdout)
        self.assertIn("nats-py", run.stdout)
        self.assertIn("txnats / nats-py", run.stdout)
        for row in ("JetStream publish_async", "KV put", "KV get", "object get"):
            self.assertIn(row, run.stdout)
        self.assertIn("pub 2,000 x 16 B, plain loop", run.stdout)
        self.assertNotIn("FAILED", run.stdout)


#: Tiny arguments for each ``txnats bench`` workload, and the line its result starts
#: with. ``BenchOnTerminalTests`` runs every one of them with the progress bar drawn.
TERMINAL_RUNS: dict[str, tuple[tuple[str, ...], str]] = {
    "pub": (("--msgs", "3000", "--size", "16"), "Pub stats:"),
    "pub-plain": (("--msgs", "3000", "--size", "16"), "Pub stats:"),
    "sub": (("--msgs", "500", "--size", "16"), "Sub stats:"),
    "pubsub": (("--msgs", "2000", "--size", "16"), "Sub stats:"),
    "req": (("--duration", "0.5"), "Req stats:"),
    "fanout": (("--msgs", "1000", "--subs", "2"), "Sub stats:"),
    "js-pub": (("--msgs", "500", "--size", "16"), "JetStream publish_async stats:"),
    "consume": (("--msgs", "500", "--size", "16"), "Sub stats:"),
    "kv": (("--msgs", "50", "--size", "16"), "KV stats:"),
    "obj": (("--msgs", "1", "--size", "100000"), "Object store stats:"),
    "micro": (("--duration", "0.5"), "Micro stats"),
}


class BenchOnTerminalTests(ServerPerClass, TestCase):
    """Every ``txnats bench`` workload run with its stdout on a pseudo-terminal, where
    the progress bar is drawn (piped output, as in the other tests, hides the bar)."""

    timeout = 120
    server_options = {"jetstream": True}

    def setUp(self) -> Any:
        if sys.platform == "win32":  # pragma: no cover
            raise SkipTest("needs a pseudo-terminal")
        return super().setUp()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def check(self, workload: str, code: int, screen: str, err: str) -> None:
        """The run ended well: status 0, the bar drawn and complete, the result shown."""
        _args, stats = TERMINAL_RUNS[workload]
        self.assertEqual(code, 0, f"{workload}: exit {code}\n{screen[-1500:]}\n{err[-3000:]}")
        self.assertIn("\x1b[K", screen, f"{workload}: no progress bar drawn: {screen!r}")
        self.assertIn("100.0%", screen, f"{workload}: the bar never reached 100%: {screen!r}")
        self.assertIn(stats, screen, f"{workload}: no result printed: {screen!r}")
        self.assertNotIn("Traceback", err)
        self.assertNotIn("Unhandled", err)

    async def run_on_terminal(self, workload: str, *extra: str) -> None:
        args, _stats = TERMINAL_RUNS[workload]
        subject = f"tty.{workload}"
        code, screen, err = await deferToThread(
            _bench_on_terminal, workload, *args, *extra, "--subject", subject,
            "--server", self.url,
        )
        self.check(workload, code, screen, err)

    def test_every_workload_is_covered(self) -> None:
        """The workloads run here are exactly those ``txnats bench --help`` lists, so a
        new workload cannot go without a test of its progress display."""
        self.assertEqual(sorted(TERMINAL_RUNS), sorted(WORKLOADS))

    async def test_pub(self) -> None:
        """``bench pub`` on a terminal draws its bar and prints its result."""
        await self.run_on_terminal("pub")

    async def test_pub_plain(self) -> None:
        """``bench pub-plain`` on a terminal draws its bar (before and after the loop,
        which never yields) and prints its result."""
        await self.run_on_terminal("pub-plain")

    async def test_pubsub(self) -> None:
        """``bench pubsub`` on a terminal draws its bar and prints its result."""
        await self.run_on_terminal("pubsub")

    async def test_fanout(self) -> None:
        """``bench fanout`` on a terminal draws its bar and prints its result."""
        await self.run_on_terminal("fanout")

    async def test_req_duration(self) -> None:
        """``bench req --duration`` on a terminal (the bar counts seconds) ends after
        the duration with its result, instead of failing with a NameError from the
        progress callback."""
        await self.run_on_terminal("req")

    async def test_req_duration_inflight(self) -> None:
        """``bench req --duration --inflight 20`` on a terminal prints its result."""
        await self.run_on_terminal("req", "--inflight", "20")

    async def test_micro(self) -> None:
        """``bench micro`` (a service endpoint) on a terminal prints its result."""
        await self.run_on_terminal("micro")

    async def test_req_msgs(self) -> None:
        """``bench req --msgs`` on a terminal (the bar counts requests) prints its
        result."""
        code, screen, err = await deferToThread(
            _bench_on_terminal, "req", "--msgs", "300", "--subject", "tty.req-msgs",
            "--server", self.url,
        )
        self.check("req", code, screen, err)

    async def test_sub(self) -> None:
        """``bench sub`` on a terminal receives what another process publishes, draws
        its bar and prints its result."""
        args, _stats = TERMINAL_RUNS["sub"]
        term = _OnTerminal("sub", *args, "--subject", "tty.sub", "--server", self.url)
        self.addCleanup(term.kill)
        listening = await deferToThread(term.wait_for_stderr, "Listening on [tty.sub]")
        if not listening:
            term.kill()
            self.fail(f"bench sub never listened: {''.join(term.stderr_lines)}")
        pub = await deferToThread(
            _txnats, "bench", "pub", *args, "--subject", "tty.sub", "--server", self.url,
            "--no-progress",
        )
        self.assertEqual(pub.returncode, 0, pub.stderr)
        code, screen, err = await deferToThread(term.finish)
        self.check("sub", code, screen, err)

    async def test_js_pub(self) -> None:
        """``bench js-pub`` on a terminal draws its bar and prints its result."""
        await self.run_on_terminal("js-pub")

    async def test_consume(self) -> None:
        """``bench consume`` (JetStream consume()) on a terminal prints its result."""
        await self.run_on_terminal("consume")

    async def test_kv(self) -> None:
        """``bench kv`` on a terminal draws its bar and prints its result."""
        await self.run_on_terminal("kv")

    async def test_obj(self) -> None:
        """``bench obj`` on a terminal draws its bar and prints its result."""
        await self.run_on_terminal("obj")


class ProgressBarTests(TestCase):
    """The terminal progress bar of ``txnats bench``, on a fake clock and a string."""

    def bar(self) -> tuple[Bar, Clock, io.StringIO]:
        clock, out = Clock(), io.StringIO()
        return Bar(clock, out), clock, out

    def test_draws_until_the_end(self) -> None:
        """The bar is drawn at once and on every tick, once more at the end (complete
        if the work is), and its line is ended."""
        bar, clock, out = self.bar()
        done = [0]
        bar.begin("Publishing", 100, lambda: done[0])
        self.assertIn("0.0%", out.getvalue())
        done[0] = 50
        clock.advance(0.2)
        self.assertIn("50.0%", out.getvalue())
        done[0] = 100
        bar.end()
        self.assertTrue(out.getvalue().endswith("100/100\x1b[K\n"), repr(out.getvalue()))
        bar.end()  # a second end() does nothing
        self.assertEqual(out.getvalue().count("\n"), 1)

    def test_first_draw_fails(self) -> None:
        """A progress callback that raises at once stops the bar: the error is logged
        as a warning, end() raises nothing, and no Deferred is left with it unhandled."""
        bar, clock, out = self.bar()

        def broken() -> float:
            raise ZeroDivisionError("progress callback")

        with capturedLogs() as events:
            bar.begin("Receiving", 10, broken)
            clock.advance(1)
            bar.end()
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        (event,) = events
        self.assertEqual(event["log_level"], LogLevel.warn)
        self.assertIn("progress bar", event["log_format"])
        self.assertEqual(out.getvalue(), "\n")
        self.assertFalse(clock.getDelayedCalls())

    def test_later_draw_fails(self) -> None:
        """A callback that raises on a later tick stops the bar there; end() does not
        draw again, nor raise."""
        bar, clock, out = self.bar()
        calls = [0]

        def fails_second() -> float:
            calls[0] += 1
            if calls[0] > 1:
                raise ZeroDivisionError("progress callback")
            return 1.0

        with capturedLogs() as events:
            bar.begin("Receiving", 10, fails_second)
            clock.advance(0.2)
            clock.advance(0.2)
            bar.end()
        self.assertEqual(calls[0], 2)
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertEqual(len(events), 1)
        self.assertTrue(out.getvalue().endswith("\x1b[K\n"), repr(out.getvalue()))

    def test_last_draw_fails(self) -> None:
        """A callback that raises only at the end is logged too, and the line ended."""
        bar, _clock, out = self.bar()
        fail = [False]

        def current() -> float:
            if fail[0]:
                raise ZeroDivisionError("progress callback")
            return 1.0

        with capturedLogs() as events:
            bar.begin("Get", 3, current)
            fail[0] = True
            bar.end()
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)
        self.assertEqual(len(events), 1)
        self.assertTrue(out.getvalue().endswith("\n"))


class HumanResultTests(TestCase):
    """The result ``txnats bench`` prints without ``--json``."""

    def pub_result(self, loop: str) -> dict[str, Any]:
        return {
            "workload": "pub", "msgs": 1000, "size": 16, "pubs": 1, "elapsed": 0.5,
            "msgs_per_sec": 2000.0, "mb_per_sec": 0.03, "publish_loop": loop,
        }

    def test_plain_loop_is_named(self) -> None:
        """A ``pub-plain`` result (``publish_loop`` ``plain``) says ``(plain loop)``;
        the cooperative ``pub``'s does not."""
        plain = human(self.pub_result("plain"))
        self.assertTrue(plain.startswith("Pub stats: 2,000 msgs/sec"), plain)
        self.assertIn("(plain loop)", plain.splitlines()[0])
        self.assertNotIn("plain loop", human(self.pub_result("cooperative")))


class _HeldClient(ProxyClient):
    """The server side of :class:`_SubHoldingProxy` (what the server sends goes
    straight back to the client)."""

    noisy = False

    def connectionMade(self) -> None:
        super().connectionMade()
        assert isinstance(self.peer, _SubHoldingServer)
        self.proxy = self.peer.factory
        self.proxy.open.add(self)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        self.proxy.open.discard(self)


class _HeldClientFactory(ProxyClientFactory):
    protocol = _HeldClient


class _SubHoldingServer(ProxyServer):
    """The client side of :class:`_SubHoldingProxy`: forwards the client's bytes in
    order, but from the first ``SUB <subject> `` line on holds them for a while."""

    factory: _SubHoldingProxy  # type: ignore[assignment]
    clientProtocolFactory = _HeldClientFactory
    noisy = False

    def connectionMade(self) -> None:
        self._tail = b""  # the last bytes forwarded, to find a marker split in two
        self._held: list[bytes] | None = None
        self._release_call: IDelayedCall | None = None
        self.factory.open.add(self)
        super().connectionMade()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._release_call is not None and self._release_call.active():
            self._release_call.cancel()
        super().connectionLost(reason)
        self.factory.open.discard(self)

    def dataReceived(self, data: bytes) -> None:
        assert self.peer is not None
        if self._held is not None:
            self._held.append(data)
            return
        if self._release_call is None:
            marker = self.factory.marker
            found = (self._tail + data).find(marker)
            if found >= 0:
                cut = max(0, found - len(self._tail))
                if cut:
                    self.peer.transport.write(data[:cut])
                self._held = [data[cut:]]
                self.factory.holds += 1
                self._release_call = reactor.callLater(  # type: ignore[attr-defined]
                    self.factory.hold, self._release
                )
                return
            self._tail = (self._tail + data)[-len(marker) :]
        self.peer.transport.write(data)

    def _release(self) -> None:
        held, self._held = self._held or [], None
        if self.peer is not None:
            self.peer.transport.write(b"".join(held))


class _SubHoldingProxy(ProxyFactory):
    """A TCP proxy to a nats-server that delays, on every connection, the client's
    ``SUB`` for ``subject`` (and whatever the client sends after it, which stays in
    order behind it) by ``hold`` seconds.

    A client that confirms its subscription with a PING sent after the SUB waits
    those seconds for its PONG; a PING that overtakes the SUB comes back at once, while
    the server does not yet know the subscription.
    """

    protocol = _SubHoldingServer

    def __init__(self, server: NatsServer, subject: str, hold: float) -> None:
        super().__init__("127.0.0.1", server.port)
        self.marker = b"SUB " + subject.encode() + b" "
        self.hold = hold
        self.holds = 0
        self.open: set[Protocol] = set()
        self.listening: IListeningPort = reactor.listenTCP(  # type: ignore[attr-defined]
            0, self, interface="127.0.0.1"
        )

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.listening.getHost().port}"

    async def stop(self) -> None:
        """Stop listening, cut every connection and wait (bounded) until all are gone."""
        await self.listening.stopListening()
        for proto in list(self.open):
            if proto.transport is not None:
                proto.transport.abortConnection()  # type: ignore[attr-defined]
        await wait_until(lambda: not self.open)


#: How long the proxy holds a subscriber's SUB: far longer than a confirmed workload
#: needs to send its first message once its subscriber's flush returns.
SUB_HOLD = 1.0


class SubscriberConfirmedTests(ServerPerClass, TestCase):
    """Every benchmark subscriber (and responder) is known to the server before the
    clock starts, whichever client runs it: a proxy holds each subscriber's ``SUB``
    for a second, so a workload that starts publishing or requesting before its
    subscriber's own connection has flushed loses the race every time, not one run in
    ten (``NoRespondersError`` for req, lost messages and a stall for pubsub)."""

    timeout = 120

    async def through_proxy(self, script: str, workload: str, *args: str, subs: int = 1) -> None:
        subject = f"held.{workload}"
        proxy = _SubHoldingProxy(self.server, subject, SUB_HOLD)  # type: ignore[arg-type]
        self.addCleanup(proxy.stop)
        if script == "txnats":
            cmd: tuple[str, ...] = ("-m", "txnats", "bench", workload, "--no-progress")
        else:
            cmd = (str(ROOT / "benchmarks" / "natspy_bench.py"), workload)
        run = await deferToThread(
            _run, *cmd, *args, "--subject", subject, "--server", proxy.url, "--json"
        )
        self.assertEqual(run.returncode, 0, f"{script} {workload}: {run.stderr[-2000:]}")
        result = json.loads(run.stdout.strip().splitlines()[-1])
        self.assertEqual(result["workload"], workload)
        self.assertGreater(result["msgs_per_sec"], 0)
        self.assertEqual(proxy.holds, subs, "the proxy did not hold every SUB")

    async def test_natspy_req(self) -> None:
        """nats-py's responder is confirmed before the first request: no
        NoRespondersError although its SUB reaches the server a second late."""
        await self.through_proxy("nats-py", "req", "--msgs", "20")

    async def test_natspy_req_uvloop(self) -> None:
        """On uvloop too, nats-py's responder is confirmed before the first request."""
        if importlib.util.find_spec("uvloop") is None:
            raise SkipTest("uvloop is not installed")
        await self.through_proxy("nats-py", "req", "--msgs", "20", "--uvloop")

    async def test_natspy_pubsub(self) -> None:
        """nats-py's subscriber (a callback) is confirmed before the first publish: it
        receives every message although its SUB reaches the server a second late."""
        await self.through_proxy("nats-py", "pubsub", "--msgs", "200", "--mode", "cb")

    async def test_natspy_pubsub_next(self) -> None:
        """nats-py's ``next_msg()`` subscriber is confirmed before the first publish."""
        await self.through_proxy("nats-py", "pubsub", "--msgs", "200", "--mode", "next")

    async def test_natspy_fanout(self) -> None:
        """Each of nats-py's fan-out subscribers is confirmed before the first publish."""
        await self.through_proxy(
            "nats-py", "fanout", "--msgs", "200", "--subs", "2", subs=2
        )

    async def test_txnats_req(self) -> None:
        """txnats's responder is confirmed before the first request."""
        await self.through_proxy("txnats", "req", "--msgs", "20")

    async def test_txnats_pubsub(self) -> None:
        """txnats's subscriber is confirmed before the first publish."""
        await self.through_proxy("txnats", "pubsub", "--msgs", "200", "--mode", "iter")

    async def test_txnats_fanout(self) -> None:
        """Each of txnats's fan-out subscribers is confirmed before the first publish."""
        await self.through_proxy("txnats", "fanout", "--msgs", "200", "--subs", "2", subs=2)


class PlainLoopTests(ServerPerClass, TestCase):
    """``bench pub-plain``: publish() in one loop that never yields, then flush()."""

    timeout = 60

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    async def test_every_message_arrives(self) -> None:
        """The plain loop's messages all reach a subscriber on another connection, and
        its result is a pub result marked ``plain`` (the cooperative pub's is marked
        ``cooperative``)."""
        watcher = await txnats.connect(reactor, self.url)
        self.addCleanup(watcher.close)
        received: list[Msg] = []
        watcher.subscribe("plain.count", received.append)
        await watcher.flush()
        result = await run_workload(
            reactor, self.url, "pub-plain", msgs=5000, size=16, subject="plain.count"
        )
        self.assertEqual(
            (result["workload"], result["publish_loop"], result["msgs"], result["size"]),
            ("pub", "plain", 5000, 16),
        )
        self.assertGreater(result["msgs_per_sec"], 0)
        await wait_until(lambda: len(received) == 5000)
        cooperative = await run_workload(
            reactor, self.url, "pub", msgs=100, size=16, subject="plain.other"
        )
        self.assertEqual(cooperative["publish_loop"], "cooperative")

    async def test_failure_says_where(self) -> None:
        """When a publish() in the loop raises OutboundBufferFullError (as it does
        once the loop outgrows the outbound buffer's bound), the workload fails with
        that error, naming the plain loop and the message it stopped at."""
        real = bench_core.connect_many

        async def connect_with_a_small_buffer(*args: Any, **kwargs: Any) -> list[Any]:
            clients = await real(*args, **kwargs)
            publish, calls = clients[0].publish, [0]

            def full_after_100(subject: str, data: bytes = b"") -> None:
                calls[0] += 1
                if calls[0] > 100:
                    raise OutboundBufferFullError("outbound buffer full (test)")
                publish(subject, data)

            clients[0].publish = full_after_100
            return clients

        self.patch(bench_core, "connect_many", connect_with_a_small_buffer)
        with self.assertRaises(OutboundBufferFullError) as caught:
            await run_workload(reactor, self.url, "pub-plain", msgs=1000, size=16)
        text = str(caught.exception)
        self.assertIn("plain loop", text)
        self.assertIn("OutboundBufferFullError at message 101 of 1,000", text)
        self.assertIn("outbound buffer full (test)", text)

    async def test_one_connection_only(self) -> None:
        """``pub-plain`` publishes on one connection: asking for more is an error."""
        with self.assertRaises(InvalidArgumentError):
            await run_workload(reactor, self.url, "pub-plain", msgs=10, pubs=2)


def _load_compare() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_compare_under_test", ROOT / "benchmarks" / "compare.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


class CompareReportTests(TestCase):
    """How ``benchmarks/compare.py`` lays out its rows and reports failed runs."""

    def test_plain_loop_row_next_to_pub_16(self) -> None:
        """The plain-loop row follows the cooperative pub 16 B row, a million messages
        in the full suite and as few as the other pub rows in quick mode."""
        compare = _load_compare()
        for quick, count in ((False, "1,000,000"), (True, "2,000")):
            rows = compare.suite(quick)
            keys = [r.key for r in rows]
            plain = rows[keys.index("pub-16-plain")]
            self.assertEqual(keys.index("pub-16-plain"), keys.index("pub-16") + 1)
            self.assertEqual(plain.label, f"pub {count} x 16 B, plain loop")
            self.assertEqual(plain.txnats[0], "pub-plain")
            self.assertEqual(plain.natspy[0], "pub-plain")
            self.assertEqual(plain.txnats[2], count.replace(",", ""))

    def test_failed_cell_shows_its_error(self) -> None:
        """A client whose every run failed shows ``FAILED (ErrorName)`` in its cell
        and no ratio; the other clients' figures and the other rows are unaffected,
        and the failures list gives each error line in full."""
        compare = _load_compare()
        rows = [r for r in compare.suite(True) if r.key in ("pub-16", "pub-16-plain")]
        error = (
            "txnats: error: plain loop: publish() raised OutboundBufferFullError at "
            "message 860,371 of 1,000,000"
        )
        ok = {"msgs_per_sec": 1000.0}
        cells = {
            "pub-16": {
                compare.TXNATS: compare.Cell([ok]),
                compare.NATSPY_ASYNCIO: compare.Cell([ok]),
            },
            "pub-16-plain": {
                compare.TXNATS: compare.Cell([], [error]),
                compare.NATSPY_ASYNCIO: compare.Cell([{"msgs_per_sec": 500.0}]),
            },
        }
        (_title, _head, body), *_rest = compare.tables(rows, cells, False)
        self.assertEqual(body[0][2:], ["1,000", "1,000", "1.00x"])
        self.assertEqual(body[1][2:], ["FAILED (OutboundBufferFullError)", "500", "-"])
        failed = compare.failures(rows, cells)
        self.assertEqual(failed, [(rows[1].label, compare.TXNATS, error)])
        for fmt in ("text", "markdown", "rst"):
            self.assertIn(error, compare.render_failures(failed, fmt))
