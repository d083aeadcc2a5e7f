"""Configuration contexts (ADR-21) in the command line: ``txnats context
ls|show|select|unselect|add|rm`` reading and writing the files the ``nats`` CLI keeps,
``--context``, ``NATS_CONTEXT`` and ``NATS_URL`` as ``nats`` reads them, connecting
through a context; then the command line as a user meets it in a subprocess (errors
as one line, exit statuses, progress bars on a terminal).

Every test has a configuration folder of its own (``XDG_CONFIG_HOME`` and ``HOME``):
the real home is never read or written.
"""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from tests.support.credentials import KeyPair
from tests.support.servers import ServerPerClass
from tests.test_cli_jetstream import JetStreamCLI, Ran, isolate, scratch, txnats_cli
from txnats.cli import build_parser
from txnats.cli._common import CLIError
from txnats.cli._connection import connect_kwargs
from txnats.cli._context import FIELDS, resolve
from txnats.testing import NatsServer

ROOT = Path(__file__).resolve().parent.parent

#: A context as ``nats context add`` writes it (every field, an empty one included),
#: with a field a newer ``nats`` might add.
NATSCLI_CONTEXT = {
    "description": "written by nats", "url": "nats://demo.nats.io:4222", "socks_proxy": "",
    "token": "", "user": "", "password": "", "creds": "", "nkey": "", "cert": "", "key": "",
    "ca": "", "nsc": "", "jetstream_domain": "hub", "jetstream_api_prefix": "",
    "jetstream_event_prefix": "", "inbox_prefix": "_INBOX.me", "user_jwt": "",
    "user_seed": "", "color_scheme": "cyan", "tls_first": False, "windows_cert_store": "",
    "windows_cert_match_by": "", "windows_cert_match": "", "windows_ca_certs_match": None,
    "some_future_field": {"kept": True},
}


