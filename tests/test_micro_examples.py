"""examples/service.py and examples/service_client.py run as a user runs them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.support.servers import ServerPerClass

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RUN_TIMEOUT = 60

#: What service_client.py prints after the instance lines.
CLIENT_TAIL = [
    "calc: adds and divides numbers",
    "  endpoint add on calc.add (queue group q)",
    "  endpoint divide on calc.divide (queue group q)",
    "calc.add [1, 2, 3.5] -> 6.5",
    "calc.divide [7, 2] -> 3.5",
    "calc.divide [1, 0] -> error 400: division by zero",
    "calc.add not json -> error 400: expected a JSON list of numbers",
    "calc counted 4 requests, 2 errors",
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args], cwd=ROOT, env=_env(),
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )


class Background:
    """examples/service.py running in the background, its stdout read line by line."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "service.py"), *args], cwd=ROOT, env=_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []

    def read_until(self, marker: str) -> bool:
        """Read stdout until a line holds ``marker`` (True) or it ends (False)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if marker in line:
                return True
        return False

    def interrupt(self) -> tuple[int, list[str], str]:
        """Ctrl-C; wait for the exit; return status, every stdout line, stderr."""
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=RUN_TIMEOUT)
        self.lines += out.splitlines()
        return self.proc.returncode, self.lines, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class ServiceExampleTests(ServerPerClass, TestCase):
    """The service example serves, the client example finds and calls it."""

    timeout = RUN_TIMEOUT + 30

    def check_client(self, result: subprocess.CompletedProcess[str]) -> list[str]:
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertRegex(lines[0], r"^found calc 1\.0\.0, instance \w{22}$")
        self.assertEqual(lines[1:], CLIENT_TAIL)
        return lines

    async def test_client_with_its_own_server(self) -> None:
        """service_client.py alone starts a server and the service, then finds the
        service, reads its endpoints, calls it (two errors) and reads its counts."""
        self.check_client(await deferToThread(run_example, "service_client"))

    async def test_service_and_client(self) -> None:
        """service.py --server serves until Ctrl-C; service_client.py --server finds
        that instance and calls it; Ctrl-C stops the service, which reports its
        counts and exits 0."""
        assert self.server is not None
        service = Background("--server", self.server.url)
        self.addCleanup(service.kill)
        running = await deferToThread(service.read_until, "running")
        self.assertTrue(running, f"service.py never ran: {service.lines}")
        (line,) = service.lines
        service_id = re.fullmatch(
            rf"service calc 1\.0\.0 running on {re.escape(self.server.url)}, id (\w{{22}})", line
        )
        self.assertIsNotNone(service_id, line)
        assert service_id is not None
        lines = self.check_client(
            await deferToThread(run_example, "service_client", "--server", self.server.url)
        )
        self.assertEqual(lines[0], f"found calc 1.0.0, instance {service_id.group(1)}")
        code, out, err = await deferToThread(service.interrupt)
        self.assertEqual(code, 0, err)
        self.assertEqual(out[-1], "service stopped after 4 requests (2 errors)")

    async def test_service_with_its_own_server(self) -> None:
        """service.py without --server starts a server; --duration stops it."""
        result = await deferToThread(run_example, "service", "--duration", "0.2")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertRegex(lines[0], r"^started nats-server on nats://127\.0\.0\.1:\d+$")
        self.assertRegex(lines[1], r"^service calc 1\.0\.0 running on nats://")
        self.assertEqual(lines[2:], ["service stopped after 0 requests (0 errors)"])
