"""A peer process (a nats-py script) the interop tests run and read."""

from __future__ import annotations

import json

from twisted.internet import defer, reactor
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

__all__ = ["WAIT", "Peer"]

#: Seconds any one wait (a peer getting ready or exiting, a message) may take.
WAIT = 20.0


class Peer(ProcessProtocol):
    """A running ``interop_peer.py``: its JSON output lines, ready state and exit code."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.out: list[dict] = []
        self.err = b""
        self.ready = False
        self.ended = False
        self.exit_code: int | None = None
        self._buf = b""
        self._waiters: list[tuple[object, defer.Deferred]] = []

    # ProcessProtocol ---------------------------------------------------------
    def outReceived(self, data: bytes) -> None:
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            if line == b"ready":
                self.ready = True
            elif line:
                self.out.append(json.loads(line))
        self._check()

    def errReceived(self, data: bytes) -> None:
        self.err += data

    def processEnded(self, reason: Failure) -> None:
        self.exit_code = reason.value.exitCode
        self.ended = True
        self._check()

    # waiting -----------------------------------------------------------------
    def describe(self) -> str:
        return (
            f"peer {' '.join(self.args)} (exit {self.exit_code}); output {self.out!r}; "
            f"stderr:\n{self.err.decode(errors='replace')}"
        )

    def _check(self) -> None:
        for cond, d in list(self._waiters):
            if cond() or self.ended:
                self._waiters.remove((cond, d))
                if not d.called:
                    d.callback(None)

    def _wait(self, cond, what: str, timeout: float) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self._waiters.append((cond, d))
        self._check()

        def timed_out(result: object, t: float) -> Failure:
            return Failure(AssertionError(f"did not {what} within {t}s: {self.describe()}"))

        return d.addTimeout(timeout, reactor, onTimeoutCancel=timed_out)

    async def wait_ready(self, timeout: float = WAIT) -> None:
        await self._wait(lambda: self.ready, "say ready", timeout)
        if not self.ready:
            raise AssertionError(f"exited before it was ready: {self.describe()}")

    async def wait_exit(self, timeout: float = WAIT) -> list[dict]:
        """Wait for a successful exit; return the JSON objects it printed."""
        await self._wait(lambda: self.ended, "exit", timeout)
        if self.exit_code != 0:
            raise AssertionError(f"failed: {self.describe()}")
        return self.out