class ContextFilesTests(TestCase):
    """The context files, as ``nats`` lays them out, read and written."""

    def setUp(self) -> None:
        self.home = isolate(self)
        self.config = Path(self.home) / ".config" / "nats"

    def write(self, name: str, data: dict[str, Any]) -> Path:
        folder = self.config / "context"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(data))
        return path

    async def ok(self, *argv: str) -> Ran:
        ran = await txnats_cli(*argv)
        self.assertEqual(ran.code, 0, ran.err)
        return ran

    async def test_add_writes_what_nats_reads(self) -> None:
        """add writes $XDG_CONFIG_HOME/nats/context/NAME.json with every field nats
        writes (unset ones empty), readable by its owner only, in folders of the
        owner only."""
        await self.ok("context", "add", "hub", "-s", "nats://a:1,nats://b:2",
                      "--user", "bob", "--password", "pw", "--js-domain", "leaf",
                      "--description", "the hub", "--tls-first")
        path = self.config / "context" / "hub.json"
        data = json.loads(path.read_text())
        self.assertEqual(list(data), list(FIELDS))
        self.assertEqual((data["url"], data["user"], data["password"], data["jetstream_domain"],
                          data["description"], data["tls_first"], data["creds"]),
                         ("nats://a:1,nats://b:2", "bob", "pw", "leaf", "the hub", True, ""))
        self.assertEqual(stat.S_IMODE(path.stat().st_mode), 0o600)
        for folder in (self.config, self.config / "context"):
            self.assertEqual(stat.S_IMODE(folder.stat().st_mode), 0o700)
        self.assertFalse((self.config / "context.txt").exists())  # not selected

    async def test_home_without_xdg(self) -> None:
        """Without XDG_CONFIG_HOME the files are under ~/.config, as nats keeps them."""
        del os.environ["XDG_CONFIG_HOME"]
        await self.ok("context", "add", "plain", "--select")
        self.assertTrue((self.config / "context" / "plain.json").is_file())
        self.assertEqual((self.config / "context.txt").read_text(), "plain")

    async def test_reads_a_file_nats_wrote(self) -> None:
        """A context nats wrote is listed and shown; changing it with add keeps the
        fields txnats does not know."""
        self.write("demo", NATSCLI_CONTEXT)
        (self.config / "context" / "empty.json").write_text("")  # skipped, as nats does
        self.assertEqual((await self.ok("context", "ls", "--names")).out, "demo\n")
        self.assertRegex((await self.ok("context", "ls")).out, r"demo\s+written by nats")
        shown = (await self.ok("context", "show", "demo", "--json")).json()
        self.assertEqual((shown["name"], shown["jetstream_domain"], shown["inbox_prefix"]),
                         ("demo", "hub", "_INBOX.me"))
        await self.ok("context", "add", "demo", "--description", "changed by txnats")
        data = json.loads((self.config / "context" / "demo.json").read_text())
        self.assertEqual(data["description"], "changed by txnats")
        self.assertEqual(data["url"], "nats://demo.nats.io:4222")
        self.assertEqual(data["some_future_field"], {"kept": True})
        self.assertEqual(data["color_scheme"], "cyan")

    async def test_select_unselect(self) -> None:
        """select writes context.txt (the one before goes to previous-context.txt, as
        nats keeps it), ls marks the selected one, show shows it by default;
        selecting an unknown context fails and changes nothing; unselect clears."""
        for name in ("one", "two"):
            await self.ok("context", "add", name, "--description", f"context {name}")
        await self.ok("context", "select", "one")
        await self.ok("context", "select", "two")
        self.assertEqual((self.config / "context.txt").read_text(), "two")
        self.assertEqual((self.config / "previous-context.txt").read_text(), "one")
        self.assertRegex((await self.ok("context", "ls")).out, r"two\*\s+context two")
        self.assertIn('Context "two"', (await self.ok("context", "show")).out)
        ran = await txnats_cli("context", "select", "three")
        self.assertEqual((ran.code, ran.err.strip()), (1, "txnats: error: unknown context 'three'"))
        self.assertEqual((self.config / "context.txt").read_text(), "two")
        await self.ok("context", "unselect")
        ran = await txnats_cli("context", "show")
        self.assertEqual(ran.code, 2)
        self.assertIn("no context selected", ran.err)

    async def test_secrets_never_printed(self) -> None:
        """The password and the token are masked in show (text and JSON) and ls
        --json, never printed."""
        await self.ok("context", "add", "secret", "--user", "bob", "--password", "hunter2pw",
                      "--select")
        self.write("tok", {**NATSCLI_CONTEXT, "token": "t0ken-value"})
        outputs = [
            await self.ok("context", "show", "secret"),
            await self.ok("context", "show", "secret", "--json"),
            await self.ok("context", "show", "tok"),
            await self.ok("context", "show", "tok", "--json"),
            await self.ok("context", "ls", "--json"),
            await self.ok("context", "select", "secret"),
        ]
        for ran in outputs:
            self.assertNotIn("hunter2pw", ran.out + ran.err)
            self.assertNotIn("t0ken-value", ran.out + ran.err)
        self.assertIn("Password: ********", outputs[0].out)
        self.assertEqual(outputs[1].json()["password"], "********")
        self.assertIn("Token: ********", outputs[2].out)
        self.assertEqual(outputs[3].json()["token"], "********")

    async def test_rm(self) -> None:
        """rm removes a context; the selected one only with --force (which unselects
        it); an unknown one is an error; without --force off a terminal it asks, so
        refuses."""
        await self.ok("context", "add", "gone", "--select")
        await self.ok("context", "add", "kept")
        ran = await txnats_cli("context", "rm", "gone")
        self.assertEqual(ran.code, 1)
        self.assertIn("is selected", ran.err)
        await self.ok("context", "rm", "gone", "-f")
        self.assertFalse((self.config / "context" / "gone.json").exists())
        self.assertEqual((self.config / "context.txt").read_text(), "")
        ran = await txnats_cli("context", "rm", "kept")
        self.assertEqual(ran.code, 1)
        self.assertIn("--force", ran.err)
        self.assertTrue((self.config / "context" / "kept.json").exists())
        self.assertEqual((await txnats_cli("context", "rm", "nothere", "-f")).code, 1)

    async def test_bad_names_and_files(self) -> None:
        """A name with '/', '\\' or '..' is a usage error; a context file that is not
        JSON is one line naming it."""
        for bad in ("../escape", "a/b", "a\\b", ".."):
            ran = await txnats_cli("context", "add", bad)
            self.assertEqual(ran.code, 2, bad)
            self.assertIn("bad context name", ran.err)
        (self.config / "context").mkdir(parents=True)
        (self.config / "context" / "broken.json").write_text("{not json")
        ran = await txnats_cli("context", "show", "broken")
        self.assertEqual(ran.code, 1)
        self.assertIn("is not valid JSON", ran.err)
        self.assertEqual(len(ran.err.strip().splitlines()), 1)


