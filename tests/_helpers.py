"""Small helpers shared by the integration tests: bounded waits, temp files, free ports."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor as _reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial import unittest

reactor: Any = _reactor

#: The longest any single wait may take.
WAIT = 5.0


def bounded(d: Deferred[Any], seconds: float = WAIT) -> Deferred[Any]:
    """``d``, failing with a timeout after ``seconds``."""
    return d.addTimeout(seconds, reactor)


async def sleep(seconds: float) -> None:
    await deferLater(reactor, seconds, lambda: None)


async def wait_until(pred: Callable[[], bool], seconds: float = WAIT) -> None:
    """Poll ``pred`` (for state outside this process) every 10 ms; fail after ``seconds``."""
    deadline = reactor.seconds() + seconds
    while not pred():
        if reactor.seconds() > deadline:
            raise AssertionError(f"condition not met within {seconds}s")
        await sleep(0.01)


def temp_file(case: unittest.TestCase, name: str = "file") -> str:
    """A path in a fresh temporary directory removed after the test (not under cwd)."""
    directory = tempfile.mkdtemp(prefix="txnats-test-")
    case.addCleanup(shutil.rmtree, directory, True)
    return os.path.join(directory, name)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_file(directory: str, name: str, data: bytes) -> str:
    """Write ``data`` to ``directory/name``; return the path."""
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return path
