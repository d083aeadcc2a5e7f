"""The argparse pieces every command uses: the parser class (usage errors as one
line), the help formatter, the argument types and the connection flags."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

from txnats.cli._common import PROG
from txnats.client import DEFAULT_URL

__all__ = [
    "DATA_HELP",
    "Formatter",
    "Parser",
    "Subcommands",
    "add_command",
    "add_verb",
    "add_verbs",
    "connection_flags",
    "count",
    "duration",
    "header",
    "jetstream_flags",
    "key_value",
    "positive_float",
    "positive_int",
    "size",
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
    commands: Subcommands, name: str, help: str, description: str, conn: Parser | None,
    aliases: Sequence[str] = (),
) -> Parser:
    """Add the subcommand ``name`` (also called ``aliases``) to ``commands``, with the
    connection flags ``conn`` unless it is None; return its parser."""
    return commands.add_parser(
        name, help=help, description=description, formatter_class=Formatter,
        parents=[conn] if conn is not None else [], aliases=list(aliases),
    )


def add_verb(
    verbs: Subcommands, name: str, run: Any, help: str, description: str, conn: Parser,
    aliases: Sequence[str] = (),
) -> Parser:
    """Add verb ``name`` of a JetStream command, run by ``run(reactor, js, args)``
    (see :func:`txnats.cli._connection.run_verb`); return its parser."""
    v = add_command(verbs, name, help, description, conn, aliases)
    v.set_defaults(verb=run, verb_name=name)
    return v


def add_verbs(p: Parser, dest: str) -> Subcommands:
    """The verbs (``ls``, ``info``, ...) of command ``p``: one must be given."""
    verbs = p.add_subparsers(dest=dest, metavar="VERB", parser_class=Parser)
    verbs.required = True
    return verbs


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


def connection_flags(name_flag: bool = True) -> Parser:
    """The flags shared by every client command (``--name`` among them unless
    ``name_flag`` is false: the JetStream commands have ``--connection-name`` only,
    as ``nats`` has, since some of them have a ``--name`` of their own)."""
    parent = Parser(add_help=False)
    g = parent.add_argument_group("connection")
    g.add_argument(
        "-s", "--server", action="append", metavar="URL",
        help="server URL, repeatable or comma-separated "
        f"(default: $NATS_URL, else the context's, else {DEFAULT_URL})",
    )
    g.add_argument(
        "--context", metavar="NAME",
        help="the configuration context (a name, or a .json file) to connect with "
        "(default: $NATS_CONTEXT, else the selected one; see 'txnats context')",
    )
    g.add_argument("--no-context", action="store_true", help="use no context")
    g.add_argument("--user", help="user name ($NATS_USER)")
    g.add_argument("--password", help="password, for --user ($NATS_PASSWORD)")
    g.add_argument("--token", help="authentication token ($NATS_TOKEN)")
    g.add_argument("--creds", metavar="FILE",
                   help="user credentials (JWT and NKey seed) file ($NATS_CREDS)")
    g.add_argument("--nkey", metavar="FILE", help="NKey seed file ($NATS_NKEY)")
    g.add_argument("--tls-ca", "--tlsca", metavar="FILE", dest="tls_ca",
                   help="CA certificates to verify the server ($NATS_CA)")
    g.add_argument("--tls-cert", "--tlscert", metavar="FILE", dest="tls_cert",
                   help="client certificate, PEM ($NATS_CERT)")
    g.add_argument("--tls-key", "--tlskey", metavar="FILE", dest="tls_key",
                   help="client private key, PEM ($NATS_KEY)")
    g.add_argument("--tls-first", "--tlsfirst", action="store_true", dest="tls_first",
                   default=None, help="start TLS before the server's greeting")
    g.add_argument("--inbox-prefix", metavar="PREFIX", help="the prefix of reply inboxes")
    names = ["--name", "--connection-name"] if name_flag else ["--connection-name"]
    g.add_argument(*names, dest="connection_name", default="txnats-cli", metavar="NAME",
                   help="connection name (default: %(default)s)")
    g.add_argument(
        "--connect-timeout", type=positive_float, default=2.0, metavar="SECS",
        help="seconds to wait for each connection attempt (default: %(default)s)",
    )
    g.add_argument("-v", "--verbose", action="store_true", help="log the client's activity")
    return parent


def jetstream_flags() -> Parser:
    """The connection flags of the JetStream commands: those of every client
    command (without ``--name``), the JetStream domain or API prefix, and the time
    each JetStream API request may take."""
    parent = Parser(add_help=False, parents=[connection_flags(name_flag=False)])
    g = parent.add_argument_group("jetstream")
    g.add_argument("--js-domain", metavar="DOMAIN", help="the JetStream domain to use")
    g.add_argument("--js-api-prefix", metavar="PREFIX",
                   help="the subject prefix of an imported JetStream API")
    g.add_argument(
        "--timeout", type=positive_float, default=5.0, metavar="SECS",
        help="seconds each JetStream request may take (default: %(default)s)",
    )
    return parent


# ====================================================================== natscli's units
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w|M|y)")
_SECONDS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
    "d": 86400.0, "w": 7 * 86400.0, "M": 30 * 86400.0, "y": 365 * 86400.0,
}


def duration(text: str) -> float:
    """A duration as ``nats`` takes them (``90s``, ``1h30m``, ``1d3h5m2s``, ``500ms``;
    ``d`` days, ``w`` weeks, ``M`` months of 30 days, ``y`` years of 365), or a plain
    number of seconds; in seconds, 0 or more."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pos, value = 0, 0.0
        for m in _DURATION.finditer(text):
            if m.start() != pos:
                break
            value += float(m.group(1)) * _SECONDS[m.group(2)]
            pos = m.end()
        if pos != len(text) or not text:
            raise argparse.ArgumentTypeError(
                f"not a duration: {text!r} (say 90s, 1h30m, 2d or a number of seconds)"
            ) from None
    if value < 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
    return value


_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([kmgtp]?)(i?)b?", re.IGNORECASE)


def size(text: str) -> int:
    """A size in bytes as ``nats`` takes them: ``1024``, ``1K`` or ``1KB`` (1000),
    ``1KiB`` (1024), and M, G, T, P likewise; ``-1`` for no limit."""
    if text.strip() == "-1":
        return -1
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (say 1024, 10MB or 1GiB)")
    power = "kmgtp".find(m.group(2).lower()) + 1 if m.group(2) else 0
    base = 1024 if m.group(3) else 1000
    return int(float(m.group(1)) * base**power)


def key_value(text: str) -> tuple[str, str]:
    """A ``KEY=VALUE`` pair (metadata)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"give KEY=VALUE, not {text!r}")
    return key, value