class ResolveTests(TestCase):
    """Which settings a command connects with: its flags, then the environment,
    then the context, as nats decides."""

    def setUp(self) -> None:
        self.home = isolate(self)
        self.folder = Path(self.home) / ".config" / "nats" / "context"
        self.folder.mkdir(parents=True)
        (self.folder / "ctx.json").write_text(json.dumps(
            {**NATSCLI_CONTEXT, "url": "nats://from-context:1", "user": "cu", "password": "cp"}
        ))
        (self.folder / "other.json").write_text(json.dumps(
            {"url": "nats://other:2", "token": "env://TXNATS_TEST_TOKEN"}
        ))
        (Path(self.home) / ".config" / "nats" / "context.txt").write_text("ctx")

    def resolve(self, *flags: str) -> Any:
        return resolve(build_parser().parse_args(["stream", "ls", *flags]))

    def test_selected_context(self) -> None:
        """Without flags, the selected context gives the servers, the user, the
        JetStream domain and the inbox prefix."""
        s = self.resolve()
        self.assertEqual(s.servers, ["nats://from-context:1"])
        self.assertEqual((s.connect["user"], s.connect["password"]), ("cu", "cp"))
        self.assertEqual((s.js_domain, s.connect["inbox_prefix"], s.context),
                         ("hub", "_INBOX.me", "ctx"))

    def test_precedence(self) -> None:
        """--server beats NATS_URL, which beats the context's url; --context beats
        NATS_CONTEXT, which beats the selected one; --no-context uses none."""
        os.environ["NATS_URL"] = "nats://from-env:3"
        self.assertEqual(self.resolve().servers, ["nats://from-env:3"])
        self.assertEqual(self.resolve("-s", "nats://flag:4").servers, ["nats://flag:4"])
        os.environ["NATS_CONTEXT"] = "other"
        os.environ["TXNATS_TEST_TOKEN"] = "tok"
        self.addCleanup(os.environ.pop, "TXNATS_TEST_TOKEN", None)
        s = self.resolve()
        self.assertEqual((s.context, s.connect.get("token")), ("other", "tok"))
        self.assertEqual(self.resolve("--context", "ctx").context, "ctx")
        del os.environ["NATS_URL"]
        s = self.resolve("--no-context")
        self.assertEqual((s.context, s.servers, s.connect), (None, ["nats://127.0.0.1:4222"], {}))

    def test_flags_over_context(self) -> None:
        """A user flag replaces the context's user and password; --password alone
        goes with the context's user; --js-domain replaces the context's."""
        s = self.resolve("--user", "fu", "--password", "fp", "--js-domain", "edge")
        self.assertEqual((s.connect["user"], s.connect["password"], s.js_domain),
                         ("fu", "fp", "edge"))
        s = self.resolve("--password", "only")
        self.assertEqual((s.connect["user"], s.connect["password"]), ("cu", "only"))
        os.environ["NATS_USER"] = "eu"
        self.assertEqual(self.resolve().connect["user"], "eu")

    def test_context_given_as_a_file(self) -> None:
        """--context PATH.json reads that file (nats takes a path too)."""
        path = Path(self.home) / "elsewhere.json"
        path.write_text(json.dumps({"url": "nats://file:5"}))
        s = self.resolve("--context", str(path))
        self.assertEqual((s.servers, s.context), (["nats://file:5"], str(path)))

    def test_refused(self) -> None:
        """An unknown context, an nsc lookup, an op:// secret, an unset env:// one and
        a missing credentials file are each a clear error, never a silent change of
        how the connection is made."""
        cases = [
            ({"--context": "nope"}, {}, "unknown context 'nope'"),
            ({}, {"nsc": "nsc://op/acct/user"}, "nsc lookups are not supported"),
            ({}, {"password": "op://vault/item/pw"}, "op:// references are not supported"),
            ({}, {"token": "env://TXNATS_UNSET_VARIABLE"}, "TXNATS_UNSET_VARIABLE is not set"),
            ({}, {"creds": "~/missing.creds"}, "--creds: no such file"),
        ]
        for flags, fields, message in cases:
            (self.folder / "bad.json").write_text(json.dumps({"url": "nats://x:1", **fields}))
            argv = ["stream", "ls", "--context", flags.get("--context", "bad")]
            with self.assertRaises(CLIError) as caught:
                connect_kwargs(build_parser().parse_args(argv))
            self.assertIn(message, str(caught.exception))
        with self.assertRaises(CLIError) as caught:
            connect_kwargs(build_parser().parse_args(["stream", "ls", "--context", "bad"]))
        self.assertIn(str(Path(self.home) / "missing.creds"), str(caught.exception))

    def test_credential_flags_reach_connect(self) -> None:
        """--creds and --nkey become txnats.connect's options (they were refused as
        "not supported yet" since connect() took its options as keywords)."""
        creds = Path(self.home) / "u.creds"
        creds.write_text("x")
        kwargs = connect_kwargs(build_parser().parse_args(
            ["pub", "s", "--no-context", "--creds", str(creds), "--nkey", str(creds)]))
        self.assertEqual((kwargs["user_credentials"], kwargs["nkeys_seed_file"]),
                         (str(creds), str(creds)))


