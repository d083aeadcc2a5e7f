"""The programs in examples/ run, print what they promise and exit 0.

Each example runs as a subprocess (``sys.executable examples/X.py``), as a user
would run it, bounded by a timeout; the README's first command is
``python examples/quickstart.py``, which starts its own server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.support.servers import ServerPerClass

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: Seconds an example may run before it is killed and the test fails.
RUN_TIMEOUT = 60


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>.py`` (blocking; call it in a thread)."""
    env = dict(os.environ)
    # Import this checkout's txnats even if it is not installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


class ExampleTests(ServerPerClass, TestCase):
    """Each example against a shared server (and quickstart against its own)."""

    timeout = RUN_TIMEOUT + 30

    async def example(self, name: str, *args: str) -> list[str]:
        """Run an example in a thread; assert it exits 0; return its stdout lines."""
        result = await deferToThread(run_example, name, *args)
        self.assertEqual(
            result.returncode,
            0,
            f"{name} exited {result.returncode}\nstdout:\n{result.stdout}\n"
            f"stderr:\n{result.stderr}",
        )
        return result.stdout.splitlines()

    async def test_quickstart_starts_its_own_server(self) -> None:
        """quickstart.py with no arguments starts a server, pub/subs, requests and drains."""
        lines = await self.example("quickstart")
        self.assertRegex(lines[0], r"^connected to nats://127\.0\.0\.1:\d+$")
        self.assertEqual(
            lines[1:],
            [
                "received b'hello' on greet.joe with X-Trace: abc123",
                "svc.upper replied b'HELLO, TWISTED'",
                "drained and closed",
            ],
        )

    async def test_quickstart_with_server(self) -> None:
        """quickstart.py --server URL uses the given server."""
        lines = await self.example("quickstart", "--server", self.server.url)
        self.assertEqual(lines[0], f"connected to {self.server.url}")
        self.assertEqual(lines[-1], "drained and closed")

    async def test_pubsub(self) -> None:
        """pubsub.py delivers every reading, with its header, in order."""
        lines = await self.example("pubsub", "--server", self.server.url)
        self.assertEqual(
            lines,
            [
                "kitchen: 21.5 celsius",
                "hall: 19.0 celsius",
                "attic: 25.1 celsius",
                "cellar: 12.4 celsius",
                "received all 4 readings, in order",
            ],
        )

    async def test_request_reply(self) -> None:
        """request_reply.py gets three replies and an immediate NoRespondersError."""
        lines = await self.example("request_reply", "--server", self.server.url)
        self.assertEqual(
            lines,
            [
                "double(1) = 2 (X-Served-By: doubler)",
                "double(2) = 4 (X-Served-By: doubler)",
                "double(3) = 6 (X-Served-By: doubler)",
                "math.triple: no responders (reported at once, not after the timeout)",
            ],
        )

    async def test_queue_workers(self) -> None:
        """queue_workers.py: three queue workers share 30 jobs, each job handled once."""
        lines = await self.example("queue_workers", "--server", self.server.url)
        counts = {}
        for line in lines[:-1]:
            m = re.fullmatch(r"(worker-\d) handled (\d+) jobs", line)
            self.assertIsNotNone(m, f"unexpected line {line!r} in {lines}")
            counts[m.group(1)] = int(m.group(2))
        self.assertEqual(sorted(counts), ["worker-1", "worker-2", "worker-3"])
        self.assertEqual(sum(counts.values()), 30)
        self.assertEqual(lines[-1], "all 30 jobs done, each by exactly one worker")

    async def test_unreachable_server_fails(self) -> None:
        """An example exits non-zero, naming the error, when it cannot reach the server."""
        result = await deferToThread(run_example, "pubsub", "--server", "nats://127.0.0.1:1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("NoServersError", result.stderr)
