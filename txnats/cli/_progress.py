"""The progress bar ``txnats bench``, ``obj put``, ``obj get`` and ``stream view`` draw
on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure

__all__ = ["Bar", "stderr_bar"]

_log = Logger()


class Bar:
    """A progress bar on a terminal, redrawn a few times a second (a
    :class:`~txnats.cli.bench.ProgressSink`).

    If drawing fails (the workload's ``current`` callback raises, say), the bar stops
    and the error is logged as a warning; the workload goes on without it.
    """

    def __init__(self, clock: IReactorTime, out: IO[str]) -> None:
        self._clock = clock
        self._out = out
        self._loop: LoopingCall | None = None
        self._draw: Callable[[], None] = lambda: None
        self._failed = False

    def begin(
        self, label: str, total: float | Callable[[], float], current: Callable[[], float],
        amount: Callable[[float, float], str] | None = None,
    ) -> None:
        """Draw the bar now and every 0.2 s: ``current()`` of ``total`` done (``total``
        may be a callable, asked at each drawing, for a total learnt on the way).
        ``amount(done, total)`` writes the figures after the bar (default: ``done/total``
        for a whole ``total``, seconds otherwise)."""
        width = 30

        def draw() -> None:
            done = current()
            whole = total() if callable(total) else total
            frac = min(1.0, done / whole) if whole else 1.0
            filled = int(frac * width)
            bar = "#" * filled + "." * (width - filled)
            if amount is not None:
                figures = amount(done, whole)
            elif isinstance(whole, int):
                figures = f"{done:,.0f}/{whole:,.0f}"
            else:
                figures = f"{done:.1f}s"
            self._out.write(f"\r{label:<11} [{bar}] {frac:6.1%} {figures}\x1b[K")
            self._out.flush()

        loop = LoopingCall(draw)
        loop.clock = self._clock
        self._loop = loop
        self._draw = draw
        self._failed = False
        loop.start(0.2, now=True).addErrback(self._drawing_failed)

    def end(self) -> None:
        """Stop redrawing; draw the bar once more (unless drawing failed) and end its line."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if loop.running:
            loop.stop()
        if not self._failed:
            try:
                self._draw()
            except Exception:
                self._drawing_failed(Failure())
        self._out.write("\n")
        self._out.flush()

    def _drawing_failed(self, failure: Failure) -> None:
        self._failed = True
        _log.failure("the progress bar stopped: drawing it failed", failure, LogLevel.warn)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def stderr_bar(clock: IReactorTime, wanted: bool, output_on_stdout: bool) -> Bar | None:
    """A bar on stderr if it is ``wanted`` and stderr is a terminal, unless the output
    goes to stdout and that is the same terminal (the bar would tangle with it);
    else None."""
    if not wanted or not _isatty(sys.stderr):
        return None
    if output_on_stdout and _isatty(sys.stdout):
        return None
    return Bar(clock, sys.stderr)
