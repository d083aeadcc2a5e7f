"""``txnats stream``, ``consumer`` and ``account``, run as a user runs them (the
command line's ``run_command``, in this process, on the test's reactor) against a real
``nats-server`` with JetStream: every verb, its ``--json`` output parsed, and the
errors users cause (a missing stream, bad arguments) as one line and a non-zero exit.

The helpers here (:func:`txnats_cli`, :func:`isolate`) serve the other
``test_cli_*`` files too.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from twisted.trial.unittest import TestCase

import txnats
from tests.support.servers import ServerPerClass
from tests.support.waits import reactor
from txnats.cli import run_command
from txnats.testing import NatsServer

#: Environment variables a user's shell may set that would change what a command
#: connects to; every test runs without them.
_ENVIRONMENT = ("NATS_URL", "NATS_CONTEXT", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN",
                "NATS_CREDS", "NATS_NKEY", "NATS_CERT", "NATS_KEY", "NATS_CA")


@dataclass
class Ran:
    """What a command did: its exit status, its stdout (text and bytes), its stderr."""

    code: int
    out: str
    raw: bytes
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


async def txnats_cli(*argv: str, stdin: bytes = b"") -> Ran:
    """Run ``txnats ARGV`` in this process; stdin, stdout and stderr replaced."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.StringIO()
    inp = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr, sys.stdin = out, err, inp
    try:
        code = await run_command(reactor, list(argv))
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
    buffer = out.buffer
    assert isinstance(buffer, io.BytesIO)
    raw = buffer.getvalue()
    return Ran(code, raw.decode("utf-8", "replace"), raw, err.getvalue())


def scratch(test: TestCase) -> str:
    """A new empty folder, removed when ``test`` ends."""
    folder = tempfile.mkdtemp(prefix="txnats-cli-")
    test.addCleanup(shutil.rmtree, folder, True)
    return folder


