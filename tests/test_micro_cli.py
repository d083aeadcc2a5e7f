"""``txnats micro ls|info|stats`` and the ``micro`` benchmark workload (figure 4's rows
in ``benchmarks/compare.py``, run here in quick mode through both clients)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

import txnats
from tests.support.micro import validate
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, reactor
from txnats import micro
from txnats.cli import CLIError, build_parser
from txnats.cli._cmd_micro import run_micro
from txnats.cli.bench import run_workload

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("NATS_URL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env=env, stdin=subprocess.DEVNULL,
    )


class MicroCommandTests(ServerPerClass, TestCase):
    """The ``micro`` command against two instances of a service on a real server."""

    timeout = 60

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    async def services(self) -> list[micro.Service]:
        out = []
        for i in range(2):
            nc = await txnats.connect(reactor, self.url, name=f"cli-instance-{i}")
            self.addCleanup(nc.close)
            svc = micro.add_service(nc, name="calc", version="1.2.0",
                                    description="a calculator", metadata={"zone": "eu"})
            svc.add_group("calc").add_endpoint("add", lambda r: r.respond(b"3"),
                                               metadata={"k": "v"})
            svc.add_endpoint("refuse", lambda r: r.respond_error(400, "nope"), queue_group=None)
            await nc.flush(timeout=WAIT)
            out.append(svc)
        return out

    async def micro(self, *argv: str) -> tuple[int, str, str]:
        """Run ``txnats micro ARGV`` in this process; return status, stdout, stderr."""
        args = build_parser().parse_args(
            ["micro", *argv, "--server", self.url, "--timeout", "0.5"]
        )
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            code = await run_micro(reactor, args)
        except CLIError as e:
            code = e.status
            err.write(str(e))
        finally:
            sys.stdout, sys.stderr = saved
        return code, out.getvalue(), err.getvalue()

    async def test_ls_info_stats(self) -> None:
        """ls lists both instances; info shows endpoints with subjects and queue groups;
        stats counts per endpoint with a total; --json prints valid ADR-32 answers."""
        svcs = await self.services()
        nc = await txnats.connect(reactor, self.url)
        self.addCleanup(nc.close)
        await nc.request("calc.add", timeout=WAIT)
        await nc.request("refuse", timeout=WAIT)

        code, out, _ = await self.micro("ls")
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["Name", "Version", "ID", "Description"])
        for svc in svcs:
            self.assertIn(f"calc  1.2.0    {svc.id}  a calculator", out)

        code, out, _ = await self.micro("info", "calc", svcs[0].id)
        self.assertEqual(code, 0)
        self.assertIn(f"Service: calc ({svcs[0].id})", out)
        self.assertNotIn(svcs[1].id, out)
        self.assertIn("Metadata: zone=eu", out)
        self.assertRegex(out, r"add\s+calc\.add\s+q\s+k=v")
        self.assertRegex(out, r"refuse\s+refuse\s+\(none\)\s+-")

        code, out, _ = await self.micro("stats", "calc")
        self.assertEqual(code, 0)
        self.assertRegex(out, r"\(total\)\s+3\s+2\s")  # add: one of two; refuse: both
        self.assertIn("400:nope", out)

        code, out, _ = await self.micro("stats", "calc", "--json")
        answers = json.loads(out)
        self.assertEqual(sorted(a["id"] for a in answers), sorted(s.id for s in svcs))
        for a in answers:
            validate(a, "io.nats.micro.v1.stats_response")

    async def test_nothing_found(self) -> None:
        """ls finding nothing says so and succeeds; info or stats of an unknown
        service fails with status 1."""
        code, out, err = await self.micro("ls", "nobody")
        self.assertEqual((code, out), (0, ""))
        self.assertIn("No service 'nobody' answered", err)
        code, _, err = await self.micro("info", "nobody")
        self.assertEqual(code, 1)
        self.assertIn("no service 'nobody' answered", err)
        code, out, _ = await self.micro("info", "nobody", "--json")
        self.assertEqual((code, json.loads(out)), (0, []))

    def test_help(self) -> None:
        """``micro --help`` lists ls, info and stats; each of them takes the
        connection flags, --timeout and --json."""
        for argv, wanted in (
            (["micro", "--help"], ("ls", "info", "stats")),
            *((["micro", verb, "--help"], ("--server", "--creds", "--timeout", "--json"))
              for verb in ("ls", "info", "stats")),
        ):
            out = io.StringIO()
            saved, sys.stdout = sys.stdout, out
            try:
                with self.assertRaises(SystemExit) as cm:
                    build_parser().parse_args(argv)
            finally:
                sys.stdout = saved
            self.assertEqual(cm.exception.code, 0)
            for word in wanted:
                self.assertIn(word, out.getvalue(), argv)

    async def test_command_line(self) -> None:
        """``python -m txnats micro ls`` as a user runs it; a missing NAME for info is
        a usage error (status 2)."""
        svcs = await self.services()
        run = await deferToThread(_run, "-m", "txnats", "micro", "ls", "calc", "-s", self.url,
                                  "--timeout", "0.5")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(svcs[0].id, run.stdout)
        bad = await deferToThread(_run, "-m", "txnats", "micro", "info", "-s", self.url)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("txnats: error: micro info: ", bad.stderr)


class MicroBenchTests(ServerPerClass, TestCase):
    """The ``micro`` workload: in this process, and in compare.py's quick mode."""

    timeout = 120

    async def test_workload(self) -> None:
        """bench micro answers every request through a service endpoint (which counts
        them all) and reports req/s and latencies (compare.py below runs it
        sequentially and with 100 in flight)."""
        assert self.server is not None
        result: dict[str, Any] = await run_workload(
            reactor, self.server.url, "micro", msgs=300, inflight=20, subject="bench.micro",
        )
        self.assertEqual((result["workload"], result["requests"]), ("micro", 300))
        self.assertEqual(result["inflight"], 20)
        self.assertGreater(result["msgs_per_sec"], 0)
        self.assertGreater(result["latency_us"]["p99"], 0)

    async def test_compare_quick(self) -> None:
        """compare.py --quick runs micro-seq and micro-100 through txnats and nats-py's
        nats.micro on one server and prints both rows with a ratio, no failure."""
        run = await deferToThread(
            _run, str(ROOT / "benchmarks" / "compare.py"), "--quick", "--no-uvloop",
            "--only", "micro-seq,micro-100",
        )
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])
        self.assertNotIn("FAILED", run.stdout)
        for label in ("service endpoint sequential", "service endpoint 100 in flight"):
            (row,) = [line for line in run.stdout.splitlines() if line.startswith(label)
                      and "req/s" in line]
            self.assertRegex(row, r"\d\.\d\dx$")
