"""The ``txnats`` command line: ``pub``, ``sub``, ``req``, ``reply``, ``server``, ``bench``.

In the spirit of the ``nats`` CLI::

    txnats server                                  # an embedded nats-server on :4222
    txnats sub 'greet.*'                           # print every message
    txnats pub greet.joe hello --count 3 -H X-Trace:1
    txnats reply svc.echo                          # echo every request back
    txnats req svc.echo hi --timeout 2
    txnats micro ls                                # the services (ADR-32) that answer
    txnats bench pubsub --msgs 200000 --size 128   # starts its own server

Every client command takes the connection flags (``--server/-s`` and credentials).
Status lines go to stderr and message contents to stdout, so output can be piped.
Errors are one line on stderr, ``txnats: error: ...``; the exit status is 2 for a
usage error and 1 for any other failure.

This module runs a command (:func:`main`); ``_parser`` builds the command line from
the flags each command's module adds (``_cmd_messages``: pub, sub, req, reply;
``_cmd_server``; ``_cmd_bench``), ``_flags`` holds the argparse pieces they share and
``_common`` the rest; ``_progress`` is ``bench``'s progress bar and :mod:`txnats.cli.bench`
the benchmark workloads.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.interfaces import IReactorCore
from twisted.internet.task import react
from twisted.logger import (
    FilteringLogObserver,
    ILogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    formatEvent,
    globalLogBeginner,
    textFileLogObserver,
)
from zope.interface import provider

from txnats.cli._cmd_bench import run_bench, start_bench_server
from txnats.cli._cmd_messages import run_pub, run_reply, run_req, run_sub
from txnats.cli._cmd_micro import run_micro
from txnats.cli._cmd_server import run_server, start_server
from txnats.cli._common import PROG, CLIError, one_line, status
from txnats.cli._parser import build_parser
from txnats.errors import NatsError

__all__ = ["CLIError", "build_parser", "main"]

#: What runs each command; ``server`` and ``bench`` also take what :func:`main`
#: started for them before the reactor ran (the server, the URL of bench's server).
_COMMANDS: dict[str, Callable[..., Any]] = {
    "pub": run_pub,
    "sub": run_sub,
    "req": run_req,
    "reply": run_reply,
    "server": run_server,
    "bench": run_bench,
    "micro": run_micro,
}


@provider(ILogObserver)
def _one_line_warnings(event: dict[str, Any]) -> None:
    """Warnings and errors the library logs, one line each (a traceback only for a
    failure, which is a bug: errors users cause are reported without one)."""
    text = formatEvent(event)
    if text:
        level = event.get("log_level", LogLevel.warn)
        status(f"{PROG}: {level.name}: {text.splitlines()[0]}")
    failure = event.get("log_failure")
    if failure is not None and not isinstance(failure.value, NatsError):
        status(failure.getTraceback().rstrip())


def _begin_logging(verbose: bool) -> None:
    if verbose:
        observer: ILogObserver = textFileLogObserver(sys.stderr)
    else:
        observer = FilteringLogObserver(
            _one_line_warnings, [LogLevelFilterPredicate(LogLevel.warn)]
        )
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)


async def _guarded(reactor: IReactorCore, args: argparse.Namespace, extra: Any) -> int:
    """Run the command; report the errors users cause as one line; return the status."""
    fn = _COMMANDS[args.command]
    try:
        if args.command in ("server", "bench"):
            code: int = await fn(reactor, args, extra)
        else:
            code = await fn(reactor, args)
    except CLIError as e:
        status(f"{PROG}: error: {e}")
        return e.status
    except (NatsError, OSError, ValueError) as e:
        status(f"{PROG}: error: {one_line(e)}")
        return 1
    except CancelledError:
        # Ctrl-C (or SIGTERM): the command has cleaned up. Commands that run until
        # interrupted end normally; any other was cut short.
        forever = args.command == "server" or (
            args.command in ("sub", "reply") and args.count is None
        )
        if forever:
            return 0
        status(f"{PROG}: interrupted")
        return 130
    return code


async def _run(reactor: IReactorCore, args: argparse.Namespace, extra: Any) -> None:
    work = ensureDeferred(_guarded(reactor, args, extra))

    def interrupted() -> Deferred[None] | None:
        """The reactor is stopping (a signal): cancel the command and let it clean up
        (close its connections) before the reactor goes on to shut down."""
        if work.called:
            return None
        cleaned: Deferred[None] = Deferred()

        def done(result: object) -> object:
            cleaned.callback(None)
            return result

        work.addBoth(done)
        work.cancel()
        return cleaned

    reactor.addSystemEventTrigger("before", "shutdown", interrupted)
    raise SystemExit(await work)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line (the ``txnats`` console script and ``python -m txnats``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    server: Any = None
    try:
        _begin_logging(getattr(args, "verbose", False))
        extra: Any = None
        if args.command == "server":
            server = extra = start_server(args)
        elif args.command == "bench":
            if args.server is None and not os.environ.get("NATS_URL"):
                server = start_bench_server()
                extra = server.url
        react(_run, (args, extra))
    except CLIError as e:
        status(f"{PROG}: error: {e}")
        sys.exit(e.status)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # ServerStartError and kin, before the reactor ran
        status(f"{PROG}: error: {one_line(e)}")
        sys.exit(1)
    finally:
        if server is not None:
            if args.command == "server" and getattr(args, "verbose", False):
                for line in server.log_lines:
                    status(line)
            server.stop()