class ConnectThroughContextTests(ServerPerClass, TestCase):
    """A context carries a server's address and credentials to every command."""

    server_options = {"config": 'authorization { user: "bob", password: "s3cret-pw" }\n'
                      "jetstream: enabled\n", "jetstream": True}
    timeout = 60

    def setUp(self) -> Any:
        result = super().setUp()
        isolate(self)
        return result

    async def test_selected_context_connects(self) -> None:
        """With a context selected, commands connect as it says, no flags needed;
        without it the server refuses (one line, the password not in it)."""
        assert self.server is not None
        ran = await txnats_cli("context", "add", "auth", "--server", self.server.url,
                               "--user", "bob", "--password", "s3cret-pw")
        self.assertEqual(ran.code, 0, ran.err)
        ran = await txnats_cli("stream", "ls", "--context", "auth")
        self.assertEqual(ran.code, 0, ran.err)
        os.environ["NATS_CONTEXT"] = "auth"
        ran = await txnats_cli("stream", "add", "VIACTX", "--subjects", "viactx")
        self.assertEqual(ran.code, 0, ran.err)
        del os.environ["NATS_CONTEXT"]
        await txnats_cli("context", "select", "auth")
        ran = await txnats_cli("pub", "viactx", "hi")
        self.assertEqual(ran.code, 0, ran.err)
        ran = await txnats_cli("stream", "info", "VIACTX", "--json")
        self.assertEqual(ran.json()["state"]["messages"], 1)
        ran = await txnats_cli("stream", "ls", "--no-context", "-s", self.server.url)
        self.assertEqual(ran.code, 1)
        self.assertIn("uthorization", ran.err)
        self.assertNotIn("s3cret-pw", ran.err)


class NKeyFlagTests(TestCase):
    """``--nkey`` reaches the connection (it was refused as not supported)."""

    timeout = 60

    async def test_nkey_seed_file(self) -> None:
        """pub --nkey SEEDFILE authenticates to a server that wants that NKey."""
        isolate(self)
        user = KeyPair.user()
        server = NatsServer(
            config=f'authorization {{ users = [{{nkey: "{user.public}"}}] }}\n'
        ).start()
        self.addCleanup(server.stop)
        seed = os.path.join(scratch(self), "user.nk")
        with open(seed, "w") as f:
            f.write(user.seed)
        ran = await txnats_cli("pub", "s", "hi", "-s", server.url, "--nkey", seed)
        self.assertEqual(ran.code, 0, ran.err)
        self.assertIn("Published 1 message", ran.err)