def isolate(test: TestCase) -> str:
    """Run ``test`` without the user's NATS environment and with a configuration
    folder of its own (``XDG_CONFIG_HOME`` and ``HOME``); return that folder."""
    home = scratch(test)
    saved = {k: os.environ.get(k) for k in (*_ENVIRONMENT, "XDG_CONFIG_HOME", "HOME")}

    def restore() -> None:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    test.addCleanup(restore)
    for k in _ENVIRONMENT:
        os.environ.pop(k, None)
    os.environ["HOME"] = home
    os.environ["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    return home


class JetStreamCLI(ServerPerClass):
    """A JetStream server for the class; ``cli(...)`` runs a command against it."""

    server_options = {"jetstream": True}
    timeout = 60

    def setUp(self) -> Any:
        result = super().setUp()
        isolate(self)  # type: ignore[arg-type]
        return result

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    async def cli(self, *argv: str, stdin: bytes = b"") -> Ran:
        """``txnats ARGV --server URL``."""
        return await txnats_cli(*argv, "--server", self.url, stdin=stdin)

    async def ok(self, *argv: str, stdin: bytes = b"") -> Ran:
        """``cli(ARGV)``, which must succeed."""
        ran = await self.cli(*argv, stdin=stdin)
        assert ran.code == 0, f"txnats {' '.join(argv)} exited {ran.code}: {ran.err}"
        return ran

    def assert_one_line_error(self, ran: Ran, code: int, *fragments: str) -> None:
        """The command failed with status ``code`` and one line on stderr holding
        every fragment, and no traceback."""
        test: Any = self
        test.assertEqual(ran.code, code, ran.err)
        lines = ran.err.strip().splitlines()
        test.assertEqual(len(lines), 1, ran.err)
        test.assertTrue(lines[0].startswith("txnats: error: "), lines[0])
        for fragment in fragments:
            test.assertIn(fragment, lines[0])
        test.assertNotIn("Traceback", ran.err)

    async def publish(self, *pairs: tuple[str, bytes], headers: Any = None) -> None:
        nc = await txnats.connect(reactor, self.url)
        try:
            js = nc.jetstream()
            for subject, data in pairs:
                await js.publish(subject, data, headers=headers)
        finally:
            await nc.close()


class StreamCommandTests(JetStreamCLI, TestCase):
    """``txnats stream ls|info|add|edit|rm|purge|get|view``."""

    async def test_add_ls_info(self) -> None:
        """add creates the stream the flags describe (durations and sizes in nats's
        units); ls lists it, --json as names, and leaves a key-value bucket's stream
        out unless --all; info shows it, --json as the server's JSON."""
        ran = await self.ok("stream", "add", "ADDED", "--subjects", "added.a,added.b",
                            "--subjects", "added.c", "--max-age", "7d", "--max-bytes", "1MiB",
                            "--storage", "m", "--retention", "work", "--metadata", "team=x",
                            "--description", "made by a test")
        self.assertIn("Information for Stream ADDED", ran.out)
        self.assertIn("Maximum Age: 7d", ran.out)
        await self.ok("kv", "add", "HIDDEN")
        ran = await self.ok("stream", "ls")
        self.assertRegex(ran.out, r"ADDED\s+made by a test")
        self.assertNotIn("KV_HIDDEN", ran.out)
        self.assertIn("KV_HIDDEN", (await self.ok("stream", "ls", "--all")).out)
        names = (await self.ok("stream", "ls", "--json")).json()
        self.assertIn("ADDED", names)
        self.assertNotIn("KV_HIDDEN", names)
        self.assertEqual((await self.ok("stream", "ls", "-n", "--subject", "added.b")).out,
                         "ADDED\n")
        info = (await self.ok("stream", "info", "ADDED", "--json")).json()
        cfg = info["config"]
        self.assertEqual(cfg["subjects"], ["added.a", "added.b", "added.c"])
        self.assertEqual(cfg["max_age"], 7 * 86400 * 10**9)
        self.assertEqual(cfg["max_bytes"], 1024 * 1024)
        self.assertEqual((cfg["storage"], cfg["retention"]), ("memory", "workqueue"))
        self.assertEqual(cfg["metadata"]["team"], "x")
        self.assertTrue(cfg["allow_direct"])
        text = (await self.ok("stream", "info", "ADDED", "--state")).out
        self.assertIn("Messages: 0", text)
        self.assertNotIn("Configuration", text)

    async def test_add_from_config_file(self) -> None:
        """add --config reads the server's JSON (as nats writes it); flags given too
        change it; a file naming another stream is refused with status 2."""
        path = os.path.join(scratch(self), "config.json")
        with open(path, "w") as f:
            json.dump({"name": "FROMFILE", "subjects": ["fromfile.>"], "max_msgs": 10}, f)
        await self.ok("stream", "add", "--config", path, "--max-msgs-per-subject", "2")
        cfg = (await self.ok("stream", "info", "FROMFILE", "--json")).json()["config"]
        self.assertEqual((cfg["max_msgs"], cfg["max_msgs_per_subject"]), (10, 2))
        ran = await self.cli("stream", "add", "OTHER", "--config", path)
        self.assert_one_line_error(ran, 2, "configures stream 'FROMFILE', not 'OTHER'")

    async def test_edit(self) -> None:
        """edit changes what the flags say and nothing else; --dry-run shows the
        change and makes none; without --force and without a terminal it refuses,
        changing nothing; with no change to make it is a usage error."""
        await self.ok("stream", "add", "EDITED", "--subjects", "edited.>", "--max-msgs", "5")
        ran = await self.ok("stream", "edit", "EDITED", "--max-msgs", "7", "--dry-run")
        self.assertIn("max_msgs: 5 -> 7", ran.err)
        ran = await self.cli("stream", "edit", "EDITED", "--max-msgs", "7")
        self.assert_one_line_error(ran, 1, "without a terminal", "--force")
        cfg = (await self.ok("stream", "info", "EDITED", "--json")).json()["config"]
        self.assertEqual(cfg["max_msgs"], 5)
        ran = await self.ok("stream", "edit", "EDITED", "--max-msgs", "7",
                            "--description", "now seven", "-f", "--json")
        cfg = ran.json()["config"]
        self.assertEqual((cfg["max_msgs"], cfg["description"]), (7, "now seven"))
        self.assertEqual(cfg["subjects"], ["edited.>"])
        ran = await self.cli("stream", "edit", "EDITED", "--max-msgs", "7", "-f")
        self.assert_one_line_error(ran, 2, "no changes")

    async def test_purge_and_rm(self) -> None:
        """purge --subject removes that subject's messages and says how many; rm
        removes the stream; both refuse without --force off a terminal; a missing
        stream is one line naming the verb, status 1."""
        await self.ok("stream", "add", "PURGED", "--subjects", "purged.*")
        await self.publish(("purged.a", b"1"), ("purged.a", b"2"), ("purged.b", b"3"))
        ran = await self.cli("stream", "purge", "PURGED")
        self.assert_one_line_error(ran, 1, "without a terminal")
        ran = await self.ok("stream", "purge", "PURGED", "--subject", "purged.a", "-f", "--json")
        self.assertIn("Purged 2 messages", ran.err)
        self.assertEqual(ran.json()["state"]["messages"], 1)
        await self.ok("stream", "purge", "PURGED", "-f")
        self.assertEqual(
            (await self.ok("stream", "info", "PURGED", "--json")).json()["state"]["messages"], 0)
        self.assert_one_line_error(await self.cli("stream", "rm", "PURGED"), 1, "--force")
        ran = await self.ok("stream", "rm", "PURGED", "-f")
        self.assertIn("Deleted stream PURGED", ran.err)
        self.assert_one_line_error(await self.cli("stream", "rm", "PURGED", "-f"), 1,
                                   "stream rm:", "stream not found")
        self.assert_one_line_error(await self.cli("stream", "info", "PURGED"), 1,
                                   "stream info:", "stream not found")

    async def test_get(self) -> None:
        """get prints a message by sequence, or the last on a subject (-S), with its
        headers; --raw the data only; --json parses; a missing message and a missing
        choice between the two are errors of one line."""
        await self.ok("stream", "add", "GOT", "--subjects", "got.*")
        await self.publish(("got.a", b"first"), ("got.b", b"second"), headers={"X-K": "v"})
        ran = await self.ok("stream", "get", "GOT", "1")
        self.assertIn("Item: GOT#1", ran.out)
        self.assertIn("on Subject got.a", ran.out)
        self.assertIn("X-K: v", ran.out)
        self.assertTrue(ran.out.rstrip().endswith("first"))
        self.assertEqual((await self.ok("stream", "get", "GOT", "-S", "got.b", "--raw")).raw,
                         b"second\n")
        msg = (await self.ok("stream", "get", "GOT", "2", "--json")).json()
        self.assertEqual((msg["seq"], msg["subject"], msg["data"]), (2, "got.b", "second"))
        self.assertEqual(msg["headers"], {"X-K": ["v"]})
        self.assert_one_line_error(await self.cli("stream", "get", "GOT", "9"), 1,
                                   "stream get:", "no message found")
        self.assert_one_line_error(await self.cli("stream", "get", "GOT"), 2,
                                   "--last-for")
        self.assert_one_line_error(await self.cli("stream", "get", "GOT", "x"), 2,
                                   "not an integer")

    async def test_view(self) -> None:
        """view prints every message in order and stops at the last one; --subject
        filters, --id starts later, --count stops early, --json prints a line per
        message; --since 1h includes them all; an empty stream says so."""
        await self.ok("stream", "add", "VIEWED", "--subjects", "viewed.*")
        self.assertIn("No messages", (await self.ok("stream", "view", "VIEWED")).err)
        await self.publish(*((f"viewed.{'ab'[i % 2]}", f"m{i}".encode()) for i in range(6)))
        ran = await self.ok("stream", "view", "VIEWED")
        self.assertEqual([line.split()[0] for line in ran.out.splitlines()
                          if line.startswith("[")], [f"[{i}]" for i in range(1, 7)])
        self.assertIn("6 messages shown", ran.err)
        ran = await self.ok("stream", "view", "VIEWED", "--subject", "viewed.b", "--raw")
        self.assertEqual(ran.out.split(), ["m1", "m3", "m5"])
        ran = await self.ok("stream", "view", "VIEWED", "--id", "4", "--raw")
        self.assertEqual(ran.out.split(), ["m3", "m4", "m5"])
        ran = await self.ok("stream", "view", "VIEWED", "--count", "2", "--json")
        rows = ran.json_lines()
        self.assertEqual([(r["seq"], r["subject"], r["data"]) for r in rows],
                         [(1, "viewed.a", "m0"), (2, "viewed.b", "m1")])
        ran = await self.ok("stream", "view", "VIEWED", "--since", "1h", "--raw")
        self.assertEqual(len(ran.out.split()), 6)
        ran = await self.ok("stream", "view", "VIEWED", "--since", "0s")
        self.assertIn("No messages", ran.err)
        started = reactor.seconds()
        ran = await self.ok("stream", "view", "VIEWED", "--subject", "viewed.none")
        self.assertIn("No messages", ran.err)
        self.assertLess(reactor.seconds() - started, 2.5)  # not a wait for a timeout (5 s)
        self.assert_one_line_error(
            await self.cli("stream", "view", "VIEWED", "--id", "2", "--since", "1h"), 2,
            "--id or --since")
        self.assert_one_line_error(await self.cli("stream", "view", "NOPE"), 1,
                                   "stream not found")

    async def test_bad_arguments(self) -> None:
        """Bad values are usage errors of one line, status 2, naming the flag."""
        for argv, fragment in (
            (("stream", "add", "BAD", "--max-age", "soon"), "not a duration"),
            (("stream", "add", "BAD", "--max-bytes", "lots"), "not a size"),
            (("stream", "add", "BAD", "--storage", "disk"), "invalid choice"),
            (("stream", "frobnicate"), "invalid choice"),
            (("stream", "add", "BAD", "--metadata", "novalue"), "KEY=VALUE"),
        ):
            self.assert_one_line_error(await self.cli(*argv), 2, fragment)

    async def test_no_jetstream(self) -> None:
        """Against a server without JetStream, a stream command fails with one line
        saying so."""
        plain = NatsServer().start()
        self.addCleanup(plain.stop)
        ran = await txnats_cli("stream", "ls", "--server", plain.url, "--timeout", "1")
        self.assert_one_line_error(ran, 1, "stream ls:", "JetStream")


class ConsumerCommandTests(JetStreamCLI, TestCase):
    """``txnats consumer ls|info|add|rm|next``."""

    async def stream(self, name: str, count: int = 3) -> None:
        await self.ok("stream", "add", name, "--subjects", f"{name.lower()}.*")
        await self.publish(*((f"{name.lower()}.new", f"order {i}".encode())
                             for i in range(1, count + 1)))

    async def test_add_ls_info_rm(self) -> None:
        """add makes a pull consumer with explicit acks by default and the flags'
        settings (nats's names and units); ls lists it, --json as names; info --json
        is the server's JSON; rm removes it, missing ones are one-line errors."""
        await self.stream("CADD")
        ran = await self.ok("consumer", "add", "CADD", "WORKER", "--filter", "cadd.new",
                            "--max-deliver", "5", "--wait", "10s", "--deliver", "2",
                            "--description", "does work")
        self.assertIn("Information for Consumer CADD > WORKER", ran.out)
        self.assertIn("Pull Mode: true", ran.out)
        info = (await self.ok("consumer", "info", "CADD", "WORKER", "--json")).json()
        cfg = info["config"]
        self.assertEqual((cfg["ack_policy"], cfg["ack_wait"], cfg["max_deliver"]),
                         ("explicit", 10 * 10**9, 5))
        self.assertEqual((cfg["deliver_policy"], cfg["opt_start_seq"]), ("by_start_sequence", 2))
        self.assertEqual(cfg["filter_subject"], "cadd.new")
        self.assertEqual(info["num_pending"], 2)
        await self.ok("consumer", "add", "CADD", "PUSHED", "--target", "deliver.cadd")
        ran = await self.ok("consumer", "ls", "CADD")
        self.assertRegex(ran.out, r"PUSHED\s+Push")
        self.assertRegex(ran.out, r"WORKER\s+Pull\s+does work")
        self.assertEqual((await self.ok("consumer", "ls", "CADD", "--json")).json(),
                         ["PUSHED", "WORKER"])
        self.assert_one_line_error(await self.cli("consumer", "rm", "CADD", "WORKER"), 1,
                                   "--force")
        await self.ok("consumer", "rm", "CADD", "WORKER", "-f")
        self.assertEqual((await self.ok("consumer", "ls", "CADD", "-n")).out, "PUSHED\n")
        self.assert_one_line_error(await self.cli("consumer", "info", "CADD", "WORKER"), 1,
                                   "consumer info:", "consumer not found")
        self.assert_one_line_error(await self.cli("consumer", "ls", "NOSTREAM"), 1,
                                   "stream not found")
        self.assert_one_line_error(await self.cli("consumer", "add", "CADD"), 2,
                                   "consumer's name")

    async def test_ephemeral_and_backoff(self) -> None:
        """--ephemeral makes a consumer the server names; --backoff linear makes the
        steps from --backoff-min to --backoff-max, with one more delivery than steps."""
        await self.stream("CEPH", 0)
        info = (await self.ok("consumer", "add", "CEPH", "--ephemeral", "--json")).json()
        self.assertNotIn("durable_name", info["config"])
        self.assertTrue(info["name"])
        info = (await self.ok("consumer", "add", "CEPH", "SLOW", "--backoff", "linear",
                              "--backoff-steps", "3", "--backoff-min", "1s",
                              "--backoff-max", "3s", "--json")).json()
        self.assertEqual(info["config"]["backoff"], [10**9, 2 * 10**9, 3 * 10**9])
        self.assertEqual(info["config"]["max_deliver"], 4)

    async def test_next(self) -> None:
        """next takes --count messages, prints and acknowledges each; --no-ack leaves
        them pending; --json gives a line per message; with nothing left it fails
        with one line; a push consumer is refused."""
        await self.stream("CNEXT", 4)
        await self.ok("consumer", "add", "CNEXT", "W", "--wait", "30s")
        ran = await self.ok("consumer", "next", "CNEXT", "W", "--count", "2")
        self.assertEqual(ran.out.count("Acknowledged message"), 2)
        self.assertIn("subj: cnext.new / tries: 1 / cons seq: 1 / str seq: 1", ran.out)
        info = (await self.ok("consumer", "info", "CNEXT", "W", "--json")).json()
        self.assertEqual((info["ack_floor"]["stream_seq"], info["num_ack_pending"]), (2, 0))
        ran = await self.ok("consumer", "next", "CNEXT", "W", "--no-ack", "--json")
        (row,) = ran.json_lines()
        self.assertEqual((row["stream_seq"], row["data"], row["outcome"]), (3, "order 3", ""))
        info = (await self.ok("consumer", "info", "CNEXT", "W", "--json")).json()
        self.assertEqual(info["num_ack_pending"], 1)
        ran = await self.ok("consumer", "next", "CNEXT", "W", "--raw", "--count", "5",
                            "--timeout", "0.5")
        self.assertEqual(ran.raw, b"order 4\n")
        self.assertIn("1 of 5 messages came", ran.err)
        ran = await self.cli("consumer", "next", "CNEXT", "W", "--timeout", "0.3")
        self.assert_one_line_error(ran, 1, "no message from CNEXT > W")
        await self.ok("consumer", "add", "CNEXT", "P", "--target", "deliver.cnext")
        self.assert_one_line_error(await self.cli("consumer", "next", "CNEXT", "P"), 1,
                                   "push consumer")


class AccountCommandTests(JetStreamCLI, TestCase):
    """``txnats account info``."""

    async def test_info(self) -> None:
        """info shows the connection and the JetStream usage; --json gives the same
        as data (the streams counted, the server's version, the account)."""
        await self.ok("stream", "add", "ACCT", "--subjects", "acct.>")
        ran = await self.ok("account", "info")
        self.assertIn("Connected URL: " + self.url, ran.out)
        self.assertIn("JetStream Account Information", ran.out)
        data = (await self.ok("account", "info", "--json")).json()
        self.assertGreaterEqual(data["jetstream"]["streams"], 1)
        self.assertEqual(data["connection"]["connected_url"], self.url)
        self.assertTrue(data["connection"]["server_version"])
        self.assertEqual(data["user"]["account"], "$G")

    async def test_without_jetstream(self) -> None:
        """Without JetStream it says JetStream is not enabled (null in JSON) and
        succeeds: the rest of the information stands."""
        plain = NatsServer().start()
        self.addCleanup(plain.stop)
        ran = await txnats_cli("account", "info", "--server", plain.url, "--timeout", "1")
        self.assertEqual(ran.code, 0, ran.err)
        self.assertIn("not enabled for this account", ran.out)
        ran = await txnats_cli("account", "info", "--json", "--server", plain.url,
                               "--timeout", "1")
        self.assertIsNone(ran.json()["jetstream"])
