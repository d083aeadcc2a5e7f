"""What the commands share: the error a command reports, status lines, and the
connection flags turned into a connected client."""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
from typing import Any, NoReturn

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats._connect import connect
from txnats._version import __version__
from txnats.client import DEFAULT_URL, Client

__all__ = [
    "PROG",
    "CLIError",
    "connect_kwargs",
    "connect_to",
    "duration",
    "fail",
    "one_line",
    "servers",
    "sleep",
    "status",
]

PROG = "txnats"

#: Connection flags that need support in txnats.connect: the flag, its dest, and the
#: keyword names (each taking a file path) connect() may call it; the first one found
#: in its signature is used, and without any the flag is refused as not supported yet.
_OPTIONAL_FLAGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("--creds", "creds", ("user_credentials", "creds_file", "credentials_file")),
    ("--nkey", "nkey", ("nkeys_seed_file", "nkey_seed_file", "nkey_file")),
    ("--tls-ca", "tls_ca", ("tls_ca_file", "tls_cafile", "tls_ca")),
    ("--tls-cert", "tls_cert", ("tls_cert_file", "tls_certfile", "tls_cert")),
    ("--tls-key", "tls_key", ("tls_key_file", "tls_keyfile", "tls_key")),
)


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


def servers(args: argparse.Namespace) -> list[str]:
    """The server URLs: ``--server`` (repeated or comma-separated), else $NATS_URL."""
    given: list[str] = args.server or [os.environ.get("NATS_URL") or DEFAULT_URL]
    urls = [u.strip() for item in given for u in item.split(",") if u.strip()]
    if not urls:
        fail("--server: no server URL given", 2)
    return urls


def connect_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for txnats.connect from the connection flags."""
    kwargs: dict[str, Any] = {"name": args.name, "connect_timeout": args.connect_timeout}
    if args.user is not None:
        kwargs["user"] = args.user
        kwargs["password"] = args.password or ""
    elif args.password is not None:
        fail("--password needs --user", 2)
    if args.token is not None:
        kwargs["token"] = args.token
    params = inspect.signature(connect).parameters
    for flag, dest, names in _OPTIONAL_FLAGS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        keyword = next((n for n in names if n in params), None)
        if keyword is None:
            fail(f"{flag} is not supported yet by this version of txnats ({__version__})")
        if not os.path.isfile(value):
            fail(f"{flag}: no such file: {value}")
        kwargs[keyword] = value
    return kwargs


async def connect_to(reactor: IReactorCore, args: argparse.Namespace) -> Client:
    """A client connected as the connection flags say."""
    return await connect(reactor, servers(args), **connect_kwargs(args))