# ====================================================================== as a user runs it
def _env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["HOME"] = home
    env["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    return env


def _run(home: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnats", *argv], capture_output=True, text=True,
        timeout=60, cwd=ROOT, env=_env(home), stdin=subprocess.DEVNULL,
    )


def _on_terminal(home: str, *argv: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    """Run ``txnats ARGV`` with stderr on a pseudo-terminal (stdout a pipe): its
    status, stdout and what the terminal showed. Bounded: killed after 60 s."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "txnats", *argv], stdout=subprocess.PIPE, stderr=slave,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, cwd=ROOT,
        env=_env(home),
    )
    os.close(slave)
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    assert proc.stdout is not None
    screen, out = bytearray(), bytearray()
    open_fds = {master: screen, proc.stdout.fileno(): out}
    deadline = time.monotonic() + 60
    try:
        while open_fds and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_fds), [], [], 1)
            for fd in ready:
                try:
                    chunk = os.read(fd, 1 << 20)
                except OSError:  # EIO: the terminal's last writer closed it
                    chunk = b""
                if chunk:
                    open_fds[fd] += chunk
                else:
                    del open_fds[fd]
        code = proc.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, bytes(out), bytes(screen)


class AsAUserRunsItTests(JetStreamCLI, TestCase):
    """``python -m txnats ...`` in a subprocess: what a user sees."""

    def setUp(self) -> Any:
        result = super().setUp()
        self.home = os.environ["HOME"]
        return result

    async def test_errors_are_one_line(self) -> None:
        """A missing stream, a missing argument, a bad flag, an unknown context: one
        line on stderr, no traceback, status 1 for failures and 2 for usage."""
        for argv, code, fragment in (
            (("stream", "info", "NOPE", "-s", self.url), 1, "stream info: stream not found"),
            (("kv", "get", "NOBUCKET", "k", "-s", self.url), 1, "no key-value bucket"),
            (("consumer", "next", "S"), 2, "the following arguments are required"),
            (("stream", "add", "S", "--max-age", "x", "-s", self.url), 2, "not a duration"),
            (("stream", "ls", "--context", "nope"), 1, "unknown context 'nope'"),
            (("obj", "get", "B", "o", "-s", "nats://127.0.0.1:1", "--connect-timeout", "0.5"),
             1, "txnats: error:"),
        ):
            ran = await deferToThread(_run, self.home, *argv)
            self.assertEqual(ran.returncode, code, (argv, ran.stderr))
            lines = ran.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, (argv, ran.stderr))
            self.assertTrue(lines[0].startswith("txnats: error: "), lines)
            self.assertIn(fragment, lines[0])

    async def test_progress_bars_on_a_terminal(self) -> None:
        """obj put and get and stream view draw a bar on stderr when it is a
        terminal and the output goes elsewhere; --json, --no-progress and a stderr
        that is no terminal draw none."""
        await self.ok("obj", "add", "BARS")
        data = os.urandom(2_000_000)
        path = os.path.join(scratch(self), "big.bin")
        with open(path, "wb") as f:
            f.write(data)
        code, _, screen = await deferToThread(
            _on_terminal, self.home, "obj", "put", "BARS", path, "--name", "big", "-s", self.url)
        self.assertEqual(code, 0, screen)
        self.assertIn(b"put ", screen)
        self.assertIn(b"100.0% 1.9 MiB / 1.9 MiB", screen)
        code, out, screen = await deferToThread(
            _on_terminal, self.home, "obj", "get", "BARS", "big", "-O", "-", "-s", self.url)
        self.assertEqual((code, out), (0, data))
        self.assertIn(b"get ", screen)
        self.assertIn(b"100.0%", screen)
        code, out, screen = await deferToThread(
            _on_terminal, self.home, "obj", "get", "BARS", "big", "-O", "-", "--no-progress",
            "-s", self.url)
        self.assertEqual((code, out), (0, data))
        self.assertNotIn(b"[#", screen)
        code, _, screen = await deferToThread(
            _on_terminal, self.home, "obj", "put", "BARS", path, "--name", "big", "-f",
            "--json", "-s", self.url)
        self.assertEqual(code, 0)
        self.assertNotIn(b"[#", screen)
        await self.ok("stream", "add", "BARVIEW", "--subjects", "barview")
        await self.publish(*(("barview", b"x") for _ in range(50)))
        code, out, screen = await deferToThread(
            _on_terminal, self.home, "stream", "view", "BARVIEW", "--raw", "-s", self.url)
        self.assertEqual((code, out), (0, b"x\n" * 50))
        self.assertIn(b"view ", screen)
        self.assertIn(b"100.0% 50/50", screen)
        ran = await deferToThread(_run, self.home, "stream", "view", "BARVIEW", "-s", self.url)
        self.assertNotIn("\r", ran.stderr)  # stderr a pipe: no bar
