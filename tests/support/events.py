"""Recorders: a client's callbacks with their times, and the failures logged meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import globalLogPublisher

from .waits import reactor

__all__ = ["ClientEvents", "FailureLog"]


class ClientEvents:
    """Records a client's callbacks with reactor timestamps; awaitable per kind."""

    KINDS = ("disconnected", "reconnected", "closed", "lame_duck", "error")

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {k: [] for k in self.KINDS}
        self.errors: list[Exception] = []
        self.disconnect_reasons: list[Exception] = []
        self._waiters: dict[str, list[tuple[int, Deferred[float]]]] = {k: [] for k in self.KINDS}
        #: Extra hooks run on reconnection (before waiters fire).
        self.on_reconnected: list[Callable[[], None]] = []

    def _record(self, kind: str) -> None:
        now = float(reactor.seconds())
        self.times[kind].append(now)
        n = len(self.times[kind])
        ready = [d for (k, d) in self._waiters[kind] if k <= n]
        self._waiters[kind] = [(k, d) for (k, d) in self._waiters[kind] if k > n]
        for d in ready:
            d.callback(now)

    def count(self, kind: str) -> int:
        return len(self.times[kind])

    def wait(self, kind: str, nth: int | None = None) -> Deferred[float]:
        """Fires with the time of the ``nth`` event of ``kind`` (default: the next one)."""
        n = self.count(kind) + 1 if nth is None else nth
        if self.count(kind) >= n:
            d: Deferred[float] = Deferred()
            d.callback(self.times[kind][n - 1])
            return d
        d = Deferred()
        self._waiters[kind].append((n, d))
        return d

    def callbacks(self) -> dict[str, Any]:
        """The client options (``disconnected_cb`` ...) that record into this object."""

        def disconnected(err: Exception) -> None:
            self.disconnect_reasons.append(err)
            self._record("disconnected")

        def reconnected() -> None:
            for hook in self.on_reconnected:
                hook()
            self._record("reconnected")

        def error(err: Exception) -> None:
            self.errors.append(err)
            self._record("error")

        return {
            "disconnected_cb": disconnected,
            "reconnected_cb": reconnected,
            "closed_cb": lambda: self._record("closed"),
            "lame_duck_cb": lambda: self._record("lame_duck"),
            "error_cb": error,
        }


class FailureLog:
    """Collects every logged failure and error-level event while installed."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        level = event.get("log_level")
        if "log_failure" in event or (level is not None and level.name in ("error", "critical")):
            self.events.append(event)

    def install(self) -> Callable[[], None]:
        """Observe the global log publisher; return the function that stops it."""
        globalLogPublisher.addObserver(self)
        return lambda: globalLogPublisher.removeObserver(self)
