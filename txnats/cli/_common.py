"""What the commands share: the error a command reports, status lines, durations.
(``_connection`` turns the connection flags into a connected client.)"""

from __future__ import annotations

import re
import sys
from typing import NoReturn, cast

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorThreads, IReactorTime
from twisted.internet.threads import deferToThreadPool

__all__ = [
    "PROG",
    "CLIError",
    "confirm",
    "duration",
    "fail",
    "on_terminal",
    "one_line",
    "sleep",
    "status",
]

PROG = "txnats"


class CLIError(Exception):
    """A failure to report as one line, with an exit status (1 unless said)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def fail(message: str, status: int = 1) -> NoReturn:
    """Stop the command with ``message`` and exit status ``status``.

    :raises CLIError: always.
    """
    raise CLIError(message, status)


def status(text: str) -> None:
    """Print a status line on stderr (stdout is for what the command outputs)."""
    print(text, file=sys.stderr, flush=True)


def one_line(error: BaseException) -> str:
    """The error as one line. A nats-server start failure quotes the server's log: keep
    its first line and the log's own error line."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    head = lines[0]
    if head.endswith("Last log lines:"):
        head = head[: -len("Last log lines:")].rstrip().rstrip(".")
        fatal = [line for line in lines[1:] if "[FTL]" in line or "[ERR]" in line]
        if fatal:
            head += ": " + re.split(r"\[(?:FTL|ERR)\] ", fatal[-1])[-1]
    return head


def duration(seconds: float) -> str:
    """``seconds`` for people: µs, ms or s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f}ms"
    return f"{seconds:.2f}s"


def sleep(clock: IReactorTime, seconds: float) -> Deferred[None]:
    """A Deferred that fires with None after ``seconds``."""
    d: Deferred[None] = Deferred()
    clock.callLater(seconds, d.callback, None)
    return d


def on_terminal() -> bool:
    """Standard input and output are both a terminal (a person is there to answer)."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


async def confirm(reactor: object, question: str, force: bool) -> bool:
    """Whether to go on: True with ``force``, else the answer of the person at the
    terminal to ``question`` (asked on stderr; yes or no, no by default), read in
    ``reactor``'s thread pool.

    :raises CLIError: without ``force`` and without a terminal to ask at.
    """
    if force:
        return True
    if not on_terminal():
        fail(f"{question}? cannot ask without a terminal: give --force")

    def ask() -> str:
        sys.stderr.write(f"{question}? [y/N] ")
        sys.stderr.flush()
        return sys.stdin.readline()

    threads = cast(IReactorThreads, reactor)
    answer: str = await deferToThreadPool(threads, threads.getThreadPool(), ask)
    return answer.strip().lower() in ("y", "yes")
