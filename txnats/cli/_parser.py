"""The whole command line: the program's parser, with each command's flags added by
the command's own module."""

from __future__ import annotations

import argparse

from txnats._version import __version__
from txnats.cli._cmd_account import add_account
from txnats.cli._cmd_bench import add_bench
from txnats.cli._cmd_consumer import add_consumer
from txnats.cli._cmd_context import add_context
from txnats.cli._cmd_kv import add_kv
from txnats.cli._cmd_messages import add_pub, add_reply, add_req, add_sub
from txnats.cli._cmd_micro import add_micro
from txnats.cli._cmd_obj import add_obj
from txnats.cli._cmd_server import add_server
from txnats.cli._cmd_stream import add_stream
from txnats.cli._common import PROG
from txnats.cli._flags import Formatter, Parser, connection_flags, jetstream_flags

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    conn = connection_flags()
    js = jetstream_flags()
    parser = Parser(
        prog=PROG,
        description="A NATS command line built on txnats (the NATS client for Twisted).",
        epilog=(
            "Run 'txnats COMMAND --help' for the flags of each command.\n"
            "Environment: NATS_URL is the default server, NATS_CONTEXT the default\n"
            "context (see 'txnats context')."
        ),
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"txnats {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    add_pub(commands, conn)
    add_sub(commands, conn)
    add_req(commands, conn)
    add_reply(commands, conn)
    add_server(commands)
    add_micro(commands, conn)
    add_bench(commands, conn)
    add_stream(commands, js)
    add_consumer(commands, js)
    add_kv(commands, js)
    add_obj(commands, js)
    add_account(commands, js)
    add_context(commands)
    return parser
