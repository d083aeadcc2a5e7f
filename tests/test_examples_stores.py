"""The store examples (examples/object_stream.py, examples/kv_watch.py) run as a user
would run them, each starting its own nats-server, and print what they promise."""

from __future__ import annotations

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.test_examples import RUN_TIMEOUT, run_example


class StoreExampleTests(TestCase):
    timeout = RUN_TIMEOUT + 30

    async def example(self, name: str, *args: str) -> list[str]:
        result = await deferToThread(run_example, name, *args)
        self.assertEqual(
            result.returncode, 0,
            f"{name} exited {result.returncode}\nstdout:\n{result.stdout}\n"
            f"stderr:\n{result.stderr}",
        )
        return result.stdout.splitlines()

    async def test_object_stream(self) -> None:
        """A file goes in and comes back out whole (digest checked), then streams."""
        lines = await self.example("object_stream", "--size-mib", "4")
        self.assertRegex(lines[0], r"^put 4 MiB in 32 chunks")
        self.assertIn("SHA-256 matches: True", lines)
        self.assertEqual(lines[-1], "streamed 32 chunks, 4194304 bytes")

    async def test_kv_watch(self) -> None:
        """The watcher sees values, the initial-values marker, a delete, a TTL expiry
        marker, and a resumed watcher misses nothing."""
        lines = await self.example("kv_watch")
        self.assertEqual(lines[0], "PUT   config.color = b'blue' (revision 1)")
        self.assertEqual(lines[1], "-- initial values done --")
        self.assertEqual(lines[3], "DEL   config.color = b'' (revision 3)")
        self.assertEqual(lines[5], "PURGE config.session = b'' (revision 5)")
        self.assertEqual(lines[7], "PUT   config.color = b'red' (revision 6)")
        self.assertEqual(lines[-1], "keys: ['config.color']")
