"""The argparse pieces every command uses: the parser class (usage errors as one
line), the help formatter, the argument types and the connection flags."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn, Protocol

from txnats.cli._common import PROG
from txnats.client import DEFAULT_URL

__all__ = [
    "DATA_HELP",
    "Formatter",
    "Parser",
    "Subcommands",
    "add_command",
    "connection_flags",
    "count",
    "header",
    "positive_float",
    "positive_int",
]

DATA_HELP = (
    "the payload (default: empty); {{Count}} is replaced by the message number. "
    "With --stdin, read it from standard input instead"
)


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line: ``txnats: error: pub: ...``."""

    def error(self, message: str) -> NoReturn:
        where = self.prog[len(PROG) :].strip()
        prefix = f"{where}: " if where else ""
        hint = f"{self.prog} --help"
        self.exit(2, f"{PROG}: error: {prefix}{message} (see '{hint}')\n")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written (their examples keep their lines), flags in a column."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


class Subcommands(Protocol):
    """What :meth:`Parser.add_subparsers` returns, as far as the commands use it."""

    def add_parser(self, name: str, **kwargs: Any) -> Parser: ...


def add_command(
    commands: Subcommands, name: str, help: str, description: str, conn: Parser | None
) -> Parser:
    """Add the subcommand ``name`` to ``commands``, with the connection flags ``conn``
    unless it is None; return its parser."""
    return commands.add_parser(
        name, help=help, description=description, formatter_class=Formatter,
        parents=[conn] if conn is not None else [],
    )


def positive_int(text: str) -> int:
    """An integer of at least 1 (``_`` allowed between digits)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def count(text: str) -> int:
    """An integer of at least 0 (``_`` allowed between digits)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def positive_float(text: str) -> float:
    """A number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def header(text: str) -> tuple[str, str]:
    """A header given as ``NAME:VALUE``, both stripped."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"a header is NAME:VALUE, not {text!r}")
    return name.strip(), value.strip()


def connection_flags() -> Parser:
    """The flags shared by every client command."""
    parent = Parser(add_help=False)
    g = parent.add_argument_group("connection")
    g.add_argument(
        "-s", "--server", action="append", metavar="URL",
        help="server URL, repeatable or comma-separated "
        f"(default: $NATS_URL or {DEFAULT_URL})",
    )
    g.add_argument("--user", help="user name")
    g.add_argument("--password", help="password (for --user)")
    g.add_argument("--token", help="authentication token")
    g.add_argument("--creds", metavar="FILE", help="user credentials (JWT and NKey seed) file")
    g.add_argument("--nkey", metavar="FILE", help="NKey seed file")
    g.add_argument("--tls-ca", metavar="FILE", help="CA certificates to verify the server")
    g.add_argument("--tls-cert", metavar="FILE", help="client certificate (PEM)")
    g.add_argument("--tls-key", metavar="FILE", help="client private key (PEM)")
    g.add_argument("--name", default="txnats-cli", help="connection name (default: %(default)s)")
    g.add_argument(
        "--connect-timeout", type=positive_float, default=2.0, metavar="SECS",
        help="seconds to wait for each connection attempt (default: %(default)s)",
    )
    g.add_argument("-v", "--verbose", action="store_true", help="log the client's activity")
    return parent
