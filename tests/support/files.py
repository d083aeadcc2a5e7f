"""Temporary files and free loopback ports."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile

from twisted.trial import unittest

__all__ = ["free_port", "temp_file", "write_file"]


def temp_file(case: unittest.TestCase, name: str = "file") -> str:
    """A path in a fresh temporary directory removed after the test (not under cwd)."""
    directory = tempfile.mkdtemp(prefix="txnats-test-")
    case.addCleanup(shutil.rmtree, directory, True)
    return os.path.join(directory, name)


def free_port() -> int:
    """A loopback port where nothing listens (bound, then released)."""
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
